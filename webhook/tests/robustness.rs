//! Odd and hostile input: every AdmissionReview gets an answer or a clean error, never a
//! panic, and odd-but-valid PVs still get idempotent patches.

mod common;

use common::*;
use pv_topology_webhook::builtin;
use pv_topology_webhook::source::{InTree, VolumeIdentity};
use serde_json::{Value, json};

const GCE: &str = "pd.csi.storage.gke.io";

#[tokio::test]
async fn objects_that_are_not_persistent_volumes_are_admitted_with_a_warning() {
    for object in [
        json!({"metadata": {"name": "x"}, "spec": "not an object"}),
        json!({"metadata": {"name": "x"}, "spec": {"csi": {"driver": 5}}}),
        json!({"metadata": {"name": "x"}, "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": "x"}}}}),
    ] {
        let answer = review(&plain(), &create_review(object.clone())).await;
        assert!(answer.allowed(), "{object}");
        assert_eq!(answer.raw_patch(), None, "{object}");
        assert_eq!(answer.outcome(), "unreadable", "{object}");
        assert!(answer.warnings()[0].contains("could not read the PersistentVolume"));
    }
    // A CREATE with no object at all.
    let mut body: Value = serde_json::from_slice(&create_review(pv(csi(GCE, "h"), None))).unwrap();
    body["request"]["object"] = Value::Null;
    let answer = review(&plain(), &serde_json::to_vec(&body).unwrap()).await;
    assert_eq!((answer.allowed(), answer.outcome()), (true, "unreadable"));
}

#[tokio::test]
async fn malformed_reviews_are_errors_not_panics() {
    for body in [
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u", "object": {"metadata": {"labels": 5}}}}),
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": null}),
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": []}),
        json!([1, 2, 3]),
        json!("AdmissionReview"),
    ] {
        assert!(
            plain().review(&serde_json::to_vec(&body).unwrap()).await.is_err(),
            "{body}"
        );
    }
    let huge = vec![b' '; pv_topology_webhook::review::MAX_REVIEW_BYTES + 1];
    assert!(plain().review(&huge).await.is_err());
}

#[tokio::test]
async fn odd_but_valid_affinity_shapes_are_patched_idempotently() {
    let handle = "projects/p/zones/us-east1-b/disks/d";
    for affinity in [
        json!({"required": {"nodeSelectorTerms": [{}]}}),
        json!({"required": {"nodeSelectorTerms": [{"matchExpressions": []}]}}),
        json!({"required": {"nodeSelectorTerms": [{"matchExpressions": null, "matchFields": null}]}}),
        json!({"required": null}),
    ] {
        let spec = json!({"csi": {"driver": GCE, "volumeHandle": handle}, "nodeAffinity": affinity});
        let body = create_review(pv(spec, Some(json!({}))));
        let answer = assert_idempotent(&plain(), &body).await;
        let object = patched_object(&body, &answer);
        let expressions = &object["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"];
        assert_eq!(
            expressions,
            &json!([{"key": "topology.gke.io/zone", "operator": "In", "values": ["us-east1-b"]}]),
            "{affinity}"
        );
    }
}

#[tokio::test]
async fn strange_handles_never_produce_bad_labels() {
    let long_zone = format!("us-east1-{}", "b".repeat(70));
    let handles = [
        "projects/p/zones/ü-1-a/disks/d".to_owned(),
        "projects/p/zones/us east1-b/disks/d".to_owned(),
        format!("projects/p/zones/{long_zone}/disks/d"),
        "projects/p/regions/ü1/disks/d".to_owned(),
        "////////".to_owned(),
        String::new(),
    ];
    for handle in handles {
        let answer = review(&plain(), &create_review(pv(csi(GCE, &handle), None))).await;
        assert!(answer.allowed());
        assert_eq!(answer.raw_patch(), None, "{handle}");
        assert_eq!(answer.outcome(), "not-configured", "{handle}");
    }
}

#[test]
fn builtin_parsers_survive_arbitrary_bytes() {
    // A small deterministic generator over an alphabet rich in separators and non-ASCII.
    let alphabet: Vec<char> = "aZ09-_/:.éü€ projects zones regions disks aws vol-".chars().collect();
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..20_000 {
        let mut text = String::new();
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let len = (state % 48) as usize;
        for i in 0..len {
            let index = ((state >> (i % 50)) as usize).wrapping_add(i * 31) % alphabet.len();
            text.push(alphabet[index]);
        }
        for candidate in [
            text.clone(),
            format!("aws://{text}"),
            format!("projects/p/zones/{text}/disks/d"),
        ] {
            let _ = builtin::aws_region_of_zone(&candidate);
            let _ = builtin::gce_region_of_zone(&candidate);
            let _ = builtin::parse_gce_pd_handle(&candidate);
            for volume in [
                VolumeIdentity::csi(GCE, &candidate),
                VolumeIdentity::in_tree(InTree::AwsElasticBlockStore, &candidate),
            ] {
                let _ = builtin::resolve(&volume);
            }
        }
    }
}
