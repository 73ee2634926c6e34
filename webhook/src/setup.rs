//! From flags to a [`Resolver`] and a [`Reviewer`]: the rules files and each cloud lookup the flags turn
//! on, read and checked here, at start-up, so that a bad setting stops the program
//! before it serves. Every lookup is put behind the one [`CachedLookup`] with the same
//! cache settings and, when serving, its own hit and miss counters.

use std::sync::Arc;

use cloud_access::aws::AwsConfig;
use cloud_access::aws::endpoints::valid_region;

use crate::builtin::{AZURE_DISK_DRIVER, CINDER_DRIVER, EBS_DRIVER, GCE_PD_DRIVER, VSPHERE_DRIVER};
use crate::cli::{AzureArgs, DecisionArgs, GceArgs, OpenStackArgs, TopologyArgs, VsphereArgs};
use crate::lookup::{CachedLookup, TopologyLookup};
use crate::metrics::Metrics;
use crate::resolve::Resolver;
use crate::review::Reviewer;
use crate::rules::{LookupScope, Rules};
use crate::source::InTree;
use crate::{Error, azure, cinder, ebs, gce, vsphere};

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
    let rules = Rules::load(&topology.rules)?;
    rules.refuse_shadowing(&enabled_lookups(topology))?;
    let mut resolver = Resolver::new(rules).with_deadline(topology.lookup_timeout);
    let cached = |lookup: Box<dyn TopologyLookup>, counter: &str| -> Arc<dyn TopologyLookup> {
        let mut cached = CachedLookup::new(lookup, topology.lookup_cache_size, topology.lookup_cache_ttl);
        if let Some(metrics) = metrics {
            cached = cached.with_counters(metrics.cache_counters(counter));
        }
        Arc::new(cached)
    };
    if topology.aws.aws_ebs_lookup {
        resolver = resolver.with_lookup(cached(Box::new(ebs_lookup(topology)?), ebs::NAME));
    }
    if topology.gce.gce_lookup {
        resolver = resolver.with_lookup(cached(Box::new(gce_lookup(&topology.gce, topology)?), gce::NAME));
    }
    if topology.azure.azure_disk_lookup {
        let lookup = azure_lookup(&topology.azure, topology)?;
        resolver = resolver.with_lookup(cached(Box::new(lookup), azure::NAME));
    }
    if topology.openstack.openstack_cinder_lookup {
        let lookup = cinder_lookup(&topology.openstack, topology)?;
        resolver = resolver.with_lookup(cached(Box::new(lookup), cinder::NAME));
    }
    if topology.vsphere.vsphere_lookup {
        let lookup = vsphere_lookup(&topology.vsphere, topology)?;
        resolver = resolver.with_lookup(cached(Box::new(lookup), vsphere::NAME));
    }
    Ok(resolver)
}

/// Each cloud lookup's flag and the volumes it answers for (its `handles`: the CSI
/// driver and the in-tree type), in the order [`resolver`] adds them.
const LOOKUP_SCOPES: [LookupScope; 5] = [
    LookupScope {
        flag: "--aws-ebs-lookup",
        driver: EBS_DRIVER,
        in_tree: InTree::AwsElasticBlockStore,
    },
    LookupScope {
        flag: "--gce-lookup",
        driver: GCE_PD_DRIVER,
        in_tree: InTree::GcePersistentDisk,
    },
    LookupScope {
        flag: "--azure-disk-lookup",
        driver: AZURE_DISK_DRIVER,
        in_tree: InTree::AzureDisk,
    },
    LookupScope {
        flag: "--openstack-cinder-lookup",
        driver: CINDER_DRIVER,
        in_tree: InTree::Cinder,
    },
    LookupScope {
        flag: "--vsphere-lookup",
        driver: VSPHERE_DRIVER,
        in_tree: InTree::VsphereVolume,
    },
];

/// The scopes of the lookups the flags turn on: no rule may be written for them.
fn enabled_lookups(topology: &TopologyArgs) -> Vec<LookupScope> {
    let enabled = [
        topology.aws.aws_ebs_lookup,
        topology.gce.gce_lookup,
        topology.azure.azure_disk_lookup,
        topology.openstack.openstack_cinder_lookup,
        topology.vsphere.vsphere_lookup,
    ];
    LOOKUP_SCOPES
        .into_iter()
        .zip(enabled)
        .filter_map(|(scope, on)| on.then_some(scope))
        .collect()
}

/// The vSphere lookup the `--vsphere-*` flags describe: the CSI driver's config read
/// here (its password used at the first lookup).
fn vsphere_lookup(args: &VsphereArgs, topology: &TopologyArgs) -> Result<vsphere::VsphereLookup, Error> {
    use cloud_access::vsphere::VsphereError;
    let settings = vsphere::VsphereSettings {
        config_file: args.vsphere_config.clone(),
        server: endpoint_flag("--vsphere-endpoint", args.vsphere_endpoint.as_deref())
            .map_err(Error::VsphereEndpoint)?,
        zone_category: args.vsphere_zone_category.clone(),
        region_category: args.vsphere_region_category.clone(),
        allow_insecure: args.vsphere_allow_insecure_tls,
    };
    vsphere::VsphereLookup::new(settings, topology.lookup_timeout).map_err(|error| match error {
        vsphere::VsphereSetupError::Client(source @ VsphereError::InsecureRefused { .. }) => {
            Error::VsphereInsecure(source)
        }
        vsphere::VsphereSetupError::Config(source) => Error::VsphereConfig(source),
        error => Error::Vsphere(error),
    })
}

