//! The pure half of the GCE lookup: which disk a volume names and where to look for it
//! ([`disk_ref`], [`Hint`], [`GceScope`]), the cache key, what a search's answers say
//! ([`conclude`]) and the topology of a disk ([`topology_of`]). No I/O: tested without a
//! server.

use std::fmt;

use cloud_access::api::CallFailure;
use cloud_access::gcp::{Disk, GcpError};
use thiserror::Error;

use crate::builtin::{GCE_PD_DRIVER, gce_region_of_zone, is_gce_region};
use crate::lookup::LookupError;
use crate::source::{InTree, VolumeIdentity, VolumeKind};
use crate::topology::{MULTI_ZONE_DELIMITER, Topology};

/// The placeholder the PD CSI driver and csi-translation-lib put in a handle for a
/// project or location they do not know.
pub const UNSPECIFIED: &str = "UNSPECIFIED";

/// The disk a volume names, when its zones must be asked of Compute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskRef<'a> {
    /// `projects/P/regions/R/disks/D`: a regional disk whose replica zones the handle
    /// does not name (`regionDisks.get`).
    Regional {
        project: Option<&'a str>,
        region: &'a str,
        name: &'a str,
    },
    /// An in-tree `pdName`, or a CSI handle whose zone or region is `UNSPECIFIED`: looked
    /// for in the hinted zone, then in the configured region and zones.
    Unplaced { project: Option<&'a str>, name: &'a str },
}

/// The disk `volume` names, if its topology needs Compute: in-tree `gcePersistentDisk`,
/// and `pd.csi.storage.gke.io` handles with an `UNSPECIFIED` location or a region. A
/// handle naming its zone needs no call (built in); `zones/multi-zone` (one name in
/// several zones, read-only) is not ours.
pub fn disk_ref(volume: &VolumeIdentity) -> Option<DiskRef<'_>> {
    match &volume.kind {
        VolumeKind::InTree(InTree::GcePersistentDisk) => Some(DiskRef::Unplaced {
            project: None,
            name: &volume.handle,
        }),
        VolumeKind::Csi { driver } if driver == GCE_PD_DRIVER => {
            let parts: Vec<&str> = volume.handle.split('/').collect();
            let ["projects", project, scope, location, "disks", name] = parts.as_slice() else {
                return None;
            };
            if project.is_empty() || name.is_empty() {
                return None;
            }
            let project = (*project != UNSPECIFIED).then_some(*project);
            match (*scope, *location) {
                ("zones" | "regions", UNSPECIFIED) => Some(DiskRef::Unplaced { project, name }),
                ("regions", region) if is_gce_region(region) => Some(DiskRef::Regional { project, region, name }),
                _ => None,
            }
        }
        _ => None,
    }
}

/// What a PV's zone label says, when it is GCE zone names: one zone (look there first),
/// or a regional disk's zones (look in their region first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hint {
    Zone(String),
    Zones { region: String },
}

impl Hint {
    /// The hint in `volume`'s zone label; `None` when there is none or it is not GCE
    /// zones of one region (such a label is replaced by what is found anyway).
    pub fn of(volume: &VolumeIdentity) -> Option<Self> {
        let label = volume.zone_hint.as_deref()?;
        let zones: Vec<&str> = label.split(MULTI_ZONE_DELIMITER).collect();
        let mut regions = zones.iter().map(|z| gce_region_of_zone(z));
        let region = regions.next()??;
        if !regions.all(|r| r == Some(region)) {
            return None;
        }
        Some(match zones.as_slice() {
            [zone] => Hint::Zone((*zone).to_owned()),
            _ => Hint::Zones {
                region: region.to_owned(),
            },
        })
    }

    /// Where the hint says to look first.
    pub fn place(&self) -> Place {
        match self {
            Hint::Zone(zone) => Place::Zone(zone.clone()),
            Hint::Zones { region } => Place::Region(region.clone()),
        }
    }
}

