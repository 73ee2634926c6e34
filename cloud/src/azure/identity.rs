//! Entra ID credentials, each a [`TokenSource`] of tokens for one resource,
//! and the one the cloud config names ([`credential_from_config`]):
//!
//! - [`ManagedIdentityCredential`]: IMDS (`GET {imds}metadata/identity/oauth2/token
//!   ?api-version=2018-02-01&resource=…` with `Metadata: true`), for the
//!   system-assigned identity or a user-assigned one (`client_id=` or
//!   `msi_res_id=`), as MSAL asks it, retried as MSAL retries it (three
//!   tries a second apart on 404, 410, 429 and 5xx, IMDS's answers while it
//!   starts or is busy). Through the crate's metadata client: never
//!   proxied, no redirects, bounded answers.
//! - [`ClientSecretCredential`] (in [`super::entra`]): a service principal's secret, `POST
//!   {authority}{tenant}/oauth2/v2.0/token` with `grant_type=client_credentials`.
//! - [`ClientAssertionCredential`] (in [`super::entra`]): the same endpoint with a client
//!   assertion (`client_assertion_type=urn:ietf:params:oauth:client-assertion-type:jwt-bearer`):
//!   a federated Kubernetes service-account token, given or read from a
//!   file on every fetch (kubelet rotates it).
//!
//! Refusals carry Entra's (or IMDS's) `error` and `error_description`, with
//! the secret or assertion cut out. Put a [`super::CachedTokenSource`] in
//! front of a credential to keep its token.

use std::sync::Arc;
use std::time::{Duration, Instant};

use url::Url;

use super::Call;
use super::config::{AuthMethod, AzureConfig, UserAssignedIdentity};
pub use super::entra::{Assertion, ClientAssertionCredential, ClientSecretCredential, DEFAULT_TOKEN_TIMEOUT};
use super::environment::{CloudEndpoints, resource_of};
use super::error::AzureError;
use super::token::{AccessToken, TokenFuture, TokenSource, parse_token_answer};
use crate::api::{CallError, CallErrorKind, InvalidName};
use crate::endpoint::SecureEndpoint;

/// IMDS's documented address.
pub const IMDS_ENDPOINT: &str = "http://169.254.169.254/";
/// The api-version MSAL asks IMDS's identity endpoint with.
pub const IMDS_TOKEN_API_VERSION: &str = "2018-02-01";
const IMDS: &str = "IMDS";
/// IMDS's statuses MSAL tries again on.
const IMDS_RETRY: &[u16] = &[404, 410, 429, 500, 501, 502, 503, 504, 505, 506, 507, 508, 510, 511];
const IMDS_TRIES: usize = 3;
const IMDS_PAUSE: Duration = Duration::from_secs(1);

/// Tokens for one resource from IMDS.
#[derive(Debug, Clone)]
pub struct ManagedIdentityCredential {
    http: reqwest::Client,
    url: Url,
    timeout: Duration,
}

impl ManagedIdentityCredential {
    /// Tokens for `resource` (an audience such as
    /// `https://containerregistry.azure.net`; a scope's `/.default` is
    /// dropped, as MSAL drops it) of `identity` (`None`: the system-assigned
    /// one), from the IMDS at `imds` ([`IMDS_ENDPOINT`], or a fake's), each
    /// try within `timeout`.
    pub fn new(
        imds: &Url,
        identity: Option<&UserAssignedIdentity>,
        resource: &str,
        timeout: Duration,
    ) -> Result<Self, AzureError> {
        if !matches!(imds.scheme(), "http" | "https")
            || imds.host().is_none()
            || !imds.username().is_empty()
            || imds.password().is_some()
        {
            return Err(AzureError::InvalidName(InvalidName::new(
                "IMDS endpoint",
                imds.as_str(),
                "an http URL with a host and no user is needed",
            )));
        }
        let mut url = imds
            .join("metadata/identity/oauth2/token")
            .map_err(|e| Call::garbage(IMDS, imds, e.to_string()))?;
        {
            let mut query = url.query_pairs_mut();
            query.clear();
            query.append_pair("api-version", IMDS_TOKEN_API_VERSION);
            query.append_pair("resource", &resource_of(resource));
            match identity {
                Some(UserAssignedIdentity::ClientId(id)) => query.append_pair("client_id", id),
                Some(UserAssignedIdentity::ResourceId(id)) => query.append_pair("msi_res_id", id),
                None => &mut query,
            };
        }
        let user_agent = concat!("cloud-node-suite/", env!("CARGO_PKG_VERSION"));
        let http = crate::http::metadata_client(user_agent, timeout)?;
        Ok(Self { http, url, timeout })
    }

    /// The URL asked (with its query: resource and identity, no secret).
    pub fn url(&self) -> &Url {
        &self.url
    }

