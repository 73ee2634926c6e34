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
//!
//! A search is bounded whatever Compute answers: at most [`MAX_REGION_ZONES`] zones (a
//! longer or foreign list from `regions.get` is refused), [`CALLS_PER_LOOKUP`] calls of
//! one lookup in flight at once and [`CALLS_IN_TOTAL`] of all lookups together, each
//! waiting for its turn within the lookup's deadline. The zone list is kept for
//! [`ZONE_LIST_TTL`] (see [`ZoneList`]).

mod place;
mod zones;

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cloud_access::SecureEndpoint;
use cloud_access::api::{CallError, CallErrorKind, CallFailure};
use cloud_access::gcp::{CachedTokenSource, ComputeClient, Disk, GceMetadata, GcpError};
use tokio::sync::{Mutex, OnceCell, Semaphore};
use tokio::task::JoinSet;

pub use self::place::{
    DiskRef, GceScope, Hint, Place, ScopeError, ScopeSetting, Search, UNSPECIFIED, cache_key, conclude, disk_ref,
    topology_of,
};
pub use self::zones::{ZONE_LIST_TTL, ZoneList, ZonesNow};
use crate::builtin::GCE_PD_DRIVER;
use crate::lookup::{Cloud, CloudLookup, LookupError, USER_AGENT};
use crate::source::{InTree, VolumeIdentity};
use crate::topology::Topology;
pub use cloud_access::gcp::MAX_REGION_ZONES;

/// The lookup's name: audit annotations, messages and metrics.
pub const NAME: &str = "gce";

/// The GCE lookup in [`crate::lookup::CLOUDS`].
pub const CLOUD: Cloud = Cloud {
    name: NAME,
    flag: "--gce-lookup",
    hint: "--gce-lookup (or --rules)",
    csi_driver: GCE_PD_DRIVER,
    in_tree: Some(InTree::GcePersistentDisk),
    answers_for: |volume| disk_ref(volume).is_some(),
    enabled: |flags| flags.gce.gce_lookup,
    build: crate::setup::gce_lookup,
};

/// Compute calls one lookup has in flight at once. A search asks the region and each of
/// its zones (a real region: 4 or 5 calls, all at once); the most, 1 + 16 zones, take
/// three turns.
pub const CALLS_PER_LOOKUP: usize = 8;

