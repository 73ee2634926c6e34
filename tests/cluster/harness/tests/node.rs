//! The cluster tier's real node (harness `Node`): containerd 1.6 and kubelet
//! v1.37.2 in a network namespace, registered with the tier's kube-apiserver
//! as `system:node:NAME`. The infrastructure the node tests build on; its
//! control is built in: a pod naming an image the node does not have, with
//! `imagePullPolicy: Never`, must fail with ErrImageNeverPull, so the node
//! really judges images. Costs one TestCluster and one node (≈ 25 s here).

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cluster_harness::{
    KubeletOptions, Node, NodeOptions, PAUSE_IMAGE, TestCluster, kubernetes_version, pod_events, pod_manifest,
    wait_pod_event, wait_pod_running, waiting_reason,
};
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use kube::api::{Api, PostParams};

fn pod(name: &str, node: &str, image: &str) -> Pod {
    serde_json::from_value(pod_manifest(name, node, image, "Never")).expect("pod")
}

fn container_id(pod: &Pod) -> Option<String> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .first()?
        .container_id
        .clone()
}

fn in_pod_subnet(ip: &str) -> bool {
    ip.parse::<Ipv4Addr>().is_ok_and(|ip| ip.octets()[..3] == [10, 244, 0])
}

/// Processes whose command line names `dir` (containerd, kubelet, shims).
fn processes_naming(dir: &Path) -> Vec<String> {
    let needle = dir.display().to_string();
    std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter_map(|e| {
            let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
            let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            text.contains(&needle)
                .then(|| format!("{}: {text}", e.file_name().to_string_lossy()))
        })
        .collect()
}

