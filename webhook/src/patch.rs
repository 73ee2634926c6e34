//! The JSON Patch from a PV as read to the PV the decision wants: a diff of the two typed
//! PVs over the parts the decision may change (the labels and nodeAffinity), the way
//! `json_patch::diff` diffs two documents, except for two things the reduced PV calls
//! for. It was read in part ([`crate::review::ReviewObject`]), so nothing is replaced
//! that may hold what was not read: a term's `matchExpressions` (read whole: every
//! requirement's key, operator and values) is replaced as a list, never the term (its
//! `matchFields` were not read), and a selector without terms is replaced whole (its
//! `nodeSelectorTerms` may have been absent or `null`). Replacing rather than appending
//! (`-`) makes the patch idempotent: applied twice, it gives what it gave once. Maps
//! are diffed key by key, so the labels the PV had and we did not read are kept.

use std::collections::BTreeMap;

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation, ReplaceOperation};
use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorTerm, PersistentVolume, VolumeNodeAffinity};
use serde::Serialize;
use serde_json::Value;

/// The operations that turn `before` into `after`, which differ at most in the labels
/// and nodeAffinity, by adding or replacing (the decision never removes).
pub fn diff(before: &PersistentVolume, after: &PersistentVolume) -> Vec<PatchOperation> {
    let mut ops = Vec::new();
    labels(
        before.metadata.labels.as_ref(),
        after.metadata.labels.as_ref(),
        &mut ops,
    );
    affinity(node_affinity(before), node_affinity(after), &mut ops);
    ops
}

fn node_affinity(pv: &PersistentVolume) -> Option<&VolumeNodeAffinity> {
    pv.spec.as_ref().and_then(|spec| spec.node_affinity.as_ref())
}

fn pointer(tokens: &[&str]) -> PointerBuf {
    PointerBuf::from_tokens(tokens.iter().copied())
}

fn value(of: &impl Serialize) -> Value {
    // Serializing maps of strings and k8s-openapi structs cannot fail.
    serde_json::to_value(of).unwrap_or(Value::Null)
}

fn add(path: PointerBuf, of: &impl Serialize) -> PatchOperation {
    PatchOperation::Add(AddOperation { path, value: value(of) })
}

fn replace(path: PointerBuf, of: &impl Serialize) -> PatchOperation {
    PatchOperation::Replace(ReplaceOperation { path, value: value(of) })
}

fn labels(
    before: Option<&BTreeMap<String, String>>,
    after: Option<&BTreeMap<String, String>>,
    ops: &mut Vec<PatchOperation>,
) {
    match (before, after) {
        (None, Some(after)) => ops.push(add(pointer(&["metadata", "labels"]), after)),
        (Some(before), Some(after)) => {
            for (key, new) in after {
                let path = || pointer(&["metadata", "labels", key]);
                match before.get(key) {
                    None => ops.push(add(path(), new)),
                    Some(old) if old != new => ops.push(replace(path(), new)),
                    Some(_) => {}
                }
            }
        }
        (_, None) => {}
    }
}

fn affinity(before: Option<&VolumeNodeAffinity>, after: Option<&VolumeNodeAffinity>, ops: &mut Vec<PatchOperation>) {
    match (before, after) {
        (None, Some(after)) => ops.push(add(pointer(&["spec", "nodeAffinity"]), after)),
        (Some(before), Some(after)) => match (&before.required, &after.required) {
            (None, Some(required)) => ops.push(add(pointer(&["spec", "nodeAffinity", "required"]), required)),
            (Some(before), Some(after)) => selector(before, after, ops),
            (_, None) => {}
        },
        (_, None) => {}
    }
}

fn selector(before: &NodeSelector, after: &NodeSelector, ops: &mut Vec<PatchOperation>) {
    if before == after {
        return;
    }
    if before.node_selector_terms.is_empty() {
        ops.push(replace(pointer(&["spec", "nodeAffinity", "required"]), after));
        return;
    }
    for (index, (old, new)) in before
        .node_selector_terms
        .iter()
        .zip(&after.node_selector_terms)
        .enumerate()
    {
        term(index, old, new, ops);
    }
}

fn term(index: usize, before: &NodeSelectorTerm, after: &NodeSelectorTerm, ops: &mut Vec<PatchOperation>) {
    let path = |rest: &[&str]| {
        let mut path = pointer(&["spec", "nodeAffinity", "required", "nodeSelectorTerms"]);
        path.push_back(index);
        for token in rest {
            path.push_back(*token);
        }
        path
    };
    match (&before.match_expressions, &after.match_expressions) {
        (None, Some(after)) => ops.push(add(path(&["matchExpressions"]), after)),
        (Some(before), Some(after)) if before != after => ops.push(replace(path(&["matchExpressions"]), after)),
        (Some(_), Some(_)) => {}
        (_, None) => {}
    }
}
