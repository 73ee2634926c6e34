//! The validation (`/validate`, `review --validate`): every shape of a PV whose topology
//! contradicts its disk is refused with a message naming the volume, what the PV says
//! and where the disk is; agreeing and narrower claims are allowed; UPDATEs are judged
//! only when they change the topology; `--on-contradiction=warn` admits with a warning;
//! a failed lookup follows `--on-lookup-error`. Topology comes from the handles (GCE PD,
//! EBS) or a lookup stand-in: no cloud is asked.

mod common;

use std::sync::Arc;

use common::*;
use pv_topology_webhook::decision::{DecisionConfig, OnLookupError};
use pv_topology_webhook::lookup::LookupError;
use pv_topology_webhook::model::OnContradiction;
use pv_topology_webhook::resolve::Resolver;
use pv_topology_webhook::review::Reviewer;
use pv_topology_webhook::rules::Rules;
use pv_topology_webhook::topology::Topology;
use serde_json::{Value, json};

const ZONE: &str = "topology.kubernetes.io/zone";
const REGION: &str = "topology.kubernetes.io/region";
const BETA_ZONE: &str = "failure-domain.beta.kubernetes.io/zone";
const GKE_ZONE: &str = "topology.gke.io/zone";

/// A zonal GCE PD in europe-west1-b (the zone is in the handle).
fn zonal_pd(labels: Option<Value>) -> Value {
    pv(
        csi("pd.csi.storage.gke.io", "projects/p/zones/europe-west1-b/disks/d1"),
        labels,
    )
}

/// In-tree EBS in us-east-1a (the zone is in the volume ID).
fn ebs(labels: Option<Value>) -> Value {
    pv(
        json!({"awsElasticBlockStore": {"volumeID": "aws://us-east-1a/vol-0123456789abcdef0"}}),
        labels,
    )
}

fn with_affinity(mut pv: Value, terms: Value) -> Value {
    pv["spec"]["nodeAffinity"] = json!({"required": {"nodeSelectorTerms": terms}});
    pv
}

fn term(key: &str, operator: &str, values: &[&str]) -> Value {
    json!({"matchExpressions": [{"key": key, "operator": operator, "values": values}]})
}

async fn validate(reviewer: &Reviewer, body: &[u8]) -> Answer {
    let bytes = reviewer.validate(body).await.unwrap().body;
    Answer {
        review: serde_json::from_slice(&bytes).unwrap(),
        bytes,
    }
}

/// An UPDATE review from `old` to `new`.
fn update_review(old: Value, new: Value) -> Vec<u8> {
    let mut review: Value = serde_json::from_slice(&create_review(new)).unwrap();
    review["request"]["operation"] = json!("UPDATE");
    review["request"]["oldObject"] = old;
    serde_json::to_vec(&review).unwrap()
}

fn reviewer_with(config: DecisionConfig) -> Reviewer {
    Reviewer::new(Resolver::new(Rules::default()), config)
}

