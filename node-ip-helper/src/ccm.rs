//! What kubelet and the cloud controller manager do with `--node-ip`, rule
//! for rule (component-helpers `ParseNodeIPArgument`/`ParseNodeIPAnnotation`,
//! kubelet's `validateNodeIP`, cloud-provider `GetNodeAddressesFromNodeIP`).

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};

use serde::{Deserialize, Serialize};

/// One entry of `Node.status.addresses`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeAddress {
    #[serde(rename = "type")]
    pub kind: String,
    pub address: String,
}

impl NodeAddress {
    pub fn new(kind: &str, address: &str) -> Self {
        Self {
            kind: kind.to_owned(),
            address: address.to_owned(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeIpError {
    #[error("could not parse {0:?} as an IP address")]
    Unparsable(String),
    #[error("must contain either a single IP or a dual-stack pair of IPs")]
    NotSingleOrDualStack,
    #[error("dual-stack node IP cannot include '0.0.0.0' or '::'")]
    UnspecifiedInPair,
    #[error("failed to get node address from cloud provider that matches ip: {0}")]
    NotInCloudAddresses(IpAddr),
    #[error("no cloud addresses: the cloud provider reported none for this instance")]
    NoCloudAddresses,
}

/// Go's `ParseIPSloppy`: also accepts IPv4 octets with leading zeros, read
/// as decimal.
pub fn parse_ip_sloppy(text: &str) -> Option<IpAddr> {
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Some(ip);
    }
    let octets: Vec<&str> = text.split('.').collect();
    if octets.len() != 4 {
        return None;
    }
    let mut bytes = [0u8; 4];
    for (byte, octet) in bytes.iter_mut().zip(&octets) {
        if octet.is_empty() || octet.len() > 3 || !octet.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        *byte = octet.parse().ok()?;
    }
    Some(IpAddr::V4(Ipv4Addr::from(bytes)))
}

fn parse_node_ips(value: &str, sloppy: bool) -> Result<Vec<IpAddr>, NodeIpError> {
    let mut ips = Vec::new();
    if !(sloppy && value.is_empty()) {
        for part in value.split(',') {
            let part = if sloppy { part.trim() } else { part };
            ips.push(parse_ip_sloppy(part).ok_or_else(|| NodeIpError::Unparsable(part.to_owned()))?);
        }
    }
    if ips.len() > 2 || (ips.len() == 2 && ips[0].is_ipv6() == ips[1].is_ipv6()) {
        return Err(NodeIpError::NotSingleOrDualStack);
    }
    if ips.len() == 2 && ips.iter().any(IpAddr::is_unspecified) {
        return Err(NodeIpError::UnspecifiedInPair);
    }
    Ok(ips)
}

/// kubelet's `--node-ip` parsing with `--cloud-provider=external`.
pub fn parse_node_ip_argument(value: &str) -> Result<Vec<IpAddr>, NodeIpError> {
    parse_node_ips(value, true)
}

/// The CCM's strict parsing of the `alpha.kubernetes.io/provided-node-ip` annotation.
pub fn parse_node_ip_annotation(value: &str) -> Result<Vec<IpAddr>, NodeIpError> {
    parse_node_ips(value, false)
}

/// Why kubelet refuses `ip` as a node IP, if it does (`validateNodeIP`,
/// apart from the check that the address is on a local interface).
pub fn kubelet_rejects(ip: &IpAddr) -> Option<&'static str> {
    let link_local = match ip {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) == 0xfe80,
    };
    if ip.is_loopback() {
        Some("nodeIP can't be loopback address")
    } else if ip.is_multicast() {
        Some("nodeIP can't be a multicast address")
    } else if link_local {
        Some("nodeIP can't be a link-local unicast address")
    } else if ip.is_unspecified() {
        Some("nodeIP can't be an all zeros address")
    } else {
        None
    }
}

/// The annotation kubelet writes for a `--node-ip` value: only for a real
/// first address, not for `0.0.0.0` or `::` (or no flag).
pub fn provided_node_ip_annotation(node_ips: &[IpAddr], raw: &str) -> Option<String> {
    match node_ips.first() {
        Some(first) if !first.is_unspecified() => Some(raw.replace(' ', "")),
        _ => None,
    }
}

/// The CCM's `GetNodeAddressesFromNodeIP`: for each provided IP, every
/// cloud address equal to it (keeping its type), then every cloud address
/// of a type none of them had.
pub fn addresses_from_node_ip(provided: &str, cloud: &[NodeAddress]) -> Result<Vec<NodeAddress>, NodeIpError> {
    let node_ips = parse_node_ip_annotation(provided)?;
    let mut enforced = Vec::new();
    let mut enforced_types = BTreeSet::new();
    for node_ip in &node_ips {
        let matching: Vec<&NodeAddress> = cloud
            .iter()
            .filter(|a| parse_ip_sloppy(&a.address).as_ref() == Some(node_ip))
            .collect();
        if matching.is_empty() {
            return Err(NodeIpError::NotInCloudAddresses(*node_ip));
        }
        for address in matching {
            enforced.push(address.clone());
            enforced_types.insert(address.kind.clone());
        }
    }
    enforced.extend(cloud.iter().filter(|a| !enforced_types.contains(&a.kind)).cloned());
    Ok(enforced)
}

/// What the CCM's node controller will do with a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", rename_all = "kebab-case")]
pub enum Verdict {
    /// The taint comes off and these addresses are set.
    Initializes {
        annotation: Option<String>,
        addresses: Vec<NodeAddress>,
    },
    /// kubelet itself refuses the flag and does not start.
    KubeletRefuses { reason: String },
    /// The node stays tainted `node.cloudprovider.kubernetes.io/uninitialized`.
    StaysTainted { annotation: Option<String>, reason: String },
}

/// kubelet's parsing, then the CCM's node initialization, for a node
/// started with `--node-ip=node_ip` on an instance with `cloud` addresses.
pub fn simulate(node_ip: &str, cloud: &[NodeAddress]) -> Verdict {
    let node_ips = match parse_node_ip_argument(node_ip) {
        Ok(ips) => ips,
        Err(e) => {
            return Verdict::KubeletRefuses {
                reason: format!("--node-ip {node_ip:?}: {e}"),
            };
        }
    };
    if let Some((ip, why)) = node_ips
        .iter()
        .filter(|ip| !ip.is_unspecified())
        .find_map(|ip| kubelet_rejects(ip).map(|why| (ip, why)))
    {
        return Verdict::KubeletRefuses {
            reason: format!("--node-ip {ip}: {why}"),
        };
    }
    if cloud.is_empty() {
        return Verdict::StaysTainted {
            annotation: None,
            reason: NodeIpError::NoCloudAddresses.to_string(),
        };
    }
    let annotation = provided_node_ip_annotation(&node_ips, node_ip);
    match &annotation {
        None => Verdict::Initializes {
            annotation,
            addresses: cloud.to_vec(),
        },
        Some(value) => match addresses_from_node_ip(value, cloud) {
            Ok(addresses) => Verdict::Initializes {
                annotation: annotation.clone(),
                addresses,
            },
            Err(e) => Verdict::StaysTainted {
                reason: format!("provided node ip for node is not valid: {e}"),
                annotation: annotation.clone(),
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// KEP-3705's worked example: the cloud lists 1.2.3.4, 5.6.7.8,
    /// abcd::1234 and abcd::5678 as InternalIPs.
    fn kep_3705_cloud() -> Vec<NodeAddress> {
        ["1.2.3.4", "5.6.7.8", "abcd::1234", "abcd::5678"]
            .iter()
            .map(|ip| NodeAddress::new("InternalIP", ip))
            .collect()
    }

    fn addresses(verdict: &Verdict) -> Vec<&str> {
        match verdict {
            Verdict::Initializes { addresses, .. } => addresses.iter().map(|a| a.address.as_str()).collect(),
            other => panic!("expected initialization, got {other:?}"),
        }
    }

    #[test]
    fn kep_3705_table() {
        let cloud = kep_3705_cloud();
        let all = ["1.2.3.4", "5.6.7.8", "abcd::1234", "abcd::5678"];
        assert_eq!(addresses(&simulate("", &cloud)), all, "no --node-ip");
        assert_eq!(addresses(&simulate("0.0.0.0", &cloud)), all, "0.0.0.0");
        assert_eq!(
            addresses(&simulate("::", &cloud)),
            all,
            ":: does not make the node IPv6-primary"
        );
        assert_eq!(addresses(&simulate("1.2.3.4", &cloud)), ["1.2.3.4"]);
        assert_eq!(addresses(&simulate("abcd::5678", &cloud)), ["abcd::5678"]);
        assert_eq!(
            addresses(&simulate("1.2.3.4,abcd::1234", &cloud)),
            ["1.2.3.4", "abcd::1234"]
        );
        assert_eq!(
            addresses(&simulate("abcd::1234,1.2.3.4", &cloud)),
            ["abcd::1234", "1.2.3.4"]
        );
        match simulate("9.10.11.12", &cloud) {
            Verdict::StaysTainted { reason, annotation } => {
                assert_eq!(annotation.as_deref(), Some("9.10.11.12"));
                assert!(reason.ends_with("failed to get node address from cloud provider that matches ip: 9.10.11.12"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn other_address_types_are_kept() {
        let cloud = vec![
            NodeAddress::new("InternalIP", "10.0.0.5"),
            NodeAddress::new("InternalIP", "10.0.0.6"),
            NodeAddress::new("ExternalIP", "203.0.113.7"),
            NodeAddress::new("InternalDNS", "ip-10-0-0-5.ec2.internal"),
            NodeAddress::new("Hostname", "ip-10-0-0-5.ec2.internal"),
        ];
        assert_eq!(
            addresses(&simulate("10.0.0.6", &cloud)),
            [
                "10.0.0.6",
                "203.0.113.7",
                "ip-10-0-0-5.ec2.internal",
                "ip-10-0-0-5.ec2.internal"
            ]
        );
        // An IPv6-only node cannot drop the IPv4 ExternalIP.
        let with_v6 = [cloud.clone(), vec![NodeAddress::new("InternalIP", "2600:1f18::5")]].concat();
        assert_eq!(
            addresses(&simulate("2600:1f18::5", &with_v6))[..2],
            ["2600:1f18::5", "203.0.113.7"]
        );
        // Matching an ExternalIP keeps every InternalIP.
        assert_eq!(
            addresses(&simulate("203.0.113.7", &cloud))[..3],
            ["203.0.113.7", "10.0.0.5", "10.0.0.6"]
        );
    }

    #[test]
    fn kubelet_argument_rules() {
        let refused = |value: &str| matches!(simulate(value, &kep_3705_cloud()), Verdict::KubeletRefuses { .. });
        for bad in [
            "1.2.3.4,5.6.7.8",
            "abcd::1,abcd::2",
            "0.0.0.0,::1",
            "1.2.3.4,abcd::1,5.6.7.8",
            "nope",
            "127.0.0.1",
            "169.254.1.1",
            "fe80::1",
            "224.0.0.1",
        ] {
            assert!(refused(bad), "{bad}");
        }
        assert_eq!(parse_node_ip_argument(" 1.2.3.4 , abcd::1 ").unwrap().len(), 2);
        assert_eq!(
            parse_node_ip_argument("010.001.002.003").unwrap(),
            ["10.1.2.3".parse::<IpAddr>().unwrap()]
        );
        assert!(
            parse_node_ip_annotation("1.2.3.4, abcd::1").is_err(),
            "the annotation is parsed strictly"
        );
        assert!(parse_node_ip_annotation("").is_err());
    }

    #[test]
    fn no_cloud_addresses_keeps_the_taint() {
        assert!(matches!(simulate("1.2.3.4", &[]), Verdict::StaysTainted { .. }));
    }
}
