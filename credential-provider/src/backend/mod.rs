//! Where credentials come from. Each backend turns a kubelet request into
//! [`Credentials`]; the protocol layer puts them in kubelet's wire format.
//!
//! The rules backends share are read once, here: the pod's token
//! ([`pod_token`]), how long an expiring credential may be cached
//! ([`cache_window`]), `--timeout` ([`within_timeout`]) and the user agent
//! ([`USER_AGENT`]); each backend's HTTP client comes from
//! [`cloud_access::http::http_client_for`], given the endpoints it calls.

use std::future::Future;

use crate::protocol::{CredentialRequest, Credentials};

pub mod acr;
mod cache_window;
pub mod ecr;
pub mod gcp;
pub mod mirrored;
pub mod passthrough;
mod pod_token;
pub mod static_file;
mod timeout;
pub mod token_exchange;

pub use cache_window::cache_window;
pub use pod_token::{NoPodToken, pod_token};
pub use timeout::{TimedOut, within_timeout};

pub use acr::{AcrBackend, AcrError};
pub use ecr::{EcrBackend, EcrError};
pub use gcp::{GcpBackend, GcpBackendError};
pub use mirrored::{Mirrored, MirroredError};
pub use passthrough::{PassthroughBackend, PassthroughError};
pub use static_file::{DockerConfigError, StaticBackend};
pub use token_exchange::{TokenExchangeBackend, TokenExchangeError};

/// What every backend that calls out sends as its `User-Agent`.
pub const USER_AGENT: &str = concat!("cloud-credential-provider/", env!("CARGO_PKG_VERSION"));

/// One source of registry credentials.
pub trait CredentialBackend {
    /// Answers one request, or says what failed and how to fix it. The error
    /// text must never contain a credential.
    fn credentials(
        &self,
        request: &CredentialRequest,
    ) -> impl Future<Output = Result<Credentials, BackendError>> + Send;
}

#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error(transparent)]
    DockerConfig(#[from] DockerConfigError),
    #[error(transparent)]
    Passthrough(#[from] PassthroughError),
    #[error(transparent)]
    TokenExchange(#[from] TokenExchangeError),
    #[error(transparent)]
    Ecr(#[from] EcrError),
    #[error(transparent)]
    Gcp(#[from] GcpBackendError),
    #[error(transparent)]
    Acr(#[from] AcrError),
    #[error(transparent)]
    Mirrored(#[from] MirroredError),
}
