//! The validation (`/validate`, `review --validate`): every shape of a PV whose topology
//! contradicts its disk is refused with a message naming the volume, what the PV says
//! and where the disk is; agreeing and narrower claims are allowed; UPDATEs are judged
//! only when they change the topology; `--on-contradiction=warn` admits with a warning;
//! a failed lookup follows `--on-lookup-error`, but for a provisioned PV, admitted with a
//! warning. Regional (two-zone) and zone-less (Azure ZRS) disks, and topologies given by
//! a rule, are judged the same way. Topology comes from the handles (GCE PD, EBS), the
//! rules of tests/data/webhook/rules.yaml or a lookup stand-in: no cloud is asked.

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
const BETA_REGION: &str = "failure-domain.beta.kubernetes.io/region";
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

/// The contract docs/webhook.md gives: an UPDATE is judged only when it changes the
/// zone/region labels (standard or beta) or nodeAffinity, however the label map is
/// written before and after (absent, empty or holding other labels).
#[tokio::test]
async fn an_update_of_other_labels_passes_however_the_label_map_was_written() {
    let reviewer = plain();
    // nodeAffinity that contradicts the disk: what `repair` exists for.
    let wrong = |labels: Option<Value>| with_affinity(ebs(labels), json!([term(ZONE, "In", &["us-east-1b"])]));
    let team = |labels: Option<Value>| {
        let mut pv = wrong(labels);
        pv["metadata"]["labels"]["team"] = json!("a");
        pv
    };
    for (before, after) in [
        (wrong(None), team(None)),
        (wrong(Some(json!({}))), team(Some(json!({})))),
        (wrong(Some(json!({"owner": "x"}))), team(Some(json!({"owner": "x"})))),
        (wrong(Some(json!({"owner": "x"}))), wrong(None)),
        (wrong(None), wrong(Some(json!({})))),
    ] {
        let answer = validate(&reviewer, &update_review(before.clone(), after.clone())).await;
        assert!(answer.allowed(), "{before} -> {after}: {}", answer.message());
        assert_eq!(answer.outcome(), "not-applicable", "{before} -> {after}");
    }
    // A topology change is judged, whichever way the map was written before.
    for before in [None, Some(json!({})), Some(json!({"team": "a"}))] {
        for (key, value) in [
            (ZONE, "us-east-1b"),
            (BETA_ZONE, "us-east-1b"),
            (BETA_REGION, "eu-west-1"),
        ] {
            let mut after = ebs(before.clone());
            after["metadata"]["labels"][key] = json!(value);
            let answer = validate(&reviewer, &update_review(ebs(before.clone()), after.clone())).await;
            assert!(!answer.allowed(), "{after}");
            assert!(
                answer.message().contains(&format!("label {key}={value:?}")),
                "{}",
                answer.message()
            );
        }
    }
    // Removing a topology label is a change too, judged (and here agreeing).
    let answer = validate(
        &reviewer,
        &update_review(ebs(Some(json!({ZONE: "us-east-1a", "team": "a"}))), ebs(None)),
    )
    .await;
    assert_eq!(answer.outcome(), "consistent");
}

