//! One vCenter's calls: SOAP at `/sdk` (a `vmware_soap_session` cookie from `Login`,
//! logged in again when vSphere says the session is gone) and the tagging REST API at
//! `/rest` (a `vmware-api-session-id` from basic authentication, renewed after a 401).
//! Sessions are shared by concurrent lookups; the password is only ever in a request,
//! and neither it nor a session (the cookie's value, the REST session ID) is ever in an
//! error: every piece of vSphere's text is cleaned of the password and of the last
//! sessions this client was given.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, COOKIE, HeaderValue, SET_COOKIE};
use secrecy::{ExposeSecret, SecretString};
use tokio::sync::Mutex;
use url::Url;

use super::VsphereError;
use super::placement::{HostLabels, labels_of};
use super::soap::{self, DatastoreMounts, Entity, MoRef, Page, Parsed, ServiceContent};
use super::tagging;
use crate::api::CallErrorKind;

/// A tagging (REST) answer: the tags of a datastore's hosts and their ancestors (about
/// 150 bytes an object) fit many times over. SOAP answers: [`soap::MAX_ANSWER_BYTES`].
const MAX_REST_ANSWER: usize = 1 << 20;
/// How many vCenter answers the process reads and parses at once, over all clients:
/// each holds its bytes (at most [`soap::MAX_ANSWER_BYTES`]) and roxmltree's tree of
/// them (a few times that), so this bounds their memory; SOAP answers are parsed on
/// a blocking thread, so that no answer holds an async worker (reviews that need no
/// lookup go on). A lookup waiting here waits within its deadline.
pub const PARSE_CONCURRENCY: usize = 2;
static PARSING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(PARSE_CONCURRENCY);
/// How many retrievals (all the pages of one `RetrievePropertiesEx`) the process runs
/// at once: each may keep up to [`soap::MAX_ITEMS`] items (100 to 250 bytes each)
/// from page to page, so this bounds their memory. A lookup waiting here waits within
/// its deadline.
pub const RETRIEVAL_CONCURRENCY: usize = 2;
static RETRIEVALS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(RETRIEVAL_CONCURRENCY);
/// vSphere 6.5's API: the first with `VcenterVStorageObjectManager`, answered by every
/// vCenter the CSI driver supports.
const SOAP_ACTION: &str = "urn:vim25/6.5";
const SESSION_COOKIE: &str = "vmware_soap_session";
/// How many of the sessions this client was given are cut from error texts: the
/// current SOAP and REST ones and a few replaced ones, which vSphere may still echo.
const KEPT_SESSIONS: usize = 8;

/// How vCenter's certificate is checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trust {
    /// The system's roots (as every other outbound call).
    System,
    /// Only the CAs of this PEM bundle (`ca-file`).
    CaFile(PathBuf),
    /// Not checked: `insecure-flag`, and the caller allowed it.
    Insecure,
}

struct SoapSession {
    cookie: SecretString,
    content: ServiceContent,
}

/// A client of one vCenter.
pub struct VcenterClient {
    http: reqwest::Client,
    base: Url,
    user: String,
    password: SecretString,
    soap: Mutex<Option<Arc<SoapSession>>>,
    rest: Mutex<Option<Arc<SecretString>>>,
    /// The last [`KEPT_SESSIONS`] session secrets (SOAP cookie values, REST session
    /// IDs), cut from every error text with the password.
    sessions: std::sync::Mutex<VecDeque<SecretString>>,
}

impl std::fmt::Debug for VcenterClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VcenterClient")
            .field("base", &self.base.as_str())
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

impl VcenterClient {
    /// A client of the vCenter at `base` (`https://host:port/`, or plain http on
    /// loopback), logging in as `user`; each call must end within `timeout`.
    pub fn new(
        base: Url,
        user: String,
        password: SecretString,
        trust: &Trust,
        timeout: Duration,
    ) -> Result<Self, VsphereError> {
        let endpoint = base.to_string();
        let setup = |reason: String| VsphereError::Setup {
            endpoint: endpoint.clone(),
            reason,
        };
        let user_agent = concat!("cloud-node-suite-vsphere/", env!("CARGO_PKG_VERSION"));
        let trust = match trust {
            Trust::System => crate::http::Trust::System,
            Trust::CaFile(path) => {
                crate::http::Trust::Roots(crate::http::read_ca_file(path).map_err(|e| setup(format!("ca-file: {e}")))?)
            }
            Trust::Insecure => crate::http::Trust::Insecure,
        };
        let http = crate::http::http_client_trusting(user_agent, timeout, trust).map_err(|e| setup(e.to_string()))?;
        Ok(Self {
            http,
            base,
            user,
            password,
            soap: Mutex::new(None),
            rest: Mutex::new(None),
            sessions: std::sync::Mutex::new(VecDeque::with_capacity(KEPT_SESSIONS)),
        })
    }

