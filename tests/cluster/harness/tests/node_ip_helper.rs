//! `node-ip-helper check --node` against a real kube-apiserver (Node
//! authorizer and NodeRestriction on), reading a Node registered the way
//! kubelet registers one with `--cloud-provider=external`, with that node's
//! own identity (`system:node:NAME`), not only as an admin.

use std::path::Path;
use std::process::Command;

use cluster_harness::{TestCluster, workspace_binary};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams, PostParams};

const NODE: &str = "node-a";

fn helper() -> std::path::PathBuf {
    workspace_binary("node-ip-helper", "NODE_IP_HELPER_BIN")
}

/// `check --node NODE` with `kubeconfig`; exit status and stdout/stderr.
fn check(kubeconfig: &Path, cloud: &Path, extra: &[&str]) -> (i32, String) {
    let out = Command::new(helper())
        .args(["check", "--node", NODE, "--kubeconfig"])
        .arg(kubeconfig)
        .arg("--cloud-addresses")
        .arg(cloud)
        .args(extra)
        .output()
        .expect("run node-ip-helper");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// The Node as kubelet registers it: the uninitialized taint, the provided
/// node IP annotation, and only a Hostname address until the CCM runs.
fn registered_node(provided_ip: &str) -> Node {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": NODE,
            "labels": {"kubernetes.io/hostname": NODE},
            "annotations": {"alpha.kubernetes.io/provided-node-ip": provided_ip},
        },
        "spec": {"taints": [{"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"}]},
    }))
    .expect("node")
}

#[tokio::test]
async fn check_explains_a_stuck_node_with_the_nodes_own_identity() {
    let cluster = TestCluster::start().await;
    let groups = ["system:nodes"];
    let kubelet = cluster
        .user_client(&format!("system:node:{NODE}"), &groups)
        .await
        .expect("node client");
    let node_kubeconfig = cluster
        .user_kubeconfig(&format!("system:node:{NODE}"), &groups)
        .expect("node kubeconfig");

    // kubelet registers its own Node and reports its status (NodeRestriction lets it).
    let nodes: Api<Node> = Api::all(kubelet.clone());
    nodes
        .create(&PostParams::default(), &registered_node("192.168.56.10"))
        .await
        .expect("kubelet registers");
    let status = serde_json::json!({"status": {"addresses": [{"type": "Hostname", "address": NODE}]}});
    nodes
        .patch_status(NODE, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("kubelet reports status");

    let dir = tempfile::tempdir().unwrap();
    let cloud = dir.path().join("cloud.json");
    std::fs::write(
        &cloud,
        r#"[{"type":"InternalIP","address":"10.0.1.25"},{"type":"ExternalIP","address":"203.0.113.10"},{"type":"Hostname","address":"node-a"}]"#,
    )
    .unwrap();

    // The wrong IP: stuck, and the fix names the cloud's address.
    let (status, text) = check(&node_kubeconfig, &cloud, &[]);
    assert_eq!(status, 2, "stuck: {text}");
    assert!(text.contains("Node node-a: provided-node-ip 192.168.56.10"), "{text}");
    assert!(
        text.contains("192.168.56.10 is not among the cloud's addresses"),
        "{text}"
    );
    assert!(
        text.contains("FIX: restart kubelet with --node-ip set to one of the cloud's addresses (10.0.1.25)"),
        "{text}"
    );

    // kubelet restarted with the right IP: the IP is fine, the CCM is missing.
    let annotation =
        serde_json::json!({"metadata": {"annotations": {"alpha.kubernetes.io/provided-node-ip": "10.0.1.25"}}});
    nodes
        .patch(NODE, &PatchParams::default(), &Patch::Merge(&annotation))
        .await
        .expect("kubelet updates its annotation");
    let (status, text) = check(&node_kubeconfig, &cloud, &["--output", "json"]);
    assert_eq!(status, 2, "stuck: {text}");
    let report: serde_json::Value = serde_json::from_str(&text).expect("JSON report");
    assert_eq!(report["node"]["uninitialized"], true);
    assert_eq!(report["diagnosis"]["verdict"], "stuck");
    assert!(
        report["diagnosis"]["reason"]
            .as_str()
            .unwrap()
            .contains("the node IP is not the problem"),
        "{text}"
    );

    // The cloud controller manager initializes it (as an admin would).
    let admin: Api<Node> = Api::all(cluster.client());
    let initialized =
        serde_json::json!({"spec": {"taints": null, "providerID": "aws:///eu-west-1a/i-0123456789abcdef0"}});
    admin
        .patch(NODE, &PatchParams::default(), &Patch::Merge(&initialized))
        .await
        .expect("CCM initializes");
    let (status, text) = check(&node_kubeconfig, &cloud, &[]);
    assert_eq!(status, 0, "{text}");
    assert!(text.contains("OK: the node is initialized"), "{text}");
    assert!(
        text.contains("providerID aws:///eu-west-1a/i-0123456789abcdef0"),
        "{text}"
    );

    // Since Kubernetes 1.32 the Node authorizer lets a node read only its
    // own Node: another node's identity is refused, and the message says why.
    let other = cluster
        .user_kubeconfig("system:node:node-b", &groups)
        .expect("kubeconfig");
    let (status, text) = check(&other, &cloud, &[]);
    assert_eq!(status, 1, "could not check: {text}");
    assert!(text.contains("cannot read Node node-a: forbidden"), "{text}");
    assert!(text.contains("may read only its own Node"), "{text}");

    // A missing Node is named as such.
    let out = Command::new(helper())
        .args(["check", "--node", "node-z", "--kubeconfig"])
        .arg(&cluster.kubeconfig)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cannot read Node node-z: no such Node"), "{stderr}");
}
