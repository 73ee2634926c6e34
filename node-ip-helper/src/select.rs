//! Choosing the node's IPs from the host's own state (`--source local`).
//!
//! Within a family: the interface of the default route with the lowest
//! metric, and on it the primary address in kernel order; with no usable
//! default-route interface, the first candidate in interface-index order.
//! kubelet's own detection ignores metrics and takes the first default
//! route in /proc order, which is how multi-NIC hosts get the wrong IP.

use std::net::IpAddr;

use serde::Serialize;

use crate::ccm::is_link_local;
use crate::family::{Family, IpFamilyPolicy};
use crate::filters::Filters;
use crate::host::{Host, HostAddress};

/// One address that qualified, and why it was chosen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChosenAddress {
    pub ip: IpAddr,
    pub family: Family,
    pub interface: String,
    pub reason: String,
}

/// One address that was seen and set aside, and the rule that did it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rejection {
    pub ip: IpAddr,
    pub interface: String,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", describe_failure(.missing, .rejections, .chosen))]
pub struct NoAddress {
    /// The families for which nothing qualified.
    pub missing: Vec<Family>,
    pub rejections: Vec<Rejection>,
    pub chosen: Vec<ChosenAddress>,
}

fn describe_failure(missing: &[Family], rejections: &[Rejection], chosen: &[ChosenAddress]) -> String {
    let families: Vec<&str> = missing.iter().map(|f| f.name()).collect();
    let mut text = format!("no {} address qualifies", families.join(" or "));
    if !chosen.is_empty() {
        let found: Vec<String> = chosen.iter().map(|c| format!("{} on {}", c.ip, c.interface)).collect();
        text.push_str(&format!(" (found only {})", found.join(", ")));
    }
    if rejections.is_empty() {
        text.push_str("; no addresses were seen at all");
    } else {
        let seen: Vec<String> = rejections
            .iter()
            .filter(|r| missing.contains(&Family::of(&r.ip)))
            .map(|r| format!("{} on {}: {}", r.ip, r.interface, r.reason))
            .collect();
        if seen.is_empty() {
            text.push_str("; no address of that family was seen");
        } else {
            text.push_str(&format!("; seen and set aside: {}", seen.join("; ")));
        }
    }
    text
}

/// Candidates (in kernel order) and the addresses set aside.
pub fn candidates<'a>(host: &'a Host, filters: &Filters) -> (Vec<&'a HostAddress>, Vec<Rejection>) {
    let mut kept = Vec::new();
    let mut rejected = Vec::new();
    for address in &host.addresses {
        let interface = host.interface(address.interface_index);
        let name = interface.map_or_else(|| format!("#{}", address.interface_index), |i| i.name.clone());
        let reason = match interface {
            None => Some("interface not found".to_owned()),
            Some(i) if !i.up => Some(format!("interface {} is down", i.name)),
            Some(i) => address_rejection(address).or_else(|| filters.interface_rejection(&i.name)),
        }
        .or_else(|| filters.cidr_rejection(&address.ip));
        match reason {
            Some(reason) => rejected.push(Rejection {
                ip: address.ip,
                interface: name,
                reason,
            }),
            None => kept.push(address),
        }
    }
    (kept, rejected)
}

/// kubelet's `validateNodeIP` rules, plus the IPv6 states in which an
/// address cannot be used yet or any more.
fn address_rejection(address: &HostAddress) -> Option<String> {
    let ip = address.ip;
    let reason = if ip.is_loopback() {
        "loopback address"
    } else if ip.is_unspecified() {
        "unspecified address"
    } else if ip.is_multicast() {
        "multicast address"
    } else if is_link_local(&ip) {
        "link-local address"
    } else if address.dad_failed {
        "IPv6 duplicate address detection failed"
    } else if address.tentative {
        "IPv6 address is tentative (duplicate address detection has not finished)"
    } else if address.deprecated {
        "IPv6 address is deprecated (preferred lifetime over)"
    } else {
        return None;
    };
    Some(reason.to_owned())
}

/// The choice for every family the policy asks for, primary first.
pub fn choose(host: &Host, filters: &Filters, policy: IpFamilyPolicy) -> Result<Vec<ChosenAddress>, NoAddress> {
    let (candidates, rejections) = candidates(host, filters);
    per_family(policy, rejections, |family, _| {
        choose_in_family(host, &candidates, family)
    })
}

/// What `pick` finds for each family of the policy, primary first; every
/// family must have one, or the failure lists what was set aside (the
/// `rejections` given, and those `pick` adds).
pub fn per_family(
    policy: IpFamilyPolicy,
    mut rejections: Vec<Rejection>,
    mut pick: impl FnMut(Family, &mut Vec<Rejection>) -> Option<ChosenAddress>,
) -> Result<Vec<ChosenAddress>, NoAddress> {
    let mut chosen = Vec::new();
    let mut missing = Vec::new();
    for &family in policy.families() {
        match pick(family, &mut rejections) {
            Some(address) => chosen.push(address),
            None => missing.push(family),
        }
    }
    if missing.is_empty() {
        Ok(chosen)
    } else {
        Err(NoAddress {
            missing,
            rejections,
            chosen,
        })
    }
}

