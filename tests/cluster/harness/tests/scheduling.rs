//! The webhook's purpose, end to end: a real kube-scheduler and
//! kube-controller-manager (only its PersistentVolume binder) run against the
//! test apiserver, with Node objects in the three zones of us-central1 (or of
//! eastus, for Azure) (no kubelet: the test sets their status through the
//! API, the scheduler binds pods through the API, and nothing runs them). PVs
//! for GCE PDs and Azure managed disks are created through the apiserver with
//! `pv-topology-webhook serve` registered as in `webhook.rs` (zones from the
//! handle or a rules file, or looked up in Compute Engine or Azure Resource
//! Manager, the fakes of Google's and Azure's APIs standing in for them); a
//! PVC binds to each, and the scheduler places the Pod that uses it.
//!
//! The nodes' resources make each outcome certain: zones a and b (1 and 2)
//! have 2 CPUs, zone c (3) has 8. A pod asking 100m goes to zone c, the
//! scheduler's favourite, unless a filter rules c out (shown by a pod without
//! a volume); a pod asking 4 CPUs fits zone c only.

mod common;

use std::time::{Duration, Instant};

use cluster_harness::TestCluster;
use cluster_harness::webhook::{Served, register, serve};
use common::*;
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, ServiceAccount};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use test_fakes::azure::azure_data;
use test_fakes::{AzureFake, GcpFake};

const REGION_NAME: &str = "us-central1";
/// The PD CSI driver's own topology key: the webhook's nodeAffinity for
/// `pd.csi.storage.gke.io` names it, and GKE nodes carry it.
const GKE_ZONE: &str = "topology.gke.io/zone";
/// The Azure Disk CSI driver's topology key: the webhook's nodeAffinity for
/// `disk.csi.azure.com` names it, and the driver's nodes report it.
const AZURE_ZONE: &str = "topology.disk.csi.azure.com/zone";

/// Where a test's nodes are: `{prefix}-{suffix}` in zone `{name}-{suffix}` for
/// each of the three suffixes (the first two with 2 CPUs, the third with 8),
/// labelled with the zone and region and the CSI driver's zone key.
struct Region {
    name: &'static str,
    zones: [&'static str; 3],
    csi_zone_key: &'static str,
}

const US_CENTRAL1: Region = Region {
    name: REGION_NAME,
    zones: ["a", "b", "c"],
    csi_zone_key: GKE_ZONE,
};

/// Azure's zones as cloud-provider-azure labels nodes (`eastus-1`…).
const EASTUS: Region = Region {
    name: "eastus",
    zones: ["1", "2", "3"],
    csi_zone_key: AZURE_ZONE,
};
const NAMESPACE: &str = "scheduling";
/// Each PV carries `scheduling-test/pv: <its name>`; its claim selects it.
const PV_LABEL: &str = "scheduling-test/pv";
/// The base configuration's objectSelector: a PV labelled so is never sent.
const SKIP: &str = "pv-topology-webhook.io/skip";
const BINDER: &str = "persistentvolume-binder-controller";
const WAIT: Duration = Duration::from_secs(60);

/// A cluster with a scheduler, the PV binder, three zones' nodes
/// (`{prefix}-a`, `-b`, `-c`, or a [`Region`]'s) and the webhook registered
/// (failurePolicy Fail).
struct Zoned {
    served: Served,
    client: kube::Client,
    prefix: &'static str,
    // Last: dropped after the webhook.
    _cluster: TestCluster,
}

impl Zoned {
    /// The webhook with `--rules tests/data/cluster/scheduling-rules.yaml`.
    async fn start(prefix: &'static str) -> Zoned {
        let rules = cluster_harness::workspace_root().join("tests/data/cluster/scheduling-rules.yaml");
        Self::start_webhook(prefix, &["--rules", rules.to_str().unwrap()], &[]).await
    }

    /// The webhook with `args` and `env`.
    async fn start_webhook(prefix: &'static str, args: &[&str], env: &[(&str, &str)]) -> Zoned {
        Self::start_in(prefix, &US_CENTRAL1, args, env).await
    }

