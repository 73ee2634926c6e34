//! The admission decision, case by case, through the same review path the CLI and the
//! server use (fixtures under tests/data/webhook/ and PVs built inline).

mod common;

use std::path::PathBuf;

use common::*;
use pv_topology_webhook::decision::{DecisionConfig, MAX_AFFINITY_ITEMS, Subject, decide, subject};
use pv_topology_webhook::resolve::{AffinityKeys, Resolution, Resolved, TopologySource};
use pv_topology_webhook::review::parse_review;
use pv_topology_webhook::rules::RuleOrigin;
use pv_topology_webhook::source::VolumeIdentity;
use pv_topology_webhook::topology::Topology;
use serde_json::{Value, json};

const GCE: &str = "pd.csi.storage.gke.io";

fn affinity_terms(object: &Value) -> &Vec<Value> {
    object["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
        .as_array()
        .unwrap()
}

#[tokio::test]
async fn gce_pd_csi_zonal_gets_labels_and_driver_key_affinity() {
    let body = fixture("gce-pd-csi-zonal.json");
    let answer = assert_idempotent(&plain(), &body).await;
    assert!(answer.allowed());
    assert_eq!(answer.uid(), "7f0d2a51-0001-4c53-9d7e-gce-zonal");
    assert_eq!(answer.response()["patchType"], "JSONPatch");
    assert_eq!(
        answer.patch_json(),
        json!([
            {"op": "add", "path": "/metadata/labels", "value": {
                "topology.kubernetes.io/region": "us-central1",
                "topology.kubernetes.io/zone": "us-central1-a"}},
            {"op": "add", "path": "/spec/nodeAffinity", "value": {"required": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "topology.gke.io/zone", "operator": "In", "values": ["us-central1-a"]}]}
            ]}}}
        ])
    );
    assert_eq!(answer.outcome(), "labeled");
    assert_eq!(answer.audit("source"), Some("builtin"));
    assert!(answer.warnings().is_empty());
    assert_eq!(answer.review["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(answer.review["kind"], "AdmissionReview");
}

#[tokio::test]
async fn ebs_in_tree_gets_ga_keys_and_escaped_paths() {
    let body = fixture("ebs-in-tree.json");
    let answer = assert_idempotent(&plain(), &body).await;
    // Existing labels are kept: the keys are added one by one, `/` escaped as `~1`.
    let raw = answer.raw_patch().unwrap();
    assert!(
        raw.contains(r#""path":"/metadata/labels/topology.kubernetes.io~1region""#),
        "{raw}"
    );
    assert!(
        raw.contains(r#""path":"/metadata/labels/topology.kubernetes.io~1zone""#),
        "{raw}"
    );
    let object = patched_object(&body, &answer);
    assert_eq!(
        object["metadata"]["labels"],
        json!({"app": "db", "topology.kubernetes.io/zone": "us-west-2-lax-1a", "topology.kubernetes.io/region": "us-west-2"})
    );
    // As the in-tree plugin: requirements on the zone and region label keys.
    assert_eq!(
        affinity_terms(&object),
        &vec![json!({"matchExpressions": [
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-west-2-lax-1a"]},
            {"key": "topology.kubernetes.io/region", "operator": "In", "values": ["us-west-2"]}
        ]})]
    );
}

#[tokio::test]
async fn regional_pd_handle_sets_region_only_with_warning() {
    let body = fixture("regional-pd.json");
    let answer = assert_idempotent(&plain(), &body).await;
    assert_eq!(
        answer.patch_json(),
        json!([{"op": "add", "path": "/metadata/labels", "value": {"topology.kubernetes.io/region": "us-central1"}}])
    );
    let warnings = answer.warnings();
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0].contains("regional disk") && warnings[0].contains("--rules"),
        "{warnings:?}"
    );
}

#[tokio::test]
async fn regional_pd_with_zones_from_a_rule_joins_sorted_zones() {
    let reviewer = reviewer(rules(
        r#"
rules:
  - driver: pd.csi.storage.gke.io
    volumeHandle: '^projects/[^/]+/regions/us-central1/'
    zones: [us-central1-f, us-central1-b]
    region: us-central1
"#,
    ));
    let body = fixture("regional-pd.json");
    let answer = assert_idempotent(&reviewer, &body).await;
    assert!(answer.warnings().is_empty(), "{:?}", answer.warnings());
    let object = patched_object(&body, &answer);
    assert_eq!(
        object["metadata"]["labels"]["topology.kubernetes.io/zone"],
        "us-central1-b__us-central1-f"
    );
    assert_eq!(
        affinity_terms(&object),
        &vec![json!({"matchExpressions": [
            {"key": "topology.gke.io/zone", "operator": "In", "values": ["us-central1-b", "us-central1-f"]}
        ]})]
    );
    assert!(answer.audit("source").unwrap().contains("#rules[0]"));
}

#[tokio::test]
async fn unrecognized_volume_is_admitted_silently() {
    for body in [
        fixture("nfs.json"),
        create_review(pv(json!({"hostPath": {"path": "/data"}}), None)),
        create_review(pv(json!({"local": {"path": "/mnt/disk"}}), None)),
        create_review(pv(csi("unknown.csi.example.org", "h-1"), None)),
    ] {
        let answer = review(&plain(), &body).await;
        assert!(answer.allowed());
        assert_eq!(answer.raw_patch(), None);
        assert!(answer.response().get("patchType").is_none());
        assert!(answer.warnings().is_empty());
        assert_eq!(answer.outcome(), "unrecognized");
    }
}

#[tokio::test]
async fn recognized_but_unconfigured_warns_with_the_flag() {
    let cases = [
        (fixture("ebs-csi.json"), "vol-0123456789abcdef0"),
        (fixture("gce-in-tree.json"), "my-disk"),
        (
            create_review(pv(
                json!({"azureDisk": {"diskName": "d", "diskURI": "/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/disks/d"}}),
                None,
            )),
            "Microsoft.Compute/disks/d",
        ),
        (create_review(pv(json!({"cinder": {"volumeID": "0f3c"}}), None)), "0f3c"),
        (
            create_review(pv(
                json!({"vsphereVolume": {"volumePath": "[ds1] volumes/v.vmdk"}}),
                None,
            )),
            "[ds1] volumes/v.vmdk",
        ),
        (
            create_review(pv(csi("disk.csi.azure.com", "/subscriptions/s/d"), None)),
            "/subscriptions/s/d",
        ),
        (
            create_review(pv(csi("cinder.csi.openstack.org", "uuid-1"), None)),
            "uuid-1",
        ),
        // In-tree EBS without a zone in its ID needs a lookup too.
        (
            create_review(pv(json!({"awsElasticBlockStore": {"volumeID": "aws:///vol-1"}}), None)),
            "aws:///vol-1",
        ),
        // A GCE handle that names no real zone.
        (
            create_review(pv(csi(GCE, "projects/p/zones/multi-zone/disks/d"), None)),
            "multi-zone",
        ),
    ];
    for (body, handle) in cases {
        let answer = review(&plain(), &body).await;
        assert!(answer.allowed());
        assert_eq!(answer.raw_patch(), None, "{handle}");
        assert_eq!(answer.outcome(), "not-configured");
        let warnings = answer.warnings();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].contains("--rules") && warnings[0].contains(handle),
            "{warnings:?}"
        );
    }
}

