//! Choosing the node's IPs from a cloud's metadata, in the order the
//! cloud's controller manager reports the instance's addresses, so that
//! kubelet's `alpha.kubernetes.io/provided-node-ip` always matches one of them.

use std::net::IpAddr;
use std::time::Duration;

use cloud_access::metadata::{AddressKind, Instance, MetadataClient, MetadataError, Provider};
use url::Url;

use crate::ccm::kubelet_rejects;
use crate::family::{Family, IpFamilyPolicy};
use crate::filters::Filters;
use crate::host::Host;
use crate::select::{ChosenAddress, NoAddress, Rejection};

/// For each family of the policy: the first InternalIP the cloud lists
/// (the address the CCM puts first) that kubelet accepts, the CIDR filters
/// allow and, unless `skip_local_check`, is on a local interface. Only a
/// family the cloud lists no InternalIP of at all takes an ExternalIP, as
/// Kubernetes takes a node's host IP.
pub fn choose_from_instance(
    provider: &str,
    instance: &Instance,
    policy: IpFamilyPolicy,
    filters: &Filters,
    host: &Host,
    skip_local_check: bool,
) -> Result<Vec<ChosenAddress>, NoAddress> {
    let mut chosen = Vec::new();
    let mut missing = Vec::new();
    let mut rejections = Vec::new();
    for &family in policy.families() {
        let mut found = None;
        let has_internal = instance.addresses.iter().any(|a| {
            a.kind == AddressKind::InternalIP && a.address.parse::<IpAddr>().is_ok_and(|ip| Family::of(&ip) == family)
        });
        let kinds: &[AddressKind] = if has_internal {
            &[AddressKind::InternalIP]
        } else {
            &[AddressKind::ExternalIP]
        };
        for &kind in kinds {
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
                            "not on any local interface, which kubelet refuses (--skip-local-check to override)"
                                .to_owned(),
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
                found = Some(ChosenAddress {
                    ip,
                    family,
                    interface: interface.unwrap_or_default(),
                    reason: format!(
                        "{ordinal} {} {kind} the {provider} metadata service lists, in the cloud controller manager's order",
                        family.name()
                    ),
                });
                break;
            }
            if found.is_some() {
                break;
            }
        }
        match found {
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

/// The up interface that carries `ip`, if any.
fn local_interface(host: &Host, ip: &IpAddr) -> Option<String> {
    host.addresses
        .iter()
        .filter(|a| a.ip == *ip)
        .filter_map(|a| host.interface(a.interface_index))
        .find(|i| i.up)
        .map(|i| i.name.clone())
}

/// Where to ask: the override, or the provider's documented endpoint (AWS's
/// IPv6 one for an IPv6-only node).
pub fn endpoint(provider: Provider, override_url: Option<&Url>, policy: IpFamilyPolicy) -> Url {
    if let Some(url) = override_url {
        return url.clone();
    }
    let text = match (provider, policy) {
        (Provider::Aws, IpFamilyPolicy::Ipv6) => cloud_access::metadata::aws::IPV6_ENDPOINT,
        _ => provider.default_endpoint(),
    };
    // Both constants are valid URLs.
    Url::parse(text).unwrap_or_else(|_| Url::parse("http://169.254.169.254/").expect("valid URL"))
}

pub async fn fetch(
    provider: Provider,
    override_url: Option<&Url>,
    policy: IpFamilyPolicy,
    timeout: Duration,
) -> Result<Instance, MetadataError> {
    let client = MetadataClient::new(provider, endpoint(provider, override_url, policy), timeout)?;
    client.instance().await
}

/// Asks every metadata service at once; the first provider (in a fixed
/// order) that answers wins. `None` when none does.
pub async fn detect_provider(
    override_url: Option<&Url>,
    policy: IpFamilyPolicy,
    timeout: Duration,
) -> Option<(Provider, Instance)> {
    let attempts = Provider::ALL.map(|provider| async move {
        let result = fetch(provider, override_url, policy, timeout).await;
        if let Err(error) = &result {
            tracing::debug!(provider = provider.name(), %error, "metadata service did not answer");
        }
        (provider, result)
    });
    futures_util::future::join_all(attempts)
        .await
        .into_iter()
        .find_map(|(provider, result)| result.ok().map(|instance| (provider, instance)))
}
