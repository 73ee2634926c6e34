//! Every object under manifests/ whose kind the apiserver serves passes a
//! server-side dry-run create. Directories with a kustomization are rendered
//! first (kustomize-render: the library `kubectl kustomize` uses); other
//! YAML/JSON files are read as they are. A document that does not parse, or
//! that is not an API object (no apiVersion or kind), fails the test with its
//! file. Kinds the bare apiserver does not serve are skipped only if
//! `NOT_SERVED` lists them (kubelet and kubeadm configs, cert-manager); any
//! other kind it does not serve fails the test with its file and kind. The
//! files are found at run time.

use std::path::{Path, PathBuf};
use std::process::Command;

use cluster_harness::{TestCluster, cluster_bin, run_ok, workspace_root};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DynamicObject, GroupVersionKind, PostParams};
use kube::discovery::{Discovery, Scope};
use serde::Deserialize;

const KUSTOMIZATION_FILES: [&str; 3] = ["kustomization.yaml", "kustomization.yml", "Kustomization"];

fn is_kustomization_dir(dir: &Path) -> bool {
    KUSTOMIZATION_FILES.iter().any(|f| dir.join(f).is_file())
}

fn walk(dir: &Path, files: &mut Vec<PathBuf>, kustomizations: &mut Vec<PathBuf>, in_kustomization: bool) {
    let here = in_kustomization || is_kustomization_dir(dir);
    if is_kustomization_dir(dir) {
        kustomizations.push(dir.to_path_buf());
    }
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("read manifests/")
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            walk(&path, files, kustomizations, here);
        } else if !here
            && path
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| ["yaml", "yml", "json"].contains(&e))
        {
            files.push(path);
        }
    }
}

/// Kinds that manifests/ holds and a bare kube-apiserver does not serve:
/// (apiVersion, kind, why). Only these are skipped.
const NOT_SERVED: [(&str, &str, &str); 4] = [
    ("cert-manager.io/v1", "Issuer", "cert-manager's CRD"),
    ("cert-manager.io/v1", "Certificate", "cert-manager's CRD"),
    (
        "kubelet.config.k8s.io/v1",
        "CredentialProviderConfig",
        "a file kubelet reads (differential_config.rs checks them)",
    ),
    ("kubeadm.k8s.io/v1beta4", "JoinConfiguration", "a file kubeadm reads"),
];

/// The YAML documents of `text` (from `source`), each an API object; an
/// empty document (a trailing `---`) is left out. A document that does not
/// parse, or is not an object with apiVersion and kind, is an error naming
/// `source` and the document's number.
fn objects(source: &str, text: &str) -> Result<Vec<serde_json::Value>, String> {
    let mut objects = Vec::new();
    for (n, doc) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let value = serde_json::Value::deserialize(doc)
            .map_err(|e| format!("{source}: document {}: does not parse: {e}", n + 1))?;
        if value.is_null() {
            continue;
        }
        if !(value["apiVersion"].is_string() && value["kind"].is_string()) {
            return Err(format!(
                "{source}: document {}: not an API object (no apiVersion or kind): {}",
                n + 1,
                serde_json::to_string(&value)
                    .unwrap_or_default()
                    .chars()
                    .take(200)
                    .collect::<String>()
            ));
        }
        objects.push(value);
    }
    Ok(objects)
}

/// Creates (for real) the namespaces that objects name and that are missing.
async fn create_namespaces(client: &kube::Client, objs: &[(String, serde_json::Value)]) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut wanted: Vec<String> = objs
        .iter()
        .filter_map(|(_, o)| o["metadata"]["namespace"].as_str().map(str::to_string))
        .collect();
    wanted.sort();
    wanted.dedup();
    for ns in wanted {
        if namespaces.get_opt(&ns).await.expect("get namespace").is_none() {
            let obj = serde_json::from_value(serde_json::json!({"metadata": {"name": ns}})).expect("namespace");
            namespaces
                .create(&PostParams::default(), &obj)
                .await
                .expect("create namespace");
        }
    }
}

