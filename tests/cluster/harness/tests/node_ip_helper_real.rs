//! node-ip-helper against the real cloud node controller: the
//! `k8s.io/cloud-provider` node controller every external cloud controller
//! manager runs (`cloud-node-controller`, on that module's fake cloud, told
//! the instance's addresses), as its own identity with only its role.
//!
//! Nodes registered exactly as kubelet ≥ 1.29 registers one with
//! `--cloud-provider=external --node-ip=X` (as `system:node:NAME`: the
//! uninitialized taint, `alpha.kubernetes.io/provided-node-ip=X`, addresses
//! InternalIP X and Hostname): with X among the cloud's addresses the
//! controller initializes the Node as `node-ip-helper check --node-ip`
//! predicts, and `check --node` says so; with X outside them the taint
//! stays, the controller logs why, and `check --node` says STUCK quoting
//! the controller's own words. One cluster and one controller for the file.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use cluster_harness::cloud_node_controller::{CloudInstance, CloudNodeController};
use cluster_harness::{TestCluster, workspace_binary};
use k8s_openapi::api::core::v1::{Event, Node};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const TAINT: &str = "node.cloudprovider.kubernetes.io/uninitialized";
const PROVIDED_NODE_IP: &str = "alpha.kubernetes.io/provided-node-ip";
const ZONE: &str = "topology.kubernetes.io/zone";
const REGION: &str = "topology.kubernetes.io/region";

/// The instance every node is, to the fake cloud: two InternalIPs (the
/// node IP picks one and drops the other), an ExternalIP and a Hostname.
fn instance() -> CloudInstance {
    let address = |kind: &str, ip: &str| (kind.to_owned(), ip.to_owned());
    CloudInstance {
        addresses: vec![
            address("InternalIP", "10.0.1.25"),
            address("InternalIP", "10.0.1.26"),
            address("ExternalIP", "203.0.113.10"),
            address("Hostname", "instance-1.internal"),
        ],
        provider_id: "fake://instance-1".into(),
        zone: "zone-b".into(),
        region: "region-1".into(),
    }
}

fn helper() -> std::path::PathBuf {
    workspace_binary("node-ip-helper", "NODE_IP_HELPER_BIN")
}

/// `node-ip-helper ARGS`: exit status, stdout, stderr.
fn node_ip_helper(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(helper())
        .args(args)
        .env_remove("KUBECONFIG")
        .output()
        .expect("run node-ip-helper");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The Node kubelet ≥ 1.29 creates with `--cloud-provider=external
/// --node-ip=IP` (kubelet_node_status.go initialNode, nodestatus.NodeAddress):
/// its labels, the attach/detach annotation, the provided node IP, the
/// uninitialized taint, no providerID, addresses InternalIP IP and Hostname.
fn registered(name: &str, node_ip: &str) -> Node {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "beta.kubernetes.io/arch": "amd64",
            },
            "annotations": {
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                PROVIDED_NODE_IP: node_ip,
            },
        },
        "spec": {"taints": [{"key": TAINT, "value": "true", "effect": "NoSchedule"}]},
        "status": {"addresses": [
            {"type": "InternalIP", "address": node_ip},
            {"type": "Hostname", "address": name},
        ]},
    }))
    .expect("a Node")
}

fn tainted(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|taints| taints.iter().any(|t| t.key == TAINT))
}

fn addresses(node: &Node) -> Value {
    json!(
        node.status
            .as_ref()
            .and_then(|s| s.addresses.as_ref())
            .map(|list| list
                .iter()
                .map(|a| json!({"type": a.type_, "address": a.address}))
                .collect::<Vec<_>>())
            .unwrap_or_default()
    )
}

