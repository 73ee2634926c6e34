//! The choice: a pure function of what was observed ([`Observed`]) and the
//! configuration ([`Config`]), testable without a network or a cloud.
//! [`crate::observe`] gathers the observations; [`crate::output`] renders
//! the [`Detection`].

use std::net::IpAddr;

use cloud_access::metadata::{Instance, InvalidProviderId, Provider, ProviderIdOptions};

use crate::family::{Family, IpFamilyPolicy};
use crate::filters::Filters;
use crate::host::Host;
use crate::output::Detection;
use crate::select::{self, ChosenAddress, NoAddress};
use crate::source::{MetadataAnswer, Origin};
use crate::{cloud, family};

/// What the flags ask of the choice, turned into domain terms once (by
/// [`crate::cli::DetectArgs::config`]).
#[derive(Debug, Clone, Default)]
pub struct Config {
    pub ip_family: IpFamilyPolicy,
    pub filters: Filters,
    /// Accept metadata addresses that are not on a local interface.
    pub skip_local_check: bool,
    pub node_name_from: Option<NodeNameFrom>,
    /// Write the cloud's provider ID in this form; `None` with
    /// `--no-provider-id`.
    pub provider_id: Option<ProviderIdOptions>,
}

/// Where `--hostname-override` comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum NodeNameFrom {
    /// The kernel's hostname, lowercased as kubelet does.
    Hostname,
    /// The cloud's instance ID (needs a cloud --source).
    InstanceId,
    /// The instance's name, which the cloud's controller manager looks the
    /// node up by: GCE's instance name, Azure's VM name (a scale set VM's
    /// computer name), OpenStack's server name, DigitalOcean's droplet name,
    /// Hetzner's server name (needs --source gce, azure, openstack,
    /// digitalocean or hetzner).
    InstanceName,
    /// EC2's PrivateDnsName, from DescribeInstances (needs --source aws and
    /// ec2:DescribeInstances; right also with a custom DHCP domain).
    PrivateDns,
}

/// A cloud's view of the instance: the provider whose metadata service
/// answered, and what it said.
#[derive(Debug, Clone)]
pub struct CloudView {
    pub provider: Provider,
    pub instance: Instance,
}

/// What the chosen source says, gathered before the (pure) choice.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    /// The cloud that answered; `None` for the local source (and for `auto`
    /// when no metadata service answered).
    pub cloud: Option<CloudView>,
    /// The kernel's hostname, when the node name comes from it.
    pub kernel_hostname: Option<String>,
    /// For `auto`: what each metadata service answered.
    pub asked: Vec<MetadataAnswer>,
}

impl Observed {
    pub fn origin(&self) -> Origin {
        match &self.cloud {
            Some(cloud) => Origin::Cloud(cloud.provider),
            None => Origin::Local,
        }
    }

    fn instance(&self) -> Option<&Instance> {
        self.cloud.as_ref().map(|c| &c.instance)
    }

    /// The name the cloud's controller manager finds the instance by when
    /// the Node has no providerID: GCE's `instance/name` (cloud-provider-gcp
    /// maps a node name to the instance name); Azure's VM name, or a scale
    /// set VM's computer name (cloud-provider-azure gets a standalone VM by
    /// the node's name and keys scale set VMs by their computer name);
    /// DigitalOcean's droplet name and Hetzner's server name, which their
    /// metadata gives as `hostname` (their CCMs list droplets and servers by
    /// the node's name); OpenStack's server name (its CCM gets the server by
    /// the node's name). AWS names nodes otherwise (EC2's private DNS name
    /// or instance ID).
    fn instance_name(&self) -> Option<String> {
        let cloud = self.cloud.as_ref()?;
        match cloud.provider {
            Provider::Gce | Provider::Azure | Provider::OpenStack => cloud.instance.name.clone(),
            Provider::DigitalOcean | Provider::Hetzner => cloud.instance.hostname.clone(),
            Provider::Aws => None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ChoiceError {
    #[error(transparent)]
    NoAddress(#[from] NoAddress),
    #[error("--node-name-from {wanted}: the {from} source has no {what}; use --source {hint}")]
    NodeName {
        wanted: &'static str,
        from: Origin,
        what: &'static str,
        hint: &'static str,
    },
    #[error(
        "--node-name-from {flag}: {what} {invalid}; fix the name where it comes from, or choose another --node-name-from"
    )]
    InvalidNodeName {
        flag: &'static str,
        what: String,
        invalid: cloud_access::metadata::InvalidNodeName,
    },
    #[error(
        "{0}: kubelet would get no --provider-id; fix the instance's metadata, or give --no-provider-id (for the unit: NODE_IP_HELPER_NO_PROVIDER_ID=true in /etc/default/node-ip-helper) and let the cloud controller manager find the node by its name"
    )]
    ProviderId(InvalidProviderId),
}

