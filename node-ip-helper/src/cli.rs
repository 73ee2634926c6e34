//! Command line: one flattened struct per concern; every flag also reads a
//! `NODE_IP_HELPER_*` environment variable.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use cloud_access::metadata::ProviderIdOptions;
use ipnet::IpNet;
use suite_program::{LogArgs, LogEnv as _};

use crate::choose::Config;
pub use crate::choose::NodeNameFrom;
use crate::family::IpFamilyPolicy;
use crate::filters::{self, Filters, InterfacePattern};
pub use crate::output::CheckOutput;
use crate::output::OutputFormat;
pub use crate::source::Source;

/// Chooses the node's IP address(es) before kubelet starts with
/// --cloud-provider=external, the way the cloud controller manager will
/// accept them, and hands them to kubelet.
#[derive(Debug, Parser)]
#[command(
    name = "node-ip-helper",
    version,
    propagate_version = true,
    log_env("NODE_IP_HELPER_LOG_LEVEL", "NODE_IP_HELPER_LOG_FORMAT", "warn")
)]
pub struct Cli {
    #[command(flatten)]
    pub log: LogArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the chosen node IP(s) and why.
    Detect(DetectCommand),
    /// Write kubelet's arguments to an environment file, atomically, only
    /// when the choice changed.
    Write(WriteCommand),
    /// Say whether the cloud controller manager will initialize a node
    /// started with --node-ip (offline), or why a Node is stuck (--node).
    /// Exit status: 0 yes (initialized), 2 no (stuck, or kubelet refuses),
    /// 1 could not check.
    Check(CheckCommand),
}

#[derive(Debug, Args)]
pub struct DetectCommand {
    #[command(flatten)]
    pub detect: DetectArgs,
    /// Output format.
    #[arg(long, short, env = "NODE_IP_HELPER_OUTPUT", value_enum, default_value_t = OutputFormat::Json)]
    pub output: OutputFormat,
}

#[derive(Debug, Args)]
pub struct WriteCommand {
    /// Environment file for kubelet (systemd EnvironmentFile), e.g.
    /// /run/node-ip-helper/kubelet.env; it sets NODE_IP_HELPER_NODE_IPS and
    /// the others. Only a regular file or a missing path is written; a
    /// symbolic link to a regular file is followed (the file replaced, the
    /// link kept); a device, FIFO, directory or dangling link is refused.
    #[arg(long, env = "NODE_IP_HELPER_ENV_FILE", value_name = "PATH")]
    pub env_file: PathBuf,
    /// Keep the first choice across reboots, recorded in this file, for as
    /// long as its addresses are still usable on the host (written as
    /// --env-file is).
    #[arg(long, env = "NODE_IP_HELPER_STICKY", value_name = "FILE")]
    pub sticky: Option<PathBuf>,
    #[command(flatten)]
    pub detect: DetectArgs,
}

#[derive(Debug, Args)]
pub struct DetectArgs {
    /// Where the addresses come from: the host's interfaces and routes, a
    /// cloud's metadata service, or `auto` (every metadata service at once,
    /// falling back to local; what the shipped unit sets).
    #[arg(long, env = "NODE_IP_HELPER_SOURCE", value_enum, default_value_t = Source::Local)]
    pub source: Source,
    #[command(flatten)]
    pub metadata: MetadataArgs,
    /// Families to choose: ipv4, ipv6, dual (IPv4 primary) or
    /// dual-ipv6-primary; dual needs both families.
    #[arg(long, env = "NODE_IP_HELPER_IP_FAMILY", value_enum, default_value_t = IpFamilyPolicy::Ipv4)]
    pub ip_family: IpFamilyPolicy,
    #[command(flatten)]
    pub filters: FilterArgs,
    #[command(flatten)]
    pub identity: IdentityArgs,
}

/// The node's identity: the provider ID and, opted into, the node name.
#[derive(Debug, Args)]
#[command(next_help_heading = "Node identity")]
pub struct IdentityArgs {
    /// Also pass --hostname-override, with the node name taken from here:
    /// trimmed and lowercased as kubelet does, and refused unless it is a
    /// valid node name (a DNS-1123 subdomain).
    #[arg(long, env = "NODE_IP_HELPER_NODE_NAME_FROM", value_enum)]
    pub node_name_from: Option<NodeNameFrom>,
    /// Do not pass --provider-id. By default a cloud source passes the
    /// instance's provider ID in the form its cloud controller manager
    /// parses (aws:///ZONE/i-…, gce://PROJECT/ZONE/NAME, azure:///subscriptions/…,
    /// openstack:///UUID, digitalocean://ID, hcloud://ID).
    #[arg(long, env = "NODE_IP_HELPER_NO_PROVIDER_ID", value_parser = suite_program::boolish)]
    pub no_provider_id: bool,
    #[command(flatten)]
    pub ccm: CcmArgs,
}

