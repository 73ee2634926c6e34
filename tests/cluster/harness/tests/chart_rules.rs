//! What the chart's rules do to real PVs (issue 25): the chart `charts/pv-topology-webhook`
//! rendered by helm with its defaults and with every `ci/*-values.yaml`, and the
//! rendered rules file and `serve` arguments given to `pv-topology-webhook review`
//! on one PV per driver (tests/data/webhook/files/one-pv-per-driver.json). No PV may get a
//! topology from a rule the chart ships: a rule answers before the lookups, and the
//! old example `inTree: cinder, zones: [nova]` gave every Cinder volume the zone
//! `nova` with `--openstack-cinder-lookup` on. With the OpenStack values the Cinder
//! PVs get the zone Cinder reports (the fake of tests/fakes/openstack_server.py);
//! a PV another enabled lookup answers for is looked up in a cloud that is not
//! there (a closed loopback port) and is refused naming that lookup; every other PV
//! is left without topology. No control plane: helm renders, the binary reviews.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use base64::Engine as _;
use cluster_harness::{cluster_bin, run_ok, workspace_binary, workspace_root};
use serde::Deserialize as _;
use serde_json::{Value, json};
use test_fakes::OpenStackFake;

/// Where the chart mounts the rules ConfigMap's `rules.yaml` (`--rules`).
const RULES_PATH: &str = "/etc/pv-topology-webhook/rules.yaml";
/// Where the Azure values mount the cloud config Secret (`--azure-config`).
const AZURE_CONFIG_PATH: &str = "/etc/kubernetes/azure/azure.json";
/// A loopback port nothing listens on: the clouds of the lookups this test has no fake for.
const CLOSED: &str = "127.0.0.1:1";

/// Each lookup flag and the name its answers and errors carry.
const LOOKUP_NAMES: [(&str, &str); 5] = [
    ("--aws-ebs-lookup", "aws-ebs"),
    ("--gce-lookup", "gce"),
    ("--azure-disk-lookup", "azure-disk"),
    ("--openstack-cinder-lookup", "openstack-cinder"),
    ("--vsphere-lookup", "vsphere"),
];

fn chart() -> PathBuf {
    workspace_root().join("charts/pv-topology-webhook")
}

/// `helm template` of the chart with `values` (none: the defaults), in its own homes.
fn render(values: Option<&Path>) -> Vec<Value> {
    let home = tempfile::tempdir().expect("a helm home");
    let chart = chart();
    let mut cmd = Command::new(cluster_bin("helm"));
    cmd.args(["template", "pv-topology-webhook", chart.to_str().expect("a UTF-8 path")])
        .args(["--namespace", "pv-topology-webhook"])
        // The chart has no usable default image (a placeholder): name the one `make image` builds.
        .args(["--set", "image.repository=localhost/pv-topology-webhook"])
        .env("HELM_CACHE_HOME", home.path().join("cache"))
        .env("HELM_CONFIG_HOME", home.path().join("config"))
        .env("HELM_DATA_HOME", home.path().join("data"))
        .env("KUBECONFIG", home.path().join("no-kubeconfig"));
    if let Some(values) = values {
        cmd.arg("--values").arg(values);
    }
    let out = run_ok(&mut cmd).unwrap_or_else(|e| panic!("{e:#}"));
    let text = String::from_utf8(out.stdout).expect("UTF-8 from helm");
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).unwrap_or_else(|e| panic!("{e}\n{text}")))
        .filter(|o| o.get("kind").is_some())
        .collect()
}

/// What the rendered chart runs: the container's arguments and literal environment,
/// and the rules file's text when the chart mounts one at [`RULES_PATH`].
struct Rendered {
    args: Vec<String>,
    env: Vec<(String, String)>,
    rules: Option<String>,
}