/// The choice: from the host's interfaces and routes with kubelet's rules
/// for a local origin, from the cloud's list in its CCM's order otherwise.
pub fn decide(host: &Host, config: &Config, observed: &Observed) -> Result<Detection, ChoiceError> {
    let chosen = match &observed.cloud {
        None => select::choose(host, &config.filters, config.ip_family)?,
        Some(cloud) => cloud::choose_from_instance(
            cloud.provider,
            &cloud.instance,
            config.ip_family,
            &config.filters,
            host,
            config.skip_local_check,
        )?,
    };
    detection(config, observed, chosen)
}

/// The recorded choice, if it has the families the policy asks for and
/// every address of it is still usable: present on the host (and, for a
/// metadata source, still listed by the cloud).
pub fn keep_sticky(host: &Host, config: &Config, observed: &Observed, recorded: &[IpAddr]) -> Option<Detection> {
    let families: Vec<Family> = recorded.iter().map(Family::of).collect();
    if families != config.ip_family.families() {
        return None;
    }
    let (candidates, _) = select::candidates(host, &config.filters);
    let mut addresses = Vec::new();
    for ip in recorded {
        let interface = match observed.instance() {
            None => {
                let address = candidates.iter().find(|a| a.ip == *ip)?;
                host.interface(address.interface_index)?.name.clone()
            }
            Some(instance) => {
                if !instance.addresses.iter().any(|a| a.address == ip.to_string()) {
                    return None;
                }
                let local = host
                    .addresses
                    .iter()
                    .find(|a| a.ip == *ip)
                    .and_then(|a| host.interface(a.interface_index));
                match local {
                    Some(interface) => interface.name.clone(),
                    None if config.skip_local_check => String::new(),
                    None => return None,
                }
            }
        };
        addresses.push(ChosenAddress {
            ip: *ip,
            family: family::Family::of(ip),
            interface,
            reason: "kept from the --sticky record: still present and usable".to_owned(),
        });
    }
    detection(config, observed, addresses).ok()
}

/// The detection of `chosen`, with the node name and the cloud's list.
fn detection(config: &Config, observed: &Observed, chosen: Vec<ChosenAddress>) -> Result<Detection, ChoiceError> {
    Ok(Detection {
        node_ips: chosen.iter().map(|c| c.ip).collect(),
        hostname: node_name(config.node_name_from, observed)?,
        provider_id: provider_id(config.provider_id.as_ref(), observed)?,
        source: observed.origin(),
        addresses: chosen,
        cloud_addresses: observed.instance().map(|i| i.addresses.clone()),
        metadata_services: observed.asked.clone(),
    })
}

/// The `--provider-id` value: the cloud's, in its CCM's form, for a cloud
/// source unless refused; none for the host's own addresses (no cloud said
/// which instance this is).
fn provider_id(options: Option<&ProviderIdOptions>, observed: &Observed) -> Result<Option<String>, ChoiceError> {
    let (Some(options), Some(cloud)) = (options, &observed.cloud) else {
        return Ok(None);
    };
    cloud_access::metadata::provider_id(cloud.provider, &cloud.instance, options)
        .map(Some)
        .map_err(ChoiceError::ProviderId)
}

