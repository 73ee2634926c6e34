//! `check --node`: why a real Node is (or is not) stuck with the
//! `node.cloudprovider.kubernetes.io/uninitialized` taint. Reading the Node
//! is the only network call; the diagnosis is a pure function of it and
//! the cloud's addresses.

use std::path::Path;

use k8s_openapi::api::core::v1::Node;
use serde::Serialize;

use crate::ccm::{self, NodeAddress, NodeIpError};
use crate::identity::Identity;
use crate::output::shell_word;

pub const UNINITIALIZED_TAINT: &str = "node.cloudprovider.kubernetes.io/uninitialized";
pub const PROVIDED_NODE_IP: &str = "alpha.kubernetes.io/provided-node-ip";

/// What the Node object says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeFacts {
    pub name: String,
    pub provided_node_ip: Option<String>,
    pub addresses: Vec<NodeAddress>,
    pub uninitialized: bool,
    pub provider_id: Option<String>,
}

pub fn facts(node: &Node) -> NodeFacts {
    let spec = node.spec.as_ref();
    NodeFacts {
        name: node.metadata.name.clone().unwrap_or_default(),
        provided_node_ip: node
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(PROVIDED_NODE_IP))
            .cloned(),
        addresses: node
            .status
            .as_ref()
            .and_then(|s| s.addresses.as_ref())
            .map(|list| list.iter().map(|a| NodeAddress::new(&a.type_, &a.address)).collect())
            .unwrap_or_default(),
        uninitialized: spec
            .and_then(|s| s.taints.as_ref())
            .is_some_and(|taints| taints.iter().any(|t| t.key == UNINITIALIZED_TAINT)),
        provider_id: spec.and_then(|s| s.provider_id.clone()).filter(|p| !p.is_empty()),
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", rename_all = "kebab-case")]
pub enum Diagnosis {
    /// The taint is gone.
    Initialized {
        addresses: Vec<NodeAddress>,
        warning: Option<String>,
    },
    /// Still tainted, and why.
    Stuck { reason: String, fix: String },
}

impl Diagnosis {
    pub fn is_stuck(&self) -> bool {
        matches!(self, Diagnosis::Stuck { .. })
    }
}

/// How `check --node` was run: what a fix that repeats it repeats.
#[derive(Debug, Clone, Copy)]
pub struct Asked<'a> {
    /// The Node's name as given (not as the API server answered it).
    pub node: &'a str,
    /// `--kubeconfig`, when given (else the same defaults apply again).
    pub kubeconfig: Option<&'a Path>,
}

impl Asked<'_> {
    /// The same check with the cloud's addresses from the metadata service,
    /// as a shell command.
    fn with_source_auto(&self) -> String {
        let mut command = format!("node-ip-helper check --node {}", shell_word(self.node));
        if let Some(path) = self.kubeconfig {
            command.push_str(&format!(" --kubeconfig {}", shell_word(&path.to_string_lossy())));
        }
        command + " --source auto"
    }
}

