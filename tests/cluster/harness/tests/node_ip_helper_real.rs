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

#[path = "../../../../node-ip-helper/tests/systemd/mod.rs"]
mod systemd;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use cluster_harness::cloud_node_controller::{CloudInstance, CloudNodeController};
use cluster_harness::{
    KubeletOptions, Node as RealNode, NodeOptions, TestCluster, run_ok, workspace_binary, workspace_root,
};
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
        // Every Node registered here without a provider ID finds it.
        name: String::new(),
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
    exit_and_output(&out)
}

/// A finished command's exit status (-1 if killed), stdout and stderr.
fn exit_and_output(out: &std::process::Output) -> (i32, String, String) {
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

/// One cluster for the file: Nodes written as kubelet writes them, then a
/// real kubelet on a real node.
#[tokio::test]
async fn node_ip_helper_before_kubelet_and_the_cloud_node_controller() {
    let cluster = TestCluster::start().await;
    let t0 = Instant::now();
    nodes_as_kubelet_writes_them(&cluster).await;
    let written = t0.elapsed();
    let t1 = Instant::now();
    a_real_node_as_shipped(&cluster).await;
    eprintln!(
        "node_ip_helper_real: Nodes as kubelet writes them {written:.1?}, the real node {:.1?}",
        t1.elapsed()
    );
}

/// The controller on Nodes registered as kubelet registers them.
async fn nodes_as_kubelet_writes_them(cluster: &TestCluster) {
    let instance = instance();
    let dir = tempfile::tempdir().expect("temporary directory");
    let cloud = dir.path().join("cloud.json");
    std::fs::write(&cloud, instance.addresses_json()).expect("write the cloud's addresses");

    // The secondary InternalIP: the controller must keep it and drop the other.
    let good = register(cluster, "node-good", "10.0.1.26").await;
    let stuck = register(cluster, "node-stuck", "192.168.56.10").await;
    let mut controller = CloudNodeController::start(cluster, &instance)
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

    // The next controller is told another instance: these Nodes go first.
    drop(controller);
    for name in ["node-good", "node-stuck"] {
        nodes.delete(name, &Default::default()).await.expect("delete the Node");
    }
}

/// nic0's address in tests/data/node-ip-helper/metadata/gce.json: what the
/// shipped unit (source auto) takes from the metadata service.
const GCE_IP: &str = "10.132.0.7";
/// The address on the node's lowest-metric default route: kubelet's own
/// pick, and what `NODE_IP_HELPER_SOURCE=local` (default.env's example) takes.
const LOCAL_IP: &str = "192.168.56.10";

/// The instance of gce.json, renamed `name` (a GCE VM named as its node,
/// which the GCE CCM finds by that name), as the GCE cloud controller
/// manager lists it (cloud-provider-gcp gce_instances.go, as
/// cloud/src/metadata/gce.rs follows it): per NIC its internal IP, external
/// IPs and first IPv6, the hostname as InternalDNS and Hostname, IPv4 and
/// names before IPv6; and its provider ID as that CCM writes it.
fn gce_instance(name: &str) -> CloudInstance {
    let host = format!("{name}.europe-west1-b.c.my-project.internal");
    let host = host.as_str();
    let address = |kind: &str, ip: &str| (kind.to_owned(), ip.to_owned());
    CloudInstance {
        addresses: vec![
            address("InternalIP", GCE_IP),
            address("ExternalIP", "34.77.1.2"),
            address("InternalIP", "10.200.0.7"),
            address("InternalDNS", host),
            address("Hostname", host),
            address("InternalIP", "2600:1900:4000::7"),
        ],
        provider_id: format!("gce://my-project/europe-west1-b/{name}"),
        zone: "europe-west1-b".into(),
        region: "europe-west1".into(),
        name: name.into(),
    }
}

/// gce.json with the instance named `name`, written into `dir`.
fn gce_metadata_named(name: &str, dir: &Path) -> std::path::PathBuf {
    let fixture = workspace_root().join("tests/data/node-ip-helper/metadata/gce.json");
    let mut scenario: Value =
        serde_json::from_str(&std::fs::read_to_string(&fixture).expect("gce.json")).expect("gce.json is JSON");
    let tree = &mut scenario["tree"];
    tree["computeMetadata/v1/instance/name"] = name.into();
    tree["computeMetadata/v1/instance/hostname"] = format!("{name}.europe-west1-b.c.my-project.internal").into();
    let path = dir.join("gce.json");
    std::fs::write(&path, scenario.to_string()).expect("write the metadata");
    path
}

fn manifest(name: &str) -> String {
    let path = workspace_root().join("manifests/node-ip-helper").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `ip -n NETNS ARGS`.
fn ip(node: &RealNode, args: &str) {
    run_ok(
        Command::new("ip")
            .args(["-n", node.netns()])
            .args(args.split_whitespace()),
    )
    .expect("ip");
}

/// Two interfaces as node-ip-helper/tests/as_shipped.rs builds a node (veth
/// pairs with both ends in the namespace, so nothing leaves it), several
/// addresses per family: eth0 holds the cloud's nic0 address, eth1 the
/// lowest-metric default route.
fn interfaces(node: &RealNode) {
    let nics = [
        (
            "eth0",
            [&format!("{GCE_IP}/20"), "10.132.0.9/20", "fd00:132::7/64"],
            "10.132.0.1",
            100,
        ),
        (
            "eth1",
            [&format!("{LOCAL_IP}/24"), "192.168.56.11/24", "fd00:56::10/64"],
            "192.168.56.1",
            50,
        ),
    ];
    for (nic, addresses, gateway, metric) in nics {
        ip(node, &format!("link add {nic} type veth peer name {nic}p"));
        ip(node, &format!("link set {nic}p up"));
        ip(node, &format!("link set {nic} up"));
        for address in addresses {
            // No duplicate address detection: a tentative address is not usable yet.
            let nodad = if address.contains(':') { " nodad" } else { "" };
            ip(node, &format!("addr add {address} dev {nic}{nodad}"));
        }
        ip(
            node,
            &format!("route add default via {gateway} dev {nic} metric {metric}"),
        );
    }
}

/// The node's `/run`, `/var/lib` and `bin/node-ip-helper`, as
/// systemd/mod.rs's WITH_NODE_PATHS binds them.
fn node_root() -> tempfile::TempDir {
    let root = tempfile::tempdir().expect("temporary directory");
    // The unit's RuntimeDirectory= and StateDirectory=, which systemd makes.
    for dir in ["run/node-ip-helper", "var-lib/node-ip-helper", "bin"] {
        std::fs::create_dir_all(root.path().join(dir)).expect("mkdir");
    }
    std::os::unix::fs::symlink(helper(), root.path().join("bin/node-ip-helper")).expect("symlink the binary");
    root
}

/// The shipped unit's `ExecStart`, run in the node's netns as systemd runs
/// it: its `Environment=`, then `default_env` as /etc/default/node-ip-helper,
/// nothing else of ours; returns the env file it wrote.
fn run_unit(node: &RealNode, root: &Path, default_env: &str) -> String {
    let text = manifest("node-ip-helper.service");
    let unit = systemd::Unit::parse(&text);
    assert_eq!(unit.exec_start[0], "/usr/local/bin/node-ip-helper", "{text}");
    assert_eq!(unit.environment_files, ["/etc/default/node-ip-helper"], "{text}");
    let mut argv = unit.exec_start.clone();
    argv[0] = "node-ip-helper".into();
    let out = node
        .command_in_netns("unshare")
        .args(["--mount", "sh", "-c", systemd::WITH_NODE_PATHS, "sh"])
        .arg(root)
        .args(&argv)
        .env_clear()
        .env("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        .envs(unit.environment_with(default_env))
        .output()
        .expect("run the unit's command");
    assert!(
        out.status.success(),
        "the unit failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_to_string(root.join("run/node-ip-helper/kubelet.env")).expect("the unit wrote kubelet.env")
}

/// kubelet's arguments from the shipped drop-in's `ExecStart`, expanded as
/// systemd does with the env file and kubeadm's variables: the harness
/// passes what KUBELET_KUBECONFIG_ARGS and KUBELET_CONFIG_ARGS hold
/// (`--kubeconfig`, `--config`) itself; KUBELET_KUBEADM_ARGS is what kubeadm
/// writes to kubeadm-flags.env from kubeadm-join.yaml's kubeletExtraArgs.
fn kubelet_args(env_file: &str) -> Vec<String> {
    let drop_in = manifest("20-node-ip-helper.conf");
    let active: Vec<&str> = drop_in
        .lines()
        .filter_map(|line| line.strip_prefix("ExecStart="))
        .filter(|command| !command.is_empty())
        .collect();
    assert_eq!(active.len(), 1, "{drop_in}");
    let join: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(&manifest("kubeadm-join.yaml")).expect("kubeadm-join.yaml");
    let kubeadm: Vec<String> = join["nodeRegistration"]["kubeletExtraArgs"]
        .as_sequence()
        .expect("kubeletExtraArgs")
        .iter()
        .map(|arg| {
            format!(
                "--{}={}",
                arg["name"].as_str().expect("name"),
                arg["value"].as_str().expect("value")
            )
        })
        .collect();
    let mut env = systemd::environment_file(env_file);
    for (name, value) in [
        ("KUBELET_KUBECONFIG_ARGS", String::new()),
        ("KUBELET_CONFIG_ARGS", String::new()),
        ("KUBELET_KUBEADM_ARGS", kubeadm.join(" ")),
        ("KUBELET_EXTRA_ARGS", String::new()),
    ] {
        env.insert(name.into(), value);
    }
    let argv = systemd::expand(active[0], &env);
    assert_eq!(argv[0], "/usr/bin/kubelet", "{argv:?}");
    argv[1..].to_vec()
}

/// `node-ip-helper ARGS` on the node (its netns), as root with nothing of ours set.
fn on_the_node(node: &RealNode, args: &[&str]) -> (i32, String, String) {
    let out = node
        .command_in_netns(helper())
        .args(args)
        .env_remove("KUBECONFIG")
        .output()
        .expect("run node-ip-helper on the node");
    exit_and_output(&out)
}

/// A real node: kubelet v1.37.2 and containerd in a netns with two
/// interfaces and GCE's metadata service on the netns's 169.254.169.254
/// (never the host's). default.env's documented `NODE_IP_HELPER_SOURCE=local`
/// makes the unit take kubelet's own pick, which the cloud does not list:
/// the Node stays tainted and `check --node` says why in the controller's
/// words. Its FIX, followed (default.env as shipped, the unit and kubelet
/// restarted), gives the cloud's address and the controller initializes it.
async fn a_real_node_as_shipped(cluster: &TestCluster) {
    let client = cluster.client();
    let nodes: Api<Node> = Api::all(client.clone());
    let node = RealNode::create(cluster, NodeOptions::default()).expect("the node");
    let name = node.name().to_owned();
    interfaces(&node);
    ip(&node, "addr add 169.254.169.254/32 dev lo");
    let mut python = node.command_in_netns("python3");
    python
        .env("METADATA_FAKE_ADDRESS", "169.254.169.254")
        .env("METADATA_FAKE_PORT", "80");
    let root = node_root();
    let _metadata = test_fakes::MetadataFake::start_with(python, &gce_metadata_named(&name, root.path()));
    // The node's own identity, for check --node (kubelet's file: written
    // again before kubelet first reads it).
    let kubeconfig = cluster
        .user_kubeconfig(&format!("system:node:{name}"), &["system:nodes"])
        .expect("the node's kubeconfig");
    let kubeconfig = kubeconfig.to_str().expect("UTF-8 path");
    let instance = gce_instance(&name);
    let (status, detected, stderr) = on_the_node(&node, &["detect", "--source", "gce", "--output", "json"]);
    assert_eq!(status, 0, "{stderr}");
    let detected: Value = serde_json::from_str(&detected).expect("detect's JSON");
    assert_eq!(
        detected["cloudAddresses"],
        serde_json::from_str::<Value>(&instance.addresses_json()).expect("JSON"),
        "the controller is told what node-ip-helper reads from the metadata service"
    );
    let default_env = manifest("default.env");

    // default.env's example set: kubelet's own pick.
    let local_env = default_env.replace("#NODE_IP_HELPER_SOURCE=local", "NODE_IP_HELPER_SOURCE=local");
    assert_ne!(
        local_env, default_env,
        "default.env documents NODE_IP_HELPER_SOURCE=local"
    );
    let env_file = run_unit(&node, root.path(), &local_env);
    let args = kubelet_args(&env_file);
    assert_eq!(
        args,
        ["--cloud-provider=external".to_owned(), format!("--node-ip={LOCAL_IP}")]
    );
    let t0 = Instant::now();
    node.start_kubelet(KubeletOptions {
        extra_args: args,
        ..Default::default()
    })
    .expect("kubelet starts");
    let registered = node
        .wait_ready(&client, Duration::from_secs(120))
        .await
        .expect("the Node registers and is Ready");
    let ready = t0.elapsed();
    let annotations = registered.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(annotations.get(PROVIDED_NODE_IP).map(String::as_str), Some(LOCAL_IP));
    assert!(tainted(&registered), "{registered:?}");
    assert_eq!(
        addresses(&registered),
        json!([{"type": "InternalIP", "address": LOCAL_IP}, {"type": "Hostname", "address": name}])
    );

    let mut controller = CloudNodeController::start(cluster, &instance)
        .await
        .expect("start cloud-node-controller");
    let syncing = format!("error syncing '{name}'");
    let line = controller
        .wait_for_log_line(&syncing, Duration::from_secs(60))
        .expect("the controller's reason");
    assert!(
        line.contains(&format!(
            "failed to get node address from cloud provider that matches ip: {LOCAL_IP}"
        )),
        "{line}"
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while controller.log().matches(&syncing).count() < 5 {
        controller.running().expect("the controller runs");
        assert!(Instant::now() < deadline, "no retry:\n{}", controller.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let stuck = nodes.get(&name).await.expect("read the Node");
    assert!(tainted(&stuck), "{stuck:?}");

    // On the node, as docs/node-ip-helper.md's debugging step 0 runs it.
    let check = ["check", "--node", &name, "--kubeconfig", kubeconfig, "--source", "auto"];
    let (status, stdout, stderr) = on_the_node(&node, &check);
    assert_eq!(status, 2, "stuck: {stdout}{stderr}");
    let stuck_line = stdout
        .lines()
        .find(|l| l.starts_with("STUCK: "))
        .unwrap_or_else(|| panic!("no STUCK line: {stdout}"));
    let quoted = stuck_line
        .split_once("; its log says: ")
        .map(|(_, rest)| rest)
        .unwrap_or_else(|| panic!("the controller's words are not quoted: {stuck_line}"));
    assert!(
        controller.log().contains(quoted),
        "check quotes {quoted:?}, not in the controller's log"
    );
    let fix = stdout
        .lines()
        .find_map(|l| l.strip_prefix("FIX: "))
        .unwrap_or_else(|| panic!("no FIX line: {stdout}"));
    assert!(
        fix.contains(&format!("({GCE_IP}, 10.200.0.7, 2600:1900:4000::7)"))
            && fix.contains("`systemctl restart node-ip-helper kubelet`"),
        "{fix}"
    );

    // The FIX: default.env as shipped (source auto), then
    // `systemctl restart node-ip-helper kubelet`.
    let env_file = run_unit(&node, root.path(), &default_env);
    let args = kubelet_args(&env_file);
    let provider_id_flag = format!("--provider-id={}", instance.provider_id);
    assert_eq!(
        args,
        [
            "--cloud-provider=external".to_owned(),
            format!("--node-ip={GCE_IP}"),
            provider_id_flag.clone()
        ]
    );
    node.stop_kubelet();
    let t1 = Instant::now();
    node.start_kubelet(KubeletOptions {
        extra_args: args.clone(),
        ..Default::default()
    })
    .expect("kubelet starts again");
    let initialized = wait_for_node(&nodes, &mut controller, &name, "initialized after the fix", |n| {
        !tainted(n) && addresses(n)[0]["address"] == GCE_IP
    })
    .await;
    let initialized_after = t1.elapsed();
    let annotations = initialized.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(annotations.get(PROVIDED_NODE_IP).map(String::as_str), Some(GCE_IP));
    assert_eq!(
        initialized.spec.as_ref().and_then(|s| s.provider_id.as_deref()),
        Some(instance.provider_id.as_str())
    );
    let labels = initialized.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get(ZONE).map(String::as_str), Some("europe-west1-b"));
    let cloud = root.path().join("cloud.json");
    std::fs::write(&cloud, instance.addresses_json()).expect("write the cloud's addresses");
    let (status, predicted, stderr) = node_ip_helper(&[
        "check",
        "--node-ip",
        GCE_IP,
        "--cloud-addresses",
        cloud.to_str().expect("UTF-8 path"),
        "--output",
        "json",
    ]);
    assert_eq!(status, 0, "{predicted}{stderr}");
    let predicted: Value = serde_json::from_str(&predicted).expect("check's JSON");
    assert_eq!(
        addresses(&initialized),
        predicted["addresses"],
        "as check --node-ip predicts"
    );
    let (status, stdout, stderr) = on_the_node(&node, &check);
    assert_eq!(status, 0, "initialized: {stdout}{stderr}");
    assert!(stdout.contains("OK: the node is initialized"), "{stdout}");
    drop(controller);

    // A Node registered with the unit's --provider-id, the controller not
    // yet running: kubelet itself writes spec.providerID, and the node
    // controller, which finds instances by it, initializes the Node.
    let reregister = |args: Vec<String>| async {
        node.stop_kubelet();
        nodes.delete(&name, &Default::default()).await.expect("delete the Node");
        let deadline = Instant::now() + Duration::from_secs(30);
        while nodes.get_opt(&name).await.expect("read the Node").is_some() {
            assert!(Instant::now() < deadline, "the Node is not deleted");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        node.start_kubelet(KubeletOptions {
            extra_args: args,
            ..Default::default()
        })
        .expect("kubelet starts");
        node.wait_ready(&client, Duration::from_secs(120))
            .await
            .expect("the Node registers and is Ready")
    };
    let registered = reregister(args.clone()).await;
    assert_eq!(
        registered.spec.as_ref().and_then(|s| s.provider_id.as_deref()),
        Some(instance.provider_id.as_str()),
        "kubelet registers the Node with the unit's --provider-id"
    );
    assert!(tainted(&registered), "{registered:?}");
    let mut controller = CloudNodeController::start(cluster, &instance)
        .await
        .expect("start cloud-node-controller");
    wait_for_node(&nodes, &mut controller, &name, "initialized by its provider ID", |n| {
        !tainted(n) && addresses(n)[0]["address"] == GCE_IP
    })
    .await;
    drop(controller);

    // Another instance's provider ID (as a hand-written --provider-id would
    // give): the controller finds no instance, and check --node says so in
    // its words; the FIX (delete the Node, restart with the unit's flag)
    // initializes it.
    let other = format!("gce://my-project/europe-west1-c/{name}");
    let wrong: Vec<String> = args
        .iter()
        .map(|a| {
            if *a == provider_id_flag {
                format!("--provider-id={other}")
            } else {
                a.clone()
            }
        })
        .collect();
    let registered = reregister(wrong).await;
    assert_eq!(
        registered.spec.as_ref().and_then(|s| s.provider_id.as_deref()),
        Some(other.as_str())
    );
    let mut controller = CloudNodeController::start(cluster, &instance)
        .await
        .expect("start cloud-node-controller");
    let not_found = format!("failed to get instance metadata for node {name}: instance not found");
    controller
        .wait_for_log_line(&not_found, Duration::from_secs(60))
        .expect("the controller's reason");
    assert!(tainted(&nodes.get(&name).await.expect("read the Node")));
    let (status, stdout, stderr) = on_the_node(&node, &check);
    assert_eq!(status, 2, "stuck: {stdout}{stderr}");
    let stuck_line = stdout
        .lines()
        .find(|l| l.starts_with("STUCK: "))
        .unwrap_or_else(|| panic!("no STUCK line: {stdout}"));
    assert!(
        stuck_line.contains(&format!(
            "spec.providerID is {other}, which names another gce instance than this one ({})",
            instance.provider_id
        )),
        "{stuck_line}"
    );
    let quoted = stuck_line
        .split_once("; its log says: ")
        .map(|(_, rest)| rest)
        .unwrap_or_else(|| panic!("the controller's words are not quoted: {stuck_line}"));
    assert!(
        controller.log().contains(quoted),
        "check quotes {quoted:?}, not in the controller's log"
    );
    let fix = stdout
        .lines()
        .find_map(|l| l.strip_prefix("FIX: "))
        .unwrap_or_else(|| panic!("no FIX line: {stdout}"));
    assert!(
        fix.contains(&format!("`kubectl delete node {name}`"))
            && fix.contains("`systemctl restart node-ip-helper kubelet`"),
        "{fix}"
    );
    // The FIX, through the API as kubectl does it, with the unit's arguments.
    let env_file = run_unit(&node, root.path(), &default_env);
    let fixed = reregister(kubelet_args(&env_file)).await;
    assert_eq!(
        fixed.spec.as_ref().and_then(|s| s.provider_id.as_deref()),
        Some(instance.provider_id.as_str())
    );
    wait_for_node(
        &nodes,
        &mut controller,
        &name,
        "initialized after the identity fix",
        |n| !tainted(n) && addresses(n)[0]["address"] == GCE_IP,
    )
    .await;
    let (status, stdout, stderr) = on_the_node(&node, &check);
    assert_eq!(status, 0, "initialized: {stdout}{stderr}");
    eprintln!(
        "node_ip_helper_real: kubelet Ready {ready:.1?} after start; initialized {initialized_after:.1?} after the fixed kubelet started"
    );
}
