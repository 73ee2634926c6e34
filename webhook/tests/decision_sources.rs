//! Where the decision's topology comes from, case by case, through the same
//! review path the CLI and the server use (fixtures under tests/data/webhook/
//! and PVs built inline): the built-in handle formats, rules (also for the
//! in-tree sources, as the in-tree PersistentVolumeLabel plugin labeled
//! them), and volumes that are recognized but unconfigured, unrecognized or
//! placeholders. How the answer is merged into the PV is in
//! `decision_merge.rs`; which requests are decided at all in `decision.rs`.

mod common;
mod decision_common;

use common::*;
use decision_common::{GCE, affinity_terms};
use serde_json::{Value, json};

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
