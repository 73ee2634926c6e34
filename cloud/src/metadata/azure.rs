//! Azure Instance Metadata Service (`Metadata: true`).
//!
//! Addresses as kubernetes-sigs/cloud-provider-azure reports them for the
//! instance it runs on (`getLocalInstanceNodeAddresses` in
//! `pkg/provider/azure_instances_v1.go`; cloud-node-manager runs it on
//! every node): the node's name as Hostname, then from the FIRST network
//! interface only its FIRST IPv4 IP configuration (private IP as
//! InternalIP, then its public IP as ExternalIP) and its FIRST IPv6 one
//! likewise. Other interfaces and secondary IP configurations are never
//! node addresses.
//!
//! A Standard-SKU public IP is not in the instance document. When neither
//! of those two configurations shows a public IP, the CCM reads the load
//! balancer metadata and takes, for each, the frontend IP of the first
//! `publicIpAddresses` entry whose private IP is the configuration's (IPv6
//! ones in brackets, taken off); load balancer metadata it cannot read
//! (none: the VM is in no Standard load balancer's backend pool) changes
//! nothing (`getMetadata` and `fillNetInterfacePublicIPs` in
//! `pkg/provider/azure_instance_metadata.go`).
//!
//! The documents are read as Go's `encoding/json` reads them into the
//! CCM's structs: names matched case-insensitively, `null` as absent.

use serde::Deserialize;
use serde_json::Value;

use super::{AddressKind, Instance, MetadataClient, MetadataError, ProviderIdOptions};

/// The CCM's `ImdsInstanceURI` and `ImdsInstanceAPIVersion`.
const INSTANCE: &str = "metadata/instance?api-version=2021-10-01&format=json";
/// The CCM's `ImdsLoadBalancerURI` and `ImdsLoadBalancerAPIVersion`.
const LOAD_BALANCER: &str = "metadata/loadbalancer?api-version=2020-10-01&format=json";
const HEADERS: [(&str, &str); 1] = [("Metadata", "true")];

/// The instance document, as far as the CCM reads it. Field names are
/// lowercase: the keys are folded before ([`go_like`]).
#[derive(Debug, Default, Deserialize)]
struct Document {
    #[serde(default)]
    compute: Option<Compute>,
    #[serde(default)]
    network: Option<Network>,
}

#[derive(Debug, Default, Deserialize)]
struct Compute {
    #[serde(default)]
    name: String,
    #[serde(default, rename = "vmid")]
    vm_id: String,
    #[serde(default, rename = "vmscalesetname")]
    vm_scale_set_name: String,
    #[serde(default)]
    location: String,
    #[serde(default, rename = "osprofile")]
    os_profile: OsProfile,
    #[serde(default, rename = "resourceid")]
    resource_id: String,
}

#[derive(Debug, Default, Deserialize)]
struct OsProfile {
    #[serde(default, rename = "computername")]
    computer_name: String,
}

#[derive(Debug, Default, Deserialize)]
struct Network {
    #[serde(default)]
    interface: Vec<Interface>,
}

#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize)]
struct Interface {
    #[serde(default)]
    ipv4: NetworkData,
    #[serde(default)]
    ipv6: NetworkData,
}

#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize)]
struct NetworkData {
    #[serde(default, rename = "ipaddress")]
    ip_address: Vec<IpAddress>,
}

#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize)]
struct IpAddress {
    #[serde(default, rename = "privateipaddress")]
    private_ip: String,
    #[serde(default, rename = "publicipaddress")]
    public_ip: String,
    /// The public IP came from the load balancer metadata (for errors).
    #[serde(skip)]
    public_from_load_balancer: bool,
}

/// The load balancer document: `{"loadbalancer": {"publicIpAddresses": […]}}`.
#[derive(Debug, Default, Deserialize)]
struct LoadBalancerDocument {
    #[serde(default)]
    loadbalancer: Option<LoadBalancer>,
}

#[derive(Debug, Default, Deserialize)]
struct LoadBalancer {
    #[serde(default, rename = "publicipaddresses")]
    public_ip_addresses: Vec<PublicIp>,
}

#[derive(Debug, Default, Clone, Deserialize)]
struct PublicIp {
    #[serde(default, rename = "frontendipaddress")]
    frontend: String,
    #[serde(default, rename = "privateipaddress")]
    private: String,
}

