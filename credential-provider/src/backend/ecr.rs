//! `ecr`: Amazon ECR registry logins (private ECR in every partition, FIPS
//! and dual-stack hosts, and ECR Public).
//!
//! KEP-4412: when kubelet passes the pod's service-account token and the
//! service account is annotated with a role ARN (under an allowed annotation
//! key, in an allowed account), the login is made as that role through STS
//! `AssumeRoleWithWebIdentity`; otherwise with the node's own credentials,
//! unless `--require-role-annotation` says a role is required.

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime};

use cloud_access::aws::AwsConfig;
use cloud_access::aws::ecr::{self, Registry};
use cloud_access::aws::endpoints::{self, EndpointOptions};
use cloud_access::aws::{AwsClient, AwsError, CredentialsChain, arn, sts};
use secrecy::ExposeSecret;

use super::{BackendError, CredentialBackend, NoPodToken, TimedOut, USER_AGENT, pod_token, within_timeout};
use crate::image;
use crate::protocol::{CacheKeyType, CredentialRequest, Credentials, RegistryAuth};

/// The annotation ecr-credential-provider reads, allowed by default.
pub const DEFAULT_ROLE_ANNOTATION: &str = "eks.amazonaws.com/ecr-role-arn";

#[derive(Debug, Clone)]
pub struct EcrSettings {
    /// Service-account annotation keys that may name the role to assume.
    pub role_annotations: Vec<String>,
    /// When not empty, only roles in these accounts may be assumed.
    pub allowed_accounts: Vec<String>,
    /// Refuse pulls whose service account names no role.
    pub require_role_annotation: bool,
    pub timeout: Duration,
    /// Endpoints and the credential chain's variables.
    pub aws: AwsConfig,
}

#[derive(Debug)]
pub struct EcrBackend {
    settings: EcrSettings,
    /// Built once the endpoints are known (see [`EcrBackend::client`]).
    http: std::sync::OnceLock<reqwest::Client>,
}

