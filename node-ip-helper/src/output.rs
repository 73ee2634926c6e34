//! Rendering, apart from choosing and observing: what `detect` prints and
//! `write` stores (JSON for people and tools, kubelet flags, or shell-safe
//! assignments for an environment file), and what `check` prints.

use std::net::IpAddr;

use serde::Serialize;

use crate::ccm::Verdict;
use crate::live::{self, Diagnosis, NodeFacts};
use crate::select::ChosenAddress;
use crate::source::{MetadataAnswer, Origin, asked_summary};

/// The choice, with its reasons.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Detection {
    /// Primary first.
    #[serde(rename = "nodeIPs")]
    pub node_ips: Vec<IpAddr>,
    /// The node name to pass as `--hostname-override`, when one was asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// The cloud's provider ID for `--provider-id`, in the form its cloud
    /// controller manager parses; none for the local source.
    #[serde(rename = "providerID", skip_serializing_if = "Option::is_none")]
    pub provider_id: Option<String>,
    /// `local`, or the cloud whose metadata service gave the addresses.
    pub source: Origin,
    pub addresses: Vec<ChosenAddress>,
    /// Every address the metadata service lists, in the cloud controller
    /// manager's order: what the node's `status.addresses` will be built from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cloud_addresses: Option<Vec<cloud_access::metadata::CloudAddress>>,
    /// For `--source auto`: each metadata service asked and what it
    /// answered, which says why the source is what it is.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub metadata_services: Vec<MetadataAnswer>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// `{"nodeIPs": [...], "hostname": ..., "source": ..., "addresses": [...]}`,
    /// with `metadataServices` (who was asked, what each answered) for auto.
    Json,
    /// kubelet flags: `--node-ip=A[,B] [--provider-id=ID] [--hostname-override=NAME]`.
    Flags,
    /// Shell and systemd `EnvironmentFile` assignments.
    Env,
}

/// Names of the variables `env` output sets.
pub const ENV_NODE_IP: &str = "NODE_IP_HELPER_NODE_IP";
pub const ENV_NODE_IPS: &str = "NODE_IP_HELPER_NODE_IPS";
pub const ENV_HOSTNAME: &str = "NODE_IP_HELPER_HOSTNAME_OVERRIDE";
pub const ENV_PROVIDER_ID: &str = "NODE_IP_HELPER_PROVIDER_ID";
/// `--provider-id=ID`, or empty: the drop-in expands it unbraced, so that
/// an empty value passes no argument at all.
pub const ENV_PROVIDER_ID_ARG: &str = "NODE_IP_HELPER_PROVIDER_ID_ARG";
pub const ENV_KUBELET_ARGS: &str = "NODE_IP_HELPER_KUBELET_ARGS";

impl Detection {
    pub fn node_ip_flag_value(&self) -> String {
        self.node_ips
            .iter()
            .map(IpAddr::to_string)
            .collect::<Vec<_>>()
            .join(",")
    }

    pub fn kubelet_flags(&self) -> String {
        let mut flags = format!("--node-ip={}", self.node_ip_flag_value());
        if let Some(flag) = self.provider_id_flag() {
            flags.push_str(&format!(" {flag}"));
        }
        if let Some(name) = &self.hostname {
            flags.push_str(&format!(" --hostname-override={name}"));
        }
        flags
    }

    fn provider_id_flag(&self) -> Option<String> {
        self.provider_id.as_ref().map(|id| format!("--provider-id={id}"))
    }

    /// Why `auto` chose from the host's own state, as one line (without the
    /// program's name): who was asked and what each said; `None` unless
    /// `auto` fell back.
    pub fn fallback_note(&self) -> Option<String> {
        if self.source != Origin::Local || self.metadata_services.is_empty() {
            return None;
        }
        Some(format!(
            "--source auto: no metadata service answered {}: chose from the host's interfaces and routes, as kubelet would (--source local, for the unit NODE_IP_HELPER_SOURCE=local, skips asking)",
            asked_summary(&self.metadata_services)
        ))
    }

    pub fn render(&self, format: OutputFormat) -> String {
        match format {
            // Serializing plain strings and addresses cannot fail.
            OutputFormat::Json => serde_json::to_string_pretty(self).unwrap_or_default() + "\n",
            OutputFormat::Flags => self.kubelet_flags() + "\n",
            OutputFormat::Env => self.env_file(),
        }
    }

