//! `pv-topology-webhook audit` run the way the shipped Job
//! (`manifests/webhook/audit/job`) runs it: no kubeconfig at all, so kube's
//! inference falls through to the in-cluster configuration, against the tier's real
//! kube-apiserver. The binary runs in a private mount namespace (`unshare --mount
//! --propagation private`, as root) with a tmpfs where kubelet would mount the
//! ServiceAccount volume, holding `token` (a TokenRequest token), `ca.crt` (the
//! apiserver's serving CA) and `namespace`; `KUBERNETES_SERVICE_HOST=127.0.0.1` and
//! `KUBERNETES_SERVICE_PORT=<apiserver port>` as kubelet sets them; `HOME` an empty
//! directory and no `KUBECONFIG`; as the Job's user 65532 without new privileges.
//! The host's own `/var/run/secrets` is untouched.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use cluster_harness::audit::{apply_dir, report, service_account_token, status};
use cluster_harness::webhook::webhook_binary;
use cluster_harness::{TestCluster, workspace_root};
use common::*;
use k8s_openapi::api::core::v1::{Namespace, PersistentVolume, ServiceAccount};
use kube::api::{Api, PostParams};
use serde_json::json;

const NAMESPACE: &str = "pv-topology-webhook";
const ACCOUNT: &str = "pv-topology-webhook-audit";
/// A ServiceAccount no role is bound to.
const UNBOUND: &str = "pv-topology-webhook-audit-unbound";
const GKE_ZONE: &str = "topology.gke.io/zone";
/// Where kube (and client-go) read the in-cluster identity.
const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The Job's `runAsUser` and `runAsGroup`.
const JOB_USER: &str = "65532";

/// Sets up the mount namespace, then runs the command (setpriv: the Job's user).
/// $1: where the tmpfs goes; $2: SERVICE_ACCOUNT_DIR; $3: the files to put there;
/// then the command.
const IN_NAMESPACE: &str = r#"set -eu
mount -t tmpfs -o mode=0755,size=1m audit-test-secrets "$1"
mkdir -p "$2"
cp "$3/token" "$3/ca.crt" "$3/namespace" "$2/"
chmod 0644 "$2/token" "$2/ca.crt" "$2/namespace"
shift 3
exec "$@"
"#;

/// What the host has at the resolved `/var/run/secrets`: whether it is there and
/// what is under it, to compare before and after the runs.
fn host_secrets() -> (PathBuf, Option<Vec<PathBuf>>) {
    let run = std::fs::canonicalize("/var/run").expect("/var/run resolves");
    let secrets = run.join("secrets");
    fn walk(dir: &Path, found: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("read the host's secrets dir") {
            let path = entry.expect("an entry").path();
            found.push(path.clone());
            if path.is_dir() && !path.is_symlink() {
                walk(&path, found);
            }
        }
    }
    let listing = secrets.is_dir().then(|| {
        let mut found = Vec::new();
        walk(&secrets, &mut found);
        found.sort();
        found
    });
    (secrets, listing)
}

/// Where the tmpfs goes: over the resolved `/var/run/secrets` if the host has it,
/// else over the resolved `/var/run` itself (creating `secrets` on the host would
/// change it; inside the namespace the audit needs nothing else from there).
fn mount_target() -> PathBuf {
    let (secrets, listing) = host_secrets();
    match listing {
        Some(_) => secrets,
        None => secrets.parent().expect("the run directory").to_path_buf(),
    }
}

/// Fails, naming what is missing, unless this process may make a private mount
/// namespace (root and unshare(1)) and drop to the Job's user (setpriv(1)).
fn require_unshare() {
    let probe = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "--"])
        .args([
            "setpriv",
            &format!("--reuid={JOB_USER}"),
            &format!("--regid={JOB_USER}"),
        ])
        .args(["--clear-groups", "--no-new-privs", "true"])
        .output();
    match probe {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!(
            "this test runs the audit in a private mount namespace: it needs root and \
             `unshare --mount --propagation private` (util-linux) and setpriv; the probe \
             failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => panic!(
            "this test runs the audit in a private mount namespace: it needs root and \
             unshare(1) and setpriv(1) from util-linux, which could not be run: {e}"
        ),
    }
}