/// How the cloud controller manager is configured, where that changes the
/// provider ID's form.
#[derive(Debug, Args)]
pub struct CcmArgs {
    /// OpenStack: write the regional provider ID openstack://REGION/UUID,
    /// for a cloud controller manager run with OS_CCM_REGIONAL=true (give
    /// its region); openstack:///UUID otherwise.
    #[arg(long, env = "NODE_IP_HELPER_OPENSTACK_REGION", value_parser = parse_region, value_name = "REGION")]
    pub openstack_region: Option<String>,
}

#[derive(Debug, Args)]
#[command(next_help_heading = "Metadata services")]
pub struct MetadataArgs {
    /// Metadata service root URL instead of the provider's own
    /// (http://169.254.169.254/), for proxies and tests.
    #[arg(long, env = "NODE_IP_HELPER_METADATA_ENDPOINT", value_name = "URL")]
    pub metadata_endpoint: Option<url::Url>,
    /// Deadline of each metadata request (Go duration).
    #[arg(long, env = "NODE_IP_HELPER_METADATA_TIMEOUT", value_parser = suite_program::duration::positive, default_value = "2s", value_name = "DURATION")]
    pub metadata_timeout: std::time::Duration,
    /// OpenStack config drive mounted at this directory (label config-2),
    /// read instead of the metadata service.
    #[arg(long, env = "NODE_IP_HELPER_CONFIG_DRIVE", value_name = "DIR")]
    pub config_drive: Option<PathBuf>,
    /// Accept metadata addresses that are not on a local interface (kubelet
    /// refuses such a --node-ip unless it is reachable through another path).
    #[arg(long, env = "NODE_IP_HELPER_SKIP_LOCAL_CHECK", value_parser = suite_program::boolish)]
    pub skip_local_check: bool,
}

#[derive(Debug, Args)]
#[command(next_help_heading = "Filters")]
pub struct FilterArgs {
    /// Only interfaces whose name matches this glob (repeatable).
    #[arg(long = "interface", env = "NODE_IP_HELPER_INTERFACE", value_delimiter = ',', value_parser = parse_interface, value_name = "GLOB")]
    pub interfaces: Vec<InterfacePattern>,
    /// Also exclude interfaces matching this glob (repeatable), on top of
    /// the default list of container, overlay and VPN interfaces.
    #[arg(long = "exclude-interface", env = "NODE_IP_HELPER_EXCLUDE_INTERFACE", value_delimiter = ',', value_parser = parse_exclude, value_name = "GLOB")]
    pub exclude_interfaces: Vec<InterfacePattern>,
    /// Do not exclude the default list (lo, docker*, br-*, cni*, cbr*,
    /// flannel*, cali*, cilium_*, lxc*, vxlan*, weave*, kube-*, veth*, virbr*,
    /// tailscale*, wg*, tun*, tap*, zt*, nebula*).
    #[arg(long, env = "NODE_IP_HELPER_NO_DEFAULT_EXCLUDES", value_parser = suite_program::boolish)]
    pub no_default_excludes: bool,
    /// Only addresses inside one of these CIDRs, per family (repeatable).
    #[arg(
        long = "allow-cidr",
        env = "NODE_IP_HELPER_ALLOW_CIDR",
        value_delimiter = ',',
        value_parser = filters::parse_cidr,
        value_name = "CIDR"
    )]
    pub allow_cidrs: Vec<IpNet>,
    /// Never addresses inside these CIDRs (repeatable).
    #[arg(
        long = "deny-cidr",
        env = "NODE_IP_HELPER_DENY_CIDR",
        value_delimiter = ',',
        value_parser = filters::parse_cidr,
        value_name = "CIDR"
    )]
    pub deny_cidrs: Vec<IpNet>,
}

