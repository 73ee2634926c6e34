//! Our plugin, called by kubelet's own code: each config under
//! manifests/credential-provider/ is registered with kubelet's
//! RegisterCredentialProviderPlugins (copies with paths and endpoints
//! rewritten), and kubelet's keyring returns the expected credentials for a
//! set of images. The service-account token backends get real tokens from a
//! real kube-apiserver (TokenRequest bound to a real Pod), as kubelet would.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use base64::Engine;
use cloud_access::logging::{REDACTED, SECRET_FRAGMENT};
use cluster_harness::{TestCluster, TlsProxy, cluster_bin, json_lines, provider_binary, run_ok, workspace_root};
use k8s_openapi::api::core::v1::{Namespace, Pod, ServiceAccount};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use serde_yaml_ng::Value as Yaml;
use test_fakes::{AzureFake, GcpFake};

/// A bin dir holding our binary under the provider's name.
fn bin_dir(tmp: &Path) -> PathBuf {
    let dir = tmp.join("bin");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(provider_binary(), dir.join("cloud-credential-provider")).unwrap();
    dir
}

/// A bin dir whose `cloud-credential-provider` logs each run (one line to
/// the returned file) and then runs our binary, its stderr passed on to
/// kubelet and also appended to [`plugin_stderr`]'s file.
fn counting_bin_dir(tmp: &Path) -> (PathBuf, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tmp.join("counting-bin");
    std::fs::create_dir_all(&dir).unwrap();
    let calls = tmp.join("calls.log");
    let script = dir.join("cloud-credential-provider");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho run >> '{}'\nerr=$(mktemp)\n'{}' \"$@\" 2>\"$err\"\nstatus=$?\n\
             cat \"$err\" >> '{}'\ncat \"$err\" >&2\nrm -f \"$err\"\nexit $status\n",
            calls.display(),
            provider_binary().display(),
            tmp.join("plugin-stderr.log").display(),
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    (dir, calls)
}

/// What the plugins run from [`counting_bin_dir`]`(tmp)` wrote on stderr.
fn plugin_stderr(tmp: &Path) -> String {
    std::fs::read_to_string(tmp.join("plugin-stderr.log")).unwrap_or_default()
}

fn runs(calls: &Path) -> usize {
    std::fs::read_to_string(calls).map(|t| t.lines().count()).unwrap_or(0)
}

/// A copy of manifests/credential-provider/<name> under `tmp`, with each
/// provider passed through `edit`.
fn manifest_copy(tmp: &Path, name: &str, edit: impl Fn(&mut serde_yaml_ng::Mapping)) -> PathBuf {
    let text = std::fs::read_to_string(workspace_root().join("manifests/credential-provider").join(name)).unwrap();
    let mut doc: Yaml = serde_yaml_ng::from_str(&text).unwrap();
    for provider in doc["providers"].as_sequence_mut().expect("providers") {
        edit(provider.as_mapping_mut().expect("provider"));
    }
    let path = tmp.join(name);
    std::fs::write(&path, serde_yaml_ng::to_string(&doc).unwrap()).unwrap();
    path
}

fn set_arg(provider: &mut serde_yaml_ng::Mapping, flag: &str, value: &str) {
    let args = provider.get_mut("args").and_then(Yaml::as_sequence_mut).expect("args");
    let prefix = format!("{flag}=");
    let arg = args
        .iter_mut()
        .find(|a| a.as_str().is_some_and(|s| s.starts_with(&prefix)))
        .unwrap_or_else(|| panic!("no {flag} in args"));
    *arg = Yaml::from(format!("{prefix}{value}"));
}

/// Sets (or adds) one of the provider's env variables.
fn set_env(provider: &mut serde_yaml_ng::Mapping, name: &str, value: &str) {
    if provider.get("env").is_none() {
        provider.insert("env".into(), Yaml::Sequence(Vec::new()));
    }
    let env = provider.get_mut("env").and_then(Yaml::as_sequence_mut).expect("env");
    match env.iter_mut().find(|e| e["name"].as_str() == Some(name)) {
        Some(var) => var["value"] = Yaml::from(value),
        None => env.push(serde_yaml_ng::to_value(serde_json::json!({"name": name, "value": value})).unwrap()),
    }
}

struct KeyringRun {
    /// image → [(username, password)] (empty: kubelet found nothing).
    lookups: BTreeMap<String, Vec<(String, String)>>,
    summary: Value,
    stderr: String,
}

fn keyring(config: &Path, bin: &Path, extra: &[String], images: &[&str]) -> KeyringRun {
    let out = run_ok(
        Command::new(cluster_bin("kubelet-credcheck"))
            .arg("keyring")
            .arg("--config")
            .arg(config)
            .arg("--bin-dir")
            .arg(bin)
            .args(extra)
            .args(images),
    )
    .unwrap();
    let mut lines = json_lines(&out).unwrap();
    let summary = lines.pop().expect("summary");
    assert_eq!(summary["summary"], true);
    let lookups = lines
        .into_iter()
        .map(|l| {
            assert!(
                l["error"].is_null(),
                "kubelet cannot parse {}: {}",
                l["image"],
                l["error"]
            );
            let auth = l["auth"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| {
                    (
                        a["username"].as_str().unwrap().to_string(),
                        a["password"].as_str().unwrap().to_string(),
                    )
                })
                .collect::<Vec<_>>();
            assert_eq!(l["found"].as_bool().unwrap(), !auth.is_empty());
            (l["image"].as_str().unwrap().to_string(), auth)
        })
        .collect();
    KeyringRun {
        lookups,
        summary,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// [`keyring`] on a blocking thread, for the tests' async bodies.
async fn keyring_blocking(config: &Path, bin: &Path, extra: Vec<String>, images: &[&str]) -> KeyringRun {
    let (config, bin) = (config.to_path_buf(), bin.to_path_buf());
    let images: Vec<String> = images.iter().map(|i| i.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let images: Vec<&str> = images.iter().map(String::as_str).collect();
        keyring(&config, &bin, &extra, &images)
    })
    .await
    .expect("the keyring thread")
}

fn creds(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(u, p)| (u.to_string(), p.to_string())).collect()
}

fn docker_config_fixture() -> String {
    workspace_root()
        .join("tests/data/credential-provider/docker-config.json")
        .display()
        .to_string()
}