#[tokio::test]
async fn every_shape_of_contradiction_is_refused_naming_what_the_pv_says_and_where_the_disk_is() {
    let reviewer = plain();
    for (pv, says, disk) in [
        // Label vs disk, GA and beta keys.
        (
            zonal_pd(Some(json!({ZONE: "europe-west1-c"}))),
            "label topology.kubernetes.io/zone=\"europe-west1-c\"",
            "zone europe-west1-b",
        ),
        (
            ebs(Some(json!({BETA_ZONE: "us-east-1b"}))),
            "label failure-domain.beta.kubernetes.io/zone=\"us-east-1b\"",
            "zone us-east-1a",
        ),
        (
            ebs(Some(json!({REGION: "us-west-2"}))),
            "label topology.kubernetes.io/region=\"us-west-2\"",
            "region us-east-1",
        ),
        // A zone list naming one zone the disk is not in.
        (
            zonal_pd(Some(json!({ZONE: "europe-west1-b__europe-west1-d"}))),
            "europe-west1-b__europe-west1-d",
            "zone europe-west1-b",
        ),
        // Affinity vs disk: the CSI driver's key, the standard key, the region key.
        (
            with_affinity(zonal_pd(None), json!([term(GKE_ZONE, "In", &["europe-west1-c"])])),
            "nodeAffinity term 0: topology.gke.io/zone In [\"europe-west1-c\"]",
            "zone europe-west1-b",
        ),
        (
            with_affinity(ebs(None), json!([term(ZONE, "In", &["us-east-1a", "us-east-1c"])])),
            "nodeAffinity term 0: topology.kubernetes.io/zone In",
            "zone us-east-1a",
        ),
        (
            with_affinity(ebs(None), json!([term(REGION, "In", &["eu-west-1"])])),
            "topology.kubernetes.io/region In [\"eu-west-1\"]",
            "region us-east-1",
        ),
        // A term that excludes every zone of the disk.
        (
            with_affinity(ebs(None), json!([term(ZONE, "NotIn", &["us-east-1a"])])),
            "NotIn [\"us-east-1a\"]",
            "zone us-east-1a",
        ),
        // Terms are OR'ed: the second one alone lets pods go elsewhere.
        (
            with_affinity(
                zonal_pd(None),
                json!([
                    term(GKE_ZONE, "In", &["europe-west1-b"]),
                    term(GKE_ZONE, "In", &["europe-west1-d"])
                ]),
            ),
            "nodeAffinity term 1:",
            "zone europe-west1-b",
        ),
    ] {
        let answer = validate(&reviewer, &create_review(pv.clone())).await;
        assert!(!answer.allowed(), "{pv}");
        assert_eq!(answer.outcome(), "contradicts", "{pv}");
        assert_eq!(answer.response()["status"]["code"], 403, "{pv}");
        let message = answer.message();
        assert!(message.contains(says), "{says:?} not in {message}");
        assert!(
            message.contains(&format!("but the disk is in {disk}")),
            "{disk:?} not in {message}"
        );
        assert!(
            message.contains("projects/p/zones") || message.contains("vol-0123456789abcdef0"),
            "{message}"
        );
        assert!(message.contains("(found by builtin)"), "{message}");
    }
}

#[tokio::test]
async fn agreeing_and_narrower_claims_are_allowed() {
    let reviewer = plain();
    // A regional disk in two zones: naming one of them, or both, is fine.
    let regional = Arc::new(FakeLookup::new(
        "pd.csi.storage.gke.io",
        Ok(Topology::new(["europe-west1-b", "europe-west1-c"], Some("europe-west1".to_owned())).unwrap()),
    ));
    let lookups = reviewer_with_lookup(regional);
    for (reviewer, pv) in [
        (&reviewer, zonal_pd(None)),
        (
            &reviewer,
            zonal_pd(Some(json!({ZONE: "europe-west1-b", REGION: "europe-west1"}))),
        ),
        (
            &reviewer,
            with_affinity(
                ebs(None),
                json!([term(ZONE, "In", &["us-east-1a"]), term("other", "In", &["x"])]),
            ),
        ),
        (
            &reviewer,
            with_affinity(ebs(None), json!([term(ZONE, "NotIn", &["us-east-1b"])])),
        ),
        (&reviewer, with_affinity(ebs(None), json!([term(ZONE, "Exists", &[])]))),
        (
            &lookups,
            with_affinity(
                pv(
                    csi("pd.csi.storage.gke.io", "projects/p/regions/europe-west1/disks/r1"),
                    Some(json!({ZONE: "europe-west1-c"})),
                ),
                json!([term(GKE_ZONE, "In", &["europe-west1-b"])]),
            ),
        ),
    ] {
        let answer = validate(reviewer, &create_review(pv.clone())).await;
        assert!(answer.allowed(), "{pv}: {}", answer.message());
        assert_eq!(answer.outcome(), "consistent", "{pv}");
        assert!(answer.patch().is_none(), "validation never patches");
    }
    // Nothing to judge against: allowed, as the mutating path answered.
    for (pv, outcome) in [
        (pv(json!({"nfs": {"server": "s", "path": "/"}}), None), "unrecognized"),
        (
            pv(csi("csi.example.com", "h"), Some(json!({ZONE: "anywhere"}))),
            "unrecognized",
        ),
        (
            pv(json!({"cinder": {"volumeID": "v1"}}), Some(json!({ZONE: "nova"}))),
            "not-configured",
        ),
    ] {
        let answer = validate(&reviewer, &create_review(pv.clone())).await;
        assert!(answer.allowed(), "{pv}");
        assert_eq!(answer.outcome(), outcome, "{pv}");
    }
}

