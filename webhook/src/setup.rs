//! From flags to a [`Resolver`] and a [`Reviewer`]: the rules files and each cloud lookup the flags turn
//! on, read and checked here, at start-up, so that a bad setting stops the program
//! before it serves (a [`SetupError`] naming the flag). Every lookup is put behind the
//! one [`CachedLookup`] with the same cache settings and, when serving, its own hit and
//! miss counters. And the server's settings from the `serve` flags ([`serve_config`]).

use std::fmt;
use std::sync::Arc;

use cloud_access::aws::AwsConfig;
use cloud_access::aws::endpoints::valid_region;

use crate::Error;
use crate::cli::{self, DecisionArgs, ServeArgs, TopologyArgs};
use crate::lookup::{CLOUDS, CachedLookup, Cloud, TopologyLookup, azure, cinder, ebs, gce, vsphere};
use crate::metrics::Metrics;
use crate::resolve::Resolver;
use crate::review::Reviewer;
use crate::rules::{LookupScope, Rules};
use crate::server::{self, ServeConfig};
use crate::tls::{self, TlsFiles};

/// Builds the reviewer the topology and decision flags describe; a bad rules file or
/// lookup setting is refused here, at start-up.
pub fn reviewer(
    topology: &TopologyArgs,
    decision: &DecisionArgs,
    metrics: Option<&Metrics>,
) -> Result<Reviewer, Error> {
    Ok(Reviewer::new(resolver(topology, metrics)?, decision.config()))
}

/// Builds the resolver the topology flags describe (the rules, each lookup they turn on,
/// behind its cache): the one piece `serve`, `review` and `audit` resolve with.
pub fn resolver(topology: &TopologyArgs, metrics: Option<&Metrics>) -> Result<Resolver, Error> {
    resolver_of(CLOUDS, topology, metrics)
}

/// [`resolver`] with these clouds instead of [`CLOUDS`] (tests): each one's flag is
/// read, its lookup built when on and added in the table's order, and its volumes kept
/// from the rules; the resolver hints their flags.
pub fn resolver_of(
    clouds: &'static [Cloud],
    topology: &TopologyArgs,
    metrics: Option<&Metrics>,
) -> Result<Resolver, Error> {
    let enabled: Vec<&Cloud> = clouds.iter().filter(|cloud| (cloud.enabled)(topology)).collect();
    let rules = Rules::load(&topology.rules)?;
    let scopes: Vec<LookupScope> = enabled.iter().map(|cloud| cloud.scope()).collect();
    rules.refuse_shadowing(&scopes)?;
    let mut resolver = Resolver::new(rules)
        .with_deadline(topology.lookup_timeout)
        .with_clouds(clouds);
    for cloud in enabled {
        let mut cached = CachedLookup::new(
            (cloud.build)(topology)?,
            topology.lookup_cache_size,
            topology.lookup_cache_ttl,
        );
        if let Some(metrics) = metrics {
            cached = cached.with_counters(metrics.cache_counters(cloud.name));
        }
        resolver = resolver.with_lookup(Arc::new(cached));
    }
    Ok(resolver)
}

/// A setting the program cannot start with: the flag (or variable) it came from, why
/// (the source), and the one-line fix when the source does not say it. Shown as
/// `{flag}: {source}`, or the source alone when it names the flag itself (an endpoint's
/// or a region's error), then `; or {hint}`.
#[derive(Debug, thiserror::Error)]
pub struct SetupError {
    pub flag: &'static str,
    /// What the operator may do instead, e.g. `pass --vsphere-allow-insecure-tls to allow it`.
    pub hint: Option<&'static str>,
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

impl SetupError {
    /// `source`, about the value of `flag`.
    pub fn new(flag: &'static str, source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self {
            flag,
            hint: None,
            source: source.into(),
        }
    }

    /// With the fix the source does not say.
    #[must_use]
    pub fn with_hint(mut self, hint: &'static str) -> Self {
        self.hint = Some(hint);
        self
    }
}

impl fmt::Display for SetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let source = self.source.to_string();
        if source.starts_with(self.flag) {
            f.write_str(&source)?;
        } else {
            write!(f, "{}: {source}", self.flag)?;
        }
        match self.hint {
            Some(hint) => write!(f, "; or {hint}"),
            None => Ok(()),
        }
    }
}

