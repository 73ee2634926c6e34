//! The suite's client for the apiserver (`pv-topology-webhook audit` and `repair`,
//! `cloud-credential-provider check-config --rbac --node`, `node-ip-helper check
//! --node`): every request bounded in time
//! (`--request-timeout`, from connecting to the answer's last byte, so that a server
//! dripping bytes cannot hold it either), in bytes ([`MAX_PAGE_BYTES`] for a page of a
//! list, [`MAX_OBJECT_BYTES`] for one object; a declared length is refused before
//! reading) and in items (no more than the page asked for, counted while parsing:
//! [`list`]). A refusal is read as the `metav1.Status` the API conventions give, its
//! message cleaned of the credentials this client sent; anything else (a redirect, a
//! proxy's page) is named by its status line. The client is kube's, built from the
//! same [`kube::Config`] ([`connect`]) and the same layers (base URI, authentication,
//! extra headers) as [`kube::Client::try_from`], less its tracing layer, whose own
//! `ERROR` lines would double every failure, and with retries of its own in place of
//! kube's, whose back-off (up to 15 tries) outlasts the request timeout and hides the
//! apiserver's answer.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use hyper::StatusCode;
use hyper::header::{AUTHORIZATION, CONTENT_LENGTH, LOCATION, RETRY_AFTER};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use kube::client::{Body, ClientBuilder, ConfigExt as _};
use serde::de::DeserializeOwned;
use thiserror::Error;
use tower::ServiceExt as _;

use cloud_access::http::io_error_kind;
use cloud_access::logging::{clean_text, error_chain};

pub mod connect;
pub mod kubeconfig;
pub mod list;

pub use self::connect::{ConnectError, config};
pub use self::list::{Page, parse_page};

/// The most bytes one page of the list may take. A PV object is 1–3 KiB, so a page of
/// the default 500 is about 1.5 MiB; the cap leaves 64 KiB for each of 500 (objects with
/// large annotations) and bounds memory whatever the server sends.
pub const MAX_PAGE_BYTES: usize = 32 << 20;
/// The most bytes of one object's answer (a get, create or patch): etcd refuses objects
/// past 1.5 MiB, so a larger answer is not one the apiserver stored.
pub const MAX_OBJECT_BYTES: usize = 2 << 20;
/// The most bytes of a refusal's body read (a `Status` is a few hundred).
pub const MAX_ERROR_BYTES: usize = 64 << 10;
/// Attempts of a request the apiserver answers as busy (429, 503, 504).
pub const ATTEMPTS: u32 = 3;
/// The longest wait before trying again, whatever `Retry-After` says.
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(10);
/// The most characters of the apiserver's message kept in an error line.
const MESSAGE_LIMIT: usize = 500;

/// Why a request to the apiserver failed; the message is fit for one line.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ApiError {
    /// Connecting or the answer (connect to last byte) took longer than the request
    /// timeout.
    #[error(
        "timed out: no complete answer within --request-timeout {} (is the `server` of the kubeconfig's cluster reachable from here? --kubeconfig)",
        cloud_access::go_duration::format(*.0)
    )]
    Timeout(Duration),
    /// Nothing listens at the server's address: the apiserver is down, or the kubeconfig
    /// names another address.
    #[error(
        "connection refused (is the apiserver up, and is the `server` of the kubeconfig's cluster right? --kubeconfig)"
    )]
    ConnectionRefused,
    /// Connecting, TLS, authentication or the connection breaking (the cleaned chain).
    #[error("{0}")]
    Transport(String),
    #[error("the answer is larger than {} MiB{}", .0 >> 20, if *.0 == MAX_PAGE_BYTES { " (if the objects are this large, lower --page-size)" } else { "" })]
    TooLarge(usize),
    /// A `metav1.Status` (or a body that is none, its cleaned start, as the message).
    #[error("{message} ({code} {reason})")]
    Status { code: u16, reason: String, message: String },
    /// A status that is neither success nor a refusal: a redirect, an informational one.
    #[error("the apiserver answered {status}{}, which it never does for this request (a proxy or a wrong server URL?)", .location.as_ref().map(|l| format!(" to {l}")).unwrap_or_default())]
    Unexpected { status: String, location: Option<String> },
    /// The answer is not the object asked for.
    #[error("the answer is not a {kind}: {message}")]
    Decode { kind: String, message: String },
    #[error("the page has more than the {0} items asked for")]
    TooManyItems(u32),
}