    /// The nodes in `region`, the webhook with `args` and `env`.
    async fn start_in(prefix: &'static str, region: &Region, args: &[&str], env: &[(&str, &str)]) -> Zoned {
        let t0 = Instant::now();
        let mut cluster = TestCluster::start().await;
        cluster.start_scheduler().expect("kube-scheduler");
        cluster
            .start_controller_manager(&[BINDER])
            .expect("kube-controller-manager");
        let client = cluster.client();
        for (zone, cpu) in region.zones.into_iter().zip(["2", "2", "8"]) {
            create_node(&client, &format!("{prefix}-{zone}"), region, zone, cpu).await;
        }
        // No ServiceAccount controller runs: the pods' service account is made here.
        let namespaces: Api<Namespace> = Api::all(client.clone());
        namespaces
            .create(
                &PostParams::default(),
                &object(json!({"metadata": {"name": NAMESPACE}})),
            )
            .await
            .unwrap();
        let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), NAMESPACE);
        accounts
            .create(
                &PostParams::default(),
                &object(json!({"metadata": {"name": "default"}})),
            )
            .await
            .unwrap();

        let served = serve(args, env);
        register(&client, &served.webhook.url(), &served.ca_bundle, "Fail").await;
        wait_labeled(&Api::all(client.clone())).await;
        eprintln!(
            "scheduling: {prefix}: cluster, scheduler, binder, nodes and webhook in {:.1?}",
            t0.elapsed()
        );
        Zoned {
            served,
            client,
            prefix,
            _cluster: cluster,
        }
    }

    fn node(&self, zone: &str) -> String {
        format!("{}-{zone}", self.prefix)
    }

    fn pvs(&self) -> Api<PersistentVolume> {
        Api::all(self.client.clone())
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), NAMESPACE)
    }

    /// Creates a PV for the GCE PD CSI `handle` (with `labels` besides its
    /// claim's) and waits until the binder has seen it; the PV as the
    /// apiserver stored it.
    async fn create_pv(&self, name: &str, handle: &str, labels: Value) -> PersistentVolume {
        let spec = json!({"csi": {"driver": "pd.csi.storage.gke.io", "volumeHandle": handle, "fsType": "ext4"}});
        self.create_pv_of(name, spec, labels).await
    }

    /// [`Zoned::create_pv`] for any volume source `spec`.
    async fn create_pv_of(&self, name: &str, spec: Value, labels: Value) -> PersistentVolume {
        let mut labels = labels;
        labels[PV_LABEL] = json!(name);
        let stored = self
            .pvs()
            .create(&PostParams::default(), &pv(name, labels, json!({}), spec))
            .await
            .unwrap();
        // The binder matches claims to Available volumes only, and a claim it
        // could not bind waits for its next sync (15 s): the claim comes after.
        let deadline = Instant::now() + WAIT;
        loop {
            let phase = self.pvs().get(name).await.unwrap().status.and_then(|s| s.phase);
            if phase.as_deref() == Some("Available") {
                return stored;
            }
            assert!(Instant::now() < deadline, "PV {name} never Available: {phase:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Creates the claim `name` selecting the PV `pv` and waits until the
    /// binder has bound them.
    async fn bind_claim(&self, name: &str, pv: &str) {
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), NAMESPACE);
        let claim = object(json!({
            "metadata": {"name": name},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "",
                "resources": {"requests": {"storage": "1Gi"}},
                "selector": {"matchLabels": {PV_LABEL: pv}},
            },
        }));
        claims.create(&PostParams::default(), &claim).await.unwrap();
        let deadline = Instant::now() + WAIT;
        loop {
            let claim = claims.get(name).await.unwrap();
            let phase = claim.status.as_ref().and_then(|s| s.phase.clone());
            if phase.as_deref() == Some("Bound") {
                let bound = claim.spec.as_ref().and_then(|s| s.volume_name.clone());
                assert_eq!(bound.as_deref(), Some(pv), "claim {name}");
                let volume = self.pvs().get(pv).await.unwrap();
                let phase = volume.status.and_then(|s| s.phase);
                assert_eq!(phase.as_deref(), Some("Bound"), "PV {pv}");
                return;
            }
            assert!(Instant::now() < deadline, "claim {name} not bound to {pv}: {phase:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Creates the pod `name` asking `cpu`, with the claim `claim` mounted if any.
    async fn create_pod(&self, name: &str, claim: Option<&str>, cpu: &str) {
        let mut container = json!({
            "name": "app",
            "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}},
        });
        let mut spec = json!({"containers": []});
        if let Some(claim) = claim {
            container["volumeMounts"] = json!([{"name": "data", "mountPath": "/data"}]);
            spec["volumes"] = json!([{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]);
        }
        spec["containers"] = json!([container]);
        let pod = object(json!({"metadata": {"name": name}, "spec": spec}));
        self.pods().create(&PostParams::default(), &pod).await.unwrap();
    }

    /// The node the scheduler bound the pod to.
    async fn scheduled(&self, name: &str) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let pod = self.pods().get(name).await.unwrap();
            if let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) {
                return node;
            }
            assert!(
                Instant::now() < deadline,
                "pod {name} never bound: {:?}",
                scheduled_condition(&pod)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The scheduler's message once it has found no node for the pod.
    async fn unschedulable(&self, name: &str) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let pod = self.pods().get(name).await.unwrap();
            let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
            assert_eq!(node, None, "pod {name} was bound");
            if let Some((status, reason, message)) = scheduled_condition(&pod)
                && status == "False"
            {
                assert_eq!(reason, "Unschedulable", "{message}");
                return message;
            }
            assert!(Instant::now() < deadline, "pod {name}: no scheduling attempt");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

fn object<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).unwrap()
}

/// A Node as kubelet would register it in `region`'s zone `{name}-{suffix}`
/// (zone, region and the CSI driver's zone label), made Ready with `cpu`
/// CPUs, 8Gi and 110 pods through the status subresource. Nothing runs the
/// node lifecycle controller, which would lift the
/// `node.kubernetes.io/not-ready` taint the apiserver's admission puts on a
/// new node: the test lifts it.
async fn create_node(client: &kube::Client, name: &str, region: &Region, suffix: &str, cpu: &str) {
    let nodes: Api<Node> = Api::all(client.clone());
    let zone = format!("{}-{suffix}", region.name);
    let node: Node = object(json!({"metadata": {"name": name, "labels": {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        ZONE: zone,
        REGION: region.name,
        region.csi_zone_key: zone,
    }}}));
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let resources = json!({"cpu": cpu, "memory": "8Gi", "pods": "110"});
    let status = json!({"status": {
        "capacity": resources,
        "allocatable": resources,
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "set by the test"}],
    }});
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    let untainted = json!({"spec": {"taints": null}});
    nodes
        .patch(name, &PatchParams::default(), &Patch::Merge(&untainted))
        .await
        .unwrap();
}

