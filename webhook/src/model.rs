//! The core's types: what a request is about ([`Subject`]), what is known of its volume's
//! topology ([`Resolution`]), and what was decided ([`Decision`], [`Outcome`]). No I/O and
//! no lookup, cloud or server code: the lookups, the resolver, the decision and the server
//! all speak these types.

use std::fmt;
use std::time::Duration;

use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::admission::AdmissionResponse;

use crate::builtin::csi_zone_key;
use crate::rules::RuleOrigin;
use crate::source::{VolumeIdentity, VolumeKind};
use crate::topology::{REGION_LABEL, Topology, ZONE_LABEL};

/// What to do when a configured lookup fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnLookupError {
    /// Refuse the PV: better no PV than one with no or wrong topology.
    #[default]
    Deny,
    /// Admit the PV unchanged, with a warning.
    Allow,
}

/// What the validation does with a PV whose topology contradicts its disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnContradiction {
    /// Refuse it: its pods could be scheduled where the disk cannot be attached.
    #[default]
    Deny,
    /// Admit it, with a warning.
    Warn,
}

/// Settings of the decision.
#[derive(Debug, Clone, Default)]
pub struct DecisionConfig {
    pub on_lookup_error: OnLookupError,
    /// The validation's policy (`/validate`).
    pub on_contradiction: OnContradiction,
}

/// What happened to a request; the value of the `outcome` audit annotation and the
/// `outcome` label of the request metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Not a CREATE of a PersistentVolume (validation: nor an UPDATE of its topology).
    NotApplicable,
    /// The object could not be read as a PersistentVolume.
    Unreadable,
    /// A provisioned PV that already has both labels.
    Trusted,
    /// A volume type we know nothing about.
    Unrecognized,
    /// The volume ID is the provisioning placeholder.
    Placeholder,
    /// Labels and/or nodeAffinity were patched.
    Labeled,
    /// Topology resolved, and the PV already has it.
    Unchanged,
    /// A known volume type, but no source configured for it.
    NotConfigured,
    /// A source gave values that cannot be labels.
    InvalidTopology,
    /// A lookup failed.
    LookupFailed,
    /// Validation: the PV's topology agrees with its disk.
    Consistent,
    /// Validation: the PV's topology contradicts its disk.
    Contradicts,
}

impl Outcome {
    /// Every outcome.
    pub const ALL: [Outcome; 12] = [
        Outcome::NotApplicable,
        Outcome::Unreadable,
        Outcome::Trusted,
        Outcome::Unrecognized,
        Outcome::Placeholder,
        Outcome::Labeled,
        Outcome::Unchanged,
        Outcome::NotConfigured,
        Outcome::InvalidTopology,
        Outcome::LookupFailed,
        Outcome::Consistent,
        Outcome::Contradicts,
    ];

    /// The audit annotation value and metrics label.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::NotApplicable => "not-applicable",
            Outcome::Unreadable => "unreadable",
            Outcome::Trusted => "trusted",
            Outcome::Unrecognized => "unrecognized",
            Outcome::Placeholder => "placeholder",
            Outcome::Labeled => "labeled",
            Outcome::Unchanged => "unchanged",
            Outcome::NotConfigured => "not-configured",
            Outcome::InvalidTopology => "invalid-topology",
            Outcome::LookupFailed => "lookup-failed",
            Outcome::Consistent => "consistent",
            Outcome::Contradicts => "contradicts",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

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

/// A lookup that did not finish within its deadline: how long it had, and the endpoint
/// it was waiting on (a URL or host, without credentials or query), when the lookup
/// knows it. Every lookup's timeout, and the resolver's, is told this one way:
/// `timed out after 500ms waiting for https://…`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timeout {
    pub after: Duration,
    pub endpoint: Option<String>,
}

impl fmt::Display for Timeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "timed out after {:?}", self.after)?;
        match &self.endpoint {
            Some(endpoint) => write!(f, " waiting for {endpoint}"),
            None => Ok(()),
        }
    }
}

/// Why a lookup gave no topology, as the decision and the metrics see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LookupFailure {
    /// The lookup did not finish within its deadline.
    TimedOut(Timeout),
    /// Any other failure, described.
    Failed(String),
}

impl LookupFailure {
    /// How `lookups_total` and the decision's log line count this failure.
    pub fn result(&self) -> LookupResult {
        match self {
            LookupFailure::TimedOut(_) => LookupResult::Timeout,
            LookupFailure::Failed(_) => LookupResult::Error,
        }
    }
}

impl fmt::Display for LookupFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LookupFailure::TimedOut(timeout) => timeout.fmt(f),
            LookupFailure::Failed(reason) => f.write_str(reason),
        }
    }
}

/// What we know about the topology of a volume that needs one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
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
    LookupFailed { lookup: String, error: LookupFailure },
}

/// What a request is about, read once from it.
#[derive(Debug, Clone, PartialEq)]
pub enum Subject<'a> {
    /// Answered without a topology: the outcome, and a warning for the user if any.
    Skip { outcome: Outcome, warning: Option<String> },
    /// A PersistentVolume whose topology must be resolved.
    Volume(Volume<'a>),
}