#[test]
fn static_manifest_through_kubelets_keyring() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = bin_dir(tmp.path());
    let config = manifest_copy(tmp.path(), "static.yaml", |p| {
        set_arg(p, "--docker-config", &docker_config_fixture())
    });
    let team = ("robot$team", "s3cr3t-team-password");
    let team_b = ("team-b-robot", "team-b-password-456");
    let want: Vec<(&str, Vec<(String, String)>)> = vec![
        ("registry.example.com/app", creds(&[team])),
        ("registry.example.com/app:v1", creds(&[team])),
        // Longer keys first (kubelet sorts its keys in reverse order).
        ("registry.example.com/team-b/app", creds(&[team_b, team])),
        // kubelet's path match is a raw string prefix: team-bx is "under" team-b.
        ("registry.example.com/team-bx/app", creds(&[team_b, team])),
        // Matched by matchImages, but the Docker config has nothing for them.
        ("foo.registry.example.com/x", vec![]),
        ("registry.example.com:5000/app", vec![]),
        // Not in matchImages: the plugin is not run.
        ("ghcr.io/org/app", vec![]),
        ("nginx:1.27", vec![]),
        ("localhost:5000/app", vec![]),
        ("a.b.registry.example.com/x", vec![]),
    ];
    let images: Vec<&str> = want.iter().map(|(i, _)| *i).collect();
    let run = keyring(&config, &bin, &[], &images);
    for (image, expected) in &want {
        assert_eq!(
            &run.lookups[*image], expected,
            "image {image}\nkubelet stderr:\n{}",
            run.stderr
        );
    }

    // Every image sent to the plugin: kubelet's keyring then matches the
    // keys of our answer (Docker Hub's key, wildcards, ports) itself.
    let config = manifest_copy(tmp.path(), "static.yaml", |p| {
        set_arg(p, "--docker-config", &docker_config_fixture());
        p.insert(
            "matchImages".into(),
            serde_yaml_ng::to_value(["*", "*.*", "*.*.*", "*.*.*.*", "*:5000"]).unwrap(),
        );
    });
    let hub = ("hubuser", "hub-password-123");
    let want: Vec<(&str, Vec<(String, String)>)> = vec![
        ("registry.example.com/app", creds(&[team])),
        ("nginx", creds(&[hub])),
        ("docker.io/team/app", creds(&[hub])),
        ("index.docker.io/library/nginx", creds(&[hub])),
        ("a.mirror.example.net/x", creds(&[("mirror", "mirror-password-789")])),
        // One label too many for `*.mirror.example.net`.
        ("a.b.mirror.example.net/x", vec![]),
        ("localhost:5000/app", creds(&[("local", "local-password-000")])),
        // No port in the key: no match.
        ("localhost:5001/app", vec![]),
        // `ghcr.io: {}` carries no credentials.
        ("ghcr.io/org/x", vec![]),
        ("quay.io/x", vec![]),
    ];
    let images: Vec<&str> = want.iter().map(|(i, _)| *i).collect();
    let run = keyring(&config, &bin, &[], &images);
    for (image, expected) in &want {
        assert_eq!(
            &run.lookups[*image], expected,
            "image {image}\nkubelet stderr:\n{}",
            run.stderr
        );
    }
}

/// What check-config reports for an entry whose command line our plugin
/// refuses (a typo'd flag, a bad value in its env) is what kubelet gets
/// from the plugin at every pull: kubelet's own exec runs it, finds no
/// credentials (so it pulls anonymously), and the plugin's stderr holds
/// exactly the line check-config showed (issue 25 item 8). About 0.3 s.
#[test]
fn check_configs_refusals_are_what_kubelet_gets_at_a_pull() {
    let tmp = tempfile::tempdir().unwrap();
    let (bin, calls) = counting_bin_dir(tmp.path());
    // manifest_copy writes tmp/static.yaml: each case is moved aside.
    let case = |name: &str, edit: &dyn Fn(&mut serde_yaml_ng::Mapping)| {
        let path = tmp.path().join(name);
        std::fs::rename(manifest_copy(tmp.path(), "static.yaml", edit), &path).unwrap();
        path
    };
    let typo = case("typo.yaml", &|p| {
        set_arg(p, "--docker-config", &docker_config_fixture());
        let args = p.get_mut("args").and_then(Yaml::as_sequence_mut).expect("args");
        args.push(Yaml::from("--cache-duraton=10m"));
    });
    let in_env = case("in-env.yaml", &|p| {
        set_arg(p, "--docker-config", &docker_config_fixture());
        set_env(p, "CLOUD_CREDENTIAL_PROVIDER_LOG_LEVEL", "loud");
    });
    let cases = [(typo, "providers[0].args"), (in_env, "providers[0].env[0]")];
    for (n, (config, field)) in cases.iter().enumerate() {
        let out = Command::new(provider_binary())
            .args(["check-config", "-o", "json"])
            .arg(config)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stdout));
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["problems"][0]["field"], *field, "{report}");
        let says = report["problems"][0]["plugin_says"]
            .as_str()
            .expect("the plugin's line")
            .to_owned();
        let run = keyring(config, &bin, &[], &["registry.example.com/app"]);
        assert_eq!(
            run.lookups["registry.example.com/app"],
            vec![],
            "kubelet got credentials"
        );
        assert_eq!(runs(&calls), n + 1, "kubelet ran the plugin once");
        let logged = plugin_stderr(tmp.path());
        assert_eq!(
            logged.lines().last(),
            Some(says.as_str()),
            "check-config said {says:?}, the plugin {logged:?}"
        );
    }
}

#[test]
fn static_manifest_in_every_protocol_version() {
    // kubelet writes the request and strictly decodes the answer in the
    // provider's apiVersion: each must round-trip.
    let tmp = tempfile::tempdir().unwrap();
    let bin = bin_dir(tmp.path());
    for version in ["v1alpha1", "v1beta1", "v1"] {
        let config = manifest_copy(tmp.path(), "static.yaml", |p| {
            set_arg(p, "--docker-config", &docker_config_fixture());
            p.insert(
                "apiVersion".into(),
                Yaml::from(format!("credentialprovider.kubelet.k8s.io/{version}")),
            );
        });
        let run = keyring(&config, &bin, &[], &["registry.example.com/team-b/app"]);
        assert_eq!(
            run.lookups["registry.example.com/team-b/app"],
            creds(&[
                ("team-b-robot", "team-b-password-456"),
                ("robot$team", "s3cr3t-team-password")
            ]),
            "{version}: kubelet stderr:\n{}",
            run.stderr
        );
    }
}

