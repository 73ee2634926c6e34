//! vSphere volumes' topology from vCenter: in-tree `vsphereVolume` volumes (their
//! `volumePath`, `[datastore] path/disk.vmdk`) and `csi.vsphere.vmware.com` handles
//! (a migrated `[datastore] path`, or a First Class Disk ID, whose datastore is found
//! with `RetrieveVStorageObject`). Only the calls (`cloud_access::vsphere`): caching,
//! single-flight and the deadline are [`CachedLookup`](crate::lookup::CachedLookup)'s
//! and the resolver's, as for the other clouds.
//!
//! A disk can be attached from the hosts that mount its datastore, so its topology is
//! theirs: each host's zone and region are the tags, in the categories named by the
//! settings (`k8s-zone` and `k8s-region` by default, as vSphere's cloud provider used),
//! on the host or its nearest ancestor carrying one (cluster, folder, datacenter).
//! One zone across the hosts gives that zone; several give all of them (the `__` label
//! and one `In` term); the region must be one. Where this departs from the legacy
//! provider (`GetVolumeLabels`, k8s.io/legacy-cloud-providers vsphere v0.25.16):
//! - legacy counted a zone only when every host of that zone mounts the datastore, and
//!   then wrote the first of the zones per region (map order); here a zone counts when
//!   a host of it mounts the datastore, and all of them are written;
//! - legacy ignored a host with a zone but no region; here the zone counts and the
//!   region is left out when no host has one;
//! - several regions were a random pick; here they are an error naming them;
//! - a datastore none of whose hosts has a zone or region tag got no labels (the PV was
//!   admitted as it was); here it is a lookup error saying so, so that
//!   `--on-lookup-error` decides (`allow` admits it unchanged, with a warning).
//!
//! Hosts without tags beside tagged ones are left out, as legacy left them out.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use cloud_access::SecureEndpoint;
use cloud_access::vsphere::{ConfigError, DiskRef, HostLabels, Placement, Vsphere, VsphereConfig, VsphereError};

use crate::builtin::VSPHERE_DRIVER;
use crate::lookup::{Cloud, CloudLookup, LookupError};
use crate::source::{InTree, VolumeIdentity, VolumeKind};
use crate::topology::Topology;

/// The lookup's name: audit annotations, messages and metrics.
pub const NAME: &str = "vsphere";

/// The vSphere lookup in [`crate::lookup::CLOUDS`].
pub const CLOUD: Cloud = Cloud {
    name: NAME,
    flag: "--vsphere-lookup",
    hint: "--vsphere-lookup (or --rules)",
    csi_driver: VSPHERE_DRIVER,
    in_tree: Some(InTree::VsphereVolume),
    answers_for: |volume| handle(volume).is_some(),
    enabled: |flags| flags.vsphere.vsphere_lookup,
    build: crate::setup::vsphere_lookup,
};
/// The zone tag category vSphere's cloud provider documented.
pub const DEFAULT_ZONE_CATEGORY: &str = "k8s-zone";
/// The region tag category vSphere's cloud provider documented.
pub const DEFAULT_REGION_CATEGORY: &str = "k8s-region";

/// What the lookup is built from (the program's flags).
#[derive(Debug, Clone)]
pub struct VsphereSettings {
    /// The vSphere CSI driver's `csi-vsphere.conf` (a mounted Secret).
    pub config_file: PathBuf,
    /// Replaces the config's vCenter address (one vCenter only): tests, a proxy.
    pub server: Option<SecureEndpoint>,
    pub zone_category: String,
    pub region_category: String,
    /// Honour the config's `insecure-flag` (no certificate check); refused otherwise.
    pub allow_insecure: bool,
}

impl VsphereSettings {
    /// Settings for `config_file` with the default categories, nothing else allowed.
    pub fn new(config_file: impl Into<PathBuf>) -> Self {
        Self {
            config_file: config_file.into(),
            server: None,
            zone_category: DEFAULT_ZONE_CATEGORY.to_owned(),
            region_category: DEFAULT_REGION_CATEGORY.to_owned(),
            allow_insecure: false,
        }
    }
}

