//! `node-ip-helper`: chooses a node's IP address(es) before kubelet starts
//! with `--cloud-provider=external`, and explains why a node would stay
//! tainted.
//!
//! - choosing: [`choose`] (observations and [`choose::Config`] in, a
//!   [`Detection`] out), from the host ([`select`]) or a cloud's list
//!   ([`cloud`]); the CCM's and kubelet's rules in [`ccm`] and [`live`];
//! - observing, at the edge: [`host`] (netlink) and [`observe`] (metadata
//!   services, config drive, EC2, kernel hostname, the Node, files);
//! - rendering: [`output`]; writing kubelet's env file: [`envfile`];
//! - the typed `--source` and who answered: [`source`].
//!
//! This file only dispatches the commands.

use std::process::ExitCode;

pub mod ccm;
pub mod choose;
pub mod cli;
pub mod cloud;
pub mod envfile;
pub mod family;
pub mod filters;
pub mod host;
pub mod identity;
pub mod live;
pub mod observe;
pub mod output;
pub mod select;
pub mod source;

use cli::{CheckCommand, Cli, Command, DetectArgs};
use cloud_access::metadata::MetadataError;
use output::{Detection, OutputFormat};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Host(#[from] host::HostError),
    #[error(transparent)]
    Choice(#[from] choose::ChoiceError),
    #[error("{flag} {source}")]
    File {
        flag: &'static str,
        source: cloud_access::files::FileError,
    },
    #[error("cannot read the hostname from /proc/sys/kernel/hostname: {0}")]
    Hostname(std::io::Error),
    #[error(transparent)]
    Metadata(#[from] MetadataError),
    #[error(
        "--source auto: no metadata service answered, and {0}: the host's own addresses are not taken in a failing cloud's place; retry (the unit's Restart=on-failure does), or, if this host has no cloud, give --source local (for the unit: NODE_IP_HELPER_SOURCE=local in /etc/default/node-ip-helper)"
    )]
    AutoFailing(MetadataError),
    #[error(
        "--source auto: no metadata service answered {0}: run this on the node itself, or give the instance's addresses as the cloud reports them with --cloud-addresses FILE instead of --source"
    )]
    NoMetadataAnswered(String),
    #[error(transparent)]
    ConfigDrive(#[from] cloud_access::metadata::openstack::ConfigDriveError),
    #[error("{0}")]
    Usage(String),
    #[error(
        "--node-name-from private-dns: EC2 DescribeInstances of {instance}: {reason} (the node's role needs ec2:DescribeInstances)"
    )]
    PrivateDns { instance: String, reason: String },
    #[error(transparent)]
    Kubeconfig(apiserver_client::ConnectError),
    #[error(
        "check --node: no kubeconfig: no --kubeconfig (NODE_IP_HELPER_KUBECONFIG), $KUBECONFIG or ~/.kube/config, and not in a pod; on the node, give --kubeconfig /etc/kubernetes/kubelet.conf (kubelet's identity may read its own Node)"
    )]
    NoKubeconfig,
    #[error("cannot read Node {name}{}: {reason}", .unreached.as_ref().map(|s| format!(" from {s}")).unwrap_or_default())]
    ReadNode {
        name: String,
        /// The kubeconfig's server (without user information) when it was
        /// not reached; its own answers (403, 404) speak for it.
        unreached: Option<String>,
        reason: String,
    },
    #[error("cannot read --cloud-addresses {0}")]
    CloudAddressesFile(cloud_access::files::FileError),
    #[error("cannot read --cloud-addresses {path}: {reason}")]
    CloudAddresses { path: String, reason: String },
    #[error("cannot write to stdout: {0}")]
    Stdout(std::io::Error),
}

/// `check`'s verdict "no" (the node would stay tainted, or kubelet would
/// not start), apart from 1, "could not check" (every error), as in the
/// suite's other programs.
pub fn verdict_no() -> ExitCode {
    ExitCode::from(2)
}