#[test]
fn kubelet_caches_our_answers_as_we_say() {
    // static answers with cacheKeyType Registry and --cache-duration=10m:
    // kubelet runs the plugin once per registry, not once per image.
    let tmp = tempfile::tempdir().unwrap();
    let (bin, calls) = counting_bin_dir(tmp.path());
    let config = manifest_copy(tmp.path(), "static.yaml", |p| {
        set_arg(p, "--docker-config", &docker_config_fixture())
    });
    let images = [
        "registry.example.com/a",
        "registry.example.com/b:1",
        "registry.example.com/team-b/c",
        "foo.registry.example.com/x",
        "foo.registry.example.com/y",
        "registry.example.com:5000/z",
    ];
    let run = keyring(&config, &bin, &[], &images);
    assert_eq!(
        run.lookups["registry.example.com/b:1"],
        creds(&[("robot$team", "s3cr3t-team-password")])
    );
    assert_eq!(runs(&calls), 3, "one run per registry; stderr:\n{}", run.stderr);

    // --cache-duration=0s: nothing is cached, every lookup runs the plugin.
    let calls_before = runs(&calls);
    let config = manifest_copy(tmp.path(), "static.yaml", |p| {
        set_arg(p, "--docker-config", &docker_config_fixture());
        set_arg(p, "--cache-duration", "0s");
    });
    let run = keyring(&config, &bin, &[], &images[..3]);
    assert_eq!(
        run.lookups["registry.example.com/a"],
        creds(&[("robot$team", "s3cr3t-team-password")])
    );
    assert_eq!(runs(&calls) - calls_before, 3, "stderr:\n{}", run.stderr);
}

/// Namespace, ServiceAccount (with annotations) and a Pod using it, as a
/// kubelet would find them. Returns the pod's UID.
async fn pod_with_service_account(
    cluster: &TestCluster,
    ns: &str,
    sa: &str,
    annotations: Value,
    image: &str,
) -> String {
    let client = cluster.client();
    let pp = PostParams::default();
    Api::<Namespace>::all(client.clone())
        .create(&pp, &serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap())
        .await
        .unwrap();
    Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .create(
            &pp,
            &serde_json::from_value(json!({"metadata": {"name": sa, "annotations": annotations}})).unwrap(),
        )
        .await
        .unwrap();
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "puller"},
        "spec": {
            "serviceAccountName": sa,
            "automountServiceAccountToken": false,
            "containers": [{"name": "app", "image": image}],
        },
    }))
    .unwrap();
    let pod = Api::<Pod>::namespaced(client, ns).create(&pp, &pod).await.unwrap();
    pod.metadata.uid.expect("pod uid")
}

fn pod_flags(cluster: &TestCluster, ns: &str, sa: &str, uid: &str) -> Vec<String> {
    vec![
        format!("--kubeconfig={}", cluster.kubeconfig.display()),
        format!("--namespace={ns}"),
        "--pod-name=puller".into(),
        format!("--pod-uid={uid}"),
        format!("--service-account={sa}"),
    ]
}

/// The claims of a JWT (not verified: the apiserver issued it).
fn claims(token: &str) -> Value {
    let payload = token.split('.').nth(1).expect("JWT");
    serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(payload)
            .unwrap(),
    )
    .unwrap()
}

fn assert_bound_token(token: &str, audience: &str, ns: &str, sa: &str, pod_uid: &str) {
    let c = claims(token);
    assert_eq!(c["aud"], json!([audience]), "{c}");
    assert_eq!(c["sub"], format!("system:serviceaccount:{ns}:{sa}"), "{c}");
    assert_eq!(c["iss"], cluster_harness::SERVICE_ACCOUNT_ISSUER, "{c}");
    assert_eq!(c["kubernetes.io"]["pod"]["uid"], pod_uid, "{c}");
}

#[tokio::test]
async fn passthrough_manifest_with_real_service_account_tokens() {
    let cluster = TestCluster::start().await;
    let (ns, sa) = ("registry-users", "harbor-puller");
    let uid = pod_with_service_account(&cluster, ns, sa, json!({}), "harbor.example.com/team/app:1").await;
    let tmp = tempfile::tempdir().unwrap();
    let bin = bin_dir(tmp.path());
    let config = manifest_copy(tmp.path(), "passthrough.yaml", |_| {});

    let images = [
        "harbor.example.com/team/app:1",
        "harbor.example.com:8443/team/app",
        "other.example.com/app",
    ];
    let flags = pod_flags(&cluster, ns, sa, &uid);
    let run = keyring_blocking(&config, &bin, flags, &images).await;
    let issued: Vec<String> = serde_json::from_value(run.summary["issued_tokens"].clone()).unwrap();
    assert_eq!(
        issued.len(),
        1,
        "one TokenRequest for the one matching image; stderr:\n{}",
        run.stderr
    );
    let token = &issued[0];
    assert_bound_token(token, "harbor.example.com", ns, sa, &uid);
    assert_eq!(
        run.lookups["harbor.example.com/team/app:1"],
        creds(&[("jwt", token)]),
        "{}",
        run.stderr
    );
    assert_eq!(run.lookups["harbor.example.com:8443/team/app"], vec![]);
    assert_eq!(run.lookups["other.example.com/app"], vec![]);

    // requireServiceAccount: a pod without a service account gets nothing,
    // and kubelet does not even ask for a token.
    let tmp2 = tempfile::tempdir().unwrap();
    let bin = bin_dir(tmp2.path());
    let config = manifest_copy(tmp2.path(), "passthrough.yaml", |_| {});
    let mut flags = pod_flags(&cluster, ns, "", &uid);
    flags.retain(|f| f != "--service-account=");
    let run = keyring_blocking(&config, &bin, flags, &["harbor.example.com/team/app"]).await;
    assert_eq!(run.lookups["harbor.example.com/team/app"], vec![]);
    assert_eq!(run.summary["issued_tokens"], json!([]));
}