    fn env_file(&self) -> String {
        let mut lines = vec![
            "# Written by node-ip-helper for kubelet's drop-in (20-node-ip-helper.conf).".to_owned(),
            format!(
                "{ENV_NODE_IP}={}",
                quote(&self.node_ips.first().map(IpAddr::to_string).unwrap_or_default())
            ),
            format!("{ENV_NODE_IPS}={}", quote(&self.node_ip_flag_value())),
        ];
        if let Some(name) = &self.hostname {
            lines.push(format!("{ENV_HOSTNAME}={}", quote(name)));
        }
        if let Some(id) = &self.provider_id {
            lines.push(format!("{ENV_PROVIDER_ID}={}", quote(id)));
        }
        lines.push(format!(
            "{ENV_PROVIDER_ID_ARG}={}",
            quote(&self.provider_id_flag().unwrap_or_default())
        ));
        lines.push(format!("{ENV_KUBELET_ARGS}={}", quote(&self.kubelet_flags())));
        lines.join("\n") + "\n"
    }
}

/// `check`'s output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CheckOutput {
    Text,
    Json,
}

/// `check --node-ip`: the verdict on `node_ip`.
/// Whether the CCM finds the instance by the provider ID or name kubelet
/// will register (`check --node-ip --provider-id/--node-name`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Found {
    /// What it was asked about: `--provider-id ID` or `the node name NAME`.
    pub by: String,
    /// `None`: the CCM finds this instance by it.
    pub mismatch: Option<crate::identity::Mismatch>,
}

pub fn verdict(node_ip: &str, verdict: &Verdict, found: Option<&Found>, format: CheckOutput) -> String {
    match format {
        // Serializing plain strings cannot fail.
        CheckOutput::Json => {
            let mut value = serde_json::to_value(verdict).unwrap_or_default();
            if let (Some(found), Some(object)) = (found, value.as_object_mut()) {
                object.insert("identity".into(), serde_json::to_value(found).unwrap_or_default());
            }
            serde_json::to_string_pretty(&value).unwrap_or_default() + "\n"
        }
        CheckOutput::Text => {
            let mut text = describe_verdict(node_ip, verdict);
            match found {
                Some(Found { by, mismatch: None }) => {
                    text.push_str(&format!(
                        "OK: the cloud controller manager finds this instance by {by}\n"
                    ));
                }
                Some(Found {
                    mismatch: Some(mismatch),
                    ..
                }) => text.push_str(&format!("STUCK: {}\nFIX: {}\n", mismatch.reason, mismatch.fix)),
                None => {}
            }
            text
        }
    }
}

/// `check --node`: the Node's facts and the diagnosis.
pub fn node(facts: &NodeFacts, diagnosis: &Diagnosis, format: CheckOutput) -> String {
    match format {
        CheckOutput::Json => {
            let report = serde_json::json!({"node": facts, "diagnosis": diagnosis});
            serde_json::to_string_pretty(&report).unwrap_or_default() + "\n"
        }
        CheckOutput::Text => describe_node(facts, diagnosis),
    }
}

fn describe_node(facts: &NodeFacts, diagnosis: &Diagnosis) -> String {
    let mut text = format!(
        "Node {}: provided-node-ip {}, providerID {}, taint {}\n",
        facts.name,
        facts.provided_node_ip.as_deref().unwrap_or("(none)"),
        facts.provider_id.as_deref().unwrap_or("(empty)"),
        if facts.uninitialized {
            live::UNINITIALIZED_TAINT
        } else {
            "(none)"
        }
    );
    match diagnosis {
        Diagnosis::Initialized { addresses, warning } => {
            text.push_str("OK: the node is initialized; its addresses:\n");
            for address in addresses {
                text.push_str(&format!("  {:<12} {}\n", address.kind, address.address));
            }
            if let Some(warning) = warning {
                text.push_str(&format!("WARNING: {warning}\n"));
            }
        }
        Diagnosis::Stuck { reason, fix } => {
            text.push_str(&format!("STUCK: {reason}\nFIX: {fix}\n"));
        }
    }
    text
}

fn describe_verdict(node_ip: &str, verdict: &Verdict) -> String {
    match verdict {
        Verdict::Initializes {
            annotation,
            addresses,
            ignored,
        } => {
            let mut text = String::new();
            if !ignored.is_empty() {
                text.push_str(&format!(
                    "NOTE: kubelet cannot parse {ignored:?} in --node-ip, logs \"Could not parse some node IP(s), ignoring them\" and carries on without\n"
                ));
            }
            text.push_str(&match annotation {
                Some(value) => format!(
                    "OK: kubelet annotates the node alpha.kubernetes.io/provided-node-ip={value}; the cloud controller manager accepts it, removes the uninitialized taint and sets:\n"
                ),
                None => format!(
                    "OK: --node-ip={node_ip:?} sets no provided-node-ip annotation; the cloud controller manager sets every cloud address:\n"
                ),
            });
            for address in addresses {
                text.push_str(&format!("  {:<12} {}\n", address.kind, address.address));
            }
            text
        }
        Verdict::KubeletRefuses { reason } => format!("REFUSED by kubelet, which will not start: {reason}\n"),
        Verdict::StaysTainted { annotation, reason } => format!(
            "STUCK: the node keeps the node.cloudprovider.kubernetes.io/uninitialized taint: {reason} (annotation {}); pick a --node-ip among the cloud's addresses\n",
            annotation.as_deref().unwrap_or("absent")
        ),
    }
}

