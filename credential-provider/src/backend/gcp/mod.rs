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

use std::time::Duration;

use cloud_access::SecureEndpoint;
use cloud_access::gcp::{self, GceMetadata};
use url::Url;

use super::{BackendError, CredentialBackend, NoPodToken, TimedOut, within_timeout};
use crate::protocol::{CredentialRequest, Credentials};

mod dockercfg;
mod gcr;
mod identity;

pub use dockercfg::{DOCKERCFG_ATTRIBUTE, DOCKERCFG_URL_ATTRIBUTE, parse_dockercfg};
pub use gcr::{GOOGLE_REGISTRY_KEYS, USERNAME, can_pull};
pub use identity::{
    DEFAULT_SERVICE_ACCOUNT_ANNOTATION, Identity, WORKLOAD_IDENTITY_ANNOTATION, account_allowed, check_service_account,
    identity,
};

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
        "the pod's service account opts in to workload identity ({WORKLOAD_IDENTITY_ANNOTATION}), but kubelet sent {0}: give this provider apiVersion credentialprovider.kubelet.k8s.io/v1 and tokenAttributes (serviceAccountTokenAudience, cacheType: ServiceAccount) in the kubelet CredentialProviderConfig"
    )]
    NoToken(NoPodToken),
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
    #[error(transparent)]
    TimedOut(#[from] TimedOut),
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
        let waiting_for = || format!("the metadata server or Google's APIs ({} flow)", flow.name());
        let work = |deadline| async move {
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
        within_timeout(self.settings.timeout, waiting_for, work).await
    }

    fn metadata(&self) -> Result<GceMetadata, GcpBackendError> {
        GceMetadata::new(self.settings.metadata_base.clone(), self.settings.timeout).map_err(|e| Box::new(e).into())
    }
}

impl CredentialBackend for GcpBackend {
    async fn credentials(&self, request: &CredentialRequest) -> Result<Credentials, BackendError> {
        Ok(self.answer(request).await?)
    }
}
