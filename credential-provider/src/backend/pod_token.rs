//! The pod's service-account token, as kubelet sends it (KEP-4412): only in
//! `v1` requests of a provider with `tokenAttributes`. Every backend that
//! uses the token reads it here.

use secrecy::SecretString;

use crate::protocol::{ApiVersion, CredentialRequest};

/// Why a request carries no pod token, worded to follow "kubelet sent";
/// each backend adds what to change in the kubelet config for its use.
#[derive(Debug, Clone, Copy, thiserror::Error, PartialEq, Eq)]
pub enum NoPodToken {
    /// Only `v1` requests carry a service-account token.
    #[error("a {0} request, which carries no service-account token")]
    NotV1(&'static str),
    /// A `v1` request of a provider without `tokenAttributes` (or for a pod
    /// without a service account).
    #[error("no serviceAccountToken")]
    Missing,
}

/// The pod's service-account token of `request`, or why there is none.
pub fn pod_token(request: &CredentialRequest) -> Result<&SecretString, NoPodToken> {
    if request.api_version != ApiVersion::V1 {
        return Err(NoPodToken::NotV1(request.api_version.as_str()));
    }
    request.service_account_token.as_ref().ok_or(NoPodToken::Missing)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use secrecy::ExposeSecret;

    use super::*;

    fn request(api_version: ApiVersion, token: Option<&str>) -> CredentialRequest {
        CredentialRequest {
            api_version,
            image: "registry.example.com/app".into(),
            service_account_token: token.map(SecretString::from),
            service_account_annotations: BTreeMap::new(),
        }
    }

    #[test]
    fn only_a_v1_request_carries_the_token() {
        let v1 = request(ApiVersion::V1, Some("tok"));
        assert_eq!(pod_token(&v1).map(|t| t.expose_secret()), Ok("tok"));
        assert_eq!(
            pod_token(&request(ApiVersion::V1, None)).err(),
            Some(NoPodToken::Missing)
        );
        // Whatever a decoder left in it, an older request has no token.
        let old = request(ApiVersion::V1Beta1, Some("tok"));
        assert_eq!(
            pod_token(&old).err(),
            Some(NoPodToken::NotV1(ApiVersion::V1Beta1.as_str()))
        );
        assert_eq!(
            NoPodToken::NotV1(ApiVersion::V1Beta1.as_str()).to_string(),
            format!(
                "a {} request, which carries no service-account token",
                ApiVersion::V1Beta1.as_str()
            )
        );
    }
}
