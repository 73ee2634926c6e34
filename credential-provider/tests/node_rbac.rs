//! The RBAC shipped in manifests/credential-provider-rbac/ is what
//! `check-config --rbac` prints for the configs in manifests/credential-provider/:
//! one file per config with `tokenAttributes`, of the same name, its objects
//! byte for byte what the command in its header prints (the unit tests of
//! kubelet_config/rbac.rs say what that is: a ClusterRole allowing
//! `request-serviceaccounts-token-audience` on exactly the config's
//! audiences, bound to `system:nodes`). The cluster tier
//! (node_token_audience.rs) shows the real apiserver issuing the tokens with
//! it and refusing them without it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

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

/// The shipped file's name for the grant of `name`.yaml, and the command
/// its header says prints it.
fn grant_name(name: &str) -> String {
    format!("cloud-credential-provider:{name}:token-audience")
}

/// What `check-config --rbac --rbac-name NAME CONFIG` prints, or its error.
fn printed_grant(config: &Path, name: &str) -> Result<String, String> {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_cloud-credential-provider"))
        .args(["check-config", "--rbac", "--rbac-name", &grant_name(name)])
        .arg(config)
        .env_remove("CLOUD_CREDENTIAL_PROVIDER_RBAC_GROUP")
        .output()
        .expect("run cloud-credential-provider");
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).into_owned());
    }
    Ok(String::from_utf8(output.stdout).expect("UTF-8"))
}

/// What is wrong with `rbac` as what check-config --rbac prints for `config`
/// (the file's objects, after its comment header, byte for byte).
fn rbac_problems(rbac: &str, config: &Path, name: &str) -> Vec<String> {
    let (header, objects): (Vec<&str>, Vec<&str>) = rbac.split_inclusive('\n').partition(|l| l.starts_with('#'));
    let mut problems = Vec::new();
    let command = format!(
        "#   cloud-credential-provider check-config --rbac --rbac-name {} manifests/credential-provider/{name}.yaml\n",
        grant_name(name)
    );
    if !header.contains(&command.as_str()) {
        problems.push(format!(
            "the header does not give the command that prints it: {command:?}"
        ));
    }
    match printed_grant(config, name) {
        Ok(printed) if printed == objects.concat() => {}
        Ok(printed) => problems.push(format!(
            "its objects are not what check-config --rbac prints:\n{printed}"
        )),
        Err(error) => problems.push(format!("check-config --rbac fails: {error}")),
    }
    problems
}

/// Each problem of the RBAC directory against the configs directory, naming
/// the files.
fn drift(configs_dir: &Path, rbac: &Path) -> Vec<String> {
    let configs = yaml_files(configs_dir);
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
            (false, Some(text)) => problems.extend(
                rbac_problems(&text, &configs_dir.join(format!("{name}.yaml")), name)
                    .into_iter()
                    .map(|p| {
                        format!("credential-provider-rbac/{name}.yaml (for {name}.yaml, audiences {audiences:?}): {p}")
                    }),
            ),
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
        problems[0].starts_with("credential-provider-rbac/passthrough.yaml (for passthrough.yaml, audiences [\"harbor.corp.test\"]): its objects are not what check-config --rbac prints"),
        "{problems:#?}"
    );
    assert!(
        problems[0].contains("- harbor.corp.test\n"),
        "what it prints instead: {problems:#?}"
    );

    std::fs::remove_file(rbac.join("passthrough.yaml")).expect("remove");
    assert_eq!(
        drift(&configs, &rbac),
        [
            "passthrough.yaml asks for tokens for [\"harbor.corp.test\"]: no credential-provider-rbac/passthrough.yaml grants them"
        ]
    );

    edit(
        &rbac.join("ecr.yaml"),
        "  - sts.amazonaws.com\n",
        "  - sts.amazonaws.com\n  - '*'\n",
    );
    edit(
        &rbac.join("acr.yaml"),
        "name: system:nodes",
        "name: system:authenticated",
    );
    let problems = drift(&configs, &rbac);
    assert_eq!(problems.len(), 3, "{problems:#?}");
    for file in ["ecr", "acr"] {
        assert!(
            problems
                .iter()
                .any(|p| p.starts_with(&format!("credential-provider-rbac/{file}.yaml"))
                    && p.contains("not what check-config --rbac prints")),
            "{problems:#?}"
        );
    }

    std::fs::write(rbac.join("static.yaml"), "").expect("a stray grant");
    assert!(
        drift(&configs, &rbac)
            .contains(&"credential-provider-rbac/static.yaml: static.yaml has no tokenAttributes".to_string())
    );
}