/// Why the EBS lookup has no region to call.
#[derive(Debug, thiserror::Error)]
enum RegionError {
    #[error("--aws-ebs-lookup needs a region: set --aws-region (or AWS_REGION)")]
    Missing,
    #[error("--aws-region \"{0}\" is not an AWS region: use a name such as us-east-1")]
    Invalid(String),
}

/// The vSphere lookup the `--vsphere-*` flags describe: the CSI driver's config read
/// here (its password used at the first lookup).
pub(crate) fn vsphere_lookup(topology: &TopologyArgs) -> Result<Arc<dyn TopologyLookup>, SetupError> {
    use cloud_access::vsphere::VsphereError;
    const CONFIG: &str = "--vsphere-config";
    let args = &topology.vsphere;
    let settings = vsphere::VsphereSettings {
        config_file: args.vsphere_config.clone(),
        server: endpoint_flag("--vsphere-endpoint", args.vsphere_endpoint.as_deref())?,
        zone_category: args.vsphere_zone_category.clone(),
        region_category: args.vsphere_region_category.clone(),
        allow_insecure: args.vsphere_allow_insecure_tls,
    };
    let lookup = vsphere::VsphereLookup::new(settings, topology.lookup_timeout).map_err(|error| match error {
        vsphere::VsphereSetupError::Client(source @ VsphereError::InsecureRefused { .. }) => {
            SetupError::new(CONFIG, source).with_hint("pass --vsphere-allow-insecure-tls to allow it")
        }
        vsphere::VsphereSetupError::Config(source) => SetupError::new(CONFIG, source),
        error => SetupError::new(vsphere::CLOUD.flag, error),
    })?;
    Ok(Arc::new(lookup))
}

/// The Cinder lookup the `--openstack-*` flags describe: cloud.conf, or a cloud of a
/// clouds.yaml when `--os-cloud` names one.
pub(crate) fn cinder_lookup(topology: &TopologyArgs) -> Result<Arc<dyn TopologyLookup>, SetupError> {
    use cloud_access::openstack::{OpenStackConfig, OpenStackConfigError};
    let args = &topology.openstack;
    let allow_insecure = args.openstack_allow_insecure_tls;
    let cloud = args.os_cloud.as_deref().map(str::trim).filter(|c| !c.is_empty());
    let (flag, read) = match cloud {
        Some(cloud) => (
            "--openstack-clouds-file",
            OpenStackConfig::read_clouds_yaml(&args.openstack_clouds_file, cloud, allow_insecure),
        ),
        None => (
            "--openstack-cloud-config",
            OpenStackConfig::read_cloud_conf(&args.openstack_cloud_config, allow_insecure),
        ),
    };
    let config = read.map_err(|source| match source {
        OpenStackConfigError::InsecureRefused { .. } => {
            SetupError::new(flag, source).with_hint("pass --openstack-allow-insecure-tls to allow it")
        }
        source => SetupError::new(flag, source),
    })?;
    let lookup = cinder::CinderLookup::new(&config, topology.lookup_timeout)
        .map_err(|error| SetupError::new(cinder::CLOUD.flag, error))?;
    Ok(Arc::new(lookup))
}

/// The EBS lookup: the region from `--aws-region`, else the AWS chain's variables.
pub(crate) fn ebs_lookup(topology: &TopologyArgs) -> Result<Arc<dyn TopologyLookup>, SetupError> {
    let flag = ebs::CLOUD.flag;
    let aws = AwsConfig::from_env();
    let region = match topology.aws.aws_region.as_deref().filter(|r| !r.is_empty()) {
        Some(given) if valid_region(given) => given.to_owned(),
        Some(given) => {
            let shown = cloud_access::logging::clean_text(given, &[], 64);
            return Err(SetupError::new("--aws-region", RegionError::Invalid(shown)));
        }
        None => aws
            .region()
            .map_err(|error| SetupError::new(flag, error))?
            .ok_or_else(|| SetupError::new(flag, RegionError::Missing))?
            .to_owned(),
    };
    let lookup = ebs::EbsLookup::new(region, topology.lookup_timeout, aws)
        .map_err(|error| SetupError::new(flag, error))?
        .with_region_hint("set --aws-region");
    Ok(Arc::new(lookup))
}

