//! The admission decision: what a request is about ([`subject`]), and, given the topology
//! resolved for its volume, the [`Decision`] (labels and nodeAffinity as a JSON Patch,
//! warnings, audit annotations, the typed outcome). Pure and deterministic: no I/O, no
//! clock, and the same input gives the same answer.

use std::collections::{BTreeMap, BTreeSet};

use json_patch::Patch;
use k8s_openapi::api::core::v1::{
    NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PersistentVolume, PersistentVolumeSpec, VolumeNodeAffinity,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};

use crate::answer::{finish, invalid_topology, lookup_failed, provisioner};
pub use crate::model::{Decision, DecisionConfig, OnLookupError, Outcome, Subject, Volume};
use crate::model::{LookupResult, Resolution, Resolved, ReviewObject, TopologySource};
use crate::patch;
use crate::source::identify_pv;
use crate::topology::{REGION_LABEL, ZONE_LABEL, zones_of_label};

pub use crate::answer::MAX_MESSAGE_CHARS;
pub use crate::model::MAX_AFFINITY_ITEMS;

/// What a request is about: read once, before any lookup. A PV CREATE whose volume we
/// recognize is a [`Subject::Volume`] to resolve; everything else is answered at once.
pub fn subject(request: &AdmissionRequest<ReviewObject>) -> Subject<'_> {
    let skip = |outcome, warning| Subject::Skip { outcome, warning };
    let is_pv_create = request.operation == Operation::Create
        && request.resource.group.is_empty()
        && request.resource.resource == "persistentvolumes"
        && request.sub_resource.is_none();
    if !is_pv_create {
        return skip(Outcome::NotApplicable, None);
    }
    let unreadable = |reason: String| {
        skip(
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
        return skip(Outcome::Trusted, None);
    }
    match identify_pv(pv) {
        Some(identity) => Subject::Volume(Volume {
            pv,
            identity,
            affinity_too_large: object.affinity_too_large(),
        }),
        None => skip(Outcome::Unrecognized, None),
    }
}

/// The answer to a request about `volume` (its [`Subject::Volume`]), given the topology
/// resolved for it.
pub fn decide(
    request: &AdmissionRequest<ReviewObject>,
    volume: &Volume<'_>,
    resolution: &Resolution,
    config: &DecisionConfig,
) -> Decision {
    let response = AdmissionResponse::from(request);
    let identity = &volume.identity;
    match resolution {
        Resolution::Resolved(resolved) => apply(request, response, volume, resolved),
        Resolution::Placeholder => finish(response, Outcome::Placeholder, None, None, Vec::new()),
        Resolution::Unrecognized => finish(response, Outcome::Unrecognized, None, None, Vec::new()),
        Resolution::NotConfigured { flag } => finish(
            response,
            Outcome::NotConfigured,
            None,
            None,
            vec![format!(
                "{identity}: no topology source is configured for it; enable one with {flag}"
            )],
        ),
        Resolution::Invalid { source, reason } => invalid_topology(response, volume, source, reason),
        Resolution::LookupFailed { lookup, error } => {
            let cause = format!("cannot find the topology of {identity}: lookup {lookup} failed: {error}");
            lookup_failed(response, cause, lookup, error, config)
        }
    }
}

/// Whether `pv` is a provisioned PV with both topology labels, whose labels /mutate
/// trusts (and `audit` too).
pub(crate) fn is_trusted(pv: &PersistentVolume) -> bool {
    let provisioned = provisioner(pv).is_some();
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
    volume: &Volume<'_>,
    resolved: &Resolved,
) -> Decision {
    let source = Some(resolved.source.clone());
    let result = matches!(resolved.source, TopologySource::Lookup(_)).then_some(LookupResult::Success);
    let mut warnings = resolved.notes.clone();
    let after = wanted(volume, resolved, &mut warnings);
    let ops = patch::diff(volume.pv, &after);
    if ops.is_empty() {
        return finish(response, Outcome::Unchanged, source, result, warnings);
    }
    match response.with_patch(Patch(ops)) {
        Ok(patched) => finish(patched, Outcome::Labeled, source, result, warnings),
        // Serializing a patch of strings cannot fail; should it, admit unchanged.
        Err(e) => {
            warnings.push(format!("pv-topology-webhook: {e}; admitted unchanged"));
            finish(
                AdmissionResponse::from(request),
                Outcome::Unreadable,
                source,
                result,
                warnings,
            )
        }
    }
}