impl ApiError {
    /// Whether the apiserver refused for lack of permission.
    pub fn is_forbidden(&self) -> bool {
        matches!(self, ApiError::Status { code: 403, .. })
    }

    /// Whether the apiserver did not accept the client's credentials.
    pub fn is_unauthorized(&self) -> bool {
        matches!(self, ApiError::Status { code: 401, .. })
    }

    /// Whether the object is not there (404).
    pub fn is_not_found(&self) -> bool {
        matches!(self, ApiError::Status { code: 404, .. })
    }

    /// Whether a precondition (uid, resourceVersion) no longer held, or the object
    /// exists already (409).
    pub fn is_conflict(&self) -> bool {
        matches!(self, ApiError::Status { code: 409, .. })
    }
}

/// The credentials the client sent, as seen in its `Authorization` header: what the
/// apiserver's messages are cleaned of.
#[derive(Debug, Clone, Default)]
struct Sent(Arc<Mutex<Vec<String>>>);

impl Sent {
    /// Keeps the secret parts of an `Authorization` value: a bearer token; Basic's
    /// base64, the user:password it encodes and the password alone.
    fn remember(&self, value: &[u8]) {
        let Ok(value) = std::str::from_utf8(value) else {
            return;
        };
        let mut secrets = vec![value.to_owned()];
        if let Some((scheme, credential)) = value.split_once(' ') {
            let credential = credential.trim();
            secrets.push(credential.to_owned());
            if scheme.eq_ignore_ascii_case("basic")
                && let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(credential)
                && let Ok(decoded) = String::from_utf8(decoded)
            {
                if let Some((_, password)) = decoded.split_once(':') {
                    secrets.push(password.to_owned());
                }
                secrets.push(decoded);
            }
        }
        let mut kept = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for secret in secrets {
            // A refreshed token adds one; a handful is all a run ever sees.
            if !kept.contains(&secret) && kept.len() < 16 {
                kept.push(secret);
            }
        }
    }

    fn clean(&self, text: &str, limit: usize) -> String {
        let kept = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let secrets: Vec<&str> = kept.iter().map(String::as_str).collect();
        clean_text(text, &secrets, limit)
    }
}

/// The apiserver of the cluster the kubeconfig names, reached with its credentials.
pub struct Apiserver {
    client: kube::Client,
    sent: Sent,
    server: String,
    request_timeout: Duration,
}

impl fmt::Debug for Apiserver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Apiserver")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

impl Apiserver {
    /// A client for `config`'s cluster whose every request ends within `request_timeout`.
    pub fn new(config: kube::Config, request_timeout: Duration) -> Result<Self, ConnectError> {
        let server = shown_server(&config.cluster_url);
        if config.proxy_url.is_some() {
            // kube is built without its proxy features, as for the standard client; the
            // URL is not shown (it may carry the proxy's password).
            return Err(ConnectError::Proxy);
        }
        Self::build(config, request_timeout, server).map_err(ConnectError::Client)
    }

    fn build(config: kube::Config, request_timeout: Duration, server: String) -> Result<Self, kube::Error> {
        let mut connector = HttpConnector::new();
        connector.enforce_http(false);
        connector.set_connect_timeout(Some(request_timeout));
        let https = config.rustls_https_connector_with_connector(connector)?;
        let http = hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build::<_, Body>(https);
        let sent = Sent::default();
        let seen = sent.clone();
        // Innermost, under the authentication layer: sees the header as it goes out.
        let http = http
            .map_request(move |request: hyper::Request<Body>| {
                if let Some(value) = request.headers().get(AUTHORIZATION) {
                    seen.remember(value.as_bytes());
                }
                request
            })
            // The authentication layer's errors are boxed: the stack's are too.
            .map_err(tower::BoxError::from);
        let builder =
            ClientBuilder::new(http, config.default_namespace.clone()).with_layer(&config.extra_headers_layer()?);
        let client = match config.auth_layer()? {
            Some(auth) => builder.with_layer(&auth).with_layer(&config.base_uri_layer()).build(),
            None => builder.with_layer(&config.base_uri_layer()).build(),
        };
        Ok(Self {
            client,
            sent,
            server,
            request_timeout,
        })
    }

