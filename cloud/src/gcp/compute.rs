//! Compute Engine `disks.get` and `regionDisks.get`: where a persistent
//! disk lives, for the webhook's topology labels; and `regions.get`, for
//! the zones of a region to look for a disk in.
//!
//! One call each, no retries and no cache: the webhook's lookup mechanism
//! caches, shares concurrent lookups and owns the deadline, which every call
//! here is given and keeps (the token fetch included). A disk that does not
//! exist is a 404 ([`CallFailure::is_not_found`](crate::api::CallFailure::is_not_found)), distinct from other refusals, because
//! the webhook looks for a disk in several zones.

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;
use url::Url;

use super::Call;
use super::error::GcpError;
use super::token::TokenSource;
use crate::endpoint::SecureEndpoint;

/// Compute Engine API v1, as the in-tree GCE provider called it.
pub const COMPUTE_ENDPOINT: &str = "https://compute.googleapis.com/compute/v1/";

const SERVICE: &str = "compute";

/// The most zones a `regions.get` answer may list. GCE regions have 3 or 4
/// (us-central1: a, b, c, f); 16 leaves room for regions to grow while
/// keeping a search for a disk in every zone of its region to 17 calls.
pub const MAX_REGION_ZONES: usize = 16;

/// A persistent disk's placement, names only (the last component of the
/// URLs Compute answers with).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disk {
    pub name: String,
    /// The zone of a zonal disk; `None` for a regional one.
    pub zone: Option<String>,
    /// The region: a regional disk's `region`; for a zonal disk, the zone
    /// without its last `-x` (as the in-tree labeler derived it).
    pub region: Option<String>,
    /// A regional disk's two zones (never empty for a regional disk); empty
    /// for a zonal one.
    pub replica_zones: Vec<String>,
}

impl Disk {
    pub fn is_regional(&self) -> bool {
        !self.replica_zones.is_empty()
    }
}

/// `us-central1-a` → `us-central1`: a zone's region, as the in-tree GCE
/// provider derived it (the zone without its last `-` part).
pub fn region_of_zone(zone: &str) -> Option<&str> {
    zone.rsplit_once('-')
        .filter(|(region, suffix)| !region.is_empty() && !suffix.is_empty())
        .map(|(region, _)| region)
}

/// Calls to one Compute endpoint with tokens from one source.
#[derive(Clone)]
pub struct ComputeClient {
    http: reqwest::Client,
    base: Url,
    tokens: Arc<dyn TokenSource<GcpError>>,
}

impl fmt::Debug for ComputeClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ComputeClient")
            .field("base", &self.base.as_str())
            .finish_non_exhaustive()
    }
}

impl ComputeClient {
    /// `http` from [`crate::http::http_client`]; `endpoint` is
    /// [`COMPUTE_ENDPOINT`] or the one the program was given (see
    /// [`super::endpoint`]); `tokens` usually a
    /// [`super::CachedTokenSource`] in front of the metadata server.
    pub fn new(http: reqwest::Client, endpoint: &SecureEndpoint, tokens: Arc<dyn TokenSource<GcpError>>) -> Self {
        Self {
            http,
            base: super::base_url(endpoint),
            tokens,
        }
    }

    pub fn base(&self) -> &Url {
        &self.base
    }

    /// `disks.get`: the zonal disk `name` in `zone`.
    pub async fn disk(&self, project: &str, zone: &str, name: &str, deadline: Instant) -> Result<Disk, GcpError> {
        let path = format!(
            "projects/{}/zones/{}/disks/{}",
            super::check_name("project", project)?,
            super::check_name("zone", zone)?,
            super::check_name("disk", name)?
        );
        let (url, json) = self.get(&path, deadline).await?;
        let disk = parse_disk(&url, &json)?;
        if disk.zone.is_none() {
            return Err(Call::garbage(SERVICE, &url, "the disk has no zone"));
        }
        Ok(disk)
    }

