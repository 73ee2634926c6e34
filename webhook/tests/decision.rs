//! The admission decision: which requests get one (trusted provisioned PVs,
//! other operations and kinds are answered untouched), and its properties
//! (deterministic, `decide` pure, dry runs answered as real requests), through
//! the same review path the CLI and the server use (fixtures under
//! tests/data/webhook/ and PVs built inline). Where the topology comes from
//! is in `decision_sources.rs`, how it is merged into the PV in
//! `decision_merge.rs`.

mod common;

use std::path::PathBuf;

use common::*;
use pv_topology_webhook::decision::{DecisionConfig, Subject, decide, subject};
use pv_topology_webhook::resolve::{AffinityKeys, Resolution, Resolved, TopologySource};
use pv_topology_webhook::review::parse_review;
use pv_topology_webhook::rules::RuleOrigin;
use pv_topology_webhook::source::VolumeIdentity;
use pv_topology_webhook::topology::Topology;
use serde_json::{Value, json};

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
async fn dry_run_is_answered_like_a_real_request() {
    let mut review_json: Value = serde_json::from_slice(&fixture("gce-pd-csi-zonal.json")).unwrap();
    review_json["request"]["dryRun"] = json!(true);
    let dry = review(&plain(), &serde_json::to_vec(&review_json).unwrap()).await;
    let real = review(&plain(), &fixture("gce-pd-csi-zonal.json")).await;
    assert_eq!(dry.raw_patch(), real.raw_patch());
    assert!(dry.raw_patch().is_some());
}
