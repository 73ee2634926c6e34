//! Odd and hostile input: every AdmissionReview gets an answer (an admission.k8s.io/v1
//! AdmissionReview carrying the request's uid, whose patch applies) or a clean 4xx
//! refusal saying what is wrong, never a panic; odd-but-valid PVs still get idempotent
//! patches; the handle parsers' answers on arbitrary text keep their own invariants.

mod common;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use common::*;
use http_body_util::BodyExt as _;
use pv_topology_webhook::builtin::{self, Builtin, GcePdLocation};
use pv_topology_webhook::server::{AppState, router};
use pv_topology_webhook::source::{InTree, VolumeIdentity, VolumeKind};
use pv_topology_webhook::topology::check_label_value;
use serde_json::{Value, json};
use tower::ServiceExt as _;

const GCE: &str = "pd.csi.storage.gke.io";

/// Checks what every answer must be: an admission.k8s.io/v1 AdmissionReview whose
/// response carries `uid`, a JSONPatch (when there is a patch) that applies to the
/// request's object; returns the patched object.
fn assert_well_formed(body: &[u8], answer: &Answer, uid: &str) -> Value {
    assert_eq!(answer.review["apiVersion"], "admission.k8s.io/v1", "{}", answer.review);
    assert_eq!(answer.review["kind"], "AdmissionReview", "{}", answer.review);
    assert_eq!(answer.uid(), uid, "{}", answer.review);
    assert!(answer.response()["allowed"].is_boolean(), "{}", answer.review);
    match answer.raw_patch() {
        Some(_) => assert_eq!(answer.response()["patchType"], "JSONPatch", "{}", answer.review),
        None => assert!(answer.response().get("patchType").is_none(), "{}", answer.review),
    }
    let review: Value = serde_json::from_slice(body).expect("the request is JSON");
    let mut object = review["request"]["object"].clone();
    if let Some(ops) = answer.patch() {
        json_patch::patch(&mut object, &ops)
            .unwrap_or_else(|e| panic!("the patch does not apply to the object: {e}; {}", answer.review));
    }
    object
}

/// `body` with the request's uid replaced by `uid`.
fn with_uid(body: &[u8], uid: &str) -> Vec<u8> {
    let mut review: Value = serde_json::from_slice(body).expect("JSON");
    review["request"]["uid"] = json!(uid);
    serde_json::to_vec(&review).expect("encode")
}

/// POSTs `body` to `/mutate` of the in-process Router: status and body text.
async fn post(body: Vec<u8>) -> (StatusCode, String) {
    let request = Request::post("/mutate")
        .header("content-type", "application/json")
        .body(Body::from(body))
        .expect("request");
    let response = router(AppState::new(plain()))
        .oneshot(request)
        .await
        .expect("the router answers");
    let status = response.status();
    let bytes = response.into_body().collect().await.expect("body").to_bytes();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

#[tokio::test]
async fn objects_that_are_not_persistent_volumes_are_admitted_with_a_warning() {
    for (i, object) in [
        json!({"metadata": {"name": "x"}, "spec": "not an object"}),
        json!({"metadata": {"name": "x"}, "spec": {"csi": {"driver": 5}}}),
        json!({"metadata": {"name": "x"}, "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": "x"}}}}),
        // The request's object is not even an object.
        json!("a string"),
        json!([{"spec": {}}]),
    ]
    .into_iter()
    .enumerate()
    {
        let uid = format!("uid-unreadable-{i}");
        // The request names the PV "x" whatever its object is.
        let mut body: Value = serde_json::from_slice(&create_review(json!({"metadata": {"name": "x"}}))).expect("JSON");
        body["request"]["object"] = object.clone();
        let body = with_uid(&serde_json::to_vec(&body).expect("encode"), &uid);
        let answer = review(&plain(), &body).await;
        assert_well_formed(&body, &answer, &uid);
        assert!(answer.allowed(), "{object}");
        assert_eq!(answer.raw_patch(), None, "{object}");
        assert_eq!(answer.outcome(), "unreadable", "{object}");
        assert_eq!(answer.warnings().len(), 1, "{object}");
        assert!(
            answer.warnings()[0].contains("could not read the PersistentVolume"),
            "{object}: {:?}",
            answer.warnings()
        );
        // The server gives the same bytes with 200.
        let (status, text) = post(body.clone()).await;
        assert_eq!(status, StatusCode::OK, "{text}");
        assert_eq!(text.as_bytes(), answer.bytes.as_slice());
    }
    // A CREATE with no object at all.
    let mut body: Value = serde_json::from_slice(&create_review(pv(csi(GCE, "h"), None))).expect("JSON");
    body["request"]["object"] = Value::Null;
    let body = serde_json::to_vec(&body).expect("encode");
    let answer = review(&plain(), &body).await;
    assert_well_formed(&body, &answer, "00000000-0000-0000-0000-000000000001");
    assert_eq!((answer.allowed(), answer.outcome()), (true, "unreadable"));
    assert_eq!(answer.raw_patch(), None);
}