#[tokio::test]
async fn placeholder_volume_is_left_alone() {
    let body = create_review(pv(
        json!({"awsElasticBlockStore": {"volumeID": "placeholder-for-provisioning"}}),
        None,
    ));
    let answer = review(&plain(), &body).await;
    assert_eq!(answer.raw_patch(), None);
    assert!(answer.warnings().is_empty());
    assert_eq!(answer.outcome(), "placeholder");
}

#[tokio::test]
async fn rules_driver_named_groups_and_topology_key() {
    let body = fixture("rules-driver.json");
    let answer = assert_idempotent(&reviewer(fixture_rules()), &body).await;
    let object = patched_object(&body, &answer);
    assert_eq!(
        object["metadata"]["labels"],
        json!({"topology.kubernetes.io/zone": "dc1-rack2", "topology.kubernetes.io/region": "dc1"})
    );
    assert_eq!(
        affinity_terms(&object),
        &vec![json!({"matchExpressions": [
            {"key": "topology.csi.example.com/zone", "operator": "In", "values": ["dc1-rack2"]}
        ]})]
    );
    let source = answer.audit("source").unwrap();
    assert!(
        source.starts_with("rule ") && source.ends_with("rules.yaml#rules[0]"),
        "{source}"
    );
}

#[tokio::test]
async fn rules_driver_that_does_not_match_warns() {
    // The driver is named by a rule, so a handle its regex rejects is "recognized".
    let body = create_review(pv(csi("csi.example.com", "no-slashes"), None));
    let answer = review(&reviewer(fixture_rules()), &body).await;
    assert_eq!(answer.raw_patch(), None);
    assert_eq!(answer.outcome(), "not-configured");
    assert!(answer.warnings()[0].contains("--rules"));
}

