//! Finding a volume's topology, in order: what the handle says (built in), then the
//! rules files, then a lookup (with a deadline). This is the only part of a review that
//! may wait; its result, a [`Resolution`] (a type of the core, [`crate::model`]), is
//! what the pure decision works from.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::builtin::{self, Builtin, csi_zone_key};
use crate::lookup::{LookupError, TopologyLookup};
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

    /// Whether something here (built-in knowledge, a rule, a lookup) is about this kind of
    /// volume; unknown kinds are left alone silently.
    pub fn recognizes(&self, volume: &VolumeIdentity) -> bool {
        match &volume.kind {
            VolumeKind::InTree(_) => true,
            VolumeKind::Csi { driver } => {
                csi_zone_key(driver).is_some()
                    || self.rules.names(&volume.kind)
                    || self.lookups.iter().any(|l| l.handles(volume))
            }
        }
    }

    /// The topology of `volume`.
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
            let answer = tokio::time::timeout(self.deadline, lookup.lookup(volume))
                .await
                .unwrap_or_else(|_| Err(LookupError::timed_out(self.deadline, lookup.endpoint())));
            return match answer {
                Ok(topology) => found(volume, topology, source, None, Vec::new()),
                Err(error) => Resolution::LookupFailed {
                    lookup: lookup.name().to_owned(),
                    error: failure(error),
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
            let flag = if crate::ebs::volume_id(volume).is_some() {
                "--aws-ebs-lookup (or --rules)"
            } else if crate::gce::disk_ref(volume).is_some() {
                "--gce-lookup (or --rules)"
            } else if crate::azure::disk_uri(volume).is_some() {
                "--azure-disk-lookup (or --rules)"
            } else if crate::cinder::volume_id(volume).is_some() {
                "--openstack-cinder-lookup (or --rules)"
            } else if crate::vsphere::handle(volume).is_some() {
                "--vsphere-lookup (or --rules)"
            } else {
                "--rules"
            };
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

/// A lookup's error as the decision sees it (the same message).
fn failure(error: LookupError) -> LookupFailure {
    match error {
        LookupError::TimedOut(timeout) => LookupFailure::TimedOut(timeout),
        other => LookupFailure::Failed(other.to_string()),
    }
}
