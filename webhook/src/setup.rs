//! From flags to a [`Resolver`] and a [`Reviewer`]: the rules files and each cloud lookup the flags turn
//! on, read and checked here, at start-up, so that a bad setting stops the program
//! before it serves. Every lookup is put behind the one [`CachedLookup`] with the same
//! cache settings and, when serving, its own hit and miss counters.

use std::sync::Arc;

use cloud_access::aws::AwsConfig;
use cloud_access::aws::endpoints::valid_region;

use crate::Error;
use crate::cli::{DecisionArgs, TopologyArgs};
use crate::lookup::{CLOUDS, CachedLookup, Cloud, TopologyLookup, azure, cinder, ebs, gce, vsphere};
use crate::metrics::Metrics;
use crate::resolve::Resolver;
use crate::review::Reviewer;
use crate::rules::{LookupScope, Rules};

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

/// The vSphere lookup the `--vsphere-*` flags describe: the CSI driver's config read
/// here (its password used at the first lookup).
pub(crate) fn vsphere_lookup(topology: &TopologyArgs) -> Result<Arc<dyn TopologyLookup>, Error> {
    use cloud_access::vsphere::VsphereError;
    let args = &topology.vsphere;
    let settings = vsphere::VsphereSettings {
        config_file: args.vsphere_config.clone(),
        server: endpoint_flag("--vsphere-endpoint", args.vsphere_endpoint.as_deref())
            .map_err(Error::VsphereEndpoint)?,
        zone_category: args.vsphere_zone_category.clone(),
        region_category: args.vsphere_region_category.clone(),
        allow_insecure: args.vsphere_allow_insecure_tls,
    };
    let lookup = vsphere::VsphereLookup::new(settings, topology.lookup_timeout).map_err(|error| match error {
        vsphere::VsphereSetupError::Client(source @ VsphereError::InsecureRefused { .. }) => {
            Error::VsphereInsecure(source)
        }
        vsphere::VsphereSetupError::Config(source) => Error::VsphereConfig(source),
        error => Error::Vsphere(error),
    })?;
    Ok(Arc::new(lookup))
}

/// The Cinder lookup the `--openstack-*` flags describe: cloud.conf, or a cloud of a
/// clouds.yaml when `--os-cloud` names one.
pub(crate) fn cinder_lookup(topology: &TopologyArgs) -> Result<Arc<dyn TopologyLookup>, Error> {
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
        OpenStackConfigError::InsecureRefused { .. } => Error::OpenStackInsecure { flag, source },
        source => Error::OpenStackConfig { flag, source },
    })?;
    Ok(Arc::new(cinder::CinderLookup::new(&config, topology.lookup_timeout)?))
}

/// The EBS lookup: the region from `--aws-region`, else the AWS chain's variables.
pub(crate) fn ebs_lookup(topology: &TopologyArgs) -> Result<Arc<dyn TopologyLookup>, Error> {
    let aws = AwsConfig::from_env();
    let region = match topology.aws.aws_region.as_deref().filter(|r| !r.is_empty()) {
        Some(flag) if valid_region(flag) => flag.to_owned(),
        Some(flag) => return Err(Error::BadRegion(cloud_access::logging::clean_text(flag, &[], 64))),
        None => aws.region()?.ok_or(Error::NoRegion)?.to_owned(),
    };
    let lookup = ebs::EbsLookup::new(region, topology.lookup_timeout, aws)?.with_region_hint("set --aws-region");
    Ok(Arc::new(lookup))
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
pub(crate) fn azure_lookup(topology: &TopologyArgs) -> Result<Arc<dyn TopologyLookup>, Error> {
    let args = &topology.azure;
    let config = cloud_access::azure::AzureConfig::read(&args.azure_config)
        .map_err(Error::AzureConfig)?
        .with_workload_identity_env(|name| std::env::var(name).ok());
    let endpoint = |flag, given: &Option<String>| endpoint_flag(flag, given.as_deref()).map_err(Error::AzureEndpoint);
    let endpoints = azure::AzureEndpoints {
        resource_manager: endpoint("--azure-arm-endpoint", &args.azure_arm_endpoint)?,
        authority_host: endpoint("--azure-authority-endpoint", &args.azure_authority_endpoint)?,
        imds: endpoint("--azure-imds-endpoint", &args.azure_imds_endpoint)?,
    };
    let lookup =
        azure::AzureDiskLookup::new(&config, &endpoints, topology.lookup_timeout)?.with_hints(azure::AzureHints {
            identity: "the identity of --azure-config",
        });
    Ok(Arc::new(lookup))
}

/// The GCE lookup the `--gce-*` flags describe: the metadata server from
/// `GCE_METADATA_HOST` (else Google's name).
pub(crate) fn gce_lookup(topology: &TopologyArgs) -> Result<Arc<dyn TopologyLookup>, Error> {
    let args = &topology.gce;
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
    let lookup = gce::GceLookup::new(metadata, &endpoint, scope, topology.lookup_timeout)?.with_hints(gce::GceHints {
        project: "set --gce-project",
        location: "set --gce-region or --gce-zones",
    });
    Ok(Arc::new(lookup))
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
