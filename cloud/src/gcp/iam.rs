//! IAM Credentials `generateAccessToken`: a Google service account's token,
//! obtained with a federated token (from [`super::StsClient`]) whose
//! principal may impersonate that account (`roles/iam.workloadIdentityUser`
//! or `roles/iam.serviceAccountTokenCreator` on it). This is the second step
//! of workload identity for a Kubernetes service account annotated with a
//! Google service account.

use std::fmt;
use std::time::{Duration, Instant};

use secrecy::{ExposeSecret, SecretString};
use serde_json::json;
use url::Url;

use super::Call;
use super::error::GcpError;
use super::token::AccessToken;
use crate::endpoint::SecureEndpoint;

/// The IAM Service Account Credentials API.
pub const IAM_CREDENTIALS_ENDPOINT: &str = "https://iamcredentials.googleapis.com/";

const SERVICE: &str = "iamcredentials";

/// Calls to one IAM Credentials endpoint.
#[derive(Clone)]
pub struct IamCredentialsClient {
    http: reqwest::Client,
    base: Url,
}

impl fmt::Debug for IamCredentialsClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IamCredentialsClient")
            .field("base", &self.base.as_str())
            .finish_non_exhaustive()
    }
}

impl IamCredentialsClient {
    /// `endpoint` is [`IAM_CREDENTIALS_ENDPOINT`] or the one the program was
    /// given (never one from an annotation).
    pub fn new(http: reqwest::Client, endpoint: &SecureEndpoint) -> Self {
        Self {
            http,
            base: super::base_url(endpoint),
        }
    }

    pub fn base(&self) -> &Url {
        &self.base
    }

    /// `POST v1/projects/-/serviceAccounts/{service_account}:generateAccessToken`
    /// with `{"scope": scopes, "lifetime": "<seconds>s"}`, authorized by
    /// `bearer` (the federated token), before `deadline`. The token comes
    /// back with its `expireTime`. A refusal is an API error ([`crate::api::CallErrorKind::Api`]) with IAM's
    /// reason (`IAM_PERMISSION_DENIED`) and status (`PERMISSION_DENIED`),
    /// without the bearer token.
    pub async fn generate_access_token(
        &self,
        service_account: &str,
        scopes: &[&str],
        lifetime: Duration,
        bearer: &SecretString,
        deadline: Instant,
    ) -> Result<AccessToken, GcpError> {
        let account = super::check_name("service account", service_account)?;
        let path = format!("v1/projects/-/serviceAccounts/{account}:generateAccessToken");
        let url = Call::join(SERVICE, &self.base, &path)?;
        let body = json!({
            "scope": scopes,
            "lifetime": format!("{}s", lifetime.as_secs()),
        });
        let secret = bearer.expose_secret();
        let request = self.http.post(url.clone()).bearer_auth(secret).json(&body);
        let answer = Call::send(SERVICE, &url, request, deadline, &[secret]).await?;
        let json = Call::json(SERVICE, &url, &answer)?;
        parse_access_token_answer(&json).map_err(|problem| Call::garbage(SERVICE, &url, problem))
    }
}

/// `generateAccessToken`'s answer (`{"accessToken", "expireTime"}`, the
/// time in RFC 3339 UTC). A problem names what is wrong and never quotes the
/// answer (it holds the token).
pub fn parse_access_token_answer(json: &serde_json::Value) -> Result<AccessToken, &'static str> {
    let token = json["accessToken"]
        .as_str()
        .filter(|t| !t.is_empty())
        .ok_or("the answer has no accessToken")?;
    let expires_at = json["expireTime"]
        .as_str()
        .and_then(|t| humantime::parse_rfc3339(t.trim()).ok())
        .ok_or("the answer has no valid expireTime (an RFC 3339 UTC time)")?;
    Ok(AccessToken::expiring_at(
        SecretString::from(token.to_owned()),
        expires_at,
    ))
}
