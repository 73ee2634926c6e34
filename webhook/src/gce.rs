//! GCE persistent disks' topology from Compute Engine: in-tree `gcePersistentDisk`
//! volumes (a disk name only) and `pd.csi.storage.gke.io` handles whose location is
//! `UNSPECIFIED` are looked for by name (`disks.get`, `regionDisks.get`); regional
//! handles `projects/P/regions/R/disks/D` get their replica zones (`regionDisks.get`).
//! Only the calls: caching, single-flight and the deadline are
//! [`CachedLookup`](crate::lookup::CachedLookup)'s and the resolver's, as for EBS.
//!
//! A disk looked for by name, as the in-tree labeler looked (legacy `gce_disks.go`):
//! the PV's zone label, when it names GCE zones, is tried first (one zone: `disks.get`
//! there; a regional disk's zones: `regionDisks.get` in their region); otherwise, or when
//! the disk is not there, the configured region and every configured zone are asked at
//! once. Found in exactly one place is the answer; in several (one name in two zones, or
//! a regional and a zonal disk of one name) is an error, never a guess.

mod place;

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cloud_access::SecureEndpoint;
use cloud_access::gcp::{CachedTokenSource, ComputeClient, Disk, GceMetadata, GcpError};
use tokio::sync::OnceCell;
use tokio::task::JoinSet;

pub use self::place::{
    DiskRef, GceScope, Hint, Place, ScopeError, ScopeSetting, Search, UNSPECIFIED, cache_key, conclude, disk_ref,
    topology_of,
};
use crate::lookup::LookupError;
use crate::source::VolumeIdentity;
use crate::topology::Topology;

/// The lookup's name: audit annotations, messages and metrics.
pub const NAME: &str = "gce";

/// How errors tell the operator to change what the lookup looks in (the program's
/// flags); the library names none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GceHints {
    /// How to set the project, e.g. "set --gce-project".
    pub project: &'static str,
    /// How to set the region and zones, e.g. "set --gce-region or --gce-zones".
    pub location: &'static str,
}

