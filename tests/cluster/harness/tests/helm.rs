//! The Helm chart `charts/pv-topology-webhook`, with helm v3.22.0 (built by
//! `tests/cluster/build.sh` from the Go module proxy):
//!
//! - one source of truth: the chart rendered with each `ci/*-values.yaml`
//!   gives the objects `kustomize-render` gives for the matching directory of
//!   `manifests/webhook/` (base and overlays), field for field, but for
//!   Helm's own labels, the pod template's annotations and the image;
//! - `helm lint --strict` with every values file and other switches, the
//!   Deployment's arguments accepted by the binary's command line; bad
//!   values fail on `values.schema.json` with a message naming the value;
//! - `helm install`, `helm upgrade` and `helm uninstall` against the real
//!   kube-apiserver: the objects are accepted, the webhook configuration
//!   points at the chart's Service, and nothing is left behind. Kinds the
//!   bare apiserver does not serve (cert-manager's, the ServiceMonitor) are
//!   listed as skipped, then served from stub CRDs (an open schema, not
//!   their projects' CRDs) for an install in cert-manager mode.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use base64::Engine as _;
use cluster_harness::{TestCluster, cluster_bin, run_ok, workspace_root};
use kube::api::{Api, DynamicObject, GroupVersionKind, ListParams, PostParams};
use kube::discovery::{Discovery, Scope, verbs};
use serde::Deserialize as _;
use serde_json::{Value, json};

const RELEASE: &str = "pv-topology-webhook";
const NAMESPACE: &str = "pv-topology-webhook";

fn chart() -> PathBuf {
    workspace_root().join("charts/pv-topology-webhook")
}

/// helm with its own homes (nothing read from or written to the user's).
struct Helm {
    home: tempfile::TempDir,
    kubeconfig: Option<PathBuf>,
}

impl Helm {
    fn new(kubeconfig: Option<&Path>) -> Helm {
        Helm {
            home: tempfile::tempdir().unwrap(),
            kubeconfig: kubeconfig.map(Path::to_path_buf),
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(cluster_bin("helm"));
        let home = self.home.path();
        cmd.args(args)
            .env("HELM_CACHE_HOME", home.join("cache"))
            .env("HELM_CONFIG_HOME", home.join("config"))
            .env("HELM_DATA_HOME", home.join("data"))
            .env(
                "KUBECONFIG",
                self.kubeconfig.clone().unwrap_or_else(|| home.join("no-kubeconfig")),
            );
        cmd
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = run_ok(&mut self.command(args)).unwrap_or_else(|e| panic!("{e:#}"));
        String::from_utf8(out.stdout).unwrap()
    }

    fn output(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    /// `helm template` of the chart as release `pv-topology-webhook`.
    fn template(&self, extra: &[&str]) -> Vec<Value> {
        let chart = chart();
        let mut args = vec!["template", RELEASE, chart.to_str().unwrap(), "--namespace", NAMESPACE];
        args.extend_from_slice(extra);
        objects(&self.ok(&args))
    }
}

fn objects(text: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(text)
        .map(|doc| Value::deserialize(doc).unwrap_or_else(|e| panic!("{e}\n{text}")))
        .filter(|v| v.get("apiVersion").is_some() && v.get("kind").is_some())
        .collect()
}

fn key(o: &Value) -> String {
    format!(
        "{}/{}",
        o["kind"].as_str().unwrap(),
        o["metadata"]["name"].as_str().unwrap()
    )
}

/// The labels Helm adds (selectors carry `instance` so that two releases do
/// not select each other's pods).
const HELM_LABELS: [&str; 5] = [
    "app.kubernetes.io/instance",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/version",
    "helm.sh/chart",
    "app.kubernetes.io/component",
];

/// What is compared: everything but objects' own labels and annotations
/// (the cert-manager CA injection annotation is kept), Helm's labels in
/// selectors and pod templates, the pod template's annotations (the rules'
/// checksum) and the image (set at install); `defaultMode: 0440` (text to a
/// YAML 1.2 parser) as the number Kubernetes reads.
fn normalize(mut o: Value) -> Value {
    let inject = o["metadata"]["annotations"]["cert-manager.io/inject-ca-from"].clone();
    let meta = o["metadata"].as_object_mut().unwrap();
    meta.remove("labels");
    meta.remove("annotations");
    if !inject.is_null() {
        meta.insert("annotations".into(), json!({"cert-manager.io/inject-ca-from": inject}));
    }
    if let Some(template) = o.pointer_mut("/spec/template/metadata") {
        template.as_object_mut().unwrap().remove("annotations");
    }
    if let Some(containers) = o.pointer_mut("/spec/template/spec/containers") {
        for c in containers.as_array_mut().unwrap() {
            c.as_object_mut().unwrap().remove("image");
        }
    }
    scrub(&mut o, "");
    o
}

fn scrub(v: &mut Value, parent: &str) {
    match v {
        Value::Object(map) => {
            if parent == "labels" || parent == "matchLabels" || parent == "selector" {
                for l in HELM_LABELS {
                    map.remove(l);
                }
            }
            for (k, child) in map.iter_mut() {
                if k == "defaultMode"
                    && let Value::String(text) = child
                {
                    *child = json!(u64::from_str_radix(text, 8).unwrap());
                }
                scrub(child, k);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| scrub(i, parent)),
        _ => {}
    }
}

/// Paths where `a` and `b` differ, with both values.
fn diff(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                diff(
                    &format!("{path}/{k}"),
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                    out,
                );
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                diff(&format!("{path}/{i}"), p, q, out);
            }
        }
        _ if a != b => out.push(format!("{path}: kustomize {a} / helm {b}")),
        _ => {}
    }
}

