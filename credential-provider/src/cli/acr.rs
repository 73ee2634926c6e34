//! The `acr` subcommand's flags: one struct per concern (the cloud config,
//! registry mirrors, KEP-4412 workload identity, caching, endpoints for
//! tests). Upstream's shape is accepted as is: the config file as the first
//! argument and `-r`/`--registry-mirror` with comma-separated pairs.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use cloud_access::SecureEndpoint;
use suite_program::duration;
use url::Url;

use super::{ExpiryArgs, parse_timeout};
use crate::backend::acr::{RegistryMirror, check_id, parse_mirror};

#[derive(Debug, Args)]
pub struct AcrArgs {
    #[command(flatten)]
    pub config: AcrConfigArgs,
    #[command(flatten)]
    pub mirror: AcrMirrorArgs,
    /// containerd's or CRI-O's mirrors, as for every backend.
    #[command(flatten)]
    pub runtime_mirrors: super::RuntimeMirrorArgs,
    #[command(flatten)]
    pub workload_identity: AcrWorkloadIdentityArgs,
    #[command(flatten)]
    pub cache: AcrCacheArgs,
    #[command(flatten)]
    pub endpoints: AcrEndpointArgs,
    /// Deadline of the whole answer, below kubelet's 1m kill (at most 50s).
    #[arg(long, env = "CLOUD_CREDENTIAL_PROVIDER_TIMEOUT", value_parser = parse_timeout, default_value = "20s", value_name = "DURATION")]
    pub timeout: Duration,
}

#[derive(Debug, Args)]
pub struct AcrConfigArgs {
    /// The Azure cloud config (azure.json, JSON or YAML) as
    /// acr-credential-provider takes it: its first argument.
    #[arg(
        value_name = "AZURE_JSON",
        required_unless_present = "config_flag",
        conflicts_with = "config_flag"
    )]
    pub config: Option<PathBuf>,
    /// The Azure cloud config, as a flag (the same file as AZURE_JSON).
    #[arg(
        long = "config",
        id = "config_flag",
        env = "CLOUD_CREDENTIAL_PROVIDER_AZURE_CONFIG",
        value_name = "FILE"
    )]
    pub config_flag: Option<PathBuf>,
}

impl AcrConfigArgs {
    /// The config file, from the argument or the flag (clap requires one).
    pub fn path(&self) -> PathBuf {
        self.config
            .clone()
            .or_else(|| self.config_flag.clone())
            .unwrap_or_default()
    }
}

#[derive(Debug, Args)]
pub struct AcrMirrorArgs {
    /// Mirror SRC:DST (host[:port] each; repeatable, or comma-separated): an
    /// image on SRC is answered with DST's credentials, under both hosts.
    /// DST must be an Azure container registry.
    #[arg(
        long = "registry-mirror",
        short = 'r',
        env = "CLOUD_CREDENTIAL_PROVIDER_REGISTRY_MIRRORS",
        value_delimiter = ',',
        value_parser = parse_mirror_arg,
        value_name = "SRC:DST"
    )]
    pub mirrors: Vec<RegistryMirror>,
}

#[derive(Debug, Args)]
pub struct AcrWorkloadIdentityArgs {
    /// Only exchange pods' tokens for these tenants (repeatable; annotation
    /// kubernetes.azure.com/acr-tenant-id). Unset: any tenant.
    #[arg(
        long = "allowed-tenant-id",
        env = "CLOUD_CREDENTIAL_PROVIDER_ALLOWED_TENANT_IDS",
        value_delimiter = ',',
        value_parser = parse_tenant_id,
        value_name = "TENANT"
    )]
    pub allowed_tenants: Vec<String>,
    /// Only exchange pods' tokens for these application (client) IDs
    /// (repeatable; annotation kubernetes.azure.com/acr-client-id). Unset: any.
    #[arg(
        long = "allowed-client-id",
        env = "CLOUD_CREDENTIAL_PROVIDER_ALLOWED_CLIENT_IDS",
        value_delimiter = ',',
        value_parser = parse_client_id,
        value_name = "CLIENT_ID"
    )]
    pub allowed_clients: Vec<String>,
}

#[derive(Debug, Args)]
pub struct AcrCacheArgs {
    /// The longest kubelet may cache an answer (Go duration). Token answers
    /// are cached for the ACR refresh token's remaining validity less
    /// --expiry-margin, at most this; service-principal answers for this
    /// (unset: the provider's defaultCacheDuration).
    #[arg(long, env = "CLOUD_CREDENTIAL_PROVIDER_CACHE_DURATION", value_parser = duration::non_negative, value_name = "DURATION")]
    pub cache_duration: Option<Duration>,
    #[command(flatten)]
    pub expiry: ExpiryArgs,
}