#[tokio::test]
async fn token_exchange_manifest_with_real_tokens_and_a_token_endpoint() {
    let cluster = TestCluster::start().await;
    let (ns, sa) = ("team-a", "registry-reader");
    let uid = pod_with_service_account(
        &cluster,
        ns,
        sa,
        json!({"registry.example.com/scope": "repository:team-a:pull"}),
        "registry.example.com/team-a/app",
    )
    .await;
    let tmp = tempfile::tempdir().unwrap();
    let bin = bin_dir(tmp.path());
    // kubelet-credcheck serves the token endpoint on 127.0.0.1 and puts its
    // URL where the placeholder is.
    let config = manifest_copy(tmp.path(), "token-exchange.yaml", |p| {
        set_env(p, "CLOUD_CREDENTIAL_PROVIDER_TOKEN_ENDPOINT", "@TOKEN_ENDPOINT@")
    });
    let mut flags = pod_flags(&cluster, ns, sa, &uid);
    flags.push("--token-server".into());
    let images = [
        "registry.example.com/team-a/app",
        "registry.example.com:5000/team-a/app",
    ];
    let run = keyring_blocking(&config, &bin, flags, &images).await;

    let issued: Vec<String> = serde_json::from_value(run.summary["issued_tokens"].clone()).unwrap();
    assert_eq!(issued.len(), 1, "stderr:\n{}", run.stderr);
    assert_bound_token(&issued[0], "sts.example.com", ns, sa, &uid);
    let exchanges = run.summary["exchanges"].as_array().unwrap();
    assert_eq!(exchanges.len(), 1, "stderr:\n{}", run.stderr);
    let exchange = &exchanges[0];
    assert_eq!(exchange["subject_token"], issued[0].as_str());
    assert_eq!(exchange["audience"], "registry.example.com");
    let access = exchange["access_token"].as_str().unwrap();
    assert_eq!(
        run.lookups["registry.example.com/team-a/app"],
        creds(&[("oauth2accesstoken", access)]),
        "{}",
        run.stderr
    );
    assert_eq!(run.lookups["registry.example.com:5000/team-a/app"], vec![]);
}

#[tokio::test]
async fn ecr_manifest_with_moto_and_real_service_account_tokens() {
    // moto verifies every signature and session token; the fake STS answers
    // AssumeRoleWithWebIdentity (which moto cannot in that mode) with
    // moto-issued temporary credentials, recording the role and token.
    let moto = cluster_harness::Moto::start_authenticated();
    let sts = moto.web_identity_sts();
    let cluster = TestCluster::start().await;
    let role = moto.auth().role_arn.clone();
    let role = role.as_str();
    let node_uid = pod_with_service_account(&cluster, "ecr-node", "puller", json!({}), "busybox").await;
    let role_uid = pod_with_service_account(
        &cluster,
        "ecr-role",
        "puller",
        json!({"eks.amazonaws.com/ecr-role-arn": role}),
        "busybox",
    )
    .await;
    let tmp = tempfile::tempdir().unwrap();
    let (bin, calls) = counting_bin_dir(tmp.path());
    // Only moto, never the machine's own AWS set-up.
    let user = moto.auth().user.clone();
    let aws_env = |p: &mut serde_yaml_ng::Mapping, node_secret: Option<&str>| {
        set_env(p, "AWS_ENDPOINT_URL", &moto.url);
        set_env(p, "AWS_ENDPOINT_URL_STS", &sts.url);
        set_env(p, "AWS_EC2_METADATA_DISABLED", "true");
        set_env(p, "AWS_CONFIG_FILE", "/nonexistent");
        set_env(p, "AWS_SHARED_CREDENTIALS_FILE", "/nonexistent");
        let (id, secret) = match node_secret {
            Some(secret) => (user.access_key_id.as_str(), secret),
            None => ("", ""),
        };
        set_env(p, "AWS_ACCESS_KEY_ID", id);
        set_env(p, "AWS_SECRET_ACCESS_KEY", secret);
    };
    let registry = "123456789012.dkr.ecr.eu-west-1.amazonaws.com";
    let image_a = format!("{registry}/team/app:1");
    let image_b = format!("{registry}/team/other");
    let foreign = "quay.io/team/app";
    let token = ("AWS", "123456789012-auth-token");

    // The node's credentials, for a pod whose service account names no role.
    std::fs::create_dir_all(tmp.path().join("node")).unwrap();
    let config = manifest_copy(&tmp.path().join("node"), "ecr.yaml", |p| {
        aws_env(p, Some(&user.secret_access_key))
    });
    let flags = pod_flags(&cluster, "ecr-node", "puller", &node_uid);
    let images = [image_a.clone(), image_b.clone(), foreign.to_string()];
    let images: Vec<&str> = images.iter().map(String::as_str).collect();
    let run = keyring_blocking(&config, &bin, flags, &images).await;
    assert_eq!(run.lookups[&image_a], creds(&[token]), "{}", run.stderr);
    assert_eq!(run.lookups[&image_b], creds(&[token]), "{}", run.stderr);
    // Not in matchImages: the plugin does not run.
    assert_eq!(run.lookups[foreign], vec![], "{}", run.stderr);
    // moto's token expired in 2015, so kubelet must not cache it: both ECR
    // images ran the plugin.
    assert_eq!(runs(&calls), 2, "{}", run.stderr);

    // Negative twin: the node's key with a wrong secret is refused by moto,
    // so kubelet gets nothing.
    std::fs::create_dir_all(tmp.path().join("wrong")).unwrap();
    let config = manifest_copy(&tmp.path().join("wrong"), "ecr.yaml", |p| {
        aws_env(p, Some("wrong-secret"))
    });
    let flags = pod_flags(&cluster, "ecr-node", "puller", &node_uid);
    let run = keyring_blocking(&config, &bin, flags, &[&image_a]).await;
    assert_eq!(run.lookups[&image_a], vec![], "{}", run.stderr);
    assert!(
        plugin_stderr(tmp.path()).contains("HTTP 403"),
        "{}",
        plugin_stderr(tmp.path())
    );
    assert!(sts.calls().is_empty(), "no role, no STS call");

    // KEP-4412: no node credentials at all; the service account's role
    // (AssumeRoleWithWebIdentity with the real bound token) is the only way.
    std::fs::create_dir_all(tmp.path().join("role")).unwrap();
    let config = manifest_copy(&tmp.path().join("role"), "ecr.yaml", |p| aws_env(p, None));
    let flags = pod_flags(&cluster, "ecr-role", "puller", &role_uid);
    let run = keyring_blocking(&config, &bin, flags, &[&image_a]).await;
    assert_eq!(run.lookups[&image_a], creds(&[token]), "{}", run.stderr);
    let issued: Vec<String> = serde_json::from_value(run.summary["issued_tokens"].clone()).unwrap();
    assert_eq!(issued.len(), 1, "{}", run.stderr);
    assert_bound_token(&issued[0], "sts.amazonaws.com", "ecr-role", "puller", &role_uid);
    // STS got the role of the service account's annotation and the real
    // bound token kubelet issued for the pod.
    let web_identity = sts.calls();
    assert_eq!(web_identity.len(), 1, "{}", run.stderr);
    assert_eq!(web_identity[0].role_arn, role);
    assert!(
        web_identity[0].web_identity_token == issued[0],
        "STS got the pod's bound token"
    );
    assert!(!web_identity[0].signed);

    // Negative twin: the role's credentials with their session token
    // changed are refused by moto, so kubelet gets nothing.
    sts.tamper_session_token(true);
    let flags = pod_flags(&cluster, "ecr-role", "puller", &role_uid);
    let run = keyring_blocking(&config, &bin, flags, &[&image_a]).await;
    assert_eq!(run.lookups[&image_a], vec![], "{}", run.stderr);
    assert_eq!(sts.calls().len(), 2, "{}", run.stderr);
    sts.tamper_session_token(false);

    // The same config for a pod without the annotation: no credentials to
    // use, so kubelet gets nothing (and logs the plugin's error).
    let flags = pod_flags(&cluster, "ecr-node", "puller", &node_uid);
    let run = keyring_blocking(&config, &bin, flags, &[&image_a]).await;
    assert_eq!(run.lookups[&image_a], vec![], "{}", run.stderr);
}

