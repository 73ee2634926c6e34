//! Choosing the node's IPs from a cloud's metadata, in the order the
//! cloud's controller manager reports the instance's addresses, so that
//! kubelet's `alpha.kubernetes.io/provided-node-ip` always matches one of them.

use std::net::IpAddr;

use cloud_access::metadata::{AddressKind, Instance, Provider};

use crate::ccm::kubelet_rejects;
use crate::family::{Family, IpFamilyPolicy};
use crate::filters::Filters;
use crate::host::Host;
use crate::select::{ChosenAddress, NoAddress, Rejection, per_family};

/// For each family of the policy: the first InternalIP the cloud lists
/// (the address the CCM puts first) that kubelet accepts, the CIDR filters
/// allow and, unless `skip_local_check`, is on a local interface. Only a
/// family the cloud lists no InternalIP of at all takes an ExternalIP, as
/// Kubernetes takes a node's host IP.
pub fn choose_from_instance(
    provider: Provider,
    instance: &Instance,
    policy: IpFamilyPolicy,
    filters: &Filters,
    host: &Host,
    skip_local_check: bool,
) -> Result<Vec<ChosenAddress>, NoAddress> {
    let provider = provider.name();
    per_family(policy, Vec::new(), |family, rejections| {
        let has_internal = instance.addresses.iter().any(|a| {
            a.kind == AddressKind::InternalIP && a.address.parse::<IpAddr>().is_ok_and(|ip| Family::of(&ip) == family)
        });
        let kind = if has_internal {
            AddressKind::InternalIP
        } else {
            AddressKind::ExternalIP
        };
        let listed = instance
            .addresses
            .iter()
            .filter(|a| a.kind == kind)
            .filter_map(|a| a.address.parse::<IpAddr>().ok())
            .filter(|ip| Family::of(ip) == family);
        for (position, ip) in listed.enumerate() {
            let interface = local_interface(host, &ip);
            let reason = kubelet_rejects(&ip)
                .map(|why| format!("kubelet refuses it: {why}"))
                .or_else(|| filters.cidr_rejection(&ip))
                .or_else(|| match (&interface, skip_local_check) {
                    (None, false) => Some(
                        "not on any local interface, which kubelet refuses (--skip-local-check to override)".to_owned(),
                    ),
                    _ => None,
                });
            if let Some(reason) = reason {
                rejections.push(Rejection {
                    ip,
                    interface: format!("{provider} metadata"),
                    reason,
                });
                continue;
            }
            let ordinal = match position {
                0 => "first".to_owned(),
                n => format!("#{}", n + 1),
            };
            return Some(ChosenAddress {
                ip,
                family,
                interface: interface.unwrap_or_default(),
                reason: format!(
                    "{ordinal} {} {kind} the {provider} metadata service lists, in the cloud controller manager's order",
                    family.name()
                ),
            });
        }
        None
    })
}

/// The up interface that carries `ip`, if any.
fn local_interface(host: &Host, ip: &IpAddr) -> Option<String> {
    host.addresses
        .iter()
        .filter(|a| a.ip == *ip)
        .filter_map(|a| host.interface(a.interface_index))
        .find(|i| i.up)
        .map(|i| i.name.clone())
}