/// Polls the Node until `done` holds (the controller still running).
async fn wait_for_node(
    nodes: &Api<Node>,
    controller: &mut CloudNodeController,
    name: &str,
    what: &str,
    done: impl Fn(&Node) -> bool,
) -> Node {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let node = nodes.get(name).await.expect("read the Node");
        if done(&node) {
            return node;
        }
        controller.running().expect("the controller runs");
        assert!(
            Instant::now() < deadline,
            "Node {name}: not {what} within 60 s: {}",
            serde_json::to_string_pretty(&node).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// kubelet registers the Node as itself; NodeRestriction lets it create its
/// own Node only.
async fn register(cluster: &TestCluster, name: &str, node_ip: &str) -> std::path::PathBuf {
    let user = format!("system:node:{name}");
    let kubelet = cluster
        .user_client(&user, &["system:nodes"])
        .await
        .expect("the node's client");
    Api::<Node>::all(kubelet)
        .create(&PostParams::default(), &registered(name, node_ip))
        .await
        .expect("kubelet registers its Node");
    cluster
        .user_kubeconfig(&user, &["system:nodes"])
        .expect("the node's kubeconfig")
}

/// `check --node NAME` with the node's own kubeconfig and the cloud's
/// addresses in `cloud`.
fn check_node(name: &str, kubeconfig: &Path, cloud: &Path) -> (i32, String, String) {
    node_ip_helper(&[
        "check",
        "--node",
        name,
        "--kubeconfig",
        kubeconfig.to_str().expect("UTF-8 path"),
        "--cloud-addresses",
        cloud.to_str().expect("UTF-8 path"),
    ])
}

#[tokio::test]
async fn the_cloud_node_controller_initializes_only_a_node_whose_ip_the_cloud_reports() {
    let t0 = Instant::now();
    let cluster = TestCluster::start().await;
    let instance = instance();
    let dir = tempfile::tempdir().expect("temporary directory");
    let cloud = dir.path().join("cloud.json");
    std::fs::write(&cloud, instance.addresses_json()).expect("write the cloud's addresses");

    // The secondary InternalIP: the controller must keep it and drop the other.
    let good = register(&cluster, "node-good", "10.0.1.26").await;
    let stuck = register(&cluster, "node-stuck", "192.168.56.10").await;
    let mut controller = CloudNodeController::start(&cluster, &instance)
        .await
        .expect("start cloud-node-controller");
    let nodes: Api<Node> = Api::all(cluster.client());

    // Initialized as node-ip-helper's own model of the controller predicts.
    let node = wait_for_node(&nodes, &mut controller, "node-good", "initialized", |n| !tainted(n)).await;
    let node = if addresses(&node)[0]["address"] == "10.0.1.26" {
        node
    } else {
        // The status patch follows the Update that removed the taint.
        wait_for_node(
            &nodes,
            &mut controller,
            "node-good",
            "given the cloud's addresses",
            |n| addresses(n)[0]["address"] == "10.0.1.26",
        )
        .await
    };
    let spec = node.spec.as_ref().expect("spec");
    assert_eq!(spec.provider_id.as_deref(), Some("fake://instance-1"));
    let labels = node.metadata.labels.as_ref().expect("labels");
    assert_eq!(labels.get(ZONE).map(String::as_str), Some("zone-b"), "{labels:?}");
    assert_eq!(labels.get(REGION).map(String::as_str), Some("region-1"), "{labels:?}");
    let (status, predicted, stderr) = node_ip_helper(&[
        "check",
        "--node-ip",
        "10.0.1.26",
        "--cloud-addresses",
        cloud.to_str().expect("UTF-8 path"),
        "--output",
        "json",
    ]);
    assert_eq!(status, 0, "{predicted}{stderr}");
    let predicted: Value = serde_json::from_str(&predicted).expect("check's JSON");
    assert_eq!(predicted["verdict"], "initializes", "{predicted}");
    assert_eq!(
        addresses(&node),
        predicted["addresses"],
        "the controller set what check --node-ip predicted"
    );
    assert_eq!(
        addresses(&node),
        json!([
            {"type": "InternalIP", "address": "10.0.1.26"},
            {"type": "ExternalIP", "address": "203.0.113.10"},
            {"type": "Hostname", "address": "instance-1.internal"},
        ])
    );
    let (status, stdout, stderr) = check_node("node-good", &good, &cloud);
    assert_eq!(status, 0, "initialized: {stdout}{stderr}");
    assert!(stdout.contains("OK: the node is initialized"), "{stdout}");
    assert!(stdout.contains("providerID fake://instance-1"), "{stdout}");

    // The stuck one: the controller says why in its log, retries, and the
    // taint stays.
    let reason = "failed to get node address from cloud provider that matches ip: 192.168.56.10";
    let line = controller
        .wait_for_log_line(reason, Duration::from_secs(60))
        .expect("the controller's reason");
    eprintln!("cloud-node-controller: {line}");
    let deadline = Instant::now() + Duration::from_secs(60);
    while controller.log().matches("error syncing 'node-stuck'").count() < 5 {
        controller.running().expect("the controller runs");
        assert!(
            Instant::now() < deadline,
            "no retry of node-stuck:\n{}",
            controller.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let node = nodes.get("node-stuck").await.expect("read node-stuck");
    assert!(tainted(&node), "{node:?}");
    assert_eq!(node.spec.as_ref().and_then(|s| s.provider_id.as_deref()), None);
    assert_eq!(
        addresses(&node),
        json!([
            {"type": "InternalIP", "address": "192.168.56.10"},
            {"type": "Hostname", "address": "node-stuck"},
        ]),
        "as kubelet wrote them"
    );

    // check --node: STUCK, naming the cloud's address and quoting the
    // controller's own words, which are in its log as check prints them.
    let (status, stdout, stderr) = check_node("node-stuck", &stuck, &cloud);
    assert_eq!(status, 2, "stuck: {stdout}{stderr}");
    let stuck_line = stdout
        .lines()
        .find(|l| l.starts_with("STUCK: "))
        .unwrap_or_else(|| panic!("no STUCK line: {stdout}"));
    assert!(
        stuck_line.contains("192.168.56.10 is not among the cloud's addresses"),
        "{stuck_line}"
    );
    let quoted = stuck_line
        .split_once("; its log says: ")
        .map(|(_, rest)| rest)
        .unwrap_or_else(|| panic!("the controller's words are not quoted: {stuck_line}"));
    assert!(
        controller.log().contains(quoted),
        "check quotes {quoted:?}, which the controller's log does not hold:\n{}",
        controller.log()
    );
    assert!(
        stdout
            .contains("FIX: restart kubelet with --node-ip set to one of the cloud's addresses (10.0.1.25, 10.0.1.26)"),
        "{stdout}"
    );

    // The controller records an Event only when it succeeds ("Synced"):
    // its reason for a stuck node is in its log alone, which is why check
    // quotes the words rather than reading them from the API.
    let events: Api<Event> = Api::namespaced(cluster.client(), "default");
    let deadline = Instant::now() + Duration::from_secs(30);
    let synced = loop {
        let list = events.list(&ListParams::default()).await.expect("list events");
        let by_controller: Vec<Event> = list
            .items
            .into_iter()
            .filter(|e| e.source.as_ref().and_then(|s| s.component.as_deref()) == Some("cloud-node-controller"))
            .collect();
        if !by_controller.is_empty() {
            break by_controller;
        }
        assert!(Instant::now() < deadline, "no event from cloud-node-controller");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    for event in &synced {
        assert_eq!(event.involved_object.name.as_deref(), Some("node-good"), "{event:?}");
        assert_eq!(event.reason.as_deref(), Some("Synced"), "{event:?}");
    }

    // kubelet restarted with the cloud's address: the controller's back-off
    // retry initializes it.
    let kubelet = cluster
        .user_client("system:node:node-stuck", &["system:nodes"])
        .await
        .expect("client");
    let annotation = json!({"metadata": {"annotations": {PROVIDED_NODE_IP: "10.0.1.25"}}});
    Api::<Node>::all(kubelet)
        .patch("node-stuck", &PatchParams::default(), &Patch::Merge(&annotation))
        .await
        .expect("kubelet updates its annotation");
    let node = wait_for_node(&nodes, &mut controller, "node-stuck", "initialized once fixed", |n| {
        !tainted(n) && addresses(n)[0]["address"] == "10.0.1.25"
    })
    .await;
    assert_eq!(
        node.spec.as_ref().and_then(|s| s.provider_id.as_deref()),
        Some("fake://instance-1")
    );
    let (status, stdout, stderr) = check_node("node-stuck", &stuck, &cloud);
    assert_eq!(status, 0, "initialized: {stdout}{stderr}");
    eprintln!("node_ip_helper_real: {:.1?}", t0.elapsed());
}
