//! The Routers in-process (no socket), through `tower::ServiceExt::oneshot`.

mod common;

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use common::*;
use http_body_util::BodyExt as _;
use pv_topology_webhook::lookup::CachedLookup;
use pv_topology_webhook::resolve::Resolver;
use pv_topology_webhook::review::{MAX_REVIEW_BYTES, Reviewer};
use pv_topology_webhook::rules::Rules;
use pv_topology_webhook::server::{AppState, admin_router, router};
use pv_topology_webhook::topology::Topology;
use serde_json::{Value, json};
use tower::ServiceExt as _;

async fn call(app: axum::Router, method: Method, path: &str, body: Vec<u8>) -> (StatusCode, Vec<u8>) {
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(Body::from(body))
        .unwrap();
    let response = app.oneshot(request).await.unwrap();
    let status = response.status();
    let body = response.into_body().collect().await.unwrap().to_bytes().to_vec();
    (status, body)
}

async fn post(state: &AppState, body: Vec<u8>) -> (StatusCode, Vec<u8>) {
    call(router(state.clone()), Method::POST, "/mutate", body).await
}

async fn metrics_text(state: &AppState) -> String {
    let (status, body) = call(admin_router(state.clone()), Method::GET, "/metrics", Vec::new()).await;
    assert_eq!(status, StatusCode::OK);
    String::from_utf8(body).unwrap()
}

/// The value of the sample whose line starts with `series`, 0 if absent.
fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test]
async fn every_fixture_gets_200_and_its_uid_back() {
    let state = AppState::new(reviewer(fixture_rules()));
    for name in [
        "gce-pd-csi-zonal.json",
        "ebs-in-tree.json",
        "rules-driver.json",
        "nfs.json",
        "update-op.json",
        "not-a-pv.json",
        "regional-pd.json",
    ] {
        let body = fixture(name);
        let uid = serde_json::from_slice::<Value>(&body).unwrap()["request"]["uid"].clone();
        let (status, answer) = post(&state, body).await;
        assert_eq!(status, StatusCode::OK, "{name}");
        let answer: Value = serde_json::from_slice(&answer).unwrap();
        assert_eq!(answer["response"]["uid"], uid, "{name}");
        assert_eq!(answer["apiVersion"], "admission.k8s.io/v1", "{name}");
        assert_eq!(answer["kind"], "AdmissionReview", "{name}");
    }
}

