//! The `gcr` flow: an access token (the node's, or under workload identity
//! the pod's federated or impersonated one) answered as `_token` under the
//! image's registry and Google's.

use std::time::{Duration, Instant, SystemTime};

use cloud_access::gcp::{self, AccessToken, IamCredentialsClient, StsClient};

use super::{GcpBackend, GcpBackendError, Identity};
use crate::backend::{USER_AGENT, cache_window, pod_token};
use crate::image;
use crate::protocol::{CacheKeyType, CredentialRequest, Credentials, RegistryAuth};

/// The username Google's registries take with an access token, as
/// auth-provider-gcp sends it.
pub const USERNAME: &str = "_token";

/// The registries an answer of the token flows is keyed by, besides the
/// image's own (auth-provider-gcp's list).
pub const GOOGLE_REGISTRY_KEYS: [&str; 4] = ["container.cloud.google.com", "gcr.io", "*.gcr.io", "*.pkg.dev"];

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

impl GcpBackend {
    /// The default service account's token, once its scopes are known to
    /// allow pulls.
    pub(super) async fn node_token(&self) -> Result<AccessToken, GcpBackendError> {
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

    pub(super) async fn workload_identity_token(
        &self,
        request: &CredentialRequest,
        identity: &Identity,
        deadline: Instant,
    ) -> Result<AccessToken, GcpBackendError> {
        let subject = pod_token(request).map_err(GcpBackendError::NoToken)?;
        let audience = self
            .settings
            .audience
            .as_deref()
            .ok_or(GcpBackendError::NotConfigured)?;
        let endpoints = [
            self.settings.sts_endpoint.url(),
            self.settings.iam_credentials_endpoint.url(),
        ];
        let http = cloud_access::http::http_client_for(USER_AGENT, self.settings.timeout, endpoints)?;
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
    pub(super) fn token_answer(&self, request: &CredentialRequest, token: &AccessToken) -> Credentials {
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
        let cache_duration = cache_window(
            token.expires_at(),
            SystemTime::now(),
            self.settings.expiry_margin,
            self.settings.cache_duration,
        );
        Credentials {
            // Per registry: the answer holds the image's own registry. Under
            // KEP-4412 kubelet adds the service account (cacheType
            // ServiceAccount) or the token (Token) to the key.
            cache_key_type: CacheKeyType::Registry,
            cache_duration: Some(cache_duration),
            auth,
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
