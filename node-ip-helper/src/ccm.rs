//! What kubelet and the cloud controller manager do with `--node-ip`, rule
//! for rule (component-helpers `ParseNodeIPArgument`/`ParseNodeIPAnnotation`,
//! kubelet's `validateNodeIP`, cloud-provider `GetNodeAddressesFromNodeIP`).

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

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

/// k8s.io/utils' `ParseIPSloppy`, which kubelet and the CCM parse every
/// node IP with: Go 1.16's `net.ParseIP`, which reads IPv4 octets with
/// leading zeros as decimal (`010.1.2.3` is 10.1.2.3) and allows IPv6 groups
/// of more than four digits when their value fits (`abcd::01234`), and
/// refuses zones (`fe80::1%eth0`) and prefixes (`1.2.3.4/32`). An IPv4-mapped
/// IPv6 address comes back as IPv4: Go's `net.IP` makes no difference
/// between the two (`String`, `Equal`, the family, loopback and the rest).
pub fn parse_ip_sloppy(text: &str) -> Option<IpAddr> {
    let ip = match text.bytes().find(|b| matches!(b, b'.' | b':'))? {
        b'.' => IpAddr::V4(go_ipv4(text)?),
        _ => IpAddr::V6(go_ipv6(text)?),
    };
    Some(ip.to_canonical())
}

/// Go's `dtoi`/`xtoi`: the number at the start of `s` in `radix`, and how
/// many bytes it took; `None` without a digit or from 0xFFFFFF up.
fn go_number(s: &[u8], radix: u32) -> Option<(u32, usize)> {
    let mut n = 0u32;
    let mut taken = 0;
    for digit in s.iter().map_while(|&b| char::from(b).to_digit(radix)) {
        n = n * radix + digit;
        taken += 1;
        if n >= 0xFF_FFFF {
            return None;
        }
    }
    (taken > 0).then_some((n, taken))
}

fn go_ipv4(s: &str) -> Option<Ipv4Addr> {
    let mut s = s.as_bytes();
    let mut octets = [0u8; 4];
    for (i, octet) in octets.iter_mut().enumerate() {
        if i > 0 {
            s = s.strip_prefix(b".")?;
        }
        let (n, taken) = go_number(s, 10)?;
        *octet = u8::try_from(n).ok()?;
        s = &s[taken..];
    }
    s.is_empty().then(|| Ipv4Addr::from(octets))
}

fn go_ipv6(text: &str) -> Option<Ipv6Addr> {
    let mut s = text.as_bytes();
    let mut ip = [0u8; 16];
    let mut ellipsis = None;
    if let Some(rest) = s.strip_prefix(b"::") {
        ellipsis = Some(0);
        s = rest;
        if s.is_empty() {
            return Some(Ipv6Addr::UNSPECIFIED);
        }
    }
    let mut i = 0;
    while i < 16 {
        let (n, taken) = go_number(s, 16)?;
        if n > 0xFFFF {
            return None;
        }
        if s.get(taken) == Some(&b'.') {
            // A trailing IPv4 address, in the last four bytes or after `::`.
            if (ellipsis.is_none() && i != 12) || i + 4 > 16 {
                return None;
            }
            let v4 = go_ipv4(std::str::from_utf8(s).ok()?)?;
            ip[i..i + 4].copy_from_slice(&v4.octets());
            s = &[];
            i += 4;
            break;
        }
        ip[i..i + 2].copy_from_slice(&(n as u16).to_be_bytes());
        i += 2;
        s = &s[taken..];
        if s.is_empty() {
            break;
        }
        if s[0] != b':' || s.len() == 1 {
            return None;
        }
        s = &s[1..];
        if s[0] == b':' {
            if ellipsis.is_some() {
                return None;
            }
            ellipsis = Some(i);
            s = &s[1..];
            if s.is_empty() {
                break;
            }
        }
    }
    if !s.is_empty() {
        return None;
    }
    match ellipsis {
        Some(at) if i < 16 => {
            // Move what follows the `::` to the end; zeros in between.
            let shift = 16 - i;
            ip.copy_within(at..i, at + shift);
            ip[at..at + shift].fill(0);
        }
        None if i < 16 => return None,
        // `::` must stand for at least one group.
        Some(_) => return None,
        None => {}
    }
    Some(Ipv6Addr::from(ip))
}

