//! The Helm chart `charts/pv-topology-webhook`, with helm v3.22.0 (built by
//! `tests/cluster/build.sh` from the Go module proxy):
//!
//! - one source of truth: the chart rendered with each `ci/*-values.yaml`
//!   gives the objects `kustomize-render` gives for the matching directory of
//!   `manifests/webhook/` (base and overlays), field for field, but for
//!   Helm's own labels, the pod template's annotations and the image;
//! - `helm lint --strict` with every values file and other switches, the
//!   Deployment's arguments accepted by the binary's command line; bad
//!   values (the default placeholder image first) fail on
//!   `values.schema.json` with a message naming the value and what it must
//!   be, never a bare regular expression;
//! - `helm install`, `helm upgrade` and `helm uninstall` against the real
//!   kube-apiserver: the objects are accepted, the webhook configuration
//!   points at the chart's Service, and nothing is left behind. Kinds the
//!   bare apiserver does not serve (cert-manager's, the ServiceMonitor) are
//!   listed as skipped, then served from stub CRDs (an open schema, not
//!   their projects' CRDs) for an install in cert-manager mode;
//! - the helm commands of docs/webhook.md ("Install with Helm", "Failure
//!   policy") run as written, with helm on PATH and the tier's kubeconfig,
//!   the chart's own Namespace finalized by the real namespace controller.

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
/// The chart refuses to render without an image of the user's (its default is a
/// placeholder): the tests name the one `make image` builds.
const IMAGE: [&str; 2] = ["--set", "image.repository=localhost/pv-topology-webhook"];

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
        cmd.args(args);
        self.environment(&mut cmd);
        cmd
    }

    /// `bash -euo pipefail -c script` in `dir`, as a user runs a documented
    /// command: this helm and the webhook's binary first on PATH, this helm's
    /// homes and kubeconfig; nothing in the script replaced.
    fn shell(&self, script: &str, dir: &Path) -> Output {
        let webhook = cluster_harness::workspace_binary("pv-topology-webhook", "PV_TOPOLOGY_WEBHOOK_BIN");
        let path = std::env::join_paths(
            [
                cluster_bin("helm").parent().unwrap().to_path_buf(),
                webhook.parent().unwrap().to_path_buf(),
            ]
            .into_iter()
            .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
        )
        .unwrap();
        let mut cmd = Command::new("bash");
        cmd.args(["-euo", "pipefail", "-c", script])
            .current_dir(dir)
            .env("PATH", path);
        self.environment(&mut cmd);
        cmd.output().unwrap()
    }

    fn environment(&self, cmd: &mut Command) {
        let home = self.home.path();
        cmd.env("HELM_CACHE_HOME", home.join("cache"))
            .env("HELM_CONFIG_HOME", home.join("config"))
            .env("HELM_DATA_HOME", home.join("data"))
            // Where the documented commands' image was pushed: any name the
            // schema accepts (nothing pulls it in the tier).
            .env("REGISTRY", "127.0.0.1:5000")
            .env(
                "KUBECONFIG",
                self.kubeconfig.clone().unwrap_or_else(|| home.join("no-kubeconfig")),
            );
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = run_ok(&mut self.command(args)).unwrap_or_else(|e| panic!("{e:#}"));
        String::from_utf8(out.stdout).unwrap()
    }

    fn output(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    /// `helm template` of the chart as release `pv-topology-webhook` in its
    /// namespace, with the tests' image.
    fn template(&self, extra: &[&str]) -> Vec<Value> {
        self.template_in(NAMESPACE, extra)
    }

    /// `helm template` with the release in `namespace`.
    fn template_in(&self, namespace: &str, extra: &[&str]) -> Vec<Value> {
        let chart = chart();
        let mut args = vec!["template", RELEASE, chart.to_str().unwrap(), "--namespace", namespace];
        args.extend(IMAGE);
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
        // The chart's own Namespace, as the base's: the release kept in another
        // namespace (docs/webhook.md, "Install with Helm").
        let mut args = vec![
            "--set",
            "namespace.create=true",
            "--set",
            "namespace.name=pv-topology-webhook",
        ];
        if let Some(path) = &values_path {
            args.extend(["--values", path.to_str().unwrap()]);
        }
        let helm_objects: BTreeMap<String, Value> = helm
            .template_in("default", &args)
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
/// accepts: run with them, it does not stop with a usage error (exit 1, the
/// line ending "see --help)", as every usage error of the suite's programs) but
/// later, at the missing rules or TLS files, or is still starting after 10 s.
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
    assert!(
        status.is_none_or(|s| s.code() != Some(2)) && !stderr.trim_end().ends_with("see --help)"),
        "{what}: the Deployment's args {args:?}: {stderr}"
    );
}

/// `repair.rbac.create` renders the objects of manifests/webhook/repair, with the same
/// rules and binding; off by default (a role that recreates PVs is not left on).
#[test]
fn the_charts_repair_role_is_the_kustomize_one_and_off_by_default() {
    let helm = Helm::new(None);
    let is_repair = |o: &Value| o["metadata"]["name"].as_str().is_some_and(|n| n.ends_with("-repair"));
    assert!(
        !helm.template(&[]).iter().any(is_repair),
        "no repair objects by default"
    );
    let rendered =
        run_ok(Command::new(cluster_bin("kustomize-render")).arg(workspace_root().join("manifests/webhook/repair")))
            .unwrap();
    let kustomize: BTreeMap<String, Value> = objects(&String::from_utf8_lossy(&rendered.stdout))
        .into_iter()
        .map(|o| (key(&o), o))
        .collect();
    let chart: BTreeMap<String, Value> = helm
        .template(&["--set", "repair.rbac.create=true"])
        .into_iter()
        .filter(is_repair)
        .map(|o| (key(&o), o))
        .collect();
    assert_eq!(
        chart.keys().collect::<Vec<_>>(),
        kustomize.keys().collect::<Vec<_>>(),
        "the same objects"
    );
    let role = "ClusterRole/pv-topology-webhook-repair";
    assert_eq!(chart[role]["rules"], kustomize[role]["rules"], "the same verbs");
    let binding = "ClusterRoleBinding/pv-topology-webhook-repair";
    for part in ["roleRef", "subjects"] {
        assert_eq!(chart[binding][part], kustomize[binding][part], "{binding}: {part}");
    }
}

#[test]
fn helm_lint_strict_passes_with_every_values_file() {
    let helm = Helm::new(None);
    let chart = chart();
    let chart = chart.to_str().unwrap();
    eprintln!("{}", helm.ok(&["lint", "--strict", chart, IMAGE[0], IMAGE[1]]));
    for (_, values) in EQUIVALENTS {
        if let Some(v) = values {
            let path = Path::new(chart).join(v);
            eprintln!(
                "{}",
                helm.ok(&[
                    "lint",
                    "--strict",
                    chart,
                    IMAGE[0],
                    IMAGE[1],
                    "--values",
                    path.to_str().unwrap()
                ])
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
        let mut args = vec!["lint", "--strict", chart, IMAGE[0], IMAGE[1]];
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

/// The schema's checked formats: a value that does not match `pattern` must equal
/// `const`, the `description`, which is what helm prints (helm v3.22 prints a bare
/// `pattern` as the regular expression, and no `description`):
/// `{"description": D, "if": {"not": {"pattern": P}}, "then": {"const": D, "pattern": P}}`.
/// Returns the descriptions; panics naming any `pattern` outside that shape or an `if`.
fn checked_formats(node: &Value, at: &str, in_if: bool, found: &mut Vec<String>) {
    match node {
        Value::Object(map) => {
            let mut checked_then = false;
            if let (Some(Value::String(p)), Some(then)) = (node.pointer("/if/not/pattern"), map.get("then")) {
                let description = map.get("description").and_then(Value::as_str);
                assert!(
                    description.is_some() && then["const"].as_str() == description && then["pattern"] == **p,
                    "{at}: a checked format needs description == then.const and then.pattern == if.not.pattern: {node}"
                );
                found.push(description.unwrap_or_default().to_owned());
                checked_then = true;
            }
            assert!(
                in_if || !map.contains_key("pattern"),
                "{at}: a bare pattern, which helm prints as the regular expression: write it as a checked format"
            );
            for (k, child) in map {
                let inside = in_if || k == "if" || (k == "then" && checked_then);
                checked_formats(child, &format!("{at}/{k}"), inside, found);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                checked_formats(item, &format!("{at}/{i}"), in_if, found);
            }
        }
        _ => {}
    }
}

#[test]
fn bad_values_fail_on_the_schema_with_a_message() {
    let helm = Helm::new(None);
    let chart = chart();
    let chart = chart.to_str().unwrap();
    let schema: Value =
        serde_json::from_slice(&std::fs::read(Path::new(chart).join("values.schema.json")).unwrap()).unwrap();
    let mut descriptions = Vec::new();
    checked_formats(&schema, "values.schema.json#", false, &mut descriptions);
    // How to get an image, which the default (a placeholder) and an empty repository
    // are refused with.
    let build_and_push: &[&str] = &[
        "at '/image/repository'",
        "make image push REGISTRY=",
        "skopeo copy oci-archive:target/image/pv-topology-webhook.tar docker://",
        "podman push",
        "--set image.repository=",
    ];
    // (--set after the tests' image, words the message must hold)
    let cases: Vec<(Vec<&str>, &[&str])> = vec![
        (
            vec!["webhook.failurePolicy=Sometimes"],
            &["failurePolicy", "Fail", "Ignore"],
        ),
        (vec!["replicas=0"], &["replicas", "minimum"]),
        (vec!["replica=2"], &["replica", "additional"]),
        (
            vec!["lookupTimeout=2 seconds"],
            &["at '/lookupTimeout'", "a Go duration"],
        ),
        (vec!["webhook.timeoutSeconds=60"], &["timeoutSeconds"]),
        (
            vec!["certificates.source=secret"],
            &["at '/certificates/caBundle'", "pv-topology-webhook certs"],
        ),
        (vec!["certificates.source=vault"], &["source", "cert-manager", "secret"]),
        (
            vec!["certificates.caBundle=not base64!"],
            &["at '/certificates/caBundle'", "base64"],
        ),
        (
            vec!["podDisruptionBudget.minAvailable=two"],
            &["at '/podDisruptionBudget/minAvailable'", "percentage"],
        ),
        (
            vec!["podDisruptionBudget.maxUnavailable=two"],
            &["at '/podDisruptionBudget/maxUnavailable'", "percentage"],
        ),
        (vec!["image.digest=sha256:abc"], &["at '/image/digest'", "sha256:"]),
        (vec!["extraArgs={-v}"], &["at '/extraArgs/0'", "--"]),
        (vec!["aws.region=Europe"], &["at '/aws/region'", "eu-west-1"]),
        (
            vec!["namespace.name=Pv_Topology"],
            &["at '/namespace/name'", "DNS label"],
        ),
        (
            vec!["namespace.create=true"],
            &[
                "at '/namespace/name'",
                "namespace.create needs namespace.name",
                "--namespace default",
            ],
        ),
        (
            vec!["image.repository=registry.example.invalid/pv-topology-webhook"],
            build_and_push,
        ),
        (
            vec!["image.repository=registry.example.invalid:5000/webhook"],
            build_and_push,
        ),
        (vec!["image.repository="], build_and_push),
        // Names reserved for examples (RFC 2606) never resolve, and an unset
        // $REGISTRY in the documented commands leaves a leading '/'.
        (
            vec!["image.repository=registry.example/pv-topology-webhook"],
            build_and_push,
        ),
        (
            vec!["image.repository=registry.example.com/pv-topology-webhook"],
            build_and_push,
        ),
        (
            vec!["image.repository=example.org:5000/pv-topology-webhook"],
            build_and_push,
        ),
        (vec!["image.repository=/pv-topology-webhook"], build_and_push),
    ];
    let mut printed = String::new();
    let mut check = |args: &[&str], words: &[&str]| {
        let out = helm.output(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        eprintln!("{:?}: {}", &args[3..], stderr.trim());
        assert!(!out.status.success(), "{args:?} was accepted");
        assert!(
            stderr.contains("values don't meet the specifications of the schema"),
            "{args:?}: {stderr}"
        );
        assert!(
            !stderr.contains("does not match pattern"),
            "{args:?}: a bare pattern printed: {stderr}"
        );
        for w in words {
            assert!(
                stderr.contains(w),
                "{args:?}: the message does not name {w:?}: {stderr}"
            );
        }
        printed.push_str(&stderr);
    };
    // The chart's defaults: no image of the user's.
    check(&["template", RELEASE, chart], build_and_push);
    for (sets, words) in &cases {
        let mut args = vec!["template", RELEASE, chart, IMAGE[0], IMAGE[1]];
        for s in sets {
            args.extend(["--set", s]);
        }
        check(&args, words);
    }
    // Every checked format's description is what a bad value prints.
    for d in &descriptions {
        assert!(
            printed.contains(&format!("value must be '{d}'")),
            "no case prints the description {d:?}: add one"
        );
    }
    // A required value with its own message.
    let out = helm.output(&[
        "template",
        RELEASE,
        chart,
        IMAGE[0],
        IMAGE[1],
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
    // The chart's own Namespace cannot be the release's: helm keeps the release
    // record there before it creates any object.
    let out = helm.output(&[
        "template",
        RELEASE,
        chart,
        "--namespace",
        NAMESPACE,
        IMAGE[0],
        IMAGE[1],
        "--set",
        "namespace.create=true",
        "--set",
        "namespace.name=pv-topology-webhook",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("namespace.create in the release's namespace: {}", stderr.trim());
    assert!(
        !out.status.success()
            && stderr.contains("namespace.create")
            && stderr.contains("--namespace default")
            && stderr.contains("--create-namespace"),
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
    release_manifest_in(helm, NAMESPACE)
}

fn release_manifest_in(helm: &Helm, release_namespace: &str) -> Vec<Value> {
    objects(&helm.ok(&["get", "manifest", RELEASE, "--namespace", release_namespace]))
}

/// The commands of the first `sh` block of docs/webhook.md's section `heading`:
/// comment lines dropped, `\` continuations joined; the test runs them as written.
fn documented_commands(heading: &str) -> Vec<String> {
    let doc = std::fs::read_to_string(workspace_root().join("docs/webhook.md")).unwrap();
    let section = doc
        .split("\n## ")
        .find(|s| s.starts_with(heading))
        .unwrap_or_else(|| panic!("docs/webhook.md has no section {heading:?}"));
    let block = section
        .split_once("```sh\n")
        .and_then(|(_, rest)| rest.split_once("\n```"))
        .map(|(block, _)| block)
        .unwrap_or_else(|| panic!("docs/webhook.md, {heading:?}: no sh block"));
    let mut commands = Vec::new();
    let mut command = String::new();
    for line in block.lines().map(str::trim) {
        if command.is_empty() && (line.is_empty() || line.starts_with('#')) {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(part) => command.push_str(part),
            None => {
                command.push_str(line);
                commands.push(std::mem::take(&mut command));
            }
        }
    }
    assert!(command.is_empty(), "{heading:?}: a command ends in \\: {command}");
    commands
}

/// The value of `--flag VALUE` or `--flag=VALUE` in a documented command.
fn flag_value<'a>(command: &'a str, flag: &str) -> Option<&'a str> {
    let mut words = command.split_whitespace();
    while let Some(w) = words.next() {
        if w == flag {
            return words.next();
        }
        if let Some(v) = w.strip_prefix(flag).and_then(|v| v.strip_prefix('=')) {
            return Some(v);
        }
    }
    None
}

/// A documented `helm install` or `helm upgrade`, run as written in `dir`; then
/// what it made, checked in the apiserver: the release deployed, every object of
/// its manifest stored, the image the command names in the Deployment, the
/// webhook configurations pointing at the chart's Service in the objects'
/// namespace, and the failure policy stored. Returns the release's namespace.
async fn run_documented(helm: &Helm, client: &kube::Client, command: &str, dir: &Path, failure_policy: &str) -> String {
    let t0 = std::time::Instant::now();
    let out = helm.shell(command, dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("$ {command}\n{}{}({:.1?})", stdout, stderr, t0.elapsed());
    assert!(
        out.status.success(),
        "the documented command failed: {command}\n{stderr}"
    );
    // NOTES.txt warns what Fail does until a pod is ready, and says nothing of it with Ignore.
    assert_eq!(
        stdout.contains("until a pod is ready, every PersistentVolume create"),
        failure_policy == "Fail",
        "{command}: the notes: {stdout}"
    );
    let release_namespace = flag_value(command, "--namespace")
        .or_else(|| flag_value(command, "-n"))
        .unwrap_or("default")
        .to_owned();
    let status: Value =
        serde_json::from_str(&helm.ok(&["status", RELEASE, "--namespace", &release_namespace, "--output", "json"]))
            .unwrap();
    assert_eq!(status["info"]["status"], "deployed", "{command}");
    let manifest = release_manifest_in(helm, &release_namespace);
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    for o in &manifest {
        let api = api_for(client, &discovery, o).unwrap_or_else(|| panic!("{} not served", key(o)));
        api.get(o["metadata"]["name"].as_str().unwrap())
            .await
            .unwrap_or_else(|e| panic!("{command}: {}: {e}", key(o)));
    }
    assert_webhook_points_at_the_service(client, &discovery, &manifest).await;
    let deployment = Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(client.clone(), NAMESPACE)
        .get(RELEASE)
        .await
        .unwrap();
    let image = deployment.spec.unwrap().template.spec.unwrap().containers[0]
        .image
        .clone();
    // The image the command set (with --reuse-values, the one set before).
    let values = &status["config"]["image"];
    let (Some(repository), Some(tag)) = (values["repository"].as_str(), values["tag"].as_str()) else {
        panic!(
            "{command}: sets no image.repository and image.tag: {}",
            status["config"]
        );
    };
    assert_eq!(
        image.as_deref(),
        Some(format!("{repository}:{tag}").as_str()),
        "{command}"
    );
    let config = Api::<k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration>::all(client.clone())
        .get(RELEASE)
        .await
        .unwrap();
    assert_eq!(
        config.webhooks.unwrap()[0].failure_policy.as_deref(),
        Some(failure_policy),
        "{command}"
    );
    release_namespace
}

#[tokio::test]
async fn helm_install_upgrade_uninstall_in_the_real_apiserver() {
    let mut cluster = TestCluster::start().await;
    // The namespace controller deletes the chart's own Namespace in part 0
    // (started now, it is ready by then).
    cluster.start_controller_manager(&["namespace-controller"]).unwrap();
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

    // The kinds of cert-manager mode (the default) and the ServiceMonitor,
    // served from stub CRDs (open schemas: what is checked is that helm
    // installs, upgrades and removes them, not cert-manager's validation).
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
        // A group just listed may not be served yet (404): try again.
        let d = Discovery::new(client.clone()).run().await;
        if d.is_ok_and(|d| rendered.iter().all(|o| api_for(&client, &d, o).is_some())) {
            served = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(served, "the stub CRDs were not served");

    // 0. The documented install with the chart's own Namespace (docs/webhook.md,
    //    "Install with Helm"; all of them in part 5), run as written in a
    //    directory holding the workspace's charts/. First, because helm cannot
    //    take over a namespace that exists, as the later parts' does; its
    //    uninstall deletes the Namespace, which the namespace controller
    //    finalizes, as in a cluster.
    let t0 = std::time::Instant::now();
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(workspace_root().join("charts"), dir.path().join("charts")).unwrap();
    let installs = documented_commands("Install with Helm");
    assert!(
        installs.len() >= 4 && installs.iter().all(|c| c.starts_with("helm install ")),
        "{installs:?}"
    );
    let (own_namespace, others): (Vec<&String>, Vec<&String>) =
        installs.iter().partition(|c| c.contains("namespace.create=true"));
    let [command] = own_namespace.as_slice() else {
        panic!("not one documented install with the chart's own Namespace: {own_namespace:?}");
    };
    let namespaces = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone());
    assert!(namespaces.get_opt(NAMESPACE).await.unwrap().is_none());
    let release_namespace = run_documented(&helm, &client, command, dir.path(), "Fail").await;
    assert_ne!(release_namespace, NAMESPACE, "{command}");
    let labels = namespaces.get(NAMESPACE).await.unwrap().metadata.labels.unwrap();
    assert_eq!(labels["pod-security.kubernetes.io/enforce"], "restricted", "{labels:?}");
    assert_eq!(labels["app.kubernetes.io/managed-by"], "Helm", "{labels:?}");
    uninstall_documented(&helm, &client, &release_namespace).await;
    wait_until_gone(&namespaces, NAMESPACE).await;
    let own_namespace_took = t0.elapsed();

    // 1. Certificates from a Secret, with the Azure lookup and its config Secret.
    let pki = cluster_harness::Pki::generate().unwrap();
    let ca_bundle = base64::engine::general_purpose::STANDARD.encode(&pki.ca.cert);
    let azure_values = Path::new(chart).join("ci/azure-values.yaml");
    let azure_json = workspace_root().join("tests/data/azure/managed-identity.json");
    let ca_set = format!("certificates.caBundle={ca_bundle}");
    let azure_json_set = format!("azure.config.json={}", azure_json.display());
    let install: Vec<&str> = vec![
        IMAGE[0],
        IMAGE[1],
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

    // 4. cert-manager mode and the ServiceMonitor, their kinds served from the stub CRDs.
    eprintln!(
        "{}",
        helm.ok(&[
            "install",
            RELEASE,
            chart,
            "--namespace",
            NAMESPACE,
            IMAGE[0],
            IMAGE[1],
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
            IMAGE[0],
            IMAGE[1],
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

    // 5. The other documented installs, run as written in the same directory.
    let t0 = std::time::Instant::now();
    let certs = documented_commands("Install without cert-manager");
    let certs = certs
        .iter()
        .find(|c| c.starts_with("pv-topology-webhook certs "))
        .expect("the documented certs command");
    let out = helm.shell(certs, dir.path());
    assert!(
        out.status.success(),
        "{certs}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ca_bundle = std::fs::read_to_string(dir.path().join("ca-bundle.txt")).unwrap();
    for command in &others {
        let policy = if command.contains("single-replica") {
            "Ignore"
        } else {
            "Fail"
        };
        let release_namespace = run_documented(&helm, &client, command, dir.path(), policy).await;
        if command.contains("certificates.source=secret") {
            let config =
                Api::<k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration>::all(client.clone())
                    .get(RELEASE)
                    .await
                    .unwrap();
            let stored = config.webhooks.unwrap()[0].client_config.ca_bundle.clone().unwrap();
            assert_eq!(
                base64::engine::general_purpose::STANDARD.encode(stored.0),
                ca_bundle.trim(),
                "{command}"
            );
        }
        uninstall_documented(&helm, &client, &release_namespace).await;
    }
    // Ignore until the pods are ready, then Fail. kubectl is not in the tier, and
    // no kubelet runs the pods: the wait is the one command not run.
    match documented_commands("Failure policy").as_slice() {
        [install, wait, upgrade] => {
            let release_namespace = run_documented(&helm, &client, install, dir.path(), "Ignore").await;
            assert!(
                wait.starts_with("kubectl -n pv-topology-webhook rollout status deployment/pv-topology-webhook"),
                "{wait}"
            );
            assert!(upgrade.starts_with("helm upgrade "), "{upgrade}");
            run_documented(&helm, &client, upgrade, dir.path(), "Fail").await;
            uninstall_documented(&helm, &client, &release_namespace).await;
        }
        other => panic!("docs/webhook.md, Failure policy: not install, wait, upgrade: {other:?}"),
    }
    eprintln!(
        "the documented installs: {:.1?} and {:.1?}",
        own_namespace_took,
        t0.elapsed()
    );
}

async fn wait_until_gone(namespaces: &Api<k8s_openapi::api::core::v1::Namespace>, name: &str) {
    for _ in 0..600 {
        if namespaces.get_opt(name).await.unwrap().is_none() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("namespace {name} not deleted within 60 s");
}

/// `helm uninstall`, then the release's Namespace (if it has one) gone: the
/// namespace controller holds a deleted namespace 5 s before it finalizes it;
/// then nothing of the release is left, its release records in
/// `release_namespace` included.
async fn uninstall_documented(helm: &Helm, client: &kube::Client, release_namespace: &str) {
    let manifest = release_manifest_in(helm, release_namespace);
    let t0 = std::time::Instant::now();
    eprintln!("{}", helm.ok(&["uninstall", RELEASE, "--namespace", release_namespace]));
    eprintln!("uninstall {:.1?}", t0.elapsed());
    let namespaces = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone());
    for o in manifest.iter().filter(|o| o["kind"] == "Namespace") {
        wait_until_gone(&namespaces, o["metadata"]["name"].as_str().unwrap()).await;
    }
    assert_nothing_left(client, &manifest).await;
    let records = Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client.clone(), release_namespace)
        .list(&ListParams::default().labels(&format!("owner=helm,name={RELEASE}")))
        .await
        .unwrap();
    assert!(
        records.items.is_empty(),
        "helm release records left in {release_namespace}: {:?}",
        records.iter().map(|s| s.metadata.name.clone()).collect::<Vec<_>>()
    );
}
