//! How the decision is merged into the PV as sent, through the same review
//! path the CLI and the server use: existing nodeAffinity terms (ours added
//! to each, or left alone with a warning), the caps on what an answer adds,
//! and labels that conflict with the topology.

mod common;
mod decision_common;

use common::*;
use decision_common::{GCE, affinity_terms};
use pv_topology_webhook::decision::MAX_AFFINITY_ITEMS;
use serde_json::{Value, json};

#[tokio::test]
async fn existing_terms_without_our_keys_get_our_requirement_each() {
    let body = fixture("existing-affinity.json");
    let answer = assert_idempotent(&plain(), &body).await;
    let requirement = json!({"key": "topology.gke.io/zone", "operator": "In", "values": ["europe-west1-b"]});
    assert_eq!(
        answer.patch_json(),
        json!([
            {"op": "add", "path": "/metadata/labels", "value": {
                "topology.kubernetes.io/region": "europe-west1",
                "topology.kubernetes.io/zone": "europe-west1-b"}},
            {"op": "replace", "path": "/spec/nodeAffinity/required/nodeSelectorTerms/0/matchExpressions",
             "value": [{"key": "cloud.google.com/gke-nodepool", "operator": "In", "values": ["ssd-pool"]}, requirement]},
            {"op": "add", "path": "/spec/nodeAffinity/required/nodeSelectorTerms/1/matchExpressions", "value": [requirement]}
        ])
    );
    let object = patched_object(&body, &answer);
    let terms = affinity_terms(&object);
    assert_eq!(terms.len(), 2, "no term added or removed");
    assert_eq!(terms[0]["matchExpressions"].as_array().unwrap().len(), 2);
    assert_eq!(terms[1]["matchFields"][0]["key"], "metadata.name");
}

#[tokio::test]
async fn term_naming_our_key_with_other_values_is_left_alone_with_warning() {
    let body = fixture("affinity-disagrees.json");
    let answer = assert_idempotent(&plain(), &body).await;
    let ops = answer.patch_json();
    assert_eq!(ops.as_array().unwrap().len(), 1, "{ops}");
    assert_eq!(ops[0]["path"], "/metadata/labels");
    let warnings = answer.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("term 0")
            && warnings[0].contains("europe-west1-c")
            && warnings[0].contains("europe-west1-b"),
        "{warnings:?}"
    );
}

#[tokio::test]
async fn term_naming_our_key_with_the_same_values_is_quiet() {
    let spec = json!({
        "csi": {"driver": GCE, "volumeHandle": "projects/p/zones/us-east1-b/disks/d"},
        "nodeAffinity": {"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "topology.gke.io/zone", "operator": "In", "values": ["us-east1-b"]}]},
            {"matchExpressions": [{"key": "other", "operator": "Exists"}]}
        ]}}
    });
    let labels = json!({"topology.kubernetes.io/zone": "us-east1-b", "topology.kubernetes.io/region": "us-east1"});
    let answer = review(&plain(), &create_review(pv(spec, Some(labels)))).await;
    assert_eq!(answer.raw_patch(), None);
    assert!(answer.warnings().is_empty(), "{:?}", answer.warnings());
    assert_eq!(answer.outcome(), "unchanged");
    assert_eq!(answer.audit("source"), Some("builtin"));
}

#[tokio::test]
async fn node_affinity_without_required_or_terms() {
    let handle = "projects/p/zones/us-east1-b/disks/d";
    let term =
        json!({"matchExpressions": [{"key": "topology.gke.io/zone", "operator": "In", "values": ["us-east1-b"]}]});
    let no_required = json!({"csi": {"driver": GCE, "volumeHandle": handle}, "nodeAffinity": {}});
    let answer = assert_idempotent(&plain(), &create_review(pv(no_required, None))).await;
    assert_eq!(
        answer.patch_json()[1],
        json!({"op": "add", "path": "/spec/nodeAffinity/required", "value": {"nodeSelectorTerms": [term]}})
    );
    let no_terms = json!({"csi": {"driver": GCE, "volumeHandle": handle}, "nodeAffinity": {"required": {"nodeSelectorTerms": []}}});
    let answer = assert_idempotent(&plain(), &create_review(pv(no_terms, None))).await;
    assert_eq!(
        answer.patch_json()[1],
        json!({"op": "replace", "path": "/spec/nodeAffinity/required", "value": {"nodeSelectorTerms": [term]}})
    );
}

