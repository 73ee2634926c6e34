//! Finding a volume's topology, in order: what the handle says (built in), then the
//! rules files, then a lookup (with a deadline). This is the only part of a review that
//! may wait; its result, a [`Resolution`], is what the pure decision works from.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::builtin::{self, Builtin, csi_zone_key};
use crate::lookup::{LookupError, TopologyLookup};
use crate::rules::{RuleOrigin, Rules};
use crate::source::{VolumeIdentity, VolumeKind};
use crate::topology::{REGION_LABEL, Topology, ZONE_LABEL};

/// The volume ID external provisioners put in a PV before the real one is known
/// (k8s.io/cloud-provider volume constants); it has no topology to find.
pub const PROVISIONING_PLACEHOLDER: &str = "placeholder-for-provisioning";

/// The default deadline for a lookup; below the 5 s webhook timeout we recommend.
pub const DEFAULT_LOOKUP_DEADLINE: Duration = Duration::from_secs(2);

/// Where a topology came from, for the `source` audit annotation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopologySource {
    /// Parsed from the volume handle.
    Builtin,
    /// Given by this rule.
    Rule(RuleOrigin),
    /// Answered by the named lookup.
    Lookup(String),
}

impl fmt::Display for TopologySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TopologySource::Builtin => f.write_str("builtin"),
            TopologySource::Rule(origin) => write!(f, "rule {origin}"),
            TopologySource::Lookup(name) => write!(f, "lookup {name}"),
        }
    }
}

/// The node labels the nodeAffinity requirements are written on.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AffinityKeys {
    /// Key of the requirement holding the zones, if any.
    pub zone: Option<String>,
    /// Key of the requirement holding the region, if any.
    pub region: Option<String>,
}

impl AffinityKeys {
    /// CSI: the driver's own zone key (nodes running the driver report it), or the rule's.
    /// In-tree: the GA zone and region keys, as the in-tree admission plugin did; a rule's
    /// key replaces the zone key.
    pub fn for_volume(kind: &VolumeKind, rule_key: Option<&str>) -> Self {
        match kind {
            VolumeKind::Csi { driver } => Self {
                zone: rule_key.or_else(|| csi_zone_key(driver)).map(str::to_owned),
                region: None,
            },
            VolumeKind::InTree(_) => Self {
                zone: Some(rule_key.unwrap_or(ZONE_LABEL).to_owned()),
                region: Some(REGION_LABEL.to_owned()),
            },
        }
    }
}

/// A topology found for a volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub topology: Topology,
    pub source: TopologySource,
    pub affinity: AffinityKeys,
    /// Things the user should know (sent as warnings).
    pub notes: Vec<String>,
}

/// What we know about a volume's topology.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// Nothing was resolved because the request needs no topology.
    NotNeeded,
    /// The topology was found.
    Resolved(Resolved),
    /// The PV carries the provisioning placeholder instead of a volume ID.
    Placeholder,
    /// A volume type we know, but nothing is configured that could give its topology.
    NotConfigured {
        /// The command-line flag that would enable a source for it.
        flag: &'static str,
    },
    /// A volume type we know nothing about.
    Unrecognized,
    /// A source answered with values that cannot be labels.
    Invalid { source: TopologySource, reason: String },
    /// The lookup that should have answered failed.
    LookupFailed { lookup: String, error: LookupError },
}

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
                .unwrap_or(Err(LookupError::TimedOut(self.deadline)));
            return match answer {
                Ok(topology) => found(volume, topology, source, None, Vec::new()),
                Err(error) => Resolution::LookupFailed {
                    lookup: lookup.name().to_owned(),
                    error,
                },
            };
        }
        if let Some(topology) = partial {
            // A regional disk's handle names its region but not its replica zones. The
            // region alone is still right; guessing zones could make it unschedulable.
            let note =
                format!("{volume}: regional disk, zones unknown: only the region is set (zones need a rule, --rules)");
            return found(volume, topology, TopologySource::Builtin, None, vec![note]);
        }
        if self.recognizes(volume) {
            let flag = if crate::ebs::volume_id(volume).is_some() {
                "--aws-ebs-lookup (or --rules)"
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
