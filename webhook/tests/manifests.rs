//! The Kubernetes manifests under manifests/webhook/: every YAML document parses, the
//! fields that matter for availability and security are set, and the Deployment's
//! arguments are ones the binary accepts.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use clap::Parser as _;
use pv_topology_webhook::cli::{Cli, Command};
use serde::Deserialize as _;
use serde_json::Value;

mod manifests_support;
use manifests_support::*;

#[test]
fn every_yaml_file_parses_and_every_kustomization_lists_existing_files() {
    let mut files = Vec::new();
    yaml_files(&manifests_dir(), &mut files);
    assert!(files.len() >= 10, "{files:?}");
    for file in &files {
        for doc in documents(file) {
            assert!(
                doc["apiVersion"].is_string() && doc["kind"].is_string(),
                "{}",
                file.display()
            );
            if doc["kind"] == "Kustomization" {
                let dir = file.parent().unwrap();
                for resource in doc["resources"].as_array().unwrap() {
                    let path = dir.join(resource.as_str().unwrap());
                    assert!(path.exists(), "{}: {} is missing", file.display(), path.display());
                }
            }
        }
    }
    let listed: Vec<String> = documents(&manifests_dir().join("base/kustomization.yaml"))[0]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap().to_owned())
        .collect();
    for file in std::fs::read_dir(manifests_dir().join("base")).unwrap() {
        let name = file.unwrap().file_name().into_string().unwrap();
        assert!(
            name == "kustomization.yaml" || listed.contains(&name),
            "{name} is not in base/kustomization.yaml"
        );
    }
}