pub(super) async fn instance(client: &MetadataClient) -> Result<Instance, MetadataError> {
    let body = client.get_required(INSTANCE, &HEADERS).await?;
    let document: Document = parse(&body).map_err(|e| client.garbage(INSTANCE, e))?;
    let (Some(compute), Some(mut network)) = (document.compute, document.network) else {
        return Err(client.garbage(INSTANCE, "no compute or no network section"));
    };
    if needs_load_balancer(&network)
        && let Some(public_ips) = load_balancer_public_ips(client).await
        && let Some(first) = network.interface.first_mut()
    {
        fill_public_ips(&public_ips, first);
    }
    let Some(first) = network.interface.first() else {
        return Err(client.garbage(INSTANCE, "no network interface (the CCM reports no addresses then)"));
    };
    let mut instance = Instance {
        hostname: non_empty(&compute.os_profile.computer_name).or_else(|| non_empty(&compute.name)),
        instance_id: non_empty(&compute.vm_id),
        name: instance_name(&compute),
        region: non_empty(&compute.location),
        resource_id: non_empty(&compute.resource_id),
        ..Instance::default()
    };
    let node_name = instance.hostname.as_deref().unwrap_or_default().to_lowercase();
    let addresses = ccm_order(first, &node_name);
    if !addresses.iter().any(|(kind, _)| *kind != AddressKind::Hostname) {
        return Err(client.garbage(
            INSTANCE,
            "the first network interface has no private IP address (the CCM reports no addresses then)",
        ));
    }
    for (kind, address) in addresses {
        let text = match address {
            Listed::Name(name) => name.to_owned(),
            Listed::Ip {
                text,
                from_load_balancer,
            } => {
                let path = if from_load_balancer { LOAD_BALANCER } else { INSTANCE };
                super::ip(client, path, text)?.to_string()
            }
        };
        instance.push(kind, text);
    }
    Ok(instance)
}

/// The load balancer's `publicIpAddresses`; `None` when the document is
/// missing or unusable, which the CCM logs and ignores.
async fn load_balancer_public_ips(client: &MetadataClient) -> Option<Vec<PublicIp>> {
    let answer = client.get(LOAD_BALANCER, &HEADERS).await;
    let body = match answer {
        Ok(Some(body)) => body,
        Ok(None) => {
            tracing::debug!("no load balancer metadata: the VM is in no Standard load balancer's backend pool");
            return None;
        }
        Err(error) => {
            tracing::debug!(%error, "load balancer metadata unavailable; as the CCM, going on without it");
            return None;
        }
    };
    match parse::<LoadBalancerDocument>(&body) {
        Ok(document) => document.loadbalancer.map(|lb| lb.public_ip_addresses),
        Err(problem) => {
            tracing::debug!(%problem, "unreadable load balancer metadata; as the CCM, going on without it");
            None
        }
    }
}

/// `body` decoded as Go's `encoding/json` decodes it into the CCM's structs.
fn parse<T: serde::de::DeserializeOwned>(body: &str) -> Result<T, String> {
    let value: Value = serde_json::from_str(body).map_err(|e| e.to_string())?;
    serde_json::from_value(go_like(value)).map_err(|e| e.to_string())
}

/// What Go's decoder makes of a document, for plain serde structs with
/// lowercase names: object keys folded to lowercase (Go matches names
/// case-insensitively), `null` members dropped and `null` array items (all
/// of the CCM's arrays hold structs) empty objects: Go leaves the zero value.
fn go_like(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.to_lowercase(), go_like(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(
            items
                .into_iter()
                .map(|item| match item {
                    Value::Null => Value::Object(serde_json::Map::new()),
                    item => go_like(item),
                })
                .collect(),
        ),
        Value::Null => Value::Object(serde_json::Map::new()),
        other => other,
    }
}

fn non_empty(text: &str) -> Option<String> {
    Some(text.trim()).filter(|t| !t.is_empty()).map(str::to_owned)
}

/// The name the CCM finds the instance by from a node name: a standalone
/// VM's name (`availabilitySet` gets the VM by the node's name), a scale
/// set VM's computer name (uniform and flexible scale sets both key their
/// VMs by the lowercased `osProfile.computerName`).
fn instance_name(compute: &Compute) -> Option<String> {
    if compute.vm_scale_set_name.trim().is_empty() {
        non_empty(&compute.name)
    } else {
        non_empty(&compute.os_profile.computer_name)
    }
}