#[tokio::test]
async fn a_real_node_registers_runs_pods_and_judges_images() {
    // Re-run by a_killed_runs_node_is_swept as the run it kills.
    if std::env::var_os(CHILD_VARIABLE).is_some() {
        return killed_run_child().await;
    }
    let cluster = TestCluster::start().await;
    let client = cluster.client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");

    let t0 = Instant::now();
    let node = Node::create(&cluster, NodeOptions::default()).expect("node");
    let created = t0.elapsed();
    node.start_kubelet(KubeletOptions::default()).expect("kubelet starts");
    let registered = node
        .wait_ready(&client, Duration::from_secs(120))
        .await
        .expect("the Node becomes Ready");
    let ready = t0.elapsed();
    let info = registered.status.and_then(|s| s.node_info).expect("nodeInfo");
    assert_eq!(info.kubelet_version, kubernetes_version());
    assert!(
        info.container_runtime_version.starts_with("containerd://1.6.20"),
        "{}",
        info.container_runtime_version
    );

    // A pod bound to the node by the API (no scheduler), its image local.
    // No kube-controller-manager either: the default ServiceAccount is made here.
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
    let account = serde_json::from_value(serde_json::json!({"metadata": {"name": "default"}})).expect("sa");
    accounts
        .create(&PostParams::default(), &account)
        .await
        .expect("create ServiceAccount default");
    let t1 = Instant::now();
    pods.create(&PostParams::default(), &pod("sleeper", node.name(), PAUSE_IMAGE))
        .await
        .expect("create sleeper");
    let running = wait_pod_running(&client, "default", "sleeper", Duration::from_secs(90))
        .await
        .expect("sleeper runs");
    let to_running = t1.elapsed();
    let ip = running.status.as_ref().and_then(|s| s.pod_ip.clone()).expect("pod IP");
    assert!(in_pod_subnet(&ip), "pod IP {ip} not in 10.244.0.0/24");
    let id = container_id(&running).expect("container ID");
    assert!(id.starts_with("containerd://"), "{id}");

    // The control: an image the node does not have, never pulled.
    pods.create(
        &PostParams::default(),
        &pod("absent", node.name(), "localhost/harness/absent:1"),
    )
    .await
    .expect("create absent");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let pod = pods.get("absent").await.expect("get absent");
        if waiting_reason(&pod).as_deref() == Some("ErrImageNeverPull") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "absent: no ErrImageNeverPull within 60s: {:?}\nevents: {:?}",
            pod.status,
            pod_events(&client, "default", "absent").await
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // kubelet posts events apart from the pod's status: wait for it.
    wait_pod_event(&client, "default", "absent", Duration::from_secs(30), |e| {
        e.starts_with("ErrImageNeverPull:") && e.contains("localhost/harness/absent:1") && e.contains("Never")
    })
    .await
    .expect("absent's ErrImageNeverPull event");

    // kubelet restarts; the pod keeps running in the same container.
    let t2 = Instant::now();
    let before = node.kubelet_log().len();
    node.restart_kubelet().expect("kubelet restarts");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !node.kubelet_log()[before..].contains("SyncLoop ADD") {
        assert!(node.kubelet_exited().is_none(), "kubelet exited after restart");
        assert!(
            Instant::now() < deadline,
            "restarted kubelet did not sync pods within 60s"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let restarted = t2.elapsed();
    // Long enough for a pod worker to have acted on a container it thought gone.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let after = pods.get("sleeper").await.expect("get sleeper");
    assert_eq!(after.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Running"));
    assert_eq!(container_id(&after).as_deref(), Some(id.as_str()), "container replaced");
    let restarts = after
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .map(|c| c[0].restart_count);
    assert_eq!(restarts, Some(0));
    let metrics = node.kubelet_metrics().expect("kubelet /metrics");
    assert!(
        metrics.contains("kubelet_running_pods"),
        "{}",
        &metrics[..metrics.len().min(2000)]
    );

    // Teardown leaves nothing: processes, mounts, cgroups, netns, directory.
    let leftovers = Leftovers::of(&node);
    let t3 = Instant::now();
    drop(node);
    let teardown = t3.elapsed();
    let keep = std::env::var_os("CLUSTER_KEEP_DIR").is_some();
    let left: Vec<String> = leftovers
        .remaining()
        .into_iter()
        .filter(|l| !(keep && l.starts_with("directory")))
        .collect();
    assert_eq!(left, Vec::<String>::new(), "left after the drop");

    // What a killed test process leaves, the next one's sweep removes.
    let t4 = Instant::now();
    a_killed_runs_node_is_swept().await;
    let swept = t4.elapsed();
    eprintln!(
        "node test: node created in {created:.1?}, Ready after {ready:.1?}, pod Running in {to_running:.1?}, \
         kubelet restarted and synced in {restarted:.1?}, torn down in {teardown:.1?}; \
         the killed run's node made and swept in {swept:.1?}"
    );
}

/// Where a node leaves traces: its netns, directory, mounts, cgroups and
/// processes.
struct Leftovers {
    netns: PathBuf,
    dir: PathBuf,
    cgroup: String,
    /// Pod sandboxes, whose CNI results libcni caches in /var/lib/cni/results.
    sandboxes: Vec<String>,
}

impl Leftovers {
    fn of(node: &Node) -> Leftovers {
        Leftovers::named(node.netns(), node.dir(), node.cgroup_root())
    }

    fn named(netns: &str, dir: &Path, cgroup: &str) -> Leftovers {
        let sandboxes: Vec<String> = std::fs::read_dir(dir.join("containerd/root/io.containerd.grpc.v1.cri/sandboxes"))
            .map(|entries| {
                entries
                    .filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        assert!(!sandboxes.is_empty(), "no pod sandbox under {}", dir.display());
        Leftovers {
            netns: Path::new("/run/netns").join(netns),
            dir: dir.to_path_buf(),
            cgroup: cgroup.trim_start_matches('/').to_string(),
            sandboxes,
        }
    }

    /// What of it is still there, one line each.
    fn remaining(&self) -> Vec<String> {
        let mut left = Vec::new();
        if self.netns.exists() {
            left.push(format!("netns {}", self.netns.display()));
        }
        if self.dir.exists() {
            left.push(format!("directory {}", self.dir.display()));
        }
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
        let needle = format!(" {}", self.dir.display());
        left.extend(
            mountinfo
                .lines()
                .filter(|l| l.contains(&needle))
                .map(|l| format!("mount {l}")),
        );
        left.extend(
            std::fs::read_dir("/sys/fs/cgroup")
                .expect("/sys/fs/cgroup")
                .filter_map(|e| e.ok())
                .map(|e| e.path().join(&self.cgroup))
                .filter(|p| p.exists())
                .map(|p| format!("cgroup {}", p.display())),
        );
        left.extend(processes_naming(&self.dir).into_iter().map(|p| format!("process {p}")));
        if let Ok(entries) = std::fs::read_dir("/var/lib/cni/results") {
            left.extend(
                entries
                    .filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|name| self.sandboxes.iter().any(|id| name.contains(id.as_str())))
                    .map(|name| format!("CNI result /var/lib/cni/results/{name}")),
            );
        }
        left
    }
}

/// Kills a child process (this binary running `killed_run_child`) on drop.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A child test process makes a node with a running pod and is SIGKILLed;
/// its node's netns, shims, pods, mounts and cgroups stay (the control),
/// and `sweep_stale_nodes` removes them all.
async fn a_killed_runs_node_is_swept() {
    use std::io::BufRead;
    let log = tempfile::NamedTempFile::new().expect("child log");
    let mut child = Child(
        std::process::Command::new(std::env::current_exe().expect("test binary"))
            .args([
                "a_real_node_registers_runs_pods_and_judges_images",
                "--exact",
                "--nocapture",
            ])
            .env(CHILD_VARIABLE, "1")
            .stdout(std::process::Stdio::piped())
            .stderr(log.reopen().expect("child log"))
            .spawn()
            .expect("start the child"),
    );
    let stdout = child.0.stdout.take().expect("child stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(rest) = line.strip_prefix(CHILD_MARKER) {
                let _ = tx.send(rest.to_string());
            }
        }
    });
    let line = rx.recv_timeout(Duration::from_secs(120)).unwrap_or_else(|_| {
        panic!(
            "the child made no node with a running pod within 120s:\n{}",
            std::fs::read_to_string(log.path()).unwrap_or_default()
        )
    });
    let words: Vec<&str> = line.split_whitespace().collect();
    let [netns, dir, cgroup] = words[..] else {
        panic!("child said {line:?}")
    };
    let leftovers = Leftovers::named(netns, Path::new(dir), cgroup);
    drop(child); // SIGKILL, reaped: its pid is gone
    // The guard has stopped containerd and kubelet; the rest stays.
    let deadline = Instant::now() + Duration::from_secs(10);
    while processes_naming(&leftovers.dir)
        .iter()
        .any(|p| p.contains("kubelet") || p.contains("containerd.toml"))
    {
        assert!(
            Instant::now() < deadline,
            "the guard did not stop containerd and kubelet"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let left = leftovers.remaining();
    for kind in ["netns", "directory", "mount", "cgroup", "process", "CNI result"] {
        assert!(
            left.iter().any(|l| l.starts_with(kind)),
            "the killed run left no {kind}: {left:#?}"
        );
    }
    cluster_harness::node::sweep_stale_nodes();
    assert_eq!(leftovers.remaining(), Vec::<String>::new(), "left after the sweep");
}

const CHILD_VARIABLE: &str = "NODE_TEST_KILLED_RUN_CHILD";
const CHILD_MARKER: &str = "killed-run-child: ";

/// The child run `a_killed_runs_node_is_swept` starts (this binary, this
/// test, CHILD_VARIABLE set) and kills: a node with a running pod, then
/// waiting.
async fn killed_run_child() {
    let cluster = TestCluster::start().await;
    let client = cluster.client();
    let node = Node::create(&cluster, NodeOptions::default()).expect("node");
    node.start_kubelet(KubeletOptions::default()).expect("kubelet");
    node.wait_ready(&client, Duration::from_secs(120)).await.expect("Ready");
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
    let account = serde_json::from_value(serde_json::json!({"metadata": {"name": "default"}})).expect("sa");
    accounts.create(&PostParams::default(), &account).await.expect("sa");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(&PostParams::default(), &pod("sleeper", node.name(), PAUSE_IMAGE))
        .await
        .expect("pod");
    wait_pod_running(&client, "default", "sleeper", Duration::from_secs(90))
        .await
        .expect("running");
    println!(
        "{CHILD_MARKER}{} {} {}",
        node.netns(),
        node.dir().display(),
        node.cgroup_root()
    );
    tokio::time::sleep(Duration::from_secs(600)).await;
}