/// The PV as the decision wants it, in the parts it may change (the labels and
/// nodeAffinity; the rest is left out), with warnings for what it leaves alone. `audit`
/// compares a stored PV with it to find what /mutate would have added.
pub(crate) fn wanted(volume: &Volume<'_>, resolved: &Resolved, warnings: &mut Vec<String>) -> PersistentVolume {
    let pv = volume.pv;
    let mut labels = pv.metadata.labels.clone();
    set_labels(&mut labels, resolved, warnings);
    let mut node_affinity = pv.spec.as_ref().and_then(|s| s.node_affinity.clone());
    add_requirements(
        &mut node_affinity,
        volume.affinity_too_large,
        &requirements(resolved),
        warnings,
    );
    PersistentVolume {
        metadata: ObjectMeta {
            labels,
            ..ObjectMeta::default()
        },
        spec: Some(PersistentVolumeSpec {
            node_affinity,
            ..PersistentVolumeSpec::default()
        }),
        status: None,
    }
}

/// Sets the zone/region labels; a label that disagrees is replaced, with a warning,
/// because a wrong topology label is worse than none.
fn set_labels(labels: &mut Option<BTreeMap<String, String>>, resolved: &Resolved, warnings: &mut Vec<String>) {
    let labels = labels.get_or_insert_with(BTreeMap::new);
    for (key, value) in resolved.topology.labels() {
        match labels.get(key) {
            Some(old) if same_label(key, old, &value) => {}
            Some(old) => {
                warnings.push(format!("label {key}: replaced {old:?} with {value:?}"));
                labels.insert(key.to_owned(), value);
            }
            None => {
                labels.insert(key.to_owned(), value);
            }
        }
    }
}

fn same_label(key: &str, old: &str, new: &str) -> bool {
    // The zones of a regional disk may have been written in another order.
    old == new || (key == ZONE_LABEL && zones_of_label(old) == zones_of_label(new))
}

/// The nodeAffinity requirements for the resolved topology, zone first.
fn requirements(resolved: &Resolved) -> Vec<NodeSelectorRequirement> {
    let mut requirements: Vec<NodeSelectorRequirement> = Vec::new();
    let zones = resolved.topology.zones();
    if let Some(key) = &resolved.affinity.zone
        && !zones.is_empty()
    {
        requirements.push(requirement(key, zones.to_vec()));
    }
    if let (Some(key), Some(region)) = (&resolved.affinity.region, resolved.topology.region())
        && !requirements.iter().any(|r| r.key == *key)
    {
        requirements.push(requirement(key, vec![region.to_owned()]));
    }
    requirements
}

fn requirement(key: &str, values: Vec<String>) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: key.to_owned(),
        operator: "In".to_owned(),
        values: Some(values),
    }
}

/// Adds the requirements to nodeAffinity unless some term already names one of their
/// keys: then the user (or a provisioner) decided, and we only warn on disagreement.
fn add_requirements(
    affinity: &mut Option<VolumeNodeAffinity>,
    too_large: bool,
    requirements: &[NodeSelectorRequirement],
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
                .map(|r| format!("{} In {:?}", r.key, r.values.as_deref().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        return;
    }
    let ours = || NodeSelectorTerm {
        match_expressions: Some(requirements.to_vec()),
        match_fields: None,
    };
    let selector = affinity
        .get_or_insert_with(VolumeNodeAffinity::default)
        .required
        .get_or_insert_with(NodeSelector::default);
    let terms = &mut selector.node_selector_terms;
    if terms.is_empty() {
        // No term matches no node; the apiserver refuses it anyway, so give it ours.
        terms.push(ours());
        return;
    }
    let keys: BTreeSet<&str> = requirements.iter().map(|r| r.key.as_str()).collect();
    let mut named = false;
    for (index, term) in terms.iter().enumerate() {
        for existing in term.match_expressions.iter().flatten() {
            if !keys.contains(existing.key.as_str()) {
                continue;
            }
            named = true;
            if let Some(want) = requirements.iter().find(|r| r.key == existing.key)
                && !agrees(existing, want.values.as_deref().unwrap_or_default())
            {
                warnings.push(format!(
                    "nodeAffinity term {index}: {} {} {:?} disagrees with the volume's {:?}; nodeAffinity left unchanged",
                    existing.key,
                    existing.operator,
                    existing.values.as_deref().unwrap_or_default(),
                    want.values.as_deref().unwrap_or_default()
                ));
            }
        }
    }
    if named {
        return;
    }
    // Terms are OR'ed: our requirements must hold in each of them.
    for term in terms {
        term.match_expressions
            .get_or_insert_with(Vec::new)
            .extend_from_slice(requirements);
    }
}

fn agrees(existing: &NodeSelectorRequirement, want: &[String]) -> bool {
    let have: BTreeSet<&str> = existing.values.iter().flatten().map(String::as_str).collect();
    let want: BTreeSet<&str> = want.iter().map(String::as_str).collect();
    existing.operator == "In" && have == want
}