#[test]
fn the_deployment_is_highly_available_and_locked_down() {
    let objects = base();
    let deployment = &objects["Deployment/pv-topology-webhook"];
    let spec = &deployment["spec"];
    assert_eq!(spec["replicas"], 3);
    assert_eq!(spec["strategy"]["rollingUpdate"]["maxUnavailable"], 0);
    let pod = &spec["template"]["spec"];
    assert!(pod["priorityClassName"].is_string());
    assert!(objects.contains_key(&format!("PriorityClass/{}", pod["priorityClassName"].as_str().unwrap())));
    assert!(pod["affinity"]["podAntiAffinity"].is_object());
    assert_eq!(pod["automountServiceAccountToken"], false);
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
    // Secret files are root's unless the pod has an fsGroup: a mode without
    // "other" read bits (0440) is readable by the non-root user only through
    // the group that fsGroup gives them.
    for volume in pod["volumes"].as_array().unwrap() {
        // Kubernetes reads YAML 1.1: `0440` is octal (this parser keeps it as text).
        let mode = match &volume["secret"]["defaultMode"] {
            Value::Number(n) => n.as_u64().unwrap(),
            Value::String(text) => u64::from_str_radix(text, 8).unwrap(),
            _ => continue,
        };
        if mode & 0o004 == 0 {
            assert_eq!(
                pod["securityContext"]["fsGroup"], pod["securityContext"]["runAsGroup"],
                "volume {} (mode {mode:o}) is unreadable by the webhook's user without fsGroup",
                volume["name"]
            );
            assert_ne!(mode & 0o040, 0, "volume {}: no group read bit", volume["name"]);
        }
    }
    let container = &pod["containers"][0];
    let security = &container["securityContext"];
    assert_eq!(security["readOnlyRootFilesystem"], true);
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert_eq!(security["capabilities"]["drop"], serde_json::json!(["ALL"]));
    assert_eq!(security["seccompProfile"]["type"], "RuntimeDefault");
    for probe in ["readinessProbe", "livenessProbe"] {
        assert_eq!(container[probe]["httpGet"]["port"], "metrics", "{probe}");
    }
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");

    // The arguments parse, and the grace period covers preStop + delay + drain.
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let cli = Cli::try_parse_from(std::iter::once("pv-topology-webhook").chain(args.iter().copied()))
        .unwrap_or_else(|e| panic!("Deployment args: {e}"));
    let Command::Serve(serve) = cli.command else {
        panic!("the container does not run serve");
    };
    let pre_stop: Vec<&str> = container["lifecycle"]["preStop"]["exec"]["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(pre_stop[0], "/pv-topology-webhook");
    let cli = Cli::try_parse_from(&pre_stop).unwrap();
    let Command::Sleep(sleep) = cli.command else {
        panic!("preStop does not sleep");
    };
    let needed = sleep.duration + serve.server.shutdown_delay + serve.server.drain_timeout;
    let grace = Duration::from_secs(pod["terminationGracePeriodSeconds"].as_u64().unwrap());
    assert!(grace > needed, "terminationGracePeriodSeconds {grace:?} <= {needed:?}");
    assert!(
        serve.topology.lookup_timeout < Duration::from_secs(5),
        "below timeoutSeconds"
    );

    // Ports and mounts agree with the arguments.
    let port = |name: &str| {
        container["ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap()["containerPort"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(port("https"), u64::from(serve.server.listen.port()));
    assert_eq!(port("metrics"), u64::from(serve.server.metrics_listen.port()));
    let mounts: Vec<&str> = container["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["mountPath"].as_str().unwrap())
        .collect();
    assert!(serve.tls.tls_cert_file.starts_with(mounts[0]), "{mounts:?}");
    assert!(
        serve
            .topology
            .rules
            .iter()
            .all(|r| mounts.contains(&r.to_str().unwrap()))
    );
    let tls_volume = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "tls")
        .unwrap();
    assert_eq!(
        objects["Certificate/pv-topology-webhook-serving"]["spec"]["secretName"],
        tls_volume["secret"]["secretName"]
    );

    let pdb = &objects["PodDisruptionBudget/pv-topology-webhook"];
    assert_eq!(pdb["spec"]["minAvailable"], 2);
    assert_eq!(pdb["spec"]["selector"], spec["selector"]);
}

#[test]
fn the_webhook_configuration_is_scoped_and_bounded() {
    let objects = base();
    let config = &objects["MutatingWebhookConfiguration/pv-topology-webhook"];
    let webhook = &config["webhooks"][0];
    assert_eq!(webhook["admissionReviewVersions"], serde_json::json!(["v1"]));
    assert_eq!(webhook["sideEffects"], "None");
    assert_eq!(webhook["timeoutSeconds"], 5);
    assert!(["Fail", "Ignore"].contains(&webhook["failurePolicy"].as_str().unwrap()));
    let rule = &webhook["rules"][0];
    assert_eq!(rule["operations"], serde_json::json!(["CREATE"]));
    assert_eq!(rule["resources"], serde_json::json!(["persistentvolumes"]));
    let expression = webhook["matchConditions"][0]["expression"].as_str().unwrap();
    for source in [
        "csi",
        "awsElasticBlockStore",
        "gcePersistentDisk",
        "azureDisk",
        "cinder",
        "vsphereVolume",
    ] {
        assert!(
            expression.contains(&format!("has(object.spec.{source})")),
            "{expression}"
        );
    }
    assert!(!expression.contains("nfs"));
    let opt_out = &webhook["objectSelector"]["matchExpressions"][0];
    assert_eq!(opt_out["key"], "pv-topology-webhook.io/skip");
    assert_eq!(opt_out["operator"], "NotIn");
    assert_eq!(webhook["clientConfig"]["service"]["path"], "/mutate");
    let service = &webhook["clientConfig"]["service"];
    let svc = &objects[&format!("Service/{}", service["name"].as_str().unwrap())];
    assert_eq!(svc["metadata"]["namespace"], service["namespace"]);
    assert_eq!(svc["spec"]["ports"][0]["port"], service["port"]);
    // cert-manager injects the CA of the serving Certificate, whose names are the Service's.
    let inject = config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
        .as_str()
        .unwrap();
    let certificate = &objects["Certificate/pv-topology-webhook-serving"];
    assert_eq!(
        inject,
        format!(
            "{}/pv-topology-webhook-serving",
            certificate["metadata"]["namespace"].as_str().unwrap()
        )
    );
    let names = pv_topology_webhook::certs::service_names(
        service["name"].as_str().unwrap(),
        service["namespace"].as_str().unwrap(),
    );
    assert_eq!(certificate["spec"]["dnsNames"], serde_json::json!(names));
}

#[test]
fn the_base_rules_have_no_active_rule_and_their_commented_examples_load() {
    use pv_topology_webhook::rules::Rules;
    let objects = base();
    let text = objects["ConfigMap/pv-topology-webhook-rules"]["data"]["rules.yaml"]
        .as_str()
        .unwrap();
    // Rules answer before the lookups: no example may be active (issue 25).
    let rules = Rules::parse(Path::new("configmap rules.yaml"), text).unwrap();
    assert!(rules.rules().is_empty(), "{text}");
    // Uncommented, the examples are a valid rules file.
    let examples: Vec<&str> = text
        .lines()
        .skip_while(|l| *l != "# rules:")
        .map(|l| l.strip_prefix("# ").unwrap_or(l))
        .collect();
    let examples = Rules::parse(Path::new("configmap examples"), &examples.join("\n")).unwrap();
    assert_eq!(examples.rules().len(), 3, "{text}");
}

#[test]
fn the_single_replica_overlay_patches_what_it_should() {
    let overlay = documents(&manifests_dir().join("overlays/single-replica/kustomization.yaml"));
    let patches = overlay[0]["patches"].as_array().unwrap();
    let by_kind = |kind: &str| -> Vec<Value> {
        let patch = patches.iter().find(|p| p["target"]["kind"] == kind).unwrap();
        serde_yaml_ng::from_str(patch["patch"].as_str().unwrap()).unwrap()
    };
    // Apply the JSON patches to the base objects, as kustomize would.
    let objects = base();
    let apply = |key: &str, kind: &str| {
        let mut object = objects[key].clone();
        let patch: json_patch::Patch = serde_json::from_value(Value::Array(by_kind(kind))).unwrap();
        json_patch::patch(&mut object, &patch).unwrap();
        object
    };
    assert_eq!(
        apply("Deployment/pv-topology-webhook", "Deployment")["spec"]["replicas"],
        1
    );
    let pdb = apply("PodDisruptionBudget/pv-topology-webhook", "PodDisruptionBudget");
    assert_eq!(pdb["spec"]["maxUnavailable"], 1);
    assert!(pdb["spec"].get("minAvailable").is_none());
    let config = apply(
        "MutatingWebhookConfiguration/pv-topology-webhook",
        "MutatingWebhookConfiguration",
    );
    assert_eq!(config["webhooks"][0]["failurePolicy"], "Ignore");
}

/// The overlay's Deployment's pod, and its `serve` flags as the binary parses them.
fn overlay_pod(overlay: &str) -> (Value, Box<pv_topology_webhook::cli::ServeArgs>) {
    let deployment = patched_by(overlay, "Deployment/pv-topology-webhook");
    let pod = deployment["spec"]["template"].clone();
    let args: Vec<&str> = pod["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let cli = Cli::try_parse_from(std::iter::once("pv-topology-webhook").chain(args.iter().copied()))
        .unwrap_or_else(|e| panic!("{overlay} args: {e}"));
    let Command::Serve(serve) = cli.command else {
        panic!("{overlay}: not serve: {args:?}");
    };
    (pod, serve)
}

/// The config file a flag reads is in the Secret `secret` the pod mounts, readable by
/// the pod's group.
fn assert_config_mounted(overlay: &str, pod: &Value, config: &Path, volume: &str, secret: &str) {
    let mount = pod["spec"]["containers"][0]["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == volume)
        .unwrap_or_else(|| panic!("{overlay}: no mount of {volume}"));
    assert!(
        config.starts_with(mount["mountPath"].as_str().unwrap()),
        "{overlay}: {} is not under {}",
        config.display(),
        mount["mountPath"]
    );
    let volume = pod["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == volume)
        .unwrap_or_else(|| panic!("{overlay}: no volume {volume}"));
    assert_eq!(volume["secret"]["secretName"], secret, "{overlay}");
    assert_eq!(pod["spec"]["securityContext"]["fsGroup"], 65532, "{overlay}");
}

#[test]
fn the_gcp_overlay_turns_the_gce_lookup_on() {
    let account = patched_by("overlays/gcp", "ServiceAccount/pv-topology-webhook");
    assert!(
        account["metadata"]["annotations"]["iam.gke.io/gcp-service-account"]
            .as_str()
            .unwrap()
            .ends_with(".iam.gserviceaccount.com")
    );
    let (_, serve) = overlay_pod("overlays/gcp");
    assert!(serve.topology.gce.gce_lookup);
}

#[test]
fn the_azure_overlay_turns_the_disk_lookup_on() {
    let account = patched_by("overlays/azure", "ServiceAccount/pv-topology-webhook");
    assert!(
        account["metadata"]["annotations"]["azure.workload.identity/client-id"]
            .as_str()
            .is_some_and(|id| id.len() == 36)
    );
    let (pod, serve) = overlay_pod("overlays/azure");
    assert_eq!(pod["metadata"]["labels"]["azure.workload.identity/use"], "true");
    assert!(serve.topology.azure.azure_disk_lookup);
    let config = &serve.topology.azure.azure_config;
    assert_config_mounted(
        "overlays/azure",
        &pod,
        config,
        "azure-cloud-config",
        "azure-cloud-config",
    );
}

#[test]
fn the_openstack_overlay_turns_the_cinder_lookup_on() {
    let (pod, serve) = overlay_pod("overlays/openstack");
    let openstack = &serve.topology.openstack;
    assert!(openstack.openstack_cinder_lookup);
    assert!(!openstack.openstack_allow_insecure_tls);
    let config = &openstack.openstack_cloud_config;
    assert_config_mounted(
        "overlays/openstack",
        &pod,
        config,
        "openstack-cloud-config",
        "openstack-cloud-config",
    );
}

#[test]
fn the_vsphere_overlay_turns_the_vsphere_lookup_on() {
    let (pod, serve) = overlay_pod("overlays/vsphere");
    let vsphere = &serve.topology.vsphere;
    assert!(vsphere.vsphere_lookup);
    assert!(!vsphere.vsphere_allow_insecure_tls);
    let config = &vsphere.vsphere_config;
    assert_config_mounted(
        "overlays/vsphere",
        &pod,
        config,
        "vsphere-config",
        "vsphere-config-secret",
    );
}

/// kustomize renders the base and every overlay to the base's objects, each exactly as
/// the tests above see it (the base's YAML with the overlay's patches applied) but for
/// the `app.kubernetes.io/part-of` label the base's kustomization adds; the audit
/// kustomization renders too.
#[test]
fn kustomize_renders_what_these_tests_check() {
    let base = base();
    for dir in [
        "",
        "base",
        "overlays/single-replica",
        "overlays/aws",
        "overlays/gcp",
        "overlays/azure",
        "overlays/openstack",
        "overlays/vsphere",
    ] {
        let text = render(&manifests_dir().join(dir));
        let mut rendered = BTreeMap::new();
        for doc in serde_yaml_ng::Deserializer::from_str(&text) {
            let mut object = Value::deserialize(doc).unwrap_or_else(|e| panic!("{dir}: {e}"));
            let key = format!(
                "{}/{}",
                object["kind"].as_str().expect("kind"),
                object["metadata"]["name"].as_str().expect("name")
            );
            let labels = object["metadata"]["labels"]
                .as_object_mut()
                .unwrap_or_else(|| panic!("{dir}: {key} has no labels"));
            assert_eq!(
                labels.remove("app.kubernetes.io/part-of"),
                Some(Value::from("pv-topology-webhook")),
                "{dir}: {key}"
            );
            if labels.is_empty() && base[&key]["metadata"].get("labels").is_none() {
                object["metadata"].as_object_mut().expect("metadata").remove("labels");
            }
            assert!(rendered.insert(key.clone(), object).is_none(), "{dir}: {key} twice");
        }
        assert_eq!(
            rendered.keys().collect::<Vec<_>>(),
            base.keys().collect::<Vec<_>>(),
            "{dir}: the rendered objects are not the base's"
        );
        for (key, object) in &rendered {
            let mut expected = patched_by(dir, key);
            yaml_1_1_octals(&mut expected);
            assert_eq!(object, &expected, "{dir}: {key} renders otherwise");
        }
    }
    let audit = render(&manifests_dir().join("audit"));
    let kinds: Vec<String> = serde_yaml_ng::Deserializer::from_str(&audit)
        .map(|d| {
            Value::deserialize(d).expect("YAML")["kind"]
                .as_str()
                .expect("kind")
                .to_owned()
        })
        .collect();
    assert!(kinds.iter().any(|k| k == "ClusterRole"), "audit: {kinds:?}");
}

/// The text of a document at the workspace's root (`docs/webhook.md`, `README.md`).
fn workspace_text(path: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every ```sh block of `text`, without the indentation of its fence (a block in a
/// list item is copied without it).
fn shell_blocks(text: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let Some(indent) = line.strip_suffix("```sh").filter(|i| i.trim().is_empty()) else {
            continue;
        };
        let body: Vec<&str> = lines
            .by_ref()
            .take_while(|l| l.trim() != "```")
            .map(|l| l.strip_prefix(indent).unwrap_or(l.trim_start()))
            .collect();
        blocks.push(body.join("\n"));
    }
    blocks
}

/// The first ```sh block after the heading `heading` of docs/webhook.md.
fn docs_shell_block(heading: &str) -> String {
    let docs = workspace_text("docs/webhook.md");
    let section = docs
        .split_once(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("docs/webhook.md: no heading {heading:?}"))
        .1;
    let section = section.split("\n## ").next().expect("a section");
    shell_blocks(section)
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("{heading}: no ```sh block"))
}

/// The ```sh block of docs/webhook.md that holds `needle`.
fn docs_shell_block_holding(needle: &str) -> String {
    let blocks = shell_blocks(&workspace_text("docs/webhook.md"));
    blocks
        .into_iter()
        .find(|b| b.contains(needle))
        .unwrap_or_else(|| panic!("docs/webhook.md: no ```sh block holds {needle:?}"))
}

/// The shell commands of `block`: a line with its `\` continuations, or with the body of
/// its here-document.
fn shell_commands(block: &str) -> Vec<String> {
    let mut commands = Vec::new();
    let mut lines = block.lines();
    while let Some(line) = lines.next() {
        let mut command = line.to_owned();
        while command.ends_with('\\') {
            command.push('\n');
            command.push_str(lines.next().expect("a continued line"));
        }
        if let Some((_, rest)) = command.split_once("<<") {
            let terminator = rest.split_whitespace().next().expect("a here-document word");
            let terminator = terminator.trim_matches(['\'', '"']).to_owned();
            for body in lines.by_ref() {
                command.push('\n');
                command.push_str(body);
                if body == terminator {
                    break;
                }
            }
        }
        if !command.trim().is_empty() {
            commands.push(command);
        }
    }
    commands
}

/// Where the user of the documented installs pushed the image (`export REGISTRY=…`), and
/// the image every documented kustomize install must then run (issue 25, item 4).
const USER_REGISTRY: &str = "127.0.0.1:5000";
const USER_IMAGE: &str = "127.0.0.1:5000/pv-topology-webhook:0.1.0";
/// The registry of the image the shipped manifests name: none serves it.
const PLACEHOLDER_REGISTRY: &str = "registry.example.invalid";

/// A documented block, run: its directory and what its `kubectl` commands are.
struct DocumentedRun {
    dir: tempfile::TempDir,
    kubectl: Vec<String>,
}

impl DocumentedRun {
    /// The DIR of each `kubectl apply -k DIR`, in this run's directory.
    fn applied(&self) -> Vec<std::path::PathBuf> {
        self.kubectl
            .iter()
            .filter_map(|c| c.strip_prefix("kubectl apply -k "))
            .map(|rest| {
                self.dir
                    .path()
                    .join(rest.split_whitespace().next().expect("a directory"))
            })
            .collect()
    }
}

/// `block`'s commands as printed, run by bash (`set -eu`) in a new directory beside
/// `manifests/` (a checkout's root) with `REGISTRY` set to `registry` (or unset) and the
/// built binary on the PATH: all but the `kubectl` ones, which need a cluster (each
/// returned, one line; `kubectl apply -k DIR` is then DIR rendered by real kustomize).
/// Err: bash's stderr.
fn run_documented(block: &str, registry: Option<&str>) -> Result<DocumentedRun, String> {
    let (kubectl, shell): (Vec<String>, Vec<String>) = shell_commands(block)
        .into_iter()
        .filter(|c| !c.trim_start().starts_with('#'))
        .partition(|c| c.starts_with("kubectl "));
    let kubectl = kubectl
        .iter()
        .map(|c| {
            let command = c.split_once(" #").map_or(c.as_str(), |(command, _comment)| command);
            command
                .replace("\\\n", " ")
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::os::unix::fs::symlink(manifests_dir().join(".."), dir.path().join("manifests")).expect("a symlink");
    let bin = Path::new(env!("CARGO_BIN_EXE_pv-topology-webhook"));
    let path = format!(
        "{}:{}",
        bin.parent().expect("the binary's directory").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let script = format!("set -eu\n{}\n", shell.join("\n"));
    let mut command = std::process::Command::new("bash");
    command.arg("-c").arg(&script).current_dir(dir.path()).env("PATH", path);
    match registry {
        Some(registry) => command.env("REGISTRY", registry),
        None => command.env_remove("REGISTRY"),
    };
    let run = command.output().expect("bash runs");
    if !run.status.success() {
        return Err(String::from_utf8_lossy(&run.stderr).into_owned());
    }
    Ok(DocumentedRun { dir, kubectl })
}

/// The image of every container of every pod template (Deployments, Jobs) in a
/// kustomize render, by `Kind/name`.
fn pod_images(rendered: &str) -> Vec<(String, String)> {
    let mut images = Vec::new();
    for doc in serde_yaml_ng::Deserializer::from_str(rendered) {
        let object = Value::deserialize(doc).expect("rendered YAML");
        let key = format!(
            "{}/{}",
            object["kind"].as_str().expect("kind"),
            object["metadata"]["name"].as_str().expect("name")
        );
        let pod = &object["spec"]["template"]["spec"];
        for list in ["initContainers", "containers"] {
            for container in pod[list].as_array().into_iter().flatten() {
                let image = container["image"].as_str().unwrap_or_default().to_owned();
                images.push((key.clone(), image));
            }
        }
    }
    images
}

/// Every documented kustomize install (docs/webhook.md: with cert-manager, without it,
/// the audit Job), run as printed with `REGISTRY` exported, runs the image pushed there,
/// never the manifests' placeholder; with the overlays the docs offer instead of
/// `../manifests/webhook` too; and with `REGISTRY` unset the here-document stops,
/// naming it, instead of writing an image without a registry.
#[test]
fn every_documented_kustomize_install_runs_the_users_image() {
    let blocks: [fn() -> String; 3] = [
        || docs_shell_block("## Install with cert-manager (default)"),
        || docs_shell_block("## Install without cert-manager"),
        || docs_shell_block_holding("manifests/webhook/audit/job"),
    ];
    for block in blocks {
        let block = &block();
        let run = run_documented(block, Some(USER_REGISTRY)).unwrap_or_else(|e| panic!("{block}\n: {e}"));
        let applied = run.applied();
        assert!(!applied.is_empty(), "{block}\n: no kubectl apply -k");
        let mut images = Vec::new();
        for dir in &applied {
            let rendered = render(dir);
            assert!(
                !rendered.contains(PLACEHOLDER_REGISTRY),
                "{block}\n: {} renders the placeholder image:\n{rendered}",
                dir.display()
            );
            images.extend(pod_images(&rendered));
        }
        assert!(!images.is_empty(), "{block}\n: runs no pod");
        for (key, image) in &images {
            assert_eq!(image, USER_IMAGE, "{block}\n: {key}");
        }
        // The directories the docs offer in place of the base.
        let kustomization = applied[0].join("kustomization.yaml");
        let text = std::fs::read_to_string(&kustomization).expect("the documented kustomization");
        if text.contains("  - ../manifests/webhook\n") || text.contains("  - ../manifests/webhook ") {
            for overlay in ["single-replica", "aws", "gcp", "azure", "openstack", "vsphere"] {
                let other = format!("  - ../manifests/webhook/overlays/{overlay}");
                let rewritten = text.replacen("  - ../manifests/webhook", &other, 1);
                std::fs::write(&kustomization, &rewritten).expect("rewrite the kustomization");
                let images = pod_images(&render(&applied[0]));
                assert!(!images.is_empty(), "{overlay}: runs no pod");
                for (key, image) in &images {
                    assert_eq!(image, USER_IMAGE, "{block}\n with {overlay}: {key}");
                }
            }
        }
        let unset = run_documented(block, None);
        let error = unset
            .err()
            .unwrap_or_else(|| panic!("{block}\n: runs with REGISTRY unset"));
        assert!(
            error.contains("REGISTRY: set REGISTRY to where you pushed the image"),
            "{block}\n: with REGISTRY unset: {error}"
        );
    }
}

/// No documented `kubectl apply -k` (docs/webhook.md, README.md, in a block or in the
/// text) applies a shipped directory that runs a pod: such a directory names the
/// placeholder image, and with `failurePolicy: Fail` its ImagePullBackOff refuses every
/// PV create. The shipped directories without pods (the audit's RBAC) may be applied.
#[test]
fn no_documented_kubectl_apply_deploys_the_placeholder_image() {
    let root = manifests_dir().join("../..");
    let mut checked = Vec::new();
    for doc in ["docs/webhook.md", "README.md"] {
        let text = workspace_text(doc);
        for (_, rest) in text
            .match_indices("kubectl apply -k ")
            .map(|(i, _)| text.split_at(i + 17))
        {
            let dir = rest
                .split(|c: char| c.is_whitespace() || c == '`' || c == ')' || c == ',')
                .next()
                .expect("a word");
            if !dir.starts_with("manifests/") {
                continue;
            }
            let images = pod_images(&render(&root.join(dir)));
            assert!(
                images.is_empty(),
                "{doc}: `kubectl apply -k {dir}` runs the placeholder image (set the image in a \
                 kustomization of the user's own, as Install with cert-manager does): {images:?}"
            );
            checked.push(dir.to_owned());
        }
    }
    assert!(checked.iter().any(|d| d == "manifests/webhook/audit"), "{checked:?}");
}

/// "Install without cert-manager" as docs/webhook.md prints it (issue 25, item 3): its
/// commands run in a directory beside `manifests/` (a checkout's root), all but the
/// `kubectl` ones, which need a cluster (the cluster tier's validation.rs applies the
/// component's render to a real apiserver); `kubectl apply -k DIR` is then the render
/// of DIR with real kustomize. Both configurations get the caBundle `certs` printed, no
/// cert-manager object or annotation is left, nothing else differs from the base, and
/// the Deployment mounts the Secret the documented `kubectl create secret` makes.
#[test]
fn the_no_cert_manager_install_sets_the_ca_bundle_of_both_configurations() {
    let block = docs_shell_block("## Install without cert-manager");
    let run = run_documented(&block, Some(USER_REGISTRY)).unwrap_or_else(|e| panic!("{block}\n: {e}"));
    assert_eq!(
        run.kubectl,
        [
            "kubectl create namespace pv-topology-webhook",
            "kubectl -n pv-topology-webhook create secret tls pv-topology-webhook-tls \
             --cert=webhook-certs/tls.crt --key=webhook-certs/tls.key",
            "kubectl apply -k webhook-install",
        ],
        "the documented kubectl commands"
    );
    let dir = &run.dir;
    for file in ["webhook-certs/tls.crt", "webhook-certs/tls.key"] {
        assert!(dir.path().join(file).is_file(), "{file}: the Secret's file");
    }
    let ca_pem = std::fs::read(dir.path().join("webhook-certs/ca.crt")).expect("ca.crt");
    let bundle = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(&ca_pem)
    };
    let printed = std::fs::read_to_string(dir.path().join("ca-bundle.txt")).expect("ca-bundle.txt");
    assert_eq!(printed.trim(), bundle, "ca-bundle.txt is what certs printed");

    let parse = |text: &str| -> BTreeMap<String, Value> {
        serde_yaml_ng::Deserializer::from_str(text)
            .map(|doc| {
                let object = Value::deserialize(doc).expect("rendered YAML");
                let key = format!(
                    "{}/{}",
                    object["kind"].as_str().expect("kind"),
                    object["metadata"]["name"].as_str().expect("name")
                );
                (key, object)
            })
            .collect()
    };
    let install = dir.path().join("webhook-install");
    let rendered = parse(&render(&install));
    let mut expected = parse(&render(&manifests_dir()));
    expected.retain(|_, object| {
        let api_version = object["apiVersion"].as_str().expect("apiVersion");
        !api_version.starts_with("cert-manager.io/")
    });
    // The image the user pushed, in place of the base's placeholder.
    expected
        .get_mut("Deployment/pv-topology-webhook")
        .expect("the Deployment")["spec"]["template"]["spec"]["containers"][0]["image"] = Value::from(USER_IMAGE);
    for kind in ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"] {
        let key = format!("{kind}/pv-topology-webhook");
        let config = expected.get_mut(&key).expect("the base's configuration");
        let annotations = config["metadata"]["annotations"].as_object_mut().expect("annotations");
        assert!(annotations.remove("cert-manager.io/inject-ca-from").is_some(), "{key}");
        if annotations.is_empty() {
            config["metadata"]
                .as_object_mut()
                .expect("metadata")
                .remove("annotations");
        }
        for webhook in config["webhooks"].as_array_mut().expect("webhooks") {
            webhook["clientConfig"]["caBundle"] = Value::from(bundle.clone());
        }
        assert!(
            rendered[&key]["webhooks"]
                .as_array()
                .expect("webhooks")
                .iter()
                .all(|w| w["clientConfig"]["caBundle"] == bundle),
            "{key}: every webhook has the caBundle"
        );
    }
    assert_eq!(
        rendered.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>(),
        "the base without cert-manager's objects (and no ConfigMap of the caBundle)"
    );
    for (key, object) in &rendered {
        assert_eq!(object, &expected[key], "{key}: only the caBundle and annotation differ");
    }
    let volumes = &rendered["Deployment/pv-topology-webhook"]["spec"]["template"]["spec"]["volumes"];
    assert!(
        volumes
            .as_array()
            .expect("volumes")
            .iter()
            .any(|v| v["secret"]["secretName"] == "pv-topology-webhook-tls"),
        "the Deployment mounts the Secret `kubectl create secret tls` made: {volumes}"
    );

    // The same over an overlay, as the kustomization's comment offers.
    let kustomization = install.join("kustomization.yaml");
    let text = std::fs::read_to_string(&kustomization).expect("the kustomization");
    assert!(text.contains("  - ../manifests/webhook\n"), "{text}");
    std::fs::write(
        &kustomization,
        text.replace(
            "  - ../manifests/webhook\n",
            "  - ../manifests/webhook/overlays/single-replica\n",
        ),
    )
    .expect("rewrite the kustomization");
    let rendered = parse(&render(&install));
    let config = &rendered["ValidatingWebhookConfiguration/pv-topology-webhook"];
    assert_eq!(config["webhooks"][0]["clientConfig"]["caBundle"], bundle);
    assert_eq!(
        rendered["MutatingWebhookConfiguration/pv-topology-webhook"]["webhooks"][0]["failurePolicy"],
        "Ignore"
    );
    assert!(rendered.values().all(|o| {
        !o["apiVersion"]
            .as_str()
            .expect("apiVersion")
            .starts_with("cert-manager.io/")
    }));
}