#[derive(Debug, thiserror::Error)]
pub enum EcrError {
    #[error(
        "{registry} is not an Amazon ECR registry host ({{account}}.dkr.ecr.{{region}}.amazonaws.com, public.ecr.aws, …): check the provider's matchImages"
    )]
    NotEcr { registry: String },
    #[error(
        "service-account annotation {key}=\"{value}\" is not an IAM role ARN: use {form}",
        form = arn::ROLE_ARN_FORM
    )]
    BadRoleArn { key: String, value: String },
    #[error("role {role} is in account {account}, which --allowed-account-id does not list")]
    AccountNotAllowed { role: String, account: String },
    #[error(
        "the pod's service account names no role ({keys}), and --require-role-annotation is set: annotate the service account with the role to pull as"
    )]
    RoleRequired { keys: String },
    #[error(
        "service-account annotation {key} names role {role}, but kubelet sent {no_token}: give this provider tokenAttributes (apiVersion credentialprovider.kubelet.k8s.io/v1)"
    )]
    NoTokenForRole {
        key: String,
        role: String,
        no_token: NoPodToken,
    },
    #[error("assuming role {role} for {registry}: {source}")]
    AssumeRole {
        role: String,
        registry: String,
        #[source]
        source: Box<AwsError>,
    },
    #[error("ECR login for {registry}{as_role}: {source}")]
    Login {
        registry: String,
        as_role: String,
        #[source]
        source: Box<AwsError>,
    },
    #[error(transparent)]
    Credentials(#[from] cloud_access::aws::CredentialsError),
    #[error(transparent)]
    Endpoint(#[from] endpoints::EndpointError),
    #[error(transparent)]
    TimedOut(#[from] TimedOut),
    #[error("{0}")]
    Client(#[from] cloud_access::HttpClientError),
}

impl EcrBackend {
    pub fn new(settings: EcrSettings) -> Result<Self, EcrError> {
        Ok(Self {
            settings,
            http: std::sync::OnceLock::new(),
        })
    }

    /// The HTTP client for `endpoints`, built once.
    fn client(&self, endpoints: [&url::Url; 2]) -> Result<reqwest::Client, EcrError> {
        if let Some(client) = self.http.get() {
            return Ok(client.clone());
        }
        let client = cloud_access::http::http_client_for(USER_AGENT, self.settings.timeout, endpoints)?;
        Ok(self.http.get_or_init(|| client).clone())
    }

    async fn login(&self, request: &CredentialRequest, deadline: Instant) -> Result<Credentials, EcrError> {
        let host = registry_host(request);
        let registry = ecr::parse_registry(&host).ok_or_else(|| EcrError::NotEcr { registry: host.clone() })?;
        let (region, public, fips, dual_stack) = match &registry {
            Registry::Private {
                region,
                fips,
                dual_stack,
                ..
            } => (region.clone(), false, *fips, *dual_stack),
            Registry::Public { dual_stack } => (ecr::PUBLIC_REGION.to_owned(), true, false, *dual_stack),
        };
        // The registry's own flavour of endpoint, unless overridden.
        let options = EndpointOptions {
            fips: fips || self.settings.aws.endpoints().fips,
            dual_stack: dual_stack || self.settings.aws.endpoints().dual_stack,
            ..self.settings.aws.endpoints().clone()
        };
        let role = self.role_to_assume(request)?;
        let ecr_endpoint = endpoints::endpoint(
            if public { endpoints::ECR_PUBLIC } else { endpoints::ECR },
            &region,
            &options,
        )?;
        let sts_endpoint = endpoints::endpoint(endpoints::STS, &region, self.settings.aws.endpoints())?;
        let http = self.client([&ecr_endpoint, &sts_endpoint])?;
        let client = AwsClient::new(http.clone(), region.clone(), options.clone());

        let credentials = match &role {
            Some((role_arn, token)) => {
                let session = session_name(request);
                tracing::debug!(role = %role_arn, registry = %host, "assuming the service account's role");
                sts::assume_role_with_web_identity(&http, &sts_endpoint, role_arn, &session, token, None)
                    .await
                    .map_err(|source| EcrError::AssumeRole {
                        role: role_arn.clone(),
                        registry: host.clone(),
                        source: Box::new(source),
                    })?
            }
            None => {
                let chain = CredentialsChain::new(http.clone(), region.clone(), self.settings.aws.clone());
                chain.credentials().await?
            }
        };
        let token = ecr::authorization_token(&client, public, &credentials, deadline)
            .await
            .map_err(|source| EcrError::Login {
                registry: host.clone(),
                as_role: role.as_ref().map(|(arn, _)| format!(" as {arn}")).unwrap_or_default(),
                source: Box::new(source),
            })?;
        tracing::debug!(registry = %host, expires_at = ?token.expires_at, "ECR login");
        let mut auth = BTreeMap::new();
        auth.insert(
            host,
            RegistryAuth {
                username: token.username,
                password: token.password,
            },
        );
        Ok(Credentials {
            cache_key_type: CacheKeyType::Registry,
            cache_duration: Some(half_remaining(token.expires_at, SystemTime::now())),
            auth,
        })
    }

    /// The role ARN and token to assume it with, if the service account
    /// names one under an allowed key.
    fn role_to_assume(&self, request: &CredentialRequest) -> Result<Option<(String, String)>, EcrError> {
        let named = self
            .settings
            .role_annotations
            .iter()
            .find_map(|key| request.service_account_annotations.get(key).map(|value| (key, value)));
        let Some((key, role)) = named else {
            if self.settings.require_role_annotation {
                return Err(EcrError::RoleRequired {
                    keys: self.settings.role_annotations.join(", "),
                });
            }
            return Ok(None);
        };
        let account = arn::role_account(role).ok_or_else(|| EcrError::BadRoleArn {
            key: key.clone(),
            value: cloud_access::logging::clean_text(role, &[], 200),
        })?;
        if !self.settings.allowed_accounts.is_empty() && !self.settings.allowed_accounts.iter().any(|a| a == account) {
            return Err(EcrError::AccountNotAllowed {
                role: role.clone(),
                account: account.to_owned(),
            });
        }
        let token = pod_token(request).map_err(|no_token| EcrError::NoTokenForRole {
            key: key.clone(),
            role: role.clone(),
            no_token,
        })?;
        Ok(Some((role.clone(), token.expose_secret().to_owned())))
    }
}

/// The image's registry host, which the login is for.
fn registry_host(request: &CredentialRequest) -> String {
    image::registry(&image::repository(&request.image)).to_owned()
}

/// A session name that says which pod pulled, within STS's 64 characters
/// of `[\w+=,.@-]`.
fn session_name(request: &CredentialRequest) -> String {
    let base = format!("kubelet-{}", registry_host(request));
    base.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "+=,.@-_".contains(c) {
                c
            } else {
                '-'
            }
        })
        .take(64)
        .collect()
}

/// Half the token's remaining validity, as ecr-credential-provider does;
/// zero (do not cache) for a token already expired or without expiry. On
/// purpose not [`super::cache_window`] (remaining validity less a margin):
/// kubelet then asks as often as with the provider this one replaces.
fn half_remaining(expires_at: Option<SystemTime>, now: SystemTime) -> Duration {
    expires_at
        .and_then(|at| at.duration_since(now).ok())
        .map_or(Duration::ZERO, |left| left / 2)
}

impl CredentialBackend for EcrBackend {
    async fn credentials(&self, request: &CredentialRequest) -> Result<Credentials, BackendError> {
        let waiting_for = || format!("AWS (the credential chain, STS, ECR) for {}", registry_host(request));
        let answer = within_timeout(self.settings.timeout, waiting_for, |deadline| {
            self.login(request, deadline)
        });
        Ok(answer.await?)
    }
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;

    #[test]
    fn cache_for_half_the_remaining_validity() {
        let now = UNIX_EPOCH + Duration::from_secs(1_796_000_000); // 2026
        assert_eq!(
            half_remaining(Some(now + Duration::from_secs(12 * 3600)), now),
            Duration::from_secs(6 * 3600)
        );
        // moto's tokens expired in 2015: do not cache.
        assert_eq!(
            half_remaining(Some(UNIX_EPOCH + Duration::from_secs(1_420_070_400)), now),
            Duration::ZERO
        );
        assert_eq!(half_remaining(None, now), Duration::ZERO);
    }
}