fn rendered(objects: &[Value], what: &str) -> Rendered {
    let deployment = objects
        .iter()
        .find(|o| o["kind"] == "Deployment")
        .unwrap_or_else(|| panic!("{what}: no Deployment"));
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| a.iter().map(|s| s.as_str().expect("a string").to_owned()).collect())
            .unwrap_or_default()
    };
    let args = strings(&container["args"]);
    let env = container["env"]
        .as_array()
        .map(|vars| {
            vars.iter()
                .filter_map(|v| Some((v["name"].as_str()?.to_owned(), v["value"].as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default();
    // The rules: the ConfigMap the volume mounted at RULES_PATH names.
    let mount = container["volumeMounts"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["mountPath"] == RULES_PATH);
    let rules = mount.map(|mount| {
        let volume = pod["volumes"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|v| v["name"] == mount["name"])
            .unwrap_or_else(|| panic!("{what}: no volume {}", mount["name"]));
        let name = &volume["configMap"]["name"];
        let map = objects
            .iter()
            .find(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == *name)
            .unwrap_or_else(|| panic!("{what}: no ConfigMap {name}"));
        let key = mount["subPath"].as_str().expect("the rules' subPath");
        map["data"][key].as_str().expect("the rules text").to_owned()
    });
    let rules_flag = format!("--rules={RULES_PATH}");
    assert_eq!(
        rules.is_some(),
        args.contains(&rules_flag),
        "{what}: {rules_flag} and the rules mount go together: {args:?}"
    );
    Rendered { args, env, rules }
}

/// The long flags `pv-topology-webhook review --help` lists.
fn review_flags(binary: &Path) -> Vec<String> {
    let out = run_ok(Command::new(binary).args(["review", "--help"])).unwrap_or_else(|e| panic!("{e:#}"));
    String::from_utf8_lossy(&out.stdout)
        .split(|c: char| c.is_whitespace() || c == ',' || c == '[' || c == ']' || c == '=')
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(str::to_owned)
        .collect()
}

/// A CREATE review of `pv`.
fn create_review(pv: &Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "00000000-0000-0000-0000-0000000000c1",
            "kind": {"group": "", "version": "v1", "kind": "PersistentVolume"},
            "resource": {"group": "", "version": "v1", "resource": "persistentvolumes"},
            "name": pv["metadata"]["name"],
            "operation": "CREATE",
            "userInfo": {"username": "admin"},
            "object": pv,
            "dryRun": false
        }
    }))
    .expect("a review")
}

