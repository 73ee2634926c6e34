//! The admission decision: given a request and the topology resolved for its volume,
//! the response (labels and nodeAffinity as a JSON Patch, warnings, audit annotations).
//! Pure and deterministic: no I/O, no clock, and the same input gives the same answer.

use std::collections::BTreeSet;

use json_patch::jsonptr::{PointerBuf, Token};
use json_patch::{AddOperation, Patch, PatchOperation, ReplaceOperation};
use k8s_openapi::api::core::v1::{NodeSelectorRequirement, PersistentVolume};
use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};
use serde_json::{Value, json};

use crate::resolve::{Resolution, Resolved, TopologySource};
use crate::review::ReviewObject;
use crate::source::{VolumeIdentity, identify};
use crate::topology::{REGION_LABEL, ZONE_LABEL, zones_of_label};

/// Set by external provisioners on the PVs they create; with both topology labels it
/// means the labels are the provisioner's and are trusted (as the in-tree plugin did).
pub const PROVISIONED_BY_ANNOTATION: &str = "pv.kubernetes.io/provisioned-by";
/// Audit annotation key for the [`Outcome`]. The apiserver prefixes keys with the
/// webhook's name (`<webhook name>/outcome`), so the key itself carries no prefix: a
/// second `/` would make it invalid and the apiserver would drop it.
pub const OUTCOME_AUDIT_KEY: &str = "outcome";
/// Audit annotation key for where the topology came from.
pub const SOURCE_AUDIT_KEY: &str = "source";
/// Most items (terms, requirements and values together) a PV's nodeAffinity may have
/// for us to read it and add our requirements to each term; PVs have a term, or one per
/// zone, of a requirement or two. Beyond it nodeAffinity is left alone, with a warning:
/// neither what is read of it nor the answer (one patch operation per term) can grow
/// with the request.
pub const MAX_AFFINITY_ITEMS: usize = 1024;

/// What to do when a configured lookup fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnLookupError {
    /// Refuse the PV: better no PV than one with no or wrong topology.
    #[default]
    Deny,
    /// Admit the PV unchanged, with a warning.
    Allow,
}

/// Settings of the decision.
#[derive(Debug, Clone, Default)]
pub struct DecisionConfig {
    pub on_lookup_error: OnLookupError,
}

/// What happened to a request; the value of the `outcome` audit annotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Not a CREATE of a PersistentVolume.
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
    /// No resolution was supplied for a volume that needed one.
    Unresolved,
}

impl Outcome {
    /// Every outcome, for metrics labels.
    pub const ALL: [Outcome; 11] = [
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
        Outcome::Unresolved,
    ];

    /// The audit annotation value.
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
            Outcome::Unresolved => "unresolved",
        }
    }
}

enum Reading<'a> {
    Skip(Outcome, Option<String>),
    /// The PV, its volume, and whether its nodeAffinity is too large to read.
    Volume(&'a PersistentVolume, VolumeIdentity, bool),
}

/// The volume whose topology must be resolved before [`decide`], or `None` when the
/// request needs no topology (not a PV CREATE, trusted, unrecognized source, …).
pub fn volume_to_resolve(request: &AdmissionRequest<ReviewObject>) -> Option<VolumeIdentity> {
    match read(request) {
        Reading::Volume(_, volume, _) => Some(volume),
        Reading::Skip(..) => None,
    }
}

/// The answer to `request`, given the topology resolved for the volume returned by
/// [`volume_to_resolve`] (or [`Resolution::NotNeeded`] when that was `None`).
pub fn decide(
    request: &AdmissionRequest<ReviewObject>,
    resolution: &Resolution,
    config: &DecisionConfig,
) -> AdmissionResponse {
    let response = AdmissionResponse::from(request);
    let (pv, volume, affinity_too_large) = match read(request) {
        Reading::Skip(outcome, warning) => {
            return finish(response, outcome, None, warning.into_iter().collect());
        }
        Reading::Volume(pv, volume, affinity_too_large) => (pv, volume, affinity_too_large),
    };
    match resolution {
        Resolution::Resolved(resolved) => apply(request, response, pv, affinity_too_large, resolved),
        Resolution::Placeholder => finish(response, Outcome::Placeholder, None, Vec::new()),
        Resolution::Unrecognized => finish(response, Outcome::Unrecognized, None, Vec::new()),
        Resolution::NotConfigured { flag } => finish(
            response,
            Outcome::NotConfigured,
            None,
            vec![format!(
                "{volume}: no topology source is configured for it; enable one with {flag}"
            )],
        ),
        Resolution::Invalid { source, reason } => finish(
            response,
            Outcome::InvalidTopology,
            Some(source),
            vec![format!(
                "{volume}: {source} gave an unusable topology ({reason}); admitted without topology"
            )],
        ),
        Resolution::LookupFailed { lookup, error } => {
            let cause = format!("cannot find the topology of {volume}: lookup {lookup} failed: {error}");
            let source = TopologySource::Lookup(lookup.clone());
            match config.on_lookup_error {
                OnLookupError::Deny => {
                    let mut denied = response.deny(format!("{cause} (--on-lookup-error=deny)"));
                    denied.result.code = 403;
                    denied.result.reason = "Forbidden".to_owned();
                    finish(denied, Outcome::LookupFailed, Some(&source), Vec::new())
                }
                OnLookupError::Allow => finish(
                    response,
                    Outcome::LookupFailed,
                    Some(&source),
                    vec![format!("{cause}; admitted without topology (--on-lookup-error=allow)")],
                ),
            }
        }
        Resolution::NotNeeded => finish(response, Outcome::Unresolved, None, Vec::new()),
    }
}

