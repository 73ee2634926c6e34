//! `gcp`: Google Artifact Registry (`*.pkg.dev`) and Container Registry
//! (`gcr.io`, `*.gcr.io`, `container.cloud.google.com`) logins, as
//! auth-provider-gcp (cloud-provider-gcp) makes them, through
//! [`cloud_access::gcp`].
//!
//! Three flows, chosen by `--auth-flow` as upstream's `--authFlow`:
//!
//! - `gcr` (the default): the node's default service account's access token
//!   from the metadata server, username `_token`, under the image's registry
//!   and Google's registry patterns, cached for the token's remaining
//!   validity. The account's scopes are checked first.
//! - `dockercfg` and `dockercfg-url`: a Docker config held in the instance
//!   attribute `google-dockercfg`, or fetched from the URL held in
//!   `google-dockercfg-url`.
//!
//! KEP-4412 workload identity (in the `gcr` flow): a service account that
//! opts in with `iam.gke.io/enable-wi-image-pull: "true"` pulls as the pod,
//! not the node: its service-account token is exchanged at Google STS for a
//! federated token (upstream's PR #1202), and, when the service account also
//! names a Google service account (`iam.gke.io/gcp-service-account`, under a
//! key `--service-account-annotation` allows, an account
//! `--allowed-service-account` allows), that account is impersonated through
//! IAM Credentials `generateAccessToken`. STS and IAM endpoints come from
//! flags only, never from an annotation.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use cloud_access::SecureEndpoint;
use cloud_access::gcp::{self, AccessToken, GceMetadata, IamCredentialsClient, StsClient};
use url::Url;

use super::static_file::{DockerAuthEntry, MAX_DOCKER_CONFIG, usable_entries};
use super::{BackendError, CredentialBackend};
use crate::image;
use crate::kubelet_config::UTF8_BOM;
use crate::protocol::{ApiVersion, CacheKeyType, CredentialRequest, Credentials, RegistryAuth};

/// The username Google's registries take with an access token, as
/// auth-provider-gcp sends it.
pub const USERNAME: &str = "_token";

/// The registries an answer of the token flows is keyed by, besides the
/// image's own (auth-provider-gcp's list).
pub const GOOGLE_REGISTRY_KEYS: [&str; 4] = ["container.cloud.google.com", "gcr.io", "*.gcr.io", "*.pkg.dev"];

/// The service-account annotation naming the Google service account to
/// impersonate (GKE's workload identity annotation), allowed by default.
pub const DEFAULT_SERVICE_ACCOUNT_ANNOTATION: &str = "iam.gke.io/gcp-service-account";

/// The service-account annotation that opts a service account's pods in to
/// pulling with their own identity (auth-provider-gcp's, PR #1202).
pub const WORKLOAD_IDENTITY_ANNOTATION: &str = "iam.gke.io/enable-wi-image-pull";

/// The instance attributes of the dockercfg flows.
pub const DOCKERCFG_ATTRIBUTE: &str = "google-dockercfg";
pub const DOCKERCFG_URL_ATTRIBUTE: &str = "google-dockercfg-url";

/// Scopes that let a token pull, as prefixes (`devstorage.read_only`,
/// `devstorage.read_write`, `devstorage.full_control`, `cloud-platform`,
/// `cloud-platform.read-only`): auth-provider-gcp's test.
const PULL_SCOPE_PREFIXES: [&str; 2] = [
    "https://www.googleapis.com/auth/devstorage",
    "https://www.googleapis.com/auth/cloud-platform",
];
const SCOPE_BASE: &str = "https://www.googleapis.com/auth/";

/// What an impersonated account's token is asked for: IAM's default maximum.
const IMPERSONATION_LIFETIME: Duration = Duration::from_secs(3600);

const USER_AGENT: &str = concat!("cloud-credential-provider/", env!("CARGO_PKG_VERSION"));

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthFlow {
    /// The node's (or, with workload identity, the pod's) access token.
    Gcr,
    /// A Docker config in the instance attribute `google-dockercfg`.
    Dockercfg,
    /// A Docker config at the URL in the instance attribute `google-dockercfg-url`.
    DockercfgUrl,
}