    /// The server as error lines name it: scheme, host and port.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// Text from outside cleaned for a line: the credentials sent cut, control characters
    /// escaped, at most `limit` characters.
    pub fn clean(&self, text: &str, limit: usize) -> String {
        self.sent.clean(text, limit)
    }

    /// One page of at most `limit` items of the list `kind` at `path` (items read as
    /// `T`: a slim view reads only what it needs), from `continue_token` on.
    pub async fn list_page<T: DeserializeOwned + Send + 'static>(
        &self,
        path: &str,
        kind: &'static str,
        limit: u32,
        continue_token: Option<&str>,
    ) -> Result<Page<T>, ApiError> {
        let mut params = ListParams::default().limit(limit);
        if let Some(token) = continue_token {
            params = params.continue_token(token);
        }
        let request = kube::core::Request::new(path).list(&params).map_err(request_error)?;
        let body = self.exchange(request, MAX_PAGE_BYTES).await?;
        // Parsing 32 MiB takes a fraction of a second: off the async workers all the same.
        tokio::task::spawn_blocking(move || parse_page(&body, kind, limit))
            .await
            .map_err(|e| ApiError::Transport(e.to_string()))?
    }

    /// The object `name` of the collection `path`, as `kind`; none when there is none.
    pub async fn get<T: DeserializeOwned + Send + 'static>(
        &self,
        path: &str,
        kind: &str,
        name: &str,
    ) -> Result<Option<T>, ApiError> {
        let request = kube::core::Request::new(path)
            .get(name, &kube::api::GetParams::default())
            .map_err(request_error)?;
        match self.exchange(request, MAX_OBJECT_BYTES).await {
            Ok(body) => decode(body, kind).await.map(Some),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Creates `object` in the collection `path` (with `dry_run`, only admitted and
    /// answered: nothing is stored); the object as the apiserver answers it.
    pub async fn create<T: serde::Serialize + DeserializeOwned + Send + 'static>(
        &self,
        path: &str,
        kind: &str,
        object: &T,
        dry_run: bool,
        field_manager: &str,
    ) -> Result<T, ApiError> {
        let params = PostParams {
            dry_run,
            field_manager: Some(field_manager.to_owned()),
        };
        let body = serde_json::to_vec(object).map_err(|e| ApiError::Transport(e.to_string()))?;
        let request = kube::core::Request::new(path)
            .create(&params, body)
            .map_err(request_error)?;
        decode(self.exchange(request, MAX_OBJECT_BYTES).await?, kind).await
    }

    /// A JSON merge patch of `name` in the collection `path`; the patched object. A
    /// `metadata.resourceVersion` in `patch` makes it conditional (409 when it moved on).
    pub async fn merge_patch<T: DeserializeOwned + Send + 'static>(
        &self,
        path: &str,
        kind: &str,
        name: &str,
        patch: &serde_json::Value,
        field_manager: &str,
    ) -> Result<T, ApiError> {
        let params = PatchParams {
            field_manager: Some(field_manager.to_owned()),
            ..PatchParams::default()
        };
        let request = kube::core::Request::new(path)
            .patch(name, &params, &Patch::Merge(patch))
            .map_err(request_error)?;
        decode(self.exchange(request, MAX_OBJECT_BYTES).await?, kind).await
    }

    /// Deletes `name` of the collection `path` if it is still the object `uid` at
    /// `resource_version` (409 otherwise); an object with finalizers stays, marked.
    pub async fn delete(&self, path: &str, name: &str, uid: &str, resource_version: &str) -> Result<(), ApiError> {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(uid.to_owned()),
                resource_version: Some(resource_version.to_owned()),
            }),
            ..DeleteParams::default()
        };
        let request = kube::core::Request::new(path)
            .delete(name, &params)
            .map_err(request_error)?;
        // The answer is the object as marked, or a Status: only its arrival matters.
        self.exchange(request, MAX_OBJECT_BYTES).await.map(drop)
    }

    /// Sends `request` and reads its answer's body, at most `cap` bytes, each attempt
    /// within the request timeout; a status other than 2xx is an error. The answers of
    /// a busy apiserver (429, 503, 504) are tried again, [`ATTEMPTS`] in all, after their
    /// `Retry-After` (at most [`MAX_RETRY_DELAY`]) or 1 s, then 2 s.
    async fn exchange(&self, request: hyper::Request<Vec<u8>>, cap: usize) -> Result<Vec<u8>, ApiError> {
        let mut attempt = 1;
        loop {
            let answer = tokio::time::timeout(self.request_timeout, self.attempt(copy(&request), cap)).await;
            let (result, retry_after) = answer.unwrap_or((Err(ApiError::Timeout(self.request_timeout)), None));
            match result {
                Err(ApiError::Status {
                    code: 429 | 503 | 504, ..
                }) if attempt < ATTEMPTS => {
                    let delay = retry_after.unwrap_or(Duration::from_secs(1 << (attempt - 1)));
                    tokio::time::sleep(delay.min(MAX_RETRY_DELAY)).await;
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    /// One attempt of [`Apiserver::exchange`], with the answer's `Retry-After` in seconds.
    async fn attempt(
        &self,
        request: hyper::Request<Vec<u8>>,
        cap: usize,
    ) -> (Result<Vec<u8>, ApiError>, Option<Duration>) {
        let response = match self.client.send(request.map(Body::from)).await {
            Ok(response) => response,
            Err(e) => return (Err(self.transport(&e)), None),
        };
        let status = response.status();
        let header = |name| response.headers().get(name).and_then(|v| v.to_str().ok());
        let location = header(LOCATION).map(|l| self.clean(l, 200));
        let declared = header(CONTENT_LENGTH).and_then(|l| l.parse::<u64>().ok());
        let retry_after = header(RETRY_AFTER)
            .and_then(|s| s.parse::<u64>().ok())
            .map(Duration::from_secs);
        let mut body = response.into_body();
        if status.is_success() {
            return (read_capped(&mut body, declared, cap, |e| self.transport(e)).await, None);
        }
        if status.is_client_error() || status.is_server_error() {
            let text = match read_capped(&mut body, declared, MAX_ERROR_BYTES, |e| self.transport(e)).await {
                Ok(text) => text,
                Err(ApiError::TooLarge(_)) => b"(a body larger than 64 KiB)".to_vec(),
                Err(other) => return (Err(other), None),
            };
            return (Err(self.refusal(status, &text)), retry_after);
        }
        let unexpected = ApiError::Unexpected {
            status: status_line(status),
            location,
        };
        (Err(unexpected), None)
    }

    /// A refused or timed-out connection by that name (the I/O error deep in the client's
    /// chain); anything else by its cleaned chain.
    fn transport(&self, error: &(dyn std::error::Error + 'static)) -> ApiError {
        match io_error_kind(error) {
            Some(std::io::ErrorKind::ConnectionRefused) => ApiError::ConnectionRefused,
            Some(std::io::ErrorKind::TimedOut) => ApiError::Timeout(self.request_timeout),
            _ => ApiError::Transport(self.clean(&error_chain(error), MESSAGE_LIMIT)),
        }
    }

    /// A 4xx or 5xx as the `Status` in its body says, cleaned; a body that is none, by
    /// its status line and the start of the body.
    fn refusal(&self, status: StatusCode, body: &[u8]) -> ApiError {
        let (reason, message) = cloud_access::json::kubernetes_status(body)
            .unwrap_or_else(|| (String::new(), String::from_utf8_lossy(body).trim().to_owned()));
        let reason = if reason.is_empty() {
            status.canonical_reason().unwrap_or("").to_owned()
        } else {
            reason
        };
        ApiError::Status {
            code: status.as_u16(),
            reason: self.clean(&reason, 100),
            message: self.clean(&message, MESSAGE_LIMIT),
        }
    }
}

fn request_error(error: kube::core::request::Error) -> ApiError {
    ApiError::Transport(error.to_string())
}

/// One object of `kind` from an answer's body (up to [`MAX_OBJECT_BYTES`]), parsed off
/// the async workers.
async fn decode<T: DeserializeOwned + Send + 'static>(body: Vec<u8>, kind: &str) -> Result<T, ApiError> {
    let decode_error = |message: String| ApiError::Decode {
        kind: kind.to_owned(),
        message: clean_text(&message, &[], MESSAGE_LIMIT),
    };
    tokio::task::spawn_blocking(move || serde_json::from_slice(&body))
        .await
        .map_err(|e| decode_error(e.to_string()))?
        .map_err(|e| decode_error(e.to_string()))
}

/// `request` again (its body is bytes).
fn copy(request: &hyper::Request<Vec<u8>>) -> hyper::Request<Vec<u8>> {
    let mut copy = hyper::Request::new(request.body().clone());
    *copy.method_mut() = request.method().clone();
    *copy.uri_mut() = request.uri().clone();
    *copy.headers_mut() = request.headers().clone();
    copy
}

fn status_line(status: StatusCode) -> String {
    format!("{} {}", status.as_u16(), status.canonical_reason().unwrap_or(""))
        .trim_end()
        .to_owned()
}

/// `uri` as scheme://host:port, without any user information.
fn shown_server(uri: &hyper::Uri) -> String {
    let scheme = uri.scheme_str().unwrap_or("https");
    let host = uri.host().unwrap_or("");
    match uri.port_u16() {
        Some(port) => format!("{scheme}://{host}:{port}"),
        None => format!("{scheme}://{host}"),
    }
}

/// The whole body, refused once past `cap` bytes (or when its declared length is).
async fn read_capped(
    body: &mut Body,
    declared: Option<u64>,
    cap: usize,
    transport: impl Fn(&(dyn std::error::Error + 'static)) -> ApiError,
) -> Result<Vec<u8>, ApiError> {
    if declared.is_some_and(|length| length > cap as u64) {
        return Err(ApiError::TooLarge(cap));
    }
    // Room for the declared length at once: growing by doubling would hold the old and
    // the new buffer together (48 MiB for a 32 MiB page). Pages are only touched as
    // bytes arrive, so a length that is never sent costs address space, not memory.
    let mut buffer = Vec::with_capacity(declared.map_or(0, |length| length as usize));
    while let Some(frame) =
        std::future::poll_fn(|cx| hyper::body::Body::poll_frame(std::pin::Pin::new(&mut *body), cx)).await
    {
        let frame = frame.map_err(|e| transport(&e))?;
        let Ok(data) = frame.into_data() else {
            continue; // trailers
        };
        if buffer.len() + data.len() > cap {
            return Err(ApiError::TooLarge(cap));
        }
        buffer.extend_from_slice(&data);
    }
    Ok(buffer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_credentials_sent_are_cut_from_messages() {
        let sent = Sent::default();
        sent.remember(b"Bearer abcdefghijklmnopqrstuvwxyz");
        assert_eq!(
            sent.clean("echo: Bearer abcdefghijklmnopqrstuvwxyz!", 100),
            "echo: <redacted>!"
        );
        assert_eq!(sent.clean("part: ghijklmnopqrst", 100), "part: <redacted>");
        let sent = Sent::default();
        // base64("admin:s3cret-password")
        let basic = base64::engine::general_purpose::STANDARD.encode("admin:s3cret-password");
        sent.remember(format!("Basic {basic}").as_bytes());
        let echoed = format!("got {basic} from admin:s3cret-password, s3cret-password");
        let cleaned = sent.clean(&echoed, 200);
        assert!(
            !cleaned.contains("s3cret") && !cleaned.contains(&basic[..12]),
            "{cleaned}"
        );
    }

    #[test]
    fn the_server_is_shown_without_user_information() {
        let uri: hyper::Uri = "https://user:pw@10.0.0.1:6443/some/path?q=1".parse().expect("a URI");
        assert_eq!(shown_server(&uri), "https://10.0.0.1:6443");
        let uri: hyper::Uri = "https://api.example.com".parse().expect("a URI");
        assert_eq!(shown_server(&uri), "https://api.example.com");
    }
}
