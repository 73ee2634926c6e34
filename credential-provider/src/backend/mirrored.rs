//! Any backend behind registry mirrors ([`crate::mirror`]): an image the
//! runtime pulls through a mirror is asked of the backend as the image on
//! the mirror, and the answer filed under the image's own registry.

use super::{BackendError, CredentialBackend};
use crate::image;
use crate::mirror::{self, MirrorError, MirrorSettings, Mirroring};
use crate::protocol::{CredentialRequest, Credentials};

/// `inner` with `mirrors` applied; with no mirrors configured it is
/// `inner` (no file read).
pub struct Mirrored<B> {
    inner: B,
    mirrors: MirrorSettings,
}

impl<B> Mirrored<B> {
    pub fn new(inner: B, mirrors: MirrorSettings) -> Self {
        Mirrored { inner, mirrors }
    }
}

/// A backend's failure for the image on a mirror, said with the mapping.
#[derive(Debug, thiserror::Error)]
pub enum MirroredError {
    #[error("{0}")]
    Mirrors(#[from] MirrorError),
    #[error("{repository} is pulled through the mirror {target} ({origin}), whose credentials failed: {source}")]
    Backend {
        repository: String,
        target: String,
        origin: mirror::Origin,
        source: Box<BackendError>,
    },
}

impl<B: CredentialBackend + Sync> CredentialBackend for Mirrored<B> {
    async fn credentials(&self, request: &CredentialRequest) -> Result<Credentials, BackendError> {
        if self.mirrors.is_empty() {
            return self.inner.credentials(request).await;
        }
        let repository = image::repository(&request.image);
        let Some(mirroring) = self.mirrors.resolve(&repository).map_err(MirroredError::from)? else {
            return self.inner.credentials(request).await;
        };
        tracing::debug!(
            image = %repository,
            mirror = %mirroring.target,
            origin = %mirroring.origin,
            "asking for the mirror's credentials"
        );
        let asked = CredentialRequest {
            api_version: request.api_version,
            image: mirroring.target.clone(),
            service_account_token: request.service_account_token.clone(),
            service_account_annotations: request.service_account_annotations.clone(),
        };
        let answer = self
            .inner
            .credentials(&asked)
            .await
            .map_err(|source| failed(&mirroring, source))?;
        Ok(mirror::rekey(answer, &mirroring))
    }
}

fn failed(mirroring: &Mirroring, source: BackendError) -> MirroredError {
    MirroredError::Backend {
        repository: mirroring.repository.clone(),
        target: mirroring.target.clone(),
        origin: mirroring.origin.clone(),
        source: Box::new(source),
    }
}