/// The diagnosis of a node, given the cloud's addresses and this
/// instance's identity when known. A Node the cloud controller manager
/// will not find this instance for comes first: its addresses are then
/// not this instance's. Every command a fix names runs as written on the
/// node (tests/as_shipped.rs runs each).
pub fn diagnose(
    facts: &NodeFacts,
    cloud: Option<&[NodeAddress]>,
    identity: Option<&Identity>,
    asked: &Asked,
) -> Diagnosis {
    if let Some(mismatch) = identity.and_then(|identity| identity.mismatch(facts)) {
        return if facts.uninitialized {
            Diagnosis::Stuck {
                reason: mismatch.reason,
                fix: mismatch.fix,
            }
        } else {
            Diagnosis::Initialized {
                addresses: facts.addresses.clone(),
                warning: Some(format!(
                    "this is not the instance the Node was initialized for: {}",
                    mismatch.reason
                )),
            }
        };
    }
    let annotation = facts.provided_node_ip.as_deref();
    if !facts.uninitialized {
        // The CCM's periodic address update applies the same filter and
        // only logs when it fails: the addresses then go stale.
        let warning = match (annotation, cloud) {
            (Some(value), Some(cloud)) => ccm::addresses_from_node_ip(value, cloud).err().map(|e| {
                format!("the cloud controller manager's periodic address update will fail ({e}): the node's addresses will go stale")
            }),
            _ => None,
        };
        return Diagnosis::Initialized {
            addresses: facts.addresses.clone(),
            warning,
        };
    }
    if cloud.is_some_and(<[NodeAddress]>::is_empty) {
        return Diagnosis::Stuck {
            reason: "the cloud reports no addresses for this instance".into(),
            fix: "check that the instance is the node's (spec.providerID) and that the cloud controller manager can see it".into(),
        };
    }
    let Some(value) = annotation else {
        return stuck_elsewhere(
            facts,
            "kubelet announced no node IP (no provided-node-ip annotation), which the CCM accepts as is",
        );
    };
    let invalid = |e: NodeIpError| Diagnosis::Stuck {
        reason: format!("annotation {PROVIDED_NODE_IP}={value:?} is invalid: {e}"),
        fix: "start kubelet with a single IP or a dual-stack pair in --node-ip".into(),
    };
    if let Err(e) = ccm::parse_node_ip_annotation(value) {
        return invalid(e);
    }
    let Some(cloud) = cloud else {
        return Diagnosis::Stuck {
            reason: format!(
                "the node is still tainted {UNINITIALIZED_TAINT}; kubelet announced {PROVIDED_NODE_IP}={value}, and without the cloud's addresses it cannot be told whether the cloud controller manager accepts it"
            ),
            fix: format!(
                "run `{}` on the node (or give --cloud-addresses FILE)",
                asked.with_source_auto()
            ),
        };
    };
    match ccm::addresses_from_node_ip(value, cloud) {
        Err(error @ NodeIpError::NotInCloudAddresses(ip)) => {
            // The node controller's words (node_controller.go syncNode and
            // getNodeModifiersFromCloudProvider wrap the address error): it
            // records no Event for a node it cannot initialize, only this
            // log line, which the user can find in the CCM's log.
            let controller_says = format!(
                "failed to get node modifiers from cloud provider: provided node ip for node {:?} is not valid: {error}",
                facts.name
            );
            let internal: Vec<&str> = cloud
                .iter()
                .filter(|a| a.kind == "InternalIP")
                .map(|a| a.address.as_str())
                .collect();
            Diagnosis::Stuck {
                reason: format!(
                    "kubelet announced {PROVIDED_NODE_IP}={value}, but {ip} is not among the cloud's addresses, so the cloud controller manager refuses to initialize the node; its log says: {controller_says}"
                ),
                fix: format!(
                    "restart kubelet with --node-ip set to one of the cloud's addresses ({}): with the shipped units, `systemctl restart node-ip-helper kubelet` (their source is auto unless /etc/default/node-ip-helper sets NODE_IP_HELPER_SOURCE); `node-ip-helper detect --source auto --output flags` prints the flag",
                    internal.join(", ")
                ),
            }
        }
        // Parsed above: no other error is left.
        Err(e) => invalid(e),
        Ok(_) => stuck_elsewhere(
            facts,
            &format!("{PROVIDED_NODE_IP}={value} is among the cloud's addresses, so the node IP is not the problem"),
        ),
    }
}