/// Each kustomize directory of manifests/webhook and the chart's values
/// that must give the same objects.
const EQUIVALENTS: [(&str, Option<&str>); 8] = [
    ("manifests/webhook", None),
    ("manifests/webhook/base", None),
    (
        "manifests/webhook/overlays/single-replica",
        Some("ci/single-replica-values.yaml"),
    ),
    ("manifests/webhook/overlays/aws", Some("ci/aws-values.yaml")),
    ("manifests/webhook/overlays/gcp", Some("ci/gcp-values.yaml")),
    ("manifests/webhook/overlays/azure", Some("ci/azure-values.yaml")),
    ("manifests/webhook/overlays/openstack", Some("ci/openstack-values.yaml")),
    ("manifests/webhook/overlays/vsphere", Some("ci/vsphere-values.yaml")),
];

#[test]
fn the_chart_renders_what_kustomize_renders() {
    let helm = Helm::new(None);
    let mut problems = Vec::new();
    // Every values file in ci/ is an overlay's equivalent, and every overlay has one.
    let mut ci: Vec<String> = std::fs::read_dir(chart().join("ci"))
        .unwrap()
        .map(|e| format!("ci/{}", e.unwrap().file_name().to_string_lossy()))
        .collect();
    ci.sort();
    let mut listed: Vec<String> = EQUIVALENTS.iter().filter_map(|(_, v)| v.map(str::to_string)).collect();
    listed.sort();
    assert_eq!(
        ci, listed,
        "charts/pv-topology-webhook/ci/ and the overlays this test knows"
    );
    let mut overlays: Vec<String> = std::fs::read_dir(workspace_root().join("manifests/webhook/overlays"))
        .unwrap()
        .map(|e| {
            format!(
                "manifests/webhook/overlays/{}",
                e.unwrap().file_name().to_string_lossy()
            )
        })
        .collect();
    overlays.sort();
    for overlay in &overlays {
        assert!(
            EQUIVALENTS.iter().any(|(dir, _)| dir == overlay),
            "{overlay} has no values file in charts/pv-topology-webhook/ci/: add one and list it here"
        );
    }

    for (dir, values) in EQUIVALENTS {
        let rendered = run_ok(Command::new(cluster_bin("kustomize-render")).arg(workspace_root().join(dir))).unwrap();
        let kustomize: BTreeMap<String, Value> = objects(&String::from_utf8_lossy(&rendered.stdout))
            .into_iter()
            .map(|o| (key(&o), normalize(o)))
            .collect();
        let values_path = values.map(|v| chart().join(v));
        let mut args = vec!["--set", "namespace.create=true"];
        if let Some(path) = &values_path {
            args.extend(["--values", path.to_str().unwrap()]);
        }
        let helm_objects: BTreeMap<String, Value> = helm
            .template(&args)
            .into_iter()
            .map(|o| (key(&o), normalize(o)))
            .collect();
        let what = format!("{dir} / helm template {}", values.unwrap_or("(defaults)"));
        let kustomize_keys: Vec<&String> = kustomize.keys().collect();
        let helm_keys: Vec<&String> = helm_objects.keys().collect();
        if kustomize_keys != helm_keys {
            problems.push(format!(
                "{what}: objects differ:\n  kustomize {kustomize_keys:?}\n  helm      {helm_keys:?}"
            ));
            continue;
        }
        for (k, a) in &kustomize {
            let mut d = Vec::new();
            diff("", a, &helm_objects[k], &mut d);
            if !d.is_empty() {
                problems.push(format!("{what}: {k}:\n  {}", d.join("\n  ")));
            }
        }
        eprintln!("{what}: {} objects the same", kustomize.len());
    }
    assert!(
        problems.is_empty(),
        "the chart and the kustomize manifests drifted:\n{}",
        problems.join("\n")
    );
}

