//! `pv-topology-webhook audit` against a real kube-apiserver, as the read-only
//! ServiceAccount of `manifests/webhook/audit` (a token from the TokenRequest API in a
//! kubeconfig of its own). PVs created while the webhook is not registered show up
//! as missing labels or nodeAffinity, a lying one as contradicting its disk;
//! `--fix-labels` is refused with the read-only role (naming the missing permission)
//! and, with the optional fix-labels role, adds the labels through the apiserver; a PV
//! recreated through the registered webhook (the migration guide's remedy) is fine.
//! GCE PD handles carry their zone, so no cloud is asked.

mod common;

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use cluster_harness::audit::{account_kubeconfig, apply_dir, report, status};
use cluster_harness::webhook::{register, serve, webhook_binary};
use cluster_harness::{TestCluster, workspace_root};
use common::*;
use k8s_openapi::api::core::v1::{Namespace, PersistentVolume};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const NAMESPACE: &str = "pv-topology-webhook";
const ACCOUNT: &str = "pv-topology-webhook-audit";
const GKE_ZONE: &str = "topology.gke.io/zone";

/// `audit --kubeconfig KUBECONFIG --output json --page-size 2` plus `extra`.
fn audit(kubeconfig: &Path, extra: &[&str]) -> Output {
    Command::new(webhook_binary())
        .arg("audit")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--output", "json", "--page-size", "2"])
        .args(extra)
        .env_remove("KUBECONFIG")
        .output()
        .expect("run pv-topology-webhook audit")
}

fn with_affinity(mut pv: PersistentVolume, zone: &str) -> PersistentVolume {
    pv.spec.as_mut().expect("a spec").node_affinity =
        Some(serde_json::from_value(zone_affinity(GKE_ZONE, zone)).expect("a VolumeNodeAffinity"));
    pv
}

fn with_labels(mut pv: PersistentVolume, labels: Value) -> PersistentVolume {
    pv.metadata.labels = Some(serde_json::from_value(labels).expect("labels"));
    pv
}

