//! Every object under manifests/ whose kind the apiserver serves passes a
//! server-side dry-run create. Directories with a kustomization are rendered
//! first (kustomize-render: the library `kubectl kustomize` uses); other
//! YAML/JSON files are read as they are. Kinds the bare apiserver does not
//! serve (kubelet and kubeadm configs, cert-manager, Kustomization) are
//! skipped with a note. The files are found at run time.

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
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
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

/// The YAML documents of `text` that look like API objects.
fn objects(text: &str) -> Vec<serde_json::Value> {
    serde_yaml_ng::Deserializer::from_str(text)
        .filter_map(|doc| serde_json::Value::deserialize(doc).ok())
        .filter(|v| v.get("apiVersion").is_some() && v.get("kind").is_some())
        .collect()
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
        if namespaces.get_opt(&ns).await.unwrap().is_none() {
            let obj = serde_json::from_value(serde_json::json!({"metadata": {"name": ns}})).unwrap();
            namespaces.create(&PostParams::default(), &obj).await.unwrap();
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
    for dir in &kustomizations {
        let out = run_ok(Command::new(cluster_bin("kustomize-render")).arg(dir)).unwrap();
        let rel = dir.strip_prefix(workspace_root()).unwrap().display().to_string();
        for o in objects(&String::from_utf8_lossy(&out.stdout)) {
            objs.push((format!("{rel}/ (kustomize)"), o));
        }
    }
    for file in &files {
        let rel = file.strip_prefix(workspace_root()).unwrap().display().to_string();
        for o in objects(&std::fs::read_to_string(file).unwrap()) {
            objs.push((rel.clone(), o));
        }
    }

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
            skipped.push(what);
            continue;
        };
        let api: Api<DynamicObject> = match caps.scope {
            Scope::Namespaced => {
                let ns = obj["metadata"]["namespace"].as_str().unwrap_or("default");
                Api::namespaced_with(client.clone(), ns, &resource)
            }
            Scope::Cluster => Api::all_with(client.clone(), &resource),
        };
        let object: DynamicObject = serde_json::from_value(obj.clone()).unwrap();
        match api.create(&dry_run, &object).await {
            Ok(_) => passed.push(what),
            Err(e) => failed.push(format!("{what}: {e}")),
        }
    }
    for s in &skipped {
        eprintln!("skipped (kind not served by a bare kube-apiserver): {s}");
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
}