impl AuthFlow {
    pub fn name(self) -> &'static str {
        match self {
            AuthFlow::Gcr => "gcr",
            AuthFlow::Dockercfg => "dockercfg",
            AuthFlow::DockercfgUrl => "dockercfg-url",
        }
    }
}

#[derive(Debug, Clone)]
pub struct GcpSettings {
    pub flow: AuthFlow,
    /// The metadata server (`GCE_METADATA_HOST`, else Google's name).
    pub metadata_base: Url,
    /// The STS audience of workload identity; `None`: not configured.
    pub audience: Option<String>,
    /// Annotation keys that may name the Google service account to impersonate.
    pub service_account_annotations: Vec<String>,
    /// Accounts (or `*@DOMAIN`) that may be impersonated; empty: any.
    pub allowed_service_accounts: Vec<String>,
    /// Refuse pulls whose service account does not opt in to workload identity.
    pub require_workload_identity: bool,
    pub sts_endpoint: SecureEndpoint,
    pub iam_credentials_endpoint: SecureEndpoint,
    /// The dockercfg flows' `cacheDuration`, and a cap on the token flows'.
    pub cache_duration: Option<Duration>,
    /// Kept in hand before a token's expiry.
    pub expiry_margin: Duration,
    /// Deadline of the whole answer.
    pub timeout: Duration,
}

/// Who the pull is made as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// The node's default service account (metadata server).
    Node,
    /// The pod's Kubernetes service account, federated by Google STS.
    Federated,
    /// A Google service account, impersonated with the federated token.
    Impersonated { key: String, account: String },
}

