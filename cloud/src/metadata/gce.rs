//! Google Compute Engine metadata (`Metadata-Flavor: Google`).
//!
//! Address order follows the GCE cloud controller manager: per network
//! interface its internal IP, its IPv6 addresses and its access configs'
//! external IPs; then the instance's hostname as InternalDNS and Hostname.

use super::{AddressKind, Instance, MetadataClient, MetadataError};

const FLAVOR: [(&str, &str); 1] = [("Metadata-Flavor", "Google")];
const ROOT: &str = "computeMetadata/v1/";

pub(super) async fn instance(client: &MetadataClient) -> Result<Instance, MetadataError> {
    let listing = client
        .get_required(&format!("{ROOT}instance/network-interfaces/"), &FLAVOR)
        .await?;
    let mut instance = Instance::default();
    for nic in entries(&listing) {
        let path = |leaf: &str| format!("{ROOT}instance/network-interfaces/{nic}/{leaf}");
        if let Some(ip) = client.get(&path("ip"), &FLAVOR).await? {
            instance.push(
                AddressKind::InternalIP,
                super::ip(client, &path("ip"), &ip)?.to_string(),
            );
        }
        for line in client.get(&path("ipv6s"), &FLAVOR).await?.unwrap_or_default().lines() {
            if !line.trim().is_empty() {
                instance.push(
                    AddressKind::InternalIP,
                    super::ip(client, &path("ipv6s"), line)?.to_string(),
                );
            }
        }
        let configs = client.get(&path("access-configs/"), &FLAVOR).await?.unwrap_or_default();
        for config in entries(&configs) {
            let external = path(&format!("access-configs/{config}/external-ip"));
            // An access config without an external IP answers empty.
            if let Some(ip) = client.get(&external, &FLAVOR).await?.filter(|ip| !ip.trim().is_empty()) {
                instance.push(AddressKind::ExternalIP, super::ip(client, &external, &ip)?.to_string());
            }
        }
    }
    if let Some(hostname) = client.get(&format!("{ROOT}instance/hostname"), &FLAVOR).await? {
        let hostname = hostname.trim().to_owned();
        instance.push(AddressKind::InternalDNS, hostname.clone());
        instance.push(AddressKind::Hostname, hostname.clone());
        instance.hostname = Some(hostname);
    }
    instance.instance_id = client
        .get(&format!("{ROOT}instance/id"), &FLAVOR)
        .await?
        .map(|id| id.trim().to_owned());
    Ok(instance)
}

/// `0/\n1/\n` → `["0", "1"]`.
fn entries(listing: &str) -> impl Iterator<Item = &str> {
    listing
        .lines()
        .map(|l| l.trim().trim_end_matches('/'))
        .filter(|l| !l.is_empty())
}