/// How one review ended: `Err(stderr)` when the command stopped before answering.
fn review(binary: &Path, args: &[String], env: &[(String, String)], pv: &Value) -> Result<Value, String> {
    let mut child = Command::new(binary)
        .arg("review")
        .args(args)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("review started");
    // A command refused at start-up may exit before reading stdin.
    let _ = std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), &create_review(pv));
    let out = child.wait_with_output().expect("review's output");
    if !out.status.success() {
        return Err(format!(
            "{:?}: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let answer: Value = serde_json::from_slice(&out.stdout).expect("an AdmissionReview");
    Ok(answer["response"].clone())
}

/// The labels the answer's patch adds (null when none).
fn labels(response: &Value) -> Value {
    let Some(patch) = response["patch"].as_str() else {
        return Value::Null;
    };
    let patch: Value =
        serde_json::from_slice(&base64::engine::general_purpose::STANDARD.decode(patch).expect("base64"))
            .expect("a JSON Patch");
    let mut labels = serde_json::Map::new();
    for op in patch.as_array().expect("a list") {
        let path = op["path"].as_str().expect("a path");
        if path == "/metadata/labels" {
            labels.extend(op["value"].as_object().expect("labels").clone());
        } else if let Some(key) = path.strip_prefix("/metadata/labels/") {
            labels.insert(key.replace("~1", "/").replace("~0", "~"), op["value"].clone());
        }
    }
    Value::Object(labels)
}

/// The OpenStack fake's cloud.conf fixture, its Keystone pointed at the fake.
fn cloud_conf(fake: &OpenStackFake, dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(test_fakes::openstack::openstack_data("cloud.conf")).expect("cloud.conf");
    let path = dir.join("cloud.conf");
    std::fs::write(
        &path,
        text.replace("http://127.0.0.1:1/identity", &format!("{}/identity", fake.base())),
    )
    .expect("cloud.conf written");
    path
}

#[test]
fn no_pv_gets_its_topology_from_a_rule_the_chart_ships() {
    let binary = workspace_binary("pv-topology-webhook", "PV_TOPOLOGY_WEBHOOK_BIN");
    let accepted = review_flags(&binary);
    assert!(
        accepted.iter().any(|f| f == "--openstack-cinder-lookup") && accepted.iter().any(|f| f == "--rules"),
        "review --help: {accepted:?}"
    );
    let fixture: Value = serde_json::from_str(
        &std::fs::read_to_string(workspace_root().join("tests/data/webhook/files/one-pv-per-driver.json"))
            .expect("the PVs"),
    )
    .expect("JSON");
    let volumes = fixture["volumes"].as_array().expect("volumes");

    let fake = OpenStackFake::start();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let cloud_conf = cloud_conf(&fake, dir.path());
    let vsphere_conf = dir.path().join("csi-vsphere.conf");
    std::fs::write(
        &vsphere_conf,
        "[VirtualCenter \"127.0.0.1\"]\nuser = \"u@vsphere.local\"\npassword = \"not-a-password\"\n",
    )
    .expect("csi-vsphere.conf written");
    let azure_conf = workspace_root().join("tests/data/azure/managed-identity.json");

    let mut values: Vec<Option<PathBuf>> = vec![None];
    let mut ci: Vec<PathBuf> = std::fs::read_dir(chart().join("ci"))
        .expect("ci/")
        .map(|e| e.expect("an entry").path())
        .collect();
    ci.sort();
    assert!(ci.len() >= 6, "ci/: {ci:?}");
    values.extend(ci.into_iter().map(Some));

    let mut problems = Vec::new();
    for values in &values {
        let what = values.as_deref().map_or("(defaults)".to_owned(), |v| {
            v.file_name().expect("a name").to_string_lossy().into_owned()
        });
        let chart = rendered(&render(values.as_deref()), &what);
        let rules_file = dir.path().join(format!("{what}-rules.yaml"));
        if let Some(rules) = &chart.rules {
            std::fs::write(&rules_file, rules).expect("rules written");
        }
        // `serve`'s arguments that `review` takes too (the topology and decision
        // flags), the files the chart mounts replaced by this machine's.
        let mut args: Vec<String> = chart
            .args
            .iter()
            .skip_while(|a| *a == "serve")
            .filter(|a| {
                let flag = a.split('=').next().expect("a flag");
                accepted.iter().any(|f| f == flag)
            })
            .map(|a| match a.split_once('=') {
                Some(("--rules", RULES_PATH)) => format!("--rules={}", rules_file.display()),
                Some(("--azure-config", AZURE_CONFIG_PATH)) => format!("--azure-config={}", azure_conf.display()),
                _ => a.clone(),
            })
            .collect();
        let enabled: Vec<&str> = LOOKUP_NAMES
            .iter()
            .map(|(flag, _)| *flag)
            .filter(|flag| args.iter().any(|a| a == flag))
            .collect();
        // The clouds the lookups would reach from the pod: the OpenStack fake; for the
        // others a closed loopback port (their files at the chart's mount paths are
        // the flags' defaults; here, this machine's).
        args.extend([
            format!("--openstack-cloud-config={}", cloud_conf.display()),
            format!("--vsphere-config={}", vsphere_conf.display()),
            format!("--vsphere-endpoint=https://{CLOSED}/"),
            format!("--azure-imds-endpoint=http://{CLOSED}/"),
            format!("--azure-arm-endpoint=http://{CLOSED}/"),
        ]);
        let mut env = chart.env.clone();
        env.extend(
            [
                ("AWS_EC2_METADATA_DISABLED", "true"),
                ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"),
                ("AWS_SECRET_ACCESS_KEY", "not-a-secret"),
                ("AWS_ENDPOINT_URL", &format!("http://{CLOSED}")),
                ("GCE_METADATA_HOST", CLOSED),
            ]
            .map(|(k, v)| (k.to_owned(), v.to_owned())),
        );
        if !env.iter().any(|(k, _)| k == "AWS_REGION") {
            env.push(("AWS_REGION".into(), "eu-west-1".into()));
        }
        eprintln!("{what}: review {args:?}, lookups {enabled:?}");
        for volume in volumes {
            let pv = &volume["pv"];
            let name = pv["metadata"]["name"].as_str().expect("a name");
            let lookup = volume["lookup"]
                .as_str()
                .filter(|flag| enabled.contains(flag))
                .map(|flag| LOOKUP_NAMES.iter().find(|(f, _)| *f == flag).expect("a lookup").1);
            let case = format!("{what}: {name}");
            let response = match review(&binary, &args, &env, pv) {
                Ok(response) => response,
                Err(stderr) => {
                    problems.push(format!("{case}: review stopped: {stderr}"));
                    continue;
                }
            };
            let source = response["auditAnnotations"]["source"].as_str().unwrap_or_default();
            let message = response["status"]["message"].as_str().unwrap_or_default();
            let labels = labels(&response);
            eprintln!(
                "{case}: allowed {}, source {source:?}, labels {labels}, {message}",
                response["allowed"]
            );
            if source.starts_with("rule") {
                problems.push(format!(
                    "{case}: topology from a rule the chart ships: {source}, {labels}"
                ));
                continue;
            }
            match lookup {
                // The OpenStack fake answers: the zone Cinder reports, never `nova`.
                Some(name @ "openstack-cinder") => {
                    let zone = &labels["topology.kubernetes.io/zone"];
                    if response["allowed"] != true || source != format!("lookup {name}") || zone != "nova-az1" {
                        problems.push(format!(
                            "{case}: expected lookup {name} and zone nova-az1; allowed {}, source {source:?}, labels {labels}, {message}",
                            response["allowed"]
                        ));
                    }
                }
                // No cloud there: refused (deny, the default), naming the lookup.
                Some(name) => {
                    if response["allowed"] != false || !message.contains(name) {
                        problems.push(format!(
                            "{case}: expected a refusal naming lookup {name}; allowed {}, {message}",
                            response["allowed"]
                        ));
                    }
                }
                // No lookup for it and no rule: no topology.
                None => {
                    if labels != Value::Null {
                        problems.push(format!("{case}: labelled {labels} ({source:?}) with no lookup on"));
                    }
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