/// Deletes the PV object and waits until it is gone; its `pv-protection` finalizer is
/// taken off here, as kube-controller-manager (not running) would for an unbound PV.
async fn delete_pv(pvs: &Api<PersistentVolume>, name: &str) {
    pvs.delete(name, &DeleteParams::default()).await.expect("deleted");
    let unfinalize = json!({"metadata": {"finalizers": null}});
    let deadline = Instant::now() + Duration::from_secs(20);
    while pvs.get_opt(name).await.expect("a GET").is_some() {
        let _ = pvs
            .patch(name, &PatchParams::default(), &Patch::Merge(&unfinalize))
            .await;
        assert!(Instant::now() < deadline, "{name} not deleted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn audit_reports_fixes_labels_and_runs_with_only_its_read_only_role() {
    let cluster = TestCluster::start().await;
    let client = cluster.client();
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let post = PostParams::default();

    // The webhook is not registered: PVs keep what they were created with.
    let labelled = json!({ZONE: "europe-west1-b", REGION: "europe-west1"});
    for pv in [
        gce_pd("bare", "europe-west1-b"),
        with_affinity(gce_pd("affinity-only", "europe-west1-b"), "europe-west1-b"),
        with_labels(gce_pd("lying", "europe-west1-b"), json!({ZONE: "europe-west1-c"})),
        with_affinity(
            with_labels(gce_pd("good", "europe-west1-b"), labelled.clone()),
            "europe-west1-b",
        ),
        pv(
            "nfs",
            json!({}),
            json!({}),
            json!({"nfs": {"server": "192.0.2.1", "path": "/export"}}),
        ),
    ] {
        pvs.create(&post, &pv).await.expect("created");
    }

    // The read-only identity the audit ships with.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &post,
            &serde_json::from_value(json!({"metadata": {"name": NAMESPACE}})).expect("a Namespace"),
        )
        .await
        .expect("the namespace");
    let manifests = workspace_root().join("manifests/webhook/audit");
    apply_dir(&client, &manifests, NAMESPACE).await;
    let kubeconfig = account_kubeconfig(&cluster, NAMESPACE, ACCOUNT).await;

    // RBAC is read through an informer: retry until the role is seen.
    let deadline = Instant::now() + Duration::from_secs(20);
    let out = loop {
        let out = audit(&kubeconfig, &[]);
        if out.status.code() != Some(1) || Instant::now() > deadline {
            break out;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "some PV is not fine: {stderr}");
    assert!(!stderr.contains("eyJ"), "no token in the output: {stderr}");
    let rows = report(&out);
    assert_eq!(rows.len(), 5, "every PV, over three pages: {rows:?}");
    assert_eq!(status(&rows, "bare"), "missing-affinity");
    assert_eq!(
        rows["bare"]["missing_affinity"],
        json!([format!("{GKE_ZONE} In [europe-west1-b]")])
    );
    assert_eq!(rows["bare"]["missing_labels"], labelled);
    assert_eq!(status(&rows, "affinity-only"), "missing-labels");
    assert_eq!(rows["affinity-only"]["missing_labels"], labelled);
    assert_eq!(status(&rows, "lying"), "contradicts");
    let detail = rows["lying"]["detail"].as_str().expect("a detail");
    assert!(
        detail.contains("label topology.kubernetes.io/zone=\"europe-west1-c\", but the disk is in zone europe-west1-b"),
        "{detail}"
    );
    assert_eq!(status(&rows, "good"), "fine");
    assert_eq!(status(&rows, "nfs"), "not-ours");

    // The table names the same.
    let table = Command::new(webhook_binary())
        .arg("audit")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .output()
        .expect("run audit");
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.starts_with("NAME"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("lying ") && l.contains(" contradicts ")),
        "{text}"
    );

    // --fix-labels with the read-only role: refused, naming the missing permission;
    // nothing changed.
    let out = audit(&kubeconfig, &["--fix-labels"]);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    eprintln!("audit --fix-labels with the read-only role:\n{stderr}");
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot patch resource \"persistentvolumes\"")
            && stderr.contains("pv-topology-webhook-audit-fix-labels"),
        "{stderr}"
    );
    assert_eq!(report(&out).len(), 5, "the report is still written");
    assert_eq!(labels(&pvs.get("affinity-only").await.expect("read")), json!(null));

    // With the optional fix-labels role: the labels are added through the apiserver.
    apply_dir(&client, &manifests.join("fix-labels"), NAMESPACE).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let out = loop {
        let out = audit(&kubeconfig, &["--fix-labels"]);
        if out.status.code() != Some(1) || Instant::now() > deadline {
            break out;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(2), "bare still lacks nodeAffinity: {stderr}");
    let rows = report(&out);
    assert_eq!(status(&rows, "affinity-only"), "labels-fixed");
    assert_eq!(status(&rows, "bare"), "missing-affinity");
    assert_eq!(status(&rows, "lying"), "contradicts");
    for name in ["affinity-only", "bare"] {
        assert_eq!(labels(&pvs.get(name).await.expect("read")), labelled, "{name}");
    }
    assert_eq!(
        labels(&pvs.get("lying").await.expect("read")),
        json!({ZONE: "europe-west1-c"}),
        "a contradicting label is not touched"
    );
    let out = audit(&kubeconfig, &[]);
    let rows = report(&out);
    assert_eq!(status(&rows, "affinity-only"), "fine");
    let detail = rows["bare"]["detail"].as_str().expect("a detail");
    assert!(!detail.contains("labels to add"), "{detail}");

    // The remedy for nodeAffinity: recreate the PV object through the webhook.
    let served = serve(&[], &[]);
    register(&client, &served.webhook.url(), &served.ca_bundle, "Fail").await;
    wait_labeled(&pvs).await;
    let mut saved = pvs.get("bare").await.expect("read");
    delete_pv(&pvs, "bare").await;
    saved.metadata.uid = None;
    saved.metadata.resource_version = None;
    saved.metadata.creation_timestamp = None;
    saved.metadata.managed_fields = None;
    saved.metadata.finalizers = None;
    // As the migration guide says: the topology labels go too; the webhook writes them.
    saved.metadata.labels = None;
    saved.status = None;
    let recreated = pvs.create(&post, &saved).await.expect("recreated");
    assert_eq!(affinity(&recreated), zone_affinity(GKE_ZONE, "europe-west1-b"));
    assert_eq!(labels(&recreated), labelled);
    delete_pv(&pvs, "lying").await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let out = loop {
        let out = audit(&kubeconfig, &[]);
        if out.status.code() == Some(0) || Instant::now() > deadline {
            break out;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(0), "all fine: {stderr}");
    let rows = report(&out);
    assert_eq!(status(&rows, "bare"), "fine");
    assert!(!rows.contains_key("lying"));
}