/// Why the lookup cannot be built from its settings.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VsphereSetupError {
    #[error("{0}")]
    Config(#[from] ConfigError),
    #[error("{0}")]
    Client(#[from] VsphereError),
    #[error("the vSphere lookup's tag categories: {0}")]
    Categories(String),
}

/// The lookup: the datastore's hosts and their zone and region tags.
#[derive(Debug)]
pub struct VsphereLookup {
    vsphere: Vsphere,
    zone_category: String,
    region_category: String,
}

impl VsphereLookup {
    /// A lookup of the vCenters `settings.config_file` names (read now; its password is
    /// used at the first lookup). `client_timeout` caps each vCenter call: vSphere's
    /// calls take no deadline, so this and the resolver's deadline bound a lookup.
    pub fn new(settings: VsphereSettings, client_timeout: Duration) -> Result<Self, VsphereSetupError> {
        let config = VsphereConfig::read(&settings.config_file)?;
        Self::with_config(&config, settings, client_timeout)
    }

    /// [`VsphereLookup::new`] from a config already read.
    pub fn with_config(
        config: &VsphereConfig,
        settings: VsphereSettings,
        client_timeout: Duration,
    ) -> Result<Self, VsphereSetupError> {
        let (zone, region) = (settings.zone_category.trim(), settings.region_category.trim());
        if zone.is_empty() || region.is_empty() || zone == region {
            return Err(VsphereSetupError::Categories(format!(
                "zone {zone:?} and region {region:?} must be two different, non-empty names"
            )));
        }
        let vsphere = Vsphere::new(
            config,
            settings.server.as_ref(),
            settings.allow_insecure,
            client_timeout,
        )?;
        Ok(Self {
            vsphere,
            zone_category: zone.to_owned(),
            region_category: region.to_owned(),
        })
    }
}

impl CloudLookup for VsphereLookup {
    const CLOUD: &'static Cloud = &CLOUD;

    /// The calls take no deadline (`cloud_access::vsphere` bounds each by the client's
    /// timeout); the resolver ends the lookup at `_deadline`.
    async fn find(&self, volume: &VolumeIdentity, _deadline: Instant) -> Result<Topology, LookupError> {
        let handle = handle(volume).ok_or(LookupError::NotFound)?;
        let disk = disk_ref(handle)?;
        let placement = self
            .vsphere
            .placement(&disk, &self.zone_category, &self.region_category)
            .await
            .map_err(|error| failed(&disk, error))?;
        topology_of(&placement, &self.zone_category, &self.region_category)
    }

    fn cache_key(&self, volume: &VolumeIdentity) -> String {
        cache_key(volume)
    }

    /// The vCenters, as the resolver's timeout names them.
    fn endpoint(&self) -> Option<String> {
        Some(self.vsphere.endpoints().join(", "))
    }
}

/// The handle of an in-tree `vsphereVolume` or a `csi.vsphere.vmware.com` volume.
pub fn handle(volume: &VolumeIdentity) -> Option<&str> {
    match &volume.kind {
        VolumeKind::InTree(InTree::VsphereVolume) => Some(&volume.handle),
        VolumeKind::Csi { driver } if driver == VSPHERE_DRIVER => Some(&volume.handle),
        _ => None,
    }
}

/// What a handle names, or the error saying it names nothing we can look up.
fn disk_ref(handle: &str) -> Result<DiskRef, LookupError> {
    DiskRef::parse(handle).ok_or_else(|| {
        LookupError::Failed(format!(
            "vSphere volume {handle:?} is neither a datastore path `[datastore] path/disk.vmdk` nor a First Class Disk ID"
        ))
    })
}

fn shown(disk: &DiskRef) -> String {
    match disk {
        DiskRef::Path { datastore, path } => format!("vSphere volume \"[{datastore}] {path}\""),
        DiskRef::Fcd(id) => format!("vSphere First Class Disk {id:?}"),
    }
}

/// A failed call as the lookup's error: the volume, then vSphere's error (which names
/// the vCenter and carries vSphere's text); a timeout as one.
fn failed(disk: &DiskRef, error: VsphereError) -> LookupError {
    LookupError::from(error).map_failed(|error| format!("{}: {error}", shown(disk)))
}

/// The key a volume's answer is cached under: its datastore (every disk on one
/// datastore has its topology), or the First Class Disk.
pub fn cache_key(volume: &VolumeIdentity) -> String {
    match handle(volume).and_then(DiskRef::parse) {
        Some(DiskRef::Path { datastore, .. }) => format!("datastore {datastore}"),
        Some(DiskRef::Fcd(id)) => format!("fcd {id}"),
        None => volume.to_string(),
    }
}

/// The topology of the hosts that mount a datastore: the zones of those that have one
/// (all of them), the one region.
pub fn topology_of(placement: &Placement, zone_category: &str, region_category: &str) -> Result<Topology, LookupError> {
    let about = format!("datastore {:?} (vCenter {})", placement.datastore, placement.endpoint);
    if placement.hosts.is_empty() {
        return Err(LookupError::Failed(format!(
            "{about}: no host mounts it (mounted and accessible), so no zone can reach it"
        )));
    }
    let zones: BTreeSet<&str> = placement.hosts.iter().filter_map(|h| h.zone.as_deref()).collect();
    let regions: BTreeSet<&str> = placement.hosts.iter().filter_map(|h| h.region.as_deref()).collect();
    if zones.is_empty() && regions.is_empty() {
        return Err(LookupError::Failed(format!(
            "{about}: none of its hosts ({}) nor their ancestors carry a tag of category {zone_category:?} or \
             {region_category:?}: its topology is unknown (vSphere's legacy provider left such volumes unlabeled)",
            host_names(&placement.hosts)
        )));
    }
    if regions.len() > 1 {
        let by_region = |region: &str| {
            let hosts: Vec<&str> = placement
                .hosts
                .iter()
                .filter(|h| h.region.as_deref() == Some(region))
                .map(|h| h.host.as_str())
                .collect();
            format!("{region} ({})", hosts.join(", "))
        };
        let shown: Vec<String> = regions.iter().map(|r| by_region(r)).collect();
        return Err(LookupError::Invalid(format!(
            "{about}: its hosts are in several regions: {}; a volume has one region",
            shown.join(", ")
        )));
    }
    let region = regions.into_iter().next().map(str::to_owned);
    Topology::new(zones, region).map_err(|e| LookupError::Invalid(format!("{about}: {e}")))
}

fn host_names(hosts: &[HostLabels]) -> String {
    const SHOWN: usize = 5;
    let mut names: Vec<&str> = hosts.iter().take(SHOWN).map(|h| h.host.as_str()).collect();
    let more = hosts.len().saturating_sub(SHOWN);
    let more = format!("{more} more");
    if hosts.len() > SHOWN {
        names.push(&more);
    }
    names.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(name: &str, zone: Option<&str>, region: Option<&str>) -> HostLabels {
        HostLabels {
            host: name.to_owned(),
            zone: zone.map(str::to_owned),
            region: region.map(str::to_owned),
        }
    }

    fn placement(hosts: Vec<HostLabels>) -> Placement {
        Placement {
            endpoint: "https://vc.example.com/".into(),
            datastore: "ds1".into(),
            hosts,
        }
    }

    fn topology(hosts: Vec<HostLabels>) -> Result<Topology, LookupError> {
        topology_of(&placement(hosts), "k8s-zone", "k8s-region")
    }

    #[test]
    fn which_volumes_are_vsphere_volumes() {
        let path = "[ds1] kubevols/pv.vmdk";
        assert_eq!(
            handle(&VolumeIdentity::in_tree(InTree::VsphereVolume, path)),
            Some(path)
        );
        assert_eq!(handle(&VolumeIdentity::csi(VSPHERE_DRIVER, path)), Some(path));
        assert_eq!(handle(&VolumeIdentity::csi("csi.other", path)), None);
        assert_eq!(handle(&VolumeIdentity::in_tree(InTree::Cinder, path)), None);
        let err = disk_ref("file:abc").expect_err("not a disk");
        assert!(err.to_string().contains("\"file:abc\""), "{err}");
    }

    #[test]
    fn disks_of_one_datastore_share_an_answer() {
        let a = VolumeIdentity::in_tree(InTree::VsphereVolume, "[ds1] a.vmdk");
        let b = VolumeIdentity::csi(VSPHERE_DRIVER, "[ds1] kubevols/b.vmdk");
        assert_eq!(cache_key(&a), "datastore ds1");
        assert_eq!(cache_key(&a), cache_key(&b));
        let fcd = VolumeIdentity::csi(VSPHERE_DRIVER, "14ac54dc-ce36-465b-b5da-ec3d9e531424");
        assert_eq!(cache_key(&fcd), "fcd 14ac54dc-ce36-465b-b5da-ec3d9e531424");
    }

    #[test]
    fn one_zone_several_zones_region_only() {
        let t = topology(vec![
            host("h1", Some("zone-a"), Some("region-1")),
            host("h2", Some("zone-a"), Some("region-1")),
        ])
        .expect("zonal");
        assert_eq!((t.zones(), t.region()), (&["zone-a".to_owned()][..], Some("region-1")));
        let t = topology(vec![
            host("h1", Some("zone-b"), Some("region-1")),
            host("h2", Some("zone-a"), Some("region-1")),
            // An untagged host beside tagged ones is left out, as legacy left it.
            host("h3", None, None),
        ])
        .expect("multi-zone");
        assert_eq!(t.zone_label_value().as_deref(), Some("zone-a__zone-b"));
        assert_eq!(t.region(), Some("region-1"));
        let t = topology(vec![host("h1", None, Some("region-1"))]).expect("region only");
        assert_eq!((t.zone_label_value(), t.region()), (None, Some("region-1")));
        let t = topology(vec![host("h1", Some("zone-a"), None)]).expect("zone only");
        assert_eq!((t.zone_label_value().as_deref(), t.region()), (Some("zone-a"), None));
    }

    #[test]
    fn untagged_unmounted_and_several_regions_are_errors() {
        let err = topology(vec![host("h1", None, None), host("h2", None, None)]).expect_err("untagged");
        let text = err.to_string();
        assert!(matches!(err, LookupError::Failed(_)));
        assert!(
            text.contains("datastore \"ds1\" (vCenter https://vc.example.com/)"),
            "{text}"
        );
        assert!(text.contains("(h1, h2)") && text.contains("\"k8s-zone\""), "{text}");
        let err = topology(Vec::new()).expect_err("no host");
        assert!(err.to_string().contains("no host mounts it"), "{err}");
        let err = topology(vec![
            host("h1", Some("zone-a"), Some("region-1")),
            host("h2", Some("zone-b"), Some("region-2")),
            host("h3", Some("zone-b"), Some("region-2")),
        ])
        .expect_err("two regions");
        assert!(matches!(err, LookupError::Invalid(_)));
        assert!(
            err.to_string()
                .contains("several regions: region-1 (h1), region-2 (h2, h3)"),
            "{err}"
        );
        let err = topology(vec![host("h1", Some("zone a"), None)]).expect_err("not a label");
        assert!(matches!(err, LookupError::Invalid(_)), "{err}");
    }

    #[test]
    fn many_hosts_are_shown_briefly() {
        let hosts: Vec<_> = (0..8).map(|i| host(&format!("h{i}"), None, None)).collect();
        assert_eq!(host_names(&hosts), "h0, h1, h2, h3, h4, 3 more");
    }

    #[test]
    fn categories_must_differ() {
        let config = VsphereConfig::parse("[VirtualCenter \"vc\"]\nuser = u\npassword = p\n", "f").expect("config");
        let mut settings = VsphereSettings::new("unused");
        settings.region_category = settings.zone_category.clone();
        let err = VsphereLookup::with_config(&config, settings, Duration::from_secs(1)).expect_err("same");
        assert!(err.to_string().contains("two different"), "{err}");
    }
}