/// Compute calls in flight at once, all lookups together (one `GceLookup` serves every
/// review): four full-width searches. Each holds one connection, so the connections to
/// Compute stay about this many however many reviews come at once.
pub const CALLS_IN_TOTAL: usize = 32;

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
    /// What the scope leaves to the metadata server, learned once (a failure is not
    /// kept: the next lookup asks again).
    project: OnceCell<String>,
    region: OnceCell<String>,
    /// The region's zones from `regions.get` (one region per lookup: the scope's or the
    /// metadata server's); the lock makes one refresh serve every lookup waiting.
    zone_list: Mutex<Option<ZoneList>>,
    zone_list_ttl: Duration,
    /// Places among the Compute calls in flight, all lookups together.
    calls: Arc<Semaphore>,
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
    /// before they expire; each lookup ends by the deadline it is given. `client_timeout`
    /// caps each HTTP request, a bound that holds even where a call gets no deadline.
    pub fn new(
        metadata: GceMetadata,
        endpoint: &SecureEndpoint,
        scope: GceScope,
        client_timeout: Duration,
    ) -> Result<Self, GceSetupError> {
        let http = cloud_access::http_client(USER_AGENT, client_timeout)?;
        let tokens = Arc::new(CachedTokenSource::new(metadata.clone()));
        let compute = ComputeClient::new(http, endpoint, tokens);
        Ok(Self::with_compute(compute, metadata, scope))
    }

    /// A lookup through `compute` (whatever its tokens), learning what `scope` leaves
    /// out from `metadata`.
    pub fn with_compute(compute: ComputeClient, metadata: GceMetadata, scope: GceScope) -> Self {
        Self {
            compute,
            metadata,
            scope,
            project: OnceCell::new(),
            region: OnceCell::new(),
            zone_list: Mutex::new(None),
            zone_list_ttl: ZONE_LIST_TTL,
            calls: Arc::new(Semaphore::new(CALLS_IN_TOTAL)),
            hints: GceHints::default(),
        }
    }

    /// How errors tell the operator to change the project, region and zones.
    #[must_use]
    pub fn with_hints(mut self, hints: GceHints) -> Self {
        self.hints = hints;
        self
    }

    /// How long the zone list from `regions.get` is used before it is asked again
    /// ([`ZONE_LIST_TTL`] unless set).
    #[must_use]
    pub fn with_zone_list_ttl(mut self, ttl: Duration) -> Self {
        self.zone_list_ttl = ttl;
        self
    }

    /// The disk `name` of `project`: where the hint says, else in the scope's region and
    /// zones, all asked together ([`CALLS_PER_LOOKUP`] at a time).
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
            match self
                .in_turn(deadline, get(&self.compute, project, &place, name, deadline))
                .await
            {
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
        // Dropped with the lookup (its deadline), the set aborts the calls not yet done.
        let mut calls = JoinSet::new();
        let this_lookup = Arc::new(Semaphore::new(CALLS_PER_LOOKUP));
        let endpoint = cloud_access::http::shown_url(self.compute.base());
        for (index, place) in places.iter().cloned().enumerate() {
            let turns = Turns {
                this_lookup: Some(this_lookup.clone()),
                all: self.calls.clone(),
                endpoint: endpoint.clone(),
            };
            let (compute, project, name) = (self.compute.clone(), project.to_owned(), name.to_owned());
            calls.spawn(async move {
                let call = get(&compute, &project, &place, &name, deadline);
                (index, turns.run(deadline, call).await)
            });
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

    /// The configured zones, else every zone of `region` (Compute `regions.get`), as
    /// [`ZoneList::now`] says: the kept list while fresh, else asked again (one call for
    /// every lookup waiting), the old list standing in for a failed refresh for a while.
    async fn zones(&self, project: &str, region: &str, deadline: Instant) -> Result<Vec<String>, LookupError> {
        if !self.scope.zones.is_empty() {
            return Ok(self.scope.zones.clone());
        }
        let mut list = tokio::time::timeout_at(deadline.into(), self.zone_list.lock())
            .await
            .map_err(|_| LookupError::timed_out(self.endpoint()))?;
        let stale = match ZoneList::now(list.as_ref(), Instant::now(), self.zone_list_ttl) {
            ZonesNow::Fresh(zones) => return Ok(zones.to_vec()),
            ZonesNow::Refresh { stale } => stale.map(<[String]>::to_vec),
        };
        let call = self.compute.region_zones(project, region, deadline);
        match self.in_turn(deadline, call).await {
            Ok(zones) => {
                *list = Some(ZoneList::new(zones.clone(), Instant::now()));
                Ok(zones)
            }
            // The old list stands in for a refusal, not for a timeout.
            Err(error) => match (stale, LookupError::from(error)) {
                (Some(zones), LookupError::Failed(error)) => {
                    tracing::warn!(
                        "keeping the zones of region {region} listed over {:?} ago: {error}",
                        self.zone_list_ttl
                    );
                    Ok(zones)
                }
                (_, error) => Err(error.map_failed(|error| {
                    format!(
                        "cannot list the zones of region {region}: {error} ({})",
                        self.hints.location
                    )
                })),
            },
        }
    }

    /// `call` in its turn among every lookup's calls.
    async fn in_turn<T>(
        &self,
        deadline: Instant,
        call: impl Future<Output = Result<T, GcpError>>,
    ) -> Result<T, GcpError> {
        let turns = Turns {
            this_lookup: None,
            all: self.calls.clone(),
            endpoint: cloud_access::http::shown_url(self.compute.base()),
        };
        turns.run(deadline, call).await
    }

    /// A refusal with advice for Compute's 403s; a timeout as one.
    fn refused(&self, error: GcpError) -> LookupError {
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
        LookupError::from(error).map_failed(|error| format!("{error}{advice}"))
    }
}

/// The places a Compute call waits for: one of its lookup's (a search's), when given,
/// then one of every lookup's together.
struct Turns {
    this_lookup: Option<Arc<Semaphore>>,
    all: Arc<Semaphore>,
    /// Compute's base URL as shown, named when the deadline comes before a turn.
    endpoint: String,
}

impl Turns {
    /// `call` once both places are held (released when it ends); the wait counts
    /// against `deadline`, as the call's own time does.
    async fn run<T>(&self, deadline: Instant, call: impl Future<Output = Result<T, GcpError>>) -> Result<T, GcpError> {
        let waited = Instant::now();
        let turn = async {
            // Neither semaphore is ever closed: `acquire` cannot fail.
            let mine = match &self.this_lookup {
                Some(places) => places.acquire().await.ok(),
                None => None,
            };
            (mine, self.all.acquire().await.ok())
        };
        let Ok(_held) = tokio::time::timeout_at(deadline.into(), turn).await else {
            let after = waited.elapsed();
            return Err(CallError::new("compute", self.endpoint.clone(), CallErrorKind::Deadline { after }).into());
        };
        call.await
    }
}

/// A "not found" standing for the hinted place's answer, already had.
fn not_found_at_hint() -> GcpError {
    let detail = cloud_access::gcp::ErrorDetail::default();
    CallError::new("compute", String::new(), CallErrorKind::NotFound { detail }).into()
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

impl CloudLookup for GceLookup {
    const CLOUD: &'static Cloud = &CLOUD;

    async fn find(&self, volume: &VolumeIdentity, deadline: Instant) -> Result<Topology, LookupError> {
        let disk = match disk_ref(volume).ok_or(LookupError::NotFound)? {
            DiskRef::Regional { project, region, name } => {
                let project = self.project(project).await?;
                let call = self.compute.region_disk(&project, region, name, deadline);
                self.in_turn(deadline, call).await.map_err(|e| self.refused(e))?
            }
            DiskRef::Unplaced { project, name } => {
                let project = self.project(project).await?;
                self.search(&project, name, Hint::of(volume), deadline).await?
            }
        };
        topology_of(&disk)
    }

    fn cache_key(&self, volume: &VolumeIdentity) -> String {
        cache_key(volume)
    }

    /// Compute's API, as the resolver's timeout names it.
    fn endpoint(&self) -> Option<String> {
        Some(cloud_access::http::shown_url(self.compute.base()))
    }
}