#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("subject").required(true).args(["node_ip", "node"]))]
pub struct CheckCommand {
    /// Offline: the --node-ip value kubelet is (or will be) started with, A
    /// or A,B; needs --cloud-addresses or --source.
    #[arg(long, env = "NODE_IP_HELPER_NODE_IP", value_name = "IPS")]
    pub node_ip: Option<String>,
    /// Live: the Node to read from the cluster (its provided-node-ip
    /// annotation, addresses and taints), with the kubeconfig's identity.
    #[arg(long, env = "NODE_IP_HELPER_NODE", value_name = "NAME")]
    pub node: Option<String>,
    /// kubeconfig for --node (default: $KUBECONFIG, ~/.kube/config, or the
    /// in-cluster service account).
    #[arg(long, env = "NODE_IP_HELPER_KUBECONFIG", value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// With --node: the most reading the Node may take, from connecting to
    /// the last byte of the answer (Go duration).
    #[arg(long, env = "NODE_IP_HELPER_REQUEST_TIMEOUT", value_parser = suite_program::duration::positive, default_value = "10s", value_name = "DURATION")]
    pub request_timeout: std::time::Duration,
    /// The instance's addresses as the cloud reports them: a JSON array of
    /// {"type": "InternalIP", "address": "10.0.0.5"} as in
    /// Node.status.addresses (a regular file of at most 1 MiB).
    #[arg(long, env = "NODE_IP_HELPER_CLOUD_ADDRESSES", value_name = "FILE")]
    pub cloud_addresses: Option<PathBuf>,
    /// On the node itself: read the cloud's addresses (and, with --node,
    /// --provider-id or --node-name, the instance's identity) from this
    /// metadata source (a cloud name or auto) instead of a file.
    #[arg(long = "source", env = "NODE_IP_HELPER_SOURCE", value_enum, value_name = "SOURCE")]
    pub source: Option<Source>,
    /// Offline, with --source: the --provider-id kubelet will be started
    /// with (the env file's NODE_IP_HELPER_PROVIDER_ID): say whether the
    /// cloud controller manager finds this instance by it.
    #[arg(
        long,
        env = "NODE_IP_HELPER_CHECK_PROVIDER_ID",
        requires = "source",
        conflicts_with = "node",
        value_name = "ID"
    )]
    pub provider_id: Option<String>,
    /// Offline, with --source: the node's name kubelet will register (its
    /// --hostname-override, or the host's name): say whether the cloud
    /// controller manager finds this instance by it when the Node has no
    /// provider ID.
    #[arg(
        long,
        env = "NODE_IP_HELPER_CHECK_NODE_NAME",
        requires = "source",
        conflicts_with = "node",
        value_name = "NAME"
    )]
    pub node_name: Option<String>,
    #[command(flatten)]
    pub metadata: MetadataArgs,
    #[command(flatten)]
    pub ccm: CcmArgs,
    /// Output format.
    #[arg(long, short, env = "NODE_IP_HELPER_CHECK_OUTPUT", value_enum, default_value_t = CheckOutput::Text)]
    pub output: CheckOutput,
}

impl DetectArgs {
    /// The choice's configuration: the one place the flags become it.
    pub fn config(&self) -> Config {
        Config {
            ip_family: self.ip_family,
            filters: self.filters.filters(),
            skip_local_check: self.metadata.skip_local_check,
            node_name_from: self.identity.node_name_from,
            provider_id: (!self.identity.no_provider_id).then(|| self.identity.ccm.provider_id_options()),
        }
    }
}

impl CcmArgs {
    pub fn provider_id_options(&self) -> ProviderIdOptions {
        ProviderIdOptions {
            openstack_region: self.openstack_region.clone(),
        }
    }
}

/// An OpenStack region's name (Keystone's region IDs): something that can
/// stand between `openstack://` and `/UUID` on kubelet's command line.
fn parse_region(text: &str) -> Result<String, String> {
    let bad = cloud_access::metadata::unsafe_in_a_flag(text).or(text.contains('/').then_some('/'));
    match bad {
        _ if text.is_empty() => Err("give the region's name, e.g. RegionOne".into()),
        Some(c) => Err(format!(
            "{text:?} holds {c:?}: a region's name has no whitespace, quotes, '/' or '$'"
        )),
        None => Ok(text.to_owned()),
    }
}

impl FilterArgs {
    /// The default exclusions unless refused, then the flags'.
    pub fn filters(&self) -> Filters {
        let mut excluded = if self.no_default_excludes {
            Vec::new()
        } else {
            filters::default_exclusions()
        };
        excluded.extend(self.exclude_interfaces.iter().cloned());
        Filters {
            interfaces: self.interfaces.clone(),
            excluded_interfaces: excluded,
            allow_cidrs: self.allow_cidrs.clone(),
            deny_cidrs: self.deny_cidrs.clone(),
        }
    }
}

fn parse_interface(text: &str) -> Result<InterfacePattern, String> {
    InterfacePattern::parse("--interface", text)
}

fn parse_exclude(text: &str) -> Result<InterfacePattern, String> {
    InterfacePattern::parse("--exclude-interface", text)
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn bad_values_name_their_flag() {
        let err = Cli::try_parse_from(["node-ip-helper", "detect", "--allow-cidr", "10.0.0.0/33"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("--allow-cidr"), "{err}");
        assert!(
            err.contains("the prefix length 33 is longer than 32, the most for IPv4 (128 for IPv6)"),
            "{err}"
        );
        let err = Cli::try_parse_from(["node-ip-helper", "detect", "--deny-cidr", "fd00::/129"])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--deny-cidr") && err.contains("the prefix length 129 is longer than 128, the most for IPv6"),
            "{err}"
        );
        let err = Cli::try_parse_from(["node-ip-helper", "detect", "--interface", "eth[0"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("--interface"), "{err}");
        let err = Cli::try_parse_from(["node-ip-helper", "detect", "--openstack-region", "a b"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("--openstack-region") && err.contains("holds ' '"), "{err}");
    }
}