/// component-helpers' `parseNodeIP`: the addresses, and (when `sloppy`, as
/// for kubelet's flag) the entries it could not parse and ignored.
fn parse_node_ips(value: &str, sloppy: bool) -> Result<(Vec<IpAddr>, Vec<String>), NodeIpError> {
    let mut ips = Vec::new();
    let mut ignored = Vec::new();
    if !(sloppy && value.is_empty()) {
        for part in value.split(',') {
            let part = if sloppy { part.trim() } else { part };
            match parse_ip_sloppy(part) {
                Some(ip) => ips.push(ip),
                None if sloppy => ignored.push(part.to_owned()),
                None => return Err(NodeIpError::Unparsable(part.to_owned())),
            }
        }
    }
    if ips.len() > 2 || (ips.len() == 2 && ips[0].is_ipv6() == ips[1].is_ipv6()) {
        return Err(NodeIpError::NotSingleOrDualStack);
    }
    if ips.len() == 2 && ips.iter().any(IpAddr::is_unspecified) {
        return Err(NodeIpError::UnspecifiedInPair);
    }
    Ok((ips, ignored))
}

/// kubelet's `--node-ip` parsing with `--cloud-provider=external`: the
/// addresses, and the entries kubelet logs as "Could not parse some node
/// IP(s), ignoring them" (empty ones too) and carries on without.
pub fn parse_node_ip_argument(value: &str) -> Result<(Vec<IpAddr>, Vec<String>), NodeIpError> {
    parse_node_ips(value, true)
}

/// The CCM's strict parsing of the `alpha.kubernetes.io/provided-node-ip` annotation.
pub fn parse_node_ip_annotation(value: &str) -> Result<Vec<IpAddr>, NodeIpError> {
    parse_node_ips(value, false).map(|(ips, _)| ips)
}

/// Why kubelet refuses `ip` as a node IP, if it does (`validateNodeIP`,
/// apart from the check that the address is on a local interface).
pub fn kubelet_rejects(ip: &IpAddr) -> Option<&'static str> {
    if ip.is_loopback() {
        Some("nodeIP can't be loopback address")
    } else if ip.is_multicast() {
        Some("nodeIP can't be a multicast address")
    } else if is_link_local(ip) {
        Some("nodeIP can't be a link-local unicast address")
    } else if ip.is_unspecified() {
        Some("nodeIP can't be an all zeros address")
    } else {
        None
    }
}

/// Go's `IsLinkLocalUnicast`: 169.254.0.0/16 or fe80::/10.
pub fn is_link_local(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) == 0xfe80,
    }
}

/// The annotation kubelet writes for its parsed `--node-ips`: only for a
/// real first address, not for `0.0.0.0` or `::` (or no flag), and as Go's
/// `ip.String()` (IPv6 lowercased and shortened), not as typed.
pub fn provided_node_ip_annotation(node_ips: &[IpAddr]) -> Option<String> {
    match node_ips.first() {
        Some(first) if !first.is_unspecified() => Some(
            node_ips
                .iter()
                .filter(|ip| !ip.is_unspecified())
                .map(IpAddr::to_string)
                .collect::<Vec<_>>()
                .join(","),
        ),
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
        /// `--node-ip` entries kubelet cannot parse, logs and ignores.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        ignored: Vec<String>,
    },
    /// kubelet itself refuses the flag and does not start.
    KubeletRefuses { reason: String },
    /// The node stays tainted `node.cloudprovider.kubernetes.io/uninitialized`.
    StaysTainted { annotation: Option<String>, reason: String },
}

