//! Helpers shared by the webhook tests: PersistentVolumes built inline, their
//! labels and nodeAffinity as JSON, and waiting until the apiserver calls a
//! newly registered webhook.
#![allow(dead_code)] // each test file uses a different subset

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::PersistentVolume;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

pub const ZONE: &str = "topology.kubernetes.io/zone";
pub const REGION: &str = "topology.kubernetes.io/region";

pub fn pv(name: &str, labels: Value, annotations: Value, spec: Value) -> PersistentVolume {
    let mut spec = spec;
    spec["capacity"] = json!({"storage": "10Gi"});
    spec["accessModes"] = json!(["ReadWriteOnce"]);
    spec["persistentVolumeReclaimPolicy"] = json!("Retain");
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": spec,
    }))
    .unwrap()
}

pub fn gce_pd(name: &str, zone: &str) -> PersistentVolume {
    let handle = format!("projects/P/zones/{zone}/disks/{name}");
    pv(
        name,
        json!({}),
        json!({}),
        json!({"csi": {"driver": "pd.csi.storage.gke.io", "volumeHandle": handle, "fsType": "ext4"}}),
    )
}

pub fn labels(pv: &PersistentVolume) -> Value {
    serde_json::to_value(&pv.metadata.labels).unwrap()
}

pub fn affinity(pv: &PersistentVolume) -> Value {
    let spec = pv.spec.as_ref().unwrap();
    serde_json::to_value(&spec.node_affinity).unwrap()
}

pub fn zone_affinity(key: &str, zone: &str) -> Value {
    json!({"required": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": key, "operator": "In", "values": [zone]}]}
    ]}})
}

pub fn message(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => status.message.clone(),
        other => other.to_string(),
    }
}

/// Dry-run creations until `check` accepts the answer: the apiserver's
/// informer has seen the configuration.
pub async fn wait_until<F>(pvs: &Api<PersistentVolume>, what: &str, check: F)
where
    F: Fn(&Result<PersistentVolume, kube::Error>) -> bool,
{
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    for i in 0.. {
        let answer = pvs.create(&dry, &gce_pd(&format!("probe-{i}"), "europe-west1-b")).await;
        if check(&answer) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: last answer {answer:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub async fn wait_labeled(pvs: &Api<PersistentVolume>) {
    wait_until(pvs, "the webhook never labeled a PV", |a| {
        a.as_ref().is_ok_and(|pv| labels(pv)[ZONE] == "europe-west1-b")
    })
    .await;
}
