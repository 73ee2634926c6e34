//! The chart's switches for `/validate` (issue 16), rendered with helm v3.22.0 (built by
//! `tests/cluster/build.sh`): `webhook.validation.enabled` adds or drops the
//! ValidatingWebhookConfiguration (pointing at the chart's Service on `/validate`),
//! `webhook.validation.failurePolicy` is its failure policy, and `onContradiction`
//! becomes the Deployment's `--on-contradiction`, which the binary's own command line
//! reads (`review --validate` given the rendered decision flags admits a lying PV with
//! `warn`, refuses it otherwise). helm.rs checks the defaults against the kustomize
//! base, field for field, and that the rendered arguments parse.

use std::path::PathBuf;
use std::process::Command;

use cluster_harness::{cluster_bin, run_ok, workspace_root};
use serde::Deserialize as _;
use serde_json::Value;

const RELEASE: &str = "pv-topology-webhook";
const NAMESPACE: &str = "pv-topology-webhook";

/// `helm template` of the chart with `--set` each of `sets`, with helm's homes in a
/// temporary directory (nothing of the user's read or written) and no cluster.
fn template(sets: &[&str]) -> Vec<Value> {
    let home = tempfile::tempdir().expect("a temporary directory");
    let chart: PathBuf = workspace_root().join("charts/pv-topology-webhook");
    let mut cmd = Command::new(cluster_bin("helm"));
    cmd.args(["template", RELEASE])
        .arg(&chart)
        .args(["--namespace", NAMESPACE])
        // The chart refuses its placeholder image: the one `make image` builds.
        .args(["--set", "image.repository=localhost/pv-topology-webhook"])
        .env("HELM_CACHE_HOME", home.path().join("cache"))
        .env("HELM_CONFIG_HOME", home.path().join("config"))
        .env("HELM_DATA_HOME", home.path().join("data"))
        .env("KUBECONFIG", home.path().join("no-kubeconfig"));
    for set in sets {
        cmd.args(["--set", set]);
    }
    let out = run_ok(&mut cmd).unwrap_or_else(|e| panic!("{e:#}"));
    let text = String::from_utf8(out.stdout).expect("helm prints UTF-8");
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).unwrap_or_else(|e| panic!("{e}\n{text}")))
        .filter(|v| v.get("kind").is_some())
        .collect()
}

fn of_kind<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objects.iter().filter(|o| o["kind"] == kind).collect()
}

/// The Deployment's arguments, and whether `pv-topology-webhook review --validate`, given
/// their decision flags (`--on-contradiction`, `--on-lookup-error`), admits a PV whose
/// zone label contradicts its disk (tests/data/webhook/validate-lying-zone.json): the
/// binary's own command line reads the rendered flag.
fn admits_a_lie(objects: &[Value]) -> (Vec<String>, bool) {
    let deployment = of_kind(objects, "Deployment");
    assert_eq!(deployment.len(), 1);
    let args: Vec<String> = deployment[0]["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("a string argument").to_owned())
        .collect();
    assert_eq!(args.first().map(String::as_str), Some("serve"), "{args:?}");
    let decision: Vec<&String> = args
        .iter()
        .filter(|a| a.starts_with("--on-contradiction") || a.starts_with("--on-lookup-error"))
        .collect();
    let binary = cluster_harness::workspace_binary("pv-topology-webhook", "PV_TOPOLOGY_WEBHOOK_BIN");
    let review =
        std::fs::File::open(workspace_root().join("tests/data/webhook/validate-lying-zone.json")).expect("the fixture");
    let out = Command::new(binary)
        .args(["review", "--validate"])
        .args(&decision)
        .env_remove("PV_TOPOLOGY_WEBHOOK_ON_CONTRADICTION")
        .stdin(review)
        .output()
        .expect("the binary runs");
    assert!(
        out.status.success(),
        "review --validate {decision:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answer: Value = serde_json::from_slice(&out.stdout).expect("an AdmissionReview");
    let response = &answer["response"];
    let allowed = response["allowed"].as_bool().expect("allowed");
    let said = if allowed {
        response["warnings"][0].as_str().unwrap_or_default()
    } else {
        response["status"]["message"].as_str().unwrap_or_default()
    };
    assert!(said.contains("but the disk is in zone us-central1-a"), "{answer}");
    (args, allowed)
}

#[test]
fn the_validation_values_render_the_configuration_and_the_flag() {
    // Defaults: the ValidatingWebhookConfiguration on the chart's Service, Ignore,
    // and no --on-contradiction (the binary's deny).
    let objects = template(&[]);
    let configs = of_kind(&objects, "ValidatingWebhookConfiguration");
    assert_eq!(configs.len(), 1, "{configs:?}");
    let webhook = &configs[0]["webhooks"][0];
    let service = &webhook["clientConfig"]["service"];
    assert_eq!(service["path"], "/validate");
    assert_eq!(service["namespace"], NAMESPACE);
    let services = of_kind(&objects, "Service");
    let svc = services
        .iter()
        .find(|s| s["metadata"]["name"] == service["name"])
        .unwrap_or_else(|| panic!("no Service {}", service["name"]));
    assert_eq!(svc["spec"]["ports"][0]["port"], service["port"]);
    assert_eq!(
        webhook["rules"][0]["operations"],
        serde_json::json!(["CREATE", "UPDATE"])
    );
    assert_eq!(webhook["failurePolicy"], "Ignore");
    let mutating = of_kind(&objects, "MutatingWebhookConfiguration");
    assert_eq!(
        webhook["matchConditions"],
        mutating[0]["webhooks"][0]["matchConditions"]
    );
    assert_eq!(webhook["objectSelector"], mutating[0]["webhooks"][0]["objectSelector"]);
    let (args, admitted) = admits_a_lie(&objects);
    assert!(!args.iter().any(|a| a.starts_with("--on-contradiction")), "{args:?}");
    assert!(!admitted, "the default admitted a lie");

    // webhook.validation.failurePolicy is the configuration's.
    let objects = template(&["webhook.validation.failurePolicy=Fail"]);
    assert_eq!(
        of_kind(&objects, "ValidatingWebhookConfiguration")[0]["webhooks"][0]["failurePolicy"],
        "Fail"
    );

    // onContradiction=warn: --on-contradiction=warn, which serve reads as warn.
    let objects = template(&["onContradiction=warn"]);
    let (args, admitted) = admits_a_lie(&objects);
    assert!(args.iter().any(|a| a == "--on-contradiction=warn"), "{args:?}");
    assert!(admitted, "onContradiction=warn refused the lie");
    let (_, admitted) = admits_a_lie(&template(&["onContradiction=deny"]));
    assert!(!admitted, "onContradiction=deny admitted the lie");

    // webhook.validation.enabled=false: no ValidatingWebhookConfiguration; the
    // mutating one and the rest stay.
    let objects = template(&["webhook.validation.enabled=false"]);
    assert!(
        of_kind(&objects, "ValidatingWebhookConfiguration").is_empty(),
        "validation disabled, yet rendered"
    );
    assert_eq!(of_kind(&objects, "MutatingWebhookConfiguration").len(), 1);
    assert_eq!(of_kind(&objects, "Deployment").len(), 1);
}
