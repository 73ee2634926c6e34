//! The webhook's rules file (`Rules::parse`), then a PV for each rule's volume
//! kind: input is the rules file's text, a NUL, and a volume handle.
//!
//! Properties: what parses answers each AdmissionReview of tests/data/webhook/
//! with JSON; and a matching rule's topology is what the rule says. For each
//! rule a fresh PV (no labels, no nodeAffinity) of the kind it selects, with
//! the input's handle, is reviewed (`Reviewer::review`); the first rule that
//! selects it and whose `volumeHandle` matches (found here from the YAML, not
//! by `Rules`) gives zones and region: its `zone`/`region` groups, else its
//! `zones`/`region`. When those make a valid topology, the patched PV's labels
//! are exactly the zone (sorted, `__`-joined) and region labels, and its
//! nodeAffinity exactly one term: the zones `In` on the rule's `topologyKey`
//! (else the CSI driver's key, or for in-tree volumes the GA zone key), then
//! for in-tree volumes the region `In` on the GA region key; when they do not,
//! the PV is admitted unpatched as an unusable topology. Handles the webhook
//! reads on its own (a zonal GCE PD, an EBS ID with its zone) are left out.
#![no_main]

use std::path::Path;
use std::sync::LazyLock;

use base64::Engine as _;
use fuzz::{block_on, valid_label_value};
use libfuzzer_sys::fuzz_target;
use pv_topology_webhook::builtin::{self, Builtin, csi_zone_key};
use pv_topology_webhook::model::{DecisionConfig, Outcome};
use pv_topology_webhook::resolve::{PROVISIONING_PLACEHOLDER, Resolver};
use pv_topology_webhook::review::Reviewer;
use pv_topology_webhook::rules::Rules;
use pv_topology_webhook::source::{InTree, VolumeIdentity};
use serde_json::{Value, json};
use serde_yaml_ng::Value as Yaml;

const ZONE: &str = "topology.kubernetes.io/zone";
const REGION: &str = "topology.kubernetes.io/region";

/// The AdmissionReviews of tests/data/webhook/ each parsed rules file answers.
static REVIEWS: LazyLock<Vec<Vec<u8>>> = LazyLock::new(|| {
    let dir = fuzz::data_dir().join("webhook");
    let mut reviews: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .expect("tests/data/webhook")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .filter_map(|p| std::fs::read(p).ok())
        .collect();
    reviews.sort();
    reviews
});

/// The volume kind a rule selects, as written.
#[derive(Clone, PartialEq)]
enum Kind {
    Csi(String),
    InTree(String),
}

fn text(value: Option<&Yaml>) -> Option<&str> {
    value.and_then(Yaml::as_str)
}

fn kind_of(rule: &Yaml) -> Option<Kind> {
    let rule = match rule {
        Yaml::Tagged(tagged) => &tagged.value,
        other => other,
    };
    match (text(rule.get("driver")), text(rule.get("inTree"))) {
        (Some(driver), None) => Some(Kind::Csi(driver.to_owned())),
        (None, Some(name)) => Some(Kind::InTree(name.to_owned())),
        _ => None,
    }
}

/// `(zones, region, topologyKey)` of the first rule selecting `kind` whose
/// `volumeHandle` (if any) matches `handle`.
fn expected(rules: &[Yaml], kind: &Kind, handle: &str) -> Option<(Vec<String>, Option<String>, Option<String>)> {
    for rule in rules {
        if kind_of(rule).as_ref() != Some(kind) {
            continue;
        }
        let mut zones: Vec<String> = rule
            .get("zones")
            .and_then(Yaml::as_sequence)
            .map(|z| z.iter().filter_map(Yaml::as_str).map(str::to_owned).collect())
            .unwrap_or_default();
        let mut region = text(rule.get("region")).map(str::to_owned);
        if let Some(pattern) = text(rule.get("volumeHandle")) {
            let regex = regex::Regex::new(pattern).expect("Rules::parse compiled it");
            let Some(captures) = regex.captures(handle) else {
                continue;
            };
            if let Some(zone) = captures.name("zone") {
                zones = vec![zone.as_str().to_owned()];
            }
            if let Some(r) = captures.name("region") {
                region = Some(r.as_str().to_owned());
            }
        }
        return Some((zones, region, text(rule.get("topologyKey")).map(str::to_owned)));
    }
    None
}

/// A PV of `kind` with `handle`, in an AdmissionReview CREATE.
fn review_of(kind: &Kind, handle: &str) -> Value {
    let source = match kind {
        Kind::Csi(driver) => json!({"csi": {"driver": driver, "volumeHandle": handle}}),
        Kind::InTree(name) => {
            let field = match name.as_str() {
                "awsElasticBlockStore" | "cinder" => "volumeID",
                "gcePersistentDisk" => "pdName",
                "azureDisk" => "diskURI",
                _ => "volumePath",
            };
            let mut source = json!({ field: handle });
            if name == "azureDisk" {
                source["diskName"] = json!("d");
            }
            json!({ name.as_str(): source })
        }
    };
    let mut spec = json!({"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]});
    spec.as_object_mut()
        .expect("an object")
        .extend(source.as_object().cloned().unwrap_or_default());
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "00000000-0000-0000-0000-00000000f022",
            "kind": {"group": "", "version": "v1", "kind": "PersistentVolume"},
            "resource": {"group": "", "version": "v1", "resource": "persistentvolumes"},
            "name": "pv-fuzz", "operation": "CREATE", "userInfo": {"username": "admin"},
            "object": {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-fuzz"}, "spec": spec},
        }
    })
}