    /// A new token from IMDS.
    pub async fn fetch(&self) -> Result<AccessToken, AzureError> {
        let mut tries = 0;
        loop {
            tries += 1;
            let request = self.http.get(self.url.clone()).header("Metadata", "true");
            let deadline = Instant::now() + self.timeout;
            let answer = Call::exchange(IMDS, &self.url, request, deadline).await;
            let retry = match &answer {
                Ok(answer) => IMDS_RETRY.contains(&answer.status),
                Err(AzureError::Call(CallError {
                    kind: CallErrorKind::Transport { .. } | CallErrorKind::Deadline { .. },
                    ..
                })) => true,
                Err(_) => false,
            };
            if retry && tries < IMDS_TRIES {
                tokio::time::sleep(IMDS_PAUSE).await;
                continue;
            }
            let body = Call::check(IMDS, &self.url, answer?, &[])?;
            let json = Call::json(IMDS, &self.url, &body)?;
            return parse_token_answer(&json).map_err(|problem| Call::garbage(IMDS, &self.url, problem));
        }
    }
}

impl TokenSource<AzureError> for ManagedIdentityCredential {
    fn token(&self) -> TokenFuture<'_> {
        Box::pin(self.fetch())
    }

    fn origin(&self) -> Option<(&'static str, String)> {
        Some((IMDS, crate::http::shown_url(&self.url)))
    }
}

/// The IMDS root a program asks for managed-identity tokens: `given` (a
/// fake's or a node-local proxy's: an endpoint, so https, or plain http on
/// loopback only), else [`IMDS_ENDPOINT`], the documented address.
pub fn imds_base(given: Option<&SecureEndpoint>) -> Result<Url, AzureError> {
    match given {
        Some(endpoint) => Ok(super::base_url(endpoint)),
        None => Url::parse(IMDS_ENDPOINT)
            .map_err(|_| AzureError::InvalidName(InvalidName::new("IMDS endpoint", IMDS_ENDPOINT, "it is not a URL"))),
    }
}

/// The credential `config` names ([`AzureConfig::auth_method`]), for tokens
/// for `resource`: Entra ID under `cloud`'s authority host, IMDS at `imds`.
/// Not cached: put a [`super::CachedTokenSource`] in front of it.
pub fn credential_from_config(
    config: &AzureConfig,
    http: &reqwest::Client,
    cloud: &CloudEndpoints,
    imds: &Url,
    resource: &str,
) -> Result<Arc<dyn TokenSource<AzureError>>, AzureError> {
    let authority = &cloud.authority_host;
    Ok(match config.auth_method() {
        AuthMethod::WorkloadIdentity { token_file } => Arc::new(ClientAssertionCredential::new(
            http.clone(),
            authority,
            &config.tenant_id,
            &config.aad_client_id,
            Assertion::File(token_file),
            resource,
        )?),
        AuthMethod::ManagedIdentity { identity } => Arc::new(ManagedIdentityCredential::new(
            imds,
            identity.as_ref(),
            resource,
            DEFAULT_TOKEN_TIMEOUT,
        )?),
        AuthMethod::ClientSecret => {
            let secret = config.aad_client_secret.clone().ok_or(AzureError::NoCredentials)?;
            Arc::new(ClientSecretCredential::new(
                http.clone(),
                authority,
                &config.tenant_id,
                &config.aad_client_id,
                secret,
                resource,
            )?)
        }
        AuthMethod::None => return Err(AzureError::NoCredentials),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_imds_base_is_the_documented_address_unless_given() {
        assert_eq!(imds_base(None).unwrap().as_str(), IMDS_ENDPOINT);
        let fake = SecureEndpoint::parse("test", "http://127.0.0.1:9").unwrap();
        assert_eq!(imds_base(Some(&fake)).unwrap().as_str(), "http://127.0.0.1:9/");
    }

    #[test]
    fn imds_urls_name_the_resource_and_identity() {
        // As in main: the client needs a crypto provider, whichever test runs first.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let imds = Url::parse("http://127.0.0.1:9/").unwrap();
        let system = ManagedIdentityCredential::new(
            &imds,
            None,
            "https://containerregistry.azure.net/.default",
            DEFAULT_TOKEN_TIMEOUT,
        )
        .unwrap();
        assert_eq!(
            system.url().as_str(),
            "http://127.0.0.1:9/metadata/identity/oauth2/token?api-version=2018-02-01&resource=https%3A%2F%2Fcontainerregistry.azure.net"
        );
        let by_resource = UserAssignedIdentity::ResourceId(
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.ManagedIdentity/userAssignedIdentities/id".into(),
        );
        let user = ManagedIdentityCredential::new(&imds, Some(&by_resource), "r", DEFAULT_TOKEN_TIMEOUT).unwrap();
        assert!(user.url().query().unwrap().ends_with("&msi_res_id=%2Fsubscriptions%2Fs%2FresourceGroups%2Frg%2Fproviders%2FMicrosoft.ManagedIdentity%2FuserAssignedIdentities%2Fid"));
        let by_client = UserAssignedIdentity::ClientId("c1".into());
        let user = ManagedIdentityCredential::new(&imds, Some(&by_client), "r", DEFAULT_TOKEN_TIMEOUT).unwrap();
        assert!(user.url().query().unwrap().ends_with("&client_id=c1"));
        for bad in ["file:///etc/passwd", "http://user:pw@127.0.0.1/"] {
            let bad = Url::parse(bad).unwrap();
            assert!(ManagedIdentityCredential::new(&bad, None, "r", DEFAULT_TOKEN_TIMEOUT).is_err());
        }
    }
}
