//! AdmissionReview bytes -> the webhook's answer (`Reviewer::review`, rules
//! from tests/data/webhook/rules.yaml, no cloud lookup).
//!
//! Properties of every answer carrying a JSON Patch: it applies to the
//! request's object; applying it a second time changes nothing: the object
//! is strictly equal to the object patched once (since W1 was fixed the patch
//! replaces a changed term's matchExpressions instead of appending with `/-`:
//! docs/testing.md, "Fuzzing", finding W1); the webhook reviewing the patched
//! object (a reinvocation) changes nothing more; every label it writes has a
//! valid key and value; it leaves no empty nodeSelectorTerms list, term or
//! `In`/`NotIn` value list.
#![no_main]

use std::path::Path;
use std::sync::LazyLock;

use base64::Engine as _;
use fuzz::{block_on, valid_label_key, valid_label_value};
use libfuzzer_sys::fuzz_target;
use pv_topology_webhook::model::DecisionConfig;
use pv_topology_webhook::resolve::Resolver;
use pv_topology_webhook::review::Reviewer;
use pv_topology_webhook::rules::Rules;
use serde_json::Value;

static REVIEWER: LazyLock<Reviewer> = LazyLock::new(|| {
    let path = fuzz::data_dir().join("webhook/rules.yaml");
    let text = std::fs::read_to_string(&path).expect("tests/data/webhook/rules.yaml");
    let rules = Rules::parse(Path::new("rules.yaml"), &text).expect("the test rules parse");
    Reviewer::new(Resolver::new(rules), DecisionConfig::default())
});

fuzz_target!(|data: &[u8]| {
    let Ok(answer) = block_on(REVIEWER.review(data)) else {
        return;
    };
    let review: Value = serde_json::from_slice(&answer.body).expect("the answer is JSON");
    let response = &review["response"];
    assert_eq!(response["allowed"].as_bool(), Some(answer.allowed));
    let Some(patch) = response["patch"].as_str() else {
        return;
    };
    assert_eq!(response["patchType"], "JSONPatch");
    let patch = base64::engine::general_purpose::STANDARD
        .decode(patch)
        .expect("the patch is base64");
    let patch: json_patch::Patch = serde_json::from_slice(&patch).expect("the patch is a JSON Patch");
    // The webhook skips what it does not read without checking it (serde's
    // IgnoredAny): invalid UTF-8 there is answered; such an object cannot be
    // patched here (kube-apiserver never sends one: Go's encoder replaces it).
    let Ok(request) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let original = request["request"]["object"].clone();
    let mut once = original.clone();
    if let Err(e) = json_patch::patch(&mut once, &patch) {
        panic!("the patch does not apply to the object: {e}\npatch: {patch:?}");
    }
    let mut twice = once.clone();
    let again = json_patch::patch(&mut twice, &patch);
    assert!(
        again.is_ok() && twice == once,
        "applying the patch twice changes the object: {again:?}\npatch: {patch:?}"
    );
    let mut reinvoked = request.clone();
    reinvoked["request"]["object"] = once.clone();
    let body = serde_json::to_vec(&reinvoked).expect("JSON");
    if let Ok(second) = block_on(REVIEWER.review(&body)) {
        let review: Value = serde_json::from_slice(&second.body).expect("the answer is JSON");
        if let Some(patch) = review["response"]["patch"].as_str() {
            let patch = base64::engine::general_purpose::STANDARD.decode(patch).expect("base64");
            let patch: json_patch::Patch = serde_json::from_slice(&patch).expect("a JSON Patch");
            let mut thrice = once.clone();
            let applied = json_patch::patch(&mut thrice, &patch);
            assert!(
                applied.is_ok() && thrice == once,
                "reviewing the patched object patches it again: {applied:?}\npatch: {patch:?}"
            );
        }
    }

    let labels = |object: &Value| object["metadata"]["labels"].as_object().cloned().unwrap_or_default();
    let before = labels(&original);
    for (key, value) in labels(&once) {
        if before.get(&key) == Some(&value) {
            continue;
        }
        assert!(valid_label_key(&key), "the patch writes the invalid label key {key:?}");
        let value = value
            .as_str()
            .unwrap_or_else(|| panic!("label {key:?} is not a string: {value}"));
        assert!(
            valid_label_value(value),
            "the patch writes the invalid value {value:?} of {key:?}"
        );
    }
    // What the patch wrote: terms and requirements the object did not have
    // (an invalid one the object already held is the API server's to refuse).
    let affinity = |object: &Value| object["spec"]["nodeAffinity"].clone();
    let before = affinity(&original);
    let after = affinity(&once);
    if after != before && !after.is_null() {
        let terms = after["required"]["nodeSelectorTerms"]
            .as_array()
            .unwrap_or_else(|| panic!("the patched nodeAffinity has no nodeSelectorTerms: {after}"));
        assert!(!terms.is_empty(), "the patch leaves an empty nodeSelectorTerms list");
        let old_terms = before["required"]["nodeSelectorTerms"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        // A requirement as the API defines it: the webhook rewrites a term's list with
        // these fields only (the apiserver drops unknown ones before admission).
        // (A missing key or operator is read as empty, as Go's decoder reads it.)
        let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        let known = |r: &Value| serde_json::json!([text(&r["key"]), text(&r["operator"]), r["values"]]);
        let old_requirements: Vec<Value> = old_terms
            .iter()
            .flat_map(|t| t["matchExpressions"].as_array().into_iter().flatten())
            .map(known)
            .collect();
        for term in terms.iter().filter(|t| !old_terms.contains(t)) {
            let expressions = term["matchExpressions"].as_array().map_or(0, Vec::len);
            let fields = term["matchFields"].as_array().map_or(0, Vec::len);
            assert!(
                expressions + fields > 0,
                "the patch leaves an empty nodeSelectorTerm: {term}"
            );
            let written = term["matchExpressions"].as_array().into_iter().flatten();
            for requirement in written.filter(|r| !old_requirements.contains(&known(r))) {
                let operator = requirement["operator"].as_str().unwrap_or_default();
                if matches!(operator, "In" | "NotIn") {
                    let values = requirement["values"].as_array().map_or(0, Vec::len);
                    assert!(values > 0, "the patch writes an empty value list: {requirement}");
                }
            }
        }
    }
});