impl Default for GceHints {
    fn default() -> Self {
        Self {
            project: "set the project",
            location: "set the region or zones",
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("the GCE lookup's HTTP client: {0}")]
pub struct GceSetupError(#[from] cloud_access::HttpClientError);

/// The lookup: Compute calls with tokens from the metadata server.
pub struct GceLookup {
    compute: ComputeClient,
    metadata: GceMetadata,
    scope: GceScope,
    /// What the scope leaves to the metadata server or Compute, learned once (a failure
    /// is not kept: the next lookup asks again).
    project: OnceCell<String>,
    region: OnceCell<String>,
    zones: OnceCell<Vec<String>>,
    deadline: Duration,
    hints: GceHints,
}

impl fmt::Debug for GceLookup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GceLookup")
            .field("compute", &self.compute.base().as_str())
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

impl GceLookup {
    /// A lookup calling Compute at `endpoint` with the default service account's tokens
    /// from `metadata` (the node's, or GKE's Workload Identity), cached and refreshed
    /// before they expire; each lookup must end within `deadline`.
    pub fn new(
        metadata: GceMetadata,
        endpoint: &SecureEndpoint,
        scope: GceScope,
        deadline: Duration,
    ) -> Result<Self, GceSetupError> {
        let user_agent = concat!("pv-topology-webhook/", env!("CARGO_PKG_VERSION"));
        let http = cloud_access::http_client(user_agent, deadline)?;
        let tokens = Arc::new(CachedTokenSource::new(metadata.clone()));
        let compute = ComputeClient::new(http, endpoint, tokens);
        Ok(Self::with_compute(compute, metadata, scope, deadline))
    }

    /// A lookup through `compute` (whatever its tokens), learning what `scope` leaves
    /// out from `metadata`.
    pub fn with_compute(compute: ComputeClient, metadata: GceMetadata, scope: GceScope, deadline: Duration) -> Self {
        Self {
            compute,
            metadata,
            scope,
            project: OnceCell::new(),
            region: OnceCell::new(),
            zones: OnceCell::new(),
            deadline,
            hints: GceHints::default(),
        }
    }

    /// How errors tell the operator to change the project, region and zones.
    #[must_use]
    pub fn with_hints(mut self, hints: GceHints) -> Self {
        self.hints = hints;
        self
    }

    async fn find(&self, volume: &VolumeIdentity) -> Result<Topology, LookupError> {
        let deadline = Instant::now() + self.deadline;
        let disk = match disk_ref(volume).ok_or(LookupError::NotFound)? {
            DiskRef::Regional { project, region, name } => {
                let project = self.project(project).await?;
                self.compute
                    .region_disk(&project, region, name, deadline)
                    .await
                    .map_err(|e| self.refused(e))?
            }
            DiskRef::Unplaced { project, name } => {
                let project = self.project(project).await?;
                self.search(&project, name, Hint::of(volume), deadline).await?
            }
        };
        topology_of(&disk)
    }

    /// The disk `name` of `project`: where the hint says, else in the scope's region and
    /// zones, all asked at once.
    async fn search(
        &self,
        project: &str,
        name: &str,
        hint: Option<Hint>,
        deadline: Instant,
    ) -> Result<Disk, LookupError> {
        let mut tried = None;
        if let Some(hint) = hint {
            let place = hint.place();
            match get(&self.compute, project, &place, name, deadline).await {
                Ok(disk) => return Ok(disk),
                Err(error) if error.is_not_found() => tried = Some(place),
                Err(error) => return Err(self.refused(error)),
            }
        }
        let region = self.region().await?;
        let zones = self.zones(project, &region, deadline).await?;
        let places: Vec<Place> = std::iter::once(Place::Region(region))
            .chain(zones.into_iter().map(Place::Zone))
            .filter(|place| Some(place) != tried.as_ref())
            .collect();
        let mut calls = JoinSet::new();
        for (index, place) in places.iter().cloned().enumerate() {
            let (compute, project, name) = (self.compute.clone(), project.to_owned(), name.to_owned());
            calls.spawn(async move { (index, get(&compute, &project, &place, &name, deadline).await) });
        }
        let mut answers: Vec<Option<Result<Disk, GcpError>>> = places.iter().map(|_| None).collect();
        while let Some(joined) = calls.join_next().await {
            let (index, answer) =
                joined.map_err(|e| LookupError::Failed(format!("a Compute call did not finish: {e}")))?;
            if let Some(slot) = answers.get_mut(index) {
                *slot = Some(answer);
            }
        }
        let mut looked: Vec<(Place, Result<Disk, GcpError>)> = Vec::with_capacity(places.len() + 1);
        if let Some(place) = tried {
            looked.push((place, Err(not_found_at_hint())));
        }
        looked.extend(places.into_iter().zip(answers).filter_map(|(p, a)| Some((p, a?))));
        conclude(project, name, looked).map_err(|search| match search {
            Search::Refused(error) => self.refused(error),
            not_found @ Search::NotFound { .. } => LookupError::Failed(format!(
                "{not_found} (is it in another project or region? {}; {})",
                self.hints.project, self.hints.location
            )),
            several => LookupError::Failed(several.to_string()),
        })
    }

    /// The handle's project, else the configured one, else the metadata server's.
    async fn project(&self, named: Option<&str>) -> Result<String, LookupError> {
        if let Some(project) = named.or(self.scope.project.as_deref()) {
            return Ok(project.to_owned());
        }
        self.project
            .get_or_try_init(|| self.metadata.project_id())
            .await
            .cloned()
            .map_err(|e| {
                LookupError::Failed(format!(
                    "no project to look in: the metadata server: {e} ({})",
                    self.hints.project
                ))
            })
    }

    /// The configured region, else the region of the metadata server's zone.
    async fn region(&self) -> Result<String, LookupError> {
        if let Some(region) = &self.scope.region {
            return Ok(region.clone());
        }
        let learned = self
            .region
            .get_or_try_init(|| async {
                let zone = self.metadata.zone().await.map_err(|e| e.to_string())?;
                crate::builtin::gce_region_of_zone(&zone)
                    .map(str::to_owned)
                    .ok_or_else(|| format!("its zone {zone:?} names no region"))
            })
            .await;
        learned.cloned().map_err(|e| {
            LookupError::Failed(format!(
                "no region to look in: the metadata server: {e} ({})",
                self.hints.location
            ))
        })
    }

    /// The configured zones, else every zone of `region` (Compute `regions.get`).
    async fn zones(&self, project: &str, region: &str, deadline: Instant) -> Result<Vec<String>, LookupError> {
        if !self.scope.zones.is_empty() {
            return Ok(self.scope.zones.clone());
        }
        self.zones
            .get_or_try_init(|| self.compute.region_zones(project, region, deadline))
            .await
            .cloned()
            .map_err(|e| match e {
                GcpError::Deadline { url, .. } => LookupError::timed_out(self.deadline, Some(url)),
                e => LookupError::Failed(format!(
                    "cannot list the zones of region {region}: {e} ({})",
                    self.hints.location
                )),
            })
    }

    fn refused(&self, error: GcpError) -> LookupError {
        if let GcpError::Deadline { url, .. } = error {
            // The resolver's deadline, met here first: counted as a timeout.
            return LookupError::timed_out(self.deadline, Some(url));
        }
        let reason = error.detail().and_then(|d| d.reason.as_deref());
        let advice = match (error.status(), reason) {
            (Some(403), Some("insufficientPermissions")) => {
                " (the instance's scopes must include cloud-platform or compute.readonly)"
            }
            (Some(403), _) => {
                " (the webhook's service account needs roles/compute.viewer, or compute.disks.get, compute.regionDisks.get and compute.regions.get)"
            }
            _ => "",
        };
        LookupError::Failed(format!("{error}{advice}"))
    }
}

/// A "not found" standing for the hinted place's answer, already had.
fn not_found_at_hint() -> GcpError {
    GcpError::NotFound {
        service: "compute",
        url: String::new(),
        detail: cloud_access::gcp::ErrorDetail::default(),
    }
}

async fn get(
    compute: &ComputeClient,
    project: &str,
    place: &Place,
    name: &str,
    deadline: Instant,
) -> Result<Disk, GcpError> {
    match place {
        Place::Zone(zone) => compute.disk(project, zone, name, deadline).await,
        Place::Region(region) => compute.region_disk(project, region, name, deadline).await,
    }
}

impl GceLookup {
    /// Compute's API, as the resolver's timeout names it.
    fn shown_endpoint(&self) -> Option<String> {
        Some(cloud_access::http::shown_url(self.compute.base()))
    }
}

crate::lookup::cloud_lookup!(GceLookup, name: NAME, answers_for: disk_ref, cache_key: cache_key);
