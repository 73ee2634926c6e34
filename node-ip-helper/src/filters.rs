//! Which addresses may be chosen at all: interface and CIDR filters.

use globset::{Glob, GlobMatcher};
use ipnet::IpNet;
use std::net::IpAddr;

use crate::family::Family;

/// Interfaces that carry container, overlay or VPN traffic, never the
/// node's own address. `--exclude-interface` adds to the list;
/// `--no-default-excludes` clears it.
pub const DEFAULT_EXCLUDED_INTERFACES: &[&str] = &[
    "lo",
    "docker*",
    "br-*",
    "cni*",
    "cbr*",
    "flannel*",
    "cali*",
    "cilium_*",
    "lxc*",
    "vxlan*",
    "weave*",
    "kube-*",
    "veth*",
    "virbr*",
    "tailscale*",
    "wg*",
    "tun*",
    "tap*",
    "zt*",
    "nebula*",
];

#[derive(Debug, Clone)]
pub struct InterfacePattern {
    text: String,
    matcher: GlobMatcher,
}

impl InterfacePattern {
    pub fn parse(flag: &str, text: &str) -> Result<Self, String> {
        let glob = Glob::new(text).map_err(|e| format!("{flag} {text:?} is not a valid glob: {e}"))?;
        Ok(Self {
            text: text.to_owned(),
            matcher: glob.compile_matcher(),
        })
    }

