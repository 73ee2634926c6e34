//! What we know with no configuration: the topology keys of well-known CSI drivers, and
//! the zone carried inside GCE PD and EBS volume handles.

use crate::source::{InTree, VolumeIdentity, VolumeKind};
use crate::topology::Topology;

/// The GCE Persistent Disk CSI driver.
pub const GCE_PD_DRIVER: &str = "pd.csi.storage.gke.io";
/// The AWS EBS CSI driver.
pub const EBS_DRIVER: &str = "ebs.csi.aws.com";
/// The Azure Disk CSI driver.
pub const AZURE_DISK_DRIVER: &str = "disk.csi.azure.com";
/// The OpenStack Cinder CSI driver.
pub const CINDER_DRIVER: &str = "cinder.csi.openstack.org";
/// The vSphere CSI driver.
pub const VSPHERE_DRIVER: &str = "csi.vsphere.vmware.com";

/// The node label a CSI driver reports its zone under, which is what a PV's nodeAffinity
/// must name so the scheduler matches the nodes that run the driver.
pub fn csi_zone_key(driver: &str) -> Option<&'static str> {
    match driver {
        GCE_PD_DRIVER => Some("topology.gke.io/zone"),
        EBS_DRIVER => Some("topology.ebs.csi.aws.com/zone"),
        AZURE_DISK_DRIVER => Some("topology.disk.csi.azure.com/zone"),
        CINDER_DRIVER => Some("topology.cinder.csi.openstack.org/zone"),
        // csi-translation-lib's vSphere plugin (plugins/vsphere_volume.go,
        // vSphereCSITopologyZoneKey) translates in-tree zones to this key.
        VSPHERE_DRIVER => Some("topology.csi.vmware.com/zone"),
        _ => None,
    }
}

/// What a handle tells us on its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Builtin {
    /// Zone and region are both known.
    Complete(Topology),
    /// Only the region is known: a regional GCE PD, whose replica zones the handle does
    /// not name. A rule or a lookup may still know more; otherwise only the region is used.
    RegionOnly(Topology),
}

/// The topology a volume's handle carries, if any.
///
/// ```
/// use pv_topology_webhook::builtin::{Builtin, resolve};
/// use pv_topology_webhook::source::{InTree, VolumeIdentity};
///
/// // A zonal GCE PD: zone and region, as the PV's labels.
/// let zonal = VolumeIdentity::csi("pd.csi.storage.gke.io", "projects/p/zones/europe-west1-b/disks/d");
/// let Some(Builtin::Complete(topology)) = resolve(&zonal) else { panic!("zonal") };
/// assert_eq!(
///     topology.labels(),
///     [
///         ("topology.kubernetes.io/region", "europe-west1".to_owned()),
///         ("topology.kubernetes.io/zone", "europe-west1-b".to_owned()),
///     ]
/// );
/// // A regional one: the handle names no zone, only the region is known.
/// let regional = VolumeIdentity::csi("pd.csi.storage.gke.io", "projects/p/regions/us-central1/disks/d");
/// let Some(Builtin::RegionOnly(topology)) = resolve(&regional) else { panic!("regional") };
/// assert_eq!((topology.zones(), topology.region()), (&[][..], Some("us-central1")));
/// // In-tree EBS carries its zone in the volume ID, when the ID has one.
/// let ebs = VolumeIdentity::in_tree(InTree::AwsElasticBlockStore, "aws://us-east-1a/vol-0123");
/// assert!(matches!(resolve(&ebs), Some(Builtin::Complete(t)) if t.zones() == ["us-east-1a"]));
/// assert_eq!(resolve(&VolumeIdentity::in_tree(InTree::AwsElasticBlockStore, "vol-0123")), None);
/// // Other drivers need a rule or a lookup.
/// assert_eq!(resolve(&VolumeIdentity::csi("ebs.csi.aws.com", "vol-0123")), None);
/// ```
pub fn resolve(volume: &VolumeIdentity) -> Option<Builtin> {
    match &volume.kind {
        VolumeKind::Csi { driver } if driver == GCE_PD_DRIVER => match parse_gce_pd_handle(&volume.handle)? {
            GcePdLocation::Zonal { zone, region } => Topology::new([zone], Some(region)).ok().map(Builtin::Complete),
            GcePdLocation::Regional { region } => Topology::new(Vec::<String>::new(), Some(region))
                .ok()
                .map(Builtin::RegionOnly),
        },
        VolumeKind::InTree(InTree::AwsElasticBlockStore) => {
            let zone = parse_aws_volume_id_zone(&volume.handle)?;
            let region = aws_region_of_zone(zone)?;
            Topology::new([zone], Some(region.to_owned()))
                .ok()
                .map(Builtin::Complete)
        }
        _ => None,
    }
}

