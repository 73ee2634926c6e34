//! `repair`'s decisions, pure: which PVs it may recreate and why not ([`check`]), the
//! object it recreates ([`recreated`]: the PV as it is, less what the apiserver owns
//! and the topology that contradicts or that the webhook writes, with the topology the
//! webhook would write), the journal it keeps on the claim ([`Journal`]) and, from what
//! is in the cluster now and that journal, the next step ([`next_step`]). Every step is
//! chosen from the cluster's state alone, so a run killed after any request is finished
//! by the next one.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    NodeSelectorTerm, PersistentVolume, PersistentVolumeClaim, PersistentVolumeSpec, VolumeNodeAffinity,
};
use serde::{Deserialize, Serialize};

use crate::audit::{Finding, Status};
use crate::decision::wanted;
use crate::model::{Resolved, Volume};
use crate::source::VolumeIdentity;
use crate::topology::{BETA_REGION_LABEL, BETA_ZONE_LABEL, REGION_LABEL, ZONE_LABEL};
use crate::validate::{Contradiction, contradictions};

/// The claim's annotation holding an unfinished repair.
pub const JOURNAL_ANNOTATION: &str = "repair.pv-topology-webhook.io/journal";
/// The finalizer the PV protection controller keeps on a bound PV.
pub const PROTECTION_FINALIZER: &str = "kubernetes.io/pv-protection";
/// The reclaim policy that keeps the disk when the PV object goes.
pub const RETAIN: &str = "Retain";
/// The most bytes of a journal: annotations of one object may take 256 KiB in all.
pub const MAX_JOURNAL_BYTES: usize = 128 << 10;
/// The journal's format.
pub const JOURNAL_VERSION: u32 = 1;

const TOPOLOGY_LABELS: [&str; 4] = [ZONE_LABEL, REGION_LABEL, BETA_ZONE_LABEL, BETA_REGION_LABEL];

/// Who writes the recreated PV's topology.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Writer {
    /// The webhook registered in the cluster: `repair` creates the PV without it, and a
    /// dry run showed the webhook writes the same topology as `repair` would.
    Webhook,
    /// `repair` itself: no webhook wrote the topology in the dry run.
    Repair,
}

impl Writer {
    /// How the plan says it.
    pub fn as_str(self) -> &'static str {
        match self {
            Writer::Webhook => "the webhook",
            Writer::Repair => "repair (no webhook wrote it in a dry run)",
        }
    }
}

/// What a PV says about where it can be used: its zone/region labels (standard and
/// beta) and its nodeAffinity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopologyClaims {
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_affinity: Option<VolumeNodeAffinity>,
}

