//! `node-ip-helper`: chooses a node's IP address(es) before kubelet starts
//! with `--cloud-provider=external`, and explains why a node would stay
//! tainted. The choice is a pure function of the host's state ([`select`]);
//! reading that state ([`host`]) and writing the result ([`envfile`]) are
//! kept apart from it.

use std::path::Path;
use std::process::ExitCode;

pub mod ccm;
pub mod cli;
pub mod cloud;
pub mod envfile;
pub mod family;
pub mod filters;
pub mod host;
pub mod live;
pub mod output;
pub mod select;

use cli::{CheckCommand, CheckOutput, Cli, Command, DetectArgs, FilterArgs, NodeNameFrom, Source};
use cloud_access::metadata::{Instance, MetadataError, Provider};
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
    #[error("{flag} {source}")]
    File {
        flag: &'static str,
        source: cloud_access::files::FileError,
    },
    #[error("cannot read the hostname from /proc/sys/kernel/hostname: {0}")]
    Hostname(std::io::Error),
    #[error(transparent)]
    Metadata(#[from] MetadataError),
    #[error(transparent)]
    ConfigDrive(#[from] cloud_access::metadata::openstack::ConfigDriveError),
    #[error("{0}")]
    Usage(String),
    #[error(
        "--node-name-from private-dns: EC2 DescribeInstances of {instance}: {reason} (the node's role needs ec2:DescribeInstances)"
    )]
    PrivateDns { instance: String, reason: String },
    #[error("cannot load the kubeconfig{}: {reason}", .path.as_ref().map(|p| format!(" {p}")).unwrap_or_default())]
    Kubeconfig { path: Option<String>, reason: String },
    #[error("cannot load --kubeconfig {0}")]
    KubeconfigFile(cloud_access::files::FileError),
    #[error("cannot read Node {name}: {reason}")]
    ReadNode { name: String, reason: String },
    #[error("--node-name-from {wanted}: the {from} source has no {what}; use --source {hint}")]
    NodeName {
        wanted: &'static str,
        from: String,
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
    #[error("cannot read --cloud-addresses {0}")]
    CloudAddressesFile(cloud_access::files::FileError),
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
            let file_error = |flag| move |source| Error::File { flag, source };
            // Refuse a bad --sticky before the env file is written.
            envfile::check_writable(&command.env_file).map_err(file_error("--env-file"))?;
            if let Some(path) = &command.sticky {
                envfile::check_writable(path).map_err(file_error("--sticky"))?;
            }
            let host = host::read_host().await?;
            let observed = observe(&command.detect).await?;
            let filters = filters(&command.detect.filters);
            let sticky = command.sticky.as_deref().and_then(envfile::read_sticky);
            let kept = sticky.and_then(|s| keep_sticky(&host, &filters, &command.detect, &observed, &s.node_ips));
            let detection = match kept {
                Some(detection) => detection,
                None => decide(&host, &filters, &command.detect, &observed)?,
            };
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

/// What the chosen source says, gathered before the (pure) choice.
#[derive(Debug, Clone)]
pub struct Observed {
    /// `local`, or the provider whose metadata answered.
    pub source: String,
    /// The cloud's view of the instance, for a metadata source.
    pub instance: Option<Instance>,
    /// The kernel's hostname, when the node name comes from it.
    pub kernel_hostname: Option<String>,
}

/// The choice on this host.
pub async fn detect(args: &DetectArgs) -> Result<Detection, Error> {
    let host = host::read_host().await?;
    tracing::debug!(?host, "host network state");
    let observed = observe(args).await?;
    decide(&host, &filters(&args.filters), args, &observed)
}

/// Asks the source named by the flags.
pub async fn observe(args: &DetectArgs) -> Result<Observed, Error> {
    let metadata = &args.metadata;
    let endpoint = metadata.metadata_endpoint.as_ref();
    let timeout = metadata.metadata_timeout;
    let (source, instance) = match args.source {
        Source::Local => ("local".to_owned(), None),
        Source::Openstack if metadata.config_drive.is_some() => {
            let root = metadata.config_drive.as_deref().unwrap_or(Path::new("/"));
            (
                "openstack".to_owned(),
                Some(cloud_access::metadata::openstack::from_config_drive(root)?),
            )
        }
        Source::Auto => match cloud::detect_provider(endpoint, args.ip_family, timeout).await {
            Some((provider, instance)) => (provider.name().to_owned(), Some(instance)),
            None => {
                tracing::info!("no metadata service answered; choosing from the host's interfaces and routes");
                ("local".to_owned(), None)
            }
        },
        cloud_source => {
            let provider = provider_of(cloud_source);
            let instance = cloud::fetch(provider, endpoint, args.ip_family, timeout).await?;
            (provider.name().to_owned(), Some(instance))
        }
    };
    let instance = match (instance, args.node_name_from) {
        (Some(instance), Some(NodeNameFrom::PrivateDns)) if source == "aws" => {
            Some(with_ec2_private_dns(instance, metadata.metadata_timeout).await?)
        }
        (instance, _) => instance,
    };
    tracing::debug!(source, ?instance, "source answered");
    let kernel_hostname = match args.node_name_from {
        Some(NodeNameFrom::Hostname) => {
            let name = std::fs::read_to_string("/proc/sys/kernel/hostname").map_err(Error::Hostname)?;
            Some(name.trim().to_owned())
        }
        _ => None,
    };
    Ok(Observed {
        source,
        instance,
        kernel_hostname,
    })
}

/// EC2's own `PrivateDnsName` for the instance: with a custom DHCP domain
/// the host's name (and IMDS's `local-hostname`) differ from it, and the AWS
/// cloud controller manager names nodes after it.
async fn with_ec2_private_dns(mut instance: Instance, timeout: std::time::Duration) -> Result<Instance, Error> {
    use cloud_access::aws::{AwsClient, CredentialsChain, EndpointOptions, ec2};
    let id = instance.instance_id.clone().unwrap_or_default();
    let fail = |reason: String| Error::PrivateDns {
        instance: id.clone(),
        reason,
    };
    let region = instance
        .region
        .clone()
        .or_else(|| std::env::var("AWS_REGION").ok())
        .ok_or_else(|| fail("the metadata service gave no region; set AWS_REGION".into()))?;
    let user_agent = concat!("node-ip-helper/", env!("CARGO_PKG_VERSION"));
    let http = cloud_access::http_client(user_agent, timeout).map_err(|e| fail(e.to_string()))?;
    let endpoints = EndpointOptions::from_env();
    let credentials = CredentialsChain::new(http.clone(), region.clone(), endpoints.clone())
        .credentials()
        .await
        .map_err(|e| fail(e.to_string()))?;
    let client = AwsClient::new(http, region, endpoints);
    let deadline = std::time::Instant::now() + timeout * 3;
    let name = ec2::private_dns_name(&client, &id, &credentials, deadline)
        .await
        .map_err(|e| fail(e.to_string()))?
        .ok_or_else(|| fail("the instance has no PrivateDnsName".into()))?;
    instance.private_dns = Some(name);
    Ok(instance)
}

fn provider_of(source: Source) -> Provider {
    match source {
        Source::Aws => Provider::Aws,
        Source::Gce => Provider::Gce,
        Source::Azure => Provider::Azure,
        Source::Openstack => Provider::OpenStack,
        Source::Digitalocean => Provider::DigitalOcean,
        Source::Hetzner => Provider::Hetzner,
        // Local and Auto never reach here; AWS is as good a default as any.
        Source::Local | Source::Auto => Provider::Aws,
    }
}

/// The choice, as a pure function of what was observed and the flags.
pub fn decide(host: &Host, filters: &Filters, args: &DetectArgs, observed: &Observed) -> Result<Detection, Error> {
    let chosen = match &observed.instance {
        None => select::choose(host, filters, args.ip_family)?,
        Some(instance) => cloud::choose_from_instance(
            &observed.source,
            instance,
            args.ip_family,
            filters,
            host,
            args.metadata.skip_local_check,
        )?,
    };
    Ok(Detection {
        node_ips: chosen.iter().map(|c| c.ip).collect(),
        hostname: node_name(args, observed)?,
        source: observed.source.clone(),
        addresses: chosen,
        cloud_addresses: observed.instance.as_ref().map(|i| i.addresses.clone()),
    })
}

/// The `--hostname-override` value: trimmed and lowercased as kubelet does,
/// and refused unless it is a valid node name, whichever source it came from.
fn node_name(args: &DetectArgs, observed: &Observed) -> Result<Option<String>, Error> {
    let missing = |wanted, what, hint| Error::NodeName {
        wanted,
        from: observed.source.clone(),
        what,
        hint,
    };
    let (flag, what, name) = match args.node_name_from {
        None => return Ok(None),
        Some(NodeNameFrom::Hostname) => (
            "hostname",
            "the kernel's hostname".to_owned(),
            observed.kernel_hostname.clone().unwrap_or_default(),
        ),
        Some(NodeNameFrom::InstanceId) => (
            "instance-id",
            format!("the {} instance ID", observed.source),
            observed
                .instance
                .as_ref()
                .and_then(|i| i.instance_id.clone())
                .ok_or_else(|| {
                    missing(
                        "instance-id",
                        "instance ID",
                        "aws, gce, azure, openstack, digitalocean or hetzner",
                    )
                })?,
        ),
        Some(NodeNameFrom::PrivateDns) => (
            "private-dns",
            "EC2's PrivateDnsName".to_owned(),
            observed
                .instance
                .as_ref()
                .and_then(|i| i.private_dns.clone())
                .ok_or_else(|| missing("private-dns", "private DNS name", "aws"))?,
        ),
    };
    cloud_access::metadata::node_name(&name)
        .map(Some)
        .map_err(|invalid| Error::InvalidNodeName { flag, what, invalid })
}

/// The recorded choice, if it has the families the policy asks for and
/// every address of it is still usable: present on the host (and, for a
/// metadata source, still listed by the cloud).
fn keep_sticky(
    host: &Host,
    filters: &Filters,
    args: &DetectArgs,
    observed: &Observed,
    recorded: &[std::net::IpAddr],
) -> Option<Detection> {
    let families: Vec<family::Family> = recorded.iter().map(family::Family::of).collect();
    if families != args.ip_family.families() {
        return None;
    }
    let (candidates, _) = select::candidates(host, filters);
    let mut addresses = Vec::new();
    for ip in recorded {
        let interface = match &observed.instance {
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
                    None if args.metadata.skip_local_check => String::new(),
                    None => return None,
                }
            }
        };
        addresses.push(select::ChosenAddress {
            ip: *ip,
            family: family::Family::of(ip),
            interface,
            reason: "kept from the --sticky record: still present and usable".to_owned(),
        });
    }
    Some(Detection {
        node_ips: recorded.to_vec(),
        hostname: node_name(args, observed).ok()?,
        source: observed.source.clone(),
        addresses,
        cloud_addresses: observed.instance.as_ref().map(|i| i.addresses.clone()),
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

async fn check(command: &CheckCommand) -> Result<ExitCode, Error> {
    let cloud = match (&command.cloud_addresses, command.source) {
        (Some(_), Some(_)) => return Err(Error::Usage("give --cloud-addresses or --source, not both".into())),
        (Some(path), None) => Some(read_cloud_addresses(path)?),
        (None, Some(Source::Local)) => {
            return Err(Error::Usage(
                "--source local has no cloud addresses: give a cloud's name, auto, or --cloud-addresses".into(),
            ));
        }
        (None, Some(source)) => Some(cloud_addresses_from(source, command).await?),
        (None, None) => None,
    };
    match (&command.node_ip, &command.node) {
        (Some(node_ip), _) => {
            let cloud = cloud.ok_or_else(|| {
                Error::Usage("--node-ip needs the cloud's addresses: --cloud-addresses FILE or --source".into())
            })?;
            let verdict = ccm::simulate(node_ip, &cloud);
            let text = match command.output {
                // Serializing plain strings cannot fail.
                CheckOutput::Json => serde_json::to_string_pretty(&verdict).unwrap_or_default() + "\n",
                CheckOutput::Text => describe(node_ip, &verdict),
            };
            print(&text)?;
            Ok(match verdict {
                ccm::Verdict::Initializes { .. } => ExitCode::SUCCESS,
                _ => ExitCode::FAILURE,
            })
        }
        (None, Some(name)) => {
            let node = read_node(name, command.kubeconfig.as_deref()).await?;
            let facts = live::facts(&node);
            let diagnosis = live::diagnose(&facts, cloud.as_deref());
            let text = match command.output {
                CheckOutput::Json => {
                    let report = serde_json::json!({"node": facts, "diagnosis": diagnosis});
                    serde_json::to_string_pretty(&report).unwrap_or_default() + "\n"
                }
                CheckOutput::Text => describe_node(&facts, &diagnosis),
            };
            print(&text)?;
            Ok(if diagnosis.is_stuck() {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            })
        }
        // clap's argument group requires one of the two.
        (None, None) => Err(Error::Usage("give --node-ip or --node".into())),
    }
}

async fn cloud_addresses_from(source: Source, command: &CheckCommand) -> Result<Vec<ccm::NodeAddress>, Error> {
    let metadata = &command.metadata;
    let endpoint = metadata.metadata_endpoint.as_ref();
    // The family policy only picks AWS's IPv6 endpoint; IPv4 is the default.
    let policy = family::IpFamilyPolicy::Ipv4;
    let instance = match source {
        Source::Auto => cloud::detect_provider(endpoint, policy, metadata.metadata_timeout)
            .await
            .map(|(_, instance)| instance)
            .ok_or_else(|| Error::Usage("--source auto: no metadata service answered on this machine".into()))?,
        Source::Openstack if metadata.config_drive.is_some() => {
            let root = metadata.config_drive.as_deref().unwrap_or(Path::new("/"));
            cloud_access::metadata::openstack::from_config_drive(root)?
        }
        other => cloud::fetch(provider_of(other), endpoint, policy, metadata.metadata_timeout).await?,
    };
    Ok(instance
        .addresses
        .iter()
        .map(|a| ccm::NodeAddress::new(&a.kind.to_string(), &a.address))
        .collect())
}

/// Kubeconfigs with embedded certificates take a few kilobytes each.
const KUBECONFIG_LIMIT: u64 = 16 * 1024 * 1024;

async fn read_node(name: &str, kubeconfig: Option<&Path>) -> Result<k8s_openapi::api::core::v1::Node, Error> {
    let config_error = |reason: String| Error::Kubeconfig {
        path: kubeconfig.map(|p| p.display().to_string()),
        reason,
    };
    let config = match kubeconfig {
        Some(path) => {
            // Refuse a FIFO or device before kube reads it (again, to resolve
            // the relative paths in it).
            cloud_access::files::read_regular(path, KUBECONFIG_LIMIT).map_err(Error::KubeconfigFile)?;
            let file = kube::config::Kubeconfig::read_from(path).map_err(|e| config_error(e.to_string()))?;
            kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| config_error(e.to_string()))?
        }
        None => kube::Config::infer().await.map_err(|e| config_error(e.to_string()))?,
    };
    let client = kube::Client::try_from(config).map_err(|e| config_error(e.to_string()))?;
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client);
    nodes.get(name).await.map_err(|e| Error::ReadNode {
        name: name.to_owned(),
        reason: match e {
            kube::Error::Api(status) if status.code == 403 => format!(
                "forbidden ({}): a node's own identity (system:node:NAME) may read only its own Node",
                status.message
            ),
            kube::Error::Api(status) if status.code == 404 => "no such Node: has kubelet registered it?".to_owned(),
            other => other.to_string(),
        },
    })
}