fn read(request: &AdmissionRequest<ReviewObject>) -> Reading<'_> {
    let is_pv_create = request.operation == Operation::Create
        && request.resource.group.is_empty()
        && request.resource.resource == "persistentvolumes"
        && request.sub_resource.is_none();
    if !is_pv_create {
        return Reading::Skip(Outcome::NotApplicable, None);
    }
    let unreadable = |reason: String| {
        Reading::Skip(
            Outcome::Unreadable,
            Some(format!(
                "pv-topology-webhook could not read the PersistentVolume ({reason}); admitted unchanged"
            )),
        )
    };
    let Some(object) = &request.object else {
        return unreadable("the request has no object".to_owned());
    };
    let pv = match object.persistent_volume() {
        Ok(pv) => pv,
        Err(reason) => return unreadable(reason.to_owned()),
    };
    if is_trusted(pv) {
        return Reading::Skip(Outcome::Trusted, None);
    }
    match pv.spec.as_ref().and_then(identify) {
        Some(volume) => Reading::Volume(pv, volume, object.affinity_too_large()),
        None => Reading::Skip(Outcome::Unrecognized, None),
    }
}

fn is_trusted(pv: &PersistentVolume) -> bool {
    let provisioned = pv
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(PROVISIONED_BY_ANNOTATION));
    let labeled = pv.metadata.labels.as_ref().is_some_and(|l| {
        [ZONE_LABEL, REGION_LABEL]
            .iter()
            .all(|key| l.get(*key).is_some_and(|v| !v.is_empty()))
    });
    provisioned && labeled
}

fn apply(
    request: &AdmissionRequest<ReviewObject>,
    response: AdmissionResponse,
    pv: &PersistentVolume,
    affinity_too_large: bool,
    resolved: &Resolved,
) -> AdmissionResponse {
    let mut ops = Vec::new();
    let mut warnings = resolved.notes.clone();
    label_ops(pv, resolved, &mut ops, &mut warnings);
    affinity_ops(pv, affinity_too_large, &requirements(resolved), &mut ops, &mut warnings);
    if ops.is_empty() {
        return finish(response, Outcome::Unchanged, Some(&resolved.source), warnings);
    }
    match response.with_patch(Patch(ops)) {
        Ok(patched) => finish(patched, Outcome::Labeled, Some(&resolved.source), warnings),
        // Serializing a patch of strings cannot fail; should it, admit unchanged.
        Err(e) => {
            warnings.push(format!("pv-topology-webhook: {e}; admitted unchanged"));
            finish(
                AdmissionResponse::from(request),
                Outcome::Unreadable,
                Some(&resolved.source),
                warnings,
            )
        }
    }
}

fn pointer(tokens: &[&str]) -> PointerBuf {
    PointerBuf::from_tokens(tokens.iter().copied())
}

fn add(path: PointerBuf, value: Value) -> PatchOperation {
    PatchOperation::Add(AddOperation { path, value })
}

/// Sets the zone/region labels; a label that disagrees is replaced, with a warning,
/// because a wrong topology label is worse than none.
fn label_ops(pv: &PersistentVolume, resolved: &Resolved, ops: &mut Vec<PatchOperation>, warnings: &mut Vec<String>) {
    let desired = resolved.topology.labels();
    let Some(existing) = &pv.metadata.labels else {
        let labels: serde_json::Map<String, Value> = desired
            .into_iter()
            .map(|(key, value)| (key.to_owned(), Value::String(value)))
            .collect();
        ops.push(add(pointer(&["metadata", "labels"]), Value::Object(labels)));
        return;
    };
    for (key, value) in desired {
        let path = pointer(&["metadata", "labels", key]);
        match existing.get(key) {
            None => ops.push(add(path, Value::String(value))),
            Some(old) if same_label(key, old, &value) => {}
            Some(old) => {
                warnings.push(format!("label {key}: replaced {old:?} with {value:?}"));
                ops.push(PatchOperation::Replace(ReplaceOperation {
                    path,
                    value: Value::String(value),
                }));
            }
        }
    }
}

fn same_label(key: &str, old: &str, new: &str) -> bool {
    // The zones of a regional disk may have been written in another order.
    old == new || (key == ZONE_LABEL && zones_of_label(old) == zones_of_label(new))
}