    /// `regionDisks.get`: the regional disk `name` in `region`.
    pub async fn region_disk(
        &self,
        project: &str,
        region: &str,
        name: &str,
        deadline: Instant,
    ) -> Result<Disk, GcpError> {
        let path = format!(
            "projects/{}/regions/{}/disks/{}",
            super::check_name("project", project)?,
            super::check_name("region", region)?,
            super::check_name("disk", name)?
        );
        let (url, json) = self.get(&path, deadline).await?;
        let disk = parse_disk(&url, &json)?;
        if !disk.is_regional() {
            return Err(Call::garbage(SERVICE, &url, "the regional disk has no replicaZones"));
        }
        Ok(disk)
    }

    /// `regions.get`: the names of `region`'s zones, for a caller that looks
    /// for a disk in every zone of its region. The answer is refused, not
    /// trimmed, when it lists more than [`MAX_REGION_ZONES`] zones or a URL
    /// that is not `…/projects/{project}/zones/{region}-{suffix}`: such a
    /// list is not the region's, and the caller asks every zone in it.
    pub async fn region_zones(&self, project: &str, region: &str, deadline: Instant) -> Result<Vec<String>, GcpError> {
        let path = format!(
            "projects/{}/regions/{}",
            super::check_name("project", project)?,
            super::check_name("region", region)?
        );
        let (url, json) = self.get(&path, deadline).await?;
        let Some(Value::Array(zones)) = json.get("zones") else {
            return Err(Call::garbage(SERVICE, &url, "the region has no zones list"));
        };
        if zones.len() > MAX_REGION_ZONES {
            let problem = format!(
                "the region lists {} zones, more than {MAX_REGION_ZONES} (GCE regions have a handful)",
                zones.len()
            );
            return Err(Call::garbage(SERVICE, &url, problem));
        }
        let zones = zones
            .iter()
            .enumerate()
            .map(|(index, zone)| {
                let text = zone
                    .as_str()
                    .ok_or_else(|| Call::garbage(SERVICE, &url, "zones holds a value that is not a string"))?;
                let name = zone_in_region(text, project, region).ok_or_else(|| {
                    let shown = crate::logging::clean_text(text, &[], 160);
                    let problem =
                        format!("zones[{index}] \"{shown}\" is not a zone of region {region} in project {project}");
                    Call::garbage(SERVICE, &url, problem)
                })?;
                Ok(name.to_owned())
            })
            .collect::<Result<Vec<_>, GcpError>>()?;
        if zones.is_empty() {
            return Err(Call::garbage(SERVICE, &url, "the region has no zones"));
        }
        Ok(zones)
    }

    /// GET `path` with a bearer token, all before `deadline`.
    async fn get(&self, path: &str, deadline: Instant) -> Result<(Url, Value), GcpError> {
        let url = Call::join(SERVICE, &self.base, path)?;
        let json = Call::bearer_get(
            SERVICE,
            "the access token source for compute",
            &self.http,
            &*self.tokens,
            &url,
            deadline,
        )
        .await?;
        Ok((url, json))
    }
}

/// The zone a `regions.get` zone URL names, when it is one of `region` in
/// `project`: `…/projects/{project}/zones/{region}-{suffix}`, the suffix
/// lowercase letters and digits (`us-central1-a`), as Compute answers.
fn zone_in_region<'a>(url: &'a str, project: &str, region: &str) -> Option<&'a str> {
    let mut parts = url.rsplit('/');
    let (zone, zones, in_project, projects) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let suffix = zone.strip_prefix(region)?.strip_prefix('-')?;
    let suffix_ok = !suffix.is_empty() && suffix.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    (suffix_ok && zones == "zones" && in_project == project && projects == "projects").then_some(zone)
}