#[tokio::test]
async fn manifests_pass_server_side_dry_run() {
    let root = workspace_root().join("manifests");
    let (mut files, mut kustomizations) = (Vec::new(), Vec::new());
    walk(&root, &mut files, &mut kustomizations, false);

    // (source, object)
    let mut objs: Vec<(String, serde_json::Value)> = Vec::new();
    let mut unreadable = Vec::new();
    for dir in &kustomizations {
        // A Component is not built alone: it patches the kustomization that lists it
        // (validation.rs applies components/no-cert-manager so).
        let text = KUSTOMIZATION_FILES
            .iter()
            .find_map(|f| std::fs::read_to_string(dir.join(f)).ok());
        if text.is_some_and(|text| text.lines().any(|l| l.trim() == "kind: Component")) {
            continue;
        }
        let out = run_ok(Command::new(cluster_bin("kustomize-render")).arg(dir)).expect("kustomize-render");
        let rel = dir
            .strip_prefix(workspace_root())
            .expect("under the workspace")
            .display();
        let source = format!("{rel}/ (kustomize)");
        match objects(&source, &String::from_utf8_lossy(&out.stdout)) {
            Ok(list) => objs.extend(list.into_iter().map(|o| (source.clone(), o))),
            Err(e) => unreadable.push(e),
        }
    }
    for file in &files {
        let rel = file
            .strip_prefix(workspace_root())
            .expect("under the workspace")
            .display()
            .to_string();
        let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{rel}: {e}"));
        match objects(&rel, &text) {
            Ok(list) => objs.extend(list.into_iter().map(|o| (rel.clone(), o))),
            Err(e) => unreadable.push(e),
        }
    }
    assert!(
        unreadable.is_empty(),
        "manifests that do not read as API objects:\n{}",
        unreadable.join("\n")
    );

    let cluster = TestCluster::start().await;
    let client = cluster.client();
    let discovery = Discovery::new(client.clone()).run().await.expect("discovery");

    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let (mut passed, mut skipped, mut failed) = (Vec::new(), Vec::new(), Vec::new());
    let mut namespaces_created = false;
    // Namespace objects first, while their namespaces do not exist yet;
    // then the namespaces the other objects live in are created (a dry-run
    // in a missing namespace fails), then everything else.
    let (ns_objs, other_objs): (Vec<_>, Vec<_>) = objs
        .iter()
        .partition(|(_, o)| o["apiVersion"] == "v1" && o["kind"] == "Namespace");
    for (pass, (source, obj)) in ns_objs.iter().map(|o| (0, o)).chain(other_objs.iter().map(|o| (1, o))) {
        if pass == 1 && !namespaces_created {
            create_namespaces(&client, &objs).await;
            namespaces_created = true;
        }
        let api_version = obj["apiVersion"].as_str().unwrap_or_default();
        let kind = obj["kind"].as_str().unwrap_or_default();
        let name = obj["metadata"]["name"].as_str().unwrap_or("<no name>");
        let what = format!("{source}: {kind} {name} ({api_version})");
        let (group, version) = match api_version.rsplit_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let Some((resource, caps)) = discovery.resolve_gvk(&gvk) else {
            match NOT_SERVED.iter().find(|(v, k, _)| *v == api_version && *k == kind) {
                Some((_, _, why)) => skipped.push(format!("{what}: {why}")),
                None => failed.push(format!(
                    "{what}: kind not served by the apiserver and not in NOT_SERVED (a typo'd apiVersion or kind?)"
                )),
            }
            continue;
        };
        let api: Api<DynamicObject> = match caps.scope {
            Scope::Namespaced => {
                let ns = obj["metadata"]["namespace"].as_str().unwrap_or("default");
                Api::namespaced_with(client.clone(), ns, &resource)
            }
            Scope::Cluster => Api::all_with(client.clone(), &resource),
        };
        let object: DynamicObject = serde_json::from_value(obj.clone()).expect("an API object");
        match api.create(&dry_run, &object).await {
            Ok(_) => passed.push(what),
            Err(e) => failed.push(format!("{what}: {e}")),
        }
    }
    for s in &skipped {
        eprintln!("skipped (kind in NOT_SERVED): {s}");
    }
    for p in &passed {
        eprintln!("dry-run ok: {p}");
    }
    eprintln!(
        "manifests: {} objects from {} files and {} kustomizations: {} passed, {} skipped, {} failed",
        objs.len(),
        files.len(),
        kustomizations.len(),
        passed.len(),
        skipped.len(),
        failed.len()
    );
    assert!(failed.is_empty(), "server-side dry-run failed:\n{}", failed.join("\n"));
    assert!(!passed.is_empty(), "no manifest had a kind the apiserver serves");
    // Every entry of NOT_SERVED is met (a stale one would hide nothing, but
    // says the list no longer describes manifests/).
    for (version, kind, _) in NOT_SERVED {
        assert!(
            objs.iter()
                .any(|(_, o)| o["apiVersion"] == version && o["kind"] == kind),
            "NOT_SERVED lists {kind} ({version}), which no manifest holds any more: remove it"
        );
    }
}
