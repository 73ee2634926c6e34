//! `passthrough`: the pod's projected service-account token (KEP-4412) is the
//! registry password. For registries that trust the cluster's issuer
//! directly, such as Harbor with username `jwt`.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use secrecy::ExposeSecret;

use super::{BackendError, CredentialBackend, NoPodToken, cache_window, pod_token};
use crate::image;
use crate::jwt::{self, JwtError};
use crate::protocol::{CacheKeyType, CredentialRequest, Credentials, RegistryAuth};

/// The fix for a request without a token, shared with `token-exchange`.
pub const TOKEN_FIX: &str = "give this provider apiVersion credentialprovider.kubelet.k8s.io/v1 and tokenAttributes (serviceAccountTokenAudience, cacheType: Token, requireServiceAccount: true) in the kubelet CredentialProviderConfig";

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PassthroughError {
    #[error("kubelet sent {0}: {TOKEN_FIX}")]
    NoToken(#[from] NoPodToken),
    #[error("{0}")]
    Jwt(#[from] JwtError),
    #[error(
        "serviceAccountToken expired {seconds}s ago: kubelet sends a fresh token, so check the node's clock (timedatectl, chrony)"
    )]
    Expired { seconds: u64 },
}

#[derive(Debug, Clone)]
pub struct PassthroughBackend {
    username: String,
    expiry_margin: Duration,
    now: fn() -> SystemTime,
}

impl PassthroughBackend {
    pub fn new(username: String, expiry_margin: Duration) -> Self {
        Self::with_clock(username, expiry_margin, SystemTime::now)
    }

    pub fn with_clock(username: String, expiry_margin: Duration, now: fn() -> SystemTime) -> Self {
        Self {
            username,
            expiry_margin,
            now,
        }
    }

    fn answer(&self, request: &CredentialRequest) -> Result<Credentials, PassthroughError> {
        let token = pod_token(request)?;
        let expires_at = jwt::expiry("serviceAccountToken", token.expose_secret())?;
        let now = (self.now)();
        if let Ok(ago) = now.duration_since(expires_at) {
            return Err(PassthroughError::Expired { seconds: ago.as_secs() });
        }
        let repository = image::repository(&request.image);
        let mut auth = BTreeMap::new();
        auth.insert(
            image::registry(&repository).to_owned(),
            RegistryAuth {
                username: self.username.clone(),
                password: token.clone(),
            },
        );
        Ok(Credentials {
            cache_key_type: CacheKeyType::Registry,
            cache_duration: Some(cache_window(expires_at, now, self.expiry_margin, None)),
            auth,
        })
    }
}

impl CredentialBackend for PassthroughBackend {
    async fn credentials(&self, request: &CredentialRequest) -> Result<Credentials, BackendError> {
        Ok(self.answer(request)?)
    }
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use secrecy::SecretString;

    use super::*;
    use crate::jwt::test_tokens::jwt;
    use crate::protocol::ApiVersion;

    fn at_1000() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_000)
    }

    fn request(version: ApiVersion, token: Option<&str>) -> CredentialRequest {
        CredentialRequest {
            api_version: version,
            image: "harbor.example.com/team/app".into(),
            service_account_token: token.map(SecretString::from),
            service_account_annotations: BTreeMap::new(),
        }
    }

    #[test]
    fn returns_the_token_until_its_expiry_less_the_margin() {
        let backend = PassthroughBackend::with_clock("jwt".into(), Duration::from_secs(60), at_1000);
        let token = jwt(r#"{"exp":4600}"#);
        let answer = backend.answer(&request(ApiVersion::V1, Some(&token))).unwrap();
        assert_eq!(answer.cache_duration, Some(Duration::from_secs(3_540)));
        let entry = &answer.auth["harbor.example.com"];
        assert_eq!(entry.username, "jwt");
        assert_eq!(entry.password.expose_secret(), token);
    }

    #[test]
    fn refuses_requests_without_a_token() {
        let backend = PassthroughBackend::with_clock("jwt".into(), Duration::ZERO, at_1000);
        assert_eq!(
            backend.answer(&request(ApiVersion::V1, None)).unwrap_err(),
            PassthroughError::NoToken(NoPodToken::Missing)
        );
        assert!(matches!(
            backend.answer(&request(ApiVersion::V1Beta1, None)).unwrap_err(),
            PassthroughError::NoToken(NoPodToken::NotV1(_))
        ));
    }

    #[test]
    fn refuses_expired_and_malformed_tokens() {
        let backend = PassthroughBackend::with_clock("jwt".into(), Duration::ZERO, at_1000);
        let expired = jwt(r#"{"exp":400}"#);
        assert_eq!(
            backend.answer(&request(ApiVersion::V1, Some(&expired))).unwrap_err(),
            PassthroughError::Expired { seconds: 600 }
        );
        assert!(matches!(
            backend.answer(&request(ApiVersion::V1, Some("not-a-jwt"))).unwrap_err(),
            PassthroughError::Jwt(JwtError::Malformed { .. })
        ));
    }
}