pub use suite_program::shell::{quote, shell_word};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::family::Family;

    fn detection(hostname: Option<&str>) -> Detection {
        Detection {
            node_ips: vec!["10.0.0.5".parse().unwrap(), "fd00::5".parse().unwrap()],
            hostname: hostname.map(str::to_owned),
            provider_id: None,
            source: Origin::Local,
            cloud_addresses: None,
            metadata_services: Vec::new(),
            addresses: vec![ChosenAddress {
                ip: "10.0.0.5".parse().unwrap(),
                family: Family::V4,
                interface: "eth0".into(),
                reason: "r".into(),
            }],
        }
    }

    #[test]
    fn flags_and_env() {
        assert_eq!(
            detection(None).render(OutputFormat::Flags),
            "--node-ip=10.0.0.5,fd00::5\n"
        );
        assert_eq!(
            detection(Some("node-a")).render(OutputFormat::Flags),
            "--node-ip=10.0.0.5,fd00::5 --hostname-override=node-a\n"
        );
        let env = detection(Some("node-a")).render(OutputFormat::Env);
        assert!(env.contains("NODE_IP_HELPER_NODE_IP='10.0.0.5'\n"), "{env}");
        assert!(env.contains("NODE_IP_HELPER_NODE_IPS='10.0.0.5,fd00::5'\n"), "{env}");
        assert!(env.contains("NODE_IP_HELPER_KUBELET_ARGS='--node-ip=10.0.0.5,fd00::5 --hostname-override=node-a'\n"));
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(
            shell_word("/etc/kubernetes/kubelet.conf"),
            "/etc/kubernetes/kubelet.conf"
        );
        assert_eq!(shell_word("/tmp/kube config"), "'/tmp/kube config'");
        assert_eq!(shell_word("$(reboot)"), "'$(reboot)'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(shell_word(""), "''");
    }

    /// The provider ID goes before the node name on the flags, into its own
    /// variable, and as a whole argument into `…_PROVIDER_ID_ARG`, which is
    /// empty (no argument for the drop-in) without one.
    #[test]
    fn the_provider_id_as_a_flag_and_in_the_env_file() {
        let env = detection(None).render(OutputFormat::Env);
        assert!(env.contains("\nNODE_IP_HELPER_PROVIDER_ID_ARG=''\n"), "{env}");
        assert!(!env.contains("NODE_IP_HELPER_PROVIDER_ID="), "{env}");
        let with_id = Detection {
            provider_id: Some("aws:///eu-west-1a/i-0123456789abcdef0".into()),
            ..detection(Some("node-a"))
        };
        assert_eq!(
            with_id.render(OutputFormat::Flags),
            "--node-ip=10.0.0.5,fd00::5 --provider-id=aws:///eu-west-1a/i-0123456789abcdef0 --hostname-override=node-a\n"
        );
        let env = with_id.render(OutputFormat::Env);
        assert!(
            env.contains("\nNODE_IP_HELPER_PROVIDER_ID='aws:///eu-west-1a/i-0123456789abcdef0'\n"),
            "{env}"
        );
        assert!(
            env.contains("\nNODE_IP_HELPER_PROVIDER_ID_ARG='--provider-id=aws:///eu-west-1a/i-0123456789abcdef0'\n"),
            "{env}"
        );
        let json: serde_json::Value = serde_json::from_str(&with_id.render(OutputFormat::Json)).unwrap();
        assert_eq!(json["providerID"], "aws:///eu-west-1a/i-0123456789abcdef0");
    }

    #[test]
    fn json_names_match_the_docs() {
        let json: serde_json::Value = serde_json::from_str(&detection(None).render(OutputFormat::Json)).unwrap();
        assert_eq!(json["nodeIPs"][1], "fd00::5");
        assert_eq!(json["source"], "local");
        assert_eq!(json["addresses"][0]["interface"], "eth0");
        assert_eq!(json["addresses"][0]["family"], "IPv4");
        assert!(json.get("hostname").is_none());
    }
}