/// The names in a disk resource: `name`, and the last components of
/// `zone`, `region` and `replicaZones[]`, each a valid name. Public for the
/// fuzz targets (fuzz/): `url` only names the answer in errors.
pub fn parse_disk(url: &Url, json: &Value) -> Result<Disk, GcpError> {
    let garbage = |problem: String| Call::garbage(SERVICE, url, problem);
    let last = |field: &str, value: &Value| -> Result<String, GcpError> {
        let text = value
            .as_str()
            .ok_or_else(|| garbage(format!("{field} is not a string")))?;
        let name = text.trim_end_matches('/').rsplit('/').next().unwrap_or_default();
        super::check_name("zone or region", name)
            .map(str::to_owned)
            .map_err(|e| garbage(format!("{field}: {e}")))
    };
    let name = json["name"]
        .as_str()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| garbage("the disk has no name".into()))?
        .to_owned();
    let zone = json.get("zone").map(|z| last("zone", z)).transpose()?;
    let region = json.get("region").map(|r| last("region", r)).transpose()?;
    let replica_zones = match json.get("replicaZones") {
        None => Vec::new(),
        Some(Value::Array(zones)) => zones
            .iter()
            .map(|z| last("replicaZones", z))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(garbage("replicaZones is not a list".into())),
    };
    let region = region.or_else(|| zone.as_deref().and_then(region_of_zone).map(str::to_owned));
    Ok(Disk {
        name,
        zone,
        region,
        replica_zones,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url() -> Url {
        Url::parse("https://compute.googleapis.com/compute/v1/projects/p/zones/z/disks/d").unwrap()
    }

    #[test]
    fn zonal_and_regional_disks() {
        let zonal = serde_json::json!({
            "kind": "compute#disk", "name": "pd-1",
            "zone": "https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-b"
        });
        assert_eq!(
            parse_disk(&url(), &zonal).unwrap(),
            Disk {
                name: "pd-1".into(),
                zone: Some("us-central1-b".into()),
                region: Some("us-central1".into()),
                replica_zones: vec![],
            }
        );
        let regional = serde_json::json!({
            "name": "rpd", "region": "https://www.googleapis.com/compute/v1/projects/p/regions/europe-west1",
            "replicaZones": [
                "https://www.googleapis.com/compute/v1/projects/p/zones/europe-west1-b",
                "https://www.googleapis.com/compute/v1/projects/p/zones/europe-west1-c"
            ]
        });
        let disk = parse_disk(&url(), &regional).unwrap();
        assert!(disk.is_regional());
        assert_eq!(disk.zone, None);
        assert_eq!(disk.region.as_deref(), Some("europe-west1"));
        assert_eq!(disk.replica_zones, ["europe-west1-b", "europe-west1-c"]);
    }

    #[test]
    fn unusable_disks_are_errors() {
        for bad in [
            serde_json::json!({"zone": "zones/a"}),
            serde_json::json!({"name": "d", "zone": 5}),
            serde_json::json!({"name": "d", "zone": "zones/bad zone"}),
            serde_json::json!({"name": "d", "replicaZones": "a"}),
            serde_json::json!({"name": "d", "replicaZones": ["zones/.."]}),
        ] {
            let error = parse_disk(&url(), &bad).unwrap_err().to_string();
            assert!(
                error.starts_with("compute sent an unusable answer for https://"),
                "{error}"
            );
        }
    }

    #[test]
    fn zones_of_a_region_in_a_project() {
        let base = "https://www.googleapis.com/compute/v1/projects/";
        fn of(url: &str) -> Option<&str> {
            zone_in_region(url, "p", "us-central1")
        }
        assert_eq!(of(&format!("{base}p/zones/us-central1-a")), Some("us-central1-a"));
        assert_eq!(of("projects/p/zones/us-central1-ai1b"), Some("us-central1-ai1b"));
        for foreign in [
            format!("{base}q/zones/us-central1-a"),
            format!("{base}p/zones/europe-west1-b"),
            format!("{base}p/zones/us-central10-a"),
            format!("{base}p/zones/us-central1-"),
            format!("{base}p/zones/us-central1"),
            format!("{base}p/zones/us-central1-B"),
            format!("{base}p/regions/us-central1-a"),
            format!("{base}p/zones/us-central1-a/"),
            "zones/us-central1-a".to_owned(),
            "us-central1-a".to_owned(),
        ] {
            assert_eq!(of(&foreign), None, "{foreign}");
        }
    }

    #[test]
    fn regions_of_zones() {
        assert_eq!(region_of_zone("us-central1-a"), Some("us-central1"));
        assert_eq!(region_of_zone("europe-west4-b"), Some("europe-west4"));
        assert_eq!(region_of_zone("nozone"), None);
        assert_eq!(region_of_zone("-a"), None);
    }
}