fn stuck_elsewhere(facts: &NodeFacts, about_ip: &str) -> Diagnosis {
    let provider = match &facts.provider_id {
        Some(id) => format!("spec.providerID is {id}"),
        None => "spec.providerID is empty".into(),
    };
    Diagnosis::Stuck {
        reason: format!("the node is still tainted {UNINITIALIZED_TAINT}; {about_ip}; {provider}"),
        fix: "check that the cloud controller manager runs (its node controller initializes nodes) and read its log for this node".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(json: serde_json::Value) -> Node {
        serde_json::from_value(json).unwrap()
    }

    /// A Node as kubelet registers it with --cloud-provider=external.
    fn registered(annotation: Option<&str>) -> Node {
        let mut json = serde_json::json!({
            "metadata": {"name": "node-a", "annotations": {}},
            "spec": {"taints": [{"key": UNINITIALIZED_TAINT, "value": "true", "effect": "NoSchedule"}]},
            "status": {"addresses": [{"type": "Hostname", "address": "node-a"}]}
        });
        if let Some(value) = annotation {
            json["metadata"]["annotations"][PROVIDED_NODE_IP] = value.into();
        }
        node(json)
    }

    const ASKED: Asked = Asked {
        node: "node-a",
        kubeconfig: None,
    };

    fn cloud() -> Vec<NodeAddress> {
        vec![
            NodeAddress::new("InternalIP", "10.0.1.25"),
            NodeAddress::new("ExternalIP", "203.0.113.10"),
        ]
    }

    #[test]
    fn reads_the_node_as_kubelet_registers_it() {
        let facts = facts(&registered(Some("10.0.1.25")));
        assert!(facts.uninitialized);
        assert_eq!(facts.provided_node_ip.as_deref(), Some("10.0.1.25"));
        assert_eq!(facts.addresses, [NodeAddress::new("Hostname", "node-a")]);
        assert_eq!(facts.provider_id, None);
    }

    #[test]
    fn a_node_ip_outside_the_clouds_list_is_the_reason() {
        let diagnosis = diagnose(&facts(&registered(Some("192.168.56.10"))), Some(&cloud()), None, &ASKED);
        match diagnosis {
            Diagnosis::Stuck { reason, fix } => {
                assert!(
                    reason.contains("192.168.56.10 is not among the cloud's addresses"),
                    "{reason}"
                );
                assert!(fix.contains("(10.0.1.25)"), "{fix}");
                // The controller's own words, as the cluster tier's
                // node_ip_helper_real.rs finds them in its log.
                assert!(
                    reason.ends_with("; its log says: failed to get node modifiers from cloud provider: provided node ip for node \"node-a\" is not valid: failed to get node address from cloud provider that matches ip: 192.168.56.10"),
                    "{reason}"
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_matching_ip_points_elsewhere() {
        let diagnosis = diagnose(&facts(&registered(Some("10.0.1.25"))), Some(&cloud()), None, &ASKED);
        match diagnosis {
            Diagnosis::Stuck { reason, fix } => {
                assert!(reason.contains("the node IP is not the problem") && reason.contains("providerID is empty"));
                assert!(fix.contains("cloud controller manager runs"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unknown_cloud_and_bad_annotations() {
        let asked = Asked {
            node: "node-a",
            kubeconfig: Some(Path::new("/root/kube config")),
        };
        assert!(
            matches!(diagnose(&facts(&registered(Some("10.0.1.25"))), None, None, &asked), Diagnosis::Stuck { fix, .. }
                if fix == "run `node-ip-helper check --node node-a --kubeconfig '/root/kube config' --source auto` on the node (or give --cloud-addresses FILE)")
        );
        assert!(
            matches!(diagnose(&facts(&registered(Some("10.0.1.25, fd00::1"))), None, None, &ASKED), Diagnosis::Stuck { reason, .. } if reason.contains("is invalid"))
        );
    }

    #[test]
    fn a_cloud_without_addresses_is_the_reason_whatever_kubelet_announced() {
        for annotation in [None, Some("10.0.1.25"), Some("10.0.1.25, fd00::1")] {
            match diagnose(&facts(&registered(annotation)), Some(&[]), None, &ASKED) {
                Diagnosis::Stuck { reason, fix } => {
                    assert_eq!(
                        reason, "the cloud reports no addresses for this instance",
                        "{annotation:?}"
                    );
                    assert!(fix.contains("spec.providerID"), "{fix}");
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn initialized_nodes_and_stale_address_warnings() {
        let mut initialized = registered(Some("192.168.56.10"));
        initialized.spec.as_mut().unwrap().taints = None;
        match diagnose(&facts(&initialized), Some(&cloud()), None, &ASKED) {
            Diagnosis::Initialized { warning: Some(w), .. } => assert!(w.contains("go stale"), "{w}"),
            other => panic!("{other:?}"),
        }
        assert!(!diagnose(&facts(&initialized), None, None, &ASKED).is_stuck());
    }
}
