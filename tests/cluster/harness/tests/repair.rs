//! `pv-topology-webhook repair` against a real kube-apiserver with
//! kube-controller-manager's PV binder and the PV and claim protection controllers
//! running, as the ServiceAccount of `manifests/webhook/repair` (a token in a
//! kubeconfig of its own): PVs created without topology (the webhook not registered)
//! and bound by the binder to claims naming them; one claim used by a pod on the node
//! tier's real kubelet (containerd, runc; kubelet admits the pod and waits for the
//! disk, which nothing here can attach), one claim
//! Pending, one disk whose topology no source gives. The plan changes nothing;
//! `--apply` refuses the used, the Pending and the unresolvable ones with their
//! reasons, and repairs the others: afterwards each claim is Bound to the same volume
//! name, is the same claim (uid), and the PV's spec is the same field by field apart
//! from nodeAffinity, its labels the same apart from the topology, its reclaim policy
//! given back, its CSI handle the same. Then crash safety: for each N, repair is killed
//! (SIGKILL) after its N-th API call (PV_TOPOLOGY_WEBHOOK_REPAIR_PAUSE_AFTER_CALL) and
//! run again, and every time the PV ends repaired and Bound to the same claim, with
//! its reclaim policy given back. GCE PD handles carry their zone: no cloud is asked.

mod common;

use std::io::{BufRead as _, BufReader};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use cluster_harness::audit::{account_kubeconfig, apply_dir, report, status};
use cluster_harness::webhook::{register, register_validating, serve, webhook_binary};
use cluster_harness::{
    KubeletOptions, Node, NodeOptions, PAUSE_IMAGE, TestCluster, pod_manifest, waiting_reason, workspace_root,
};
use k8s_openapi::api::core::v1::{Namespace, PersistentVolume, PersistentVolumeClaim, Pod, ServiceAccount};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

const NAMESPACE: &str = "pv-topology-webhook";
const ACCOUNT: &str = "pv-topology-webhook-repair";
const APPS: &str = "apps";
const GKE_ZONE: &str = "topology.gke.io/zone";
const JOURNAL: &str = "repair.pv-topology-webhook.io/journal";
const PAUSE: &str = "PV_TOPOLOGY_WEBHOOK_REPAIR_PAUSE_AFTER_CALL";
const CONTROLLERS: [&str; 3] = [
    "persistentvolume-binder-controller",
    "persistentvolume-protection-controller",
    "persistentvolumeclaim-protection-controller",
];
const WAIT: Duration = Duration::from_secs(60);

fn object<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("an object")
}

/// A GCE PD CSI PV in europe-west1-b, reclaim policy Delete, with everything an
/// operator sets and no topology; `affinity`: a nodeAffinity of the operator's.
fn hand_made_pv(name: &str, affinity: Option<Value>) -> PersistentVolume {
    let mut spec = json!({
        "capacity": {"storage": "10Gi"},
        "accessModes": ["ReadWriteOnce"],
        "persistentVolumeReclaimPolicy": "Delete",
        "storageClassName": "",
        "mountOptions": ["noatime"],
        "csi": {
            "driver": "pd.csi.storage.gke.io",
            "volumeHandle": format!("projects/p/zones/europe-west1-b/disks/{name}"),
            "fsType": "ext4",
            "volumeAttributes": {"type": "pd-ssd"},
            "nodePublishSecretRef": {"name": "pd-secret", "namespace": "kube-system"},
        },
    });
    if let Some(affinity) = affinity {
        spec["nodeAffinity"] = affinity;
    }
    object(json!({
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {
            "name": name,
            "labels": {"team": "payments"},
            "annotations": {"backup.example.com/schedule": "nightly"},
        },
        "spec": spec,
    }))
}

/// A claim naming its volume (`storage`: what it asks for).
fn claim(name: &str, volume: &str, storage: &str) -> PersistentVolumeClaim {
    object(json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": APPS, "labels": {"app": name}},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": storage}},
            "storageClassName": "",
            "volumeName": volume,
        },
    }))
}

struct Tier {
    cluster: TestCluster,
    pvs: Api<PersistentVolume>,
    claims: Api<PersistentVolumeClaim>,
    kubeconfig: PathBuf,
}