#[derive(Debug, thiserror::Error)]
pub enum GcpBackendError {
    #[error("{what} from the GCE metadata server: {source}")]
    Metadata {
        what: &'static str,
        #[source]
        source: Box<gcp::GcpError>,
    },
    #[error(
        "the node's service account{account} has no scope that can pull images (it has: {scopes}): give the instance the scope devstorage.read_only or cloud-platform (gcloud compute instances set-service-account --scopes=...), or use workload identity"
    )]
    MissingScopes { account: String, scopes: String },
    #[error(
        "instance metadata attribute {attribute} is not set: --auth-flow={flow} reads the Docker config from it (set it, or use --auth-flow=gcr)"
    )]
    NoAttribute {
        attribute: &'static str,
        flow: &'static str,
    },
    #[error("{source_name} is not valid JSON (line {line}, column {column}): it must be a Docker config")]
    DockercfgJson {
        source_name: String,
        line: usize,
        column: usize,
    },
    #[error("{source_name}: {field} {problem}")]
    DockercfgEntry {
        source_name: String,
        field: String,
        problem: &'static str,
    },
    #[error(
        "metadata attribute {DOCKERCFG_URL_ATTRIBUTE} names {url}, which {problem}: a Docker config is fetched over https only (plain http on loopback)"
    )]
    DockercfgUrlRefused { url: String, problem: &'static str },
    #[error("cannot fetch the Docker config at {url} (metadata attribute {DOCKERCFG_URL_ATTRIBUTE}): {problem}")]
    DockercfgFetch { url: String, problem: String },
    #[error("service-account annotation {WORKLOAD_IDENTITY_ANNOTATION}=\"{value}\" is neither \"true\" nor \"false\"")]
    BadOptIn { value: String },
    #[error(
        "the pod's service account does not opt in to workload identity ({WORKLOAD_IDENTITY_ANNOTATION}: \"true\"), and --require-workload-identity is set: annotate the service account, or drop the flag to pull as the node"
    )]
    WorkloadIdentityRequired,
    #[error(
        "the pod's service account opts in to workload identity ({WORKLOAD_IDENTITY_ANNOTATION}), but --auth-flow={flow} has none: use --auth-flow=gcr"
    )]
    NotInFlow { flow: &'static str },
    #[error(
        "the pod's service account opts in to workload identity ({WORKLOAD_IDENTITY_ANNOTATION}), but this provider has no workload identity pool: give --identity-provider and --project-id (or --sts-audience)"
    )]
    NotConfigured,
    #[error(
        "the pod's service account opts in to workload identity ({WORKLOAD_IDENTITY_ANNOTATION}), but kubelet sent {what}: give this provider apiVersion credentialprovider.kubelet.k8s.io/v1 and tokenAttributes (serviceAccountTokenAudience, cacheType: ServiceAccount) in the kubelet CredentialProviderConfig"
    )]
    NoToken { what: &'static str },
    #[error(
        "service-account annotation {key}=\"{value}\" is not a Google service account ({problem}): use NAME@PROJECT.iam.gserviceaccount.com"
    )]
    BadServiceAccount {
        key: String,
        value: String,
        problem: &'static str,
    },
    #[error(
        "service-account annotation {key} names {account}, which --allowed-service-account does not list: add it (or *@its-domain) to the flag, or annotate another account"
    )]
    AccountNotAllowed { key: String, account: String },
    #[error("exchanging the pod's service-account token at Google STS (audience {audience}): {source}")]
    Exchange {
        audience: String,
        #[source]
        source: Box<gcp::GcpError>,
    },
    #[error("impersonating {account} (annotation {key}) with the pod's federated token: {source}")]
    Impersonate {
        key: String,
        account: String,
        #[source]
        source: Box<gcp::GcpError>,
    },
    #[error(
        "no answer within --timeout {timeout:?} ({flow} flow): check that the metadata server and Google's APIs are reachable from the node, or raise --timeout (below kubelet's 1m limit)"
    )]
    Timeout { timeout: Duration, flow: &'static str },
    #[error(transparent)]
    Api(#[from] Box<gcp::GcpError>),
    #[error("{0}")]
    Client(#[from] cloud_access::HttpClientError),
}

#[derive(Debug)]
pub struct GcpBackend {
    settings: GcpSettings,
}

impl GcpBackend {
    pub fn new(settings: GcpSettings) -> Self {
        Self { settings }
    }

    async fn answer(&self, request: &CredentialRequest) -> Result<Credentials, GcpBackendError> {
        let identity = identity(&self.settings, &request.service_account_annotations)?;
        let flow = self.settings.flow;
        tracing::debug!(flow = flow.name(), identity = ?identity, image = %request.image, "gcp");
        let timeout = self.settings.timeout;
        let deadline = Instant::now() + timeout;
        let work = async {
            match (flow, identity) {
                (AuthFlow::Gcr, Identity::Node) => {
                    let token = self.node_token().await?;
                    Ok(self.token_answer(request, &token))
                }
                (AuthFlow::Gcr, identity) => {
                    let token = self.workload_identity_token(request, &identity, deadline).await?;
                    Ok(self.token_answer(request, &token))
                }
                (AuthFlow::Dockercfg, _) => self.dockercfg().await,
                (AuthFlow::DockercfgUrl, _) => self.dockercfg_url().await,
            }
        };
        tokio::time::timeout(timeout, work)
            .await
            .map_err(|_| GcpBackendError::Timeout {
                timeout,
                flow: flow.name(),
            })?
    }

    fn metadata(&self) -> Result<GceMetadata, GcpBackendError> {
        GceMetadata::new(self.settings.metadata_base.clone(), self.settings.timeout).map_err(|e| Box::new(e).into())
    }

    /// The default service account's token, once its scopes are known to
    /// allow pulls.
    async fn node_token(&self) -> Result<AccessToken, GcpBackendError> {
        let metadata = self.metadata()?;
        let (token, scopes) = tokio::join!(metadata.default_token(), metadata.default_scopes());
        let metadata_error = |what| {
            move |source| GcpBackendError::Metadata {
                what,
                source: Box::new(source),
            }
        };
        let token = token.map_err(metadata_error("reading the node's service-account token"))?;
        let scopes = scopes.map_err(metadata_error("reading the node's service-account scopes"))?;
        if !can_pull(&scopes) {
            // Only now is the account's name worth a request.
            let account = metadata
                .default_email()
                .await
                .map(|email| format!(" {}", cloud_access::logging::clean_text(&email, &[], 200)))
                .unwrap_or_default();
            return Err(GcpBackendError::MissingScopes {
                account,
                scopes: shown_scopes(&scopes),
            });
        }
        tracing::debug!(remaining = ?token.remaining(), "node service-account token");
        Ok(token)
    }

    async fn workload_identity_token(
        &self,
        request: &CredentialRequest,
        identity: &Identity,
        deadline: Instant,
    ) -> Result<AccessToken, GcpBackendError> {
        let subject = match (request.api_version, &request.service_account_token) {
            (ApiVersion::V1, Some(token)) => token,
            (ApiVersion::V1, None) => {
                return Err(GcpBackendError::NoToken {
                    what: "no serviceAccountToken",
                });
            }
            _ => {
                return Err(GcpBackendError::NoToken {
                    what: "a request of an older apiVersion, without a service-account token",
                });
            }
        };
        let audience = self
            .settings
            .audience
            .as_deref()
            .ok_or(GcpBackendError::NotConfigured)?;
        let endpoints = [&self.settings.sts_endpoint, &self.settings.iam_credentials_endpoint];
        let tls = endpoints.iter().any(|e| e.url().scheme() != "http");
        let http = cloud_access::http_client_with_tls(USER_AGENT, self.settings.timeout, tls)?;
        let sts = StsClient::new(http.clone(), &self.settings.sts_endpoint).map_err(Box::new)?;
        tracing::debug!(sts = %sts.url(), %audience, "exchanging the service-account token");
        let federated = sts
            .exchange_token(audience, subject, gcp::CLOUD_PLATFORM_SCOPE, deadline)
            .await
            .map_err(|source| GcpBackendError::Exchange {
                audience: audience.to_owned(),
                source: Box::new(source),
            })?;
        let Identity::Impersonated { key, account } = identity else {
            return Ok(federated);
        };
        let iam = IamCredentialsClient::new(http, &self.settings.iam_credentials_endpoint);
        tracing::debug!(iam = %iam.base(), %account, "impersonating the service account's Google service account");
        iam.generate_access_token(
            account,
            &[gcp::CLOUD_PLATFORM_SCOPE],
            IMPERSONATION_LIFETIME,
            federated.secret(),
            deadline,
        )
        .await
        .map_err(|source| GcpBackendError::Impersonate {
            key: key.clone(),
            account: account.clone(),
            source: Box::new(source),
        })
    }

    /// `_token` and the token under the image's registry and Google's, for
    /// the token's remaining validity less the margin (capped by
    /// `--cache-duration`).
    fn token_answer(&self, request: &CredentialRequest, token: &AccessToken) -> Credentials {
        let repository = image::repository(&request.image);
        let registry = image::registry(&repository);
        let auth = std::iter::once(registry)
            .chain(GOOGLE_REGISTRY_KEYS)
            .map(|key| {
                (
                    key.to_owned(),
                    RegistryAuth {
                        username: USERNAME.to_owned(),
                        password: token.secret().clone(),
                    },
                )
            })
            .collect();
        let window = token.remaining().saturating_sub(self.settings.expiry_margin);
        let cache_duration = self.settings.cache_duration.map_or(window, |cap| cap.min(window));
        Credentials {
            // Per registry: the answer holds the image's own registry. Under
            // KEP-4412 kubelet adds the service account (cacheType
            // ServiceAccount) or the token (Token) to the key.
            cache_key_type: CacheKeyType::Registry,
            cache_duration: Some(cache_duration),
            auth,
        }
    }

    async fn dockercfg(&self) -> Result<Credentials, GcpBackendError> {
        let text = self.attribute(DOCKERCFG_ATTRIBUTE, AuthFlow::Dockercfg).await?;
        let source_name = format!("metadata attribute {DOCKERCFG_ATTRIBUTE}");
        self.dockercfg_answer(parse_dockercfg(text.as_bytes(), &source_name)?)
    }

    async fn dockercfg_url(&self) -> Result<Credentials, GcpBackendError> {
        let raw = self.attribute(DOCKERCFG_URL_ATTRIBUTE, AuthFlow::DockercfgUrl).await?;
        let endpoint = dockercfg_endpoint(raw.trim())?;
        let url = endpoint.url().clone();
        let shown = shown_url(&url);
        let fetch_error = |problem: String| GcpBackendError::DockercfgFetch {
            url: shown.clone(),
            problem,
        };
        let http = cloud_access::http_client_with_tls(USER_AGENT, self.settings.timeout, url.scheme() == "https")?;
        tracing::debug!(url = %shown, "fetching the Docker config");
        let response = http
            .get(url)
            .send()
            .await
            .map_err(|e| fetch_error(cloud_access::logging::error_chain(&e.without_url())))?;
        let status = response.status();
        if !status.is_success() {
            let redirect = if status.is_redirection() {
                " (redirects are not followed)"
            } else {
                ""
            };
            return Err(fetch_error(format!("HTTP {}{redirect}", status.as_u16())));
        }
        let limit = usize::try_from(MAX_DOCKER_CONFIG).unwrap_or(usize::MAX);
        let body = cloud_access::http::read_body(response, limit)
            .await
            .map_err(|e| match e {
                cloud_access::http::BodyError::Transport(e) => {
                    fetch_error(cloud_access::logging::error_chain(&e.without_url()))
                }
                cloud_access::http::BodyError::TooLarge { .. } => fetch_error(format!(
                    "the answer is larger than {} MiB, far more than a Docker config",
                    MAX_DOCKER_CONFIG >> 20
                )),
            })?;
        let source_name = format!("the Docker config at {shown}");
        self.dockercfg_answer(parse_dockercfg(&body, &source_name)?)
    }

    async fn attribute(&self, name: &'static str, flow: AuthFlow) -> Result<String, GcpBackendError> {
        let what = match flow {
            AuthFlow::DockercfgUrl => "reading the instance attribute google-dockercfg-url",
            _ => "reading the instance attribute google-dockercfg",
        };
        self.metadata()?
            .attribute(name)
            .await
            .map_err(|source| GcpBackendError::Metadata {
                what,
                source: Box::new(source),
            })?
            .filter(|text| !text.trim().is_empty())
            .ok_or(GcpBackendError::NoAttribute {
                attribute: name,
                flow: flow.name(),
            })
    }

    /// Every entry, keyed as written: the answer does not depend on the
    /// image, so kubelet may keep it for all of them (`Global`).
    fn dockercfg_answer(&self, auth: BTreeMap<String, RegistryAuth>) -> Result<Credentials, GcpBackendError> {
        tracing::debug!(keys = ?auth.keys().collect::<Vec<_>>(), "Docker config entries");
        Ok(Credentials {
            cache_key_type: CacheKeyType::Global,
            cache_duration: self.settings.cache_duration,
            auth,
        })
    }
}

impl CredentialBackend for GcpBackend {
    async fn credentials(&self, request: &CredentialRequest) -> Result<Credentials, BackendError> {
        Ok(self.answer(request).await?)
    }
}

/// Who a request pulls as, from its service account's annotations:
///
/// - without `iam.gke.io/enable-wi-image-pull: "true"`: the node (refused
///   with `--require-workload-identity`); an annotation naming a Google
///   service account is not read then;
/// - with it, and a Google service account under an allowed key: that
///   account, if allowed;
/// - with it and no such annotation: the pod's own federated identity.
pub fn identity(settings: &GcpSettings, annotations: &BTreeMap<String, String>) -> Result<Identity, GcpBackendError> {
    let opt_in = match annotations.get(WORKLOAD_IDENTITY_ANNOTATION).map(|v| v.trim()) {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => {
            return Err(GcpBackendError::BadOptIn {
                value: cloud_access::logging::clean_text(other, &[], 100),
            });
        }
    };
    if !opt_in {
        if settings.require_workload_identity {
            return Err(GcpBackendError::WorkloadIdentityRequired);
        }
        return Ok(Identity::Node);
    }
    if settings.flow != AuthFlow::Gcr {
        return Err(GcpBackendError::NotInFlow {
            flow: settings.flow.name(),
        });
    }
    if settings.audience.is_none() {
        return Err(GcpBackendError::NotConfigured);
    }
    let named = settings
        .service_account_annotations
        .iter()
        .find_map(|key| annotations.get(key).map(|value| (key, value.trim())));
    let Some((key, account)) = named else {
        return Ok(Identity::Federated);
    };
    check_service_account(account).map_err(|problem| GcpBackendError::BadServiceAccount {
        key: key.clone(),
        value: cloud_access::logging::clean_text(account, &[], 200),
        problem,
    })?;
    if !account_allowed(&settings.allowed_service_accounts, account) {
        return Err(GcpBackendError::AccountNotAllowed {
            key: key.clone(),
            account: account.to_owned(),
        });
    }
    Ok(Identity::Impersonated {
        key: key.clone(),
        account: account.to_owned(),
    })
}

/// A Google service account's e-mail address: `NAME@DOMAIN` where DOMAIN
/// ends in `gserviceaccount.com` (`PROJECT.iam.`, `developer.`,
/// `appspot.`), of the characters such addresses are made of.
pub fn check_service_account(value: &str) -> Result<(), &'static str> {
    let (name, domain) = value.split_once('@').ok_or("no '@'")?;
    let name_ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    let domain_ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.');
    if name.is_empty() || name.len() > 100 || !name.chars().all(name_ok) {
        return Err("the part before '@' is not a service account's name");
    }
    if !domain.chars().all(domain_ok) || !(domain == "gserviceaccount.com" || domain.ends_with(".gserviceaccount.com"))
    {
        return Err("the domain is not *.gserviceaccount.com");
    }
    Ok(())
}

/// Whether `allowed` (exact addresses, or `*@DOMAIN` for every account of a
/// domain; empty: any) admits `account`. Addresses compare without case.
pub fn account_allowed(allowed: &[String], account: &str) -> bool {
    allowed.is_empty()
        || allowed.iter().any(|entry| match entry.strip_prefix("*@") {
            Some(domain) => account
                .rsplit_once('@')
                .is_some_and(|(_, d)| d.eq_ignore_ascii_case(domain)),
            None => entry.eq_ignore_ascii_case(account),
        })
}

/// Whether one of `scopes` lets a token pull (auth-provider-gcp's prefixes).
pub fn can_pull(scopes: &[String]) -> bool {
    scopes
        .iter()
        .any(|scope| PULL_SCOPE_PREFIXES.iter().any(|prefix| scope.starts_with(prefix)))
}

/// Scopes for a message: Google's common prefix dropped, remote text cleaned.
fn shown_scopes(scopes: &[String]) -> String {
    if scopes.is_empty() {
        return "none".into();
    }
    let shown: Vec<String> = scopes
        .iter()
        .take(20)
        .map(|s| cloud_access::logging::clean_text(s.strip_prefix(SCOPE_BASE).unwrap_or(s), &[], 100))
        .collect();
    shown.join(", ")
}

/// The endpoint policy every credential-bearing URL passes (https, or http
/// on loopback; no user information), for the URL the metadata attribute
/// holds. The message never quotes the URL whole: a signed URL's query is a
/// credential.
fn dockercfg_endpoint(raw: &str) -> Result<SecureEndpoint, GcpBackendError> {
    let refused = |url: String, problem| GcpBackendError::DockercfgUrlRefused { url, problem };
    let Ok(url) = Url::parse(raw) else {
        return Err(refused("a value".into(), "is not a URL"));
    };
    SecureEndpoint::parse(DOCKERCFG_URL_ATTRIBUTE, raw).map_err(|e| {
        let problem = match e {
            cloud_access::EndpointError::Invalid { .. } => "is not a URL",
            cloud_access::EndpointError::Insecure { .. } => "is neither https nor http on a loopback address",
            cloud_access::EndpointError::Userinfo { .. } => "carries a username or password",
        };
        refused(shown_url(&url), problem)
    })
}

/// `url` without user information, query or fragment, cleaned for a log.
fn shown_url(url: &Url) -> String {
    let mut shown = url.clone();
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.set_query(None);
    shown.set_fragment(None);
    cloud_access::logging::clean_text(shown.as_str(), &[], 300)
}

/// A Docker config as auth-provider-gcp reads these attributes: the legacy
/// `.dockercfg` form (`{"REGISTRY": {"auth": …}}`); config.json's
/// `{"auths": {…}}` is read too. Entries are read as the `static` backend
/// reads them; no error quotes a value, and a document without one usable
/// entry is an error, not an empty answer.
pub fn parse_dockercfg(bytes: &[u8], source_name: &str) -> Result<BTreeMap<String, RegistryAuth>, GcpBackendError> {
    let bytes = bytes.strip_prefix(UTF8_BOM).unwrap_or(bytes);
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| GcpBackendError::DockercfgJson {
        source_name: source_name.to_owned(),
        line: e.line(),
        column: e.column(),
    })?;
    let entry_error = |field: String, problem| GcpBackendError::DockercfgEntry {
        source_name: source_name.to_owned(),
        field,
        problem,
    };
    let (entries, prefix) = match value.get("auths") {
        Some(auths) if auths.is_object() => (auths.clone(), "auths"),
        _ => (value, ""),
    };
    let entries: BTreeMap<String, DockerAuthEntry> = serde_json::from_value(entries).map_err(|_| {
        entry_error(
            if prefix.is_empty() {
                "the document".into()
            } else {
                "\"auths\"".into()
            },
            "must be an object of registry entries ({\"REGISTRY\": {\"auth\": \"…\"}})",
        )
    })?;
    let auth = usable_entries(entries, prefix).map_err(|p| entry_error(p.field, p.problem))?;
    if auth.is_empty() {
        return Err(entry_error(
            "the document".into(),
            "holds no entry with credentials (\"auth\", or \"username\" and \"password\")",
        ));
    }
    Ok(auth)
}