/// The pod's PodScheduled condition: status, reason, message.
fn scheduled_condition(pod: &Pod) -> Option<(String, String, String)> {
    let conditions = pod.status.as_ref()?.conditions.as_ref()?;
    let c = conditions.iter().find(|c| c.type_ == "PodScheduled")?;
    Some((
        c.status.clone(),
        c.reason.clone().unwrap_or_default(),
        c.message.clone().unwrap_or_default(),
    ))
}

#[tokio::test]
async fn a_pod_is_bound_only_to_nodes_in_its_volumes_zones() {
    let z = Zoned::start("follow").await;
    let (a, b, c) = (z.node("a"), z.node("b"), z.node("c"));

    // Without a volume, the scheduler prefers zone c (the most free CPU).
    z.create_pod("no-volume", None, "100m").await;
    assert_eq!(z.scheduled("no-volume").await, c);

    // A zonal PD in us-central1-a: labelled and pinned by the webhook, bound by
    // the binder, and its pod goes to the one node of that zone.
    let stored = z
        .create_pv(
            "follow-zonal",
            "projects/P/zones/us-central1-a/disks/follow-zonal",
            json!({}),
        )
        .await;
    assert_eq!(labels(&stored)[ZONE], "us-central1-a");
    assert_eq!(labels(&stored)[REGION], REGION_NAME);
    assert_eq!(affinity(&stored), zone_affinity(GKE_ZONE, "us-central1-a"));
    z.bind_claim("zonal", "follow-zonal").await;
    z.create_pod("zonal", Some("zonal"), "100m").await;
    assert_eq!(z.scheduled("zonal").await, a, "the zonal PD's pod left its zone");

    // A regional PD replicated to zones a and b (the rules file): its pod goes
    // to one of their nodes, never to zone c.
    let stored = z
        .create_pv(
            "follow-regional",
            "projects/P/regions/us-central1/disks/follow-regional",
            json!({}),
        )
        .await;
    assert_eq!(labels(&stored)[ZONE], "us-central1-a__us-central1-b");
    assert_eq!(
        affinity(&stored),
        json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": GKE_ZONE, "operator": "In", "values": ["us-central1-a", "us-central1-b"]}
        ]}]}})
    );
    z.bind_claim("regional", "follow-regional").await;
    z.create_pod("regional", Some("regional"), "100m").await;
    let node = z.scheduled("regional").await;
    assert!(
        node == a || node == b,
        "the regional PD's pod went to {node}, outside zones a and b"
    );
}

