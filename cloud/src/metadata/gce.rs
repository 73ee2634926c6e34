//! Google Compute Engine metadata (`Metadata-Flavor: Google`).
//!
//! Address order follows the GCE cloud controller manager
//! (kubernetes/cloud-provider-gcp, `providers/gce/gce_instances.go`): per
//! network interface, in index order, its internal IP, its access configs'
//! external IPs and one IPv6 address (the first of `ipv6s`, where GCE
//! writes internal and external IPv6 alike; an InternalIP either way); the
//! hostname as InternalDNS and Hostname; then, as its `orderAddresses`,
//! IPv4 addresses and the names before IPv6 ones. Alias IP ranges
//! (`ip-aliases`) and forwarded IPs are never read: they are not the node's.

use std::net::IpAddr;

use super::{AddressKind, Instance, MetadataClient, MetadataError, ProviderIdOptions};

const FLAVOR: [(&str, &str); 1] = [("Metadata-Flavor", "Google")];
const ROOT: &str = "computeMetadata/v1/";
const NICS: &str = "computeMetadata/v1/instance/network-interfaces/";

/// One network interface's node addresses, as the metadata server lists them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Nic {
    /// `ip`: none on an IPv6-only interface.
    ip: Option<IpAddr>,
    /// Each access config's `external-ip`, in index order.
    external_ips: Vec<IpAddr>,
    /// The first of `ipv6s`.
    ipv6: Option<IpAddr>,
}

pub(super) async fn instance(client: &MetadataClient) -> Result<Instance, MetadataError> {
    let listing = client.get_required(NICS, &FLAVOR).await?;
    let mut nics = Vec::new();
    for index in indices(client, NICS, &listing)? {
        nics.push(nic(client, index).await?);
    }
    let text = |leaf: &'static str| async move {
        let answer = client.get(&format!("{ROOT}instance/{leaf}"), &FLAVOR).await?;
        Ok::<_, MetadataError>(answer.map(|a| a.trim().to_owned()).filter(|a| !a.is_empty()))
    };
    let mut instance = Instance {
        hostname: text("hostname").await?,
        instance_id: text("id").await?,
        name: text("name").await?,
        zone: text("zone").await?.map(|zone| zone_name(&zone).to_owned()),
        ..Instance::default()
    };
    instance.project = client
        .get(&format!("{ROOT}project/project-id"), &FLAVOR)
        .await?
        .map(|p| p.trim().to_owned())
        .filter(|p| !p.is_empty());
    for (kind, address) in ccm_order(&nics, instance.hostname.as_deref()) {
        instance.push(kind, address);
    }
    Ok(instance)
}

/// `instance/zone` is `projects/NUMBER/zones/ZONE`: the zone's name.
fn zone_name(zone: &str) -> &str {
    zone.rsplit('/').next().unwrap_or(zone)
}

/// The GCE cloud controller manager (kubernetes/cloud-provider-gcp,
/// `providers/gce`): it writes `gce://PROJECT/ZONE/NAME`, parses a provider
/// ID with `splitProviderID` (`^gce://([^/]+)/([^/]+)/([^/]+)$`), and finds
/// a Node without one by its name up to the first `.`
/// (`canonicalizeInstanceName`), the instance's name.
pub(super) struct Ccm;

impl super::CcmRules for Ccm {
    fn provider_id(&self, instance: &Instance, _: &ProviderIdOptions) -> Result<String, String> {
        let project = super::provider_id_part("project ID", instance.project.as_deref())?;
        let zone = super::provider_id_part("zone", instance.zone.as_deref())?;
        let name = super::provider_id_part("instance name", instance.name.as_deref())?;
        Ok(format!("gce://{project}/{zone}/{name}"))
    }

    fn key(&self, provider_id: &str) -> Result<String, String> {
        let parts: Option<Vec<&str>> = provider_id.strip_prefix("gce://").map(|rest| rest.split('/').collect());
        match parts.as_deref() {
            Some([project, zone, name]) if [project, zone, name].iter().all(|p| !p.is_empty()) => {
                Ok(format!("{project}/{zone}/{name}"))
            }
            _ => Err("not gce://PROJECT/ZONE/NAME (the CCM's splitProviderID refuses it)".into()),
        }
    }

    fn finds_by_name(&self, node: &str, instance: &Instance) -> bool {
        let canonical = node.split('.').next().unwrap_or(node);
        instance.name.as_deref() == Some(canonical)
    }

    fn names(&self, instance: &Instance) -> Vec<String> {
        instance.name.iter().cloned().collect()
    }
}

