//! Azure Instance Metadata Service (`Metadata: true`).
//!
//! Address order follows the Azure cloud controller manager, which reads
//! only the first network interface: the hostname, then each IPv4 private
//! address followed by its public one, then the IPv6 private addresses.
//! (Standard-SKU public IPs are absent from this document; the CCM reads
//! them from the load balancer metadata.)

use serde::Deserialize;

use super::{AddressKind, Instance, MetadataClient, MetadataError};

const PATH: &str = "metadata/instance?api-version=2021-10-01&format=json";

#[derive(Deserialize)]
struct Document {
    compute: Compute,
    network: Network,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Compute {
    name: String,
    #[serde(default)]
    vm_id: Option<String>,
    #[serde(default)]
    os_profile: Option<OsProfile>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct OsProfile {
    #[serde(default)]
    computer_name: Option<String>,
}

#[derive(Deserialize)]
struct Network {
    #[serde(default)]
    interface: Vec<Interface>,
}

#[derive(Deserialize)]
struct Interface {
    #[serde(default)]
    ipv4: Option<Addresses>,
    #[serde(default)]
    ipv6: Option<Addresses>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Addresses {
    #[serde(default)]
    ip_address: Vec<IpAddress>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct IpAddress {
    #[serde(default)]
    private_ip_address: String,
    #[serde(default)]
    public_ip_address: String,
}

pub(super) async fn instance(client: &MetadataClient) -> Result<Instance, MetadataError> {
    let body = client.get_required(PATH, &[("Metadata", "true")]).await?;
    let document: Document = serde_json::from_str(&body).map_err(|e| client.garbage(PATH, e.to_string()))?;
    let mut instance = Instance {
        instance_id: document.compute.vm_id.clone(),
        hostname: document
            .compute
            .os_profile
            .and_then(|p| p.computer_name)
            .filter(|n| !n.is_empty())
            .or_else(|| Some(document.compute.name.clone())),
        ..Instance::default()
    };
    instance.push(AddressKind::Hostname, document.compute.name.to_lowercase());
    if let Some(first) = document.network.interface.first() {
        for address in first.ipv4.iter().flat_map(|a| &a.ip_address) {
            if !address.private_ip_address.is_empty() {
                let ip = super::ip(client, PATH, &address.private_ip_address)?;
                instance.push(AddressKind::InternalIP, ip.to_string());
            }
            if !address.public_ip_address.is_empty() {
                let ip = super::ip(client, PATH, &address.public_ip_address)?;
                instance.push(AddressKind::ExternalIP, ip.to_string());
            }
        }
        for address in first.ipv6.iter().flat_map(|a| &a.ip_address) {
            if !address.private_ip_address.is_empty() {
                let ip = super::ip(client, PATH, &address.private_ip_address)?;
                instance.push(AddressKind::InternalIP, ip.to_string());
            }
        }
    }
    Ok(instance)
}