impl TopologyClaims {
    /// Those of `pv`.
    pub fn of(pv: &PersistentVolume) -> Self {
        let labels = pv
            .metadata
            .labels
            .iter()
            .flatten()
            .filter(|(key, _)| TOPOLOGY_LABELS.contains(&key.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let node_affinity = pv.spec.as_ref().and_then(|s| s.node_affinity.clone());
        Self { labels, node_affinity }
    }

    /// The nodeAffinity requirements as `KEY OP [VALUES]`, one list per term.
    pub fn affinity_text(&self) -> Vec<String> {
        terms(self.node_affinity.as_ref())
            .iter()
            .map(|term| {
                term.match_expressions
                    .iter()
                    .flatten()
                    .map(|r| {
                        format!(
                            "{} {} [{}]",
                            r.key,
                            r.operator,
                            r.values.as_deref().unwrap_or_default().join(", ")
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .collect()
    }
}

fn terms(affinity: Option<&VolumeNodeAffinity>) -> &[NodeSelectorTerm] {
    affinity
        .and_then(|a| a.required.as_ref())
        .map(|r| r.node_selector_terms.as_slice())
        .unwrap_or_default()
}

/// An unfinished repair, kept on the claim from before the first change to the PV until
/// the PV is back, bound, with its topology and its reclaim policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Journal {
    pub version: u32,
    /// The PV's name (the same before and after).
    pub pv: String,
    /// The uid of the PV as it was: a PV of that name with another uid is the new one.
    pub original_uid: String,
    /// The reclaim policy to give back at the end.
    pub reclaim_policy: String,
    pub writer: Writer,
    /// The object created in its place (with reclaim policy Retain until it is bound).
    pub create: PersistentVolume,
    /// What the new PV must say of its topology.
    pub topology: TopologyClaims,
    /// The uid of the new PV, once seen. Recording it updates the claim, which is
    /// what makes the PV controller sync the claim (Lost while its PV was away) at
    /// once instead of at its next resync (15 s by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_uid: Option<String>,
}

impl Journal {
    /// The repair of `original`, recreated as `bare` when the webhook writes the
    /// topology, as `written` when `repair` does; the topology `written` carries.
    pub fn new(original: &PersistentVolume, writer: Writer, bare: PersistentVolume, written: PersistentVolume) -> Self {
        let spec = original.spec.as_ref();
        Journal {
            version: JOURNAL_VERSION,
            pv: original.metadata.name.clone().unwrap_or_default(),
            original_uid: original.metadata.uid.clone().unwrap_or_default(),
            reclaim_policy: spec
                .and_then(|s| s.persistent_volume_reclaim_policy.clone())
                .unwrap_or_else(|| RETAIN.to_owned()),
            writer,
            topology: TopologyClaims::of(&written),
            create: match writer {
                Writer::Webhook => bare,
                Writer::Repair => written,
            },
            new_uid: None,
        }
    }

    /// The annotation's value; refused past [`MAX_JOURNAL_BYTES`].
    pub fn encode(&self) -> Result<String, String> {
        let text = serde_json::to_string(self).map_err(|e| e.to_string())?;
        if text.len() > MAX_JOURNAL_BYTES {
            return Err(format!(
                "the PV is too large to keep in the claim's journal ({} bytes, at most {MAX_JOURNAL_BYTES})",
                text.len()
            ));
        }
        Ok(text)
    }

    /// The journal on `claim`, if any; an unreadable one is an error naming the claim.
    pub fn on(claim: &PersistentVolumeClaim) -> Result<Option<Journal>, String> {
        let Some(text) = claim
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(JOURNAL_ANNOTATION))
        else {
            return Ok(None);
        };
        let journal: Journal = serde_json::from_str(text).map_err(|e| {
            format!(
                "claim {}: annotation {JOURNAL_ANNOTATION} is not a repair journal ({e}); it was not written by this version of repair",
                claim_name(claim)
            )
        })?;
        if journal.version != JOURNAL_VERSION {
            return Err(format!(
                "claim {}: the repair journal is version {}, this repair reads {JOURNAL_VERSION}",
                claim_name(claim),
                journal.version
            ));
        }
        Ok(Some(journal))
    }
}

/// `namespace/name` of a claim.
pub fn claim_name(claim: &PersistentVolumeClaim) -> String {
    format!(
        "{}/{}",
        claim.metadata.namespace.as_deref().unwrap_or_default(),
        claim.metadata.name.as_deref().unwrap_or_default()
    )
}

/// Whether audit's `finding` is one `repair` exists for: nodeAffinity missing, or
/// contradicting the disk. `Err` says why not, and what to do instead.
pub fn wants_repair(finding: &Finding, contradicting: &[Contradiction]) -> Result<(), String> {
    match finding.status {
        Status::MissingAffinity => Ok(()),
        Status::Contradicts
            if contradicting
                .iter()
                .any(|c| matches!(c, Contradiction::Affinity { .. })) =>
        {
            Ok(())
        }
        Status::Contradicts => Err(format!(
            "only its labels contradict the disk ({}): relabel it, `kubectl label --overwrite pv {} KEY=VALUE`",
            finding.detail, finding.name
        )),
        Status::Fine | Status::LabelsFixed => Err("nothing to repair: its nodeAffinity is complete".to_owned()),
        Status::MissingLabels => Err(
            "nothing to repair: its nodeAffinity is complete; its labels are missing (`audit --fix-labels` adds them)"
                .to_owned(),
        ),
        Status::Unresolvable => Err(format!("left alone: {}", finding.detail)),
        Status::NotOurs => Err(format!("left alone: {}", finding.detail)),
    }
}

/// Whether `pv` may be recreated now: bound to `claim` (which is Bound to it, the same
/// claim its claimRef names), and no pod in `users` (unless `allow_in_use`).
pub fn check(
    pv: &PersistentVolume,
    claim: Option<&PersistentVolumeClaim>,
    users: &[String],
    allow_in_use: bool,
) -> Result<(), String> {
    let name = pv.metadata.name.as_deref().unwrap_or_default();
    let phase = pv.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("unknown");
    let Some(claim_ref) = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else {
        return Err(format!(
            "not bound to a claim (phase {phase}): repair keeps its journal on the claim and rebinds it; recreate an unbound PV yourself (`review -f pv.yaml -o pv` shows it with its topology)"
        ));
    };
    let wanted_claim = format!(
        "{}/{}",
        claim_ref.namespace.as_deref().unwrap_or_default(),
        claim_ref.name.as_deref().unwrap_or_default()
    );
    let Some(claim) = claim else {
        return Err(format!(
            "its claim {wanted_claim} does not exist (PV phase {phase}): there is no claim to rebind"
        ));
    };
    if pv.metadata.deletion_timestamp.is_some() {
        return Err("it is being deleted".to_owned());
    }
    if claim_ref.uid.is_some() && claim_ref.uid != claim.metadata.uid {
        return Err(format!(
            "claim {wanted_claim} is not the claim it was bound to (another uid): left alone"
        ));
    }
    let claim_phase = claim
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending");
    if claim_phase != "Bound" {
        return Err(format!(
            "claim {wanted_claim} is {claim_phase}, not Bound: repair rebinds a Bound claim only"
        ));
    }
    if claim.spec.as_ref().and_then(|s| s.volume_name.as_deref()) != Some(name) {
        return Err(format!("claim {wanted_claim} is bound to another volume"));
    }
    if phase != "Bound" {
        return Err(format!("the PV is {phase}, not Bound"));
    }
    if !users.is_empty() && !allow_in_use {
        return Err(format!(
            "claim {wanted_claim} is in use by pod(s) {}: stop them first (scale their workload to 0), or --allow-in-use",
            users.join(", ")
        ));
    }
    Ok(())
}

/// The PV to create in `original`'s place, without its topology (what the webhook is
/// given), and with the topology the webhook would write for `resolved` (what `repair`
/// writes when no webhook does). Both keep everything the operator set (capacity,
/// access modes, mount options, the volume source with its attributes and secret
/// references, storage class, claimRef, labels, annotations) and drop what the
/// apiserver and controllers own (uid, resourceVersion, timestamps, managedFields,
/// finalizers, status); the reclaim policy is Retain until the claim is bound again.
/// Dropped as topology: the standard zone/region labels (written anew) and any
/// topology label or nodeAffinity requirement that contradicts the disk (a term left
/// empty goes, and nodeAffinity when no term is left).
pub fn recreated(
    original: &PersistentVolume,
    identity: &VolumeIdentity,
    resolved: &Resolved,
) -> (PersistentVolume, PersistentVolume) {
    let mut bare = original.clone();
    let metadata = &mut bare.metadata;
    metadata.uid = None;
    metadata.resource_version = None;
    metadata.creation_timestamp = None;
    metadata.deletion_timestamp = None;
    metadata.deletion_grace_period_seconds = None;
    metadata.generation = None;
    metadata.managed_fields = None;
    metadata.finalizers = None;
    metadata.self_link = None;
    bare.status = None;

    let wrong = contradictions(original, resolved);
    if let Some(labels) = bare.metadata.labels.as_mut() {
        labels.remove(ZONE_LABEL);
        labels.remove(REGION_LABEL);
        for contradiction in &wrong {
            if let Contradiction::Label { key, .. } = contradiction {
                labels.remove(key);
            }
        }
    }
    let spec = bare.spec.get_or_insert_with(PersistentVolumeSpec::default);
    spec.persistent_volume_reclaim_policy = Some(RETAIN.to_owned());
    if let Some(claim_ref) = spec.claim_ref.as_mut() {
        claim_ref.resource_version = None;
    }
    if let Some(affinity) = spec.node_affinity.as_mut()
        && let Some(required) = affinity.required.as_mut()
    {
        for contradiction in &wrong {
            if let Contradiction::Affinity {
                term,
                key,
                operator,
                values,
                ..
            } = contradiction
                && let Some(term) = required.node_selector_terms.get_mut(*term)
                && let Some(expressions) = term.match_expressions.as_mut()
            {
                expressions.retain(|r| {
                    !(r.key == *key && r.operator == *operator && r.values.as_deref().unwrap_or_default() == values)
                });
            }
        }
        required.node_selector_terms.retain(|t| {
            t.match_expressions.as_ref().is_some_and(|e| !e.is_empty())
                || t.match_fields.as_ref().is_some_and(|f| !f.is_empty())
        });
        if required.node_selector_terms.is_empty() {
            spec.node_affinity = None;
        }
    }

    let volume = Volume {
        pv: &bare,
        identity: identity.clone(),
        affinity_too_large: false,
    };
    let topology = wanted(&volume, resolved, &mut Vec::new());
    let mut written = bare.clone();
    written.metadata.labels = topology.metadata.labels;
    written
        .spec
        .get_or_insert_with(PersistentVolumeSpec::default)
        .node_affinity = topology.spec.and_then(|s| s.node_affinity);
    (bare, written)
}

/// What is in the cluster now, for one repair with a journal.
#[derive(Debug, Clone, Copy)]
pub struct Observed<'a> {
    /// The PV of the journal's name, if there is one.
    pub pv: Option<&'a PersistentVolume>,
    pub claim: &'a PersistentVolumeClaim,
    /// Pods using the claim (asked for while the original PV is there).
    pub users: &'a [String],
    pub allow_in_use: bool,
}

/// The next request of a repair whose journal is `journal`.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Set the original PV's reclaim policy to Retain.
    Retain,
    /// Delete the PV (the original, or a new one with the wrong topology) if it is
    /// still `uid` at `resource_version`.
    Delete { uid: String, resource_version: String },
    /// The PV is marked for deletion and still bound: take the PV protection finalizer
    /// off (the disk stays: the reclaim policy is Retain).
    Unprotect {
        resource_version: String,
        finalizers: Vec<String>,
    },
    /// Other finalizers than the protection's remain: wait for their controllers.
    WaitGone { finalizers: Vec<String> },
    /// Create the journal's object.
    Create,
    /// The new PV is there: record its uid in the journal (on the claim).
    RecordNewPv { uid: String },
    /// The new PV is recorded: wait for the PV controller to bind it and the claim.
    WaitBound,
    /// Set the PV's reclaim policy back to `policy`.
    RestorePolicy { policy: String },
    /// The webhook wrote another topology than the dry run showed: write it ourselves.
    WriteItOurselves,
    /// Take the journal off the claim: the repair is finished (`done`) or undone.
    ClearJournal { done: bool },
    /// Stop: what happened and what to do, with the journal kept.
    Stuck(String),
}

/// The next step of the repair `journal`, from what is in the cluster now.
pub fn next_step(journal: &Journal, observed: &Observed<'_>) -> Step {
    let Some(pv) = observed.pv else {
        return Step::Create;
    };
    let uid = pv.metadata.uid.clone().unwrap_or_default();
    let resource_version = pv.metadata.resource_version.clone().unwrap_or_default();
    let policy = pv
        .spec
        .as_ref()
        .and_then(|s| s.persistent_volume_reclaim_policy.as_deref())
        .unwrap_or("Retain")
        .to_owned();
    if pv.metadata.deletion_timestamp.is_some() {
        let finalizers = pv.metadata.finalizers.clone().unwrap_or_default();
        if policy != RETAIN {
            // Never: repair marks only a Retain PV for deletion.
            return Step::Stuck(format!(
                "PV {} is being deleted with reclaim policy {policy}: not touched (set it to Retain to keep the disk)",
                journal.pv
            ));
        }
        if finalizers.iter().any(|f| f == PROTECTION_FINALIZER) {
            let finalizers = finalizers.into_iter().filter(|f| f != PROTECTION_FINALIZER).collect();
            return Step::Unprotect {
                resource_version,
                finalizers,
            };
        }
        return Step::WaitGone { finalizers };
    }
    if uid == journal.original_uid {
        if !observed.users.is_empty() && !observed.allow_in_use {
            // Pods came while the repair was under way: put everything back.
            if policy != journal.reclaim_policy {
                return Step::RestorePolicy {
                    policy: journal.reclaim_policy.clone(),
                };
            }
            return Step::ClearJournal { done: false };
        }
        if policy != RETAIN {
            return Step::Retain;
        }
        return Step::Delete { uid, resource_version };
    }
    // The new PV.
    if TopologyClaims::of(pv) != journal.topology {
        return match journal.writer {
            Writer::Webhook => Step::WriteItOurselves,
            Writer::Repair if policy == RETAIN => Step::Delete { uid, resource_version },
            Writer::Repair => Step::Stuck(format!(
                "the new PV {} does not carry the topology repair wrote (another webhook changed it?), and its reclaim policy is {policy}: not touched",
                journal.pv
            )),
        };
    }
    if !bound_to(pv, observed.claim) {
        if journal.new_uid.as_deref() != Some(uid.as_str()) {
            return Step::RecordNewPv { uid };
        }
        return Step::WaitBound;
    }
    if policy != journal.reclaim_policy {
        return Step::RestorePolicy {
            policy: journal.reclaim_policy.clone(),
        };
    }
    Step::ClearJournal { done: true }
}

/// Whether `pv` and `claim` are bound to each other, both Bound.
pub fn bound_to(pv: &PersistentVolume, claim: &PersistentVolumeClaim) -> bool {
    let claim_ref = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
    let pv_bound = pv.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
    let claim_bound = claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
    pv_bound
        && claim_bound
        && claim_ref.is_some_and(|r| r.uid.is_some() && r.uid == claim.metadata.uid)
        && claim.spec.as_ref().and_then(|s| s.volume_name.as_deref()) == pv.metadata.name.as_deref()
}

/// Who writes the topology, from what admission made of `bare` in a dry run
/// (`admitted`): the webhook, when it wrote what `repair` would (`written`); `repair`,
/// when nothing wrote a topology. Anything else is refused: the webhook's settings and
/// `repair`'s topology flags disagree, and the PV is not recreated on a guess.
pub fn writer(
    bare: &PersistentVolume,
    written: &PersistentVolume,
    admitted: &PersistentVolume,
) -> Result<Writer, String> {
    let admitted = TopologyClaims::of(admitted);
    let written = TopologyClaims::of(written);
    if admitted == written {
        Ok(Writer::Webhook)
    } else if admitted == TopologyClaims::of(bare) {
        Ok(Writer::Repair)
    } else {
        Err(format!(
            "in a dry run the cluster's admission (the webhook?) writes {}, but repair's topology flags give {}: run repair with the webhook's topology flags",
            admitted.describe(),
            written.describe()
        ))
    }
}

impl TopologyClaims {
    /// `labels A=B, …; nodeAffinity [K In [V]] or […]`, for a line.
    pub fn describe(&self) -> String {
        let labels = self
            .labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", ");
        let terms = self
            .affinity_text()
            .iter()
            .map(|t| format!("[{t}]"))
            .collect::<Vec<_>>()
            .join(" or ");
        format!(
            "labels {}; nodeAffinity {}",
            if labels.is_empty() { "none" } else { &labels },
            if terms.is_empty() { "none" } else { &terms }
        )
    }
}

impl Journal {
    /// The same repair with `repair` writing the topology: the journal's object given
    /// the topology it must carry.
    pub fn written_by_repair(&self) -> Journal {
        let mut create = self.create.clone();
        let labels = create.metadata.labels.get_or_insert_with(BTreeMap::new);
        labels.retain(|key, _| !TOPOLOGY_LABELS.contains(&key.as_str()));
        labels.extend(self.topology.labels.clone());
        create
            .spec
            .get_or_insert_with(PersistentVolumeSpec::default)
            .node_affinity = self.topology.node_affinity.clone();
        Journal {
            writer: Writer::Repair,
            create,
            ..self.clone()
        }
    }
}
