//! AdmissionReview bytes -> the webhook's validation (`Reviewer::validate`,
//! `/validate`), rules from tests/data/webhook/rules.yaml, no cloud lookup.
//!
//! Properties: the answer is an AdmissionReview for the request's uid that
//! agrees with `allowed` and never patches; it denies exactly when the outcome
//! is a contradiction, with code 403 and a one-line message. For a CREATE that
//! `/mutate` patches: `/mutate` adds no contradiction (the patched PV is
//! allowed whenever the PV was; the labels and requirements it writes are the
//! disk's), and contradicting what it wrote is denied: the patched PV with its
//! zone label naming a zone the disk is not in, its region label another
//! region, or a requirement it wrote (zones or region `In`) holding another
//! value, is denied, naming that label or nodeAffinity term.
#![no_main]

use std::path::Path;
use std::sync::LazyLock;

use base64::Engine as _;
use fuzz::block_on;
use libfuzzer_sys::fuzz_target;
use pv_topology_webhook::model::{DecisionConfig, Outcome};
use pv_topology_webhook::resolve::Resolver;
use pv_topology_webhook::review::{Answer, Reviewer};
use pv_topology_webhook::rules::Rules;
use serde_json::{Value, json};

const ZONE: &str = "topology.kubernetes.io/zone";
const REGION: &str = "topology.kubernetes.io/region";

static REVIEWER: LazyLock<Reviewer> = LazyLock::new(|| {
    let path = fuzz::data_dir().join("webhook/rules.yaml");
    let text = std::fs::read_to_string(&path).expect("tests/data/webhook/rules.yaml");
    let rules = Rules::parse(Path::new("rules.yaml"), &text).expect("the test rules parse");
    Reviewer::new(Resolver::new(rules), DecisionConfig::default())
});

/// The answer of `/validate` to `body`, checked to be well-formed (for a
/// request of `uid`): its response.
fn validate(body: &[u8], uid: Option<&str>) -> Option<(Answer, Value)> {
    let answer = block_on(REVIEWER.validate(body)).ok()?;
    let review: Value = serde_json::from_slice(&answer.body).expect("the answer is JSON");
    assert_eq!(review["apiVersion"], "admission.k8s.io/v1", "{review}");
    assert_eq!(review["kind"], "AdmissionReview", "{review}");
    let response = review["response"].clone();
    if let Some(uid) = uid {
        assert_eq!(response["uid"].as_str(), Some(uid), "{response}");
    }
    assert_eq!(response["allowed"].as_bool(), Some(answer.allowed), "{response}");
    assert!(
        response.get("patch").is_none() && response.get("patchType").is_none(),
        "validation patches: {response}"
    );
    // No lookup here: the only refusal is a contradiction (--on-contradiction=deny).
    assert_eq!(answer.allowed, answer.outcome != Outcome::Contradicts, "{response}");
    if !answer.allowed {
        assert_eq!(response["status"]["code"], 403, "{response}");
        let message = response["status"]["message"].as_str().unwrap_or_default();
        assert!(!message.is_empty() && !message.contains('\n'), "{response}");
    }
    Some((answer, response))
}

/// `request` with `object` in place of its object.
fn with_object(request: &Value, object: &Value) -> Vec<u8> {
    let mut changed = request.clone();
    changed["request"]["object"] = object.clone();
    serde_json::to_vec(&changed).expect("JSON")
}

/// A zone or region name not in `taken`.
fn elsewhere<'a>(taken: impl Iterator<Item = &'a str> + Clone) -> String {
    (1..)
        .map(|i| format!("fuzz-elsewhere-{i}"))
        .find(|v| !taken.clone().any(|t| t == v))
        .expect("a free value")
}

