//! What `explain` says kubelet records and verifies (KEP-2535), against
//! kubelet v1.37.2's own code (`kubelet-credcheck`, built from the module
//! proxy):
//! - the record scope: kubelet's keyring (pkg/credentialprovider/plugin)
//!   runs our binary for three entries, two with `tokenAttributes`
//!   (`requireServiceAccount` true and false) and one without, for a pod
//!   with a service account and for one without; the source kubelet tracks
//!   on each credential (a service account, or none: NodePodsAccessible)
//!   must be what `pull_records::scope` says, and a provider it says does
//!   not run for a pod without a service account gives no credential;
//! - the verification: kubelet's PullManager (file-backed records, its
//!   policy enforcer) on every combination of policy, allowlist match,
//!   image form, record and asking pod must agree with
//!   `pull_records::must_pull_again`.

use std::process::{Command, Stdio};

use cluster_harness::{cluster_bin, json_lines, provider_binary, run_ok, workspace_root};
use credential_provider::kubelet_config::{self, pull_records};
use pull_records::{Allowlist, Policy, Record, Scope, ServiceAccount};
use serde_json::{Value, json};

const NS: &str = "team";
const SA: &str = "app";

#[test]
fn the_record_scope_is_the_source_kubelet_tracks() {
    let tmp = tempfile::tempdir().expect("a directory");
    let bin = tmp.path().join("bin");
    std::fs::create_dir(&bin).expect("bin dir");
    for name in ["cloud-credential-provider", "optional-token", "node-credentials"] {
        std::fs::copy(provider_binary(), bin.join(name)).expect("copy the plugin");
    }
    let docker_config = workspace_root().join("tests/data/credential-provider/docker-config.json");
    let static_args = format!("[static, --docker-config, {}]", docker_config.display());
    let config = tmp.path().join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n\
             - name: cloud-credential-provider\n  apiVersion: credentialprovider.kubelet.k8s.io/v1\n  matchImages: [registry.example.com/team-b]\n  defaultCacheDuration: 1m\n  args: {static_args}\n\
             \x20 tokenAttributes: {{serviceAccountTokenAudience: required.example, cacheType: ServiceAccount, requireServiceAccount: true}}\n\
             - name: optional-token\n  apiVersion: credentialprovider.kubelet.k8s.io/v1\n  matchImages: [registry.example.com/team-c]\n  defaultCacheDuration: 1m\n  args: {static_args}\n\
             \x20 tokenAttributes: {{serviceAccountTokenAudience: optional.example, cacheType: ServiceAccount, requireServiceAccount: false}}\n\
             - name: node-credentials\n  apiVersion: credentialprovider.kubelet.k8s.io/v1\n  matchImages: [registry.example.com/team-d]\n  defaultCacheDuration: 1m\n  args: {static_args}\n"
        ),
    )
    .expect("write the config");
    let ours = kubelet_config::load(&config).expect("our reading of the config");
    let scopes: Vec<Scope> = ours.providers.iter().map(pull_records::scope).collect();
    assert_eq!(
        scopes,
        [
            Scope::ServiceAccount {
                pods_without_one_node_wide: false
            },
            Scope::ServiceAccount {
                pods_without_one_node_wide: true
            },
            Scope::Node,
        ]
    );
    let images = [
        "registry.example.com/team-b/app",
        "registry.example.com/team-c/app",
        "registry.example.com/team-d/app",
    ];
    for pod_account in [Some(SA), None] {
        let mut command = Command::new(cluster_bin("kubelet-credcheck"));
        command
            .args(["keyring", "--config"])
            .arg(&config)
            .arg("--bin-dir")
            .arg(&bin)
            .args([
                "--namespace",
                NS,
                &format!("--service-account={}", pod_account.unwrap_or("")),
            ])
            .args(images);
        let out = run_ok(&mut command).expect("kubelet's keyring");
        let lines = json_lines(&out).expect("JSON lines");
        for (i, (image, scope)) in images.iter().zip(&scopes).enumerate() {
            let lookup = &lines[i];
            assert_eq!(lookup["image"], *image);
            // The static backend answers every entry of its file that serves
            // the image: several credentials, one source.
            let mut sources: Vec<&str> = lookup["auth"]
                .as_array()
                .expect("auth")
                .iter()
                .map(|a| a["source"].as_str().expect("a source"))
                .collect();
            sources.dedup();
            let want: Vec<String> = match (scope, pod_account) {
                (Scope::ServiceAccount { .. }, Some(sa)) => vec![format!("service-account {NS}/{sa}")],
                (
                    Scope::ServiceAccount {
                        pods_without_one_node_wide: true,
                    },
                    None,
                )
                | (Scope::Node, _) => {
                    vec!["node".to_owned()]
                }
                (
                    Scope::ServiceAccount {
                        pods_without_one_node_wide: false,
                    },
                    None,
                ) => vec![],
            };
            assert_eq!(
                sources, want,
                "{image} for a pod with service account {pod_account:?}: {lookup}"
            );
        }
    }
}

