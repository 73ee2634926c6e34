//! Entra ID's token endpoint (`POST {authority}{tenant}/oauth2/v2.0/token`,
//! `grant_type=client_credentials`, `scope={resource}/.default`) with a
//! service principal's secret ([`ClientSecretCredential`]) or a federated
//! client assertion ([`ClientAssertionCredential`], workload identity), as
//! azidentity's credentials call it. A refusal is an API error ([`crate::api::CallErrorKind::Api`]) with
//! Entra's `error` and `error_description` (`invalid_client`, `AADSTS…`),
//! the secret or assertion cut out.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use secrecy::{ExposeSecret, SecretString};
use url::Url;

use super::Call;
use super::environment::{scope_for, token_url};
use super::error::AzureError;
use super::token::{AccessToken, TokenFuture, TokenSource, parse_token_answer};
use crate::api::InvalidName;
use crate::endpoint::SecureEndpoint;

/// How long one token call may take unless told otherwise.
pub const DEFAULT_TOKEN_TIMEOUT: Duration = Duration::from_secs(30);
/// `client_assertion_type` for a JWT assertion.
pub const JWT_BEARER_ASSERTION: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
/// The most read from a federated token file (a service-account JWT is a
/// few KB).
pub const MAX_ASSERTION_FILE: u64 = 64 << 10;

const ENTRA: &str = "Entra ID";

/// An Entra ID token endpoint and the fields every grant sends.
#[derive(Debug, Clone)]
struct Entra {
    http: reqwest::Client,
    url: Url,
    client_id: String,
    scope: String,
    timeout: Duration,
}

impl Entra {
    fn new(
        http: reqwest::Client,
        authority: &SecureEndpoint,
        tenant: &str,
        client_id: &str,
        resource: &str,
    ) -> Result<Self, AzureError> {
        let url = token_url(authority, tenant)?;
        if client_id.trim().is_empty() {
            return Err(AzureError::InvalidName(InvalidName::new(
                "client ID",
                client_id,
                "it is empty",
            )));
        }
        Ok(Self {
            http,
            url,
            client_id: client_id.trim().to_owned(),
            scope: scope_for(resource),
            timeout: DEFAULT_TOKEN_TIMEOUT,
        })
    }

    /// POSTs the client-credentials grant with `credential` (the secret's or
    /// the assertion's fields); `secret` is cut out of any refusal.
    async fn fetch(&self, credential: &[(&str, &str)], secret: &str) -> Result<AccessToken, AzureError> {
        let mut form = vec![
            ("grant_type", "client_credentials"),
            ("client_id", self.client_id.as_str()),
            ("scope", self.scope.as_str()),
        ];
        form.extend_from_slice(credential);
        let request = self.http.post(self.url.clone()).form(&form);
        let deadline = Instant::now() + self.timeout;
        let body = Call::send(ENTRA, &self.url, request, deadline, &[secret]).await?;
        let json = Call::json(ENTRA, &self.url, &body)?;
        parse_token_answer(&json).map_err(|problem| Call::garbage(ENTRA, &self.url, problem))
    }
}

/// Tokens for one resource for a service principal, with its secret.
#[derive(Clone)]
pub struct ClientSecretCredential {
    entra: Entra,
    secret: SecretString,
}

impl std::fmt::Debug for ClientSecretCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientSecretCredential")
            .field("url", &self.entra.url.as_str())
            .field("client_id", &self.entra.client_id)
            .field("scope", &self.entra.scope)
            .field("secret", &crate::logging::REDACTED)
            .finish()
    }
}

impl ClientSecretCredential {
    /// `client_id`'s tokens for `resource` from the tenant's token endpoint
    /// under `authority` (the cloud's [`super::CloudEndpoints::authority_host`]).
    pub fn new(
        http: reqwest::Client,
        authority: &SecureEndpoint,
        tenant: &str,
        client_id: &str,
        secret: SecretString,
        resource: &str,
    ) -> Result<Self, AzureError> {
        let entra = Entra::new(http, authority, tenant, client_id, resource)?;
        Ok(Self { entra, secret })
    }

