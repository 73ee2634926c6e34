//! The RBAC shipped in manifests/credential-provider-rbac/ grants the nodes
//! exactly the audiences of the configs in manifests/credential-provider/:
//! one file per config with `tokenAttributes`, of the same name, whose
//! ClusterRole allows `request-serviceaccounts-token-audience` on the
//! config's `serviceAccountTokenAudience` (the resource NodeRestriction
//! asks about) and nothing else, bound to the group `system:nodes`. The
//! cluster tier (node_token_audience.rs) shows the real apiserver issuing
//! the tokens with it and refusing them without it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Value, json};

const VERB: &str = "request-serviceaccounts-token-audience";

fn repo_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(name)
}

/// `*.yaml` of `dir` by file stem.
fn yaml_files(dir: &Path) -> BTreeMap<String, String> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .map(|p| {
            let stem = p.file_stem().expect("a file name").to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (stem, text)
        })
        .collect()
}

/// The `serviceAccountTokenAudience`s of a CredentialProviderConfig, in order.
fn audiences(config: &str) -> Vec<String> {
    let doc: Value = serde_yaml_ng::from_str(config).expect("a config's YAML");
    doc["providers"]
        .as_array()
        .expect("providers")
        .iter()
        .filter_map(|p| p["tokenAttributes"]["serviceAccountTokenAudience"].as_str())
        .map(str::to_string)
        .collect()
}

/// What is wrong with `rbac` as the grant of exactly `audiences`.
fn rbac_problems(rbac: &str, audiences: &[String]) -> Vec<String> {
    let docs: Vec<Value> = serde_yaml_ng::Deserializer::from_str(rbac)
        .map(|d| Value::deserialize(d).expect("an RBAC document's YAML"))
        .filter(|v| !v.is_null())
        .collect();
    let of_kind = |kind: &str| docs.iter().filter(|d| d["kind"] == kind).collect::<Vec<_>>();
    let (roles, bindings) = (of_kind("ClusterRole"), of_kind("ClusterRoleBinding"));
    if docs.len() != 2 || roles.len() != 1 || bindings.len() != 1 {
        return vec![format!(
            "want one ClusterRole and one ClusterRoleBinding, found kinds {:?}",
            docs.iter().map(|d| d["kind"].clone()).collect::<Vec<_>>()
        )];
    }
    let (role, binding) = (roles[0], bindings[0]);
    let mut problems = Vec::new();
    for doc in [role, binding] {
        if doc["apiVersion"] != "rbac.authorization.k8s.io/v1" {
            problems.push(format!("{}: apiVersion {}", doc["kind"], doc["apiVersion"]));
        }
    }
    let want_rules = json!([{"apiGroups": [""], "resources": audiences, "verbs": [VERB]}]);
    if role["rules"] != want_rules {
        problems.push(format!("ClusterRole rules {} instead of {want_rules}", role["rules"]));
    }
    let want_ref =
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role["metadata"]["name"]});
    if binding["roleRef"] != want_ref {
        problems.push(format!("roleRef {} instead of {want_ref}", binding["roleRef"]));
    }
    let want_subjects = json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"}]);
    if binding["subjects"] != want_subjects {
        problems.push(format!("subjects {} instead of {want_subjects}", binding["subjects"]));
    }
    problems
}

/// Each problem of the RBAC directory against the configs directory, naming
/// the files.
fn drift(configs: &Path, rbac: &Path) -> Vec<String> {
    let configs = yaml_files(configs);
    let mut rbac = yaml_files(rbac);
    let mut problems = Vec::new();
    for (name, config) in &configs {
        let audiences = audiences(config);
        match (audiences.is_empty(), rbac.remove(name)) {
            (true, None) => {}
            (true, Some(_)) => problems.push(format!(
                "credential-provider-rbac/{name}.yaml: {name}.yaml has no tokenAttributes"
            )),
            (false, None) => problems.push(format!(
                "{name}.yaml asks for tokens for {audiences:?}: no credential-provider-rbac/{name}.yaml grants them"
            )),
            (false, Some(text)) => problems.extend(rbac_problems(&text, &audiences).into_iter().map(|p| {
                format!("credential-provider-rbac/{name}.yaml (for {name}.yaml, audiences {audiences:?}): {p}")
            })),
        }
    }
    problems.extend(
        rbac.keys()
            .map(|name| format!("credential-provider-rbac/{name}.yaml: no {name}.yaml")),
    );
    problems
}

