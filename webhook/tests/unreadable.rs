//! Objects that cannot be read as a PersistentVolume, wherever the fault is (metadata,
//! labels, annotations, spec): the review is still answered, with its uid, the
//! `unreadable` outcome and a warning, by the CLI path and over HTTP alike.

mod common;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use common::*;
use http_body_util::BodyExt as _;
use pv_topology_webhook::server::{AppState, router};
use serde_json::{Value, json};
use tower::ServiceExt as _;

const GCE: &str = "pd.csi.storage.gke.io";

/// A CREATE review of a GCE PD PV (which would be labeled) with `edit` applied to its
/// object (and the request's name left as it was).
fn review_with(edit: impl FnOnce(&mut Value)) -> Vec<u8> {
    let object = pv(
        csi(GCE, "projects/p/zones/us-east1-b/disks/d"),
        Some(json!({"app": "db"})),
    );
    let mut review: Value = serde_json::from_slice(&create_review(object)).unwrap();
    edit(&mut review["request"]["object"]);
    serde_json::to_vec(&review).unwrap()
}

fn unreadable_objects() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("labels a string", review_with(|o| o["metadata"]["labels"] = json!("x"))),
        (
            "a label value 1",
            review_with(|o| o["metadata"]["labels"]["app"] = json!(1)),
        ),
        (
            "a label value null",
            review_with(|o| o["metadata"]["labels"]["app"] = Value::Null),
        ),
        (
            "an annotation value 1",
            review_with(|o| o["metadata"]["annotations"] = json!({"a": 1})),
        ),
        ("metadata null", review_with(|o| o["metadata"] = Value::Null)),
        ("metadata a list", review_with(|o| o["metadata"] = json!([]))),
        ("spec a string", review_with(|o| o["spec"] = json!("x"))),
        ("the object a number", review_with(|o| *o = json!(5))),
    ]
}

#[tokio::test]
async fn every_unreadable_object_gets_the_unreadable_answer_with_its_uid() {
    for (case, body) in unreadable_objects() {
        let answer = plain()
            .review(&body)
            .await
            .unwrap_or_else(|e| panic!("{case}: the review was refused: {e}"))
            .body;
        let answer: Value = serde_json::from_slice(&answer).unwrap();
        let response = &answer["response"];
        assert_eq!(response["uid"], "00000000-0000-0000-0000-000000000001", "{case}");
        assert_eq!(response["allowed"], true, "{case}");
        assert_eq!(response.get("patch"), None, "{case}");
        assert_eq!(response["auditAnnotations"]["outcome"], "unreadable", "{case}");
        let warning = response["warnings"][0].as_str().unwrap_or_default();
        assert!(
            warning.contains("could not read the PersistentVolume"),
            "{case}: {warning}"
        );
    }
}

#[tokio::test]
async fn over_http_an_unreadable_object_is_200_with_the_uid() {
    let state = AppState::new(plain());
    for (case, body) in unreadable_objects() {
        let request = Request::post("/mutate")
            .header("content-type", "application/json")
            .body(Body::from(body))
            .unwrap();
        let response = router(state.clone()).oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{case}");
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let answer: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            answer["response"]["auditAnnotations"]["outcome"], "unreadable",
            "{case}"
        );
    }
}

#[tokio::test]
async fn labels_null_or_absent_are_no_labels_and_get_the_whole_map() {
    for edit in [
        (|o: &mut Value| o["metadata"]["labels"] = Value::Null) as fn(&mut Value),
        |o| {
            o["metadata"].as_object_mut().unwrap().remove("labels");
        },
    ] {
        let answer = review(&plain(), &review_with(edit)).await;
        assert_eq!(answer.outcome(), "labeled");
        assert_eq!(answer.patch_json()[0]["path"], "/metadata/labels");
    }
}

#[tokio::test]
async fn only_the_topology_labels_are_compared_among_many() {
    // Many other labels, the zone label among them and wrong: replaced, the rest kept.
    let body = review_with(|o| {
        let labels = o["metadata"]["labels"].as_object_mut().unwrap();
        for i in 0..1000 {
            labels.insert(format!("l{i}"), json!("v"));
        }
        labels.insert("topology.kubernetes.io/zone".into(), json!("us-east1-c"));
    });
    let answer = assert_idempotent(&plain(), &body).await;
    let object = patched_object(&body, &answer);
    let labels = object["metadata"]["labels"].as_object().unwrap();
    assert_eq!(labels.len(), 1003);
    assert_eq!(labels["topology.kubernetes.io/zone"], "us-east1-b");
    assert_eq!(labels["topology.kubernetes.io/region"], "us-east1");
    assert!(
        answer.warnings()[0].contains("replaced \"us-east1-c\""),
        "{:?}",
        answer.warnings()
    );
}