    /// Each call within `timeout` instead of [`DEFAULT_TOKEN_TIMEOUT`].
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.entra.timeout = timeout;
        self
    }

    pub fn url(&self) -> &Url {
        &self.entra.url
    }

    pub async fn fetch(&self) -> Result<AccessToken, AzureError> {
        let secret = self.secret.expose_secret();
        self.entra.fetch(&[("client_secret", secret)], secret).await
    }
}

impl TokenSource<AzureError> for ClientSecretCredential {
    fn token(&self) -> TokenFuture<'_> {
        Box::pin(self.fetch())
    }

    fn origin(&self) -> Option<(&'static str, String)> {
        Some((ENTRA, crate::http::shown_url(&self.entra.url)))
    }
}

/// Where a client assertion comes from.
#[derive(Clone)]
pub enum Assertion {
    /// A token already at hand (a pod's service-account token from kubelet).
    Token(SecretString),
    /// A file read anew on every fetch (a projected token kubelet rotates).
    File(PathBuf),
}

impl std::fmt::Debug for Assertion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Assertion::Token(_) => f.write_str("Token(<redacted>)"),
            Assertion::File(path) => f.debug_tuple("File").field(path).finish(),
        }
    }
}

/// Tokens for one resource for an application, with a federated client
/// assertion (workload identity).
#[derive(Debug, Clone)]
pub struct ClientAssertionCredential {
    entra: Entra,
    assertion: Assertion,
}

impl ClientAssertionCredential {
    /// As [`ClientSecretCredential::new`], with `assertion` in place of a secret.
    pub fn new(
        http: reqwest::Client,
        authority: &SecureEndpoint,
        tenant: &str,
        client_id: &str,
        assertion: Assertion,
        resource: &str,
    ) -> Result<Self, AzureError> {
        let entra = Entra::new(http, authority, tenant, client_id, resource)?;
        Ok(Self { entra, assertion })
    }

    /// Each call within `timeout` instead of [`DEFAULT_TOKEN_TIMEOUT`].
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.entra.timeout = timeout;
        self
    }

    pub fn url(&self) -> &Url {
        &self.entra.url
    }

    pub async fn fetch(&self) -> Result<AccessToken, AzureError> {
        let assertion = match &self.assertion {
            Assertion::Token(token) => token.clone(),
            Assertion::File(path) => {
                let text = crate::files::read_regular_to_string(path, MAX_ASSERTION_FILE)
                    .map_err(AzureError::AssertionFile)?;
                let text = text.trim();
                if text.is_empty() {
                    return Err(AzureError::InvalidName(InvalidName::new(
                        "federated token file",
                        &path.display().to_string(),
                        "it is empty",
                    )));
                }
                SecretString::from(text.to_owned())
            }
        };
        let assertion = assertion.expose_secret();
        let fields = [
            ("client_assertion_type", JWT_BEARER_ASSERTION),
            ("client_assertion", assertion),
        ];
        self.entra.fetch(&fields, assertion).await
    }
}

impl TokenSource<AzureError> for ClientAssertionCredential {
    fn token(&self) -> TokenFuture<'_> {
        Box::pin(self.fetch())
    }

    fn origin(&self) -> Option<(&'static str, String)> {
        Some((ENTRA, crate::http::shown_url(&self.entra.url)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_secrets() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder().build().unwrap();
        let authority = SecureEndpoint::parse("authority", "https://login.microsoftonline.com/").unwrap();
        let credential = ClientSecretCredential::new(
            http.clone(),
            &authority,
            "tenant",
            "client",
            SecretString::from("Qx8Q~hunter2-secret"),
            "https://management.core.windows.net/",
        )
        .unwrap();
        let shown = format!("{credential:?}");
        assert!(!shown.contains("hunter2") && shown.contains("<redacted>"), "{shown}");
        assert_eq!(
            credential.url().as_str(),
            "https://login.microsoftonline.com/tenant/oauth2/v2.0/token"
        );
        let assertion = ClientAssertionCredential::new(
            http,
            &authority,
            "tenant",
            "client",
            Assertion::Token(SecretString::from("eyJhbGciOi.assertion.sig")),
            "r",
        )
        .unwrap();
        assert!(!format!("{assertion:?}").contains("eyJhbGciOi"));
    }
}