#[tokio::test]
async fn the_answer_is_the_same_as_the_review_subcommands() {
    let state = AppState::new(reviewer(fixture_rules()));
    let body = fixture("gce-pd-csi-zonal.json");
    let (status, over_http) = post(&state, body.clone()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(over_http, reviewer(fixture_rules()).review(&body).await.unwrap().body);
}

#[tokio::test]
async fn bodies_that_are_not_reviews_get_400_with_a_reason() {
    let state = AppState::new(plain());
    let no_request = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"});
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}});
    let v1beta1 = json!({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": {"uid": "u"}});
    for (body, reason) in [
        (b"garbage".to_vec(), "not JSON"),
        (Vec::new(), "not JSON"),
        (serde_json::to_vec(&no_request).unwrap(), "no `request`"),
        (
            serde_json::to_vec(&pod).unwrap(),
            "not an admission.k8s.io/v1 AdmissionReview",
        ),
        (serde_json::to_vec(&v1beta1).unwrap(), "admission.k8s.io/v1beta1"),
    ] {
        let (status, text) = post(&state, body.clone()).await;
        let text = String::from_utf8(text).unwrap();
        assert_eq!(status, StatusCode::BAD_REQUEST, "{}", String::from_utf8_lossy(&body));
        assert!(text.contains(reason), "{text:?} lacks {reason:?}");
    }
    assert_eq!(
        sample(
            &metrics_text(&state).await,
            "pv_topology_webhook_admission_requests_total{outcome=\"bad-request\",allowed=\"false\",check=\"mutate\"}"
        ),
        5.0
    );
}

#[tokio::test]
async fn the_body_limit_is_4_mib_and_over_it_is_413() {
    // kube-apiserver's 3 MiB request body limit for the object, plus 1 MiB for the rest
    // of the review (docs/decisions.md).
    assert_eq!(MAX_REVIEW_BYTES, 4 * 1024 * 1024);
    let state = AppState::new(plain());
    let (status, _) = post(&state, vec![b' '; MAX_REVIEW_BYTES + 1]).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    // Exactly at the limit is read (and is not JSON): 400, not 413.
    let (status, _) = post(&state, vec![b' '; MAX_REVIEW_BYTES]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    // A real review padded with whitespace up to the limit is answered.
    let mut body = fixture("nfs.json");
    body.resize(MAX_REVIEW_BYTES, b' ');
    let (status, _) = post(&state, body).await;
    assert_eq!(status, StatusCode::OK);
    // A streamed body with no Content-Length is cut at the limit too.
    let chunks = (0..8).map(|_| vec![b' '; 1024 * 1024].into()).collect();
    let request = Request::post("/mutate").body(Body::new(Chunks(chunks))).unwrap();
    let response = router(state.clone()).oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let text = metrics_text(&state).await;
    assert_eq!(
        sample(
            &text,
            "pv_topology_webhook_admission_requests_total{outcome=\"too-large\",allowed=\"false\",check=\"mutate\"}"
        ),
        2.0
    );
}

/// A body of unknown length, sent in chunks (Content-Length cannot reveal its size).
struct Chunks(Vec<axum::body::Bytes>);

impl hyper::body::Body for Chunks {
    type Data = axum::body::Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        std::task::Poll::Ready(self.0.pop().map(|chunk| Ok(hyper::body::Frame::data(chunk))))
    }
}

#[tokio::test]
async fn other_paths_and_methods() {
    let state = AppState::new(plain());
    let (status, _) = call(router(state.clone()), Method::POST, "/admit", fixture("nfs.json")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    for path in ["/mutate", "/validate"] {
        let (status, _) = call(router(state.clone()), Method::GET, path, Vec::new()).await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{path}");
    }
    let (status, _) = call(router(state.clone()), Method::GET, "/metrics", Vec::new()).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "metrics are not on the webhook port");
    for path in ["/mutate", "/validate"] {
        let (status, _) = call(admin_router(state.clone()), Method::POST, path, Vec::new()).await;
        assert_eq!(
            status,
            StatusCode::NOT_FOUND,
            "reviews are not on the metrics port: {path}"
        );
    }
}

#[tokio::test]
async fn readiness_follows_serving_and_shutdown() {
    let state = AppState::new(plain());
    let status = |path: &'static str| {
        let state = state.clone();
        async move { call(admin_router(state), Method::GET, path, Vec::new()).await.0 }
    };
    assert_eq!(status("/healthz").await, StatusCode::OK);
    assert_eq!(status("/readyz").await, StatusCode::SERVICE_UNAVAILABLE);
    state.health.set_serving();
    assert_eq!(status("/readyz").await, StatusCode::OK);
    state.health.set_shutting_down();
    assert_eq!(status("/readyz").await, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(status("/healthz").await, StatusCode::OK, "alive while draining");
}

#[tokio::test]
async fn metrics_count_outcomes_latency_and_lookups() {
    let fake = FakeLookup::new(
        "ebs.csi.aws.com",
        Ok(Topology::new(["us-east-1a"], Some("us-east-1".to_owned())).unwrap()),
    );
    let metrics = Arc::new(pv_topology_webhook::metrics::Metrics::new());
    let cached = CachedLookup::new(fake, NonZeroUsize::new(8).unwrap(), Duration::from_secs(60))
        .with_counters(metrics.cache_counters("fake"));
    let reviewer = Reviewer::new(
        Resolver::new(Rules::default()).with_lookup(Arc::new(cached)),
        Default::default(),
    );
    let mut state = AppState::new(reviewer);
    state.metrics = metrics;
    let ebs = create_review(pv(csi("ebs.csi.aws.com", "vol-0123"), None));
    for _ in 0..3 {
        let (status, _) = post(&state, ebs.clone()).await;
        assert_eq!(status, StatusCode::OK);
    }
    let (status, _) = post(&state, fixture("nfs.json")).await;
    assert_eq!(status, StatusCode::OK);
    let text = metrics_text(&state).await;
    let p = "pv_topology_webhook_";
    assert_eq!(
        sample(
            &text,
            &format!("{p}admission_requests_total{{outcome=\"labeled\",allowed=\"true\",check=\"mutate\"}}")
        ),
        3.0,
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            &format!("{p}admission_requests_total{{outcome=\"unrecognized\",allowed=\"true\",check=\"mutate\"}}")
        ),
        1.0,
        "{text}"
    );
    assert_eq!(
        sample(&text, &format!("{p}admission_duration_seconds_count")),
        4.0,
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            &format!("{p}lookups_total{{lookup=\"fake\",result=\"success\"}}")
        ),
        3.0,
        "{text}"
    );
    assert_eq!(
        sample(&text, &format!("{p}lookup_cache_hits_total{{lookup=\"fake\"}}")),
        2.0,
        "{text}"
    );
    assert_eq!(
        sample(&text, &format!("{p}lookup_cache_misses_total{{lookup=\"fake\"}}")),
        1.0,
        "{text}"
    );
    assert!(
        text.contains(&format!("# TYPE {p}certificate_expiry_timestamp_seconds gauge")),
        "{text}"
    );
    assert!(text.ends_with("# EOF\n"));
}