/// Runs one command (logging and the runtime are started by the skeleton's
/// `main`).
pub async fn run(cli: Cli) -> Result<ExitCode, Error> {
    match cli.command {
        Command::Detect(command) => {
            let detection = detect(&command.detect).await?;
            if let Some(note) = detection.fallback_note() {
                eprintln!("node-ip-helper: {note}");
            }
            print(&detection.render(command.output))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Write(command) => {
            let file_error = |flag| move |source| Error::File { flag, source };
            // Refuse a bad --sticky before the env file is written.
            envfile::check_writable(&command.env_file).map_err(file_error("--env-file"))?;
            if let Some(path) = &command.sticky {
                envfile::check_writable(path).map_err(file_error("--sticky"))?;
            }
            let host = host::read_host().await?;
            let observed = observe::observe(&command.detect).await?;
            let config = command.detect.config();
            let sticky = command.sticky.as_deref().and_then(envfile::read_sticky);
            let kept = sticky.and_then(|s| choose::keep_sticky(&host, &config, &observed, &s.node_ips));
            let detection = match kept {
                Some(detection) => detection,
                None => choose::decide(&host, &config, &observed)?,
            };
            if let Some(note) = detection.fallback_note() {
                eprintln!("node-ip-helper: {note}");
            }
            let outcome = envfile::write_if_changed(&command.env_file, detection.render(OutputFormat::Env).as_bytes())
                .map_err(file_error("--env-file"))?;
            if let Some(path) = &command.sticky {
                let choice = envfile::StickyChoice {
                    node_ips: detection.node_ips.clone(),
                };
                envfile::write_sticky(path, &choice).map_err(file_error("--sticky"))?;
            }
            tracing::info!(
                env_file = %command.env_file.display(),
                node_ips = %detection.node_ip_flag_value(),
                changed = outcome == envfile::WriteOutcome::Written,
                "kubelet node IP arguments"
            );
            eprintln!(
                "node-ip-helper: {} {}: {}",
                if outcome == envfile::WriteOutcome::Written {
                    "wrote"
                } else {
                    "kept"
                },
                command.env_file.display(),
                detection.kubelet_flags()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Check(command) => check(&command).await,
    }
}

/// The choice on this host.
pub async fn detect(args: &DetectArgs) -> Result<Detection, Error> {
    let host = host::read_host().await?;
    tracing::debug!(?host, "host network state");
    let observed = observe::observe(args).await?;
    Ok(choose::decide(&host, &args.config(), &observed)?)
}

async fn check(command: &CheckCommand) -> Result<ExitCode, Error> {
    let (cloud, identity) = match (&command.cloud_addresses, command.source) {
        (Some(_), Some(_)) => return Err(Error::Usage("give --cloud-addresses or --source, not both".into())),
        (Some(path), None) => (Some(observe::read_cloud_addresses(path)?), None),
        (None, Some(source)) => {
            let view = observe::cloud_for_check(source, &command.metadata).await?;
            let identity = identity::Identity {
                matching: cloud_access::metadata::CcmMatching {
                    provider: view.provider,
                    instance: view.instance.clone(),
                },
                options: command.ccm.provider_id_options(),
                names_unverified: None,
            };
            (Some(observe::node_addresses(&view.instance)), Some(identity))
        }
        (None, None) => (None, None),
    };
    match (&command.node_ip, &command.node) {
        (Some(node_ip), _) => {
            let cloud = cloud.ok_or_else(|| {
                Error::Usage("--node-ip needs the cloud's addresses: --cloud-addresses FILE or --source".into())
            })?;
            let verdict = ccm::simulate(node_ip, &cloud);
            let found = before_registration(command, identity).await;
            print(&output::verdict(node_ip, &verdict, found.as_ref(), command.output))?;
            Ok(match (verdict, found) {
                (_, Some(output::Found { mismatch: Some(_), .. })) => verdict_no(),
                (ccm::Verdict::Initializes { .. }, _) => ExitCode::SUCCESS,
                (ccm::Verdict::KubeletRefuses { .. } | ccm::Verdict::StaysTainted { .. }, _) => verdict_no(),
            })
        }
        (None, Some(name)) => {
            let node = observe::read_node(name, command.kubeconfig.as_deref(), command.request_timeout).await?;
            let facts = live::facts(&node);
            let identity = match identity {
                Some(identity) => Some(ec2_names(identity, &facts, command.metadata.metadata_timeout).await),
                None => None,
            };
            let asked = live::Asked {
                node: name,
                kubeconfig: command.kubeconfig.as_deref(),
            };
            let diagnosis = live::diagnose(&facts, cloud.as_deref(), identity.as_ref(), &asked);
            print(&output::node(&facts, &diagnosis, command.output))?;
            Ok(if diagnosis.is_stuck() {
                verdict_no()
            } else {
                ExitCode::SUCCESS
            })
        }
        // clap's argument group requires one of the two.
        (None, None) => Err(Error::Usage("give --node-ip or --node".into())),
    }
}

/// `check --node-ip` with `--provider-id` or `--node-name`: whether the CCM
/// will find this instance for the Node kubelet registers with them.
async fn before_registration(command: &CheckCommand, identity: Option<identity::Identity>) -> Option<output::Found> {
    let identity = identity?;
    let provider_id = command.provider_id.as_deref().filter(|id| !id.is_empty());
    let name = command.node_name.as_deref().filter(|name| !name.is_empty());
    if provider_id.is_none() && name.is_none() {
        return None;
    }
    // kubelet lowercases the name it registers.
    let name = name.map(str::to_lowercase).unwrap_or_default();
    let facts = live::NodeFacts {
        name: name.clone(),
        provided_node_ip: None,
        addresses: Vec::new(),
        uninitialized: true,
        provider_id: provider_id.map(str::to_owned),
    };
    let identity = ec2_names(identity, &facts, command.metadata.metadata_timeout).await;
    Some(output::Found {
        by: match provider_id {
            Some(id) => format!("--provider-id {id}"),
            None => format!("the node name {name}"),
        },
        mismatch: identity.mismatch_before_registration(&name, provider_id),
    })
}

/// AWS's CCM finds a Node without a provider ID by EC2's `PrivateDnsName`,
/// which IMDS's `local-hostname` (what the metadata gives) differs from
/// under a custom DHCP options domain: when the Node's name is not one of
/// the metadata's names, EC2 is asked (DescribeInstances, as
/// `--node-name-from private-dns` asks it). If it cannot be, the names stay
/// IMDS's and the verdict says so.
async fn ec2_names(
    mut identity: identity::Identity,
    facts: &live::NodeFacts,
    timeout: std::time::Duration,
) -> identity::Identity {
    let matching = &identity.matching;
    if matching.provider != cloud_access::metadata::Provider::Aws
        || facts.provider_id.is_some()
        || matching.finds_by_name(&facts.name)
    {
        return identity;
    }
    match observe::with_ec2_private_dns(matching.instance.clone(), timeout).await {
        Ok(instance) => identity.matching.instance = instance,
        Err(Error::PrivateDns { reason, .. }) => {
            identity.names_unverified = Some(format!(
                "IMDS's local-hostname: EC2's PrivateDnsName, which the CCM compares, was not read (DescribeInstances: \
                 {reason}; the check needs ec2:DescribeInstances)"
            ));
        }
        Err(other) => identity.names_unverified = Some(format!("IMDS's local-hostname: {other}")),
    }
    identity
}

fn print(text: &str) -> Result<(), Error> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(Error::Stdout)
}