fuzz_target!(|data: &[u8]| {
    let request: Option<Value> = serde_json::from_slice(data).ok();
    let uid = request
        .as_ref()
        .and_then(|r| r["request"]["uid"].as_str())
        .map(str::to_owned);
    let uid = uid.as_deref();
    let Some((answer, _)) = validate(data, uid) else {
        return;
    };
    let Some(request) = request else {
        return;
    };
    if request["request"]["operation"] != "CREATE" {
        return;
    }
    // What /mutate makes of it.
    let Ok(mutated) = block_on(REVIEWER.review(data)) else {
        return;
    };
    let review: Value = serde_json::from_slice(&mutated.body).expect("the answer is JSON");
    let Some(patch) = review["response"]["patch"].as_str() else {
        return;
    };
    let patch = base64::engine::general_purpose::STANDARD.decode(patch).expect("base64");
    let patch: json_patch::Patch = serde_json::from_slice(&patch).expect("a JSON Patch");
    let original = request["request"]["object"].clone();
    let mut patched = original.clone();
    json_patch::patch(&mut patched, &patch).expect("the patch applies");
    let (judged, response) = validate(&with_object(&request, &patched), uid).expect("a review still");
    if answer.allowed {
        assert!(
            judged.allowed,
            "/mutate's patch makes an allowed PV contradict its disk: {response}\npatch: {patch:?}"
        );
    }
    if judged.outcome != Outcome::Consistent {
        // The PV's own nodeAffinity (or beta labels, which /mutate leaves) contradicts.
        return;
    }

    // The disk's zones and region: what /mutate labels the PV without its GA
    // topology labels with (it keeps a label that already agrees, and any label when
    // the disk's zones or region are unknown).
    let mut unlabeled = original.clone();
    if let Some(labels) = unlabeled["metadata"]["labels"].as_object_mut() {
        labels.remove(ZONE);
        labels.remove(REGION);
    }
    let fresh = block_on(REVIEWER.review(&with_object(&request, &unlabeled))).expect("a review still");
    let fresh: Value = serde_json::from_slice(&fresh.body).expect("the answer is JSON");
    let fresh = fresh["response"]["patch"]
        .as_str()
        .expect("the unlabeled PV is patched too");
    let fresh = base64::engine::general_purpose::STANDARD.decode(fresh).expect("base64");
    let fresh: json_patch::Patch = serde_json::from_slice(&fresh).expect("a JSON Patch");
    json_patch::patch(&mut unlabeled, &fresh).expect("the patch applies");
    let labels = &unlabeled["metadata"]["labels"];
    let zone_label = labels[ZONE].as_str().map(str::to_owned);
    let mut zones: Vec<String> = zone_label
        .iter()
        .flat_map(|z| z.split("__"))
        .map(str::to_owned)
        .collect();
    zones.sort();
    zones.dedup();
    let region = labels[REGION].as_str().map(str::to_owned);
    let taken: Vec<&str> = zones.iter().map(String::as_str).chain(region.as_deref()).collect();
    let other = elsewhere(taken.iter().copied());

    // Each claim /mutate wrote, contradicted: denied, naming it.
    let denied = |object: &Value, names: &str| {
        let (judged, response) = validate(&with_object(&request, object), uid).expect("a review still");
        let message = response["status"]["message"].as_str().unwrap_or_default();
        // (A message is cut at 512 characters: a long handle can push the name out.)
        assert!(
            !judged.allowed && (message.contains(names) || message.ends_with('…')),
            "not denied naming {names:?}: {response}\nobject: {object}"
        );
    };
    if zone_label.is_some() {
        let mut lying = patched.clone();
        lying["metadata"]["labels"][ZONE] = json!(other);
        denied(&lying, &format!("label {ZONE}={other:?}"));
    }
    if region.is_some() {
        let mut lying = patched.clone();
        lying["metadata"]["labels"][REGION] = json!(other);
        denied(&lying, &format!("label {REGION}={other:?}"));
    }
    let terms = |object: &Value| {
        object["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    // A requirement as the API defines it (the webhook rewrites a term's list with
    // these fields only; a missing key or operator reads as empty).
    let known = |r: &Value| {
        json!([
            r["key"].as_str().unwrap_or_default(),
            r["operator"].as_str().unwrap_or_default(),
            r["values"]
        ])
    };
    let before: Vec<Value> = terms(&original)
        .iter()
        .flat_map(|t| t["matchExpressions"].as_array().cloned().unwrap_or_default())
        .map(|r| known(&r))
        .collect();
    for (t, term) in terms(&patched).iter().enumerate() {
        let requirements = term["matchExpressions"].as_array().cloned().unwrap_or_default();
        for (r, requirement) in requirements.iter().enumerate() {
            if before.contains(&known(requirement)) || requirement["operator"] != "In" {
                continue;
            }
            let values = &requirement["values"];
            let written_zones = !zones.is_empty() && *values == json!(zones);
            let written_region = region.as_ref().is_some_and(|region| *values == json!([region]));
            assert!(
                written_zones || written_region,
                "/mutate wrote a requirement holding neither the zones {zones:?} nor the region {region:?}: {requirement}"
            );
            let mut lying = patched.clone();
            lying["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][t]["matchExpressions"][r]["values"] =
                json!([other]);
            let key = requirement["key"].as_str().unwrap_or_default();
            denied(&lying, &format!("nodeAffinity term {t}: {key} In [{other:?}]"));
        }
    }
});