#[tokio::test]
async fn first_matching_rule_wins() {
    let reviewer = reviewer(rules(
        r#"
rules:
  - driver: ebs.csi.aws.com
    volumeHandle: '^vol-a'
    zones: [zone-a]
  - driver: ebs.csi.aws.com
    zones: [zone-b]
  - driver: ebs.csi.aws.com
    zones: [zone-c]
"#,
    ));
    for (handle, zone, index) in [("vol-a1", "zone-a", 0), ("vol-b1", "zone-b", 1)] {
        let body = create_review(pv(csi("ebs.csi.aws.com", handle), None));
        let answer = assert_idempotent(&reviewer, &body).await;
        let object = patched_object(&body, &answer);
        assert_eq!(
            object["metadata"]["labels"],
            json!({"topology.kubernetes.io/zone": zone})
        );
        // Built-in key of the EBS driver; no region requirement for CSI.
        assert_eq!(
            affinity_terms(&object)[0]["matchExpressions"],
            json!([{"key": "topology.ebs.csi.aws.com/zone", "operator": "In", "values": [zone]}])
        );
        assert_eq!(
            answer.audit("source"),
            Some(&*format!("rule test-rules.yaml#rules[{index}]"))
        );
    }
}

#[tokio::test]
async fn in_tree_sources_through_rules_like_the_in_tree_plugin() {
    // The in-tree PersistentVolumeLabel plugin's labeled cases (AWS, GCE, Azure, vSphere,
    // Cinder), with the topology coming from rules instead of cloud calls.
    let reviewer = reviewer(rules(
        r#"
rules:
  - inTree: gcePersistentDisk
    zones: [us-central1-a, us-central1-b]
    region: us-central1
  - inTree: azureDisk
    zones: [westus-1]
    region: westus
  - inTree: vsphereVolume
    zones: [dc1-a]
    region: dc1
  - inTree: cinder
    zones: [nova]
  - inTree: awsElasticBlockStore
    volumeHandle: '^vol-'
    zones: [us-east-1c]
    region: us-east-1
"#,
    ));
    let cases = [
        (
            json!({"gcePersistentDisk": {"pdName": "d"}}),
            Some("us-central1-a__us-central1-b"),
            Some("us-central1"),
            vec!["us-central1-a", "us-central1-b"],
        ),
        (
            json!({"azureDisk": {"diskName": "d", "diskURI": "uri"}}),
            Some("westus-1"),
            Some("westus"),
            vec!["westus-1"],
        ),
        (
            json!({"vsphereVolume": {"volumePath": "[ds] v.vmdk"}}),
            Some("dc1-a"),
            Some("dc1"),
            vec!["dc1-a"],
        ),
        (json!({"cinder": {"volumeID": "v"}}), Some("nova"), None, vec!["nova"]),
        // The built-in parser goes first: a zone in the ID beats the rule's fixed zone.
        (
            json!({"awsElasticBlockStore": {"volumeID": "aws://us-east-1a/vol-1"}}),
            Some("us-east-1a"),
            Some("us-east-1"),
            vec!["us-east-1a"],
        ),
        (
            json!({"awsElasticBlockStore": {"volumeID": "vol-1"}}),
            Some("us-east-1c"),
            Some("us-east-1"),
            vec!["us-east-1c"],
        ),
    ];
    for (spec, zone, region, zones) in cases {
        let body = create_review(pv(spec.clone(), None));
        let answer = assert_idempotent(&reviewer, &body).await;
        let object = patched_object(&body, &answer);
        let labels = &object["metadata"]["labels"];
        assert_eq!(labels["topology.kubernetes.io/zone"].as_str(), zone, "{spec}");
        assert_eq!(labels["topology.kubernetes.io/region"].as_str(), region, "{spec}");
        let mut want = vec![json!({"key": "topology.kubernetes.io/zone", "operator": "In", "values": zones})];
        if let Some(region) = region {
            want.push(json!({"key": "topology.kubernetes.io/region", "operator": "In", "values": [region]}));
        }
        assert_eq!(
            affinity_terms(&object)[0]["matchExpressions"],
            Value::Array(want),
            "{spec}"
        );
    }
}