fn describe_node(facts: &live::NodeFacts, diagnosis: &live::Diagnosis) -> String {
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
        live::Diagnosis::Initialized { addresses, warning } => {
            text.push_str("OK: the node is initialized; its addresses:\n");
            for address in addresses {
                text.push_str(&format!("  {:<12} {}\n", address.kind, address.address));
            }
            if let Some(warning) = warning {
                text.push_str(&format!("WARNING: {warning}\n"));
            }
        }
        live::Diagnosis::Stuck { reason, fix } => {
            text.push_str(&format!("STUCK: {reason}\nFIX: {fix}\n"));
        }
    }
    text
}

/// A node's addresses take a few hundred bytes; a bigger file is the wrong one.
const CLOUD_ADDRESSES_LIMIT: u64 = 1024 * 1024;

fn read_cloud_addresses(path: &Path) -> Result<Vec<ccm::NodeAddress>, Error> {
    let error = |reason: String| Error::CloudAddresses {
        path: path.display().to_string(),
        reason,
    };
    let bytes = cloud_access::files::read_regular(path, CLOUD_ADDRESSES_LIMIT).map_err(Error::CloudAddressesFile)?;
    serde_json::from_slice(&bytes).map_err(|e| {
        error(format!(
            "{e}: expected a JSON array of {{\"type\": ..., \"address\": ...}}"
        ))
    })
}

