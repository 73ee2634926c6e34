//! Reading and rendering manifests/webhook/ for the manifest tests (tests/manifests.rs,
//! tests/manifests_validation.rs).
#![allow(dead_code)] // each test file uses a different subset

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize as _;
use serde_json::Value;

pub fn manifests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../manifests/webhook")
}

pub fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            yaml_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(path);
        }
    }
    out.sort();
}

pub fn documents(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .filter(|v| !v.is_null())
        .collect()
}

/// Every object of the base, by `Kind/name`.
pub fn base() -> BTreeMap<String, Value> {
    let mut objects = BTreeMap::new();
    let mut files = Vec::new();
    yaml_files(&manifests_dir().join("base"), &mut files);
    for file in files {
        for doc in documents(&file) {
            if doc["kind"] == "Kustomization" {
                continue;
            }
            let key = format!(
                "{}/{}",
                doc["kind"].as_str().unwrap(),
                doc["metadata"]["name"].as_str().unwrap()
            );
            assert!(objects.insert(key.clone(), doc).is_none(), "{key} twice");
        }
    }
    objects
}

/// The base object `key` (`Kind/name`) with the overlay's JSON patches for its kind
/// applied, as kustomize applies them.
pub fn patched_by(overlay: &str, key: &str) -> Value {
    let kustomization = documents(&manifests_dir().join(overlay).join("kustomization.yaml"));
    let kind = key.split('/').next().unwrap();
    let mut object = base()[key].clone();
    for patch in kustomization[0]["patches"].as_array().into_iter().flatten() {
        if patch["target"]["kind"] == kind {
            let ops: Value = serde_yaml_ng::from_str(patch["patch"].as_str().unwrap()).unwrap();
            json_patch::patch(&mut object, &serde_json::from_value::<json_patch::Patch>(ops).unwrap()).unwrap();
        }
    }
    object
}

/// A kustomize that renders `dir`: `kubectl kustomize` (`$KUBECTL`, else `kubectl` on
/// the PATH), else the cluster tier's `kustomize-render` (the kustomize library kubectl
/// embeds, built by tests/cluster/build.sh into `$CLUSTER_BIN_DIR` or
/// .cache/cluster-bin/<version>/). Neither
/// is a failure, not a skip: the overlay tests read the patches themselves, and
/// only a real render shows that kustomize reads them the same way.
pub fn render(dir: &Path) -> String {
    let kubectl = std::env::var_os("KUBECTL").unwrap_or_else(|| "kubectl".into());
    let mut tried = Vec::new();
    let mut commands = vec![{
        let mut command = std::process::Command::new(&kubectl);
        command.arg("kustomize").arg(dir);
        command
    }];
    // As the cluster harness finds its binaries: $CLUSTER_BIN_DIR, else any version built.
    let bin_dirs: Vec<PathBuf> = match std::env::var_os("CLUSTER_BIN_DIR") {
        Some(dir) => vec![dir.into()],
        None => std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.cache/cluster-bin"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|version| version.path())
            .collect(),
    };
    for bin_dir in bin_dirs {
        let mut command = std::process::Command::new(bin_dir.join("kustomize-render"));
        command.arg(dir);
        commands.push(command);
    }
    for mut command in commands {
        match command.output() {
            Ok(output) => {
                assert!(
                    output.status.success(),
                    "{command:?}: {}",
                    String::from_utf8_lossy(&output.stderr)
                );
                return String::from_utf8(output.stdout).expect("kustomize prints UTF-8");
            }
            Err(error) => tried.push(format!("{command:?}: {error}")),
        }
    }
    panic!(
        "no kustomize to render {} with ({}): install kubectl (or set KUBECTL to it), or build \
         the cluster tier's kustomize-render with `bash tests/cluster/build.sh kustomize-render`",
        dir.display(),
        tried.join("; ")
    );
}

/// Kubernetes (and kustomize) read YAML 1.1, where `0440` is octal; serde_yaml_ng keeps
/// it as text: the numbers kustomize gives for such strings (the Secrets' `defaultMode`).
pub fn yaml_1_1_octals(value: &mut Value) {
    match value {
        Value::String(text)
            if text.len() > 1 && text.starts_with('0') && text.bytes().all(|b| (b'0'..=b'7').contains(&b)) =>
        {
            *value = Value::from(u64::from_str_radix(text, 8).expect("octal digits"));
        }
        Value::Array(items) => items.iter_mut().for_each(yaml_1_1_octals),
        Value::Object(fields) => fields.values_mut().for_each(yaml_1_1_octals),
        _ => {}
    }
}