/// The Azure cloud controller manager (kubernetes-sigs/cloud-provider-azure,
/// `pkg/provider`): it writes `azure://` and the VM's resource ID with the
/// subscription and resource group lowercased (`getLocalInstanceProviderID`,
/// `azure_instances_v1.go`): `/subscriptions/S/resourceGroups/G/providers/
/// Microsoft.Compute/virtualMachines/NAME` for a standalone or flexible
/// scale set VM, `…/virtualMachineScaleSets/SET/virtualMachines/N` for a
/// uniform scale set VM; it refuses another form (`azureNodeProviderIDRE`
/// and the scale set ones), compares resource IDs case-insensitively, and
/// finds a Node without one by its name, case-insensitively.
pub(super) struct Ccm;

impl super::CcmRules for Ccm {
    fn provider_id(&self, instance: &Instance, _: &ProviderIdOptions) -> Result<String, String> {
        let id = instance.resource_id.as_deref();
        let id = id.ok_or("the metadata service gave no compute.resourceId")?;
        if let Some(c) = super::unsafe_in_a_flag(id) {
            return Err(format!("the resource ID {:?} holds {c:?}", super::shorten(id)));
        }
        Ok(format!("azure://{}", machine_id(id)?))
    }

    fn key(&self, provider_id: &str) -> Result<String, String> {
        let id = provider_id
            .strip_prefix("azure://")
            .ok_or_else(|| "its scheme is not azure".to_owned())?;
        Ok(machine_id(id)?.to_lowercase())
    }

    fn finds_by_name(&self, node: &str, instance: &Instance) -> bool {
        instance
            .name
            .as_deref()
            .is_some_and(|name| name.eq_ignore_ascii_case(node))
    }

    fn names(&self, instance: &Instance) -> Vec<String> {
        instance.name.iter().map(|n| n.to_lowercase()).collect()
    }
}

/// A VM's resource ID as the CCM writes it: the fixed words in their
/// canonical case, the subscription and resource group lowercased, the
/// names kept; `Err` for anything but a VM's or a scale set VM's ID.
fn machine_id(id: &str) -> Result<String, String> {
    let refused = || {
        format!(
            "{:?} is not a VM's resource ID (/subscriptions/S/resourceGroups/G/providers/Microsoft.Compute/virtualMachines/NAME, or …/virtualMachineScaleSets/SET/virtualMachines/N)",
            super::shorten(id)
        )
    };
    let parts: Vec<&str> = id.split('/').collect();
    let word = |i: usize, want: &str| parts.get(i).is_some_and(|p| p.eq_ignore_ascii_case(want));
    let name = |i: usize| parts.get(i).copied().filter(|p| !p.is_empty());
    let head = parts.first() == Some(&"")
        && word(1, "subscriptions")
        && word(3, "resourceGroups")
        && word(5, "providers")
        && word(6, "Microsoft.Compute");
    let (Some(subscription), Some(group), true) = (name(2), name(4), head) else {
        return Err(refused());
    };
    let prefix = format!(
        "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Compute",
        subscription.to_lowercase(),
        group.to_lowercase()
    );
    match parts.len() {
        9 if word(7, "virtualMachines") => Ok(format!("{prefix}/virtualMachines/{}", name(8).ok_or_else(refused)?)),
        11 if word(7, "virtualMachineScaleSets") && word(9, "virtualMachines") => Ok(format!(
            "{prefix}/virtualMachineScaleSets/{}/virtualMachines/{}",
            name(8).ok_or_else(refused)?,
            name(10).ok_or_else(refused)?
        )),
        _ => Err(refused()),
    }
}

/// The CCM's `getMetadata`: the load balancer metadata is read only when
/// the first interface's first IPv4 and first IPv6 configurations both
/// lack a public IP (and there is an interface).
fn needs_load_balancer(network: &Network) -> bool {
    let Some(nic) = network.interface.first() else {
        return false;
    };
    let has_public = |data: &NetworkData| data.ip_address.first().is_some_and(|a| !a.public_ip.is_empty());
    !has_public(&nic.ipv4) && !has_public(&nic.ipv6)
}

/// The CCM's `fillNetInterfacePublicIPs`: the first IPv4 configuration
/// takes the frontend IP of the first entry whose private IP is its own
/// (compared as text); the first IPv6 one likewise, with the brackets the
/// load balancer metadata puts around IPv6 addresses taken off both.
fn fill_public_ips(public_ips: &[PublicIp], nic: &mut Interface) {
    let unbracket = |ip: &str| ip.trim_matches('[').trim_matches(']').to_owned();
    if let Some(first) = nic.ipv4.ip_address.first_mut().filter(|a| !a.private_ip.is_empty())
        && let Some(pip) = public_ips.iter().find(|p| p.private == first.private_ip)
    {
        first.public_ip = pip.frontend.clone();
        first.public_from_load_balancer = true;
    }
    if let Some(first) = nic.ipv6.ip_address.first_mut().filter(|a| !a.private_ip.is_empty())
        && let Some(pip) = public_ips.iter().find(|p| unbracket(&p.private) == first.private_ip)
    {
        first.public_ip = unbracket(&pip.frontend);
        first.public_from_load_balancer = true;
    }
}