#[test]
fn shipped_rbac_grants_exactly_the_configs_audiences() {
    let configs = repo_dir("manifests/credential-provider");
    let rbac = repo_dir("manifests/credential-provider-rbac");
    assert_eq!(drift(&configs, &rbac), Vec::<String>::new());
    // The five KEP-4412 examples each have their grant.
    let granted: Vec<String> = yaml_files(&rbac).into_keys().collect();
    assert_eq!(granted, ["acr", "ecr", "gcp", "passthrough", "token-exchange"]);
}

/// The check above fails when a config's audience is edited without its
/// RBAC, when a grant is missing, and when one has more than the audience.
#[test]
fn drift_is_caught() {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let (configs, rbac) = (tmp.path().join("configs"), tmp.path().join("rbac"));
    for (from, to) in [
        ("manifests/credential-provider", &configs),
        ("manifests/credential-provider-rbac", &rbac),
    ] {
        std::fs::create_dir(to).expect("a copy directory");
        for (name, text) in yaml_files(&repo_dir(from)) {
            std::fs::write(to.join(format!("{name}.yaml")), text).expect("a copy");
        }
    }
    assert_eq!(drift(&configs, &rbac), Vec::<String>::new());

    let edit = |path: &Path, from: &str, to: &str| {
        let text = std::fs::read_to_string(path).expect("a copy");
        assert!(text.contains(from), "{} holds {from}", path.display());
        std::fs::write(path, text.replace(from, to)).expect("an edit");
    };
    edit(
        &configs.join("passthrough.yaml"),
        "serviceAccountTokenAudience: harbor.example.com",
        "serviceAccountTokenAudience: harbor.corp.test",
    );
    let problems = drift(&configs, &rbac);
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(
        problems[0].starts_with("credential-provider-rbac/passthrough.yaml (for passthrough.yaml, audiences [\"harbor.corp.test\"]): ClusterRole rules"),
        "{problems:#?}"
    );
    assert!(problems[0].contains("harbor.example.com"), "{problems:#?}");

    std::fs::remove_file(rbac.join("passthrough.yaml")).expect("remove");
    assert_eq!(
        drift(&configs, &rbac),
        [
            "passthrough.yaml asks for tokens for [\"harbor.corp.test\"]: no credential-provider-rbac/passthrough.yaml grants them"
        ]
    );

    edit(
        &rbac.join("ecr.yaml"),
        r#"resources: ["sts.amazonaws.com"]"#,
        r#"resources: ["sts.amazonaws.com", "*"]"#,
    );
    edit(
        &rbac.join("acr.yaml"),
        "name: system:nodes",
        "name: system:authenticated",
    );
    let problems = drift(&configs, &rbac);
    assert_eq!(problems.len(), 3, "{problems:#?}");
    assert!(
        problems
            .iter()
            .any(|p| p.starts_with("credential-provider-rbac/ecr.yaml") && p.contains("\"*\"")),
        "{problems:#?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.starts_with("credential-provider-rbac/acr.yaml") && p.contains("system:authenticated")),
        "{problems:#?}"
    );

    std::fs::write(rbac.join("static.yaml"), "").expect("a stray grant");
    assert!(
        drift(&configs, &rbac)
            .contains(&"credential-provider-rbac/static.yaml: static.yaml has no tokenAttributes".to_string())
    );
}
