//! Hetzner Cloud server metadata (`/hetzner/v1/metadata`, YAML, no header;
//! IPv4 endpoint only).
//!
//! Address order follows the hcloud cloud controller manager: the server
//! name as Hostname, the public IPv4 and IPv6 as external addresses, then
//! the private network addresses as internal ones. (The CCM lists private
//! addresses only when it is configured with the network: HCLOUD_NETWORK.)

use serde::Deserialize;

use super::{AddressKind, Instance, MetadataClient, MetadataError, ProviderIdOptions};

const METADATA: &str = "hetzner/v1/metadata";
const PRIVATE_NETWORKS: &str = "hetzner/v1/metadata/private-networks";

#[derive(Deserialize)]
struct Document {
    hostname: String,
    #[serde(rename = "instance-id")]
    instance_id: serde_yaml_ng::Value,
    #[serde(rename = "public-ipv4", default)]
    public_ipv4: Option<String>,
    #[serde(rename = "network-config", default)]
    network_config: Option<NetworkConfig>,
}

#[derive(Deserialize)]
struct NetworkConfig {
    #[serde(default)]
    config: Vec<NetworkEntry>,
}

#[derive(Deserialize)]
struct NetworkEntry {
    #[serde(default)]
    subnets: Vec<Subnet>,
}

#[derive(Deserialize)]
struct Subnet {
    #[serde(default)]
    address: Option<String>,
    #[serde(default)]
    ipv6: bool,
}

#[derive(Deserialize)]
struct PrivateNetwork {
    ip: String,
}

pub(super) async fn instance(client: &MetadataClient) -> Result<Instance, MetadataError> {
    let body = client.get_required(METADATA, &[]).await?;
    let document: Document = crate::yaml::from_str(&body).map_err(|e| client.garbage(METADATA, e.to_string()))?;
    let mut instance = Instance {
        hostname: Some(document.hostname.clone()),
        instance_id: Some(match &document.instance_id {
            serde_yaml_ng::Value::String(id) => id.clone(),
            serde_yaml_ng::Value::Number(id) => id.to_string(),
            _ => return Err(client.garbage(METADATA, "instance-id is not a number or string")),
        }),
        ..Instance::default()
    };
    instance.push(AddressKind::Hostname, document.hostname);
    if let Some(public) = document.public_ipv4.filter(|ip| !ip.trim().is_empty()) {
        instance.push(
            AddressKind::ExternalIP,
            super::ip(client, METADATA, &public)?.to_string(),
        );
    }
    let subnets = document
        .network_config
        .iter()
        .flat_map(|n| &n.config)
        .flat_map(|c| &c.subnets);
    for subnet in subnets.filter(|s| s.ipv6) {
        if let Some(address) = &subnet.address {
            let ip = address.split('/').next().unwrap_or_default();
            instance.push(AddressKind::ExternalIP, super::ip(client, METADATA, ip)?.to_string());
        }
    }
    if let Some(body) = client.get(PRIVATE_NETWORKS, &[]).await? {
        let networks: Vec<PrivateNetwork> =
            crate::yaml::from_str(&body).map_err(|e| client.garbage(PRIVATE_NETWORKS, e.to_string()))?;
        for network in networks {
            instance.push(
                AddressKind::InternalIP,
                super::ip(client, PRIVATE_NETWORKS, &network.ip)?.to_string(),
            );
        }
    }
    Ok(instance)
}

/// The Hetzner cloud controller manager (hetznercloud/hcloud-cloud-controller-manager, `internal/providerid`: `ToServerID`; `hcloud/instances.go`: `getServerByName`):
/// it writes and parses `hcloud://ID` (a decimal number), and finds a Node
/// without one by its name, which must be the server's name exactly (the
/// metadata's `hostname`).
pub(super) struct Ccm;

impl super::CcmRules for Ccm {
    fn provider_id(&self, instance: &Instance, _: &ProviderIdOptions) -> Result<String, String> {
        Ok(format!(
            "hcloud://{}",
            super::decimal_id("server ID", instance.instance_id.as_deref())?
        ))
    }

    fn key(&self, provider_id: &str) -> Result<String, String> {
        let id = provider_id.strip_prefix("hcloud://");
        let id = id.ok_or_else(|| "its scheme is not hcloud".to_owned())?;
        super::decimal_id("server ID", Some(id))
            .map_err(|_| "not hcloud://ID with a decimal ID (the CCM refuses it)".to_owned())
    }

    fn finds_by_name(&self, node: &str, instance: &Instance) -> bool {
        instance.hostname.as_deref() == Some(node)
    }

    fn names(&self, instance: &Instance) -> Vec<String> {
        instance.hostname.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::{MetadataClient, Provider};

    /// Issue 9's re-test: the metadata document is YAML from the network,
    /// guarded as the credential provider's config is.
    #[tokio::test]
    async fn deeply_nested_metadata_is_refused_before_parsing() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let n = 50_000;
        let document = format!(
            "hostname: a\ninstance-id: 1\nx: [a:\", {}{}, b\"]\n",
            "[".repeat(n),
            "]".repeat(n)
        );
        let server = axum::Router::new().route(
            "/hetzner/v1/metadata",
            axum::routing::get(move || async move { document }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}/", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, server).await.unwrap() });
        let client = MetadataClient::new(Provider::Hetzner, base.parse().unwrap(), Duration::from_secs(30)).unwrap();
        let error = client.instance().await.unwrap_err().to_string();
        assert!(error.contains("nested more than 32 levels deep"), "{error}");
    }
}