#[tokio::test]
async fn in_tree_rule_topology_key_replaces_the_zone_key() {
    let reviewer = reviewer(rules(
        "rules:\n  - inTree: cinder\n    zones: [nova]\n    region: RegionOne\n    topologyKey: topology.cinder.csi.openstack.org/zone\n",
    ));
    let body = create_review(pv(json!({"cinder": {"volumeID": "v"}}), None));
    let answer = assert_idempotent(&reviewer, &body).await;
    let object = patched_object(&body, &answer);
    assert_eq!(
        affinity_terms(&object)[0]["matchExpressions"],
        json!([
            {"key": "topology.cinder.csi.openstack.org/zone", "operator": "In", "values": ["nova"]},
            {"key": "topology.kubernetes.io/region", "operator": "In", "values": ["RegionOne"]}
        ])
    );
}

#[tokio::test]
async fn rule_giving_an_invalid_value_admits_unchanged_with_warning() {
    let reviewer = reviewer(rules(
        "rules:\n  - driver: ebs.csi.aws.com\n    volumeHandle: '^(?P<zone>[^:]*):'\n",
    ));
    for handle in ["bad/zone:vol", ":vol"] {
        let body = create_review(pv(csi("ebs.csi.aws.com", handle), None));
        let answer = review(&reviewer, &body).await;
        assert!(answer.allowed());
        assert_eq!(answer.raw_patch(), None);
        assert_eq!(answer.outcome(), "invalid-topology");
        assert!(answer.warnings()[0].contains("rules[0]"), "{:?}", answer.warnings());
    }
}

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
            {"op": "add", "path": "/spec/nodeAffinity/required/nodeSelectorTerms/0/matchExpressions/-", "value": requirement},
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
    assert!(warnings[0].chars().count() <= limit + 1, "{} chars", warnings[0].len());
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

#[tokio::test]
async fn trusted_provisioned_pv_is_not_looked_up_or_patched() {
    let answer = review(&plain(), &fixture("trusted-provisioned.json")).await;
    assert!(answer.allowed());
    assert_eq!(answer.raw_patch(), None);
    assert!(answer.warnings().is_empty());
    assert_eq!(answer.outcome(), "trusted");
    assert_eq!(answer.audit("source"), None);
}

#[tokio::test]
async fn provisioned_pv_missing_a_label_is_not_trusted() {
    let mut object = pv(
        json!({"awsElasticBlockStore": {"volumeID": "aws://us-east-1a/vol-1"}}),
        Some(json!({"topology.kubernetes.io/zone": "us-east-1a"})),
    );
    object["metadata"]["annotations"] = json!({"pv.kubernetes.io/provisioned-by": "ebs.csi.aws.com"});
    let answer = assert_idempotent(&plain(), &create_review(object)).await;
    assert_eq!(answer.outcome(), "labeled");
    assert_eq!(
        answer.patch_json()[0],
        json!({"op": "add", "path": "/metadata/labels/topology.kubernetes.io~1region", "value": "us-east-1"})
    );
}

#[tokio::test]
async fn other_requests_are_untouched() {
    for name in ["update-op.json", "not-a-pv.json"] {
        let body = fixture(name);
        let answer = review(&plain(), &body).await;
        let request: Value = serde_json::from_slice(&body).unwrap();
        assert!(answer.allowed(), "{name}");
        assert_eq!(answer.uid(), request["request"]["uid"], "{name}");
        assert_eq!(answer.raw_patch(), None, "{name}");
        assert!(answer.warnings().is_empty(), "{name}");
        assert_eq!(answer.outcome(), "not-applicable", "{name}");
    }
    // DELETE carries no object at all.
    let mut delete: Value = serde_json::from_slice(&fixture("update-op.json")).unwrap();
    delete["request"]["operation"] = json!("DELETE");
    delete["request"]["object"] = Value::Null;
    let answer = review(&plain(), &serde_json::to_vec(&delete).unwrap()).await;
    assert_eq!((answer.allowed(), answer.raw_patch()), (true, None));
}