#[tokio::test]
async fn without_the_webhook_a_pod_lands_in_a_zone_its_disk_is_not_in() {
    let z = Zoned::start("skip").await;
    let c = z.node("c");

    // A zonal PD in us-central1-a that opted out of the webhook: never sent to
    // it (its request counter does not move), stored without topology.
    let before = z.served.webhook.requests();
    let stored = z
        .create_pv(
            "skip-unlabelled",
            "projects/P/zones/us-central1-a/disks/skip-unlabelled",
            json!({SKIP: "true"}),
        )
        .await;
    assert_eq!(z.served.webhook.requests(), before, "the skipped PV was sent");
    assert_eq!(labels(&stored), json!({SKIP: "true", PV_LABEL: "skip-unlabelled"}));
    assert_eq!(affinity(&stored), Value::Null);
    z.bind_claim("unlabelled", "skip-unlabelled").await;
    // A pod asking 4 CPUs fits zone c only, and nothing stops it going there:
    // bound to a node whose zone cannot attach its disk (in production, stuck
    // in ContainerCreating).
    z.create_pod("unlabelled", Some("unlabelled"), "4").await;
    assert_eq!(z.scheduled("unlabelled").await, c);

    // The same disk and pod with the webhook: the PV is pinned to zone a, and
    // the scheduler leaves the pod Pending instead of binding it to zone c.
    let stored = z
        .create_pv(
            "skip-labelled",
            "projects/P/zones/us-central1-a/disks/skip-labelled",
            json!({}),
        )
        .await;
    assert_eq!(affinity(&stored), zone_affinity(GKE_ZONE, "us-central1-a"));
    z.bind_claim("labelled", "skip-labelled").await;
    z.create_pod("labelled", Some("labelled"), "4").await;
    // Zone c has the room but not the disk; zones a and b have neither room
    // nor, for b, the disk (the first filter a node fails is the one counted).
    let message = z.unschedulable("labelled").await;
    assert!(message.contains("0/3 nodes are available"), "{message}");
    assert!(
        message.contains("1 node(s) didn't match PersistentVolume's node affinity"),
        "{message}"
    );
    assert!(message.contains("2 Insufficient cpu"), "{message}");
}