/// The Deployment's arguments are ones `pv-topology-webhook`'s command line
/// accepts: run with them, it does not stop with a usage error (exit 2) but
/// later, at the missing rules or TLS files (exit 1), or is still starting
/// after 10 s.
fn assert_args_parse(rendered: &[Value], what: &str) {
    let deployment = rendered
        .iter()
        .find(|o| o["kind"] == "Deployment")
        .unwrap_or_else(|| panic!("{what}: no Deployment"));
    let args: Vec<&str> = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let binary = cluster_harness::workspace_binary("pv-topology-webhook", "PV_TOPOLOGY_WEBHOOK_BIN");
    let mut child = Command::new(binary)
        .args(&args)
        .env("AWS_REGION", "eu-west-1")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("GCE_METADATA_HOST", "127.0.0.1:9")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    eprintln!("{what}: {args:?}: {:?} {}", status.map(|s| s.code()), stderr.trim());
    assert_ne!(
        status.and_then(|s| s.code()),
        Some(2),
        "{what}: the Deployment's args {args:?}: {stderr}"
    );
}

#[test]
fn helm_lint_strict_passes_with_every_values_file() {
    let helm = Helm::new(None);
    let chart = chart();
    let chart = chart.to_str().unwrap();
    eprintln!("{}", helm.ok(&["lint", "--strict", chart]));
    for (_, values) in EQUIVALENTS {
        if let Some(v) = values {
            let path = Path::new(chart).join(v);
            eprintln!(
                "{}",
                helm.ok(&["lint", "--strict", chart, "--values", path.to_str().unwrap()])
            );
        }
    }
    // The other switches render too.
    let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    let ca = base64::engine::general_purpose::STANDARD.encode(pem);
    let cases: Vec<Vec<String>> = vec![
        vec![
            "certificates.source=secret".into(),
            "certificates.secretName=my-tls".into(),
            format!("certificates.caBundle={ca}"),
        ],
        vec![
            "certificates.certManager.issuerRef.kind=ClusterIssuer".into(),
            "certificates.certManager.issuerRef.name=my-ca".into(),
        ],
        vec![
            "serviceMonitor.enabled=true".into(),
            "serviceMonitor.labels.release=prom".into(),
        ],
        vec![
            "gce.lookup=true".into(),
            "gce.project=p".into(),
            "gce.zones={us-central1-a,us-central1-b}".into(),
            "rules.enabled=false".into(),
            "onLookupError=allow".into(),
        ],
        vec![
            "azure.diskLookup=true".into(),
            "azure.config.create=true".into(),
            format!(
                "file:azure.config.json={}",
                workspace_root()
                    .join("tests/data/azure/managed-identity.json")
                    .display()
            ),
        ],
        vec![
            "priorityClass.create=false".into(),
            "priorityClass.name=system-cluster-critical".into(),
            "nodeSelector.kubernetes\\.io/os=linux".into(),
            "tolerations[0].key=CriticalAddonsOnly".into(),
            "tolerations[0].operator=Exists".into(),
            "image.digest=sha256:0000000000000000000000000000000000000000000000000000000000000000".into(),
        ],
    ];
    for case in cases {
        let mut args = vec!["lint", "--strict", chart];
        for s in &case {
            match s.strip_prefix("file:") {
                Some(file) => args.extend(["--set-file", file]),
                None => args.extend(["--set", s.as_str()]),
            }
        }
        eprintln!("{}", helm.ok(&args));
        args[0] = "template";
        args.remove(1);
        args.insert(1, RELEASE);
        let rendered = objects(&helm.ok(&args));
        assert_args_parse(&rendered, &format!("{case:?}"));
    }
    // The check catches a flag the binary does not have.
    let bad = helm.template(&["--set", "extraArgs={--no-such-flag}"]);
    assert!(
        std::panic::catch_unwind(|| assert_args_parse(&bad, "extraArgs={--no-such-flag}")).is_err(),
        "an unknown flag passed the args check"
    );
    for (dir, values) in EQUIVALENTS {
        let mut args = vec![];
        let path = values.map(|v| Path::new(chart).join(v));
        if let Some(path) = &path {
            args.extend(["--values", path.to_str().unwrap()]);
        }
        assert_args_parse(&helm.template(&args), dir);
    }
}

