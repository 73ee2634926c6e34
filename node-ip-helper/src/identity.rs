//! `check --node`: whether the cloud controller manager will find this
//! instance for a Node, by the Node's `spec.providerID` or, without one, by
//! its name, as each CCM parses and looks them up
//! ([`cloud_access::metadata::CcmMatching`]). A pure function of the Node
//! and the instance's metadata.

use cloud_access::metadata::{CcmMatching, ProviderIdOptions};
use serde::Serialize;

use crate::live::NodeFacts;
use crate::output::shell_word;

/// This instance, as the cloud's metadata service describes it, and the
/// provider ID form the flags ask for.
#[derive(Debug, Clone)]
pub struct Identity {
    pub matching: CcmMatching,
    pub options: ProviderIdOptions,
    /// Why the instance's names are not the ones the CCM compares (AWS:
    /// IMDS's `local-hostname` when EC2's `PrivateDnsName` could not be read).
    pub names_unverified: Option<String>,
}

/// Why the cloud controller manager will not find this instance for the
/// Node, and what to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Mismatch {
    pub reason: String,
    pub fix: String,
}

/// The words of k8s.io/cloud-provider's node controller when InstancesV2's
/// `InstanceMetadata` finds no instance (`syncNode` wraps the cloud's
/// `cloudprovider.InstanceNotFound`, which each CCM returns then).
fn controller_says(node: &str) -> String {
    format!("failed to get instance metadata for node {node}: instance not found")
}

impl Identity {
    /// `None` when the CCM will find this instance for the Node.
    pub fn mismatch(&self, facts: &NodeFacts) -> Option<Mismatch> {
        let cloud = self.matching.provider.name();
        let node = &facts.name;
        let ours = cloud_access::metadata::provider_id(self.matching.provider, &self.matching.instance, &self.options);
        let recreate = |ours: &str| {
            format!(
                "spec.providerID cannot change once set: delete the Node (`kubectl delete node {}`; its pods move elsewhere) and restart kubelet with --provider-id={ours}: with the shipped units, `systemctl restart node-ip-helper kubelet` (they pass it unless NODE_IP_HELPER_NO_PROVIDER_ID is set)",
                shell_word(node)
            )
        };
        match (&facts.provider_id, &ours) {
            (Some(theirs), _) => match self.matching.names_this_instance(theirs, &self.options) {
                Ok(true) => None,
                Ok(false) => Some(Mismatch {
                    reason: format!(
                        "spec.providerID is {theirs}, which names another {cloud} instance than this one ({}): the cloud controller manager takes that instance's addresses and zone, or, if there is none, cannot initialize the node; its log says: {}",
                        ours.as_deref().unwrap_or("its provider ID cannot be told"),
                        controller_says(node)
                    ),
                    fix: match &ours {
                        Ok(ours) => recreate(ours),
                        Err(_) => format!(
                            "spec.providerID cannot change once set: delete the Node (`kubectl delete node {}`) and start kubelet on the instance {theirs} names, or with this instance's provider ID",
                            shell_word(node)
                        ),
                    },
                }),
                Err(why) => Some(Mismatch {
                    reason: format!(
                        "spec.providerID is {theirs:?}, which the {cloud} cloud controller manager cannot parse ({why}), so it cannot find the instance"
                    ),
                    fix: match &ours {
                        Ok(ours) => recreate(ours),
                        Err(error) => {
                            format!("{error}; delete the Node and start kubelet with this instance's provider ID")
                        }
                    },
                }),
            },
            (None, _) if self.matching.finds_by_name(node) => None,
            (None, ours) => {
                let names = self.matching.names();
                let mut known = if names.is_empty() {
                    "none that the metadata service gives".to_owned()
                } else {
                    names.join(", ")
                };
                if let Some(why) = &self.names_unverified {
                    known.push_str(&format!(" ({why})"));
                }
                Some(Mismatch {
                    reason: format!(
                        "spec.providerID is empty, so the {cloud} cloud controller manager looks the instance up by the node's name, {node}, but this instance is found only as {known}; its log says: {}",
                        controller_says(node)
                    ),
                    fix: match ours {
                        Ok(ours) => format!(
                            "give the Node this instance's provider ID, which an empty one may still become: `kubectl patch node {} --type merge -p '{{\"spec\":{{\"providerID\":\"{ours}\"}}}}'` (nodes registered with the shipped units get it from kubelet's --provider-id)",
                            shell_word(node)
                        ),
                        Err(error) => format!(
                            "{error}; name the node as the cloud knows the instance (--node-name-from, for a new Node) or give it the instance's provider ID"
                        ),
                    },
                })
            }
        }
    }
}

impl Identity {
    /// Before kubelet registers the Node (`check --node-ip` with
    /// `--provider-id` or `--node-name`): whether the CCM will find this
    /// instance for a Node registered with them. The fix is kubelet's flags,
    /// since there is no Node yet.
    pub fn mismatch_before_registration(&self, name: &str, provider_id: Option<&str>) -> Option<Mismatch> {
        let facts = NodeFacts {
            name: name.to_owned(),
            provided_node_ip: None,
            addresses: Vec::new(),
            uninitialized: true,
            provider_id: provider_id.map(str::to_owned),
        };
        let mismatch = self.mismatch(&facts)?;
        let ours = cloud_access::metadata::provider_id(self.matching.provider, &self.matching.instance, &self.options);
        let fix = match ours {
            Ok(ours) => format!(
                "start kubelet with --provider-id={ours} (the shipped drop-in passes $NODE_IP_HELPER_PROVIDER_ID_ARG unless NODE_IP_HELPER_NO_PROVIDER_ID is set)"
            ),
            Err(error) => format!(
                "{error}; start kubelet with a --hostname-override the cloud knows this instance by ({})",
                self.matching.names().join(", ")
            ),
        };
        Some(Mismatch {
            reason: mismatch.reason,
            fix,
        })
    }
}