#[tokio::test]
async fn failed_and_timed_out_lookups_are_counted() {
    let mut slow = FakeLookup::new(
        "ebs.csi.aws.com",
        Err(pv_topology_webhook::lookup::LookupError::NotFound),
    );
    slow.delay = Some(Duration::from_secs(5));
    let failing = FakeLookup::new(
        "disk.csi.azure.com",
        Err(pv_topology_webhook::lookup::LookupError::NotFound),
    );
    let reviewer = Reviewer::new(
        Resolver::new(Rules::default())
            .with_lookup(Arc::new(slow))
            .with_lookup(Arc::new(failing))
            .with_deadline(Duration::from_millis(50)),
        Default::default(),
    );
    let state = AppState::new(reviewer);
    let (status, body) = post(&state, create_review(pv(csi("ebs.csi.aws.com", "vol-1"), None))).await;
    assert_eq!(status, StatusCode::OK, "a timed-out lookup is still an answer");
    let answer: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(answer["response"]["allowed"], false);
    post(
        &state,
        create_review(pv(
            csi(
                "disk.csi.azure.com",
                "/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/disks/d",
            ),
            None,
        )),
    )
    .await;
    let text = metrics_text(&state).await;
    assert_eq!(
        sample(
            &text,
            "pv_topology_webhook_lookups_total{lookup=\"fake\",result=\"timeout\"}"
        ),
        1.0,
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "pv_topology_webhook_lookups_total{lookup=\"fake\",result=\"error\"}"
        ),
        1.0,
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "pv_topology_webhook_admission_requests_total{outcome=\"lookup-failed\",allowed=\"false\",check=\"mutate\"}"
        ),
        2.0,
        "{text}"
    );
}

#[tokio::test]
async fn validate_answers_on_its_own_path_and_is_counted_as_such() {
    let state = AppState::new(plain());
    let lying = create_review(pv(
        csi("pd.csi.storage.gke.io", "projects/p/zones/europe-west1-b/disks/d1"),
        Some(json!({"topology.kubernetes.io/zone": "europe-west1-c"})),
    ));
    let (status, body) = call(router(state.clone()), Method::POST, "/validate", lying.clone()).await;
    assert_eq!(status, StatusCode::OK);
    let answer: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(answer["response"]["allowed"], false, "{answer}");
    assert!(answer["response"].get("patch").is_none(), "{answer}");
    // The same review on /mutate is labeled (the wrong label replaced), not refused.
    let (_, body) = post(&state, lying).await;
    let answer: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
    let text = metrics_text(&state).await;
    let p = "pv_topology_webhook_admission_requests_total";
    for (series, count) in [
        (
            format!("{p}{{outcome=\"contradicts\",allowed=\"false\",check=\"validate\"}}"),
            1.0,
        ),
        (
            format!("{p}{{outcome=\"labeled\",allowed=\"true\",check=\"mutate\"}}"),
            1.0,
        ),
    ] {
        assert_eq!(sample(&text, &series), count, "{series}: {text}");
    }
}
