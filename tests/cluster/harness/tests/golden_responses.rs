//! The golden files of credential-provider/tests/protocol.rs
//! (tests/data/credential-provider/{request,response}-static-*.json) judged
//! by kubelet's own code, not by us: a plugin that prints a golden response
//! is registered with kubelet's RegisterCredentialProviderPlugins through
//! kubelet-credcheck, whose keyring decodes the answer with kubelet's codec
//! (strict: an unknown or duplicate field, or another apiVersion, drops the
//! whole answer) into k8s.io/kubelet/pkg/apis/credentialprovider/<version>
//! types, at the Kubernetes version pinned in tests/cluster/go.mod. The
//! credentials kubelet then returns must be those of the file, and the
//! request kubelet wrote must be the golden request (less its deliberate
//! unknown field). Altered copies of each response (an unknown field at the
//! top or in an auth entry, another apiVersion, a bad cacheKeyType) must be
//! dropped: they show that the check is strict and can fail.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use cluster_harness::{cluster_bin, json_lines, run_ok, workspace_root};
use serde_json::Value;

const VERSIONS: [&str; 3] = ["v1alpha1", "v1beta1", "v1"];
const IMAGE: &str = "registry.example.com/team-b/app";

fn golden(name: &str) -> PathBuf {
    workspace_root().join("tests/data/credential-provider").join(name)
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// A plugin `name` in `bin` that saves its stdin to `request` and prints `response`.
fn plugin(bin: &Path, name: &str, response: &Path, request: &Path) {
    std::fs::create_dir_all(bin).expect("bin dir");
    let script = bin.join(name);
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ncat > '{}'\ncat '{}'\n",
            request.display(),
            response.display()
        ),
    )
    .expect("write the plugin");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod the plugin");
}

/// kubelet's keyring answer for [`IMAGE`] with one provider `name` of
/// `version`: sorted (username, password) pairs, empty if kubelet dropped
/// the answer; and kubelet-credcheck's stderr.
fn kubelet_lookup(dir: &Path, name: &str, version: &str) -> (Vec<(String, String)>, String) {
    let config = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &config,
        format!(
            "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n\
             - name: {name}\n  matchImages: [\"registry.example.com\"]\n  defaultCacheDuration: 1m\n  \
             apiVersion: credentialprovider.kubelet.k8s.io/{version}\n"
        ),
    )
    .expect("write the config");
    let out = run_ok(
        Command::new(cluster_bin("kubelet-credcheck"))
            .arg("keyring")
            .arg("--config")
            .arg(&config)
            .arg("--bin-dir")
            .arg(dir.join("bin"))
            .arg(IMAGE),
    )
    .expect("kubelet-credcheck keyring");
    let mut lines = json_lines(&out).expect("JSON lines");
    let summary = lines.pop().expect("a summary line");
    assert_eq!(summary["summary"], true, "{summary}");
    assert_eq!(lines.len(), 1, "{lines:?}");
    let lookup = &lines[0];
    assert!(lookup["error"].is_null(), "{lookup}");
    let mut pairs: Vec<(String, String)> = lookup["auth"]
        .as_array()
        .map(|auth| {
            auth.iter()
                .map(|a| {
                    (
                        a["username"].as_str().expect("username").to_owned(),
                        a["password"].as_str().expect("password").to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    pairs.sort();
    (pairs, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The (username, password) pairs of a response's `auth`, sorted.
fn pairs_of(response: &Value) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = response["auth"]
        .as_object()
        .expect("auth")
        .values()
        .map(|e| {
            (
                e["username"].as_str().expect("username").to_owned(),
                e["password"].as_str().expect("password").to_owned(),
            )
        })
        .collect();
    pairs.sort();
    pairs
}

#[test]
fn kubelet_decodes_each_golden_response_strictly_and_sends_the_golden_request() {
    let tmp = tempfile::tempdir().expect("tempdir");
    for version in VERSIONS {
        let response_file = golden(&format!("response-static-{version}.json"));
        let response = read_json(&response_file);
        let want = pairs_of(&response);
        assert!(!want.is_empty(), "{version}: the golden response has credentials");
        let name = format!("golden-{version}");
        let request_seen = tmp.path().join(format!("{name}.request.json"));
        plugin(&tmp.path().join("bin"), &name, &response_file, &request_seen);
        let (got, stderr) = kubelet_lookup(tmp.path(), &name, version);
        assert_eq!(
            got, want,
            "{version}: kubelet's keyring\nkubelet-credcheck stderr:\n{stderr}"
        );

        // What kubelet wrote is the golden request, less the unknown field
        // the golden request carries on purpose (plugins must ignore it).
        let mut golden_request = read_json(&golden(&format!("request-static-{version}.json")));
        let extra = golden_request
            .as_object_mut()
            .expect("request object")
            .remove("someFutureField");
        assert!(extra.is_some(), "{version}: the golden request's unknown field");
        assert_eq!(read_json(&request_seen), golden_request, "{version}: kubelet's request");
    }
}

#[test]
fn kubelet_drops_altered_golden_responses() {
    let tmp = tempfile::tempdir().expect("tempdir");
    type Edit = fn(&mut Value, &str);
    let edits: [(&str, Edit); 5] = [
        ("unknown top-level field", |r, _| r["extra"] = Value::from(1)),
        ("unknown field in an auth entry", |r, _| {
            r["auth"]["registry.example.com"]["email"] = Value::from("robot@example.com");
        }),
        ("another apiVersion", |r, version| {
            let other = if version == "v1" { "v1beta1" } else { "v1" };
            r["apiVersion"] = Value::from(format!("credentialprovider.kubelet.k8s.io/{other}"));
        }),
        ("unknown cacheKeyType", |r, _| r["cacheKeyType"] = Value::from("Host")),
        ("cacheDuration not a Go duration", |r, _| {
            r["cacheDuration"] = Value::from("10 minutes");
        }),
    ];
    for version in VERSIONS {
        let response = read_json(&golden(&format!("response-static-{version}.json")));
        for (index, (what, edit)) in edits.iter().enumerate() {
            let mut altered = response.clone();
            edit(&mut altered, version);
            let file = tmp.path().join(format!("altered-{version}-{index}.json"));
            std::fs::write(&file, serde_json::to_vec(&altered).expect("json")).expect("write");
            let name = format!("altered-{version}-{index}");
            plugin(
                &tmp.path().join("bin"),
                &name,
                &file,
                &tmp.path().join(format!("{name}.request.json")),
            );
            let (got, stderr) = kubelet_lookup(tmp.path(), &name, version);
            assert!(
                got.is_empty(),
                "{version}, {what}: kubelet accepted {altered}\nstderr:\n{stderr}"
            );
        }
    }
}