fn describe(node_ip: &str, verdict: &ccm::Verdict) -> String {
    match verdict {
        ccm::Verdict::Initializes {
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

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    fn args(from: &str) -> DetectArgs {
        match Cli::try_parse_from(["node-ip-helper", "detect", "--node-name-from", from]).map(|c| c.command) {
            Ok(Command::Detect(command)) => command.detect,
            other => panic!("{other:?}"),
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
            private_dns: Some(hostile.into()),
            ..Instance::default()
        };
        let observed = |source: &str| Observed {
            source: source.into(),
            instance: Some(instance.clone()),
            kernel_hostname: Some(hostile.into()),
        };
        for (from, source, what) in [
            ("hostname", "local", "the kernel's hostname"),
            ("instance-id", "aws", "the aws instance ID"),
            ("instance-id", "hetzner", "the hetzner instance ID"),
            ("private-dns", "aws", "EC2's PrivateDnsName"),
        ] {
            let error = node_name(&args(from), &observed(source)).unwrap_err().to_string();
            assert!(
                error.starts_with(&format!(
                    "--node-name-from {from}: {what} {hostile:?} is not a valid Kubernetes node name"
                )),
                "{error}"
            );
        }
        let valid = Observed {
            source: "aws".into(),
            instance: Some(Instance {
                private_dns: Some("IP-10-0-1-25.ec2.internal".into()),
                ..Instance::default()
            }),
            kernel_hostname: None,
        };
        assert_eq!(
            node_name(&args("private-dns"), &valid).unwrap().as_deref(),
            Some("ip-10-0-1-25.ec2.internal")
        );
    }
}