#[tokio::test]
async fn malformed_reviews_are_refused_with_4xx_saying_what_is_wrong() {
    const NOT_A_REVIEW: &str = "input is not an admission.k8s.io/v1 AdmissionReview";
    let review =
        |request: Value| json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request});
    let pv_kind = json!({"group": "", "version": "v1", "kind": "PersistentVolume"});
    // Each body, and what the refusal must say: the field or value at fault where the
    // decoder names it (a wrong type is located by line and column instead).
    let cases = [
        (
            review(json!({"uid": "u", "object": {"metadata": {"labels": 5}}})),
            "missing field `kind`",
        ),
        (review(Value::Null), "it has no `request`"),
        (
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}),
            "it has no `request`",
        ),
        (review(json!([])), "invalid length 0"),
        (
            review(json!({"uid": 1})),
            "invalid type: integer `1`, expected a string",
        ),
        (
            review(json!({"uid": "u", "kind": pv_kind, "operation": "EXPLODE"})),
            "unknown variant `EXPLODE`",
        ),
        (
            json!({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": {}}),
            "admission.k8s.io/v1beta1",
        ),
        (json!({"apiVersion": "v1", "kind": "Pod"}), NOT_A_REVIEW),
        (json!([1, 2, 3]), NOT_A_REVIEW),
        (json!("AdmissionReview"), "invalid type: string \"AdmissionReview\""),
    ];
    for (body, says) in cases {
        let bytes = serde_json::to_vec(&body).expect("encode");
        let error = plain()
            .review(&bytes)
            .await
            .expect_err(&format!("{body} was answered"))
            .to_string();
        assert!(error.starts_with(NOT_A_REVIEW), "{body}: {error}");
        assert!(error.contains(says), "{body}: {error:?} does not say {says:?}");
        let (status, text) = post(bytes).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {text}");
        assert_eq!(
            text.trim_end(),
            error,
            "{body}: the HTTP answer says what the reviewer said"
        );
    }
    for (bytes, says) in [
        (&b"not json"[..], "input is not JSON"),
        (b"", "input is not JSON"),
        (b"{\"apiVersion\": \"admission.k8s.io/v1\", ", "input is not JSON"),
    ] {
        let (status, text) = post(bytes.to_vec()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
        assert!(text.starts_with(says), "{text}");
    }
    let huge = vec![b' '; pv_topology_webhook::review::MAX_REVIEW_BYTES + 1];
    let error = plain().review(&huge).await.expect_err("a huge body was answered");
    assert!(error.to_string().contains("larger than"), "{error}");
    let (status, text) = post(huge).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{text}");
    assert!(
        text.contains(&pv_topology_webhook::review::MAX_REVIEW_BYTES.to_string()),
        "{text}"
    );
}

#[tokio::test]
async fn odd_but_valid_affinity_shapes_are_patched_idempotently() {
    let handle = "projects/p/zones/us-east1-b/disks/d";
    for (i, affinity) in [
        json!({"required": {"nodeSelectorTerms": [{}]}}),
        json!({"required": {"nodeSelectorTerms": [{"matchExpressions": []}]}}),
        json!({"required": {"nodeSelectorTerms": [{"matchExpressions": null, "matchFields": null}]}}),
        json!({"required": null}),
    ]
    .into_iter()
    .enumerate()
    {
        let spec = json!({"csi": {"driver": GCE, "volumeHandle": handle}, "nodeAffinity": affinity});
        let uid = format!("uid-affinity-{i}");
        let body = with_uid(&create_review(pv(spec, Some(json!({})))), &uid);
        let answer = assert_idempotent(&plain(), &body).await;
        let object = assert_well_formed(&body, &answer, &uid);
        assert!(answer.allowed(), "{affinity}");
        let expressions = &object["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"];
        assert_eq!(
            expressions,
            &json!([{"key": "topology.gke.io/zone", "operator": "In", "values": ["us-east1-b"]}]),
            "{affinity}"
        );
        assert_eq!(
            object["metadata"]["labels"],
            json!({"topology.kubernetes.io/zone": "us-east1-b", "topology.kubernetes.io/region": "us-east1"}),
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
    for (i, handle) in handles.into_iter().enumerate() {
        let uid = format!("uid-handle-{i}");
        let body = with_uid(&create_review(pv(csi(GCE, &handle), None)), &uid);
        let answer = review(&plain(), &body).await;
        assert_well_formed(&body, &answer, &uid);
        assert!(answer.allowed(), "{handle}");
        assert_eq!(answer.raw_patch(), None, "{handle}");
        assert_eq!(answer.outcome(), "not-configured", "{handle}");
    }
}

/// A deterministic xorshift generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// The invariants of the handle parsers' answers on `text` (as a zone, in a GCE PD
/// handle, in an EBS volume ID); counts the answers that were not `None`.
fn check_parsers(text: &str, found: &mut [usize; 4]) {
    if let Some(region) = builtin::aws_region_of_zone(text) {
        found[0] += 1;
        assert!(
            text.starts_with(region) && text.len() > region.len(),
            "{text} -> {region}"
        );
        assert!(region.ends_with(|c: char| c.is_ascii_digit()), "{text} -> {region}");
        assert!(
            region.starts_with(|c: char| c.is_ascii_lowercase()),
            "{text} -> {region}"
        );
    }
    if let Some(region) = builtin::gce_region_of_zone(text) {
        found[1] += 1;
        let suffix = text.strip_prefix(region).and_then(|s| s.strip_prefix('-'));
        assert!(
            suffix.is_some_and(|s| !s.is_empty() && !s.contains('-')),
            "{text} -> {region}"
        );
        assert!(builtin::is_gce_region(region), "{text} -> {region}");
    }
    for handle in [text.to_owned(), format!("projects/p/zones/{text}/disks/d")] {
        match builtin::parse_gce_pd_handle(&handle) {
            None => {}
            Some(GcePdLocation::Zonal { zone, region }) => {
                found[2] += 1;
                assert!(handle.contains(&format!("/zones/{zone}/disks/")), "{handle}");
                assert_eq!(builtin::gce_region_of_zone(&zone), Some(region.as_str()), "{handle}");
            }
            Some(GcePdLocation::Regional { region }) => {
                found[2] += 1;
                assert!(handle.contains(&format!("/regions/{region}/disks/")), "{handle}");
                assert!(builtin::is_gce_region(&region), "{handle}");
            }
        }
    }
    for volume in [
        VolumeIdentity::csi(GCE, format!("projects/p/zones/{text}/disks/d")),
        VolumeIdentity::csi(GCE, format!("projects/p/regions/{text}/disks/d")),
        VolumeIdentity::in_tree(InTree::AwsElasticBlockStore, format!("aws://{text}/vol-0123")),
        VolumeIdentity::in_tree(InTree::AwsElasticBlockStore, text),
    ] {
        let Some(resolved) = builtin::resolve(&volume) else {
            continue;
        };
        found[3] += 1;
        let (Builtin::Complete(topology) | Builtin::RegionOnly(topology)) = &resolved;
        let region = topology.region().expect("a built-in answer names its region");
        check_label_value(region).unwrap_or_else(|e| panic!("{volume:?}: region {region:?}: {e}"));
        for zone in topology.zones() {
            check_label_value(zone).unwrap_or_else(|e| panic!("{volume:?}: zone {zone:?}: {e}"));
            let of_zone = match volume.kind {
                VolumeKind::InTree(InTree::AwsElasticBlockStore) => builtin::aws_region_of_zone(zone),
                _ => builtin::gce_region_of_zone(zone),
            };
            assert_eq!(of_zone, Some(region), "{volume:?}");
        }
        match &resolved {
            Builtin::Complete(t) => assert_eq!(t.zones().len(), 1, "{volume:?}"),
            Builtin::RegionOnly(t) => assert!(t.zones().is_empty(), "{volume:?}"),
        }
    }
}

#[test]
fn builtin_parsers_keep_their_invariants_on_arbitrary_text() {
    // Real zone and region names, edited at random with characters rich in separators
    // and non-ASCII, so that some results parse and most do not.
    let seeds = [
        "us-east-1a",
        "us-west-2-lax-1a",
        "us-east-1-wl1-bos-wlz-1",
        "us-central1-b",
        "europe-west4",
        "northamerica-northeast1-c",
        "",
    ];
    let alphabet: Vec<char> = "az09-_/:.éü€ A1".chars().collect();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut found = [0usize; 4];
    for _ in 0..20_000 {
        let mut text: Vec<char> = seeds[rng.below(seeds.len())].chars().collect();
        for _ in 0..rng.below(4) {
            let c = alphabet[rng.below(alphabet.len())];
            match rng.below(3) {
                0 => text.insert(rng.below(text.len() + 1), c),
                1 if !text.is_empty() => {
                    let at = rng.below(text.len());
                    text[at] = c;
                }
                _ if !text.is_empty() => {
                    text.remove(rng.below(text.len()));
                }
                _ => text.push(c),
            }
        }
        check_parsers(&text.into_iter().collect::<String>(), &mut found);
    }
    // Not vacuous: each parser answered a good share of the inputs.
    for (name, count) in [
        "aws_region_of_zone",
        "gce_region_of_zone",
        "parse_gce_pd_handle",
        "resolve",
    ]
    .iter()
    .zip(found)
    {
        assert!(count > 1_000, "{name} answered only {count} inputs");
    }
}
