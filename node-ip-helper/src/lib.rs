//! `node-ip-helper`: chooses a node's IP address(es) before kubelet starts
//! with `--cloud-provider=external`, and explains why a node would stay
//! tainted. The choice is a pure function of the host's state ([`select`]);
//! reading that state ([`host`]) and writing the result ([`envfile`]) are
//! kept apart from it.

use std::path::Path;
use std::process::ExitCode;

pub mod ccm;
pub mod cli;
pub mod envfile;
pub mod family;
pub mod filters;
pub mod host;
pub mod output;
pub mod select;

use cli::{CheckCommand, CheckOutput, Cli, Command, DetectArgs, FilterArgs, NodeNameFrom};
use filters::Filters;
use host::Host;
use output::{Detection, OutputFormat};
use select::NoAddress;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Host(#[from] host::HostError),
    #[error(transparent)]
    NoAddress(#[from] NoAddress),
    #[error(transparent)]
    File(#[from] envfile::FileError),
    #[error("cannot read the hostname from /proc/sys/kernel/hostname: {0}")]
    Hostname(std::io::Error),
    #[error("cannot read --cloud-addresses {path}: {reason}")]
    CloudAddresses { path: String, reason: String },
    #[error("cannot write to stdout: {0}")]
    Stdout(std::io::Error),
    #[error(transparent)]
    Logging(#[from] cloud_access::logging::LogLevelError),
}

pub async fn run(cli: Cli) -> Result<ExitCode, Error> {
    cloud_access::logging::init(&cli.log.log_level, cli.log.log_format)?;
    match cli.command {
        Command::Detect(command) => {
            let detection = detect(&command.detect).await?;
            print(&detection.render(command.output))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Write(command) => {
            let host = host::read_host().await?;
            let filters = filters(&command.detect.filters);
            let sticky = command.sticky.as_deref().and_then(envfile::read_sticky);
            let kept = sticky.and_then(|s| keep_sticky(&host, &filters, &command.detect, &s.node_ips));
            let detection = match kept {
                Some(detection) => detection,
                None => decide(&host, &filters, &command.detect, hostname_source(&command.detect)?)?,
            };
            let outcome = envfile::write_if_changed(&command.env_file, detection.render(OutputFormat::Env).as_bytes())?;
            if let Some(path) = &command.sticky {
                let choice = envfile::StickyChoice {
                    node_ips: detection.node_ips.clone(),
                };
                envfile::write_sticky(path, &choice)?;
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
        Command::Check(command) => check(&command),
    }
}

/// The choice on this host.
pub async fn detect(args: &DetectArgs) -> Result<Detection, Error> {
    let host = host::read_host().await?;
    tracing::debug!(?host, "host network state");
    decide(&host, &filters(&args.filters), args, hostname_source(args)?)
}

/// The choice, as a pure function of the host's state and the flags.
pub fn decide(host: &Host, filters: &Filters, args: &DetectArgs, hostname: Option<String>) -> Result<Detection, Error> {
    let chosen = select::choose(host, filters, args.ip_family)?;
    Ok(Detection {
        node_ips: chosen.iter().map(|c| c.ip).collect(),
        hostname,
        source: "local",
        addresses: chosen,
    })
}

/// The recorded choice, if every address of it is still usable here and
/// it has the families the policy asks for.
fn keep_sticky(host: &Host, filters: &Filters, args: &DetectArgs, recorded: &[std::net::IpAddr]) -> Option<Detection> {
    let (candidates, _) = select::candidates(host, filters);
    let families: Vec<family::Family> = recorded.iter().map(family::Family::of).collect();
    if families != args.ip_family.families() {
        return None;
    }
    let mut addresses = Vec::new();
    for ip in recorded {
        let address = candidates.iter().find(|a| a.ip == *ip)?;
        let interface = host.interface(address.interface_index)?.name.clone();
        addresses.push(select::ChosenAddress {
            ip: *ip,
            family: family::Family::of(ip),
            interface,
            reason: "kept from the --sticky record: still present and usable on this host".to_owned(),
        });
    }
    let hostname = hostname_source(args).ok()?;
    Some(Detection {
        node_ips: recorded.to_vec(),
        hostname,
        source: "local",
        addresses,
    })
}

fn filters(args: &FilterArgs) -> Filters {
    let mut excluded = if args.no_default_excludes {
        Vec::new()
    } else {
        filters::default_exclusions()
    };
    excluded.extend(args.exclude_interfaces.iter().cloned());
    Filters {
        interfaces: args.interfaces.clone(),
        excluded_interfaces: excluded,
        allow_cidrs: args.allow_cidrs.clone(),
        deny_cidrs: args.deny_cidrs.clone(),
    }
}

fn hostname_source(args: &DetectArgs) -> Result<Option<String>, Error> {
    match args.node_name_from {
        None => Ok(None),
        Some(NodeNameFrom::Hostname) => {
            let name = std::fs::read_to_string("/proc/sys/kernel/hostname").map_err(Error::Hostname)?;
            Ok(Some(name.trim().to_lowercase()))
        }
    }
}

fn check(command: &CheckCommand) -> Result<ExitCode, Error> {
    let cloud = read_cloud_addresses(&command.cloud_addresses)?;
    let verdict = ccm::simulate(&command.node_ip, &cloud);
    let text = match command.output {
        // Serializing plain strings cannot fail.
        CheckOutput::Json => serde_json::to_string_pretty(&verdict).unwrap_or_default() + "\n",
        CheckOutput::Text => describe(&command.node_ip, &verdict),
    };
    print(&text)?;
    Ok(match verdict {
        ccm::Verdict::Initializes { .. } => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    })
}

fn read_cloud_addresses(path: &Path) -> Result<Vec<ccm::NodeAddress>, Error> {
    let error = |reason: String| Error::CloudAddresses {
        path: path.display().to_string(),
        reason,
    };
    let bytes = std::fs::read(path).map_err(|e| error(e.to_string()))?;
    serde_json::from_slice(&bytes).map_err(|e| {
        error(format!(
            "{e}: expected a JSON array of {{\"type\": ..., \"address\": ...}}"
        ))
    })
}

fn describe(node_ip: &str, verdict: &ccm::Verdict) -> String {
    match verdict {
        ccm::Verdict::Initializes { annotation, addresses } => {
            let mut text = match annotation {
                Some(value) => format!(
                    "OK: kubelet annotates the node alpha.kubernetes.io/provided-node-ip={value}; the cloud controller manager accepts it, removes the uninitialized taint and sets:\n"
                ),
                None => format!(
                    "OK: --node-ip={node_ip:?} sets no provided-node-ip annotation; the cloud controller manager sets every cloud address:\n"
                ),
            };
            for address in addresses {
                text.push_str(&format!("  {:<12} {}\n", address.kind, address.address));
            }
            text
        }
        ccm::Verdict::KubeletRefuses { reason } => format!("REFUSED by kubelet, which will not start: {reason}\n"),
        ccm::Verdict::StaysTainted { annotation, reason } => format!(
            "STUCK: the node keeps the node.cloudprovider.kubernetes.io/uninitialized taint: {reason} (annotation {}); pick a --node-ip among the cloud's addresses\n",
            annotation.as_deref().unwrap_or("absent")
        ),
    }
}

fn print(text: &str) -> Result<(), Error> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(Error::Stdout)
}