/// `audit --output json --page-size 2` as the Job runs it, with `token` as the
/// ServiceAccount's: the environment is only what kubelet and the image give
/// (PATH, HOME, the service variables).
fn audit_in_cluster(cluster: &TestCluster, token: &str, case: &str) -> Output {
    let stage = cluster.dir().join(format!("in-cluster-{case}"));
    std::fs::create_dir_all(&stage).expect("a staging directory");
    std::fs::write(stage.join("token"), token).expect("write the token");
    std::fs::copy(cluster.dir().join("pki/ca.crt"), stage.join("ca.crt")).expect("copy the CA");
    std::fs::write(stage.join("namespace"), NAMESPACE).expect("write the namespace");
    let home = tempfile::Builder::new()
        .prefix("audit-home-")
        .tempdir()
        .expect("an empty HOME");
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(home.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod HOME");
    }
    let port = cluster
        .server
        .rsplit_once(':')
        .expect("https://127.0.0.1:PORT")
        .1
        .to_owned();
    let out = Command::new("unshare")
        .args([
            "--mount",
            "--propagation",
            "private",
            "--",
            "sh",
            "-c",
            IN_NAMESPACE,
            "sh",
        ])
        .arg(mount_target())
        .arg(SERVICE_ACCOUNT_DIR)
        .arg(&stage)
        .args([
            "setpriv",
            &format!("--reuid={JOB_USER}"),
            &format!("--regid={JOB_USER}"),
        ])
        .args(["--clear-groups", "--no-new-privs"])
        .arg(webhook_binary())
        .args(["audit", "--output", "json", "--page-size", "2"])
        .env_clear()
        .env("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        .env("HOME", home.path())
        .env("KUBERNETES_SERVICE_HOST", "127.0.0.1")
        .env("KUBERNETES_SERVICE_PORT", &port)
        .output()
        .expect("run unshare");
    std::fs::remove_dir_all(&stage).expect("remove the staging directory");
    assert_eq!(
        std::fs::read_dir(home.path()).expect("read HOME").count(),
        0,
        "HOME stays empty: no kubeconfig was there or written"
    );
    out
}

/// No part of `token` (a JWT's header, or any 16-character run of the token) in
/// `text`; a failure names where, not the text (it would show the token).
fn assert_no_token(token: &str, text: &str, what: &str) {
    if let Some(at) = text.find("eyJ") {
        panic!("a JWT in the {what} at byte {at} ({} bytes)", text.len());
    }
    let chars: Vec<char> = token.chars().collect();
    for (offset, run) in chars.windows(16).enumerate() {
        let run: String = run.iter().collect();
        if let Some(at) = text.find(&run) {
            panic!(
                "the token's characters {offset}..{} in the {what} at byte {at}",
                offset + 16
            );
        }
    }
}

#[tokio::test]
async fn audit_runs_in_cluster_as_the_job_does() {
    require_unshare();
    let before = host_secrets();
    let cluster = TestCluster::start().await;
    let client = cluster.client();
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let post = PostParams::default();

    // Created while the webhook is not registered.
    let labelled = json!({ZONE: "europe-west1-b", REGION: "europe-west1"});
    let mut good = gce_pd("good", "europe-west1-b");
    good.metadata.labels = Some(serde_json::from_value(labelled.clone()).expect("labels"));
    good.spec.as_mut().expect("a spec").node_affinity =
        Some(serde_json::from_value(zone_affinity(GKE_ZONE, "europe-west1-b")).expect("a VolumeNodeAffinity"));
    for pv in [
        gce_pd("bare", "europe-west1-b"),
        gce_pd("bare-too", "europe-west1-c"),
        good,
    ] {
        pvs.create(&post, &pv).await.expect("created");
    }

    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &post,
            &serde_json::from_value(json!({"metadata": {"name": NAMESPACE}})).expect("a Namespace"),
        )
        .await
        .expect("the namespace");
    apply_dir(&client, &workspace_root().join("manifests/webhook/audit"), NAMESPACE).await;
    let token = service_account_token(&client, NAMESPACE, ACCOUNT).await;

    // RBAC is read through an informer: retry until the role is seen.
    let deadline = Instant::now() + Duration::from_secs(20);
    let out = loop {
        let out = audit_in_cluster(&cluster, &token, "read-only");
        if out.status.code() != Some(1) || Instant::now() > deadline {
            break out;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    // Checked first: the messages below show the output.
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_no_token(&token, &stderr, "stderr");
    assert_no_token(&token, &String::from_utf8_lossy(&out.stdout), "report");
    eprintln!("audit in-cluster as {ACCOUNT}:\n{stderr}");
    assert_eq!(out.status.code(), Some(2), "some PV is not fine: {stderr}");
    let rows = report(&out);
    assert_eq!(rows.len(), 3, "every PV, over two pages: {rows:?}");
    assert_eq!(status(&rows, "bare"), "missing-affinity");
    assert_eq!(
        rows["bare"]["missing_affinity"],
        json!([format!("{GKE_ZONE} In [europe-west1-b]")])
    );
    assert_eq!(rows["bare"]["missing_labels"], labelled);
    assert_eq!(status(&rows, "bare-too"), "missing-affinity");
    assert_eq!(status(&rows, "good"), "fine");

    // A ServiceAccount without the role: the apiserver's 403, no report, exit 1.
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), NAMESPACE);
    accounts
        .create(
            &post,
            &serde_json::from_value(json!({"metadata": {"name": UNBOUND}})).expect("a ServiceAccount"),
        )
        .await
        .expect("the unbound ServiceAccount");
    let unbound = service_account_token(&client, NAMESPACE, UNBOUND).await;
    // A new ServiceAccount may take a moment to authenticate (401): retry until 403.
    let deadline = Instant::now() + Duration::from_secs(20);
    let out = loop {
        let out = audit_in_cluster(&cluster, &unbound, "unbound");
        let forbidden = String::from_utf8_lossy(&out.stderr).contains("403");
        if forbidden || Instant::now() > deadline {
            break out;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    for account_token in [&unbound, &token] {
        assert_no_token(account_token, &stderr, "stderr");
        assert_no_token(account_token, &String::from_utf8_lossy(&out.stdout), "stdout");
    }
    eprintln!("audit in-cluster as {UNBOUND}:\n{stderr}");
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let user = format!("system:serviceaccount:{NAMESPACE}:{UNBOUND}");
    assert!(
        stderr.contains("cannot list PersistentVolumes")
            && stderr.contains(&format!("User \"{user}\" cannot list resource \"persistentvolumes\""))
            && stderr.contains("403 Forbidden"),
        "the apiserver's 403 for {user}: {stderr}"
    );
    assert!(
        out.stdout.is_empty(),
        "no report: {}",
        String::from_utf8_lossy(&out.stdout)
    );

    // The mount was private to the audit's process tree.
    assert_eq!(host_secrets(), before, "the host's /var/run/secrets is untouched");
}