/// Interface `index`'s addresses.
async fn nic(client: &MetadataClient, index: u32) -> Result<Nic, MetadataError> {
    let path = |leaf: &str| format!("{NICS}{index}/{leaf}");
    let mut nic = Nic::default();
    // An IPv6-only interface has no IPv4 address: an empty answer or none.
    if let Some(ip) = client
        .get(&path("ip"), &FLAVOR)
        .await?
        .filter(|ip| !ip.trim().is_empty())
    {
        nic.ip = Some(of_family(client, &path("ip"), &ip, false)?);
    }
    let configs = path("access-configs/");
    let listing = client.get(&configs, &FLAVOR).await?.unwrap_or_default();
    for config in indices(client, &configs, &listing)? {
        let external = path(&format!("access-configs/{config}/external-ip"));
        // An access config without an external IP answers empty.
        if let Some(ip) = client.get(&external, &FLAVOR).await?.filter(|ip| !ip.trim().is_empty()) {
            nic.external_ips.push(of_family(client, &external, &ip, false)?);
        }
    }
    if let Some(ipv6s) = client.get(&path("ipv6s"), &FLAVOR).await? {
        nic.ipv6 = first_ipv6(&ipv6s)
            .map(|first| of_family(client, &path("ipv6s"), first, true))
            .transpose()?;
    }
    Ok(nic)
}

/// The address at `path`, refused unless of the family the path is for.
fn of_family(client: &MetadataClient, path: &str, text: &str, ipv6: bool) -> Result<IpAddr, MetadataError> {
    let ip = super::ip(client, path, text)?;
    if ip.is_ipv6() == ipv6 {
        return Ok(ip);
    }
    let family = if ipv6 { "IPv6" } else { "IPv4" };
    Err(client.garbage(path, format!("{ip} is not an {family} address")))
}

/// The entries of a listing (`0/\n1/\n`) as indices, in numeric order (the
/// order of the instance's `networkInterfaces` and `accessConfigs`, which
/// the CCM reads); anything else is not GCE's answer.
fn indices(client: &MetadataClient, path: &str, listing: &str) -> Result<Vec<u32>, MetadataError> {
    let mut indices = listing
        .lines()
        .map(|l| l.trim().trim_end_matches('/'))
        .filter(|l| !l.is_empty())
        .map(|entry| {
            Some(entry)
                .filter(|e| e.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|e| e.parse::<u32>().ok())
                .ok_or_else(|| client.garbage(path, format!("{:?} is not an index", super::shorten(entry))))
        })
        .collect::<Result<Vec<_>, _>>()?;
    indices.sort_unstable();
    indices.dedup();
    Ok(indices)
}

/// The first entry of `ipv6s` (one a line; the CCM splits at `/\n`, so a
/// trailing `/` is taken off), as the CCM's metadata path takes it.
fn first_ipv6(ipv6s: &str) -> Option<&str> {
    ipv6s
        .lines()
        .map(|l| l.trim().trim_end_matches('/'))
        .find(|l| !l.is_empty())
}