/// The key a volume's answer is cached and shared under: the disk (both forms of one
/// disk share it), and, for a disk looked for by name, the hint, which can decide
/// between disks of one name in two zones.
pub fn cache_key(volume: &VolumeIdentity) -> String {
    match disk_ref(volume) {
        Some(DiskRef::Regional { project, region, name }) => {
            format!("{}/regions/{region}/disks/{name}", project.unwrap_or_default())
        }
        Some(DiskRef::Unplaced { project, name }) => {
            let hint = match Hint::of(volume) {
                Some(Hint::Zone(zone)) => format!("#{zone}"),
                Some(Hint::Zones { region }) => format!("#{region}"),
                None => String::new(),
            };
            format!("{}/disks/{name}{hint}", project.unwrap_or_default())
        }
        None => volume.to_string(),
    }
}

/// A place a disk is asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// `regionDisks.get` in this region.
    Region(String),
    /// `disks.get` in this zone.
    Zone(String),
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Place::Region(region) => write!(f, "region {region}"),
            Place::Zone(zone) => write!(f, "zone {zone}"),
        }
    }
}

/// Where the lookup looks for a disk whose zone is unknown, as configured; what is not
/// configured is learned when first needed (the project and region from the metadata
/// server, the region's zones from Compute `regions.get`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GceScope {
    pub project: Option<String>,
    pub region: Option<String>,
    /// Empty: every zone of the region.
    pub zones: Vec<String>,
}

/// A configured project, region or zone that cannot be one. Names no flag: the program
/// says which of its settings [`ScopeError::setting`] is.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ScopeError {
    #[error("\"{0}\" is not a project ID")]
    Project(String),
    #[error("\"{0}\" is not a GCE region: use a name such as us-central1")]
    Region(String),
    #[error("\"{0}\" is not a GCE zone: use names such as us-central1-a")]
    Zone(String),
    #[error("zone {zone} is not in region {region}")]
    OutsideRegion { zone: String, region: String },
}

/// Which setting a [`ScopeError`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScopeSetting {
    Project,
    Region,
    Zones,
}

impl ScopeError {
    pub fn setting(&self) -> ScopeSetting {
        match self {
            ScopeError::Project(_) => ScopeSetting::Project,
            ScopeError::Region(_) => ScopeSetting::Region,
            ScopeError::Zone(_) | ScopeError::OutsideRegion { .. } => ScopeSetting::Zones,
        }
    }
}

impl GceScope {
    /// A scope from settings (empty values are unset): the zones must be GCE zones of one
    /// region, `region`'s when given, whose region is then the zones'.
    pub fn new(project: Option<&str>, region: Option<&str>, zones: &[String]) -> Result<Self, ScopeError> {
        let shown = |value: &str| cloud_access::logging::clean_text(value, &[], 64);
        let project = project.map(str::trim).filter(|p| !p.is_empty());
        if let Some(project) = project
            && !is_project_id(project)
        {
            return Err(ScopeError::Project(shown(project)));
        }
        let mut region = region.map(str::trim).filter(|r| !r.is_empty()).map(str::to_owned);
        if let Some(given) = &region
            && !is_gce_region(given)
        {
            return Err(ScopeError::Region(shown(given)));
        }
        let mut kept: Vec<String> = Vec::new();
        for zone in zones.iter().map(|z| z.trim()).filter(|z| !z.is_empty()) {
            let of = gce_region_of_zone(zone).ok_or_else(|| ScopeError::Zone(shown(zone)))?;
            match &region {
                Some(region) if region != of => {
                    return Err(ScopeError::OutsideRegion {
                        zone: zone.to_owned(),
                        region: region.clone(),
                    });
                }
                Some(_) => {}
                None => region = Some(of.to_owned()),
            }
            if !kept.iter().any(|k| k == zone) {
                kept.push(zone.to_owned());
            }
        }
        Ok(Self {
            project: project.map(str::to_owned),
            region,
            zones: kept,
        })
    }
}

/// A project ID (`my-project-123`) or a legacy domain-scoped one (`example.com:proj`).
fn is_project_id(value: &str) -> bool {
    (1..=100).contains(&value.len())
        && value.starts_with(|c: char| c.is_ascii_lowercase())
        && value
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '.' | ':'))
}