/// The legacy beta keys the in-tree labeler wrote, in labels and inside nodeAffinity,
/// are judged as the standard ones are.
#[tokio::test]
async fn the_legacy_beta_keys_are_judged_in_labels_and_node_affinity() {
    let reviewer = plain();
    for (pv, says) in [
        (
            ebs(Some(json!({BETA_REGION: "us-west-2"}))),
            "label failure-domain.beta.kubernetes.io/region=\"us-west-2\"",
        ),
        (
            with_affinity(ebs(None), json!([term(BETA_ZONE, "In", &["us-east-1c"])])),
            "nodeAffinity term 0: failure-domain.beta.kubernetes.io/zone In [\"us-east-1c\"]",
        ),
        (
            with_affinity(ebs(None), json!([term(BETA_REGION, "In", &["eu-west-1"])])),
            "nodeAffinity term 0: failure-domain.beta.kubernetes.io/region In [\"eu-west-1\"]",
        ),
        (
            with_affinity(ebs(None), json!([term(BETA_ZONE, "NotIn", &["us-east-1a"])])),
            "failure-domain.beta.kubernetes.io/zone NotIn [\"us-east-1a\"]",
        ),
    ] {
        let answer = validate(&reviewer, &create_review(pv.clone())).await;
        assert!(!answer.allowed(), "{pv}");
        assert!(answer.message().contains(says), "{says} not in {}", answer.message());
    }
    // Agreeing beta keys are consistent.
    let agreeing = with_affinity(
        ebs(Some(json!({BETA_ZONE: "us-east-1a", BETA_REGION: "us-east-1"}))),
        json!([term(BETA_ZONE, "In", &["us-east-1a"])]),
    );
    let answer = validate(&reviewer, &create_review(agreeing)).await;
    assert_eq!(answer.outcome(), "consistent", "{}", answer.message());
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

/// A regional GCE PD in europe-west1-b and -c, as a lookup (the stand-in) finds it.
fn regional_lookup() -> Reviewer {
    reviewer_with_lookup(Arc::new(FakeLookup::new(
        "pd.csi.storage.gke.io",
        Ok(
            Topology::new(["europe-west1-b", "europe-west1-c"], Some("europe-west1".to_owned()))
                .expect("a valid topology"),
        ),
    )))
}

fn regional_pd(labels: Option<Value>) -> Value {
    pv(
        csi("pd.csi.storage.gke.io", "projects/p/regions/europe-west1/disks/r1"),
        labels,
    )
}

#[tokio::test]
async fn a_regional_disk_named_with_a_zone_outside_its_pair_is_refused() {
    let reviewer = regional_lookup();
    for (pv, says) in [
        (
            regional_pd(Some(json!({ZONE: "europe-west1-d"}))),
            "label topology.kubernetes.io/zone=\"europe-west1-d\"",
        ),
        // Both of the pair and one more.
        (
            regional_pd(Some(json!({ZONE: "europe-west1-b__europe-west1-c__europe-west1-d"}))),
            "europe-west1-b__europe-west1-c__europe-west1-d",
        ),
        (
            with_affinity(
                regional_pd(None),
                json!([term(GKE_ZONE, "In", &["europe-west1-b", "europe-west1-d"])]),
            ),
            "nodeAffinity term 0: topology.gke.io/zone In [\"europe-west1-b\", \"europe-west1-d\"]",
        ),
        (
            with_affinity(regional_pd(None), json!([term(ZONE, "In", &["europe-west1-d"])])),
            "nodeAffinity term 0: topology.kubernetes.io/zone In [\"europe-west1-d\"]",
        ),
        // Excluding both zones of the pair leaves it nowhere.
        (
            with_affinity(
                regional_pd(None),
                json!([term(GKE_ZONE, "NotIn", &["europe-west1-b", "europe-west1-c"])]),
            ),
            "NotIn",
        ),
    ] {
        let answer = validate(&reviewer, &create_review(pv.clone())).await;
        assert!(!answer.allowed(), "{pv}");
        assert_eq!(answer.outcome(), "contradicts", "{pv}");
        let message = answer.message();
        assert!(message.contains(says), "{says:?} not in {message}");
        assert!(
            message.contains("but the disk is in zones europe-west1-b, europe-west1-c"),
            "{message}"
        );
        assert!(
            message.contains("projects/p/regions/europe-west1/disks/r1") && message.contains("(found by lookup fake)"),
            "{message}"
        );
    }
    // Both zones, as /mutate writes them, and the region: fine.
    let answer = validate(
        &reviewer,
        &create_review(regional_pd(Some(
            json!({ZONE: "europe-west1-b__europe-west1-c", REGION: "europe-west1"}),
        ))),
    )
    .await;
    assert!(answer.allowed(), "{}", answer.message());
    assert_eq!(answer.outcome(), "consistent");
}

#[tokio::test]
async fn a_zone_less_disk_is_judged_by_its_region_alone() {
    // An Azure zone-redundant (ZRS) disk: Disks.Get gives a region and no zone.
    let reviewer = reviewer_with_lookup(Arc::new(FakeLookup::new(
        "disk.csi.azure.com",
        Ok(Topology::new(Vec::<String>::new(), Some("westeurope".to_owned())).expect("a region-only topology")),
    )));
    let zrs = |labels: Option<Value>| {
        pv(
            csi(
                "disk.csi.azure.com",
                "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/disks/zrs1",
            ),
            labels,
        )
    };
    // Any zone is fine (the disk attaches in every zone of its region); its region is.
    for pv in [
        zrs(Some(json!({ZONE: "westeurope-1", REGION: "westeurope"}))),
        with_affinity(
            zrs(None),
            json!([term("topology.disk.csi.azure.com/zone", "In", &["westeurope-3"])]),
        ),
        with_affinity(zrs(None), json!([term(REGION, "In", &["westeurope"])])),
    ] {
        let answer = validate(&reviewer, &create_review(pv.clone())).await;
        assert!(answer.allowed(), "{pv}: {}", answer.message());
        assert_eq!(answer.outcome(), "consistent", "{pv}");
    }
    // Another region is not.
    for (pv, says) in [
        (
            zrs(Some(json!({ZONE: "northeurope-1", REGION: "northeurope"}))),
            "label topology.kubernetes.io/region=\"northeurope\"",
        ),
        (
            with_affinity(zrs(None), json!([term(REGION, "In", &["northeurope"])])),
            "nodeAffinity term 0: topology.kubernetes.io/region In [\"northeurope\"]",
        ),
    ] {
        let answer = validate(&reviewer, &create_review(pv.clone())).await;
        assert!(!answer.allowed(), "{pv}");
        assert_eq!(answer.outcome(), "contradicts", "{pv}");
        let message = answer.message();
        assert!(message.contains(says), "{says:?} not in {message}");
        assert!(message.contains("but the disk is in region westeurope"), "{message}");
        assert!(
            !message.contains("zone northeurope-1"),
            "zones are not judged: {message}"
        );
    }
}

#[tokio::test]
async fn a_topology_from_a_rule_is_validated_the_same_way() {
    // tests/data/webhook/rules.yaml: csi.example.com handles are REGION/ZONE/…, with the
    // driver's zone key topology.csi.example.com/zone; cinder is all in nova, RegionOne.
    let reviewer = reviewer(fixture_rules());
    let example = |labels: Option<Value>| pv(csi("csi.example.com", "region1/zone-a/vol-7"), labels);
    let cinder = |labels: Option<Value>| pv(json!({"cinder": {"volumeID": "v1"}}), labels);
    for (pv, says, disk) in [
        (
            example(Some(json!({ZONE: "zone-b"}))),
            "label topology.kubernetes.io/zone=\"zone-b\"",
            "zone zone-a",
        ),
        (
            with_affinity(
                example(None),
                json!([term("topology.csi.example.com/zone", "In", &["zone-b"])]),
            ),
            "nodeAffinity term 0: topology.csi.example.com/zone In [\"zone-b\"]",
            "zone zone-a",
        ),
        (
            cinder(Some(json!({ZONE: "nova", REGION: "RegionTwo"}))),
            "label topology.kubernetes.io/region=\"RegionTwo\"",
            "region RegionOne",
        ),
    ] {
        let answer = validate(&reviewer, &create_review(pv.clone())).await;
        assert!(!answer.allowed(), "{pv}");
        assert_eq!(answer.outcome(), "contradicts", "{pv}");
        let message = answer.message();
        assert!(message.contains(says), "{says:?} not in {message}");
        assert!(
            message.contains(&format!("but the disk is in {disk}")),
            "{disk:?} not in {message}"
        );
        assert!(
            message.contains("(found by rule ") && message.contains("rules.yaml#rules["),
            "{message}"
        );
    }
    for pv in [
        example(Some(json!({ZONE: "zone-a", REGION: "region1"}))),
        with_affinity(
            example(None),
            json!([term("topology.csi.example.com/zone", "In", &["zone-a"])]),
        ),
        cinder(Some(json!({ZONE: "nova", REGION: "RegionOne"}))),
    ] {
        let answer = validate(&reviewer, &create_review(pv.clone())).await;
        assert!(answer.allowed(), "{pv}: {}", answer.message());
        assert_eq!(answer.outcome(), "consistent", "{pv}");
    }
}

#[tokio::test]
async fn a_provisioned_pv_whose_lookup_fails_is_admitted_with_a_warning_whatever_on_lookup_error_says() {
    // The CSI driver that provisioned a PV placed its disk: a cloud-API hiccup must not
    // make /validate break dynamic provisioning. A hand-made PV still follows
    // --on-lookup-error.
    let failing = Arc::new(FakeLookup::new(
        "ebs.csi.aws.com",
        Err(LookupError::Failed("EC2 said no".to_owned())),
    ));
    let reviewer = with_lookup(failing, OnLookupError::Deny);
    let hand_made = pv(
        csi("ebs.csi.aws.com", "vol-0123456789abcdef0"),
        Some(json!({ZONE: "us-east-1a"})),
    );
    let mut provisioned = hand_made.clone();
    provisioned["metadata"]["annotations"] = json!({"pv.kubernetes.io/provisioned-by": "ebs.csi.aws.com"});

    let answer = validate(&reviewer, &create_review(provisioned.clone())).await;
    assert!(answer.allowed(), "{}", answer.message());
    assert_eq!(answer.outcome(), "lookup-failed");
    let warnings = answer.warnings().join("\n");
    assert!(
        warnings.contains("cannot check the topology of CSI ebs.csi.aws.com volume \"vol-0123456789abcdef0\"")
            && warnings.contains("EC2 said no")
            && warnings.contains("provisioned by ebs.csi.aws.com"),
        "{warnings}"
    );
    // Also when the labels the provisioner wrote are there (trusted by /mutate).
    let mut labeled = provisioned.clone();
    labeled["metadata"]["labels"] = json!({ZONE: "us-east-1a", REGION: "us-east-1"});
    let answer = validate(&reviewer, &create_review(labeled)).await;
    assert!(answer.allowed(), "{}", answer.message());

    let answer = validate(&reviewer, &create_review(hand_made)).await;
    assert!(!answer.allowed());
    assert_eq!(answer.outcome(), "lookup-failed");
    assert!(
        answer.message().contains("EC2 said no") && answer.message().contains("--on-lookup-error=deny"),
        "{}",
        answer.message()
    );

    // A provisioned PV whose lookup succeeded and contradicts is judged as any other.
    let found = Arc::new(FakeLookup::new(
        "ebs.csi.aws.com",
        Ok(Topology::new(["us-east-1b"], Some("us-east-1".to_owned())).expect("a valid topology")),
    ));
    let reviewer = with_lookup(found, OnLookupError::Deny);
    let answer = validate(&reviewer, &create_review(provisioned)).await;
    assert!(!answer.allowed());
    assert_eq!(answer.outcome(), "contradicts");
    assert!(
        answer.message().contains("but the disk is in zone us-east-1b"),
        "{}",
        answer.message()
    );
}

#[tokio::test]
async fn a_rule_giving_an_unusable_topology_is_admitted_with_the_warning_mutate_gives() {
    // The rule's zone group captures "bad/zone", which no label value can be.
    let reviewer = reviewer(rules(
        "rules:\n  - driver: ebs.csi.aws.com\n    volumeHandle: '^(?P<zone>[^:]*):'\n",
    ));
    let body = create_review(pv(csi("ebs.csi.aws.com", "bad/zone:vol"), None));
    let mutated = review(&reviewer, &body).await;
    assert_eq!(mutated.outcome(), "invalid-topology");
    let warnings = mutated.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("gave an unusable topology") && warnings[0].contains("rules[0]"),
        "{warnings:?}"
    );
    let validated = validate(&reviewer, &body).await;
    assert!(validated.allowed(), "{}", validated.message());
    assert_eq!(validated.outcome(), "invalid-topology");
    assert_eq!(validated.warnings(), warnings);
    assert_eq!(validated.audit("source"), mutated.audit("source"));
}