fn choose_in_family(host: &Host, candidates: &[&HostAddress], family: Family) -> Option<ChosenAddress> {
    let in_family: Vec<&HostAddress> = candidates
        .iter()
        .copied()
        .filter(|a| Family::of(&a.ip) == family)
        .collect();
    let name_of = |index: u32| host.interface(index).map_or_else(String::new, |i| i.name.clone());

    // Default routes of this family, lowest metric first; the sort is
    // stable, so equal metrics keep the kernel's order.
    let mut routes: Vec<_> = host.default_routes.iter().filter(|r| r.family == family).collect();
    routes.sort_by_key(|r| r.metric);
    for route in &routes {
        let on_interface: Vec<&HostAddress> = in_family
            .iter()
            .copied()
            .filter(|a| a.interface_index == route.interface_index)
            .collect();
        let primary = on_interface.iter().find(|a| !a.secondary);
        let (address, kind) = match (primary, on_interface.first()) {
            (Some(a), _) => (*a, "primary address"),
            (None, Some(a)) => (*a, "first remaining (secondary) address"),
            (None, None) => continue,
        };
        let interface = name_of(route.interface_index);
        let others = if routes.len() > 1 {
            format!(
                ", the lowest metric of {} {} default routes",
                routes.len(),
                family.name()
            )
        } else {
            String::new()
        };
        return Some(ChosenAddress {
            ip: address.ip,
            family,
            reason: format!(
                "{kind} on {interface}, the interface of the {} default route with metric {}{others}",
                family.name(),
                route.metric
            ),
            interface,
        });
    }

    let first = in_family.iter().min_by_key(|a| a.interface_index)?;
    let why = if routes.is_empty() {
        format!("no {} default route", family.name())
    } else {
        format!("no {} default-route interface has a usable address", family.name())
    };
    let interface = name_of(first.interface_index);
    Some(ChosenAddress {
        ip: first.ip,
        family,
        reason: format!("{why}: first candidate in interface-index order, on {interface}"),
        interface,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::filters::default_exclusions;
    use crate::host::{DefaultRoute, Interface};

    pub(crate) fn interface(index: u32, name: &str) -> Interface {
        Interface {
            index,
            name: name.into(),
            up: true,
            loopback: name == "lo",
        }
    }

    pub(crate) fn address(index: u32, ip: &str) -> HostAddress {
        HostAddress {
            interface_index: index,
            ip: ip.parse().unwrap(),
            prefix_len: 24,
            secondary: false,
            tentative: false,
            dad_failed: false,
            deprecated: false,
        }
    }

    fn route(index: u32, family: Family, metric: u32) -> DefaultRoute {
        DefaultRoute {
            family,
            interface_index: index,
            metric,
        }
    }

    fn filters() -> Filters {
        Filters {
            excluded_interfaces: default_exclusions(),
            ..Filters::default()
        }
    }

    #[test]
    fn lowest_metric_wins_whatever_the_order() {
        let host = Host {
            interfaces: vec![interface(1, "lo"), interface(2, "eth0"), interface(3, "eth1")],
            addresses: vec![
                address(1, "127.0.0.1"),
                address(2, "10.0.2.15"),
                address(3, "192.168.56.10"),
            ],
            default_routes: vec![route(2, Family::V4, 200), route(3, Family::V4, 100)],
        };
        let chosen = choose(&host, &filters(), IpFamilyPolicy::Ipv4).unwrap();
        assert_eq!(chosen[0].ip.to_string(), "192.168.56.10");
        assert!(chosen[0].reason.contains("metric 100"), "{}", chosen[0].reason);
    }

    #[test]
    fn primary_before_secondary_and_failures_explain_themselves() {
        let mut secondary = address(2, "10.0.0.100");
        secondary.secondary = true;
        let host = Host {
            interfaces: vec![interface(2, "eth0")],
            addresses: vec![secondary.clone(), address(2, "10.0.0.5")],
            default_routes: vec![route(2, Family::V4, 0)],
        };
        assert_eq!(
            choose(&host, &filters(), IpFamilyPolicy::Ipv4).unwrap()[0]
                .ip
                .to_string(),
            "10.0.0.5"
        );
        let err = choose(&host, &filters(), IpFamilyPolicy::Dual).unwrap_err();
        assert_eq!(err.missing, [Family::V6]);
        assert!(
            err.to_string()
                .starts_with("no IPv6 address qualifies (found only 10.0.0.5 on eth0)"),
            "{err}"
        );
    }
}