fn reviewer_with_lookup(lookup: Arc<FakeLookup>) -> Reviewer {
    with_lookup(lookup, OnLookupError::Deny)
}

#[tokio::test]
async fn updates_are_judged_only_when_they_change_the_topology() {
    let reviewer = plain();
    let good = zonal_pd(Some(json!({ZONE: "europe-west1-b"})));
    let lying = zonal_pd(Some(json!({ZONE: "europe-west1-c"})));
    // A label UPDATE that contradicts the disk.
    let answer = validate(&reviewer, &update_review(good.clone(), lying.clone())).await;
    assert!(!answer.allowed());
    assert!(
        answer
            .message()
            .contains("label topology.kubernetes.io/zone=\"europe-west1-c\""),
        "{}",
        answer.message()
    );
    // An UPDATE that leaves the topology alone (the PV controller binding it) passes,
    // even on a PV that was wrong before this check existed.
    let mut bound = lying.clone();
    bound["spec"]["claimRef"] = json!({"namespace": "ns", "name": "claim"});
    let answer = validate(&reviewer, &update_review(lying.clone(), bound)).await;
    assert!(answer.allowed());
    assert_eq!(answer.outcome(), "not-applicable");
    // An UPDATE that fixes the label passes.
    let answer = validate(&reviewer, &update_review(lying, good)).await;
    assert!(answer.allowed());
    assert_eq!(answer.outcome(), "consistent");
    // The mutating path still answers CREATE only.
    let answer = review(&reviewer, &update_review(zonal_pd(None), zonal_pd(None))).await;
    assert_eq!(answer.outcome(), "not-applicable");
}

#[tokio::test]
async fn warn_admits_with_the_same_message_and_lookup_failures_follow_on_lookup_error() {
    let warn = reviewer_with(DecisionConfig {
        on_contradiction: OnContradiction::Warn,
        ..DecisionConfig::default()
    });
    let answer = validate(&warn, &create_review(zonal_pd(Some(json!({ZONE: "europe-west1-c"}))))).await;
    assert!(answer.allowed());
    assert_eq!(answer.outcome(), "contradicts");
    let warnings = answer.warnings().join("\n");
    assert!(
        warnings.contains("but the disk is in zone europe-west1-b") && warnings.contains("--on-contradiction=warn"),
        "{warnings}"
    );

    let failing = Arc::new(FakeLookup::new(
        "ebs.csi.aws.com",
        Err(LookupError::Failed("EC2 said no".to_owned())),
    ));
    let pv = pv(
        csi("ebs.csi.aws.com", "vol-0123456789abcdef0"),
        Some(json!({ZONE: "us-east-1a"})),
    );
    for (on_error, allowed) in [(OnLookupError::Deny, false), (OnLookupError::Allow, true)] {
        let reviewer = with_lookup(failing.clone(), on_error);
        let answer = validate(&reviewer, &create_review(pv.clone())).await;
        assert_eq!(answer.allowed(), allowed, "{on_error:?}");
        assert_eq!(answer.outcome(), "lookup-failed");
        let text = format!("{} {}", answer.message(), answer.warnings().join(" "));
        assert!(
            text.contains("cannot check the topology of") && text.contains("EC2 said no"),
            "{text}"
        );
    }
}