/// Where a GCE PD lives, per its CSI handle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GcePdLocation {
    Zonal { zone: String, region: String },
    Regional { region: String },
}

/// Parses `projects/P/zones/Z/disks/D` or `projects/P/regions/R/disks/D`. Placeholders such
/// as `UNSPECIFIED` for the project are fine; a location that is not a real zone or region
/// (e.g. `multi-zone`) gives `None`.
pub fn parse_gce_pd_handle(handle: &str) -> Option<GcePdLocation> {
    let parts: Vec<&str> = handle.split('/').collect();
    let ["projects", project, scope, location, "disks", disk] = parts.as_slice() else {
        return None;
    };
    if project.is_empty() || disk.is_empty() {
        return None;
    }
    match *scope {
        "zones" => {
            let region = gce_region_of_zone(location)?;
            Some(GcePdLocation::Zonal {
                zone: (*location).to_owned(),
                region: region.to_owned(),
            })
        }
        "regions" if is_gce_region(location) => Some(GcePdLocation::Regional {
            region: (*location).to_owned(),
        }),
        _ => None,
    }
}

/// The region of a GCE zone: the zone without its last `-suffix` (`us-central1-a` →
/// `us-central1`). GCE regions end in a digit, which rules out `multi-zone`.
pub fn gce_region_of_zone(zone: &str) -> Option<&str> {
    let (region, suffix) = zone.rsplit_once('-')?;
    let suffix_ok = !suffix.is_empty() && suffix.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    (suffix_ok && is_gce_region(region)).then_some(region)
}

/// Whether `region` has the shape of a GCE region name (`us-central1`, `europe-west4`).
pub fn is_gce_region(region: &str) -> bool {
    let mut parts = region.split('-');
    let first_ok = parts
        .next()
        .is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_lowercase()));
    let rest: Vec<&str> = parts.collect();
    first_ok
        && !rest.is_empty()
        && rest
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()))
        && region.ends_with(|c: char| c.is_ascii_digit())
}

/// The zone in an in-tree EBS volume ID `aws://ZONE/vol-…`; `aws:///vol-…` and a bare
/// `vol-…` carry no zone.
pub fn parse_aws_volume_id_zone(volume_id: &str) -> Option<&str> {
    let rest = volume_id.strip_prefix("aws://")?;
    let (zone, volume) = rest.split_once('/')?;
    (!zone.is_empty() && volume.starts_with("vol-")).then_some(zone)
}