#[tokio::test]
async fn answers_are_deterministic() {
    let reviewer = reviewer(fixture_rules());
    for name in [
        "gce-pd-csi-zonal.json",
        "existing-affinity.json",
        "rules-driver.json",
        "conflicting-labels.json",
    ] {
        let body = fixture(name);
        let first = review(&reviewer, &body).await;
        for _ in 0..5 {
            assert_eq!(review(&reviewer, &body).await.bytes, first.bytes, "{name}");
        }
    }
}

#[test]
fn decide_is_pure_and_only_uses_the_resolution() {
    let body = fixture("rules-driver.json");
    let request = parse_review(&body).unwrap();
    let Subject::Volume(volume) = subject(&request) else {
        panic!("not a volume to resolve")
    };
    assert_eq!(
        volume.identity,
        VolumeIdentity::csi("csi.example.com", "dc1/dc1-rack2/vol-7")
    );
    let resolution = Resolution::Resolved(Resolved {
        topology: Topology::new(["z-2", "z-1"], Some("r".to_owned())).unwrap(),
        source: TopologySource::Rule(RuleOrigin {
            path: PathBuf::from("x.yaml"),
            index: 3,
        }),
        affinity: AffinityKeys {
            zone: Some("example.com/zone".to_owned()),
            region: None,
        },
        notes: vec!["a note".to_owned()],
    });
    let config = DecisionConfig::default();
    let first = decide(&request, &volume, &resolution, &config);
    assert_eq!(first, decide(&request, &volume, &resolution, &config));
    let first = first.response;
    assert_eq!(first.uid, "7f0d2a51-0007-4c53-9d7e-rules");
    assert_eq!(first.warnings, Some(vec!["a note".to_owned()]));
    assert_eq!(first.audit_annotations["source"], "rule x.yaml#rules[3]");
    let patch: Value = serde_json::from_slice(first.patch.as_deref().unwrap()).unwrap();
    assert_eq!(patch[0]["value"]["topology.kubernetes.io/zone"], "z-1__z-2");
    assert_eq!(
        patch[1]["value"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"],
        json!(["z-1", "z-2"])
    );

    // Requests that need no topology say so before any lookup.
    for name in [
        "trusted-provisioned.json",
        "nfs.json",
        "update-op.json",
        "not-a-pv.json",
    ] {
        assert!(
            matches!(subject(&parse_review(&fixture(name)).unwrap()), Subject::Skip { .. }),
            "{name}"
        );
    }
}

#[tokio::test]
async fn in_tree_plugin_cases_without_a_topology() {
    // "cloud provider returns no labels": an EBS ID with no zone is admitted unchanged.
    let body = create_review(pv(json!({"awsElasticBlockStore": {"volumeID": "123"}}), None));
    let answer = review(&plain(), &body).await;
    assert_eq!((answer.allowed(), answer.raw_patch()), (true, None));
    // "existing Beta labels from dynamic provisioning": only the GA pair is trusted, so
    // the GA labels are added next to the beta ones, which are left as they are.
    let mut object = pv(
        json!({"awsElasticBlockStore": {"volumeID": "aws://us-east-1a/vol-1"}}),
        Some(json!({
            "failure-domain.beta.kubernetes.io/zone": "existingDomain",
            "failure-domain.beta.kubernetes.io/region": "existingRegion"
        })),
    );
    object["metadata"]["annotations"] = json!({"pv.kubernetes.io/provisioned-by": "kubernetes.io/aws-ebs"});
    let body = create_review(object);
    let answer = assert_idempotent(&plain(), &body).await;
    let labels = &patched_object(&body, &answer)["metadata"]["labels"];
    assert_eq!(labels["failure-domain.beta.kubernetes.io/zone"], "existingDomain");
    assert_eq!(labels["topology.kubernetes.io/zone"], "us-east-1a");
}

#[tokio::test]
async fn dry_run_is_answered_like_a_real_request() {
    let mut review_json: Value = serde_json::from_slice(&fixture("gce-pd-csi-zonal.json")).unwrap();
    review_json["request"]["dryRun"] = json!(true);
    let dry = review(&plain(), &serde_json::to_vec(&review_json).unwrap()).await;
    let real = review(&plain(), &fixture("gce-pd-csi-zonal.json")).await;
    assert_eq!(dry.raw_patch(), real.raw_patch());
    assert!(dry.raw_patch().is_some());
}