    pub fn matches(&self, name: &str) -> bool {
        self.matcher.is_match(name)
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// A `--allow-cidr` or `--deny-cidr` value, ADDRESS/LENGTH, refused with
/// what is wrong in its own terms (ipnet says "invalid IP address syntax"
/// for a prefix length of 33 as for anything else).
/// The flag, or the variable, is named by the caller (clap's error).
pub fn parse_cidr(text: &str) -> Result<IpNet, String> {
    let wrong = |what: String| format!("{text:?}: {what}; write ADDRESS/LENGTH, such as 10.0.0.0/8 or fd00::/8");
    let most = |ip: &IpAddr| match Family::of(ip) {
        Family::V4 => (32, "IPv4 (128 for IPv6)"),
        Family::V6 => (128, "IPv6 (32 for IPv4)"),
    };
    let Some((address, length)) = text.split_once('/') else {
        return Err(match text.parse::<IpAddr>() {
            Ok(ip) => wrong(format!("no prefix length (this address alone is {ip}/{})", most(&ip).0)),
            Err(_) => wrong("not a CIDR".to_owned()),
        });
    };
    let ip: IpAddr = address
        .parse()
        .map_err(|_| wrong(format!("{address:?} is not an IP address")))?;
    let (max, family) = most(&ip);
    let length: u32 = length
        .parse()
        .map_err(|_| wrong(format!("the prefix length {length:?} is not a number from 0 to {max}")))?;
    match u8::try_from(length) {
        Ok(length) if u32::from(length) <= max => IpNet::new(ip, length).map_err(|e| wrong(e.to_string())),
        _ => Err(wrong(format!(
            "the prefix length {length} is longer than {max}, the most for {family}"
        ))),
    }
}

#[derive(Debug, Clone, Default)]
pub struct Filters {
    /// `--interface`: when not empty, only these interfaces.
    pub interfaces: Vec<InterfacePattern>,
    /// Default exclusions plus `--exclude-interface`.
    pub excluded_interfaces: Vec<InterfacePattern>,
    /// `--allow-cidr`: when not empty, an address must be inside one of these.
    pub allow_cidrs: Vec<IpNet>,
    /// `--deny-cidr`: an address inside one of these is never chosen.
    pub deny_cidrs: Vec<IpNet>,
}

impl Filters {
    /// Why `name` is filtered out, if it is.
    pub fn interface_rejection(&self, name: &str) -> Option<String> {
        if let Some(pattern) = self.excluded_interfaces.iter().find(|p| p.matches(name)) {
            return Some(format!(
                "interface {name} matches excluded pattern {:?}",
                pattern.as_str()
            ));
        }
        if !self.interfaces.is_empty() && !self.interfaces.iter().any(|p| p.matches(name)) {
            let wanted: Vec<&str> = self.interfaces.iter().map(InterfacePattern::as_str).collect();
            return Some(format!(
                "interface {name} does not match --interface {}",
                wanted.join(", ")
            ));
        }
        None
    }

    /// Why `ip` is filtered out by the CIDR lists, if it is.
    pub fn cidr_rejection(&self, ip: &IpAddr) -> Option<String> {
        if let Some(net) = self.deny_cidrs.iter().find(|n| n.contains(ip)) {
            return Some(format!("inside --deny-cidr {net}"));
        }
        let same_family: Vec<&IpNet> = self
            .allow_cidrs
            .iter()
            .filter(|n| matches!((n, ip), (IpNet::V4(_), IpAddr::V4(_)) | (IpNet::V6(_), IpAddr::V6(_))))
            .collect();
        // An allow-list for one family does not empty the other family.
        if !same_family.is_empty() && !same_family.iter().any(|n| n.contains(ip)) {
            let nets: Vec<String> = same_family.iter().map(|n| n.to_string()).collect();
            return Some(format!("outside --allow-cidr {}", nets.join(", ")));
        }
        None
    }
}

/// The default exclusions, as patterns.
pub fn default_exclusions() -> Vec<InterfacePattern> {
    DEFAULT_EXCLUDED_INTERFACES
        .iter()
        .filter_map(|p| InterfacePattern::parse("default exclusion", p).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_default_exclusion_is_a_valid_glob() {
        assert_eq!(default_exclusions().len(), DEFAULT_EXCLUDED_INTERFACES.len());
    }

    #[test]
    fn interface_filters() {
        let filters = Filters {
            interfaces: vec![InterfacePattern::parse("--interface", "eth*").unwrap()],
            excluded_interfaces: default_exclusions(),
            ..Filters::default()
        };
        assert_eq!(filters.interface_rejection("eth0"), None);
        assert!(
            filters
                .interface_rejection("ens5")
                .unwrap()
                .contains("--interface eth*")
        );
        assert!(
            filters
                .interface_rejection("tailscale0")
                .unwrap()
                .contains("\"tailscale*\"")
        );
        assert!(filters.interface_rejection("cilium_host").is_some());
    }

    #[test]
    fn cidrs_are_parsed_as_ipnet_parses_them_and_refused_with_the_reason() {
        for text in ["10.0.0.0/8", "10.0.0.5/32", "0.0.0.0/0", "fd00::/8", "2001:db8::1/128"] {
            assert_eq!(parse_cidr(text), Ok(text.parse().expect("a network")), "{text}");
        }
        for (text, reason) in [
            (
                "10.0.0.0/33",
                "the prefix length 33 is longer than 32, the most for IPv4 (128 for IPv6)",
            ),
            (
                "10.0.0.0/4294967296",
                "the prefix length \"4294967296\" is not a number from 0 to 32",
            ),
            (
                "10.0.0.0/256",
                "the prefix length 256 is longer than 32, the most for IPv4 (128 for IPv6)",
            ),
            (
                "fd00::/129",
                "the prefix length 129 is longer than 128, the most for IPv6 (32 for IPv4)",
            ),
            ("10.0.0.5", "no prefix length (this address alone is 10.0.0.5/32)"),
            ("10.0.0.300/8", "\"10.0.0.300\" is not an IP address"),
            ("10.0.0.0/x", "the prefix length \"x\" is not a number from 0 to 32"),
            ("eth0", "not a CIDR"),
        ] {
            let err = parse_cidr(text).unwrap_err();
            assert_eq!(
                err,
                format!("{text:?}: {reason}; write ADDRESS/LENGTH, such as 10.0.0.0/8 or fd00::/8")
            );
        }
    }

    #[test]
    fn cidr_filters_apply_per_family() {
        let filters = Filters {
            allow_cidrs: vec!["10.0.0.0/8".parse().unwrap()],
            deny_cidrs: vec!["10.9.0.0/16".parse().unwrap()],
            ..Filters::default()
        };
        assert_eq!(filters.cidr_rejection(&"10.1.2.3".parse().unwrap()), None);
        assert!(
            filters
                .cidr_rejection(&"10.9.2.3".parse().unwrap())
                .unwrap()
                .contains("--deny-cidr")
        );
        assert!(
            filters
                .cidr_rejection(&"192.168.1.1".parse().unwrap())
                .unwrap()
                .contains("--allow-cidr")
        );
        assert_eq!(filters.cidr_rejection(&"2001:db8::1".parse().unwrap()), None);
    }
}