#[cfg(test)]
mod tests {
    use cloud_access::metadata::{Instance, Provider};

    use super::*;

    fn gce() -> Identity {
        Identity {
            matching: CcmMatching {
                provider: Provider::Gce,
                instance: Instance {
                    project: Some("my-project".into()),
                    zone: Some("europe-west1-b".into()),
                    name: Some("node-a".into()),
                    ..Instance::default()
                },
            },
            options: ProviderIdOptions::default(),
            names_unverified: None,
        }
    }

    fn facts(name: &str, provider_id: Option<&str>) -> NodeFacts {
        NodeFacts {
            name: name.into(),
            provided_node_ip: None,
            addresses: Vec::new(),
            uninitialized: true,
            provider_id: provider_id.map(str::to_owned),
        }
    }

    #[test]
    fn a_node_the_ccm_finds_is_no_mismatch() {
        for (name, id) in [
            ("node-a", None),
            ("node-a.europe-west1-b.c.my-project.internal", None),
            ("anything", Some("gce://my-project/europe-west1-b/node-a")),
        ] {
            assert_eq!(gce().mismatch(&facts(name, id)), None, "{name} {id:?}");
        }
    }

    #[test]
    fn another_instances_provider_id_needs_a_new_node() {
        let mismatch = gce()
            .mismatch(&facts("node-a", Some("gce://my-project/europe-west1-c/node-a")))
            .unwrap();
        assert!(
            mismatch.reason.starts_with("spec.providerID is gce://my-project/europe-west1-c/node-a, which names another gce instance than this one (gce://my-project/europe-west1-b/node-a)"),
            "{}",
            mismatch.reason
        );
        assert!(
            mismatch
                .reason
                .ends_with("its log says: failed to get instance metadata for node node-a: instance not found"),
            "{}",
            mismatch.reason
        );
        assert!(
            mismatch.fix.contains("`kubectl delete node node-a`"),
            "{}",
            mismatch.fix
        );
        assert!(
            mismatch.fix.contains("`systemctl restart node-ip-helper kubelet`"),
            "{}",
            mismatch.fix
        );
        let unparsable = gce().mismatch(&facts("node-a", Some("gce:///node-a"))).unwrap();
        assert!(
            unparsable.reason.contains("cannot parse (not gce://PROJECT/ZONE/NAME"),
            "{}",
            unparsable.reason
        );
    }

    #[test]
    fn before_registration_the_fix_is_kubelets_flags() {
        let gce = gce();
        assert_eq!(gce.mismatch_before_registration("node-a", None), None);
        assert_eq!(
            gce.mismatch_before_registration("", Some("gce://my-project/europe-west1-b/node-a")),
            None
        );
        let wrong = gce
            .mismatch_before_registration("node-a", Some("gce://my-project/europe-west1-c/node-a"))
            .expect("another instance");
        assert!(wrong.reason.contains("names another gce instance"), "{}", wrong.reason);
        assert_eq!(
            wrong.fix,
            "start kubelet with --provider-id=gce://my-project/europe-west1-b/node-a (the shipped drop-in passes \
             $NODE_IP_HELPER_PROVIDER_ID_ARG unless NODE_IP_HELPER_NO_PROVIDER_ID is set)"
        );
        let unknown = gce
            .mismatch_before_registration("worker-1", None)
            .expect("an unknown name");
        assert!(
            unknown.reason.contains("by the node's name, worker-1"),
            "{}",
            unknown.reason
        );
    }

    #[test]
    fn a_name_the_ccm_cannot_find_gets_the_provider_id() {
        let mismatch = gce().mismatch(&facts("worker-1", None)).unwrap();
        assert!(
            mismatch
                .reason
                .contains("by the node's name, worker-1, but this instance is found only as node-a"),
            "{}",
            mismatch.reason
        );
        assert!(
            mismatch.fix.contains(
                r#"`kubectl patch node worker-1 --type merge -p '{"spec":{"providerID":"gce://my-project/europe-west1-b/node-a"}}'`"#
            ),
            "{}",
            mismatch.fix
        );
        // Names the CCM does not compare are said to be what they are.
        let mut unverified = gce();
        unverified.names_unverified = Some("IMDS's local-hostname: not read".into());
        let mismatch = unverified.mismatch(&facts("worker-1", None)).expect("a mismatch");
        assert!(
            mismatch
                .reason
                .contains("found only as node-a (IMDS's local-hostname: not read); its log says"),
            "{}",
            mismatch.reason
        );
        // Without a provider ID to give, the fix says what is missing.
        let mut no_project = gce();
        no_project.matching.instance.project = None;
        let mismatch = no_project.mismatch(&facts("worker-1", None)).unwrap();
        assert!(
            mismatch
                .fix
                .starts_with("no gce provider ID: the metadata service gave no project ID; name the node"),
            "{}",
            mismatch.fix
        );
    }
}
