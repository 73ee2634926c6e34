//! Helpers shared by the integration tests: fixtures, a reviewer built from rules text,
//! a test double of the lookup interface, and reading/applying answers.
#![allow(dead_code)] // each test file uses a different subset

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use base64::Engine as _;
use json_patch::{Patch, PatchOperation};
use pv_topology_webhook::decision::{DecisionConfig, OnLookupError};
use pv_topology_webhook::lookup::{LookupError, LookupFuture, TopologyLookup};
use pv_topology_webhook::resolve::Resolver;
use pv_topology_webhook::review::Reviewer;
use pv_topology_webhook::rules::Rules;
use pv_topology_webhook::source::VolumeIdentity;
use pv_topology_webhook::topology::Topology;
use serde_json::{Value, json};

pub fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/webhook")
}

pub fn fixture(name: &str) -> Vec<u8> {
    let path = data_dir().join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub fn rules(text: &str) -> Rules {
    Rules::parse(Path::new("test-rules.yaml"), text).unwrap()
}

pub fn fixture_rules() -> Rules {
    Rules::load(&[data_dir().join("rules.yaml")]).unwrap()
}

pub fn reviewer(rules: Rules) -> Reviewer {
    Reviewer::new(Resolver::new(rules), DecisionConfig::default())
}

pub fn plain() -> Reviewer {
    reviewer(Rules::default())
}

pub fn with_lookup(lookup: Arc<dyn TopologyLookup>, on_error: OnLookupError) -> Reviewer {
    Reviewer::new(
        Resolver::new(Rules::default())
            .with_lookup(lookup)
            .with_deadline(Duration::from_millis(200)),
        DecisionConfig {
            on_lookup_error: on_error,
            ..DecisionConfig::default()
        },
    )
}

/// A lookup that answers every volume of one CSI driver with a fixed answer.
pub struct FakeLookup {
    pub driver: String,
    pub answer: Result<Topology, LookupError>,
    pub delay: Option<Duration>,
    pub calls: AtomicUsize,
}

impl FakeLookup {
    pub fn new(driver: &str, answer: Result<Topology, LookupError>) -> Self {
        Self {
            driver: driver.to_owned(),
            answer,
            delay: None,
            calls: AtomicUsize::new(0),
        }
    }

    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

/// The deadline of a lookup called directly, not through the resolver: 5 s from now.
pub fn soon() -> Instant {
    within(Duration::from_secs(5))
}

/// The deadline `budget` from now, as the resolver gives a lookup.
pub fn within(budget: Duration) -> Instant {
    Instant::now() + budget
}

impl TopologyLookup for FakeLookup {
    fn name(&self) -> &str {
        "fake"
    }

    fn handles(&self, volume: &VolumeIdentity) -> bool {
        matches!(&volume.kind, pv_topology_webhook::source::VolumeKind::Csi { driver } if *driver == self.driver)
    }

    fn lookup<'a>(&'a self, _volume: &'a VolumeIdentity, _deadline: Instant) -> LookupFuture<'a> {
        Box::pin(async move {
            self.calls.fetch_add(1, Ordering::SeqCst);
            if let Some(delay) = self.delay {
                tokio::time::sleep(delay).await;
            }
            self.answer.clone()
        })
    }
}

/// A CREATE review of `pv`.
pub fn create_review(pv: Value) -> Vec<u8> {
    let name = pv["metadata"]["name"].clone();
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "00000000-0000-0000-0000-000000000001",
            "kind": {"group": "", "version": "v1", "kind": "PersistentVolume"},
            "resource": {"group": "", "version": "v1", "resource": "persistentvolumes"},
            "name": name,
            "operation": "CREATE",
            "userInfo": {"username": "admin"},
            "object": pv,
            "dryRun": false
        }
    }))
    .unwrap()
}

/// A PV with this spec (merged into a minimal one) and these labels.
pub fn pv(spec: Value, labels: Option<Value>) -> Value {
    let mut pv = json!({
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": "pv-1"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}
    });
    for (k, v) in spec.as_object().unwrap() {
        pv["spec"][k] = v.clone();
    }
    if let Some(labels) = labels {
        pv["metadata"]["labels"] = labels;
    }
    pv
}

pub fn csi(driver: &str, handle: &str) -> Value {
    json!({"csi": {"driver": driver, "volumeHandle": handle}})
}