fn identity(kind: &Kind, handle: &str) -> Option<VolumeIdentity> {
    Some(match kind {
        Kind::Csi(driver) => VolumeIdentity::csi(driver, handle),
        Kind::InTree(name) => VolumeIdentity::in_tree(InTree::from_name(name)?, handle),
    })
}

/// A label value the topology may hold: not empty, valid, and not holding the
/// delimiter of zones.
fn usable(value: &str) -> bool {
    !value.is_empty() && valid_label_value(value) && !value.contains("__")
}

fuzz_target!(|data: &[u8]| {
    let Some((text, handle)) = fuzz::two(data) else {
        return;
    };
    let Ok(rules) = Rules::parse(Path::new("fuzz-rules.yaml"), text) else {
        return;
    };
    let count = rules.rules().len();
    let reviewer = Reviewer::new(Resolver::new(rules), DecisionConfig::default());
    for review in REVIEWS.iter() {
        let answer = block_on(reviewer.review(review)).expect("a test review is a review");
        let _: Value = serde_json::from_slice(&answer.body).expect("the answer is JSON");
    }

    let yaml: Yaml = serde_yaml_ng::from_str(text).expect("Rules::parse read it");
    let written = yaml
        .get("rules")
        .and_then(Yaml::as_sequence)
        .cloned()
        .unwrap_or_default();
    assert_eq!(written.len(), count, "every rule written is a rule");
    let mut kinds: Vec<Kind> = Vec::new();
    for kind in written.iter().filter_map(kind_of) {
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    for kind in kinds.iter().take(8) {
        let Some(volume) = identity(kind, handle) else {
            panic!("a rule's inTree name Rules::parse accepted is not an in-tree source")
        };
        if handle == PROVISIONING_PLACEHOLDER || matches!(builtin::resolve(&volume), Some(Builtin::Complete(_))) {
            continue;
        }
        let Some((zones, region, key)) = expected(&written, kind, handle) else {
            continue;
        };
        let request = review_of(kind, handle);
        let body = serde_json::to_vec(&request).expect("JSON");
        let answer = block_on(reviewer.review(&body)).expect("a review");
        let review: Value = serde_json::from_slice(&answer.body).expect("the answer is JSON");
        let response = &review["response"];
        assert_eq!(response["allowed"], true, "{response}");

        let mut zones_set: Vec<String> = zones.clone();
        zones_set.sort();
        zones_set.dedup();
        let joined = zones_set.join("__");
        let valid = zones.iter().all(|z| usable(z))
            && region.as_deref().is_none_or(usable)
            && !(zones.is_empty() && region.is_none())
            && joined.len() <= 63;
        if !valid {
            assert_eq!(
                answer.outcome,
                Outcome::InvalidTopology,
                "{zones:?} {region:?}: {response}"
            );
            assert!(response.get("patch").is_none(), "{response}");
            continue;
        }
        let patch = response["patch"]
            .as_str()
            .unwrap_or_else(|| panic!("{zones:?} {region:?}: no patch in {response}"));
        let patch = base64::engine::general_purpose::STANDARD.decode(patch).expect("base64");
        let patch: json_patch::Patch = serde_json::from_slice(&patch).expect("a JSON Patch");
        let mut pv = request["request"]["object"].clone();
        json_patch::patch(&mut pv, &patch).expect("the patch applies");

        let mut labels = serde_json::Map::new();
        if !zones_set.is_empty() {
            labels.insert(ZONE.into(), json!(joined));
        }
        if let Some(region) = &region {
            labels.insert(REGION.into(), json!(region));
        }
        assert_eq!(
            pv["metadata"]["labels"],
            Value::Object(labels),
            "rule's {zones:?} {region:?}"
        );

        let (zone_key, region_key) = match kind {
            Kind::Csi(driver) => (key.clone().or_else(|| csi_zone_key(driver).map(str::to_owned)), None),
            Kind::InTree(_) => (Some(key.clone().unwrap_or_else(|| ZONE.to_owned())), Some(REGION)),
        };
        let mut requirements = Vec::new();
        if let Some(zone_key) = &zone_key
            && !zones_set.is_empty()
        {
            requirements.push(json!({"key": zone_key, "operator": "In", "values": zones_set}));
        }
        if let (Some(region_key), Some(region)) = (region_key, &region)
            && zone_key.as_deref() != Some(region_key)
        {
            requirements.push(json!({"key": region_key, "operator": "In", "values": [region]}));
        }
        let affinity = if requirements.is_empty() {
            Value::Null
        } else {
            json!({"required": {"nodeSelectorTerms": [{"matchExpressions": requirements}]}})
        };
        assert_eq!(
            pv["spec"]["nodeAffinity"], affinity,
            "rule's {zones:?} {region:?} {key:?}"
        );
    }
});
