//! Google Security Token Service: a Kubernetes service-account token (a
//! JWT) exchanged for a federated Google access token, as workload identity
//! does and as auth-provider-gcp's KEP-4412 flow (PR #1202) calls it.
//!
//! The subject token is the pod's credential: it is sent in the body only,
//! and cut out of anything STS sends back before an error shows it.

use std::fmt;
use std::time::Instant;

use secrecy::{ExposeSecret, SecretString};
use serde_json::json;
use url::Url;

use super::Call;
use super::error::GcpError;
use super::token::AccessToken;
use crate::endpoint::SecureEndpoint;

/// Google STS, as auth-provider-gcp calls it.
pub const STS_ENDPOINT: &str = "https://sts.googleapis.com/";

/// The scope auth-provider-gcp asks for.
pub const CLOUD_PLATFORM_SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

const SERVICE: &str = "sts";
const GRANT_TYPE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";
const JWT_TYPE: &str = "urn:ietf:params:oauth:token-type:jwt";

/// `identitynamespace:<project>.svc.id.goog:<provider>`: the audience of a
/// GKE-style workload identity pool for `project` whose identity provider
/// is `provider` (auth-provider-gcp's `--project-id` and
/// `--identity-provider`).
pub fn workload_identity_audience(project: &str, provider: &str) -> String {
    format!("identitynamespace:{project}.svc.id.goog:{provider}")
}

/// Exchanges at one STS endpoint.
#[derive(Clone)]
pub struct StsClient {
    http: reqwest::Client,
    url: Url,
}

impl fmt::Debug for StsClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StsClient")
            .field("url", &self.url.as_str())
            .finish_non_exhaustive()
    }
}

impl StsClient {
    /// `endpoint` is [`STS_ENDPOINT`] or the one the program was given (never
    /// one from a request or an annotation); calls go to `{endpoint}v1/token`.
    pub fn new(http: reqwest::Client, endpoint: &SecureEndpoint) -> Result<Self, GcpError> {
        let url = Call::join(SERVICE, &super::base_url(endpoint), "v1/token")?;
        Ok(Self { http, url })
    }

    /// The URL exchanges are posted to.
    pub fn url(&self) -> &Url {
        &self.url
    }

    /// `POST /v1/token`: `subject_token` (a JWT) for a federated access
    /// token for `audience` with `scope`, before `deadline`. A refusal is an
    /// API error ([`crate::api::CallErrorKind::Api`]) with STS's `error`
    /// (`invalid_grant`, …) as the reason and its `error_description` as the
    /// message, without the subject token.
    pub async fn exchange_token(
        &self,
        audience: &str,
        subject_token: &SecretString,
        scope: &str,
        deadline: Instant,
    ) -> Result<AccessToken, GcpError> {
        let subject = subject_token.expose_secret();
        let body = json!({
            "audience": audience,
            "grant_type": GRANT_TYPE,
            "requested_token_type": ACCESS_TOKEN_TYPE,
            "scope": scope,
            "subject_token": subject,
            "subject_token_type": JWT_TYPE,
        });
        let request = self.http.post(self.url.clone()).json(&body);
        let answer = Call::send(SERVICE, &self.url, request, deadline, &[subject]).await?;
        let json = Call::json(SERVICE, &self.url, &answer)?;
        parse_exchange_answer(&json).map_err(|problem| Call::garbage(SERVICE, &self.url, problem))
    }
}

/// STS's answer to an exchange (`{"access_token", "issued_token_type",
/// "token_type": "Bearer", "expires_in"}`). A problem names what is wrong
/// and never quotes the answer (it holds the token).
pub fn parse_exchange_answer(json: &serde_json::Value) -> Result<AccessToken, &'static str> {
    let token = crate::token::bearer_access_token(json)?;
    let expires_in = super::token::expires_in(&json["expires_in"]).ok_or("the answer has no valid expires_in")?;
    Ok(AccessToken::new(token, expires_in))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audiences_name_the_pool_and_provider() {
        assert_eq!(
            workload_identity_audience(
                "my-project",
                "https://container.googleapis.com/v1/projects/my-project/locations/us-central1/clusters/c1"
            ),
            "identitynamespace:my-project.svc.id.goog:https://container.googleapis.com/v1/projects/my-project/locations/us-central1/clusters/c1"
        );
    }
}
