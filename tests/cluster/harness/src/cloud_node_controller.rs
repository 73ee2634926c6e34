//! The cloud controller manager's node controller (`k8s.io/cloud-provider`
//! controllers/node, the code every external CCM runs to initialize a Node),
//! as `tests/cluster/cmd/cloud-node-controller` builds it on that module's
//! fake cloud, started against a [`TestCluster`] under an identity of its
//! own that only the node controller's role binds.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, PostParams};

use crate::TestCluster;
use crate::cluster_bin;
use crate::process::Proc;

/// The user the controller runs as (a client certificate from the cluster CA).
pub const CLOUD_NODE_CONTROLLER_USER: &str = "system:cloud-node-controller";

/// The fake cloud's one instance: what it reports, and what finds it.
#[derive(Debug, Clone, Default)]
pub struct CloudInstance {
    /// `(type, address)`, as in `Node.status.addresses`, in the cloud's order.
    pub addresses: Vec<(String, String)>,
    pub provider_id: String,
    pub zone: String,
    pub region: String,
    /// The node name that finds the instance when a Node has no provider
    /// ID; empty: every name does.
    pub name: String,
}

impl CloudInstance {
    /// The addresses as `node-ip-helper check --cloud-addresses` reads them.
    pub fn addresses_json(&self) -> String {
        let list: Vec<serde_json::Value> = self
            .addresses
            .iter()
            .map(|(kind, address)| serde_json::json!({"type": kind, "address": address}))
            .collect();
        serde_json::Value::Array(list).to_string()
    }
}

/// The running controller; stopped when dropped (its log tail printed
/// first if the thread is panicking).
pub struct CloudNodeController {
    proc: Proc,
}

/// Only what the node controller does (syncNode, UpdateNodeStatus and its
/// event recorder in node_controller.go): an informer on Nodes, Node
/// updates and status patches, Events. Upstream's addon role
/// (cluster/addons/cloud-controller-manager/cloud-node-controller-role.yaml)
/// grants more (delete, pods) and leaves `watch` to the CCM's own role.
const ROLE: &str = r#"{
  "apiVersion": "rbac.authorization.k8s.io/v1",
  "kind": "ClusterRole",
  "metadata": {"name": "harness:cloud-node-controller"},
  "rules": [
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "update", "patch"]},
    {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch", "update"]},
    {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch", "update"]}
  ]
}"#;

impl CloudNodeController {
    /// Binds the node controller's role to [`CLOUD_NODE_CONTROLLER_USER`]
    /// (once per cluster) and starts the controller as that user, the fake
    /// cloud reporting `instance` for every node. `-v=2` logs each label
    /// it adds; the failures it logs are at level 0.
    pub async fn start(cluster: &TestCluster, instance: &CloudInstance) -> Result<Self> {
        let client = cluster.client();
        let role: ClusterRole = serde_json::from_str(ROLE).context("the role")?;
        let binding: ClusterRoleBinding = serde_json::from_value(serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "harness:cloud-node-controller"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "harness:cloud-node-controller"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": CLOUD_NODE_CONTROLLER_USER}],
        }))
        .context("the binding")?;
        for result in [
            Api::<ClusterRole>::all(client.clone())
                .create(&PostParams::default(), &role)
                .await
                .map(drop),
            Api::<ClusterRoleBinding>::all(client)
                .create(&PostParams::default(), &binding)
                .await
                .map(drop),
        ] {
            match result {
                Ok(()) => {}
                Err(kube::Error::Api(status)) if status.code == 409 => {}
                Err(e) => return Err(e).context("creating the node controller's role"),
            }
        }
        let kubeconfig = cluster.user_kubeconfig(CLOUD_NODE_CONTROLLER_USER, &[])?;
        let mut args = vec![format!("--kubeconfig={}", kubeconfig.display()), "-v=2".into()];
        for (kind, address) in &instance.addresses {
            args.push(format!("--address={kind}={address}"));
        }
        for (flag, value) in [
            ("provider-id", &instance.provider_id),
            ("zone", &instance.zone),
            ("region", &instance.region),
            ("instance-name", &instance.name),
        ] {
            args.push(format!("--{flag}={value}"));
        }
        let root = cluster.dir().to_path_buf();
        let log = Self::log_path_in(&root);
        let mut proc = Proc::spawn(
            "cloud-node-controller",
            &cluster_bin("cloud-node-controller"),
            &args,
            log,
            &root,
        )?;
        // Its flags are taken and its client made (WaitForCacheSync logs
        // nothing once synced: callers poll for the Node state they expect).
        if let Err(e) = proc.wait_for_log_line("Waiting for informer caches to sync", Duration::from_secs(60)) {
            let tail = tail(&proc.log, 8000);
            proc.stop();
            return Err(e).with_context(|| format!("--- cloud-node-controller log ---\n{tail}"));
        }
        Ok(Self { proc })
    }

    /// One log per start: a test may run several controllers in turn.
    fn log_path_in(root: &Path) -> PathBuf {
        static STARTS: AtomicUsize = AtomicUsize::new(0);
        root.join(format!(
            "cloud-node-controller-{}.log",
            STARTS.fetch_add(1, Ordering::SeqCst)
        ))
    }

    /// Its whole log so far.
    pub fn log(&self) -> String {
        String::from_utf8_lossy(&std::fs::read(&self.proc.log).unwrap_or_default()).into_owned()
    }

    /// The last `max` bytes of its log (lossy: a cut may split a character,
    /// which would make `Proc::tail` print nothing).
    fn tail(&self, max: usize) -> String {
        tail(&self.proc.log, max)
    }

    /// The first log line containing `needle`, waiting up to `timeout`.
    pub fn wait_for_log_line(&mut self, needle: &str, timeout: Duration) -> Result<String> {
        self.proc.wait_for_log_line(needle, timeout)
    }

    /// An error if it has exited.
    pub fn running(&mut self) -> Result<()> {
        match self.proc.exited() {
            None => Ok(()),
            Some(status) => bail!("cloud-node-controller exited ({status}):\n{}", self.tail(8000)),
        }
    }
}

impl Drop for CloudNodeController {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "--- cloud-node-controller log ({}) ---\n{}",
                self.proc.log.display(),
                self.tail(12000)
            );
        }
        self.proc.stop();
    }
}

fn tail(log: &Path, max: usize) -> String {
    let bytes = std::fs::read(log).unwrap_or_default();
    String::from_utf8_lossy(&bytes[bytes.len().saturating_sub(max)..]).into_owned()
}