    /// The vCenter, as errors name it.
    pub fn endpoint(&self) -> &str {
        self.base.as_str()
    }

    fn url(&self, path: &str) -> Url {
        let mut url = self.base.clone();
        let (path, query) = path.split_once('?').unwrap_or((path, ""));
        url.set_path(path);
        url.set_query((!query.is_empty()).then_some(query));
        url
    }

    /// `text` (vSphere's, or a transport error's) fit for an error: without the
    /// password or any session this client was given, one line, bounded. The
    /// password is cut in every form it was sent in: the encodings
    /// [`crate::logging::redact`] knows, XML-escaped as `Login`'s body has it, and
    /// the whole `Basic` credential (base64 of `user:password`) of the REST login.
    fn clean(&self, text: &str) -> String {
        let password = self.password.expose_secret();
        let escaped = SecretString::from(soap::escape(password));
        let pair = SecretString::from(format!("{}:{password}", self.user));
        let basic = SecretString::from(base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            pair.expose_secret(),
        ));
        let sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        let mut secrets = Vec::with_capacity(sessions.len() + 3);
        secrets.extend([password, escaped.expose_secret(), basic.expose_secret()]);
        secrets.extend(sessions.iter().map(ExposeSecret::expose_secret));
        crate::logging::clean_text(text, &secrets, 500)
    }

    /// Keeps a session secret to cut from error texts from now on.
    fn remember(&self, secret: &str) {
        let secret = secret.trim().trim_matches('"');
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        if sessions.len() >= KEPT_SESSIONS {
            sessions.pop_front();
        }
        sessions.push_back(SecretString::from(secret.to_owned()));
    }

    fn transport(&self, call: &'static str, error: &(dyn std::error::Error + 'static)) -> VsphereError {
        let timeout = match error.downcast_ref::<crate::http::BodyError>() {
            Some(crate::http::BodyError::Transport(error)) => error.is_timeout(),
            _ => error
                .downcast_ref::<reqwest::Error>()
                .is_some_and(reqwest::Error::is_timeout),
        };
        let reason = self.clean(&crate::logging::error_chain(error));
        VsphereError::call(self.endpoint(), call, CallErrorKind::Transport { reason, timeout })
    }

    /// `call` answered `status`, an error, saying `text` (cleaned).
    fn refused(&self, call: &'static str, status: reqwest::StatusCode, text: String) -> VsphereError {
        let status = status.as_u16();
        VsphereError::call(self.endpoint(), call, CallErrorKind::Api { status, detail: text })
    }

    /// An answer to `call` we cannot use, for `problem` (cleaned).
    fn garbage(&self, call: &'static str, problem: impl Into<String>) -> VsphereError {
        let problem = problem.into();
        VsphereError::call(self.endpoint(), call, CallErrorKind::Garbage { problem })
    }

    fn parsed(&self, call: &'static str, parsed: Parsed) -> VsphereError {
        let endpoint = self.endpoint().to_owned();
        match parsed {
            Parsed::Fault(fault) => VsphereError::Fault {
                endpoint,
                call,
                kind: fault.kind,
                text: self.clean(&fault.text),
            },
            Parsed::Garbage(reason) => self.garbage(call, self.clean(&reason)),
        }
    }

    /// One SOAP request: its answer (faults come with HTTP 500) as `parse` reads it, on
    /// a blocking thread holding one of [`PARSE_CONCURRENCY`] places from the first
    /// byte of the body read to the end of parsing; and the session cookie it set, if any.
    async fn post_soap<T: Send + 'static>(
        &self,
        call: &'static str,
        cookie: Option<&SecretString>,
        body: String,
        parse: fn(&str) -> Result<T, Parsed>,
    ) -> Result<(Result<T, Parsed>, Option<SecretString>), VsphereError> {
        let mut request = self
            .http
            .post(self.url("sdk"))
            .header(CONTENT_TYPE, "text/xml; charset=utf-8")
            .header("SOAPAction", SOAP_ACTION)
            .body(body);
        if let Some(cookie) = cookie {
            let mut value = HeaderValue::from_str(cookie.expose_secret()).map_err(|e| self.transport(call, &e))?;
            value.set_sensitive(true);
            request = request.header(COOKIE, value);
        }
        let response = request.send().await.map_err(|e| self.transport(call, &e))?;
        let status = response.status();
        let set_cookie = response
            .headers()
            .get_all(SET_COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .filter_map(|v| v.split(';').next())
            .find(|v| v.trim_start().starts_with(&format!("{SESSION_COOKIE}=")))
            .map(|v| SecretString::from(v.trim().to_owned()));
        if let Some(cookie) = &set_cookie {
            let value = cookie.expose_secret();
            self.remember(value.split_once('=').map_or(value, |(_, value)| value));
        }
        // Never closed: `None` would only mean no place to wait for.
        let permit = PARSING.acquire().await.ok();
        let body = crate::http::read_body(response, soap::MAX_ANSWER_BYTES)
            .await
            .map_err(|e| self.transport(call, &e))?;
        if !(status.is_success() || status == reqwest::StatusCode::INTERNAL_SERVER_ERROR) {
            let detail = self.clean(&String::from_utf8_lossy(&body));
            return Err(self.refused(call, status, detail));
        }
        let parsed = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let text = String::from_utf8(body).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
            parse(&text)
        })
        .await
        .unwrap_or_else(|e| Err(Parsed::Garbage(format!("parsing the answer failed: {e}"))));
        Ok((parsed, set_cookie))
    }

    async fn soap_session(&self) -> Result<Arc<SoapSession>, VsphereError> {
        let mut slot = self.soap.lock().await;
        if let Some(session) = slot.as_ref() {
            return Ok(session.clone());
        }
        let call = "RetrieveServiceContent";
        let (content, _) = self
            .post_soap(
                call,
                None,
                soap::retrieve_service_content(),
                soap::parse_service_content,
            )
            .await?;
        let content = content.map_err(|p| self.parsed(call, p))?;
        let body = soap::login(&content.session_manager, &self.user, self.password.expose_secret());
        let (login, cookie) = self.post_soap("Login", None, body, soap::parse_ok).await?;
        match login {
            Ok(()) => {}
            Err(Parsed::Fault(fault)) => {
                return Err(VsphereError::LoginRefused {
                    endpoint: self.endpoint().to_owned(),
                    user: self.user.clone(),
                    text: self.clean(&fault.text),
                });
            }
            Err(garbage) => return Err(self.parsed("Login", garbage)),
        }
        let cookie =
            cookie.ok_or_else(|| self.garbage("Login", format!("no {SESSION_COOKIE} cookie in the answer")))?;
        let session = Arc::new(SoapSession { cookie, content });
        *slot = Some(session.clone());
        Ok(session)
    }

    async fn forget_soap(&self, stale: &Arc<SoapSession>) {
        let mut slot = self.soap.lock().await;
        if slot.as_ref().is_some_and(|s| Arc::ptr_eq(s, stale)) {
            *slot = None;
        }
    }

    /// A SOAP call in the session (logging in first, and again once if vSphere says
    /// the session is gone).
    async fn soap<T: Send + 'static>(
        &self,
        call: &'static str,
        make: impl Fn(&ServiceContent) -> String,
        parse: fn(&str) -> Result<T, Parsed>,
    ) -> Result<T, VsphereError> {
        let mut retried = false;
        loop {
            let session = self.soap_session().await?;
            let (parsed, _) = self
                .post_soap(call, Some(&session.cookie), make(&session.content), parse)
                .await?;
            match parsed {
                Ok(value) => return Ok(value),
                Err(Parsed::Fault(fault)) if fault.is_not_authenticated() && !retried => {
                    retried = true;
                    self.forget_soap(&session).await;
                }
                Err(parsed) => return Err(self.parsed(call, parsed)),
            }
        }
    }

    /// The items of every page of a `RetrievePropertiesEx` that `keep` keeps, within
    /// [`soap::Paging`]'s caps (on pages, and on the items kept), holding one of
    /// [`RETRIEVAL_CONCURRENCY`] places throughout.
    async fn retrieve_all<T: soap::Held + Send + 'static>(
        &self,
        make: impl Fn(&ServiceContent) -> String,
        parse: fn(&str) -> Result<Page<T>, Parsed>,
        keep: impl Fn(&T) -> bool,
    ) -> Result<Vec<T>, VsphereError> {
        // Never closed: `None` would only mean no place to wait for.
        let _place = RETRIEVALS.acquire().await.ok();
        let mut call = "RetrievePropertiesEx";
        let mut paging = soap::Paging::default();
        let mut page = self.soap(call, make, parse).await?;
        let mut items = Vec::new();
        loop {
            let kept: Vec<T> = page.items.drain(..).filter(|item| keep(item)).collect();
            let held = kept.iter().map(soap::Held::held).sum();
            let token = paging.next(held, page.token.take()).map_err(|p| self.parsed(call, p))?;
            items.extend(kept);
            let Some(token) = token else { return Ok(items) };
            call = "ContinueRetrievePropertiesEx";
            let next = |c: &ServiceContent| soap::continue_retrieve(&c.property_collector, &token);
            page = self.soap(call, next, parse).await?;
        }
    }

    /// The datastore named `name` and the hosts that mount it.
    pub async fn datastore(&self, name: &str) -> Result<DatastoreMounts, VsphereError> {
        let mut found = self.datastores(|d| d.name == name).await?;
        match found.len() {
            0 => Err(VsphereError::DatastoreNotFound {
                endpoint: self.endpoint().to_owned(),
                name: name.to_owned(),
            }),
            1 => Ok(found.remove(0)),
            _ => Err(self.garbage(
                "RetrievePropertiesEx",
                format!(
                    "several datastores are named {name:?} ({}): a volume path cannot say which",
                    found
                        .iter()
                        .map(|d| d.datastore.value.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )),
        }
    }

    /// The datastores `keep` keeps, each with the hosts mounting it.
    async fn datastores(&self, keep: impl Fn(&DatastoreMounts) -> bool) -> Result<Vec<DatastoreMounts>, VsphereError> {
        self.retrieve_all(
            |c| soap::datastores(&c.property_collector, &c.root_folder),
            soap::parse_datastores,
            keep,
        )
        .await
    }

    /// The datastore of the First Class Disk `id`: asked of each datastore in turn
    /// (`RetrieveVStorageObject` needs one), the first that knows it.
    pub async fn disk_datastore(&self, id: &str) -> Result<DatastoreMounts, VsphereError> {
        let all = self.datastores(|_| true).await?;
        let session = self.soap_session().await?;
        let Some(manager) = session.content.vstorage_object_manager.clone() else {
            return Err(self.garbage(
                "RetrieveServiceContent",
                "no VStorageObjectManager (First Class Disks need vCenter 6.5 or later)",
            ));
        };
        for datastore in &all {
            let make = |_: &ServiceContent| soap::retrieve_vstorage_object(&manager, id, &datastore.datastore);
            match self
                .soap("RetrieveVStorageObject", make, soap::parse_vstorage_datastore)
                .await
            {
                Ok(on) => {
                    if let Some(found) = all.iter().find(|d| d.datastore == on) {
                        return Ok(found.clone());
                    }
                }
                Err(VsphereError::Fault { kind, .. }) if kind == "NotFound" || kind == "InvalidDatastore" => {}
                Err(other) => return Err(other),
            }
        }
        Err(VsphereError::DiskNotFound {
            endpoint: self.endpoint().to_owned(),
            id: id.to_owned(),
            datastores: all.len(),
        })
    }

    /// Each host mounting `datastore` with the zone and region its tags (or its nearest
    /// ancestor's) give, in the categories named.
    pub async fn host_labels(
        &self,
        datastore: &DatastoreMounts,
        zone_category: &str,
        region_category: &str,
    ) -> Result<Vec<HostLabels>, VsphereError> {
        if datastore.hosts.is_empty() {
            return Ok(Vec::new());
        }
        let entities: Vec<Entity> = self
            .retrieve_all(
                |c| soap::ancestors(&c.property_collector, &datastore.hosts),
                soap::parse_entities,
                |_| true,
            )
            .await?;
        let objects: Vec<MoRef> = entities.iter().map(|e| e.object.clone()).collect();
        let attached = self
            .rest(
                "list-attached-tags-on-objects",
                reqwest::Method::POST,
                self.url(tagging::ATTACHED_TAGS_PATH),
                Some(tagging::attached_tags_request(&objects)),
                tagging::parse_attached_tags,
            )
            .await?;
        let ids: BTreeSet<&String> = attached.iter().flat_map(|(_, tags)| tags).collect();
        let mut tags = BTreeMap::new();
        let mut categories = BTreeMap::new();
        for id in ids {
            let tag = self
                .rest(
                    "tag get",
                    reqwest::Method::GET,
                    self.id_url(tagging::TAG_PATH, id),
                    None,
                    tagging::parse_tag,
                )
                .await?;
            if !categories.contains_key(&tag.category_id) {
                let url = self.id_url(tagging::CATEGORY_PATH, &tag.category_id);
                let name = self
                    .rest(
                        "category get",
                        reqwest::Method::GET,
                        url,
                        None,
                        tagging::parse_category_name,
                    )
                    .await?;
                categories.insert(tag.category_id.clone(), name);
            }
            tags.insert(id.clone(), tag);
        }
        let mut by_object: BTreeMap<MoRef, Vec<(String, String)>> = BTreeMap::new();
        for (object, ids) in &attached {
            for id in ids {
                if let Some(tag) = tags.get(id) {
                    let category = categories.get(&tag.category_id).cloned().unwrap_or_default();
                    by_object
                        .entry(object.clone())
                        .or_default()
                        .push((category, tag.name.clone()));
                }
            }
        }
        labels_of(&datastore.hosts, &entities, &by_object, zone_category, region_category).map_err(|reason| {
            VsphereError::Inventory {
                endpoint: self.endpoint().to_owned(),
                datastore: datastore.name.clone(),
                reason,
            }
        })
    }

    fn id_url(&self, path: &str, id: &str) -> Url {
        let mut url = self.url(path);
        if let Ok(mut segments) = url.path_segments_mut() {
            segments.push(&format!("id:{id}"));
        }
        url
    }

    async fn rest_session(&self) -> Result<Arc<SecretString>, VsphereError> {
        let mut slot = self.rest.lock().await;
        if let Some(session) = slot.as_ref() {
            return Ok(session.clone());
        }
        let call = "tagging session";
        let response = self
            .http
            .post(self.url(tagging::SESSION_PATH))
            .basic_auth(&self.user, Some(self.password.expose_secret()))
            .send()
            .await
            .map_err(|e| self.transport(call, &e))?;
        let status = response.status();
        let _permit = PARSING.acquire().await.ok();
        let body = crate::http::read_body(response, MAX_REST_ANSWER)
            .await
            .map_err(|e| self.transport(call, &e))?;
        if status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::FORBIDDEN {
            return Err(VsphereError::LoginRefused {
                endpoint: self.endpoint().to_owned(),
                user: self.user.clone(),
                text: self.clean(&tagging::error_text(&body).unwrap_or_else(|| format!("HTTP {status}"))),
            });
        }
        let id = self.answer(call, status, &body, tagging::parse_session)?;
        self.remember(&id);
        let session = Arc::new(SecretString::from(id));
        *slot = Some(session.clone());
        Ok(session)
    }

    fn answer<T>(
        &self,
        call: &'static str,
        status: reqwest::StatusCode,
        body: &[u8],
        parse: impl Fn(&[u8]) -> Result<T, String>,
    ) -> Result<T, VsphereError> {
        if !status.is_success() {
            let text = tagging::error_text(body)
                .unwrap_or_else(|| String::from_utf8_lossy(body).into_owned())
                .trim()
                .to_owned();
            let text = if text.is_empty() {
                status.canonical_reason().unwrap_or("no text").to_owned()
            } else {
                text
            };
            return Err(self.refused(call, status, self.clean(&text)));
        }
        parse(body).map_err(|reason| self.garbage(call, self.clean(&reason)))
    }

    /// A tagging call in the REST session (renewed once after a 401).
    async fn rest<T>(
        &self,
        call: &'static str,
        method: reqwest::Method,
        url: Url,
        body: Option<serde_json::Value>,
        parse: impl Fn(&[u8]) -> Result<T, String>,
    ) -> Result<T, VsphereError> {
        let mut retried = false;
        loop {
            let session = self.rest_session().await?;
            let mut id = HeaderValue::from_str(session.expose_secret()).map_err(|e| self.transport(call, &e))?;
            id.set_sensitive(true);
            let mut request = self
                .http
                .request(method.clone(), url.clone())
                .header(tagging::SESSION_HEADER, id);
            if let Some(body) = &body {
                request = request.json(body);
            }
            let response = request.send().await.map_err(|e| self.transport(call, &e))?;
            let status = response.status();
            // JSON is read as it arrives (serde: linear); the place bounds its memory.
            let _permit = PARSING.acquire().await.ok();
            let bytes = crate::http::read_body(response, MAX_REST_ANSWER)
                .await
                .map_err(|e| self.transport(call, &e))?;
            if status == reqwest::StatusCode::UNAUTHORIZED && !retried {
                retried = true;
                let mut slot = self.rest.lock().await;
                if slot.as_ref().is_some_and(|s| Arc::ptr_eq(s, &session)) {
                    *slot = None;
                }
                continue;
            }
            return self.answer(call, status, &bytes, &parse);
        }
    }
}