/// What the answers of one search say: the disk, when exactly one place has it. A
/// refusal other than "not found" is the error (the disk could be there too); none is
/// "not found"; several is an error, never a guess. Answers are in the order asked, so
/// the message is the same whatever order they came in.
pub fn conclude(project: &str, name: &str, answers: Vec<(Place, Result<Disk, GcpError>)>) -> Result<Disk, Search> {
    let mut found: Vec<(Place, Disk)> = Vec::new();
    let mut looked = Vec::new();
    for (place, answer) in answers {
        match answer {
            Ok(disk) => found.push((place, disk)),
            Err(error) if error.is_not_found() => looked.push(place),
            Err(error) => return Err(Search::Refused(error)),
        }
    }
    match found.len() {
        0 => Err(Search::NotFound {
            project: project.to_owned(),
            name: name.to_owned(),
            looked,
        }),
        1 => Ok(found.remove(0).1),
        _ => Err(Search::Several {
            project: project.to_owned(),
            name: name.to_owned(),
            places: found.into_iter().map(|(place, _)| place).collect(),
        }),
    }
}

/// Why a search found no one disk.
#[derive(Debug)]
pub enum Search {
    /// Compute refused or failed a call.
    Refused(GcpError),
    NotFound {
        project: String,
        name: String,
        looked: Vec<Place>,
    },
    Several {
        project: String,
        name: String,
        places: Vec<Place>,
    },
}

impl fmt::Display for Search {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |places: &[Place]| places.iter().map(Place::to_string).collect::<Vec<_>>().join(", ");
        match self {
            Search::Refused(error) => error.fmt(f),
            Search::NotFound { project, name, looked } => write!(
                f,
                "GCE disk {name:?} not found in project {project} (looked in {})",
                list(looked)
            ),
            Search::Several { project, name, places } => write!(
                f,
                "GCE disk {name:?} of project {project} is in several places ({}): not guessing; \
                 label the PV with its zone (topology.kubernetes.io/zone) or name it in a CSI handle \
                 (projects/{project}/zones/ZONE/disks/{name})",
                list(places)
            ),
        }
    }
}

