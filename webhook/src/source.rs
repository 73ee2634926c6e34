//! Recognizes the volume source of a PersistentVolume: a CSI driver or one of the in-tree
//! block-storage plugins that used to be labeled by the in-tree `PersistentVolumeLabel`
//! admission plugin. Everything else (NFS, local, hostPath, …) is not ours.

use std::fmt;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeSpec};

use crate::topology::{BETA_ZONE_LABEL, ZONE_LABEL, check_label_value};

/// The in-tree volume sources whose topology we can know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum InTree {
    AwsElasticBlockStore,
    GcePersistentDisk,
    AzureDisk,
    Cinder,
    VsphereVolume,
}

impl InTree {
    /// All in-tree sources, in the order rules files may name them.
    pub const ALL: [InTree; 5] = [
        InTree::AwsElasticBlockStore,
        InTree::GcePersistentDisk,
        InTree::AzureDisk,
        InTree::Cinder,
        InTree::VsphereVolume,
    ];

    /// The field name of the source in `PersistentVolumeSpec`, as rules files spell it.
    pub fn name(self) -> &'static str {
        match self {
            InTree::AwsElasticBlockStore => "awsElasticBlockStore",
            InTree::GcePersistentDisk => "gcePersistentDisk",
            InTree::AzureDisk => "azureDisk",
            InTree::Cinder => "cinder",
            InTree::VsphereVolume => "vsphereVolume",
        }
    }

    /// The source named `name` (its `PersistentVolumeSpec` field name).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// Which kind of volume a PV is.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum VolumeKind {
    /// A `spec.csi` volume of this driver.
    Csi { driver: String },
    /// One of the in-tree sources.
    InTree(InTree),
}

/// A volume: its kind and its handle (CSI `volumeHandle`, or the in-tree source's volume
/// identifier: `volumeID`, `pdName`, `diskURI`, `volumeID`, `volumePath`), and the zone
/// label the PV came with, which lookups may use as a hint (as the in-tree labeler did for
/// GCE PDs, whose names are unique only per zone). Every lookup is given the same identity;
/// one whose answer depends on the hint puts it in its cache key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VolumeIdentity {
    pub kind: VolumeKind,
    pub handle: String,
    /// The PV's zone label (`topology.kubernetes.io/zone`, else the beta
    /// `failure-domain.beta.kubernetes.io/zone`), when it can be a label value: one zone,
    /// or a regional disk's zones joined with `__`. Not checked against anything: a hint.
    pub zone_hint: Option<String>,
}

impl VolumeIdentity {
    /// A CSI volume.
    pub fn csi(driver: impl Into<String>, handle: impl Into<String>) -> Self {
        Self {
            kind: VolumeKind::Csi { driver: driver.into() },
            handle: handle.into(),
            zone_hint: None,
        }
    }

    /// An in-tree volume.
    pub fn in_tree(source: InTree, handle: impl Into<String>) -> Self {
        Self {
            kind: VolumeKind::InTree(source),
            handle: handle.into(),
            zone_hint: None,
        }
    }

    /// The same volume with this zone hint (a zone label's value); a value that cannot be
    /// a label value (empty, over 63 characters) is no hint.
    #[must_use]
    pub fn with_zone_hint(mut self, hint: Option<&str>) -> Self {
        self.zone_hint = hint.filter(|h| check_label_value(h).is_ok()).map(str::to_owned);
        self
    }
}

impl fmt::Display for VolumeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VolumeKind::Csi { driver } => write!(f, "CSI {driver}"),
            VolumeKind::InTree(source) => write!(f, "in-tree {}", source.name()),
        }
    }
}

impl fmt::Display for VolumeIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} volume {:?}", self.kind, self.handle)
    }
}

/// The volume of a PV ([`identify`]), with its zone label as the hint.
pub fn identify_pv(pv: &PersistentVolume) -> Option<VolumeIdentity> {
    let identity = identify(pv.spec.as_ref()?)?;
    let labels = pv.metadata.labels.as_ref();
    let label = |key: &str| labels.and_then(|l| l.get(key)).filter(|v| !v.is_empty());
    let hint = label(ZONE_LABEL).or_else(|| label(BETA_ZONE_LABEL));
    Some(identity.with_zone_hint(hint.map(String::as_str)))
}