#[cfg(test)]
mod tests {
    use secrecy::ExposeSecret;

    use super::*;

    fn settings() -> GcpSettings {
        let endpoint = |url| SecureEndpoint::parse("test", url).unwrap();
        GcpSettings {
            flow: AuthFlow::Gcr,
            metadata_base: Url::parse("http://127.0.0.1:9/").unwrap(),
            audience: Some("identitynamespace:p.svc.id.goog:https://idp".into()),
            service_account_annotations: vec![DEFAULT_SERVICE_ACCOUNT_ANNOTATION.into()],
            allowed_service_accounts: Vec::new(),
            require_workload_identity: false,
            sts_endpoint: endpoint("http://127.0.0.1:9/"),
            iam_credentials_endpoint: endpoint("http://127.0.0.1:9/"),
            cache_duration: None,
            expiry_margin: Duration::from_secs(60),
            timeout: Duration::from_secs(20),
        }
    }

    fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    const GSA: &str = "builder@p.iam.gserviceaccount.com";

    #[test]
    fn the_opt_in_annotation_decides_between_node_and_workload_identity() {
        let s = settings();
        let gsa = (DEFAULT_SERVICE_ACCOUNT_ANNOTATION, GSA);
        let on = (WORKLOAD_IDENTITY_ANNOTATION, "true");
        assert_eq!(identity(&s, &annotations(&[])).unwrap(), Identity::Node);
        // A Google service account alone does not switch pulls over.
        assert_eq!(identity(&s, &annotations(&[gsa])).unwrap(), Identity::Node);
        assert_eq!(
            identity(&s, &annotations(&[gsa, (WORKLOAD_IDENTITY_ANNOTATION, "false")])).unwrap(),
            Identity::Node
        );
        assert_eq!(identity(&s, &annotations(&[on])).unwrap(), Identity::Federated);
        assert_eq!(
            identity(&s, &annotations(&[on, gsa])).unwrap(),
            Identity::Impersonated {
                key: DEFAULT_SERVICE_ACCOUNT_ANNOTATION.into(),
                account: GSA.into()
            }
        );
        // A key the flag does not allow is not read.
        assert_eq!(
            identity(&s, &annotations(&[on, ("example.com/gcp-service-account", GSA)])).unwrap(),
            Identity::Federated
        );
        let err = identity(&s, &annotations(&[(WORKLOAD_IDENTITY_ANNOTATION, "yes\n")])).unwrap_err();
        assert!(matches!(err, GcpBackendError::BadOptIn { .. }), "{err}");
        assert!(!err.to_string().contains('\n'));
    }

