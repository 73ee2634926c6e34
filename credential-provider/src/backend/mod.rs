//! Where credentials come from. Each backend turns a kubelet request into
//! [`Credentials`]; the protocol layer puts them in kubelet's wire format.
//! Cloud registries join as further backends (ECR and Google's Artifact
//! Registry / Container Registry are here; ACR comes next).

use std::future::Future;

use crate::protocol::{CredentialRequest, Credentials};

pub mod acr;
pub mod ecr;
pub mod gcp;
pub mod passthrough;
pub mod static_file;
pub mod token_exchange;

pub use acr::{AcrBackend, AcrError};
pub use ecr::{EcrBackend, EcrError};
pub use gcp::{GcpBackend, GcpBackendError};
pub use passthrough::{PassthroughBackend, PassthroughError};
pub use static_file::{DockerConfigError, StaticBackend};
pub use token_exchange::{TokenExchangeBackend, TokenExchangeError};

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
}