/// One entry of the CCM's list, before the IPs are checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Listed<'a> {
    Name(&'a str),
    Ip { text: &'a str, from_load_balancer: bool },
}

/// The CCM's list for the first interface (`getLocalInstanceNodeAddresses`):
/// the node's name as Hostname, then for the first IPv4 and the first IPv6
/// configuration with a private IP that IP as InternalIP and its public IP,
/// if any, as ExternalIP.
fn ccm_order<'a>(nic: &'a Interface, node_name: &'a str) -> Vec<(AddressKind, Listed<'a>)> {
    let mut addresses = vec![(AddressKind::Hostname, Listed::Name(node_name))];
    for data in [&nic.ipv4, &nic.ipv6] {
        let Some(first) = data.ip_address.first().filter(|a| !a.private_ip.is_empty()) else {
            continue;
        };
        let ip = |text, from_load_balancer| Listed::Ip {
            text,
            from_load_balancer,
        };
        addresses.push((AddressKind::InternalIP, ip(&first.private_ip, false)));
        if !first.public_ip.is_empty() {
            addresses.push((
                AddressKind::ExternalIP,
                ip(&first.public_ip, first.public_from_load_balancer),
            ));
        }
    }
    addresses
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(private: &str, public: &str) -> IpAddress {
        IpAddress {
            private_ip: private.into(),
            public_ip: public.into(),
            public_from_load_balancer: false,
        }
    }

    fn nic(ipv4: &[(&str, &str)], ipv6: &[(&str, &str)]) -> Interface {
        let data = |configs: &[(&str, &str)]| NetworkData {
            ip_address: configs.iter().map(|(a, b)| config(a, b)).collect(),
        };
        Interface {
            ipv4: data(ipv4),
            ipv6: data(ipv6),
        }
    }

    fn pip(frontend: &str, private: &str) -> PublicIp {
        PublicIp {
            frontend: frontend.into(),
            private: private.into(),
        }
    }

    fn listed(nic: &Interface) -> Vec<String> {
        ccm_order(nic, "node-a")
            .into_iter()
            .map(|(kind, entry)| match entry {
                Listed::Name(name) => format!("{kind} {name}"),
                Listed::Ip { text, .. } => format!("{kind} {text}"),
            })
            .collect()
    }

    /// Upstream's `TestNodeAddresses` shapes: the name first, then only the
    /// first IPv4 and the first IPv6 configuration, each private IP followed
    /// by its public one.
    #[test]
    fn the_first_configuration_of_each_family_only() {
        let nic = nic(
            &[("10.240.0.4", "20.50.1.2"), ("10.240.0.5", "20.50.1.3")],
            &[("fd00:db8::4", "2001:db8::4"), ("fd00:db8::5", "")],
        );
        assert_eq!(
            listed(&nic),
            [
                "Hostname node-a",
                "InternalIP 10.240.0.4",
                "ExternalIP 20.50.1.2",
                "InternalIP fd00:db8::4",
                "ExternalIP 2001:db8::4",
            ]
        );
        // A first configuration without a private IP adds nothing, even with
        // a public IP; a second one does not stand in for it.
        let nic = super::tests::nic(&[("", "20.50.1.2"), ("10.240.0.5", "")], &[]);
        assert_eq!(listed(&nic), ["Hostname node-a"]);
        let v6_only = super::tests::nic(&[], &[("fd00:db8::4", "")]);
        assert_eq!(listed(&v6_only), ["Hostname node-a", "InternalIP fd00:db8::4"]);
    }

    /// The load balancer metadata only when neither first configuration
    /// has a public IP, and never without an interface.
    #[test]
    fn the_load_balancer_is_read_only_without_an_instance_public_ip() {
        let network = |interface: Vec<Interface>| Network { interface };
        assert!(needs_load_balancer(&network(vec![nic(
            &[("10.0.0.4", "")],
            &[("fd00::4", "")]
        )])));
        assert!(needs_load_balancer(&network(vec![nic(&[], &[])])));
        assert!(!needs_load_balancer(&network(vec![nic(
            &[("10.0.0.4", "20.0.0.1")],
            &[]
        )])));
        assert!(!needs_load_balancer(&network(vec![nic(
            &[("10.0.0.4", "")],
            &[("fd00::4", "2001:db8::4")]
        )])));
        // A secondary configuration's or another interface's public IP does not count.
        assert!(needs_load_balancer(&network(vec![
            nic(&[("10.0.0.4", ""), ("10.0.0.5", "20.0.0.5")], &[]),
            nic(&[("10.1.0.4", "20.1.0.4")], &[]),
        ])));
        assert!(!needs_load_balancer(&network(vec![])));
    }

    /// Upstream's `TestFillNetInterfacePublicIPs`: the first entry whose
    /// private IP matches, IPv6 unbracketed; secondary configurations never.
    #[test]
    fn public_ips_from_the_load_balancer() {
        let pips = [
            pip("20.0.0.5", "10.0.0.5"),
            pip("20.0.0.4", "10.0.0.4"),
            pip("20.0.0.44", "10.0.0.4"),
            pip("[2001:db8::4]", "[fd00::4]"),
        ];
        let mut nic = nic(&[("10.0.0.4", ""), ("10.0.0.5", "")], &[("fd00::4", "")]);
        fill_public_ips(&pips, &mut nic);
        assert_eq!(
            listed(&nic),
            [
                "Hostname node-a",
                "InternalIP 10.0.0.4",
                "ExternalIP 20.0.0.4",
                "InternalIP fd00::4",
                "ExternalIP 2001:db8::4",
            ]
        );
        assert!(nic.ipv4.ip_address[0].public_from_load_balancer);
        assert_eq!(nic.ipv4.ip_address[1].public_ip, "");
        // No match: nothing changes.
        let mut other = super::tests::nic(&[("10.9.0.4", "")], &[("fd09::4", "")]);
        let before = other.clone();
        fill_public_ips(&pips, &mut other);
        assert_eq!(other, before);
    }

    /// Standalone VMs by their VM name, scale set VMs by their computer name.
    #[test]
    fn the_instance_name_the_ccm_finds_the_vm_by() {
        let compute = |name: &str, scale_set: &str, computer_name: &str| Compute {
            name: name.into(),
            vm_scale_set_name: scale_set.into(),
            os_profile: OsProfile {
                computer_name: computer_name.into(),
            },
            ..Compute::default()
        };
        assert_eq!(instance_name(&compute("vm-a", "", "host-a")).as_deref(), Some("vm-a"));
        assert_eq!(
            instance_name(&compute("pool_3", "pool", "pool000003")).as_deref(),
            Some("pool000003")
        );
        assert_eq!(instance_name(&compute("pool_3", "pool", "")), None);
        assert_eq!(instance_name(&compute("", "", "host-a")), None);
    }

    /// Names in any case, `null` as absent, as Go decodes them.
    #[test]
    fn documents_are_decoded_as_go_decodes_them() {
        let document: Document = parse(
            r#"{"Compute": {"Name": "vm-a", "VMID": "id", "osProfile": null, "vmScaleSetName": null},
                "network": {"interface": [{"IPv4": {"IPADDRESS": [{"PrivateIPAddress": "10.0.0.4",
                "publicIpAddress": null}]}, "ipv6": null}, null]}}"#,
        )
        .unwrap();
        let compute = document.compute.unwrap();
        assert_eq!((compute.name.as_str(), compute.vm_id.as_str()), ("vm-a", "id"));
        let network = document.network.unwrap();
        assert_eq!(network.interface.len(), 2);
        assert_eq!(
            listed(&network.interface[0]),
            ["Hostname node-a", "InternalIP 10.0.0.4"]
        );
        let lb: LoadBalancerDocument =
            parse(r#"{"loadBalancer": {"publicIPAddresses": [{"frontendIPAddress": "20.0.0.4", "privateIPAddress": "10.0.0.4"}]}}"#)
                .unwrap();
        assert_eq!(lb.loadbalancer.unwrap().public_ip_addresses[0].frontend, "20.0.0.4");
        let none: LoadBalancerDocument = parse(r#"{"loadbalancer": null}"#).unwrap();
        assert!(none.loadbalancer.is_none());
        assert!(parse::<Document>("null").unwrap().compute.is_none());
        assert!(parse::<Document>(r#"{"compute": {"name": 7}}"#).is_err());
        assert!(parse::<Document>("<html>").is_err());
    }
}