/// A decoded answer.
#[derive(Debug, Clone)]
pub struct Answer {
    pub bytes: Vec<u8>,
    pub review: Value,
}

impl Answer {
    pub fn response(&self) -> &Value {
        &self.review["response"]
    }
    pub fn allowed(&self) -> bool {
        self.response()["allowed"].as_bool().unwrap()
    }
    pub fn uid(&self) -> &str {
        self.response()["uid"].as_str().unwrap()
    }
    pub fn message(&self) -> &str {
        self.response()["status"]["message"].as_str().unwrap_or_default()
    }
    pub fn raw_patch(&self) -> Option<String> {
        let b64 = self.response().get("patch")?.as_str().unwrap();
        let bytes = base64::engine::general_purpose::STANDARD.decode(b64).unwrap();
        Some(String::from_utf8(bytes).unwrap())
    }
    pub fn patch(&self) -> Option<Vec<PatchOperation>> {
        let patch: Patch = serde_json::from_str(&self.raw_patch()?).unwrap();
        Some(patch.0)
    }
    pub fn patch_json(&self) -> Value {
        self.raw_patch()
            .map(|p| serde_json::from_str(&p).unwrap())
            .unwrap_or(Value::Null)
    }
    pub fn warnings(&self) -> Vec<String> {
        self.response()["warnings"]
            .as_array()
            .map(|w| w.iter().map(|s| s.as_str().unwrap().to_owned()).collect())
            .unwrap_or_default()
    }
    pub fn audit(&self, key: &str) -> Option<&str> {
        self.response()["auditAnnotations"][key].as_str()
    }
    pub fn outcome(&self) -> &str {
        self.audit("outcome").unwrap()
    }
}

/// The `review` subcommand of the built binary, `review ARGS…` with `env`, on a
/// CREATE review of `pv`, whatever its exit status.
pub fn review_output(args: &[&str], env: &[(&str, &str)], pv: Value) -> std::process::Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pv-topology-webhook"))
        .arg("review")
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A command refused at start-up may exit before reading stdin: a refused write
    // is fine, its exit status and stderr say why.
    let _ = std::io::Write::write_all(&mut child.stdin.take().unwrap(), &create_review(pv));
    child.wait_with_output().unwrap()
}

/// [`review_output`] that must exit 0: its answer.
pub fn review_binary(args: &[&str], env: &[(&str, &str)], pv: Value) -> Answer {
    let out = review_output(args, env, pv);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    Answer {
        review: serde_json::from_slice(&out.stdout).unwrap(),
        bytes: out.stdout,
    }
}

/// The value of the answer's patch operation on `path` (`/metadata/labels`,
/// `/spec/nodeAffinity`), null if it has none.
pub fn patched(answer: &Answer, path: &str) -> Value {
    let ops = answer.patch_json();
    let op = ops.as_array().and_then(|ops| ops.iter().find(|op| op["path"] == path));
    op.map(|op| op["value"].clone()).unwrap_or(Value::Null)
}

pub async fn review(reviewer: &Reviewer, body: &[u8]) -> Answer {
    let bytes = reviewer.review(body).await.unwrap().body;
    let review: Value = serde_json::from_slice(&bytes).unwrap();
    Answer { bytes, review }
}

/// The request's object with the answer's patch applied.
pub fn patched_object(body: &[u8], answer: &Answer) -> Value {
    let review: Value = serde_json::from_slice(body).unwrap();
    let mut object = review["request"]["object"].clone();
    if let Some(ops) = answer.patch() {
        json_patch::patch(&mut object, &ops).unwrap();
    }
    object
}

/// The same review with the answer's patch applied to its object.
pub fn reapplied(body: &[u8], answer: &Answer) -> Vec<u8> {
    let mut review: Value = serde_json::from_slice(body).unwrap();
    review["request"]["object"] = patched_object(body, answer);
    serde_json::to_vec(&review).unwrap()
}

/// Reviews, applies the patch, reviews again: the second answer must carry no patch.
pub async fn assert_idempotent(reviewer: &Reviewer, body: &[u8]) -> Answer {
    let first = review(reviewer, body).await;
    let again = reapplied(body, &first);
    let second = review(reviewer, &again).await;
    assert_eq!(
        second.raw_patch(),
        None,
        "second review patched again; first patch: {:?}",
        first.raw_patch()
    );
    first
}

pub mod net;