    #[test]
    fn workload_identity_needs_its_configuration_and_the_gcr_flow() {
        let on = annotations(&[(WORKLOAD_IDENTITY_ANNOTATION, "true")]);
        let mut s = settings();
        s.audience = None;
        assert!(matches!(identity(&s, &on), Err(GcpBackendError::NotConfigured)));
        let mut s = settings();
        s.flow = AuthFlow::DockercfgUrl;
        assert!(matches!(identity(&s, &on), Err(GcpBackendError::NotInFlow { .. })));
        let mut s = settings();
        s.require_workload_identity = true;
        assert!(matches!(
            identity(&s, &annotations(&[])),
            Err(GcpBackendError::WorkloadIdentityRequired)
        ));
        assert_eq!(identity(&s, &on).unwrap(), Identity::Federated);
    }

    #[test]
    fn impersonated_accounts_are_checked_and_allow_listed() {
        let on = (WORKLOAD_IDENTITY_ANNOTATION, "true");
        let mut s = settings();
        s.allowed_service_accounts = vec![
            "*@p.iam.gserviceaccount.com".into(),
            "ci@other.iam.gserviceaccount.com".into(),
        ];
        let with = |account: &str| identity(&s, &annotations(&[on, (DEFAULT_SERVICE_ACCOUNT_ANNOTATION, account)]));
        assert!(with(GSA).is_ok());
        assert!(with("CI@other.iam.gserviceaccount.com").is_ok());
        assert!(matches!(
            with("app@q.iam.gserviceaccount.com"),
            Err(GcpBackendError::AccountNotAllowed { .. })
        ));
        for bad in [
            "",
            "builder",
            "a@b@p.iam.gserviceaccount.com",
            "x@evil.example.com",
            "a/b@p.iam.gserviceaccount.com",
            "a@p.iam.gserviceaccount.com/x",
        ] {
            assert!(
                matches!(with(bad), Err(GcpBackendError::BadServiceAccount { .. })),
                "{bad:?}"
            );
        }
        assert!(check_service_account("123-compute@developer.gserviceaccount.com").is_ok());
        assert!(account_allowed(&[], "anyone@x.gserviceaccount.com"));
    }

