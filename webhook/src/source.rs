//! Recognizes the volume source of a PersistentVolume: a CSI driver or one of the in-tree
//! block-storage plugins that used to be labeled by the in-tree `PersistentVolumeLabel`
//! admission plugin. Everything else (NFS, local, hostPath, …) is not ours.

use std::fmt;

use k8s_openapi::api::core::v1::PersistentVolumeSpec;

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
/// identifier: `volumeID`, `pdName`, `diskURI`, `volumeID`, `volumePath`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VolumeIdentity {
    pub kind: VolumeKind,
    pub handle: String,
}

impl VolumeIdentity {
    /// A CSI volume.
    pub fn csi(driver: impl Into<String>, handle: impl Into<String>) -> Self {
        Self {
            kind: VolumeKind::Csi { driver: driver.into() },
            handle: handle.into(),
        }
    }

    /// An in-tree volume.
    pub fn in_tree(source: InTree, handle: impl Into<String>) -> Self {
        Self {
            kind: VolumeKind::InTree(source),
            handle: handle.into(),
        }
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
}