/// The region of an AWS availability zone: its leading `letters-…-digits` (`us-east-1a` →
/// `us-east-1`), which also holds for Local Zones (`us-west-2-lax-1a` → `us-west-2`) and
/// Wavelength Zones (`us-east-1-wl1-bos-wlz-1` → `us-east-1`). `None` when the name has
/// no such prefix or is only a region.
pub fn aws_region_of_zone(zone: &str) -> Option<&str> {
    let mut end = 0;
    let mut words = 0;
    for part in zone.split('-') {
        if !part.is_empty() && part.bytes().all(|b| b.is_ascii_lowercase()) {
            words += 1;
            end += part.len() + 1;
            continue;
        }
        let digits = part.bytes().take_while(u8::is_ascii_digit).count();
        if words == 0 || digits == 0 {
            return None;
        }
        let region_len = end + digits;
        // A zone is longer than its region: `us-east-1` alone is not a zone.
        return (zone.len() > region_len).then(|| &zone[..region_len]);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gce_zones_and_regions() {
        assert_eq!(gce_region_of_zone("us-central1-a"), Some("us-central1"));
        assert_eq!(
            gce_region_of_zone("northamerica-northeast1-b"),
            Some("northamerica-northeast1")
        );
        assert_eq!(gce_region_of_zone("us-central1-ai1a"), Some("us-central1"));
        assert_eq!(gce_region_of_zone("multi-zone"), None);
        assert_eq!(gce_region_of_zone("us-central1"), None);
        assert_eq!(gce_region_of_zone("us-central1-"), None);
        assert_eq!(gce_region_of_zone("US-central1-a"), None);
    }

    #[test]
    fn gce_handles() {
        assert_eq!(
            parse_gce_pd_handle("projects/p/zones/europe-west1-b/disks/d"),
            Some(GcePdLocation::Zonal {
                zone: "europe-west1-b".into(),
                region: "europe-west1".into()
            })
        );
        assert_eq!(
            parse_gce_pd_handle("projects/UNSPECIFIED/regions/us-east4/disks/d"),
            Some(GcePdLocation::Regional {
                region: "us-east4".into()
            })
        );
        for bad in [
            "projects/p/zones/multi-zone/disks/d",
            "projects/p/zones/us-central1-a/disks/",
            "projects//zones/us-central1-a/disks/d",
            "projects/p/zones/us-central1-a/disks/d/extra",
            "projects/p/global/us-central1-a/disks/d",
            "d",
            "",
        ] {
            assert_eq!(parse_gce_pd_handle(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn aws_zones_and_regions() {
        for (zone, region) in [
            ("us-east-1a", Some("us-east-1")),
            ("eu-central-1c", Some("eu-central-1")),
            ("us-gov-west-1a", Some("us-gov-west-1")),
            ("cn-north-1b", Some("cn-north-1")),
            ("us-west-2-lax-1a", Some("us-west-2")),
            ("us-east-1-wl1-bos-wlz-1", Some("us-east-1")),
            ("us-east-1", None),
            ("use1-az1", None),
            ("1a", None),
            ("", None),
        ] {
            assert_eq!(aws_region_of_zone(zone), region, "{zone:?}");
        }
    }

    #[test]
    fn aws_volume_ids() {
        assert_eq!(
            parse_aws_volume_id_zone("aws://us-east-1a/vol-0123"),
            Some("us-east-1a")
        );
        assert_eq!(parse_aws_volume_id_zone("aws:///vol-0123"), None);
        assert_eq!(parse_aws_volume_id_zone("vol-0123"), None);
        assert_eq!(parse_aws_volume_id_zone("aws://us-east-1a/snap-1"), None);
    }

    #[test]
    fn resolve_by_kind() {
        let t = |z: &[&str], r: &str| Topology::new(z.iter().copied(), Some(r.to_owned())).unwrap();
        assert_eq!(
            resolve(&VolumeIdentity::csi(
                GCE_PD_DRIVER,
                "projects/p/zones/us-central1-a/disks/d"
            )),
            Some(Builtin::Complete(t(&["us-central1-a"], "us-central1")))
        );
        assert_eq!(
            resolve(&VolumeIdentity::csi(
                GCE_PD_DRIVER,
                "projects/p/regions/us-central1/disks/d"
            )),
            Some(Builtin::RegionOnly(t(&[], "us-central1")))
        );
        assert_eq!(
            resolve(&VolumeIdentity::in_tree(
                InTree::AwsElasticBlockStore,
                "aws://us-west-2-lax-1a/vol-1"
            )),
            Some(Builtin::Complete(t(&["us-west-2-lax-1a"], "us-west-2")))
        );
        // The zone-in-the-handle form is in-tree only; the EBS CSI handle is a bare ID.
        assert_eq!(resolve(&VolumeIdentity::csi(EBS_DRIVER, "vol-1")), None);
        assert_eq!(resolve(&VolumeIdentity::in_tree(InTree::GcePersistentDisk, "pd")), None);
    }
}
