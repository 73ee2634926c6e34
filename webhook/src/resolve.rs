//! Finding a volume's topology, in order: what the handle says (built in), then the
//! rules files, then a lookup (with a deadline). This is the only part of a review that
//! may wait; its result, a [`Resolution`] (a type of the core, [`crate::model`]), is
//! what the pure decision works from.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::builtin::{self, Builtin, csi_zone_key};
use crate::lookup::{CLOUDS, Cloud, LookupError, Timeout, TopologyLookup};
pub use crate::model::{AffinityKeys, LookupFailure, Resolution, Resolved, TopologySource};
use crate::rules::Rules;
use crate::source::{VolumeIdentity, VolumeKind};
use crate::topology::Topology;

/// The volume ID external provisioners put in a PV before the real one is known
/// (k8s.io/cloud-provider volume constants); it has no topology to find.
pub const PROVISIONING_PLACEHOLDER: &str = "placeholder-for-provisioning";

/// The default deadline for a lookup; below the 5 s webhook timeout we recommend.
pub const DEFAULT_LOOKUP_DEADLINE: Duration = Duration::from_secs(2);

/// Resolves topology through built-in parsing, rules and lookups.
#[derive(Clone)]
pub struct Resolver {
    rules: Rules,
    lookups: Vec<Arc<dyn TopologyLookup>>,
    deadline: Duration,
    /// The clouds whose flags the hints name ([`CLOUDS`] unless set).
    clouds: &'static [Cloud],
}

impl fmt::Debug for Resolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lookups: Vec<&str> = self.lookups.iter().map(|l| l.name()).collect();
        f.debug_struct("Resolver")
            .field("rules", &self.rules.rules().len())
            .field("lookups", &lookups)
            .field("deadline", &self.deadline)
            .finish()
    }
}

impl Resolver {
    /// A resolver with these rules and no lookups.
    pub fn new(rules: Rules) -> Self {
        Self {
            rules,
            lookups: Vec::new(),
            deadline: DEFAULT_LOOKUP_DEADLINE,
            clouds: CLOUDS,
        }
    }

    /// Adds a lookup, asked after the earlier ones (the first that handles a volume answers).
    #[must_use]
    pub fn with_lookup(mut self, lookup: Arc<dyn TopologyLookup>) -> Self {
        self.lookups.push(lookup);
        self
    }

    /// Sets the deadline of one lookup.
    #[must_use]
    pub fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// Sets the clouds whose flags are hinted for volumes nothing answers for
    /// ([`CLOUDS`] by default; tests give their own).
    #[must_use]
    pub fn with_clouds(mut self, clouds: &'static [Cloud]) -> Self {
        self.clouds = clouds;
        self
    }

    /// Whether something here (built-in knowledge, a rule, a lookup, on or off) is about
    /// this kind of volume; unknown kinds are left alone silently.
    pub fn recognizes(&self, volume: &VolumeIdentity) -> bool {
        match &volume.kind {
            VolumeKind::InTree(_) => true,
            VolumeKind::Csi { driver } => {
                csi_zone_key(driver).is_some()
                    || self.rules.names(&volume.kind)
                    || self.lookups.iter().any(|l| l.handles(volume))
                    || self.clouds.iter().any(|cloud| (cloud.answers_for)(volume))
            }
        }
    }

    /// The topology of `volume`.
    /// Before `audit` judges a page: each lookup whose cloud has a call for many
    /// volumes is asked, in batches, for the page's volumes [`Resolver::resolve`] would
    /// ask it for one by one (not placeholders, built-in topologies or volumes a rule
    /// answers), within one lookup deadline per lookup, so that those lookups are cache
    /// hits. What it does not find is left to them.
    pub async fn prefetch(&self, volumes: &[VolumeIdentity]) {
        for lookup in self.lookups.iter().filter(|l| l.batch_limit() > 0) {
            let asked: Vec<VolumeIdentity> = volumes
                .iter()
                .filter(|v| {
                    self.goes_to_a_lookup(v)
                        && self
                            .lookups
                            .iter()
                            .find(|l| l.handles(v))
                            .is_some_and(|first| Arc::ptr_eq(first, lookup))
                })
                .cloned()
                .collect();
            if asked.is_empty() {
                continue;
            }
            let deadline = Instant::now() + self.deadline;
            tokio::select! {
                biased;
                () = tokio::time::sleep_until(deadline.into()) => {}
                () = lookup.prefetch(&asked, deadline) => {}
            }
        }
    }