fn account(name: &str, uid: &str) -> ServiceAccount {
    ServiceAccount {
        namespace: NS.to_owned(),
        name: name.to_owned(),
        uid: uid.to_owned(),
    }
}

#[test]
fn must_pull_again_is_what_kubelets_pull_manager_decides() {
    let allowlist_patterns = vec![
        "reg.io/base/*".to_owned(),
        "nginx".to_owned(),
        "reg.io:5000/tools/kubectl".to_owned(),
    ];
    let allowlist = Allowlist::parse(&allowlist_patterns).expect("a valid allowlist");
    let digest = format!("sha256:{}", "ab".repeat(32));
    let images = [
        "reg.io/base/debian:12".to_owned(),
        "reg.io/base".to_owned(),
        "reg.io/team/app:1".to_owned(),
        "nginx:1.27".to_owned(),
        "docker.io/library/nginx:1.27".to_owned(),
        format!("reg.io:5000/tools/kubectl@{digest}"),
        format!("reg.io:5000/tools/kubectl:v1@{digest}"),
    ];
    let recorded = account(SA, "uid-app");
    let records = [
        Record::Preloaded,
        Record::NodeWide,
        Record::ServiceAccount(recorded.clone()),
    ];
    let pods = [
        None,
        Some(recorded.clone()),
        Some(account("other", "uid-other")),
        Some(account(SA, "uid-app-recreated")),
    ];
    let mut cases = Vec::new();
    let mut ours = Vec::new();
    for policy in Policy::ALL {
        for image in &images {
            for record in &records {
                for pod in &pods {
                    let (record_name, recorded_account) = match record {
                        Record::Preloaded => ("none", None),
                        Record::NodeWide => ("node", None),
                        Record::ServiceAccount(a) => ("service-account", Some(a)),
                    };
                    cases.push(json!({
                        "policy": policy.name(), "allowlist": allowlist_patterns, "image": image,
                        "record": record_name, "recorded_account": recorded_account, "pod_account": pod,
                    }));
                    ours.push(pull_records::must_pull_again(
                        policy,
                        &allowlist,
                        image,
                        record,
                        pod.as_ref(),
                    ));
                }
            }
        }
    }
    let answers = pull_verify(&cases);
    let mut disagreements = Vec::new();
    let mut pulls = 0;
    for ((case, answer), ours) in cases.iter().zip(&answers).zip(&ours) {
        assert!(answer["error"].is_null(), "{case}: {answer}");
        let kubelet = answer["must_pull"].as_bool().expect("must_pull");
        pulls += usize::from(kubelet);
        if kubelet != *ours {
            disagreements.push(format!("{case}: kubelet {kubelet}, ours {ours}"));
        }
    }
    assert!(
        disagreements.is_empty(),
        "{} disagreements:\n{}",
        disagreements.len(),
        disagreements.join("\n")
    );
    // Both answers occur often: the cases test something.
    assert!(
        pulls > cases.len() / 5 && pulls < cases.len() * 4 / 5,
        "{pulls} of {}",
        cases.len()
    );
    eprintln!("pull-verify: {} cases agree ({pulls} must pull again)", cases.len());
}

/// `explain --kubelet-config` reads the shipped fixture as kubelet does:
/// kubelet's own validation of that file is not callable here, so its
/// fields are checked against the policy names the pull manager took above.
#[test]
fn the_fixtures_name_policies_kubelet_knows() {
    let fixture = workspace_root().join("tests/data/credential-provider/kubelet-config/allowlisted.yaml");
    let verification = pull_records::read_kubelet_config(&fixture).expect("the fixture");
    let allowlist = serde_json::to_value(&verification.allowlist).expect("JSON")["patterns"].clone();
    assert_eq!(allowlist, json!(["harbor.example.com/base/*", "registry.k8s.io/pause"]));
    let case = json!({"policy": verification.policy.name(), "allowlist": allowlist,
                      "image": "harbor.example.com/base/debian:12", "record": "none"});
    assert_eq!(
        pull_verify(&[case]),
        [json!({"must_pull": false})],
        "an allowlisted preloaded image is not verified"
    );
}

/// kubelet's PullManager's answer to each case (`kubelet-credcheck pull-verify`).
fn pull_verify(cases: &[Value]) -> Vec<Value> {
    let input: String = cases.iter().map(|c| format!("{c}\n")).collect();
    let mut child = Command::new(cluster_bin("kubelet-credcheck"))
        .arg("pull-verify")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubelet-credcheck pull-verify");
    {
        use std::io::Write as _;
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("the cases");
    }
    let out = child.wait_with_output().expect("its answers");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let answers = json_lines(&out).expect("JSON lines");
    assert_eq!(answers.len(), cases.len());
    answers
}