/// The value of the provider's `--flag=VALUE` argument.
fn arg_value(provider: &serde_yaml_ng::Mapping, flag: &str) -> String {
    let prefix = format!("{flag}=");
    let args = provider.get("args").and_then(Yaml::as_sequence).expect("args");
    args.iter()
        .filter_map(Yaml::as_str)
        .find_map(|a| a.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {flag} in args"))
        .to_owned()
}

/// No run of [`SECRET_FRAGMENT`] characters of `secret` (a JWT's payload
/// and signature, or all of a shorter secret) in `text`.
fn assert_no_piece_of(secret: &str, text: &str, what: &str) {
    let parts: Vec<&str> = match secret.split('.').collect::<Vec<_>>().as_slice() {
        [_, payload, signature] if secret.len() > 100 => vec![payload, signature],
        _ => vec![secret],
    };
    for part in parts {
        let chars: Vec<char> = part.chars().collect();
        for window in chars.windows(SECRET_FRAGMENT.min(chars.len())) {
            let piece: String = window.iter().collect();
            assert!(
                !text.contains(&piece),
                "{what} holds a piece of a secret ({piece}):\n{text}"
            );
        }
    }
}

/// The `gcp` manifest under kubelet's code, against the fake of Google's APIs
/// (tests/fakes/gcp_server.py on loopback: the metadata server through
/// `GCE_METADATA_HOST`, STS and IAM Credentials through the endpoint
/// variables; nothing reaches metadata.google.internal or 169.254.169.254).
/// The pods' tokens are real: kubelet's code asks the apiserver for each
/// (TokenRequest bound to the pod, for the manifest's audience), and
/// kubelet-credcheck tells the fake's STS each one as it is issued, so the
/// STS accepts those and no others.
#[tokio::test]
async fn gcp_manifest_with_the_fake_and_real_service_account_tokens() {
    const OPT_IN: &str = "iam.gke.io/enable-wi-image-pull";
    const GSA_KEY: &str = "iam.gke.io/gcp-service-account";
    const METADATA_TOKEN: &str = "GET /computeMetadata/v1/instance/service-accounts/default/token";
    const STS: &str = "POST /v1/token";
    let manifest: Yaml = serde_yaml_ng::from_str(
        &std::fs::read_to_string(workspace_root().join("manifests/credential-provider/gcp.yaml")).unwrap(),
    )
    .unwrap();
    let provider = manifest["providers"][0].as_mapping().expect("a provider");
    let project = arg_value(provider, "--project-id");
    let pool = provider["tokenAttributes"]["serviceAccountTokenAudience"]
        .as_str()
        .expect("serviceAccountTokenAudience")
        .to_owned();
    let audience = format!(
        "identitynamespace:{pool}:{}",
        arg_value(provider, "--identity-provider")
    );
    // Allowed by the manifest's --allowed-service-account=*@PROJECT.iam.gserviceaccount.com.
    let gsa = format!("image-puller@{project}.iam.gserviceaccount.com");
    let generate = format!("POST /v1/projects/-/serviceAccounts/{gsa}:generateAccessToken");

    let fake = GcpFake::with(|s| {
        s["metadata"]["tree"]["project/project-id"] = json!(project);
        s["sts"]["audience"] = json!(audience);
        s["sts"]["subject_tokens"] = json!([]);
        s["iam"]["service_accounts"] = json!([gsa]);
    });
    let cluster = TestCluster::start().await;
    let image = format!("us-docker.pkg.dev/{project}/apps/web:1");
    let node_uid = pod_with_service_account(&cluster, "gcp-node", "puller", json!({}), &image).await;
    let pod_uid = pod_with_service_account(&cluster, "gcp-pod", "puller", json!({OPT_IN: "true"}), &image).await;
    let gsa_uid = pod_with_service_account(
        &cluster,
        "gcp-gsa",
        "puller",
        json!({OPT_IN: "true", GSA_KEY: gsa}),
        &image,
    )
    .await;
    let tmp = tempfile::tempdir().unwrap();
    let (bin, calls) = counting_bin_dir(tmp.path());
    let config = manifest_copy(tmp.path(), "gcp.yaml", |p| {
        set_env(p, "GCE_METADATA_HOST", &fake.host());
        set_env(p, "CLOUD_CREDENTIAL_PROVIDER_STS_ENDPOINT", &fake.base());
        set_env(p, "CLOUD_CREDENTIAL_PROVIDER_IAM_CREDENTIALS_ENDPOINT", &fake.base());
        // All the plugin says, to show that none of it is secret.
        set_env(p, "CLOUD_CREDENTIAL_PROVIDER_LOG_LEVEL", "debug");
    });
    let announce = fake.subject_tokens_url();
    let keyring_as = |ns: &'static str, uid: &str, announced: bool, images: Vec<String>| {
        let mut flags = pod_flags(&cluster, ns, "puller", uid);
        if announced {
            flags.extend(["--announce-tokens".to_owned(), announce.clone()]);
        }
        let (config, bin) = (config.clone(), bin.clone());
        tokio::task::spawn_blocking(move || {
            let images: Vec<&str> = images.iter().map(String::as_str).collect();
            keyring(&config, &bin, &flags, &images)
        })
    };
    let issued = |run: &KeyringRun, ns: &str, uid: &str| -> Vec<String> {
        let issued: Vec<String> = serde_json::from_value(run.summary["issued_tokens"].clone()).unwrap();
        for token in &issued {
            assert_bound_token(token, &pool, ns, "puller", uid);
        }
        issued
    };
    let mut secrets: Vec<String> = Vec::new();
    let mut logs = String::new();

    // An Artifact Registry image matches two keys of the answer, its registry
    // and `*.pkg.dev`: kubelet's keyring returns the credential under each.
    let pkg_dev = |password: &str| creds(&[("_token", password), ("_token", password)]);

    // The node's service account (no opt-in): the metadata server's token,
    // one plugin run per registry (cacheKeyType Registry), for gcr.io, *.gcr.io,
    // *.pkg.dev and container.cloud.google.com only.
    let gcr = format!("gcr.io/{project}/app");
    let images = vec![
        image.clone(),
        format!("us-docker.pkg.dev/{project}/apps/api"),
        gcr.clone(),
        "quay.io/team/app".into(),
    ];
    let run = keyring_as("gcp-node", &node_uid, true, images.clone()).await.unwrap();
    eprintln!("DEBUG {:?}", run.lookups);
    assert_eq!(run.lookups[&image], pkg_dev("ya29.metadata-1"), "{}", run.stderr);
    assert_eq!(run.lookups[&images[1]], pkg_dev("ya29.metadata-1"), "{}", run.stderr);
    assert_eq!(
        run.lookups[&gcr],
        creds(&[("_token", "ya29.metadata-2")]),
        "{}",
        run.stderr
    );
    assert_eq!(run.lookups["quay.io/team/app"], vec![], "{}", run.stderr);
    assert_eq!(runs(&calls), 2, "{}", run.stderr);
    assert_eq!((fake.requests(METADATA_TOKEN), fake.requests(STS)), (2, 0));
    // kubelet asks for the pod's token on every lookup of a matching image.
    assert_eq!(issued(&run, "gcp-node", &node_uid).len(), 3, "{}", run.stderr);
    secrets.extend(issued(&run, "gcp-node", &node_uid));
    logs.push_str(&run.stderr);

    // Opted in: the pod's own token exchanged at STS for a federated token.
    let run = keyring_as("gcp-pod", &pod_uid, true, vec![image.clone(), gcr.clone()])
        .await
        .unwrap();
    assert_eq!(run.lookups[&image], pkg_dev("ya29.federated-1"), "{}", run.stderr);
    assert_eq!(
        run.lookups[&gcr],
        creds(&[("_token", "ya29.federated-2")]),
        "{}",
        run.stderr
    );
    assert_eq!((fake.requests(METADATA_TOKEN), fake.requests(STS)), (2, 2));
    secrets.extend(issued(&run, "gcp-pod", &pod_uid));
    logs.push_str(&run.stderr);

    // Opted in and naming a Google service account: the federated token
    // impersonates it through IAM Credentials.
    let run = keyring_as("gcp-gsa", &gsa_uid, true, vec![image.clone()])
        .await
        .unwrap();
    assert_eq!(run.lookups[&image], pkg_dev("ya29.impersonated-1"), "{}", run.stderr);
    assert_eq!((fake.requests(STS), fake.requests(&generate)), (3, 1));
    secrets.extend(issued(&run, "gcp-gsa", &gsa_uid));
    logs.push_str(&run.stderr);

    // A token the STS was not told of is refused (and the fake quotes it in
    // its error): kubelet gets nothing and logs the plugin's stderr, with
    // STS's reason and without the token.
    let run = keyring_as("gcp-pod", &pod_uid, false, vec![image.clone()])
        .await
        .unwrap();
    assert_eq!(run.lookups[&image], vec![], "{}", run.stderr);
    assert_eq!(fake.requests(STS), 4);
    // The fake quoted the token; the plugin cut it out.
    assert!(run.stderr.contains("invalid_grant"), "{}", run.stderr);
    assert!(run.stderr.contains(REDACTED), "{}", run.stderr);
    let refused = issued(&run, "gcp-pod", &pod_uid);
    assert_eq!(refused.len(), 1, "{}", run.stderr);
    secrets.extend(refused);
    logs.push_str(&run.stderr);

    // Nothing secret in kubelet's log or in all the plugin wrote (at debug).
    let plugin = plugin_stderr(tmp.path());
    assert!(plugin.contains("exchanging the service-account token"), "{plugin}");
    for token in [
        "ya29.metadata-1",
        "ya29.metadata-2",
        "ya29.federated-1",
        "ya29.federated-2",
        "ya29.federated-3",
        "ya29.impersonated-1",
    ] {
        secrets.push(token.to_owned());
    }
    for secret in &secrets {
        assert_no_piece_of(secret, &logs, "kubelet's log");
        assert_no_piece_of(secret, &plugin, "the plugin's stderr");
    }
}