/// kubelet's parsing, then the CCM's node initialization, for a node
/// started with `--node-ip=node_ip` on an instance with `cloud` addresses.
pub fn simulate(node_ip: &str, cloud: &[NodeAddress]) -> Verdict {
    let (node_ips, ignored) = match parse_node_ip_argument(node_ip) {
        Ok(parsed) => parsed,
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
    let annotation = provided_node_ip_annotation(&node_ips);
    match &annotation {
        None => Verdict::Initializes {
            annotation,
            addresses: cloud.to_vec(),
            ignored,
        },
        Some(value) => match addresses_from_node_ip(value, cloud) {
            Ok(addresses) => Verdict::Initializes {
                annotation: annotation.clone(),
                addresses,
                ignored,
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
            "127.0.0.1",
            "169.254.1.1",
            "fe80::1",
            "224.0.0.1",
        ] {
            assert!(refused(bad), "{bad}");
        }
        assert_eq!(parse_node_ip_argument(" 1.2.3.4 , abcd::1 ").unwrap().0.len(), 2);
        assert_eq!(
            parse_node_ip_argument("010.001.002.003").unwrap().0,
            ["10.1.2.3".parse::<IpAddr>().unwrap()]
        );
        assert_eq!(
            parse_node_ip_argument("1.2.3.4, nope,").unwrap().1,
            ["nope", ""],
            "ignored entries are reported, trimmed"
        );
        assert!(
            parse_node_ip_annotation("1.2.3.4, abcd::1").is_err(),
            "the annotation is parsed strictly"
        );
        assert!(parse_node_ip_annotation("").is_err());
    }

    /// One case of tests/data/node-ip-helper/odd-node-ip-values.json.
    #[derive(Deserialize)]
    struct OddValue {
        node_ip: String,
        kubelet_and_ccm: String,
    }

    /// What kubelet (component-helpers `ParseNodeIPArgument`, which ignores
    /// what `ParseIPSloppy` cannot parse; the `NodeAddress` setter writing
    /// `ip.String()`) and the CCM (`GetNodeAddressesFromNodeIP`, matching
    /// with `net.IP.Equal`) do with odd `--node-ip` values, on KEP-3705's
    /// cloud: `ANNOTATION ADDRESSES`, `refused` or `stuck`. The table is
    /// shared with the cluster tier, which checks the parsing against
    /// kubelet's own Go code (differential_node_ip.rs).
    #[test]
    fn odd_node_ip_values_as_kubelet_reads_them() {
        let table: serde_json::Value =
            serde_json::from_str(include_str!("../../tests/data/node-ip-helper/odd-node-ip-values.json")).unwrap();
        let cases: Vec<OddValue> = serde_json::from_value(table["cases"].clone()).unwrap();
        assert!(cases.len() > 40, "{} cases", cases.len());
        let cloud = kep_3705_cloud();
        for OddValue {
            node_ip,
            kubelet_and_ccm,
        } in cases
        {
            let got = match simulate(&node_ip, &cloud) {
                Verdict::Initializes {
                    annotation, addresses, ..
                } => {
                    let mut words = vec![annotation.unwrap_or_else(|| "-".into())];
                    words.extend(addresses.into_iter().map(|a| a.address));
                    words.join(" ")
                }
                Verdict::KubeletRefuses { .. } => "refused".into(),
                Verdict::StaysTainted { .. } => "stuck".into(),
            };
            assert_eq!(got, kubelet_and_ccm, "--node-ip {node_ip:?}");
        }
    }

    /// The CCM parses the cloud's addresses sloppily too, and compares with
    /// `net.IP.Equal`, for which ::ffff:1.2.3.4 and 1.2.3.4 are the same.
    #[test]
    fn cloud_addresses_compare_as_go_ips() {
        for (listed, node_ip) in [
            ("1.2.3.4", "::ffff:1.2.3.4"),
            ("::ffff:1.2.3.4", "1.2.3.4"),
            ("01.2.3.4", "1.2.3.4"),
            ("ABCD::1234", "abcd::1234"),
        ] {
            let cloud = vec![
                NodeAddress::new("InternalIP", listed),
                NodeAddress::new("InternalIP", "5.6.7.8"),
            ];
            assert_eq!(addresses(&simulate(node_ip, &cloud)), [listed], "{listed} vs {node_ip}");
        }
    }

    #[test]
    fn no_cloud_addresses_keeps_the_taint() {
        assert!(matches!(simulate("1.2.3.4", &[]), Verdict::StaysTainted { .. }));
    }
}