#[tokio::test]
async fn up_to_max_affinity_items_each_term_gets_the_requirement_and_beyond_none_does() {
    let handle = "projects/p/zones/us-east1-b/disks/d";
    let with_terms = |count: usize| {
        let terms =
            vec![json!({"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n"]}]}); count];
        let spec = json!({"csi": {"driver": GCE, "volumeHandle": handle}, "nodeAffinity": {"required": {"nodeSelectorTerms": terms}}});
        create_review(pv(spec, None))
    };
    let answer = assert_idempotent(&plain(), &with_terms(MAX_AFFINITY_ITEMS)).await;
    // The labels, then one requirement per term.
    assert_eq!(answer.patch().unwrap().len(), 1 + MAX_AFFINITY_ITEMS);
    assert!(answer.warnings().is_empty(), "{:?}", answer.warnings());

    // One more: the answer does not grow with the terms; labels only, and a warning.
    let answer = assert_idempotent(&plain(), &with_terms(MAX_AFFINITY_ITEMS + 1)).await;
    assert_eq!(answer.outcome(), "labeled");
    assert_eq!(answer.patch_json()[0]["path"], "/metadata/labels");
    assert_eq!(answer.patch().unwrap().len(), 1);
    let warnings = answer.warnings();
    assert!(
        warnings[0].contains(&format!(
            "more than {MAX_AFFINITY_ITEMS} terms, requirements and values"
        )) && warnings[0].contains("topology.gke.io/zone In [\"us-east1-b\"]"),
        "{warnings:?}"
    );
}

#[tokio::test]
async fn a_requirement_with_more_values_than_max_affinity_items_leaves_node_affinity_alone() {
    let values = vec!["a"; MAX_AFFINITY_ITEMS + 1];
    let spec = json!({
        "csi": {"driver": GCE, "volumeHandle": "projects/p/zones/us-east1-b/disks/d"},
        "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "example.com/rack", "operator": "In", "values": values}
        ]}]}}
    });
    let answer = assert_idempotent(&plain(), &create_review(pv(spec, None))).await;
    assert_eq!(answer.patch().unwrap().len(), 1, "labels only");
    assert!(
        answer.warnings()[0].contains("left unchanged"),
        "{:?}",
        answer.warnings()
    );
}

#[tokio::test]
async fn conflicting_labels_are_replaced_with_a_warning() {
    let body = fixture("conflicting-labels.json");
    let answer = assert_idempotent(&plain(), &body).await;
    let ops = answer.patch_json();
    assert_eq!(
        ops[0],
        json!({"op": "replace", "path": "/metadata/labels/topology.kubernetes.io~1zone", "value": "us-east-1a"})
    );
    // The region label was right and is not touched.
    assert!(!ops.to_string().contains("~1region"), "{ops}");
    let warnings = answer.warnings();
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0].contains("\"us-east-1b\"") && warnings[0].contains("\"us-east-1a\""),
        "{warnings:?}"
    );
}

#[tokio::test]
async fn a_huge_label_value_is_not_echoed_whole_in_the_warning() {
    let mut body: Value = serde_json::from_slice(&fixture("conflicting-labels.json")).unwrap();
    let huge = "x".repeat(600_000);
    body["request"]["object"]["metadata"]["labels"]["topology.kubernetes.io/zone"] = json!(huge);
    let answer = review(&plain(), &serde_json::to_vec(&body).unwrap()).await;
    let warnings = answer.warnings();
    assert_eq!(warnings.len(), 1);
    let limit = pv_topology_webhook::decision::MAX_MESSAGE_CHARS;
    assert!(warnings[0].chars().count() <= limit, "{} chars", warnings[0].len());
    assert!(warnings[0].ends_with('…'), "{}", &warnings[0][..80]);
}

#[tokio::test]
async fn zone_label_in_another_order_is_not_a_conflict() {
    let reviewer = reviewer(rules("rules:\n  - driver: ebs.csi.aws.com\n    zones: [a-1, b-1]\n"));
    let labels = json!({"topology.kubernetes.io/zone": "b-1__a-1"});
    let answer = review(
        &reviewer,
        &create_review(pv(csi("ebs.csi.aws.com", "vol-1"), Some(labels))),
    )
    .await;
    let ops = answer.patch_json();
    assert!(!ops.to_string().contains("/metadata/labels"), "{ops}");
    assert!(answer.warnings().is_empty());
}