/// A PV being created, with the volume it stands for.
#[derive(Debug, Clone, PartialEq)]
pub struct Volume<'a> {
    /// The PV, as read (see [`crate::review::ReviewObject`]).
    pub pv: &'a PersistentVolume,
    /// The volume whose topology is wanted.
    pub identity: VolumeIdentity,
    /// nodeAffinity has more items than were read: it must be left as it is.
    pub affinity_too_large: bool,
}

/// How a lookup made for a request went, for the lookup metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LookupResult {
    Success,
    Error,
    Timeout,
}

impl LookupResult {
    /// The metrics label.
    pub fn as_str(self) -> &'static str {
        match self {
            LookupResult::Success => "success",
            LookupResult::Error => "error",
            LookupResult::Timeout => "timeout",
        }
    }
}

/// The answer to a request, and what happened, typed: the audit annotations were written
/// from `outcome` and `source`, and the metrics are counted from them.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub response: AdmissionResponse,
    pub outcome: Outcome,
    /// Where the topology came from, when one was found or looked for.
    pub source: Option<TopologySource>,
    /// How the lookup went, when `source` is a lookup.
    pub lookup_result: Option<LookupResult>,
}

impl Decision {
    /// The lookup made for this request and how it went, if one was made.
    pub fn lookup(&self) -> Option<(&str, LookupResult)> {
        match (&self.source, self.lookup_result) {
            (Some(TopologySource::Lookup(name)), Some(result)) => Some((name, result)),
            _ => None,
        }
    }
}

/// Most items (terms, requirements and values together) a PV's nodeAffinity may have
/// for us to read it and add our requirements to each term; PVs have a term, or one per
/// zone, of a requirement or two. Beyond it nodeAffinity is left alone, with a warning:
/// neither what is read of it nor the answer (one patch operation per term) can grow
/// with the request.
pub const MAX_AFFINITY_ITEMS: usize = 1024;

/// The object of a review, read once as a PersistentVolume reduced to what the decision
/// uses: of the metadata, only the topology labels and the `provisioned-by` annotation
/// (whether the maps exist is kept); of the spec, the volume source's driver and handle,
/// and the requirements of nodeAffinity up to [`MAX_AFFINITY_ITEMS`] terms, requirements
/// and values. Everything else is skipped unread, so that what is kept is the strings
/// read, at most the size of the body, and a bounded number of small structures around
/// them, whatever the object's shape. Only what is read is checked: an object whose read
/// parts have the wrong types is unreadable, and the review is still answered.
#[derive(Debug, Clone, PartialEq)]
pub struct ReviewObject {
    /// The reduced PV; empty when unreadable.
    pv: PersistentVolume,
    /// Why the object cannot be read as a PersistentVolume.
    unreadable: Option<String>,
    /// nodeAffinity has more than [`MAX_AFFINITY_ITEMS`] items: `pv` holds only the first.
    affinity_too_large: bool,
}

impl ReviewObject {
    /// An object read as `pv`; `affinity_too_large` when only the first
    /// [`MAX_AFFINITY_ITEMS`] of its nodeAffinity were read.
    pub fn readable(pv: PersistentVolume, affinity_too_large: bool) -> Self {
        Self {
            pv,
            unreadable: None,
            affinity_too_large,
        }
    }

    /// An object that cannot be read as a PersistentVolume, and why.
    pub fn unreadable(reason: String) -> Self {
        Self {
            pv: PersistentVolume::default(),
            unreadable: Some(reason),
            affinity_too_large: false,
        }
    }

    /// The reduced PersistentVolume, or why the object is not one.
    pub fn persistent_volume(&self) -> Result<&PersistentVolume, &str> {
        match &self.unreadable {
            Some(reason) => Err(reason),
            None => Ok(&self.pv),
        }
    }

    /// Whether nodeAffinity has more than [`MAX_AFFINITY_ITEMS`] terms, requirements
    /// and values: only the first were read, and it must be left as it is.
    pub fn affinity_too_large(&self) -> bool {
        self.affinity_too_large
    }
}

/// kube's AdmissionRequest wants a Resource; this one is a PersistentVolume.
impl kube::Resource for ReviewObject {
    type DynamicType = ();
    type Scope = k8s_openapi::ClusterResourceScope;

    fn kind(dt: &()) -> std::borrow::Cow<'_, str> {
        <PersistentVolume as kube::Resource>::kind(dt)
    }
    fn group(dt: &()) -> std::borrow::Cow<'_, str> {
        <PersistentVolume as kube::Resource>::group(dt)
    }
    fn version(dt: &()) -> std::borrow::Cow<'_, str> {
        <PersistentVolume as kube::Resource>::version(dt)
    }
    fn plural(dt: &()) -> std::borrow::Cow<'_, str> {
        <PersistentVolume as kube::Resource>::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.pv.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.pv.metadata
    }
}