/// The volume source of a PV spec, or `None` for a source we do not handle.
///
/// A valid PV has exactly one source; should several be set, the first in a fixed order
/// (CSI, then the in-tree ones) wins, so that the answer is deterministic.
pub fn identify(spec: &PersistentVolumeSpec) -> Option<VolumeIdentity> {
    if let Some(csi) = &spec.csi {
        return Some(VolumeIdentity::csi(&csi.driver, &csi.volume_handle));
    }
    if let Some(s) = &spec.aws_elastic_block_store {
        return Some(VolumeIdentity::in_tree(InTree::AwsElasticBlockStore, &s.volume_id));
    }
    if let Some(s) = &spec.gce_persistent_disk {
        return Some(VolumeIdentity::in_tree(InTree::GcePersistentDisk, &s.pd_name));
    }
    if let Some(s) = &spec.azure_disk {
        return Some(VolumeIdentity::in_tree(InTree::AzureDisk, &s.disk_uri));
    }
    if let Some(s) = &spec.cinder {
        return Some(VolumeIdentity::in_tree(InTree::Cinder, &s.volume_id));
    }
    if let Some(s) = &spec.vsphere_volume {
        return Some(VolumeIdentity::in_tree(InTree::VsphereVolume, &s.volume_path));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{AWSElasticBlockStoreVolumeSource, CSIPersistentVolumeSource, NFSVolumeSource};

    #[test]
    fn names_round_trip() {
        for source in InTree::ALL {
            assert_eq!(InTree::from_name(source.name()), Some(source));
        }
        assert_eq!(InTree::from_name("nfs"), None);
    }

    #[test]
    fn identifies_csi_before_in_tree_and_ignores_nfs() {
        let mut spec = PersistentVolumeSpec {
            nfs: Some(NFSVolumeSource {
                server: "s".into(),
                path: "/p".into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(identify(&spec), None);
        spec.aws_elastic_block_store = Some(AWSElasticBlockStoreVolumeSource {
            volume_id: "vol-1".into(),
            ..Default::default()
        });
        assert_eq!(
            identify(&spec),
            Some(VolumeIdentity::in_tree(InTree::AwsElasticBlockStore, "vol-1"))
        );
        spec.csi = Some(CSIPersistentVolumeSource {
            driver: "d".into(),
            volume_handle: "h".into(),
            ..Default::default()
        });
        assert_eq!(identify(&spec), Some(VolumeIdentity::csi("d", "h")));
        assert_eq!(VolumeIdentity::csi("d", "h").to_string(), "CSI d volume \"h\"");
    }

    #[test]
    fn the_zone_label_is_the_hint_ga_first() {
        let mut pv = PersistentVolume {
            spec: Some(PersistentVolumeSpec {
                csi: Some(CSIPersistentVolumeSource {
                    driver: "d".into(),
                    volume_handle: "h".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(identify_pv(&pv), Some(VolumeIdentity::csi("d", "h")));
        let labels = pv.metadata.labels.get_or_insert_default();
        labels.insert(BETA_ZONE_LABEL.into(), "us-central1-b".into());
        let hint = |pv: &PersistentVolume| identify_pv(pv).and_then(|v| v.zone_hint);
        assert_eq!(hint(&pv).as_deref(), Some("us-central1-b"));
        let labels = pv.metadata.labels.get_or_insert_default();
        labels.insert(ZONE_LABEL.into(), "us-central1-a__us-central1-c".into());
        assert_eq!(hint(&pv).as_deref(), Some("us-central1-a__us-central1-c"));
        // A value that cannot be a label is no hint; the identity's text never shows it.
        let labels = pv.metadata.labels.get_or_insert_default();
        labels.insert(ZONE_LABEL.into(), "z".repeat(64));
        assert_eq!(hint(&pv), None);
        assert_eq!(identify_pv(&pv).unwrap().to_string(), "CSI d volume \"h\"");
        assert_eq!(identify_pv(&PersistentVolume::default()), None);
    }
}