impl Tier {
    async fn start() -> Tier {
        let mut cluster = TestCluster::start().await;
        cluster
            .start_controller_manager(&CONTROLLERS)
            .expect("kube-controller-manager");
        let client = cluster.client();
        let namespaces: Api<Namespace> = Api::all(client.clone());
        for name in [NAMESPACE, APPS] {
            namespaces
                .create(&PostParams::default(), &object(json!({"metadata": {"name": name}})))
                .await
                .expect("a namespace");
        }
        // No ServiceAccount controller runs: the pods' account is made here.
        let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), APPS);
        accounts
            .create(
                &PostParams::default(),
                &object(json!({"metadata": {"name": "default"}})),
            )
            .await
            .expect("the default ServiceAccount");
        apply_dir(&client, &workspace_root().join("manifests/webhook/repair"), NAMESPACE).await;
        let kubeconfig = account_kubeconfig(&cluster, NAMESPACE, ACCOUNT).await;
        Tier {
            pvs: Api::all(client.clone()),
            claims: Api::namespaced(client, APPS),
            cluster,
            kubeconfig,
        }
    }

    /// `pv`, and the claim `name` the binder binds to it; waits until both are Bound.
    async fn bound(&self, pv: PersistentVolume, name: &str) -> (PersistentVolume, PersistentVolumeClaim) {
        let volume = pv.metadata.name.clone().unwrap();
        self.pvs.create(&PostParams::default(), &pv).await.expect("the PV");
        self.claims
            .create(&PostParams::default(), &claim(name, &volume, "10Gi"))
            .await
            .expect("the claim");
        self.wait_bound(&volume, name).await
    }

    async fn wait_bound(&self, volume: &str, name: &str) -> (PersistentVolume, PersistentVolumeClaim) {
        let deadline = Instant::now() + WAIT;
        loop {
            let pv = self.pvs.get_opt(volume).await.expect("a GET");
            let claim = self.claims.get(name).await.expect("the claim");
            if let Some(pv) = pv
                && phase_of(&pv) == "Bound"
                && claim_phase(&claim) == "Bound"
            {
                return (pv, claim);
            }
            assert!(
                Instant::now() < deadline,
                "{volume} and {name} not Bound within {WAIT:?}\n{}",
                self.cluster.logs()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    fn repair_command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(webhook_binary());
        command
            .arg("repair")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["-o", "json", "--wait", "30s"])
            .args(args)
            .env_remove("KUBECONFIG")
            .env_remove(PAUSE);
        command
    }

    fn repair(&self, args: &[&str]) -> Output {
        self.repair_command(args).output().expect("run repair")
    }
}

fn phase_of(pv: &PersistentVolume) -> String {
    pv.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default()
}

fn claim_phase(claim: &PersistentVolumeClaim) -> String {
    claim.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default()
}