/// The topology of a disk Compute answered with: a zonal disk's zone and that zone's
/// region; a regional disk's replica zones (all of its region) and its region.
pub fn topology_of(disk: &Disk) -> Result<Topology, LookupError> {
    let invalid = |problem: String| LookupError::Invalid(format!("GCE disk {:?}: {problem}", disk.name));
    let (zones, region) = if disk.is_regional() {
        let region = match disk.region.as_deref() {
            Some(region) if is_gce_region(region) => region,
            Some(other) => {
                return Err(invalid(format!(
                    "regional disk with region \"{other}\", not a GCE region"
                )));
            }
            None => return Err(invalid("regional disk without a region".to_owned())),
        };
        if let Some(zone) = disk
            .replica_zones
            .iter()
            .find(|z| gce_region_of_zone(z) != Some(region))
        {
            return Err(invalid(format!("replica zone {zone:?} is not in its region {region}")));
        }
        (disk.replica_zones.clone(), region)
    } else {
        let zone = disk
            .zone
            .as_deref()
            .ok_or_else(|| invalid("neither a zone nor replica zones".to_owned()))?;
        let region = gce_region_of_zone(zone).ok_or_else(|| invalid(format!("zone {zone:?} names no region")))?;
        (vec![zone.to_owned()], region)
    };
    Topology::new(zones, Some(region.to_owned())).map_err(|e| invalid(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use cloud_access::api::{CallError, CallErrorKind};
    use cloud_access::gcp::ErrorDetail;

    fn csi(handle: &str) -> VolumeIdentity {
        VolumeIdentity::csi(GCE_PD_DRIVER, handle)
    }

    fn pd(name: &str) -> VolumeIdentity {
        VolumeIdentity::in_tree(InTree::GcePersistentDisk, name)
    }

    fn zonal(zone: &str) -> Disk {
        Disk {
            name: "d".into(),
            zone: Some(zone.into()),
            region: gce_region_of_zone(zone).map(str::to_owned),
            replica_zones: vec![],
        }
    }

    fn regional(region: &str, zones: &[&str]) -> Disk {
        Disk {
            name: "d".into(),
            zone: None,
            region: Some(region.into()),
            replica_zones: zones.iter().map(|z| (*z).to_owned()).collect(),
        }
    }

    fn not_found() -> GcpError {
        let detail = ErrorDetail::default();
        CallError::new("compute", "u", CallErrorKind::NotFound { detail }).into()
    }

    #[test]
    fn which_volumes_need_compute() {
        assert_eq!(
            disk_ref(&pd("my-disk")),
            Some(DiskRef::Unplaced {
                project: None,
                name: "my-disk"
            })
        );
        assert_eq!(
            disk_ref(&csi("projects/UNSPECIFIED/zones/UNSPECIFIED/disks/d")),
            Some(DiskRef::Unplaced {
                project: None,
                name: "d"
            })
        );
        assert_eq!(
            disk_ref(&csi("projects/p/regions/UNSPECIFIED/disks/d")),
            Some(DiskRef::Unplaced {
                project: Some("p"),
                name: "d"
            })
        );
        assert_eq!(
            disk_ref(&csi("projects/p/regions/us-east4/disks/d")),
            Some(DiskRef::Regional {
                project: Some("p"),
                region: "us-east4",
                name: "d"
            })
        );
        for builtin_or_not_ours in [
            "projects/p/zones/us-central1-a/disks/d",
            "projects/p/zones/multi-zone/disks/d",
            "projects/p/regions/Bad/disks/d",
            "projects//zones/UNSPECIFIED/disks/d",
            "projects/p/zones/UNSPECIFIED/disks/",
            "d",
        ] {
            assert_eq!(disk_ref(&csi(builtin_or_not_ours)), None, "{builtin_or_not_ours}");
        }
        assert_eq!(disk_ref(&VolumeIdentity::csi("ebs.csi.aws.com", "vol-1")), None);
    }

    #[test]
    fn hints_are_gce_zones_of_one_region() {
        let hinted = |label: &str| Hint::of(&pd("d").with_zone_hint(Some(label)));
        assert_eq!(hinted("us-central1-b"), Some(Hint::Zone("us-central1-b".into())));
        assert_eq!(
            hinted("us-central1-c__us-central1-a"),
            Some(Hint::Zones {
                region: "us-central1".into()
            })
        );
        for ignored in [
            "us-central1-a__europe-west1-b",
            "zone-1",
            "us-central1-a__",
            "us-east-1a",
        ] {
            assert_eq!(hinted(ignored), None, "{ignored}");
        }
        assert_eq!(Hint::of(&pd("d")), None);
    }

    #[test]
    fn cache_keys_are_the_disk_and_the_hint_that_picks_it() {
        // Both forms of one disk share; a hint can pick between two disks of one name.
        assert_eq!(
            cache_key(&pd("d")),
            cache_key(&csi("projects/UNSPECIFIED/zones/UNSPECIFIED/disks/d"))
        );
        let hinted = pd("d").with_zone_hint(Some("us-central1-b"));
        assert_eq!(cache_key(&hinted), "/disks/d#us-central1-b");
        assert_ne!(cache_key(&hinted), cache_key(&pd("d")));
        assert_eq!(
            cache_key(&pd("d").with_zone_hint(Some("not a zone"))),
            cache_key(&pd("d"))
        );
        // A regional handle names its disk whole: its hint changes nothing.
        let handle = "projects/p/regions/us-east4/disks/d";
        assert_eq!(
            cache_key(&csi(handle).with_zone_hint(Some("us-east4-a"))),
            "p/regions/us-east4/disks/d"
        );
    }

    #[test]
    fn scopes_are_checked_and_the_region_follows_the_zones() {
        let zones = |z: &[&str]| z.iter().map(|z| (*z).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            GceScope::new(
                Some("demo-project"),
                None,
                &zones(&["us-central1-b", "us-central1-a", "us-central1-b"])
            ),
            Ok(GceScope {
                project: Some("demo-project".into()),
                region: Some("us-central1".into()),
                zones: zones(&["us-central1-b", "us-central1-a"]),
            })
        );
        assert_eq!(GceScope::new(Some(" "), Some(""), &[]), Ok(GceScope::default()));
        let error = GceScope::new(None, Some("us-central1"), &zones(&["europe-west1-b"])).unwrap_err();
        assert_eq!(error.setting(), ScopeSetting::Zones);
        assert_eq!(error.to_string(), "zone europe-west1-b is not in region us-central1");
        let error = GceScope::new(None, None, &zones(&["us-central1-a", "europe-west1-b"])).unwrap_err();
        assert_eq!(error.setting(), ScopeSetting::Zones);
        assert_eq!(
            GceScope::new(None, Some("us-central1.evil"), &[])
                .unwrap_err()
                .setting(),
            ScopeSetting::Region
        );
        assert_eq!(
            GceScope::new(Some("p/../q"), None, &[]).unwrap_err().setting(),
            ScopeSetting::Project
        );
        assert!(GceScope::new(Some("example.com:legacy-1"), None, &[]).is_ok());
    }

    #[test]
    fn one_place_is_an_answer_two_are_an_error() {
        let zone = |z: &str| Place::Zone(z.into());
        let region = Place::Region("us-central1".into());
        let found = conclude(
            "p",
            "d",
            vec![
                (region.clone(), Err(not_found())),
                (zone("us-central1-a"), Err(not_found())),
                (zone("us-central1-b"), Ok(zonal("us-central1-b"))),
            ],
        );
        assert_eq!(found.unwrap().zone.as_deref(), Some("us-central1-b"));
        let several = conclude(
            "p",
            "d",
            vec![
                (zone("us-central1-a"), Ok(zonal("us-central1-a"))),
                (zone("us-central1-b"), Ok(zonal("us-central1-b"))),
            ],
        )
        .unwrap_err()
        .to_string();
        assert!(
            several.starts_with("GCE disk \"d\" of project p is in several places (zone us-central1-a, zone us-central1-b): not guessing"),
            "{several}"
        );
        let none = conclude("p", "d", vec![(region.clone(), Err(not_found()))]).unwrap_err();
        assert_eq!(
            none.to_string(),
            "GCE disk \"d\" not found in project p (looked in region us-central1)"
        );
        // A refusal anywhere is the answer, even where another place has the disk.
        let detail = ErrorDetail::default();
        let refused = CallError::new("compute", "u", CallErrorKind::Api { status: 403, detail }).into();
        let answer = conclude(
            "p",
            "d",
            vec![
                (zone("us-central1-a"), Ok(zonal("us-central1-a"))),
                (region, Err(refused)),
            ],
        );
        assert!(matches!(answer, Err(Search::Refused(_))), "{answer:?}");
    }

    #[test]
    fn topologies_of_zonal_and_regional_disks() {
        let t = topology_of(&zonal("europe-west4-b")).unwrap();
        assert_eq!(
            (t.zones(), t.region()),
            (&["europe-west4-b".to_owned()][..], Some("europe-west4"))
        );
        let t = topology_of(&regional("us-central1", &["us-central1-f", "us-central1-a"])).unwrap();
        assert_eq!(t.zone_label_value().as_deref(), Some("us-central1-a__us-central1-f"));
        assert_eq!(t.region(), Some("us-central1"));
        for bad in [
            regional("us-central1", &["europe-west1-b", "us-central1-a"]),
            regional("nowhere", &["us-central1-a"]),
            Disk {
                zone: None,
                ..zonal("us-central1-a")
            },
            zonal("multi-zone"),
        ] {
            assert!(matches!(topology_of(&bad), Err(LookupError::Invalid(_))), "{bad:?}");
        }
    }

    #[test]
    fn messages_quote_values_once_without_debug_formatting() {
        // A regional disk whose region Compute wrote as us..central1.
        let Err(LookupError::Invalid(message)) = topology_of(&regional("us..central1", &["us-central1-a"])) else {
            panic!("not refused");
        };
        assert!(message.contains("region \"us..central1\""), "{message}");
        assert!(!message.contains("Some("), "{message}");
        // A configured region with an ESC: escaped once, quoted once.
        let message = GceScope::new(None, Some("us\u{1b}central1"), &[])
            .unwrap_err()
            .to_string();
        assert!(
            message.starts_with(r#""us\u{1b}central1" is not a GCE region"#),
            "{message}"
        );
        assert!(!message.contains(r"\\u{1b}"), "{message}");
    }
}
