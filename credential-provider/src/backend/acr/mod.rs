//! `acr`: Azure Container Registry logins, as acr-credential-provider
//! (cloud-provider-azure) makes them, through [`cloud_access::azure`].
//!
//! Who the pull is made as ([`Identity`]):
//!
//! - KEP-4412 workload identity: when kubelet sends the pod's token (and
//!   the image is not mirrored), the application named by the service
//!   account's `kubernetes.azure.com/acr-client-id` in the tenant of
//!   `kubernetes.azure.com/acr-tenant-id`: a client assertion exchanged at
//!   that tenant's token endpoint, then ACR's exchange. A missing
//!   annotation is an error, as upstream.
//! - `useManagedIdentityExtension: true`: the node's managed identity
//!   (IMDS, system-assigned or `userAssignedIdentityID`), then ACR's exchange.
//! - Otherwise the service principal of `aadClientId`/`aadClientSecret`,
//!   answered as username and password without a network call, as upstream
//!   does; for a mirrored image, its token exchanged for the mirror's
//!   target (upstream answers no credential for the mirror's source then).
//!
//! An image that is not on an ACR registry is answered with no credentials
//! and `cacheDuration: 0s`, as upstream.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use cloud_access::SecureEndpoint;
use cloud_access::azure::{
    self, ACR_USERNAME, AcrClient, AzureConfig, AzureError, ClientAssertionCredential, ClientSecretCredential,
    CloudEndpoints, ManagedIdentityCredential, TokenSource,
};
use secrecy::{ExposeSecret, SecretString};
use url::Url;

use super::{BackendError, CredentialBackend, TimedOut, USER_AGENT, cache_window, pod_token, within_timeout};
use crate::image;
use crate::protocol::{CacheKeyType, CredentialRequest, Credentials, RegistryAuth};

mod registry;

pub use registry::{ACR_SUFFIXES, RegistryMirror, check_registry_suffix, is_acr, mirrored, parse_mirror};

/// The annotations naming the application a pod pulls as (upstream's).
pub const CLIENT_ID_ANNOTATION: &str = "kubernetes.azure.com/acr-client-id";
pub const TENANT_ID_ANNOTATION: &str = "kubernetes.azure.com/acr-tenant-id";
/// The key of upstream's empty (anonymous) entry, kept so that kubelet
/// still tries an anonymous pull when the credentials are refused.
pub const ANONYMOUS_KEY: &str = "*.azurecr.*";

#[derive(Debug, Clone)]
pub struct AcrSettings {
    /// The Azure cloud config (azure.json).
    pub config_path: PathBuf,
    pub mirrors: Vec<RegistryMirror>,
    /// Tenants and application IDs workload identity may use; empty: any.
    pub allowed_tenants: Vec<String>,
    pub allowed_clients: Vec<String>,
    /// A cap on token answers' `cacheDuration`; service-principal answers'.
    pub cache_duration: Option<Duration>,
    pub expiry_margin: Duration,
    /// IMDS (`http://169.254.169.254/` unless overridden).
    pub imds: Url,
    pub authority_host: Option<SecureEndpoint>,
    pub arm_endpoint: Option<SecureEndpoint>,
    /// Tests only: every registry asked at this loopback `HOST:PORT` over http.
    pub registry_endpoint: Option<String>,
    pub timeout: Duration,
}

/// Who a pull is made as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// The pod's service account, federated to `client` in `tenant`.
    WorkloadIdentity { tenant: String, client: String },
    /// The node's managed identity (`None`: system-assigned).
    ManagedIdentity { user_assigned: Option<String> },
    /// The config's service principal.
    ServicePrincipal { client: String },
}