#[test]
fn bad_values_fail_on_the_schema_with_a_message() {
    let helm = Helm::new(None);
    let chart = chart();
    let chart = chart.to_str().unwrap();
    // (--set, words the message must hold)
    let cases: [(&[&str], &[&str]); 8] = [
        (
            &["webhook.failurePolicy=Sometimes"],
            &["failurePolicy", "Fail", "Ignore"],
        ),
        (&["replicas=0"], &["replicas", "minimum"]),
        (&["replica=2"], &["replica", "additional"]),
        (&["lookupTimeout=2 seconds"], &["lookupTimeout"]),
        (&["webhook.timeoutSeconds=60"], &["timeoutSeconds"]),
        (&["certificates.source=secret"], &["caBundle"]),
        (&["certificates.source=vault"], &["source", "cert-manager", "secret"]),
        (&["podDisruptionBudget.minAvailable=two"], &["minAvailable"]),
    ];
    for (sets, words) in cases {
        let mut args = vec!["template", RELEASE, chart];
        for s in sets {
            args.extend(["--set", s]);
        }
        let out = helm.output(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        eprintln!("{sets:?}: {}", stderr.trim());
        assert!(!out.status.success(), "{sets:?} was accepted");
        assert!(
            stderr.contains("values don't meet the specifications of the schema"),
            "{sets:?}: {stderr}"
        );
        for w in words {
            assert!(
                stderr.contains(w),
                "{sets:?}: the message does not name {w:?}: {stderr}"
            );
        }
    }
    // A required value with its own message.
    let out = helm.output(&[
        "template",
        RELEASE,
        chart,
        "--set",
        "azure.diskLookup=true",
        "--set",
        "azure.config.create=true",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("azure.config.json is required"),
        "{stderr}"
    );
}

/// The API resource of an object, if the apiserver serves its kind.
fn api_for(client: &kube::Client, discovery: &Discovery, o: &Value) -> Option<Api<DynamicObject>> {
    let api_version = o["apiVersion"].as_str().unwrap();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, o["kind"].as_str().unwrap());
    let (resource, caps) = discovery.resolve_gvk(&gvk)?;
    Some(match caps.scope {
        Scope::Namespaced => Api::namespaced_with(
            client.clone(),
            o["metadata"]["namespace"].as_str().unwrap_or(NAMESPACE),
            &resource,
        ),
        Scope::Cluster => Api::all_with(client.clone(), &resource),
    })
}

/// Every object of the namespace, of every kind that can be listed.
async fn everything_in(client: &kube::Client, namespace: &str) -> Vec<String> {
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    let mut found = Vec::new();
    for group in discovery.groups() {
        for (resource, caps) in group.recommended_resources() {
            if caps.scope != Scope::Namespaced || !caps.supports_operation(verbs::LIST) || resource.kind == "Event" {
                continue;
            }
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
            for o in api.list(&ListParams::default()).await.unwrap() {
                found.push(format!("{}/{}", resource.kind, o.metadata.name.unwrap_or_default()));
            }
        }
    }
    found
}

/// After `helm uninstall`: none of the release's objects, and nothing at all
/// in its namespace (helm's release Secrets included).
async fn assert_nothing_left(client: &kube::Client, manifest: &[Value]) {
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    for o in manifest {
        if let Some(api) = api_for(client, &discovery, o) {
            let name = o["metadata"]["name"].as_str().unwrap();
            assert!(
                api.get_opt(name).await.unwrap().is_none(),
                "{} is left after helm uninstall",
                key(o)
            );
        }
    }
    let left = everything_in(client, NAMESPACE).await;
    assert!(
        left.is_empty(),
        "left in namespace {NAMESPACE} after helm uninstall: {left:?}"
    );
}

async fn assert_webhook_points_at_the_service(client: &kube::Client, discovery: &Discovery, manifest: &[Value]) {
    let config = manifest
        .iter()
        .find(|o| o["kind"] == "MutatingWebhookConfiguration")
        .expect("a MutatingWebhookConfiguration");
    let stored = api_for(client, discovery, config)
        .unwrap()
        .get(config["metadata"]["name"].as_str().unwrap())
        .await
        .unwrap();
    let stored = serde_json::to_value(stored).unwrap();
    let service_ref = &stored["webhooks"][0]["clientConfig"]["service"];
    let service = manifest
        .iter()
        .find(|o| o["kind"] == "Service" && o["metadata"]["name"] == service_ref["name"])
        .unwrap_or_else(|| {
            panic!(
                "the webhook names Service {}, which the chart does not make",
                service_ref["name"]
            )
        });
    assert_eq!(service_ref["namespace"], NAMESPACE);
    assert_eq!(service_ref["path"], "/mutate");
    let port = &service["spec"]["ports"][0];
    assert_eq!(service_ref["port"], port["port"]);
    assert_eq!(port["targetPort"], "https");
    // The Service selects the Deployment's pods, whose port "https" is 8443.
    let deployment = manifest.iter().find(|o| o["kind"] == "Deployment").unwrap();
    let pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
        .as_object()
        .unwrap();
    for (k, v) in service["spec"]["selector"].as_object().unwrap() {
        assert_eq!(pod_labels.get(k), Some(v), "the Service's selector {k}");
    }
    let ports = &deployment["spec"]["template"]["spec"]["containers"][0]["ports"];
    assert!(
        ports
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "https" && p["containerPort"] == 8443)
    );
}