/// The CCM's list (`NodeAddresses`, then `orderAddresses` for a cluster
/// that is not IPv6 single-stack): every NIC's internal IP, access-config
/// external IPs and IPv6 in turn, the hostname as InternalDNS and Hostname,
/// then a stable partition with IPv4 addresses and the names first.
fn ccm_order(nics: &[Nic], hostname: Option<&str>) -> Vec<(AddressKind, String)> {
    let mut addresses: Vec<(AddressKind, Option<IpAddr>, String)> = Vec::new();
    for nic in nics {
        let internal = nic.ip.iter().map(|&ip| (AddressKind::InternalIP, ip));
        let external = nic.external_ips.iter().map(|&ip| (AddressKind::ExternalIP, ip));
        let ipv6 = nic.ipv6.iter().map(|&ip| (AddressKind::InternalIP, ip));
        for (kind, ip) in internal.chain(external).chain(ipv6) {
            addresses.push((kind, Some(ip), ip.to_string()));
        }
    }
    if let Some(hostname) = hostname {
        addresses.push((AddressKind::InternalDNS, None, hostname.to_owned()));
        addresses.push((AddressKind::Hostname, None, hostname.to_owned()));
    }
    let (first, ipv6): (Vec<_>, Vec<_>) = addresses
        .into_iter()
        .partition(|(_, ip, _)| !ip.is_some_and(|ip| ip.is_ipv6()));
    first
        .into_iter()
        .chain(ipv6)
        .map(|(kind, _, address)| (kind, address))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn listed(addresses: Vec<(AddressKind, String)>) -> Vec<String> {
        addresses.into_iter().map(|(kind, a)| format!("{kind} {a}")).collect()
    }

    /// Upstream's `TestNodeAddresses` instances (dual stack with an internal
    /// IPv6, with an external IPv6 and an access config, IPv4 only, IPv6
    /// only) in an IPv4 or dual-stack cluster, read through the metadata
    /// server: so with the hostname.
    #[test]
    fn the_ccms_order_for_upstreams_cases() {
        let host = Some("n.c.p.internal");
        let dns = ["InternalDNS n.c.p.internal", "Hostname n.c.p.internal"];
        let internal_v6 = Nic {
            ip: Some(ip("10.1.1.1")),
            ipv6: Some(ip("2001:2d00::1")),
            ..Nic::default()
        };
        assert_eq!(
            listed(ccm_order(&[internal_v6], host)),
            ["InternalIP 10.1.1.1", dns[0], dns[1], "InternalIP 2001:2d00::1"]
        );
        let external_v6 = Nic {
            ip: Some(ip("10.1.1.2")),
            external_ips: vec![ip("20.1.1.2")],
            ipv6: Some(ip("2001:1900::2")),
        };
        assert_eq!(
            listed(ccm_order(&[external_v6], None)),
            ["InternalIP 10.1.1.2", "ExternalIP 20.1.1.2", "InternalIP 2001:1900::2"]
        );
        let v6_only = Nic {
            ipv6: Some(ip("2001:1900::2")),
            ..Nic::default()
        };
        assert_eq!(listed(ccm_order(&[v6_only], None)), ["InternalIP 2001:1900::2"]);
    }

    /// Several NICs: every IPv4 address (each NIC's internal one, then its
    /// external ones) in NIC order, the names, then each NIC's IPv6; not
    /// NIC by NIC.
    #[test]
    fn ipv4_of_every_nic_before_any_ipv6() {
        let nics = [
            Nic {
                ip: Some(ip("10.128.0.12")),
                external_ips: vec![ip("34.118.1.2")],
                ipv6: Some(ip("fd20:6b4:1a2b:4000::1")),
            },
            Nic {
                ip: Some(ip("10.130.0.7")),
                ..Nic::default()
            },
            Nic {
                ipv6: Some(ip("2600:1900:4010:c1e:0:2::")),
                ..Nic::default()
            },
        ];
        assert_eq!(
            listed(ccm_order(&nics, Some("h"))),
            [
                "InternalIP 10.128.0.12",
                "ExternalIP 34.118.1.2",
                "InternalIP 10.130.0.7",
                "InternalDNS h",
                "Hostname h",
                "InternalIP fd20:6b4:1a2b:4000::1",
                "InternalIP 2600:1900:4010:c1e:0:2::",
            ]
        );
    }

    #[test]
    fn only_the_first_ipv6_entry() {
        assert_eq!(first_ipv6("fd20::1\nfd20::2\n"), Some("fd20::1"));
        assert_eq!(first_ipv6("fd20::1/\nfd20::2/\n"), Some("fd20::1"));
        assert_eq!(first_ipv6("\n  \n2600:1900::2"), Some("2600:1900::2"));
        assert_eq!(first_ipv6(""), None);
        assert_eq!(first_ipv6("\n/\n"), None);
    }

    fn client() -> MetadataClient {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let base = "http://127.0.0.1:9/".parse().unwrap();
        MetadataClient::new(super::super::Provider::Gce, base, Duration::from_secs(1)).unwrap()
    }

    #[test]
    fn addresses_of_the_wrong_family_are_refused() {
        let client = client();
        assert_eq!(of_family(&client, "ip", "10.0.0.1", false).unwrap(), ip("10.0.0.1"));
        assert_eq!(of_family(&client, "ipv6s", "fd20::1", true).unwrap(), ip("fd20::1"));
        let error = of_family(&client, "ipv6s", "10.0.0.1", true).unwrap_err().to_string();
        assert!(error.ends_with("ipv6s: 10.0.0.1 is not an IPv6 address"), "{error}");
        let error = of_family(&client, "ip", "fd20::1", false).unwrap_err().to_string();
        assert!(error.ends_with("ip: fd20::1 is not an IPv4 address"), "{error}");
    }

    #[test]
    fn listings_are_indices_in_numeric_order() {
        let client = client();
        let got = indices(&client, NICS, "0/\n1/\n10/\n2/\n").unwrap();
        assert_eq!(got, [0, 1, 2, 10]);
        assert_eq!(indices(&client, NICS, "").unwrap(), Vec::<u32>::new());
        for bad in ["0/\n../../x/\n", "-1/", "1e3/", "99999999999/"] {
            let error = indices(&client, NICS, bad).unwrap_err().to_string();
            assert!(error.contains("is not an index"), "{bad:?}: {error}");
            assert!(
                error.contains("/computeMetadata/v1/instance/network-interfaces/"),
                "{error}"
            );
        }
    }
}