/// The Cinder lookup the `--openstack-*` flags describe: cloud.conf, or a cloud of a
/// clouds.yaml when `--os-cloud` names one.
fn cinder_lookup(args: &OpenStackArgs, topology: &TopologyArgs) -> Result<cinder::CinderLookup, Error> {
    use cloud_access::openstack::{OpenStackConfig, OpenStackConfigError};
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
        OpenStackConfigError::InsecureRefused { .. } => Error::OpenStackInsecure { flag, source },
        source => Error::OpenStackConfig { flag, source },
    })?;
    Ok(cinder::CinderLookup::new(&config, topology.lookup_timeout)?)
}

/// The EBS lookup: the region from `--aws-region`, else the AWS chain's variables.
fn ebs_lookup(topology: &TopologyArgs) -> Result<ebs::EbsLookup, Error> {
    let aws = AwsConfig::from_env();
    let region = match topology.aws.aws_region.as_deref().filter(|r| !r.is_empty()) {
        Some(flag) if valid_region(flag) => flag.to_owned(),
        Some(flag) => return Err(Error::BadRegion(cloud_access::logging::clean_text(flag, &[], 64))),
        None => aws.region()?.ok_or(Error::NoRegion)?.to_owned(),
    };
    Ok(ebs::EbsLookup::new(region, topology.lookup_timeout, aws)?.with_region_hint("set --aws-region"))
}

/// An optional endpoint flag: unset or blank is none.
fn endpoint_flag(
    flag: &str,
    given: Option<&str>,
) -> Result<Option<cloud_access::SecureEndpoint>, cloud_access::EndpointError> {
    given
        .map(str::trim)
        .filter(|g| !g.is_empty())
        .map(|g| cloud_access::SecureEndpoint::parse(flag, g))
        .transpose()
}

/// The Azure disk lookup the `--azure-*` flags describe: the cloud config read here,
/// with the workload identity variables Azure's webhook puts in the pod
/// (`AZURE_CLIENT_ID`, `AZURE_TENANT_ID`, `AZURE_FEDERATED_TOKEN_FILE`) over it.
fn azure_lookup(args: &AzureArgs, topology: &TopologyArgs) -> Result<azure::AzureDiskLookup, Error> {
    let config = cloud_access::azure::AzureConfig::read(&args.azure_config)
        .map_err(Error::AzureConfig)?
        .with_workload_identity_env(|name| std::env::var(name).ok());
    let endpoint = |flag, given: &Option<String>| endpoint_flag(flag, given.as_deref()).map_err(Error::AzureEndpoint);
    let endpoints = azure::AzureEndpoints {
        resource_manager: endpoint("--azure-arm-endpoint", &args.azure_arm_endpoint)?,
        authority_host: endpoint("--azure-authority-endpoint", &args.azure_authority_endpoint)?,
        imds: endpoint("--azure-imds-endpoint", &args.azure_imds_endpoint)?,
    };
    Ok(
        azure::AzureDiskLookup::new(&config, &endpoints, topology.lookup_timeout)?.with_hints(azure::AzureHints {
            identity: "the identity of --azure-config",
        }),
    )
}

/// The GCE lookup the `--gce-*` flags describe: the metadata server from
/// `GCE_METADATA_HOST` (else Google's name).
fn gce_lookup(args: &GceArgs, topology: &TopologyArgs) -> Result<gce::GceLookup, Error> {
    let scope = gce::GceScope::new(args.gce_project.as_deref(), args.gce_region.as_deref(), &args.gce_zones).map_err(
        |source| Error::GceScope {
            flag: match source.setting() {
                gce::ScopeSetting::Project => "--gce-project",
                gce::ScopeSetting::Region => "--gce-region",
                gce::ScopeSetting::Zones => "--gce-zones",
            },
            source,
        },
    )?;
    let endpoint = cloud_access::gcp::endpoint(
        "--gce-compute-endpoint",
        args.gce_compute_endpoint.as_deref(),
        cloud_access::gcp::COMPUTE_ENDPOINT,
    )
    .map_err(Error::GceEndpoint)?;
    let metadata = cloud_access::gcp::GceMetadata::from_env(topology.lookup_timeout).map_err(Error::GceMetadata)?;
    Ok(
        gce::GceLookup::new(metadata, &endpoint, scope, topology.lookup_timeout)?.with_hints(gce::GceHints {
            project: "set --gce-project",
            location: "set --gce-region or --gce-zones",
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::{VolumeIdentity, VolumeKind};

    /// Whether the lookup behind `flag` answers for a volume (each cloud's own test).
    fn answers(flag: &str, volume: &VolumeIdentity) -> bool {
        match flag {
            "--aws-ebs-lookup" => ebs::volume_id(volume).is_some(),
            "--gce-lookup" => gce::disk_ref(volume).is_some(),
            "--azure-disk-lookup" => azure::disk_uri(volume).is_some(),
            "--openstack-cinder-lookup" => cinder::volume_id(volume).is_some(),
            "--vsphere-lookup" => vsphere::handle(volume).is_some(),
            other => panic!("no lookup behind {other}"),
        }
    }

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
    fn each_scope_is_what_its_lookup_answers_for() {
        for scope in LOOKUP_SCOPES {
            for other in LOOKUP_SCOPES {
                let csi = VolumeKind::Csi {
                    driver: other.driver.to_owned(),
                };
                for kind in [csi, VolumeKind::InTree(other.in_tree)] {
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
                }
            }
        }
    }
}