/// Where Azure is reached. Azure's own endpoints unless set: for tests and
/// local proxies, from these flags or their variables only, never from an
/// annotation.
#[derive(Debug, Args)]
pub struct AcrEndpointArgs {
    /// IMDS (managed identity tokens): plain http on a loopback or
    /// link-local address.
    #[arg(long, env = "CLOUD_CREDENTIAL_PROVIDER_IMDS_ENDPOINT", value_parser = parse_imds, default_value = cloud_access::azure::IMDS_ENDPOINT, value_name = "URL")]
    pub imds_endpoint: Url,
    /// Entra ID's authority host (tokens from {URL}{tenant}/oauth2/v2.0/token):
    /// https, or http on loopback. Unset: the cloud's.
    #[arg(long, env = "CLOUD_CREDENTIAL_PROVIDER_AUTHORITY_HOST", value_parser = parse_authority, value_name = "URL")]
    pub authority_host: Option<SecureEndpoint>,
    /// Azure Resource Manager, read for a custom cloud's endpoints when the
    /// config has resourceManagerEndpoint (which this replaces): https, or
    /// http on loopback.
    #[arg(long, env = "CLOUD_CREDENTIAL_PROVIDER_ARM_ENDPOINT", value_parser = parse_arm, value_name = "URL")]
    pub arm_endpoint: Option<SecureEndpoint>,
    /// Tests only: every registry is asked at this loopback http://HOST:PORT
    /// instead of https://REGISTRY.
    #[arg(long, env = "CLOUD_CREDENTIAL_PROVIDER_REGISTRY_ENDPOINT", value_parser = parse_registry_endpoint, value_name = "URL", hide = true)]
    pub registry_endpoint: Option<String>,
}

fn parse_mirror_arg(text: &str) -> Result<RegistryMirror, String> {
    parse_mirror(text).map_err(|problem| format!("{text:?} is not SRC:DST (host[:port] each): {problem}"))
}

fn parse_imds(text: &str) -> Result<Url, String> {
    let url = Url::parse(text).map_err(|e| format!("{text:?} is not a URL: {e}"))?;
    let local = match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback() || ip.is_link_local(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        None => false,
    };
    if url.scheme() != "http" || !local || !url.username().is_empty() || url.password().is_some() {
        return Err(format!(
            "{text:?} is not IMDS: use http:// on a loopback or link-local address (IMDS is http://169.254.169.254/)"
        ));
    }
    Ok(url)
}

fn parse_authority(text: &str) -> Result<SecureEndpoint, String> {
    SecureEndpoint::parse("--authority-host", text).map_err(|e| e.to_string())
}

fn parse_arm(text: &str) -> Result<SecureEndpoint, String> {
    SecureEndpoint::parse("--arm-endpoint", text).map_err(|e| e.to_string())
}

/// `http://HOST:PORT` on loopback, as the `HOST:PORT` registries are asked at.
fn parse_registry_endpoint(text: &str) -> Result<String, String> {
    let refused = || format!("{text:?} is not http://HOST:PORT on a loopback address");
    let url = Url::parse(text).map_err(|_| refused())?;
    let ok = url.scheme() == "http"
        && cloud_access::endpoint::is_loopback(&url)
        && matches!(url.path(), "" | "/")
        && url.query().is_none()
        && url.username().is_empty();
    match (ok, url.host_str(), url.port_or_known_default()) {
        (true, Some(host), Some(port)) => Ok(format!("{host}:{port}")),
        _ => Err(refused()),
    }
}

/// A tenant: a GUID or one of its domain names, as the annotation it is
/// compared with ([`check_id`]: an entry that check refuses never matches).
fn parse_tenant_id(text: &str) -> Result<String, String> {
    check_id(text).map_err(|problem| format!("{text:?} is not a tenant ID: {problem}"))?;
    Ok(text.to_owned())
}

/// An application (client) ID: "The Application (client) ID for the
/// related application registered in Microsoft Entra ID, formatted as a
/// GUID" (Azure SDK, AuthenticationProviderProperties.ClientId), 8-4-4-4-12
/// hex digits. A tenant has no such rule: it may be given by a domain name.
fn parse_client_id(text: &str) -> Result<String, String> {
    let groups: Vec<&str> = text.split('-').collect();
    let shape = groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12]);
    if !shape || !groups.iter().all(|g| g.bytes().all(|b| b.is_ascii_hexdigit())) {
        return Err(format!(
            "{text:?} is not an application (client) ID: use its GUID, such as 00000000-0000-0000-0000-000000000000"
        ));
    }
    Ok(text.to_owned())
}