/// The webhook looking disks up in Compute Engine (`serve --gce-lookup`, no
/// rules) against the fake of Google's APIs (tests/fakes/gcp_server.py: the
/// metadata server and Compute on one loopback port). The two disks exist
/// only there: an in-tree `gcePersistentDisk` naming just its disk, and a
/// regional PD CSI handle naming just its region, so their zones can come
/// from nowhere but `disks.get` and `regionDisks.get`.
#[tokio::test]
async fn disks_looked_up_in_compute_keep_their_pods_in_their_zones() {
    const PROJECT: &str = "demo-project";
    let fake = GcpFake::with(|scenario| {
        let compute = &mut scenario["compute"];
        compute["regions"] = json!({REGION_NAME: ["us-central1-a", "us-central1-b", "us-central1-c"]});
        compute["disks"] = json!([{"project": PROJECT, "zone": "us-central1-b", "name": "lookup-zonal"}]);
        compute["regionDisks"] = json!([{"project": PROJECT, "region": REGION_NAME, "name": "lookup-regional",
                                         "replicaZones": ["us-central1-a", "us-central1-b"]}]);
    });
    let compute = format!("--gce-compute-endpoint={}compute/v1/", fake.base());
    let z = Zoned::start_webhook(
        "lookup",
        &["--gce-lookup", &compute],
        &[("GCE_METADATA_HOST", &fake.host())],
    )
    .await;
    let (a, b) = (z.node("a"), z.node("b"));
    let disk_get = |zone: &str, name: &str| format!("GET /compute/v1/projects/{PROJECT}/zones/{zone}/disks/{name}");
    let region_disk_get = |name: &str| format!("GET /compute/v1/projects/{PROJECT}/regions/{REGION_NAME}/disks/{name}");

    // In-tree, by name only: looked for in the region and each of its zones
    // (project and region from the metadata server, zones from regions.get),
    // found in zone b alone.
    let in_tree = json!({"gcePersistentDisk": {"pdName": "lookup-zonal", "fsType": "ext4"}});
    let stored = z.create_pv_of("lookup-zonal", in_tree, json!({})).await;
    assert_eq!(labels(&stored)[ZONE], "us-central1-b");
    assert_eq!(labels(&stored)[REGION], REGION_NAME);
    assert_eq!(
        affinity(&stored),
        json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": ZONE, "operator": "In", "values": ["us-central1-b"]},
            {"key": REGION, "operator": "In", "values": [REGION_NAME]}
        ]}]}})
    );
    for zone in ["us-central1-a", "us-central1-b", "us-central1-c"] {
        assert_eq!(fake.requests(&disk_get(zone, "lookup-zonal")), 1, "{zone}");
    }
    assert_eq!(fake.requests(&region_disk_get("lookup-zonal")), 1);
    z.bind_claim("zonal", "lookup-zonal").await;
    z.create_pod("zonal", Some("zonal"), "100m").await;
    assert_eq!(z.scheduled("zonal").await, b, "the zonal PD's pod left its zone");

    // A regional PD CSI handle: regionDisks.get gives its replica zones, the
    // label joins them, and ONE In term on the driver's key holds both.
    let stored = z
        .create_pv(
            "lookup-regional",
            &format!("projects/{PROJECT}/regions/{REGION_NAME}/disks/lookup-regional"),
            json!({}),
        )
        .await;
    assert_eq!(labels(&stored)[ZONE], "us-central1-a__us-central1-b");
    assert_eq!(labels(&stored)[REGION], REGION_NAME);
    assert_eq!(
        affinity(&stored),
        json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": GKE_ZONE, "operator": "In", "values": ["us-central1-a", "us-central1-b"]}
        ]}]}})
    );
    assert_eq!(fake.requests(&region_disk_get("lookup-regional")), 1);
    z.bind_claim("regional", "lookup-regional").await;
    z.create_pod("regional", Some("regional"), "100m").await;
    let node = z.scheduled("regional").await;
    assert!(
        node == a || node == b,
        "the regional PD's pod went to {node}, outside zones a and b"
    );
}