    /// Whether [`Resolver::resolve`] asks a lookup for `volume`: no placeholder, no
    /// complete built-in topology, no rule.
    fn goes_to_a_lookup(&self, volume: &VolumeIdentity) -> bool {
        volume.handle != PROVISIONING_PLACEHOLDER
            && !matches!(builtin::resolve(volume), Some(Builtin::Complete(_)))
            && self.rules.resolve(volume).is_none()
    }

    pub async fn resolve(&self, volume: &VolumeIdentity) -> Resolution {
        if volume.handle == PROVISIONING_PLACEHOLDER {
            return Resolution::Placeholder;
        }
        let mut partial = None;
        match builtin::resolve(volume) {
            Some(Builtin::Complete(topology)) => {
                return found(volume, topology, TopologySource::Builtin, None, Vec::new());
            }
            Some(Builtin::RegionOnly(topology)) => partial = Some(topology),
            None => {}
        }
        if let Some(matched) = self.rules.resolve(volume) {
            let source = TopologySource::Rule(matched.origin.clone());
            return match matched.topology {
                Ok(topology) => found(volume, topology, source, matched.topology_key, Vec::new()),
                Err(e) => Resolution::Invalid {
                    source,
                    reason: e.to_string(),
                },
            };
        }
        if let Some(lookup) = self.lookups.iter().find(|l| l.handles(volume)) {
            let source = TopologySource::Lookup(lookup.name().to_owned());
            let deadline = Instant::now() + self.deadline;
            let answer = tokio::select! {
                // The deadline first: when the lookup's calls end at the same instant, the
                // answer is the resolver's timeout, naming the lookup's endpoint.
                biased;
                () = tokio::time::sleep_until(deadline.into()) => Err(LookupError::timed_out(lookup.endpoint())),
                answer = lookup.lookup(volume, deadline) => answer,
            };
            return match answer {
                Ok(topology) => found(volume, topology, source, None, Vec::new()),
                Err(error) => Resolution::LookupFailed {
                    lookup: lookup.name().to_owned(),
                    error: failure(error, self.deadline),
                },
            };
        }
        if let Some(topology) = partial {
            // A regional disk's handle names its region but not its replica zones. The
            // region alone is still right; guessing zones could make it unschedulable.
            let note = format!(
                "{volume}: regional disk, zones unknown: only the region is set (zones need --gce-lookup or a rule, --rules)"
            );
            return found(volume, topology, TopologySource::Builtin, None, vec![note]);
        }
        if self.recognizes(volume) {
            let flag = self
                .clouds
                .iter()
                .find(|cloud| (cloud.answers_for)(volume))
                .map_or("--rules", |cloud| cloud.hint);
            Resolution::NotConfigured { flag }
        } else {
            Resolution::Unrecognized
        }
    }
}

fn found(
    volume: &VolumeIdentity,
    topology: Topology,
    source: TopologySource,
    rule_key: Option<&str>,
    notes: Vec<String>,
) -> Resolution {
    Resolution::Resolved(Resolved {
        topology,
        source,
        affinity: AffinityKeys::for_volume(&volume.kind, rule_key),
        notes,
    })
}

/// A lookup's error as the decision sees it (the same message); a timeout is told with
/// the budget it ran out of, the resolver's.
fn failure(error: LookupError, budget: Duration) -> LookupFailure {
    match error {
        LookupError::TimedOut { endpoint } => LookupFailure::TimedOut(Timeout {
            after: budget,
            endpoint,
        }),
        other => LookupFailure::Failed(other.to_string()),
    }
}