fn policy(pv: &PersistentVolume) -> String {
    pv.spec
        .as_ref()
        .and_then(|s| s.persistent_volume_reclaim_policy.clone())
        .unwrap_or_default()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `before` and `after` are the same PV apart from what repair changes: the same
/// spec field by field but nodeAffinity, the same labels but the topology, the same
/// annotations the operator set; the same claim (name, namespace, uid); a new object.
fn assert_repaired(before: &PersistentVolume, after: &PersistentVolume, claim: &PersistentVolumeClaim) {
    let name = before.metadata.name.as_deref().unwrap();
    let (b, a) = (
        serde_json::to_value(before).unwrap(),
        serde_json::to_value(after).unwrap(),
    );
    assert_ne!(a["metadata"]["uid"], b["metadata"]["uid"], "{name}: a new object");
    for field in b["spec"].as_object().unwrap().keys() {
        if field == "nodeAffinity" {
            continue;
        }
        if field == "claimRef" {
            for part in ["kind", "apiVersion", "namespace", "name", "uid"] {
                assert_eq!(
                    a["spec"]["claimRef"][part], b["spec"]["claimRef"][part],
                    "{name}: claimRef.{part}"
                );
            }
            continue;
        }
        assert_eq!(a["spec"][field], b["spec"][field], "{name}: spec.{field}");
    }
    assert_eq!(a["metadata"]["labels"]["team"], "payments", "{name}");
    assert_eq!(
        a["metadata"]["annotations"]["backup.example.com/schedule"], "nightly",
        "{name}"
    );
    assert_eq!(
        a["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"],
        b["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"],
        "{name}"
    );
    assert_eq!(
        a["metadata"]["labels"]["topology.kubernetes.io/zone"], "europe-west1-b",
        "{name}"
    );
    assert_eq!(
        a["metadata"]["labels"]["topology.kubernetes.io/region"], "europe-west1",
        "{name}"
    );
    let terms = a["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
        .as_array()
        .expect("terms")
        .clone();
    assert!(!terms.is_empty(), "{name}");
    for term in &terms {
        let requirements = term["matchExpressions"].as_array().unwrap();
        assert!(
            requirements.contains(&json!({"key": GKE_ZONE, "operator": "In", "values": ["europe-west1-b"]})),
            "{name}: {term}"
        );
        assert!(
            !requirements
                .iter()
                .any(|r| r["key"] == GKE_ZONE && r["values"] != json!(["europe-west1-b"])),
            "{name}: the contradicting requirement is gone: {term}"
        );
    }
    assert_eq!(phase_of(after), "Bound", "{name}");
    assert_eq!(claim_phase(claim), "Bound", "{name}");
    assert_eq!(claim.spec.as_ref().unwrap().volume_name.as_deref(), Some(name));
    assert_eq!(
        claim.metadata.uid.as_deref(),
        before.spec.as_ref().unwrap().claim_ref.as_ref().unwrap().uid.as_deref(),
        "{name}: the same claim"
    );
    assert!(
        claim
            .metadata
            .annotations
            .as_ref()
            .is_none_or(|a| !a.contains_key(JOURNAL)),
        "{name}: the journal is gone"
    );
}

/// Waits until kubelet reports pod `name` waiting in ContainerCreating (admitted,
/// its volumes not yet mounted); returns what it reports.
async fn wait_held_by_kubelet(pods: &Api<Pod>, name: &str) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        let pod = pods.get(name).await.expect("the pod");
        if let Some(reason) = waiting_reason(&pod) {
            assert_eq!(
                reason, "ContainerCreating",
                "kubelet cannot start the pod without its disk"
            );
            let phase = pod.status.and_then(|s| s.phase).unwrap_or_default();
            return format!("{phase}, waiting in {reason}");
        }
        assert!(Instant::now() < deadline, "kubelet never reported pod {name}: {pod:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test]
async fn repair_recreates_bound_pvs_with_their_topology_and_refuses_what_it_must() {
    let tier = Tier::start().await;
    let (plain, _) = tier.bound(hand_made_pv("plain", None), "plain").await;
    // The operator's own requirement stays; the contradicting one goes.
    let wrong = json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": GKE_ZONE, "operator": "In", "values": ["europe-west1-c"]},
        {"key": "node.example.com/pool", "operator": "In", "values": ["db"]},
    ]}]}});
    let (lying, _) = tier.bound(hand_made_pv("lying", Some(wrong)), "lying").await;
    let (used, _) = tier.bound(hand_made_pv("used", None), "used").await;
    // The used claim's pod on the node tier's real kubelet: kubelet admits it and
    // waits for the disk to be attached (no attach/detach controller or PD driver
    // runs here), so the pod holds the claim the way a starting workload does.
    let node = Node::create(&tier.cluster, NodeOptions::default()).expect("the node");
    node.start_kubelet(KubeletOptions::default()).expect("kubelet starts");
    node.wait_ready(&tier.cluster.client(), Duration::from_secs(120))
        .await
        .expect("the Node becomes Ready");
    let pods: Api<Pod> = Api::namespaced(tier.cluster.client(), APPS);
    let mut db = pod_manifest("db-0", node.name(), PAUSE_IMAGE, "Never");
    db["spec"]["containers"][0]["volumeMounts"] = json!([{"name": "data", "mountPath": "/data"}]);
    db["spec"]["volumes"] = json!([{"name": "data", "persistentVolumeClaim": {"claimName": "used"}}]);
    pods.create(&PostParams::default(), &object(db)).await.expect("the pod");
    let held = wait_held_by_kubelet(&pods, "db-0").await;
    eprintln!("repair: pod apps/db-0 on {}: {held}", node.name());
    // A claim naming a volume that does not exist stays Pending; the PV naming the
    // claim stays Available.
    tier.pvs
        .create(&PostParams::default(), &{
            let mut pv = hand_made_pv("pending", None);
            pv.spec.as_mut().unwrap().claim_ref = Some(object(json!({"namespace": APPS, "name": "pending"})));
            pv
        })
        .await
        .expect("the PV");
    tier.claims
        .create(&PostParams::default(), &claim("pending", "missing-pv", "10Gi"))
        .await
        .expect("the claim");
    // Cinder with no OpenStack lookup configured: its disk cannot be resolved.
    let (cinder, _) = tier
        .bound(
            object(json!({
                "apiVersion": "v1", "kind": "PersistentVolume",
                "metadata": {"name": "cinder"},
                "spec": {
                    "capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                    "persistentVolumeReclaimPolicy": "Delete", "storageClassName": "",
                    "cinder": {"volumeID": "0b8a3b6c-0000-4000-8000-00000000c1de"},
                },
            })),
            "cinder",
        )
        .await;

    // The plan: nothing changes. RBAC is read through an informer: retry a moment.
    let deadline = Instant::now() + Duration::from_secs(20);
    let out = loop {
        let out = tier.repair(&["--all"]);
        if out.status.code() != Some(1) || Instant::now() > deadline {
            break out;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(out.status.code(), Some(2), "some PVs are left alone: {}", stderr(&out));
    assert!(!stderr(&out).contains("eyJ"), "no token in the output");
    let rows = report(&out);
    assert_eq!(status(&rows, "plain"), "would-repair");
    assert_eq!(status(&rows, "lying"), "would-repair");
    assert_eq!(rows["plain"]["writtenBy"], "repair", "no webhook is registered");
    assert_eq!(status(&rows, "used"), "left-alone");
    assert!(
        rows["used"]["detail"]
            .as_str()
            .unwrap()
            .contains("in use by pod(s) apps/db-0"),
        "{rows:?}"
    );
    assert_eq!(rows["used"]["pods"], json!(["apps/db-0"]));
    assert_eq!(status(&rows, "pending"), "left-alone");
    assert!(
        rows["pending"]["detail"]
            .as_str()
            .unwrap()
            .contains("claim apps/pending is Pending, not Bound"),
        "{rows:?}"
    );
    assert_eq!(status(&rows, "cinder"), "left-alone");
    assert!(
        rows["cinder"]["detail"].as_str().unwrap().starts_with("left alone: "),
        "{rows:?}"
    );
    for (name, before) in [
        ("plain", &plain),
        ("lying", &lying),
        ("used", &used),
        ("cinder", &cinder),
    ] {
        let now = tier.pvs.get(name).await.expect("still there");
        assert_eq!(
            now.metadata.resource_version, before.metadata.resource_version,
            "{name}: unchanged"
        );
    }

    // Applied.
    let out = tier.repair(&["--all", "--apply"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let rows = report(&out);
    for (name, before) in [("plain", &plain), ("lying", &lying)] {
        assert_eq!(status(&rows, name), "repaired", "{rows:?}\n{}", stderr(&out));
        let after = tier.pvs.get(name).await.expect("the new PV");
        let claim = tier.claims.get(name).await.expect("the claim");
        assert_repaired(before, &after, &claim);
        assert_eq!(policy(&after), "Delete", "{name}: the reclaim policy is given back");
    }
    let lying_after = tier.pvs.get("lying").await.unwrap();
    assert!(
        serde_json::to_string(&lying_after.spec.as_ref().unwrap().node_affinity)
            .unwrap()
            .contains("node.example.com/pool"),
        "the operator's own requirement stays"
    );
    for name in ["used", "pending", "cinder"] {
        assert_eq!(status(&rows, name), "left-alone", "{rows:?}");
    }
    let used_after = tier.pvs.get("used").await.unwrap();
    assert_eq!(used_after.metadata.uid, used.metadata.uid, "the used PV is untouched");
    assert_eq!(policy(&used_after), "Delete");

    // Run again: nothing to do.
    let out = tier.repair(&["--pv", "plain,lying", "--apply"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let rows = report(&out);
    assert_eq!(status(&rows, "plain"), "nothing-to-do");

    // With the webhook registered (both configurations, as shipped), the PV is
    // recreated through it: the dry run shows it writes what repair would.
    let (late, _) = tier.bound(hand_made_pv("late", None), "late").await;
    let client = tier.cluster.client();
    let served = serve(&[], &[]);
    register(&client, &served.webhook.url(), &served.ca_bundle, "Fail").await;
    register_validating(&client, &served.webhook.url(), &served.ca_bundle, "Fail").await;
    common::wait_labeled(&tier.pvs).await;
    let out = tier.repair(&["--pv", "late"]);
    assert_eq!(report(&out)["late"]["writtenBy"], "webhook", "{}", stderr(&out));
    let out = tier.repair(&["--pv", "late", "--apply"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let rows = report(&out);
    assert_eq!(status(&rows, "late"), "repaired");
    assert_eq!(rows["late"]["writtenBy"], "webhook");
    let after = tier.pvs.get("late").await.expect("the new PV");
    assert_repaired(&late, &after, &tier.claims.get("late").await.expect("the claim"));
    assert_eq!(policy(&after), "Delete");
}

/// Runs repair on `name` with the pause after call `n`; kills it (SIGKILL) there.
/// Whether it paused (false: it finished first).
fn killed_after(tier: &Tier, name: &str, n: u32) -> bool {
    let mut child = tier
        .repair_command(&["--pv", name, "--apply"])
        .env(PAUSE, n.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run repair");
    let stderr = child.stderr.take().expect("stderr");
    let mut paused = false;
    for line in BufReader::new(stderr).lines() {
        let line = line.expect("a line of stderr");
        if line.starts_with("repair: paused after API call") {
            paused = true;
            break;
        }
    }
    if paused {
        child.kill().expect("SIGKILL");
    }
    let status = child.wait().expect("repair ends");
    if !paused {
        assert!(status.success() || status.code() == Some(0), "{name}: {status:?}");
    }
    paused
}

#[tokio::test]
async fn a_repair_killed_after_any_api_call_is_finished_by_the_next_run() {
    let tier = Tier::start().await;
    let mut n = 1;
    loop {
        let name = format!("crash-{n}");
        let (before, _) = tier.bound(hand_made_pv(&name, None), &name).await;
        let paused = killed_after(&tier, &name, n);
        if paused {
            // What the kill left: the PV, or the journal that recreates it; a PV being
            // deleted only with Retain (the disk stays).
            let left = tier.pvs.get_opt(&name).await.expect("a GET");
            let claim = tier.claims.get(&name).await.expect("the claim is never deleted");
            let journaled = claim
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(JOURNAL));
            match &left {
                None => assert!(journaled, "after a kill at call {n}: no PV and no journal"),
                Some(pv) if pv.metadata.deletion_timestamp.is_some() => {
                    assert_eq!(policy(pv), "Retain", "after a kill at call {n}: deleted with Delete");
                    assert!(journaled, "after a kill at call {n}: deleting, no journal");
                }
                Some(_) => {}
            }
            // The rerun ends the job.
            let out = tier.repair(&["--pv", &name, "--apply"]);
            assert_eq!(out.status.code(), Some(0), "after a kill at call {n}: {}", stderr(&out));
        }
        let (after, claim) = tier.wait_bound(&name, &name).await;
        assert_repaired(&before, &after, &claim);
        assert_eq!(
            policy(&after),
            "Delete",
            "after a kill at call {n}: the reclaim policy is given back"
        );
        if !paused {
            eprintln!(
                "repair: killed after each of its {} API calls in turn, finished every time",
                n - 1
            );
            assert!(n > 10, "a repair makes more than 10 calls: {n}");
            return;
        }
        n += 1;
        assert!(n < 200, "repair never finished without a pause");
    }
}