/// An optional endpoint flag: unset or blank is none.
fn endpoint_flag(flag: &'static str, given: Option<&str>) -> Result<Option<cloud_access::SecureEndpoint>, SetupError> {
    given
        .map(str::trim)
        .filter(|g| !g.is_empty())
        .map(|g| cloud_access::SecureEndpoint::parse(flag, g).map_err(|error| SetupError::new(flag, error)))
        .transpose()
}

/// The Azure disk lookup the `--azure-*` flags describe: the cloud config read here,
/// with the workload identity variables Azure's webhook puts in the pod
/// (`AZURE_CLIENT_ID`, `AZURE_TENANT_ID`, `AZURE_FEDERATED_TOKEN_FILE`) over it.
pub(crate) fn azure_lookup(topology: &TopologyArgs) -> Result<Arc<dyn TopologyLookup>, SetupError> {
    let args = &topology.azure;
    let config = cloud_access::azure::AzureConfig::read(&args.azure_config)
        .map_err(|error| SetupError::new("--azure-config", error))?
        .with_workload_identity_env(|name| std::env::var(name).ok());
    let endpoints = azure::AzureEndpoints {
        resource_manager: endpoint_flag("--azure-arm-endpoint", args.azure_arm_endpoint.as_deref())?,
        authority_host: endpoint_flag("--azure-authority-endpoint", args.azure_authority_endpoint.as_deref())?,
        imds: endpoint_flag("--azure-imds-endpoint", args.azure_imds_endpoint.as_deref())?,
    };
    let lookup = azure::AzureDiskLookup::new(&config, &endpoints, topology.lookup_timeout)
        .map_err(|error| SetupError::new(azure::CLOUD.flag, error))?
        .with_hints(azure::AzureHints {
            identity: "the identity of --azure-config",
        });
    Ok(Arc::new(lookup))
}

/// The GCE lookup the `--gce-*` flags describe: the metadata server from
/// `GCE_METADATA_HOST` (else Google's name).
pub(crate) fn gce_lookup(topology: &TopologyArgs) -> Result<Arc<dyn TopologyLookup>, SetupError> {
    let flag = gce::CLOUD.flag;
    let args = &topology.gce;
    let scope = gce::GceScope::new(args.gce_project.as_deref(), args.gce_region.as_deref(), &args.gce_zones).map_err(
        |source| {
            let setting = match source.setting() {
                gce::ScopeSetting::Project => "--gce-project",
                gce::ScopeSetting::Region => "--gce-region",
                gce::ScopeSetting::Zones => "--gce-zones",
            };
            SetupError::new(setting, source)
        },
    )?;
    const COMPUTE: &str = "--gce-compute-endpoint";
    let endpoint = cloud_access::gcp::endpoint(
        COMPUTE,
        args.gce_compute_endpoint.as_deref(),
        cloud_access::gcp::COMPUTE_ENDPOINT,
    )
    .map_err(|error| SetupError::new(COMPUTE, error))?;
    // A bad `GCE_METADATA_HOST` (the message names it).
    let metadata = cloud_access::gcp::GceMetadata::from_env(topology.lookup_timeout)
        .map_err(|error| SetupError::new(flag, error))?;
    let lookup = gce::GceLookup::new(metadata, &endpoint, scope, topology.lookup_timeout)
        .map_err(|error| SetupError::new(flag, error))?
        .with_hints(gce::GceHints {
            project: "set --gce-project",
            location: "set --gce-region or --gce-zones",
        });
    Ok(Arc::new(lookup))
}