/// The nodeAffinity requirements for the resolved topology, zone first.
fn requirements(resolved: &Resolved) -> Vec<(String, Vec<String>)> {
    let mut requirements: Vec<(String, Vec<String>)> = Vec::new();
    let zones = resolved.topology.zones();
    if let Some(key) = &resolved.affinity.zone
        && !zones.is_empty()
    {
        requirements.push((key.clone(), zones.to_vec()));
    }
    if let (Some(key), Some(region)) = (&resolved.affinity.region, resolved.topology.region())
        && !requirements.iter().any(|(k, _)| k == key)
    {
        requirements.push((key.clone(), vec![region.to_owned()]));
    }
    requirements
}

fn requirement_json(key: &str, values: &[String]) -> Value {
    json!({ "key": key, "operator": "In", "values": values })
}

fn term_json(requirements: &[(String, Vec<String>)]) -> Value {
    let expressions: Vec<Value> = requirements
        .iter()
        .map(|(key, values)| requirement_json(key, values))
        .collect();
    json!({ "matchExpressions": expressions })
}

/// Adds the requirements to nodeAffinity unless some term already names one of their
/// keys: then the user (or a provisioner) decided, and we only warn on disagreement.
fn affinity_ops(
    pv: &PersistentVolume,
    too_large: bool,
    requirements: &[(String, Vec<String>)],
    ops: &mut Vec<PatchOperation>,
    warnings: &mut Vec<String>,
) {
    if requirements.is_empty() {
        return;
    }
    if too_large {
        // Only the first MAX_AFFINITY_ITEMS were read (review::ReviewObject).
        warnings.push(format!(
            "nodeAffinity has more than {MAX_AFFINITY_ITEMS} terms, requirements and values; left unchanged: add {} to each term yourself",
            requirements
                .iter()
                .map(|(key, values)| format!("{key} In {values:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        return;
    }
    let required = json!({ "nodeSelectorTerms": [term_json(requirements)] });
    let affinity = pv.spec.as_ref().and_then(|s| s.node_affinity.as_ref());
    let Some(affinity) = affinity else {
        ops.push(add(pointer(&["spec", "nodeAffinity"]), json!({ "required": required })));
        return;
    };
    let Some(selector) = &affinity.required else {
        ops.push(add(pointer(&["spec", "nodeAffinity", "required"]), required));
        return;
    };
    let terms = &selector.node_selector_terms;
    if terms.is_empty() {
        // No term matches no node; the apiserver refuses it anyway, so give it ours.
        ops.push(PatchOperation::Replace(ReplaceOperation {
            path: pointer(&["spec", "nodeAffinity", "required"]),
            value: required,
        }));
        return;
    }
    let ours: BTreeSet<&str> = requirements.iter().map(|(k, _)| k.as_str()).collect();
    let mut named = false;
    for (index, term) in terms.iter().enumerate() {
        for existing in term.match_expressions.iter().flatten() {
            if !ours.contains(existing.key.as_str()) {
                continue;
            }
            named = true;
            if let Some((_, want)) = requirements.iter().find(|(k, _)| *k == existing.key)
                && !agrees(existing, want)
            {
                warnings.push(format!(
                    "nodeAffinity term {index}: {} {} {:?} disagrees with the volume's {:?}; nodeAffinity left unchanged",
                    existing.key,
                    existing.operator,
                    existing.values.as_deref().unwrap_or_default(),
                    want
                ));
            }
        }
    }
    if named {
        return;
    }
    // Terms are OR'ed: our requirements must hold in each of them.
    for (index, term) in terms.iter().enumerate() {
        let term_path = |rest: &[&str]| {
            let mut path = PointerBuf::from_tokens([
                Token::from("spec"),
                Token::from("nodeAffinity"),
                Token::from("required"),
                Token::from("nodeSelectorTerms"),
                Token::from(index),
            ]);
            for token in rest {
                path.push_back(*token);
            }
            path
        };
        match &term.match_expressions {
            None => {
                let expressions: Vec<Value> = requirements
                    .iter()
                    .map(|(key, values)| requirement_json(key, values))
                    .collect();
                ops.push(add(term_path(&["matchExpressions"]), Value::Array(expressions)));
            }
            Some(_) => {
                for (key, values) in requirements {
                    ops.push(add(
                        term_path(&["matchExpressions", "-"]),
                        requirement_json(key, values),
                    ));
                }
            }
        }
    }
}

fn agrees(existing: &NodeSelectorRequirement, want: &[String]) -> bool {
    let have: BTreeSet<&str> = existing.values.iter().flatten().map(String::as_str).collect();
    let want: BTreeSet<&str> = want.iter().map(String::as_str).collect();
    existing.operator == "In" && have == want
}

fn finish(
    mut response: AdmissionResponse,
    outcome: Outcome,
    source: Option<&TopologySource>,
    warnings: Vec<String>,
) -> AdmissionResponse {
    response
        .audit_annotations
        .insert(OUTCOME_AUDIT_KEY.to_owned(), outcome.as_str().to_owned());
    if let Some(source) = source {
        response
            .audit_annotations
            .insert(SOURCE_AUDIT_KEY.to_owned(), source.to_string());
    }
    if !warnings.is_empty() {
        response.warnings = Some(warnings);
    }
    response
}