impl std::fmt::Display for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Identity::WorkloadIdentity { tenant, client } => {
                write!(f, "application {client} of tenant {tenant} (workload identity)")
            }
            Identity::ManagedIdentity { user_assigned: None } => {
                f.write_str("the node's system-assigned managed identity")
            }
            Identity::ManagedIdentity {
                user_assigned: Some(id),
            } => write!(f, "the node's user-assigned managed identity {id}"),
            Identity::ServicePrincipal { client } => write!(f, "service principal {client}"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AcrError {
    #[error(transparent)]
    Config(#[from] azure::AzureConfigError),
    #[error(
        "Azure cloud config {path} names no credentials for ACR: set useManagedIdentityExtension: true (the node's managed identity), or aadClientId and aadClientSecret (a service principal)"
    )]
    NoCredentials { path: String },
    #[error(
        "the pod's service account has no annotation {key}: kubelet sent the pod's token (tokenAttributes), so the pull is made as the application the service account names with {CLIENT_ID_ANNOTATION} and {TENANT_ID_ANNOTATION}; annotate it (and list both in optionalServiceAccountAnnotationKeys), or drop tokenAttributes to pull as the node"
    )]
    MissingAnnotation { key: &'static str },
    #[error("service-account annotation {key}=\"{value}\" is not valid: {problem}")]
    BadAnnotation {
        key: &'static str,
        value: String,
        problem: &'static str,
    },
    #[error(
        "service-account annotation {TENANT_ID_ANNOTATION} names tenant {tenant}, which --allowed-tenant-id does not list"
    )]
    TenantNotAllowed { tenant: String },
    #[error(
        "service-account annotation {CLIENT_ID_ANNOTATION} names application {client}, which --allowed-client-id does not list"
    )]
    ClientNotAllowed { client: String },
    #[error(
        "--registry-mirror {source_registry}:{target}: {target} is not an Azure container registry (NAME.azurecr.io, .cn, .us or the cloud's suffix)"
    )]
    MirrorTarget { source_registry: String, target: String },
    #[error("reading the custom cloud's endpoints (resourceManagerEndpoint): {0}")]
    Discovery(#[source] Box<AzureError>),
    #[error(
        "custom cloud: environment {environment}'s suffixes.acrLoginServer \"{suffix}\" from {url} is not a registry domain: {problem}; credentials would be answered for (and Entra tokens sent to) every registry under it. Point resourceManagerEndpoint (or --arm-endpoint) at the cloud's own ARM, whose acrLoginServer names its registries' domain (such as azurecr.example.internal)"
    )]
    RegistrySuffix {
        environment: String,
        suffix: String,
        url: String,
        problem: &'static str,
    },
    #[error("ACR login for {registry} as {identity}: {source}")]
    Login {
        registry: String,
        identity: Identity,
        #[source]
        source: Box<AzureError>,
    },
    #[error(transparent)]
    TimedOut(#[from] TimedOut),
    #[error("{0}")]
    Client(#[from] cloud_access::HttpClientError),
}

#[derive(Debug)]
pub struct AcrBackend {
    settings: AcrSettings,
}

impl AcrBackend {
    pub fn new(settings: AcrSettings) -> Self {
        Self { settings }
    }

    async fn answer(&self, request: &CredentialRequest) -> Result<Credentials, AcrError> {
        let registry = image::registry(&image::repository(&request.image)).to_ascii_lowercase();
        // The calls' own errors (which name the service that was slow) come
        // first; within_timeout's is the backstop.
        let waiting_for = || format!("Azure (IMDS, Entra ID, ARM, the registry) for {registry}");
        within_timeout(self.settings.timeout, waiting_for, |deadline| {
            self.login(request, &registry, deadline)
        })
        .await
    }

    async fn login(
        &self,
        request: &CredentialRequest,
        registry: &str,
        deadline: Instant,
    ) -> Result<Credentials, AcrError> {
        let path = &self.settings.config_path;
        let config = AzureConfig::read(path)?;
        let (cloud, known) = config.cloud();
        if !known {
            tracing::warn!(cloud = %config.cloud_name, "unknown cloud name in the Azure cloud config: using the public cloud, as upstream does");
        }
        // Built-in endpoints parse (a cloud-access test checks).
        let mut endpoints = cloud
            .endpoints()
            .map_err(|e| AcrError::Discovery(Box::new(AzureError::from(e))))?;
        if let Some(authority) = &self.settings.authority_host {
            endpoints.authority_host = authority.clone();
        }
        // Registries are asked over https unless --registry-endpoint names a
        // loopback http://HOST:PORT (AcrClient builds the URLs; only the
        // scheme matters here). A registry name that is no URL's host is
        // refused by AcrClient before any call.
        let registry_url = match &self.settings.registry_endpoint {
            Some(address) => Url::parse(&format!("http://{address}/")),
            None => Url::parse(&format!("https://{registry}/")),
        };
        let http = |endpoints: &CloudEndpoints| {
            let called = [endpoints.authority_host.url(), endpoints.resource_manager.url()];
            cloud_access::http::http_client_for(
                USER_AGENT,
                self.settings.timeout,
                called.into_iter().chain(registry_url.as_ref().ok()),
            )
        };
        let custom_arm = self
            .custom_cloud_arm(&config)
            .map_err(|e| AcrError::Discovery(Box::new(e)))?;
        if let Some(arm) = custom_arm {
            let client = http(&endpoints)?;
            endpoints = CloudEndpoints::discover(&client, &arm, &config.cloud_name, endpoints, deadline)
                .await
                .map_err(|e| AcrError::Discovery(Box::new(e)))?;
            if let Some(authority) = &self.settings.authority_host {
                endpoints.authority_host = authority.clone();
            }
            check_registry_suffix(&endpoints.acr_dns_suffix).map_err(|problem| AcrError::RegistrySuffix {
                environment: endpoints.name.clone(),
                suffix: cloud_access::logging::clean_text(&endpoints.acr_dns_suffix, &[], 100),
                url: azure::environment::metadata_endpoints_url(&arm)
                    .map_or_else(|_| arm.to_string(), |url| cloud_access::http::shown_url(&url)),
                problem,
            })?;
        }
        let mut suffixes: Vec<&str> = ACR_SUFFIXES.to_vec();
        suffixes.push(endpoints.acr_dns_suffix.as_str());

        let mirror = mirrored(registry, &self.settings.mirrors);
        let target = mirror.map_or(registry, |m| m.target.as_str());
        if !is_acr(target, &suffixes) {
            if let Some(m) = mirror {
                return Err(AcrError::MirrorTarget {
                    source_registry: m.source.clone(),
                    target: m.target.clone(),
                });
            }
            tracing::debug!(%registry, "not an Azure container registry: no credentials");
            return Ok(Credentials {
                cache_key_type: CacheKeyType::Registry,
                cache_duration: Some(Duration::ZERO),
                auth: BTreeMap::new(),
            });
        }
        let identity = self.identity(request, &config, mirror.is_some())?;
        tracing::debug!(%registry, %target, %identity, "acr");
        if let (Identity::ServicePrincipal { client }, None) = (&identity, mirror) {
            return Ok(self.service_principal_answer(&config, client, &endpoints.acr_dns_suffix));
        }
        let http = http(&endpoints)?;
        let tokens = self.token_source(request, target, &identity, &config, &endpoints, &http)?;
        let tenant = match &identity {
            Identity::WorkloadIdentity { tenant, .. } => tenant.clone(),
            _ => config.tenant_id.trim().to_owned(),
        };
        let (acr, contact) = match &self.settings.registry_endpoint {
            Some(address) => (AcrClient::new(http).with_plain_http_on_loopback(), address.as_str()),
            None => (AcrClient::new(http), target),
        };
        let token = acr
            .refresh_token(contact, &tenant, tokens.as_ref(), deadline)
            .await
            .map_err(|source| AcrError::Login {
                registry: target.to_owned(),
                identity: identity.clone(),
                source: Box::new(source),
            })?;
        tracing::debug!(registry = %target, expires_at = ?token.expires_at, "ACR refresh token");
        let login = |password: &SecretString| RegistryAuth {
            username: ACR_USERNAME.to_owned(),
            password: password.clone(),
        };
        let mut auth = BTreeMap::new();
        auth.insert(target.to_owned(), login(&token.secret));
        if let Some(m) = mirror {
            auth.insert(m.source.clone(), login(&token.secret));
        }
        auth.insert(ANONYMOUS_KEY.to_owned(), anonymous());
        Ok(Credentials {
            cache_key_type: CacheKeyType::Registry,
            cache_duration: self.token_cache_duration(token.expires_at, SystemTime::now()),
            auth,
        })
    }

    /// ARM for a custom cloud's discovery: the flag, else the config's
    /// `resourceManagerEndpoint`; `None` for Azure's own clouds.
    fn custom_cloud_arm(&self, config: &AzureConfig) -> Result<Option<SecureEndpoint>, AzureError> {
        let written = config.resource_manager_endpoint.trim();
        if written.is_empty() {
            return Ok(None);
        }
        match &self.settings.arm_endpoint {
            Some(arm) => Ok(Some(arm.clone())),
            None => Ok(Some(SecureEndpoint::parse("resourceManagerEndpoint", written)?)),
        }
    }

    fn identity(&self, request: &CredentialRequest, config: &AzureConfig, mirror: bool) -> Result<Identity, AcrError> {
        // Mirrored images are pulled as the node, as upstream assumes.
        if pod_token(request).is_ok() && !mirror {
            let annotation = |key: &'static str| -> Result<String, AcrError> {
                let value = request
                    .service_account_annotations
                    .get(key)
                    .map(|v| v.trim())
                    .filter(|v| !v.is_empty())
                    .ok_or(AcrError::MissingAnnotation { key })?;
                check_id(value).map_err(|problem| AcrError::BadAnnotation {
                    key,
                    value: cloud_access::logging::clean_text(value, &[], 100),
                    problem,
                })?;
                Ok(value.to_owned())
            };
            let client = annotation(CLIENT_ID_ANNOTATION)?;
            let tenant = annotation(TENANT_ID_ANNOTATION)?;
            if !allowed(&self.settings.allowed_tenants, &tenant) {
                return Err(AcrError::TenantNotAllowed { tenant });
            }
            if !allowed(&self.settings.allowed_clients, &client) {
                return Err(AcrError::ClientNotAllowed { client });
            }
            return Ok(Identity::WorkloadIdentity { tenant, client });
        }
        if config.use_managed_identity_extension {
            let user_assigned = Some(config.user_assigned_identity_id.trim())
                .filter(|id| !id.is_empty())
                .map(str::to_owned);
            return Ok(Identity::ManagedIdentity { user_assigned });
        }
        let has_secret = config
            .aad_client_secret
            .as_ref()
            .is_some_and(|s| !s.expose_secret().is_empty());
        if config.aad_client_id.trim().is_empty() || !has_secret {
            return Err(AcrError::NoCredentials {
                path: self.settings.config_path.display().to_string(),
            });
        }
        Ok(Identity::ServicePrincipal {
            client: config.aad_client_id.trim().to_owned(),
        })
    }

    /// Entra ID tokens for ACR's audience, as `identity`.
    fn token_source(
        &self,
        request: &CredentialRequest,
        registry: &str,
        identity: &Identity,
        config: &AzureConfig,
        endpoints: &CloudEndpoints,
        http: &reqwest::Client,
    ) -> Result<Arc<dyn TokenSource<AzureError>>, AcrError> {
        let audience = endpoints.acr_audience.as_str();
        let authority = &endpoints.authority_host;
        let timeout = self.settings.timeout;
        let failed = |source: AzureError| AcrError::Login {
            registry: registry.to_owned(),
            identity: identity.clone(),
            source: Box::new(source),
        };
        Ok(match identity {
            Identity::WorkloadIdentity { tenant, client } => {
                // identity() chose workload identity because the token is there.
                let token = pod_token(request).map_or_else(|_| SecretString::from(""), SecretString::clone);
                Arc::new(
                    ClientAssertionCredential::new(
                        http.clone(),
                        authority,
                        tenant,
                        client,
                        azure::Assertion::Token(token),
                        audience,
                    )
                    .map_err(failed)?
                    .with_timeout(timeout),
                )
            }
            Identity::ManagedIdentity { .. } => Arc::new(
                ManagedIdentityCredential::new(
                    &self.settings.imds,
                    config.user_assigned_identity().as_ref(),
                    audience,
                    timeout,
                )
                .map_err(failed)?,
            ),
            Identity::ServicePrincipal { client } => {
                let secret = config
                    .aad_client_secret
                    .clone()
                    .unwrap_or_else(|| SecretString::from(""));
                Arc::new(
                    ClientSecretCredential::new(http.clone(), authority, &config.tenant_id, client, secret, audience)
                        .map_err(failed)?
                        .with_timeout(timeout),
                )
            }
        })
    }

    /// The service principal's ID and secret under every ACR suffix, as
    /// upstream answers them (no network call).
    fn service_principal_answer(&self, config: &AzureConfig, client: &str, cloud_suffix: &str) -> Credentials {
        let secret = config
            .aad_client_secret
            .clone()
            .unwrap_or_else(|| SecretString::from(""));
        let mut auth: BTreeMap<String, RegistryAuth> = ACR_SUFFIXES
            .iter()
            .copied()
            .chain((!cloud_suffix.is_empty()).then_some(cloud_suffix))
            .map(|suffix| {
                (
                    format!("*.{}", suffix.to_ascii_lowercase()),
                    RegistryAuth {
                        username: client.to_owned(),
                        password: secret.clone(),
                    },
                )
            })
            .collect();
        auth.insert(ANONYMOUS_KEY.to_owned(), anonymous());
        Credentials {
            cache_key_type: CacheKeyType::Registry,
            cache_duration: self.settings.cache_duration,
            auth,
        }
    }

    /// The refresh token's remaining validity less the margin, at most
    /// `--cache-duration`; without an `exp`, `--cache-duration` (or the
    /// provider's default).
    fn token_cache_duration(&self, expires_at: Option<SystemTime>, now: SystemTime) -> Option<Duration> {
        let cap = self.settings.cache_duration;
        let Some(at) = expires_at else { return cap };
        Some(cache_window(at, now, self.settings.expiry_margin, cap))
    }
}

fn anonymous() -> RegistryAuth {
    RegistryAuth {
        username: String::new(),
        password: SecretString::from(""),
    }
}

/// A tenant or client ID from an annotation: a GUID or a domain name, one
/// path segment (it goes into the token endpoint's path).
pub(crate) fn check_id(value: &str) -> Result<(), &'static str> {
    if value.len() > 253 {
        return Err("it is longer than 253 characters");
    }
    if !value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
    {
        return Err("use a GUID (or, for a tenant, its domain name): letters, digits, '-', '.' and '_' only");
    }
    if value.chars().all(|c| c == '.') {
        return Err("it is a relative path");
    }
    Ok(())
}

fn allowed(list: &[String], value: &str) -> bool {
    list.is_empty() || list.iter().any(|entry| entry.eq_ignore_ascii_case(value))
}

impl CredentialBackend for AcrBackend {
    async fn credentials(&self, request: &CredentialRequest) -> Result<Credentials, BackendError> {
        Ok(self.answer(request).await?)
    }
}

#[cfg(test)]
mod tests;