    #[test]
    fn scopes_that_can_pull() {
        let scopes = |list: &[&str]| list.iter().map(|s| format!("{SCOPE_BASE}{s}")).collect::<Vec<_>>();
        for ok in [
            &["devstorage.read_only"][..],
            &["logging.write", "devstorage.read_write"],
            &["cloud-platform"],
            &["cloud-platform.read-only"],
        ] {
            assert!(can_pull(&scopes(ok)), "{ok:?}");
        }
        for no in [&[][..], &["logging.write", "compute.readonly"]] {
            assert!(!can_pull(&scopes(no)), "{no:?}");
        }
        assert_eq!(
            shown_scopes(&scopes(&["logging.write", "compute.readonly"])),
            "logging.write, compute.readonly"
        );
    }

    #[test]
    fn dockercfg_in_both_forms_without_quoting_values() {
        let legacy = br#"{"https://registry.example.com": {"auth": "dXNlcjpwYXNz", "email": "a@b"}}"#;
        let auth = parse_dockercfg(legacy, "attr").unwrap();
        let entry = &auth["https://registry.example.com"];
        assert_eq!(
            (entry.username.as_str(), entry.password.expose_secret()),
            ("user", "pass")
        );
        let modern = br#"{"auths": {"reg.io": {"username": "u", "password": "p"}}}"#;
        assert_eq!(parse_dockercfg(modern, "attr").unwrap().len(), 1);
        let bad = br#"{"reg.io": {"auth": "c2VjcmV0LXdpdGhvdXQtY29sb24="}}"#;
        let err = parse_dockercfg(bad, "attr").unwrap_err().to_string();
        assert!(
            err.starts_with("attr: [\"reg.io\"].auth decodes to text without"),
            "{err}"
        );
        assert!(!err.contains("c2Vj"), "{err}");
        for (input, want) in [
            (&b"{"[..], "is not valid JSON"),
            (b"[1]", "must be an object"),
            (b"{}", "holds no entry"),
            (br#"{"reg.io": {}}"#, "holds no entry"),
        ] {
            let err = parse_dockercfg(input, "attr").unwrap_err().to_string();
            assert!(err.contains(want), "{err}");
        }
    }

    #[test]
    fn dockercfg_urls_pass_the_endpoint_policy_without_being_quoted_whole() {
        assert!(dockercfg_endpoint("https://storage.googleapis.com/b/config.json?X-Goog-Signature=abc").is_ok());
        assert!(dockercfg_endpoint("http://127.0.0.1:8080/config.json").is_ok());
        for (raw, want) in [
            (
                "http://config.example.com/c.json?sig=s3cr3t",
                "http://config.example.com/c.json, which is neither https",
            ),
            ("https://u:s3cr3t@config.example.com/c.json", "carries a username"),
            ("file:///etc/passwd", "is neither https"),
            ("not a url s3cr3t", "a value, which is not a URL"),
        ] {
            let err = dockercfg_endpoint(raw).unwrap_err().to_string();
            assert!(err.contains(want), "{raw}: {err}");
            assert!(!err.contains("s3cr3t"), "{err}");
        }
    }
}