/// The webhook looking Azure managed disks up in Resource Manager (`serve
/// --azure-disk-lookup`, no rules) against the Azure fake
/// (tests/fakes/azure_server.py: IMDS for the managed identity's token and
/// ARM `Disks.Get` on one loopback port; never 169.254.169.254), with nodes
/// in eastus's zones 1, 2 and 3 labelled as cloud-provider-azure and the
/// Azure Disk CSI driver label them. A disk's URI names no place: its zone
/// can come from `Disks.Get` alone (pvc-zonal in zone 2, pvc-zrs
/// zone-redundant, in tests/data/azure/scenario.json).
#[tokio::test]
async fn azure_disks_looked_up_in_resource_manager_keep_their_pods_in_their_zones() {
    const SUBSCRIPTION: &str = "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee";
    const GROUP: &str = "MC_demo_demo_eastus";
    const DRIVER: &str = "disk.csi.azure.com";
    let uri = |name: &str| {
        format!("/subscriptions/{SUBSCRIPTION}/resourceGroups/{GROUP}/providers/Microsoft.Compute/disks/{name}")
    };
    let fake = AzureFake::start();
    let base = fake.base();
    let config = format!("--azure-config={}", azure_data("managed-identity.json").display());
    let endpoints = [
        format!("--azure-arm-endpoint={base}"),
        format!("--azure-authority-endpoint={base}"),
        format!("--azure-imds-endpoint={base}"),
    ];
    let mut args = vec!["--azure-disk-lookup", config.as_str()];
    args.extend(endpoints.iter().map(String::as_str));
    // The node's managed identity, not Azure Workload Identity's variables.
    let env = [
        ("AZURE_CLIENT_ID", ""),
        ("AZURE_TENANT_ID", ""),
        ("AZURE_CLIENT_SECRET", ""),
        ("AZURE_FEDERATED_TOKEN_FILE", ""),
    ];
    let z = Zoned::start_in("azure", &EASTUS, &args, &env).await;
    let (two, three) = (z.node("2"), z.node("3"));
    let disk_get = |name: &str| format!("GET {}", uri(name));

    // In-tree azureDisk (a managed disk: kind Managed, which the apiserver
    // requires of a /subscriptions/ URI): the zone eastus-2 and the region
    // from the disk, and the in-tree nodeAffinity on both.
    let in_tree = json!({"azureDisk": {"diskName": "pvc-zonal", "diskURI": uri("pvc-zonal"), "kind": "Managed",
                                       "cachingMode": "ReadOnly", "fsType": "ext4"}});
    let stored = z.create_pv_of("azure-in-tree", in_tree, json!({})).await;
    assert_eq!(labels(&stored)[ZONE], "eastus-2");
    assert_eq!(labels(&stored)[REGION], "eastus");
    assert_eq!(
        affinity(&stored),
        json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": ZONE, "operator": "In", "values": ["eastus-2"]},
            {"key": REGION, "operator": "In", "values": ["eastus"]}
        ]}]}})
    );
    assert_eq!(fake.requests(&disk_get("pvc-zonal")), 1);
    z.bind_claim("in-tree", "azure-in-tree").await;
    z.create_pod("in-tree", Some("in-tree"), "100m").await;
    assert_eq!(z.scheduled("in-tree").await, two, "the zonal disk's pod left its zone");

    // The same disk as a CSI handle: the driver's key, the zone only; one
    // cache entry for both forms, so no second call.
    let csi = |name: &str| json!({"csi": {"driver": DRIVER, "volumeHandle": uri(name), "fsType": "ext4"}});
    let stored = z.create_pv_of("azure-csi", csi("pvc-zonal"), json!({})).await;
    assert_eq!(labels(&stored)[ZONE], "eastus-2");
    assert_eq!(labels(&stored)[REGION], "eastus");
    assert_eq!(affinity(&stored), zone_affinity(AZURE_ZONE, "eastus-2"));
    assert_eq!(fake.requests(&disk_get("pvc-zonal")), 1);
    z.bind_claim("csi", "azure-csi").await;
    z.create_pod("csi", Some("csi"), "100m").await;
    assert_eq!(z.scheduled("csi").await, two, "the zonal disk's pod left its zone");

    // A zone-redundant disk (StandardSSD_ZRS): the region only, and as CSI no
    // nodeAffinity at all (never an empty zone), so its pod goes where the
    // scheduler prefers, zone 3.
    let stored = z.create_pv_of("azure-zrs", csi("pvc-zrs"), json!({})).await;
    assert_eq!(labels(&stored), json!({REGION: "eastus", PV_LABEL: "azure-zrs"}));
    assert_eq!(affinity(&stored), Value::Null);
    assert_eq!(fake.requests(&disk_get("pvc-zrs")), 1);
    z.bind_claim("zrs", "azure-zrs").await;
    z.create_pod("zrs", Some("zrs"), "100m").await;
    assert_eq!(z.scheduled("zrs").await, three);
    // In-tree, the same disk: the region label and the region requirement
    // alone (from the cache: one call for both forms).
    let in_tree = json!({"azureDisk": {"diskName": "pvc-zrs", "diskURI": uri("pvc-zrs"), "kind": "Managed"}});
    let stored = z.create_pv_of("azure-zrs-in-tree", in_tree, json!({})).await;
    assert_eq!(
        labels(&stored),
        json!({REGION: "eastus", PV_LABEL: "azure-zrs-in-tree"})
    );
    assert_eq!(
        affinity(&stored),
        json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": REGION, "operator": "In", "values": ["eastus"]}
        ]}]}})
    );
    assert_eq!(fake.requests(&disk_get("pvc-zrs")), 1);
    // The managed identity's one token served every call.
    assert_eq!(fake.requests("GET /metadata/identity/oauth2/token"), 1);
}