/// Replaces the provider's argument `from` (a positional one, such as a
/// config file's path) with `to`.
fn replace_arg(provider: &mut serde_yaml_ng::Mapping, from: &str, to: &str) {
    let args = provider.get_mut("args").and_then(Yaml::as_sequence_mut).expect("args");
    let arg = args
        .iter_mut()
        .find(|a| a.as_str() == Some(from))
        .unwrap_or_else(|| panic!("no {from} in args"));
    *arg = Yaml::from(to);
}

/// The `acr` manifest under kubelet's code, against the Azure fake
/// (tests/fakes/azure_server.py on loopback: IMDS and Entra ID through
/// `--imds-endpoint`/`--authority-host` as variables; the registry, the
/// manifest's mirror target `myregistry.azurecr.io`, at `https://REGISTRY/`
/// through tests/fakes/tls_proxy.py named by HTTPS_PROXY, with the test's
/// own CA as SSL_CERT_FILE; nothing reaches 169.254.169.254 or Azure). The
/// pod's token is real: kubelet's code asks the apiserver for it (bound to
/// the pod, for the manifest's audience) and kubelet-credcheck tells the
/// fake's Entra ID each one as it is issued, as a client assertion of the
/// application the service account names; Entra accepts those and no others.
#[tokio::test]
async fn acr_manifest_with_the_fake_and_a_pod_bound_token() {
    const CLIENT_ID: &str = "kubernetes.azure.com/acr-client-id";
    const TENANT_ID: &str = "kubernetes.azure.com/acr-tenant-id";
    const ACR_USERNAME: &str = "00000000-0000-0000-0000-000000000000";
    const IMDS_TOKEN: &str = "GET /metadata/identity/oauth2/token";
    const EXCHANGE: &str = "exchange grant_type=access_token";
    // An application the scenario does not know: Entra learns it (and the
    // tokens it accepts for it) only from kubelet-credcheck's announcements.
    const APP: &str = "c5c5c5c5-0000-4000-8000-000000000005";
    const SP_CLIENT: &str = "c1c1c1c1-0000-4000-8000-000000000001";
    const SP_SECRET: &str = "Qx8Q~fake.client-secret_value-0001";
    let manifest: Yaml = serde_yaml_ng::from_str(
        &std::fs::read_to_string(workspace_root().join("manifests/credential-provider/acr.yaml")).unwrap(),
    )
    .unwrap();
    let provider = manifest["providers"][0].as_mapping().expect("a provider");
    // The manifest's own tenant allow-list, mirror and audience.
    let tenant = arg_value(provider, "--allowed-tenant-id");
    let mirror = arg_value(provider, "--registry-mirror");
    let (mirror_source, registry) = mirror.split_once(':').expect("SRC:DST");
    let (mirror_source, registry) = (mirror_source.to_owned(), registry.to_owned());
    let audience = provider["tokenAttributes"]["serviceAccountTokenAudience"]
        .as_str()
        .expect("serviceAccountTokenAudience")
        .to_owned();
    let entra = format!("POST /{tenant}/oauth2/v2.0/token");

    let fake = AzureFake::with(|s| {
        s["acr"]["realm_scheme"] = json!("https");
        s["acr"]["tenant"] = json!(tenant);
        // Entra quotes a refused assertion (as a careless server might).
        s["entra"]["echo_credentials"] = json!(true);
    });
    let tmp = tempfile::tempdir().unwrap();
    let proxy = TlsProxy::start(fake.port, &[&registry], tmp.path());
    let cluster = TestCluster::start().await;
    let image = format!("{registry}/team/app:1");
    let node_uid = pod_with_service_account(&cluster, "acr-node", "puller", json!({}), &image).await;
    let pod_uid = pod_with_service_account(
        &cluster,
        "acr-pod",
        "puller",
        json!({CLIENT_ID: APP, TENANT_ID: tenant}),
        &image,
    )
    .await;
    let (bin, calls) = counting_bin_dir(tmp.path());
    let azure_json = |name: &str| {
        workspace_root()
            .join("tests/data/azure")
            .join(name)
            .display()
            .to_string()
    };
    let copy = |dir: &str, config: &str, pod_tokens: bool| {
        let dir = tmp.path().join(dir);
        std::fs::create_dir_all(&dir).unwrap();
        manifest_copy(&dir, "acr.yaml", |p| {
            replace_arg(p, "/etc/kubernetes/azure.json", &azure_json(config));
            set_env(p, "CLOUD_CREDENTIAL_PROVIDER_IMDS_ENDPOINT", &fake.base());
            set_env(p, "CLOUD_CREDENTIAL_PROVIDER_AUTHORITY_HOST", &fake.base());
            set_env(p, "HTTPS_PROXY", &proxy.url());
            set_env(p, "SSL_CERT_FILE", &proxy.ca.display().to_string());
            // All the plugin says, to show that none of it is secret.
            set_env(p, "CLOUD_CREDENTIAL_PROVIDER_LOG_LEVEL", "debug");
            if !pod_tokens {
                // As the manifest's comment says: pull as the node only.
                p.remove("tokenAttributes");
            }
        })
    };
    let node_config = copy("node", "managed-identity.json", false);
    let sp_config = copy("sp", "service-principal.json", false);
    let pod_config = copy("pod", "managed-identity.json", true);
    let announce = fake.assertions_url(&tenant, APP);
    let keyring_as = |config: &PathBuf, ns: &'static str, uid: &str, announced: bool, images: Vec<String>| {
        let mut flags = pod_flags(&cluster, ns, "puller", uid);
        if announced {
            flags.extend(["--announce-tokens".to_owned(), announce.clone()]);
        }
        let (config, bin) = (config.clone(), bin.clone());
        tokio::task::spawn_blocking(move || {
            let images: Vec<&str> = images.iter().map(String::as_str).collect();
            keyring(&config, &bin, &flags, &images)
        })
    };
    let issued = |run: &KeyringRun, ns: &str, uid: &str| -> Vec<String> {
        let issued: Vec<String> = serde_json::from_value(run.summary["issued_tokens"].clone()).unwrap();
        for token in &issued {
            assert_bound_token(token, &audience, ns, "puller", uid);
        }
        issued
    };
    // What kubelet returns for an image: ACR's username and a refresh token
    // the fake's registry issued for `registry` in the tenant (its `sub` is
    // the fake's serial: exchange-N), and for an image on an ACR registry
    // also the answer's empty `*.azurecr.*` entry (kubelet's keyring matches
    // that key too and tries it last: an anonymous pull).
    let refresh_token = |run: &KeyringRun, image: &str, serial: u32| -> String {
        let found = &run.lookups[image];
        let anonymous = image.split('/').next().unwrap_or_default().contains(".azurecr.");
        let want = if anonymous { 2 } else { 1 };
        assert_eq!(found.len(), want, "{image}: {found:?}\n{}", run.stderr);
        if anonymous {
            assert_eq!(found[1], (String::new(), String::new()), "{image}: {found:?}");
        }
        let (user, password) = &found[0];
        assert_eq!(user, ACR_USERNAME, "{}", run.stderr);
        let c = claims(password);
        assert_eq!(c["iss"], "Azure Container Registry", "{c}");
        assert_eq!(c["aud"], registry.as_str(), "{c}");
        assert_eq!(c["tenant"], tenant.as_str(), "{c}");
        assert_eq!(c["sub"], format!("exchange-{serial}"), "{c}");
        password.clone()
    };
    // IMDS tokens, Entra ID tokens, ACR exchanges so far.
    let azure_calls = || {
        let count = |key: &str| fake.requests(key);
        (count(IMDS_TOKEN), count(&entra), count(EXCHANGE))
    };
    let mut secrets: Vec<String> = vec![SP_SECRET.to_owned()];
    let mut logs = String::new();
    let other = format!("{registry}/team/other");
    let mirrored = format!("{mirror_source}/oss/nginx");
    let foreign = "quay.io/team/app".to_owned();

    // (1) The node's managed identity (the manifest without tokenAttributes):
    // IMDS's token exchanged at the registry, one plugin run per registry
    // (cacheKeyType Registry); the mirror's source gets its target's token;
    // images matchImages does not list never run the plugin.
    let run = keyring_as(
        &node_config,
        "acr-node",
        &node_uid,
        false,
        vec![image.clone(), other.clone(), mirrored.clone(), foreign.clone()],
    )
    .await
    .unwrap();
    let node_token = refresh_token(&run, &image, 1);
    assert_eq!(refresh_token(&run, &other, 1), node_token);
    let mirror_token = refresh_token(&run, &mirrored, 2);
    assert_eq!(run.lookups[&foreign], vec![], "{}", run.stderr);
    assert_eq!(runs(&calls), 2, "{}", run.stderr);
    assert_eq!(issued(&run, "acr-node", &node_uid), Vec::<String>::new());
    assert_eq!(azure_calls(), (2, 0, 2));
    secrets.extend([node_token, mirror_token, "imds-token-1".into(), "imds-token-2".into()]);
    logs.push_str(&run.stderr);

    // The service principal of azure.json: its ID and secret under
    // `*.azurecr.io` (and the anonymous entry), without a call.
    let before = fake.all_requests();
    let run = keyring_as(&sp_config, "acr-node", &node_uid, false, vec![image.clone()])
        .await
        .unwrap();
    assert_eq!(
        run.lookups[&image],
        creds(&[(SP_CLIENT, SP_SECRET), ("", "")]),
        "{}",
        run.stderr
    );
    assert_eq!(fake.all_requests(), before);
    logs.push_str(&run.stderr);

    // (2) KEP-4412 with the shipped manifest: the pod's own token, bound to
    // it, presented to the tenant's Entra ID as the client assertion of the
    // application its service account names, then ACR's exchange.
    let run = keyring_as(&pod_config, "acr-pod", &pod_uid, true, vec![image.clone()])
        .await
        .unwrap();
    let pod_token = refresh_token(&run, &image, 3);
    let tokens = issued(&run, "acr-pod", &pod_uid);
    assert_eq!(tokens.len(), 1, "{}", run.stderr);
    assert_eq!(azure_calls(), (2, 1, 3));
    secrets.extend(tokens);
    secrets.extend([pod_token, "assertion-token-1".into()]);
    logs.push_str(&run.stderr);

    // Mirrored images are pulled as the node even when kubelet sends the
    // pod's token.
    let run = keyring_as(&pod_config, "acr-pod", &pod_uid, true, vec![mirrored.clone()])
        .await
        .unwrap();
    secrets.push(refresh_token(&run, &mirrored, 4));
    assert_eq!(azure_calls(), (3, 1, 4));
    secrets.extend(issued(&run, "acr-pod", &pod_uid));
    secrets.push("imds-token-3".into());
    logs.push_str(&run.stderr);

    // Refused: a token Entra was not told of (the fake quotes it in its
    // error): kubelet gets nothing and logs the plugin's stderr, with
    // Entra's AADSTS code and without the token.
    let run = keyring_as(&pod_config, "acr-pod", &pod_uid, false, vec![image.clone()])
        .await
        .unwrap();
    assert_eq!(run.lookups[&image], vec![], "{}", run.stderr);
    assert_eq!((fake.requests(&entra), fake.requests(EXCHANGE)), (2, 4));
    assert!(run.stderr.contains("AADSTS700211"), "{}", run.stderr);
    assert!(run.stderr.contains(REDACTED), "{}", run.stderr);
    let refused = issued(&run, "acr-pod", &pod_uid);
    assert_eq!(refused.len(), 1, "{}", run.stderr);
    secrets.extend(refused);
    logs.push_str(&run.stderr);

    // Refused: under the shipped manifest a pod whose service account names
    // no application gets nothing (kubelet logs which annotation is missing),
    // and nothing is asked of Azure.
    let before = fake.all_requests();
    let run = keyring_as(&pod_config, "acr-node", &node_uid, true, vec![image.clone()])
        .await
        .unwrap();
    assert_eq!(run.lookups[&image], vec![], "{}", run.stderr);
    assert!(run.stderr.contains(CLIENT_ID), "{}", run.stderr);
    assert_eq!(fake.all_requests(), before);
    secrets.extend(issued(&run, "acr-node", &node_uid));
    logs.push_str(&run.stderr);

    // Nothing secret in kubelet's log or in all the plugin wrote (at debug).
    let plugin = plugin_stderr(tmp.path());
    for said in [
        "identity=the node's system-assigned managed identity",
        &format!("identity=application {APP} of tenant {tenant} (workload identity)"),
    ] {
        assert!(plugin.contains(said), "{said}: {plugin}");
    }
    for secret in &secrets {
        assert_no_piece_of(secret, &logs, "kubelet's log");
        assert_no_piece_of(secret, &plugin, "the plugin's stderr");
    }
    drop(proxy);
}

#[test]
fn every_manifest_registers_in_kubelet() {
    // As kubelet starts: read, validate, find the binary under the
    // provider's name in the bin dir. Whatever manifests exist at run time.
    let tmp = tempfile::tempdir().unwrap();
    let bin = bin_dir(tmp.path());
    let dir = workspace_root().join("manifests/credential-provider");
    let mut manifests: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml" || e == "json"))
        .collect();
    manifests.sort();
    assert!(!manifests.is_empty());
    for manifest in &manifests {
        let run = keyring(manifest, &bin, &[], &[]);
        assert!(run.lookups.is_empty());
        eprintln!("kubelet registers {}", manifest.display());
    }
}
