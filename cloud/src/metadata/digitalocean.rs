//! DigitalOcean droplet metadata (`/metadata/v1.json`, no header).
//!
//! Address order follows the DigitalOcean cloud controller manager: the
//! droplet name as Hostname, the private IPv4, then the public IPv4 and
//! public IPv6 as external addresses.

use serde::Deserialize;

use super::{AddressKind, Instance, MetadataClient, MetadataError, ProviderIdOptions};

const PATH: &str = "metadata/v1.json";

#[derive(Deserialize)]
struct Document {
    droplet_id: serde_json::Value,
    hostname: String,
    #[serde(default)]
    interfaces: Interfaces,
}

#[derive(Default, Deserialize)]
struct Interfaces {
    #[serde(default)]
    public: Vec<Interface>,
    #[serde(default)]
    private: Vec<Interface>,
}

#[derive(Deserialize)]
struct Interface {
    #[serde(default)]
    ipv4: Option<Address>,
    #[serde(default)]
    ipv6: Option<Address>,
}

#[derive(Deserialize)]
struct Address {
    ip_address: String,
}

pub(super) async fn instance(client: &MetadataClient) -> Result<Instance, MetadataError> {
    let body = client.get_required(PATH, &[]).await?;
    let document: Document = serde_json::from_str(&body).map_err(|e| client.garbage(PATH, e.to_string()))?;
    let mut instance = Instance {
        hostname: Some(document.hostname.clone()),
        instance_id: Some(match &document.droplet_id {
            serde_json::Value::String(id) => id.clone(),
            other => other.to_string(),
        }),
        ..Instance::default()
    };
    instance.push(AddressKind::Hostname, document.hostname);
    let mut push_ip = |kind, address: &Option<Address>| -> Result<(), MetadataError> {
        if let Some(address) = address {
            let ip = super::ip(client, PATH, &address.ip_address)?;
            instance.push(kind, ip.to_string());
        }
        Ok(())
    };
    for interface in &document.interfaces.private {
        push_ip(AddressKind::InternalIP, &interface.ipv4)?;
    }
    for interface in &document.interfaces.public {
        push_ip(AddressKind::ExternalIP, &interface.ipv4)?;
    }
    for interface in &document.interfaces.public {
        push_ip(AddressKind::ExternalIP, &interface.ipv6)?;
    }
    Ok(instance)
}

/// The DigitalOcean cloud controller manager (digitalocean/digitalocean-cloud-controller-manager, `cloud-controller-manager/do/droplets.go`: `dropletIDFromProviderID`, `dropletByName`):
/// it writes and parses `digitalocean://ID` (a decimal number), and finds a Node
/// without one by its name, which must be the droplet's name exactly (the
/// metadata's `hostname`).
pub(super) struct Ccm;

impl super::CcmRules for Ccm {
    fn provider_id(&self, instance: &Instance, _: &ProviderIdOptions) -> Result<String, String> {
        Ok(format!(
            "digitalocean://{}",
            super::decimal_id("droplet ID", instance.instance_id.as_deref())?
        ))
    }

    fn key(&self, provider_id: &str) -> Result<String, String> {
        let id = provider_id.strip_prefix("digitalocean://");
        let id = id.ok_or_else(|| "its scheme is not digitalocean".to_owned())?;
        super::decimal_id("droplet ID", Some(id))
            .map_err(|_| "not digitalocean://ID with a decimal ID (the CCM refuses it)".to_owned())
    }

    fn finds_by_name(&self, node: &str, instance: &Instance) -> bool {
        instance.hostname.as_deref() == Some(node)
    }

    fn names(&self, instance: &Instance) -> Vec<String> {
        instance.hostname.iter().cloned().collect()
    }
}