/// The `--hostname-override` value: trimmed and lowercased as kubelet does,
/// and refused unless it is a valid node name, whichever source it came from.
fn node_name(from: Option<NodeNameFrom>, observed: &Observed) -> Result<Option<String>, ChoiceError> {
    let missing = |wanted, what, hint| ChoiceError::NodeName {
        wanted,
        from: observed.origin(),
        what,
        hint,
    };
    let (flag, what, name) = match from {
        None => return Ok(None),
        Some(NodeNameFrom::Hostname) => (
            "hostname",
            "the kernel's hostname".to_owned(),
            observed.kernel_hostname.clone().unwrap_or_default(),
        ),
        Some(NodeNameFrom::InstanceId) => (
            "instance-id",
            format!("the {} instance ID", observed.origin()),
            observed.instance().and_then(|i| i.instance_id.clone()).ok_or_else(|| {
                missing(
                    "instance-id",
                    "instance ID",
                    "aws, gce, azure, openstack, digitalocean or hetzner",
                )
            })?,
        ),
        Some(NodeNameFrom::InstanceName) => (
            "instance-name",
            format!("the {} instance name", observed.origin()),
            observed.instance_name().ok_or_else(|| {
                missing(
                    "instance-name",
                    "instance name",
                    "gce, azure, openstack, digitalocean or hetzner",
                )
            })?,
        ),
        Some(NodeNameFrom::PrivateDns) => (
            "private-dns",
            "EC2's PrivateDnsName".to_owned(),
            observed
                .instance()
                .and_then(|i| i.private_dns.clone())
                .ok_or_else(|| missing("private-dns", "private DNS name", "aws"))?,
        ),
    };
    cloud_access::metadata::node_name(&name)
        .map(Some)
        .map_err(|invalid| ChoiceError::InvalidNodeName { flag, what, invalid })
}

#[cfg(test)]
mod tests {
    use cloud_access::metadata::{AddressKind, CloudAddress};

    use super::*;
    use crate::host::DefaultRoute;
    use crate::select::tests::{address, interface};

    fn cloud(provider: Provider, instance: Instance) -> Observed {
        Observed {
            cloud: Some(CloudView { provider, instance }),
            ..Observed::default()
        }
    }

    /// One check for every source of a node name: the kernel's hostname,
    /// each cloud's instance ID and EC2's PrivateDnsName (which only EC2's
    /// API gives, so it is tested here rather than end to end).
    #[test]
    fn every_node_name_source_is_validated() {
        let hostile = "x --authorization-mode=AlwaysAllow --v=10";
        let instance = Instance {
            instance_id: Some(hostile.into()),
            name: Some(hostile.into()),
            hostname: Some(hostile.into()),
            private_dns: Some(hostile.into()),
            ..Instance::default()
        };
        let observed = |provider: Option<Provider>| Observed {
            cloud: provider.map(|provider| CloudView {
                provider,
                instance: instance.clone(),
            }),
            kernel_hostname: Some(hostile.into()),
            asked: Vec::new(),
        };
        for (from, provider, what) in [
            (NodeNameFrom::Hostname, None, "the kernel's hostname"),
            (NodeNameFrom::InstanceId, Some(Provider::Aws), "the aws instance ID"),
            (
                NodeNameFrom::InstanceId,
                Some(Provider::Hetzner),
                "the hetzner instance ID",
            ),
            (NodeNameFrom::InstanceName, Some(Provider::Gce), "the gce instance name"),
            (
                NodeNameFrom::InstanceName,
                Some(Provider::DigitalOcean),
                "the digitalocean instance name",
            ),
            (
                NodeNameFrom::InstanceName,
                Some(Provider::Hetzner),
                "the hetzner instance name",
            ),
            (NodeNameFrom::PrivateDns, Some(Provider::Aws), "EC2's PrivateDnsName"),
        ] {
            let flag = clap::ValueEnum::to_possible_value(&from).unwrap();
            let error = node_name(Some(from), &observed(provider)).unwrap_err().to_string();
            assert!(
                error.starts_with(&format!(
                    "--node-name-from {}: {what} {hostile:?} is not a valid Kubernetes node name",
                    flag.get_name()
                )),
                "{error}"
            );
        }
        let valid = cloud(
            Provider::Aws,
            Instance {
                private_dns: Some("IP-10-0-1-25.ec2.internal".into()),
                ..Instance::default()
            },
        );
        assert_eq!(
            node_name(Some(NodeNameFrom::PrivateDns), &valid).unwrap().as_deref(),
            Some("ip-10-0-1-25.ec2.internal")
        );
    }