/// The server configuration the `serve` flags describe. Each file is named by its flag
/// (the names clap parses, [`cli::TLS_CERT_FILE`] and the others), which the `tls`
/// module's errors and warnings begin with.
pub fn serve_config(args: &ServeArgs) -> ServeConfig {
    ServeConfig {
        listen: args.server.listen,
        metrics_listen: args.server.metrics_listen,
        tls: TlsFiles {
            cert: tls::NamedFile::new(cli::TLS_CERT_FILE, &args.tls.tls_cert_file),
            key: tls::NamedFile::new(cli::TLS_KEY_FILE, &args.tls.tls_key_file),
        },
        client_ca: args
            .tls
            .client_ca_file
            .as_ref()
            .map(|path| tls::NamedFile::new(cli::CLIENT_CA_FILE, path)),
        reload_interval: args.tls.tls_reload_interval,
        shutdown_delay: args.server.shutdown_delay,
        drain_timeout: args.server.drain_timeout,
        limits: server::Limits {
            header_read_timeout: args.server.header_read_timeout,
            idle_timeout: args.server.idle_timeout,
            body_read_timeout: args.server.body_read_timeout,
            max_connections: args.server.max_connections.get(),
            ..server::Limits::default()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::{VolumeIdentity, VolumeKind};

    /// A handle each lookup answers for in both forms, CSI and in-tree.
    fn handle(flag: &str, kind: &VolumeKind) -> &'static str {
        match (flag, kind) {
            ("--aws-ebs-lookup", _) => "vol-0123abcd",
            ("--gce-lookup", VolumeKind::Csi { .. }) => "projects/UNSPECIFIED/zones/UNSPECIFIED/disks/d",
            ("--gce-lookup", VolumeKind::InTree(_)) => "d",
            _ => "a-volume",
        }
    }

    #[test]
    fn setup_errors_name_their_flag_once() {
        let plain = SetupError::new("--gce-lookup", "GCE_METADATA_HOST \"a b\" is not a host");
        assert_eq!(
            plain.to_string(),
            "--gce-lookup: GCE_METADATA_HOST \"a b\" is not a host"
        );
        let endpoint = cloud_access::SecureEndpoint::parse("--vsphere-endpoint", "http://vcenter.example/")
            .expect_err("plain http off loopback");
        let named = SetupError::new("--vsphere-endpoint", endpoint);
        assert!(
            named
                .to_string()
                .starts_with("--vsphere-endpoint \"http://vcenter.example/\" uses http"),
            "{named}"
        );
        assert_eq!(
            SetupError::new("--aws-ebs-lookup", RegionError::Missing).to_string(),
            "--aws-ebs-lookup needs a region: set --aws-region (or AWS_REGION)"
        );
        assert_eq!(
            SetupError::new("--aws-region", RegionError::Invalid("x.example".into())).to_string(),
            "--aws-region \"x.example\" is not an AWS region: use a name such as us-east-1"
        );
        let hinted = SetupError::new("--vsphere-config", "f: insecure-flag is set")
            .with_hint("pass --vsphere-allow-insecure-tls to allow it");
        assert_eq!(
            hinted.to_string(),
            "--vsphere-config: f: insecure-flag is set; or pass --vsphere-allow-insecure-tls to allow it"
        );
        assert_eq!(
            std::error::Error::source(&hinted).map(ToString::to_string).as_deref(),
            Some("f: insecure-flag is set")
        );
    }

    #[test]
    fn each_scope_is_what_its_lookup_answers_for() {
        let answers = |flag: &str, volume: &VolumeIdentity| match flag {
            "--aws-ebs-lookup" => ebs::volume_id(volume).is_some(),
            "--gce-lookup" => gce::disk_ref(volume).is_some(),
            "--azure-disk-lookup" => azure::disk_uri(volume).is_some(),
            "--openstack-cinder-lookup" => cinder::volume_id(volume).is_some(),
            "--vsphere-lookup" => vsphere::handle(volume).is_some(),
            other => panic!("no lookup behind {other}"),
        };
        for cloud in CLOUDS {
            let scope = cloud.scope();
            for other in CLOUDS.iter().map(Cloud::scope) {
                let csi = VolumeKind::Csi {
                    driver: other.driver.to_owned(),
                };
                let in_tree = other.in_tree.map(VolumeKind::InTree);
                for kind in std::iter::once(csi).chain(in_tree) {
                    let volume = match &kind {
                        VolumeKind::Csi { driver } => VolumeIdentity::csi(driver, handle(other.flag, &kind)),
                        VolumeKind::InTree(source) => VolumeIdentity::in_tree(*source, handle(other.flag, &kind)),
                    };
                    assert_eq!(
                        answers(scope.flag, &volume),
                        scope == other,
                        "{} and {volume}",
                        scope.flag
                    );
                    assert_eq!(
                        (cloud.answers_for)(&volume),
                        scope == other,
                        "{} and {volume}",
                        cloud.name
                    );
                }
            }
        }
    }
}