fn release_manifest(helm: &Helm) -> Vec<Value> {
    objects(&helm.ok(&["get", "manifest", RELEASE, "--namespace", NAMESPACE]))
}

#[tokio::test]
async fn helm_install_upgrade_uninstall_in_the_real_apiserver() {
    let cluster = TestCluster::start().await;
    let client = cluster.client();
    let helm = Helm::new(Some(&cluster.kubeconfig));
    let chart = chart();
    let chart = chart.to_str().unwrap();
    let discovery = Discovery::new(client.clone()).run().await.unwrap();

    // The default (cert-manager) and the ServiceMonitor: kinds a bare apiserver lacks.
    let rendered = helm.template(&["--set", "serviceMonitor.enabled=true"]);
    let skipped: Vec<String> = rendered
        .iter()
        .filter(|o| api_for(&client, &discovery, o).is_none())
        .map(|o| {
            format!(
                "{} {} ({})",
                o["kind"].as_str().unwrap(),
                o["metadata"]["name"].as_str().unwrap(),
                o["apiVersion"].as_str().unwrap()
            )
        })
        .collect();
    for s in &skipped {
        eprintln!("not served by a bare kube-apiserver: {s}");
    }
    assert!(
        skipped
            .iter()
            .all(|s| s.contains("(cert-manager.io/v1)") || s.contains("(monitoring.coreos.com/v1)")),
        "{skipped:?}"
    );
    assert_eq!(skipped.len(), 5, "{skipped:?}");

    // 1. Certificates from a Secret, with the Azure lookup and its config Secret.
    let pki = cluster_harness::Pki::generate().unwrap();
    let ca_bundle = base64::engine::general_purpose::STANDARD.encode(&pki.ca.cert);
    let azure_values = Path::new(chart).join("ci/azure-values.yaml");
    let azure_json = workspace_root().join("tests/data/azure/managed-identity.json");
    let ca_set = format!("certificates.caBundle={ca_bundle}");
    let azure_json_set = format!("azure.config.json={}", azure_json.display());
    let install: Vec<&str> = vec![
        "--namespace",
        NAMESPACE,
        "--values",
        azure_values.to_str().unwrap(),
        "--set",
        "certificates.source=secret",
        "--set",
        "certificates.secretName=webhook-tls",
        "--set",
        &ca_set,
        "--set",
        "azure.config.create=true",
        "--set-file",
        &azure_json_set,
    ];
    let mut args = vec!["install", RELEASE, chart, "--create-namespace"];
    args.extend(&install);
    eprintln!("{}", helm.ok(&args));
    let manifest = release_manifest(&helm);
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    for o in &manifest {
        let api = api_for(&client, &discovery, o).unwrap_or_else(|| panic!("{} not served", key(o)));
        let stored = api.get(o["metadata"]["name"].as_str().unwrap()).await.unwrap();
        assert_eq!(
            stored.metadata.labels.as_ref().unwrap()["app.kubernetes.io/managed-by"],
            "Helm",
            "{}",
            key(o)
        );
    }
    let kinds: Vec<String> = manifest.iter().map(key).collect();
    eprintln!("installed: {kinds:?}");
    for k in [
        "ServiceAccount/pv-topology-webhook",
        "PriorityClass/pv-topology-webhook",
        "ConfigMap/pv-topology-webhook-rules",
        "Secret/azure-cloud-config",
        "Deployment/pv-topology-webhook",
        "PodDisruptionBudget/pv-topology-webhook",
        "Service/pv-topology-webhook",
        "Service/pv-topology-webhook-metrics",
        "MutatingWebhookConfiguration/pv-topology-webhook",
    ] {
        assert!(kinds.iter().any(|x| x == k), "{k} not installed: {kinds:?}");
    }
    assert_webhook_points_at_the_service(&client, &discovery, &manifest).await;
    let config = manifest
        .iter()
        .find(|o| o["kind"] == "MutatingWebhookConfiguration")
        .unwrap();
    let stored = serde_json::to_value(
        api_for(&client, &discovery, config)
            .unwrap()
            .get(RELEASE)
            .await
            .unwrap(),
    )
    .unwrap();
    let webhook = &stored["webhooks"][0];
    assert_eq!(webhook["clientConfig"]["caBundle"], ca_bundle.as_str());
    assert_eq!(webhook["failurePolicy"], "Fail");
    assert_eq!(webhook["matchConditions"][0]["name"], "handled-volume-source");
    assert_eq!(
        webhook["objectSelector"]["matchExpressions"][0]["key"],
        "pv-topology-webhook.io/skip"
    );
    let secret = serde_json::to_value(
        Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client.clone(), NAMESPACE)
            .get("azure-cloud-config")
            .await
            .unwrap(),
    )
    .unwrap();
    let stored_json = base64::engine::general_purpose::STANDARD
        .decode(secret["data"]["azure.json"].as_str().unwrap())
        .unwrap();
    assert_eq!(stored_json, std::fs::read(&azure_json).unwrap());

    // 2. helm upgrade: one replica, Ignore; the release's revision 2.
    let mut args = vec!["upgrade", RELEASE, chart];
    args.extend(&install);
    args.extend(["--set", "replicas=1", "--set", "webhook.failurePolicy=Ignore"]);
    args.extend(["--set", "podDisruptionBudget.maxUnavailable=1"]);
    eprintln!("{}", helm.ok(&args));
    let deployment = Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(client.clone(), NAMESPACE)
        .get(RELEASE)
        .await
        .unwrap();
    assert_eq!(deployment.spec.unwrap().replicas, Some(1));
    let stored = serde_json::to_value(
        api_for(&client, &discovery, config)
            .unwrap()
            .get(RELEASE)
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(stored["webhooks"][0]["failurePolicy"], "Ignore");
    let pdb = serde_json::to_value(
        Api::<k8s_openapi::api::policy::v1::PodDisruptionBudget>::namespaced(client.clone(), NAMESPACE)
            .get(RELEASE)
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(pdb["spec"]["maxUnavailable"], 1);
    assert!(pdb["spec"]["minAvailable"].is_null(), "{pdb}");
    let history = helm.ok(&["history", RELEASE, "--namespace", NAMESPACE, "--output", "json"]);
    let history: Vec<Value> = serde_json::from_str(&history).unwrap();
    assert_eq!(history.len(), 2, "{history:?}");
    assert_eq!(history[1]["status"], "deployed");

    // 3. helm uninstall: nothing left.
    let manifest = release_manifest(&helm);
    eprintln!(
        "{}",
        helm.ok(&["uninstall", RELEASE, "--namespace", NAMESPACE, "--wait"])
    );
    assert_nothing_left(&client, &manifest).await;

    // 4. cert-manager mode and the ServiceMonitor, their kinds served from stub
    //    CRDs (open schemas: what is checked is that helm installs, upgrades and
    //    removes them, not cert-manager's validation).
    let crds: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &kube::api::ApiResource::from_gvk(&GroupVersionKind::gvk(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
        )),
    );
    for (group, kind, plural) in [
        ("cert-manager.io", "Issuer", "issuers"),
        ("cert-manager.io", "Certificate", "certificates"),
        ("monitoring.coreos.com", "ServiceMonitor", "servicemonitors"),
    ] {
        let crd: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{plural}.{group}")},
            "spec": {
                "group": group,
                "scope": "Namespaced",
                "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(), "listKind": format!("{kind}List")},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
            }
        }))
        .unwrap();
        crds.create(&PostParams::default(), &crd).await.unwrap();
    }
    // Wait until they are served.
    let mut served = false;
    for _ in 0..100 {
        let d = Discovery::new(client.clone()).run().await.unwrap();
        if rendered.iter().all(|o| api_for(&client, &d, o).is_some()) {
            served = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(served, "the stub CRDs were not served");
    eprintln!(
        "{}",
        helm.ok(&[
            "install",
            RELEASE,
            chart,
            "--namespace",
            NAMESPACE,
            "--set",
            "serviceMonitor.enabled=true"
        ])
    );
    let manifest = release_manifest(&helm);
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    assert_eq!(
        manifest.len(),
        rendered.len(),
        "{:?}",
        manifest.iter().map(key).collect::<Vec<_>>()
    );
    for o in &manifest {
        let api = api_for(&client, &discovery, o).unwrap();
        api.get(o["metadata"]["name"].as_str().unwrap())
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", key(o)));
    }
    assert_webhook_points_at_the_service(&client, &discovery, &manifest).await;
    let stored = serde_json::to_value(
        api_for(&client, &discovery, config)
            .unwrap()
            .get(RELEASE)
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        stored["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
        "pv-topology-webhook/pv-topology-webhook-serving"
    );
    let certificate = manifest
        .iter()
        .find(|o| o["kind"] == "Certificate" && o["metadata"]["name"] == "pv-topology-webhook-serving")
        .unwrap();
    let deployment = manifest.iter().find(|o| o["kind"] == "Deployment").unwrap();
    assert_eq!(
        certificate["spec"]["secretName"],
        deployment["spec"]["template"]["spec"]["volumes"][0]["secret"]["secretName"]
    );
    assert!(
        certificate["spec"]["dnsNames"]
            .as_array()
            .unwrap()
            .contains(&json!("pv-topology-webhook.pv-topology-webhook.svc"))
    );
    eprintln!(
        "{}",
        helm.ok(&[
            "upgrade",
            RELEASE,
            chart,
            "--namespace",
            NAMESPACE,
            "--set",
            "serviceMonitor.enabled=false"
        ])
    );
    let after = release_manifest(&helm);
    assert_eq!(after.len(), manifest.len() - 1);
    let monitor = manifest.iter().find(|o| o["kind"] == "ServiceMonitor").unwrap();
    assert!(
        api_for(&client, &discovery, monitor)
            .unwrap()
            .get_opt(RELEASE)
            .await
            .unwrap()
            .is_none(),
        "the ServiceMonitor outlived the upgrade that dropped it"
    );
    eprintln!(
        "{}",
        helm.ok(&["uninstall", RELEASE, "--namespace", NAMESPACE, "--wait"])
    );
    assert_nothing_left(&client, &manifest).await;
}