    /// The instance name comes from GCE's `instance/name` (not its FQDN
    /// hostname), Azure's VM or scale set computer name (the metadata
    /// module's `name`), OpenStack's server name, DigitalOcean's and
    /// Hetzner's `hostname`; AWS and a local origin have none the CCM names
    /// nodes after: an error naming the flag and the source.
    #[test]
    fn the_instance_name_where_the_ccm_names_nodes_after_it() {
        let instance = Instance {
            name: Some("node-gce-7".into()),
            hostname: Some("Node-A".into()),
            instance_id: Some("i-0123456789abcdef0".into()),
            ..Instance::default()
        };
        let from = Some(NodeNameFrom::InstanceName);
        let named = |provider| node_name(from, &cloud(provider, instance.clone()));
        assert_eq!(named(Provider::Gce).unwrap().as_deref(), Some("node-gce-7"));
        assert_eq!(named(Provider::Azure).unwrap().as_deref(), Some("node-gce-7"));
        assert_eq!(named(Provider::DigitalOcean).unwrap().as_deref(), Some("node-a"));
        assert_eq!(named(Provider::Hetzner).unwrap().as_deref(), Some("node-a"));
        assert_eq!(named(Provider::OpenStack).unwrap().as_deref(), Some("node-gce-7"));
        assert_eq!(
            named(Provider::Aws).unwrap_err().to_string(),
            "--node-name-from instance-name: the aws source has no instance name; use --source gce, azure, openstack, digitalocean or hetzner"
        );
        let local = node_name(from, &Observed::default()).unwrap_err().to_string();
        assert!(
            local.starts_with("--node-name-from instance-name: the local source has no instance name"),
            "{local}"
        );
        for provider in [Provider::Gce, Provider::Azure] {
            let unnamed = cloud(provider, Instance::default());
            assert!(node_name(from, &unnamed).is_err());
        }
    }

    /// A host whose default route goes through eth0 (10.0.0.5), with a
    /// second address 10.0.1.25 on eth1.
    fn host() -> Host {
        Host {
            interfaces: vec![interface(2, "eth0"), interface(3, "eth1")],
            addresses: vec![address(2, "10.0.0.5"), address(3, "10.0.1.25")],
            default_routes: vec![DefaultRoute {
                family: Family::V4,
                interface_index: 2,
                metric: 0,
            }],
        }
    }

    /// The origin alone says which rules apply: a local origin (the local
    /// source, or `auto` with no metadata service answering) follows the
    /// host's routes and kubelet's rules, with no cloud list; a cloud's
    /// origin follows that cloud's list, in its CCM's order, and names it.
    #[test]
    fn the_origin_decides_whose_rules_apply() {
        let local = decide(&host(), &Config::default(), &Observed::default()).unwrap();
        assert_eq!(local.node_ips, ["10.0.0.5".parse::<IpAddr>().unwrap()]);
        assert_eq!(local.source, Origin::Local);
        assert_eq!(local.cloud_addresses, None);

        let instance = Instance {
            addresses: vec![
                CloudAddress::new(AddressKind::InternalIP, "10.0.1.25"),
                CloudAddress::new(AddressKind::InternalIP, "10.0.0.5"),
            ],
            ..Instance::default()
        };
        for provider in Provider::ALL {
            let chosen = decide(&host(), &Config::default(), &cloud(provider, instance.clone())).unwrap();
            assert_eq!(chosen.node_ips, ["10.0.1.25".parse::<IpAddr>().unwrap()]);
            assert_eq!(chosen.source, Origin::Cloud(provider));
            assert!(
                chosen.addresses[0]
                    .reason
                    .contains(&format!("the {} metadata service lists", provider.name())),
                "{:?}",
                chosen.addresses[0]
            );
            assert_eq!(chosen.cloud_addresses.as_ref(), Some(&instance.addresses));
        }
    }

    #[test]
    fn a_sticky_choice_is_kept_only_while_usable() {
        let recorded = ["10.0.1.25".parse::<IpAddr>().unwrap()];
        let kept = keep_sticky(&host(), &Config::default(), &Observed::default(), &recorded).unwrap();
        assert_eq!(kept.node_ips, recorded);
        assert_eq!(kept.addresses[0].interface, "eth1");
        // The cloud no longer lists it.
        let elsewhere = Instance {
            addresses: vec![CloudAddress::new(AddressKind::InternalIP, "10.0.0.5")],
            ..Instance::default()
        };
        assert_eq!(
            keep_sticky(&host(), &Config::default(), &cloud(Provider::Gce, elsewhere), &recorded),
            None
        );
        // The policy asks for another family.
        let dual = Config {
            ip_family: IpFamilyPolicy::Dual,
            ..Config::default()
        };
        assert_eq!(keep_sticky(&host(), &dual, &Observed::default(), &recorded), None);
    }
}
