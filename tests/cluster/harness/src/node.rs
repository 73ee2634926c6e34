//! The cluster tier's real node: containerd 1.6 (Debian's) and kubelet
//! (the tier's v1.37.2) in a network namespace of their own, registered
//! with the [`TestCluster`]'s kube-apiserver as `system:node:NAME`.
//!
//! ```text
//! let node = Node::create(&cluster, NodeOptions::default())?;  // netns, relays, containerd, pause image
//! node.start_kubelet(KubeletOptions::default())?;             // kubelet in the netns
//! node.wait_ready(&client, Duration::from_secs(90)).await?;    // Node Ready=True
//! // pods with spec.nodeName = node.name(), image PAUSE_IMAGE (or one pulled from a registry)
//! let pod = wait_pod_running(&client, "default", "p", Duration::from_secs(60)).await?;
//! // ... dropped: kubelet, containers, containerd stopped; mounts, cgroups, netns removed.
//! ```
//!
//! The API: [`Node::create`] (with [`NodeOptions`] `relay_ports`,
//! `registry_cas`), [`Node::add_relay`], [`Node::start_kubelet`] (with
//! [`KubeletOptions`] `extra_args`, `credential_provider`, `env`),
//! [`Node::stop_kubelet`], [`Node::restart_kubelet`] (pods keep running),
//! [`Node::kubelet_exited`], [`Node::wait_ready`]; [`Node::name`],
//! [`Node::netns`], [`Node::dir`], [`Node::cgroup_root`],
//! [`Node::containerd_socket`]; [`Node::command_in_netns`], [`Node::ctr`],
//! [`Node::import_image`]; [`Node::kubelet_log`], [`Node::containerd_log`],
//! [`Node::logs`], [`Node::kubelet_metrics`];
//! [`Node::route_pod_subnet_from_host`] (a veth host↔netns, 10.243.0.1/30
//! to 10.243.0.2/30, and a host route to [`POD_SUBNET`] through it, for
//! kube-apiserver to dial pod IPs; removed when the [`PodRoute`] drops, or
//! with the netns); and [`wait_pod_running`], [`pod_events`],
//! [`wait_pod_event`], [`pod_manifest`], [`waiting_reason`], [`pause_image_archive`],
//! [`sweep_stale_nodes`].
//!
//! What each part is:
//! - The network namespace `node-<pid>-<n>` (`ip netns add`), `lo` up,
//!   `net.ipv4.ip_forward=1` in it only. containerd and kubelet join it with
//!   `nsenter --net=/run/netns/NAME` only (never `ip netns exec`, which also
//!   unshares the mount namespace: kubelet's Secret tmpfs mounts would then be
//!   invisible to containerd).
//! - Relays: in the netns, 127.0.0.1:PORT is a listener (bound by a thread
//!   that entered the netns with `setns`) whose connections are copied to
//!   127.0.0.1:PORT on the host, for the apiserver's port and every port of
//!   [`NodeOptions::relay_ports`] / [`Node::add_relay`]. So URLs and image
//!   names (`127.0.0.1:PORT/team/app:1`) are the same on both sides.
//! - containerd with root, state and socket in the node's scratch directory
//!   (`$TMPDIR/cluster-node-<pid>-<n>`), CRI with `restrict_oom_score_adj`
//!   (root here lacks CAP_SYS_RESOURCE), the local pause image
//!   ([`PAUSE_IMAGE`], from [`pause_image_archive`]) as sandbox image, a
//!   bridge CNI network `cni0` 10.244.0.0/24 ([`POD_SUBNET`]), pod netns mounts
//!   under its state dir, and `certs.d/<host:port>/hosts.toml` for
//!   [`NodeOptions::registry_cas`].
//! - kubelet with a KubeletConfiguration written for this machine (cgroup v1,
//!   cgroupfs, a per-node `cgroupRoot` `/harness-node-<pid>-<n>`, eviction
//!   thresholds a nearly full shared disk does not trip), x509 + webhook
//!   authentication/authorization on 127.0.0.1 only.
//!
//! Every process runs under process.rs's guard, so it dies with the test
//! process. Dropping the [`Node`] stops kubelet, kills and deletes the
//! containers (`ctr`), stops containerd, unmounts what is left under the
//! scratch directory, removes the cgroups, the netns and the directory
//! (`CLUSTER_KEEP_DIR=1` keeps the logs and configs); on panic it prints the
//! tails of kubelet's and containerd's logs. The first [`Node::create`] of a
//! process sweeps what a killed earlier run left (its pid gone): netns,
//! processes in them, mounts, cgroups, scratch directories.

use std::collections::HashMap;
use std::fs;
use std::io::{self, Read as _, Write as _};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use k8s_openapi::api::core::v1::{Event, Node as NodeObject, Pod};
use kube::api::{Api, ListParams};
use nix::mount::{MntFlags, umount2};
use nix::sched::{CloneFlags, setns};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::cluster::TestCluster;
use crate::process::{Proc, free_port};
use crate::{cluster_bin, run_ok, workspace_root};

/// The local pause image: containerd's sandbox image, and an image pods can
/// run with `imagePullPolicy: Never` (it sleeps).
pub const PAUSE_IMAGE: &str = "localhost/harness/pause:1";

/// The node's pod network (CNI bridge `cni0`, host-local IPAM).
pub const POD_SUBNET: &str = "10.244.0.0/24";
/// [`Node::route_pod_subnet_from_host`]'s veth: the host's side, and its
/// peer `to-host` in the node's netns (the route's gateway).
pub const POD_ROUTE_HOST_SIDE: &str = "10.243.0.1/30";
pub const POD_ROUTE_NODE_SIDE: &str = "10.243.0.2/30";

/// The host's veth and route into a node's netns
/// ([`Node::route_pod_subnet_from_host`]); dropped, they are deleted.
pub struct PodRoute {
    host_side: String,
}

impl Drop for PodRoute {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", &self.host_side]).output();
    }
}

const CONTAINERD: &str = "/usr/bin/containerd";
const CNI_BIN_DIR: &str = "/usr/lib/cni";
const CNI_RESULTS: &str = "/var/lib/cni/results";
/// Names of everything a node creates carry the test process's pid, so a
/// later run can tell what a killed one left.
const NETNS_PREFIX: &str = "node-";
const SCRATCH_PREFIX: &str = "cluster-node-";
const CGROUP_PREFIX: &str = "harness-node-";

/// In a scratch directory kept by `CLUSTER_KEEP_DIR`: the sweep leaves it.
const KEPT: &str = "KEPT";

static NEXT_NODE: AtomicUsize = AtomicUsize::new(0);
static SWEEP: Once = Once::new();

/// What a node is given at creation.
#[derive(Debug, Clone, Default)]
pub struct NodeOptions {
    /// Host ports (registries, token realm, ...) also reachable at
    /// 127.0.0.1:PORT inside the node's netns.
    pub relay_ports: Vec<u16>,
    /// `(host:port, CA file)`: containerd trusts that CA for that registry
    /// (`certs.d/<host:port>/hosts.toml`).
    pub registry_cas: Vec<(String, PathBuf)>,
    /// `(registry, hosts.toml text)`: containerd's `certs.d/<registry>/hosts.toml`
    /// as given (a registry mirror), beside the ones `registry_cas` writes.
    pub hosts_toml: Vec<(String, String)>,
}

/// How kubelet is started ([`Node::start_kubelet`]).
#[derive(Debug, Clone, Default)]
pub struct KubeletOptions {
    /// Extra kubelet flags, after the harness's own.
    pub extra_args: Vec<String>,
    /// `(config file, bin dir)`: `--image-credential-provider-config` and
    /// `--image-credential-provider-bin-dir`.
    pub credential_provider: Option<(PathBuf, PathBuf)>,
    /// Extra environment variables for kubelet (and so its plugins).
    pub env: Vec<(String, String)>,
}

/// A real node: see the module documentation.
pub struct Node {
    name: String,
    netns: String,
    scratch: PathBuf,
    cgroup: String,
    relays: Mutex<Vec<Relay>>,
    containerd: Option<Proc>,
    kubelet: Mutex<Option<Proc>>,
    kubelet_options: Mutex<KubeletOptions>,
    kubelet_starts: AtomicUsize,
    kubeconfig: PathBuf,
    ca_file: PathBuf,
    kubelet_port: u16,
    healthz_port: u16,
}

impl Node {
    /// The netns with its relays (the apiserver's port and
    /// `options.relay_ports`), containerd running in it with the pause image
    /// imported. kubelet is started by [`Node::start_kubelet`].
    pub fn create(cluster: &TestCluster, options: NodeOptions) -> Result<Node> {
        SWEEP.call_once(sweep_stale);
        let t0 = Instant::now();
        let n = NEXT_NODE.fetch_add(1, Ordering::SeqCst);
        let pid = std::process::id();
        let name = format!("{NETNS_PREFIX}{pid}-{n}");
        let scratch = std::env::temp_dir().join(format!("{SCRATCH_PREFIX}{pid}-{n}"));
        if scratch.exists() {
            bail!("{} exists already", scratch.display());
        }
        let cgroup = format!("/{CGROUP_PREFIX}{pid}-{n}");
        let api_port = port_of(&cluster.server)?;
        let kubeconfig = cluster.user_kubeconfig(&format!("system:node:{name}"), &["system:nodes"])?;
        // Every listener in the netns gets its own port, probed on the host
        // while held together (relayed ports are held by their servers): none
        // can take another's, as an ephemeral port (`:0`) there could.
        let (kubelet_port, l1) = free_port()?;
        let (healthz_port, l2) = free_port()?;
        let (stream_port, l3) = free_port()?;
        drop((l1, l2, l3));
        fs::create_dir_all(&scratch)?;
        let mut node = Node {
            name: name.clone(),
            netns: name,
            scratch,
            cgroup,
            relays: Mutex::new(Vec::new()),
            containerd: None,
            kubelet: Mutex::new(None),
            kubelet_options: Mutex::new(KubeletOptions::default()),
            kubelet_starts: AtomicUsize::new(0),
            kubeconfig,
            ca_file: cluster.dir().join("pki/ca.crt"),
            kubelet_port,
            healthz_port,
        };
        // From here on, an error drops `node`, which cleans up what exists.
        node.create_netns()?;
        node.add_relay(api_port)?;
        for port in &options.relay_ports {
            node.add_relay(*port)?;
        }
        node.write_admin_cert(&cluster.kubeconfig)?;
        node.create_cgroups()?;
        node.write_containerd_config(&options, stream_port)?;
        node.start_containerd()?;
        node.import_image(&pause_image_archive()?)?;
        eprintln!(
            "cluster-harness: node {} (netns, relays, containerd, pause image) in {:.1?} (dir {})",
            node.name,
            t0.elapsed(),
            node.scratch.display()
        );
        Ok(node)
    }

    /// The Node's name (kubelet's `--hostname-override`), also the netns's.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The network namespace's name (`/run/netns/NAME`).
    pub fn netns(&self) -> &str {
        &self.netns
    }

    /// The node's scratch directory (kubelet root, containerd root, logs).
    pub fn dir(&self) -> &Path {
        &self.scratch
    }

    /// kubelet's `cgroupRoot` (`/harness-node-<pid>-<n>`), made in every
    /// cgroup hierarchy.
    pub fn cgroup_root(&self) -> &str {
        &self.cgroup
    }

    /// The path of containerd's socket.
    /// containerd's registry host directories (its `config_path`).
    pub fn certs_dir(&self) -> PathBuf {
        self.scratch.join("certs.d")
    }

    pub fn containerd_socket(&self) -> PathBuf {
        self.scratch.join("containerd.sock")
    }

    /// `program` run in the node's netns (`nsenter --net=/run/netns/NAME`),
    /// in the host's mount namespace.
    pub fn command_in_netns(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new("nsenter");
        cmd.arg(format!("--net=/run/netns/{}", self.netns))
            .arg("--")
            .arg(program);
        cmd
    }

    /// A veth from the host into the node's netns (host side
    /// [`POD_ROUTE_HOST_SIDE`], node side [`POD_ROUTE_NODE_SIDE`]) and a host
    /// route to [`POD_SUBNET`] through it, so that programs on the host
    /// (kube-apiserver) can dial pod IPs. Deleting the netns deletes the veth
    /// and so the route; dropping the [`PodRoute`] deletes them first. One
    /// node at a time may have it (the host route is the host's).
    pub fn route_pod_subnet_from_host(&self) -> Result<PodRoute> {
        let route = PodRoute {
            host_side: format!("whv{}", std::process::id()),
        };
        let ip = |args: &[&str]| run_ok(Command::new("ip").args(args)).map(drop);
        ip(&[
            "link",
            "add",
            &route.host_side,
            "type",
            "veth",
            "peer",
            "name",
            "to-host",
            "netns",
            &self.netns,
        ])?;
        ip(&["addr", "add", POD_ROUTE_HOST_SIDE, "dev", &route.host_side])?;
        ip(&["link", "set", &route.host_side, "up"])?;
        ip(&["-n", &self.netns, "addr", "add", POD_ROUTE_NODE_SIDE, "dev", "to-host"])?;
        ip(&["-n", &self.netns, "link", "set", "to-host", "up"])?;
        let via = POD_ROUTE_NODE_SIDE.split('/').next().expect("an address");
        ip(&["route", "add", POD_SUBNET, "via", via])?;
        Ok(route)
    }

    /// `ctr` against this node's containerd, in its `k8s.io` namespace.
    pub fn ctr(&self) -> Command {
        let mut cmd = Command::new("ctr");
        cmd.arg("--address")
            .arg(self.containerd_socket())
            .args(["-n", "k8s.io"]);
        cmd
    }

    /// Host 127.0.0.1:`port` also at 127.0.0.1:`port` in the netns.
    pub fn add_relay(&self, port: u16) -> Result<()> {
        let relay = Relay::start(&self.netns_path(), port).with_context(|| format!("relay for port {port}"))?;
        self.relays.lock().expect("relays").push(relay);
        Ok(())
    }

    /// Imports an OCI (or docker) archive into containerd's `k8s.io`
    /// namespace, where kubelet's images are.
    pub fn import_image(&self, archive: &Path) -> Result<()> {
        run_ok(self.ctr().args(["images", "import"]).arg(archive))?;
        Ok(())
    }

    /// Starts kubelet in the netns (see the module documentation for its
    /// configuration). Returns once it runs; [`Node::wait_ready`] waits for
    /// the Node.
    pub fn start_kubelet(&self, options: KubeletOptions) -> Result<()> {
        let mut slot = self.kubelet.lock().expect("kubelet");
        if let Some(running) = slot.as_mut()
            && running.exited().is_none()
        {
            bail!("kubelet runs already");
        }
        let config = self.write_kubelet_config()?;
        let mut args: Vec<String> = Vec::new();
        for (key, value) in &options.env {
            args.push(format!("{key}={value}"));
        }
        args.push("nsenter".into());
        args.push(format!("--net={}", self.netns_path().display()));
        args.push("--".into());
        args.push(cluster_bin("kubelet").display().to_string());
        args.extend([
            format!("--config={}", config.display()),
            format!("--kubeconfig={}", self.kubeconfig.display()),
            format!("--hostname-override={}", self.name),
            format!("--root-dir={}", self.scratch.join("kubelet").display()),
            format!("--cert-dir={}", self.scratch.join("kubelet-pki").display()),
            "--v=2".into(),
            // The credential-provider plugin package logs why it skipped a
            // plugin (e.g. a missing required annotation) at V(5) only.
            "--vmodule=plugin=5".into(),
        ]);
        if let Some((config, bin_dir)) = &options.credential_provider {
            args.push(format!("--image-credential-provider-config={}", config.display()));
            args.push(format!("--image-credential-provider-bin-dir={}", bin_dir.display()));
        }
        args.extend(options.extra_args.iter().cloned());
        let start = self.kubelet_starts.fetch_add(1, Ordering::SeqCst);
        let log = self.scratch.join(format!("kubelet-{start}.log"));
        let proc = Proc::spawn("kubelet", Path::new("env"), &args, log, &self.guard_dir())?;
        *slot = Some(proc);
        *self.kubelet_options.lock().expect("options") = options;
        Ok(())
    }

    /// Stops kubelet (SIGTERM, then SIGKILL); its pods keep running.
    pub fn stop_kubelet(&self) {
        if let Some(mut proc) = self.kubelet.lock().expect("kubelet").take() {
            proc.stop();
        }
    }

    /// Stops kubelet and starts it again with the same options.
    pub fn restart_kubelet(&self) -> Result<()> {
        self.stop_kubelet();
        let options = self.kubelet_options.lock().expect("options").clone();
        self.start_kubelet(options)
    }

    /// kubelet's exit status once it has exited (None while it runs or when
    /// it was not started).
    pub fn kubelet_exited(&self) -> Option<ExitStatus> {
        self.kubelet.lock().expect("kubelet").as_mut().and_then(|p| p.exited())
    }

    /// Waits until the Node exists with condition Ready=True; fails early if
    /// kubelet exits.
    pub async fn wait_ready(&self, client: &kube::Client, timeout: Duration) -> Result<NodeObject> {
        let nodes: Api<NodeObject> = Api::all(client.clone());
        let deadline = Instant::now() + timeout;
        loop {
            let last = match nodes.get_opt(&self.name).await {
                Ok(Some(node)) if node_ready(&node) => return Ok(node),
                Ok(Some(node)) => format!("conditions {:?}", node.status.and_then(|s| s.conditions)),
                Ok(None) => "not registered".to_string(),
                Err(e) => e.to_string(),
            };
            if let Some(status) = self.kubelet_exited() {
                bail!(
                    "kubelet exited ({status}) before Node {} was Ready; kubelet log:\n{}",
                    self.name,
                    tail(&self.kubelet_log(), 6000)
                );
            }
            if Instant::now() > deadline {
                bail!("Node {} not Ready within {timeout:?}: {last}", self.name);
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// All of kubelet's logs (every start, in order).
    pub fn kubelet_log(&self) -> String {
        (0..self.kubelet_starts.load(Ordering::SeqCst))
            .map(|i| fs::read_to_string(self.scratch.join(format!("kubelet-{i}.log"))).unwrap_or_default())
            .collect::<Vec<_>>()
            .join("")
    }

    /// containerd's log.
    pub fn containerd_log(&self) -> String {
        fs::read_to_string(self.scratch.join("containerd.log")).unwrap_or_default()
    }

    /// kubelet's `/metrics`: HTTPS to the netns's 127.0.0.1 (rustls,
    /// kubelet's self-signed certificate verified for the node's name), as a
    /// cluster admin (client certificate). At most 32 MiB within 10 s.
    pub fn kubelet_metrics(&self) -> Result<String> {
        use rustls::pki_types::pem::PemObject as _;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
        const MAX_BYTES: u64 = 32 << 20;
        let timeout = Duration::from_secs(10);
        let pki = self.scratch.join("kubelet-pki/kubelet.crt");
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_file_iter(&pki).with_context(|| format!("reading {}", pki.display()))? {
            roots.add(cert?)?;
        }
        let chain = CertificateDer::pem_file_iter(self.scratch.join("admin.crt"))?.collect::<Result<Vec<_>, _>>()?;
        let key = PrivateKeyDer::from_pem_file(self.scratch.join("admin.key"))?;
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)?;
        let port = self.kubelet_port;
        let tcp = in_netns(&self.netns_path(), move || Ok(TcpStream::connect(("127.0.0.1", port))?))
            .with_context(|| format!("connecting to kubelet at 127.0.0.1:{port} in the netns"))?;
        tcp.set_read_timeout(Some(timeout))?;
        tcp.set_write_timeout(Some(timeout))?;
        let connection = rustls::ClientConnection::new(Arc::new(config), ServerName::try_from(self.name.clone())?)?;
        let mut tls = rustls::StreamOwned::new(connection, tcp);
        // HTTP/1.0: the body ends where the connection does (no chunks).
        write!(tls, "GET /metrics HTTP/1.0\r\nHost: {}:{port}\r\n\r\n", self.name)?;
        let deadline = Instant::now() + timeout;
        let mut answer = Vec::new();
        let mut buf = [0u8; 64 << 10];
        loop {
            match tls.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
                // Go closes after the body, sometimes without close_notify.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof && !answer.is_empty() => break,
                Err(e) => return Err(e).context("reading kubelet's /metrics"),
            }
            if answer.len() as u64 > MAX_BYTES || Instant::now() > deadline {
                bail!("kubelet's /metrics: more than {MAX_BYTES} bytes or {timeout:?}");
            }
        }
        let text = String::from_utf8_lossy(&answer);
        let (head, body) = text
            .split_once("\r\n\r\n")
            .context("kubelet's /metrics: no HTTP header")?;
        let status = head.lines().next().unwrap_or_default();
        if status.split_whitespace().nth(1) != Some("200") {
            bail!("kubelet's /metrics answered {status}: {}", tail(body, 500));
        }
        Ok(body.to_string())
    }

    /// The tails of kubelet's and containerd's logs.
    pub fn logs(&self) -> String {
        format!(
            "--- kubelet log ({}) ---\n{}\n--- containerd log ({}) ---\n{}",
            self.scratch.display(),
            tail(&self.kubelet_log(), 20000),
            self.scratch.join("containerd.log").display(),
            tail(&self.containerd_log(), 8000)
        )
    }

    fn netns_path(&self) -> PathBuf {
        Path::new("/run/netns").join(&self.netns)
    }

    /// The guard of process.rs removes this directory when the test process
    /// dies: a path with nothing in it, as the scratch directory may hold
    /// mounts; the next run's sweep cleans the rest.
    fn guard_dir(&self) -> PathBuf {
        self.scratch.join("nothing-to-remove")
    }

    fn create_netns(&self) -> Result<()> {
        run_ok(Command::new("ip").args(["netns", "add", &self.netns]))?;
        run_ok(Command::new("ip").args(["-n", &self.netns, "link", "set", "lo", "up"]))?;
        // /proc/sys/net is the opener's netns: this is the node's only.
        run_ok(
            self.command_in_netns("sh")
                .args(["-c", "echo 1 > /proc/sys/net/ipv4/ip_forward"]),
        )?;
        Ok(())
    }

    /// The admin's client certificate as files, for kubelet's /metrics.
    fn write_admin_cert(&self, admin_kubeconfig: &Path) -> Result<()> {
        use base64::Engine;
        let text = fs::read_to_string(admin_kubeconfig)?;
        let config: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text)?;
        let user = &config["users"][0]["user"];
        for (field, file) in [
            ("client-certificate-data", "admin.crt"),
            ("client-key-data", "admin.key"),
        ] {
            let data = user[field]
                .as_str()
                .with_context(|| format!("{field} in the admin kubeconfig"))?;
            let pem = base64::engine::general_purpose::STANDARD.decode(data)?;
            fs::write(self.scratch.join(file), pem)?;
        }
        Ok(())
    }

    /// `cgroupRoot` in every cgroup hierarchy (kubelet requires it to exist).
    fn create_cgroups(&self) -> Result<()> {
        for hierarchy in cgroup_hierarchies() {
            let dir = hierarchy.join(self.cgroup.trim_start_matches('/'));
            fs::create_dir(&dir).with_context(|| format!("mkdir {}", dir.display()))?;
            // A new v1 cpuset is empty: nothing could join it.
            for file in ["cpuset.cpus", "cpuset.mems"] {
                if let Ok(value) = fs::read_to_string(hierarchy.join(file)) {
                    fs::write(dir.join(file), value.trim())
                        .with_context(|| format!("writing {}", dir.join(file).display()))?;
                }
            }
        }
        Ok(())
    }

    fn write_containerd_config(&self, options: &NodeOptions, stream_port: u16) -> Result<()> {
        let s = &self.scratch;
        let net_d = s.join("net.d");
        fs::create_dir_all(&net_d)?;
        let conflist = serde_json::json!({
            "cniVersion": "0.4.0",
            "name": "harness",
            "plugins": [{
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": true,
                "ipMasq": false,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": POD_SUBNET}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": s.join("cni-ipam"),
                },
            }],
        });
        fs::write(
            net_d.join("10-harness.conflist"),
            serde_json::to_string_pretty(&conflist)?,
        )?;
        let certs_d = s.join("certs.d");
        fs::create_dir_all(&certs_d)?;
        for (registry, text) in &options.hosts_toml {
            let dir = certs_d.join(registry);
            fs::create_dir_all(&dir)?;
            fs::write(dir.join("hosts.toml"), text)?;
        }
        for (host, ca) in &options.registry_cas {
            let dir = certs_d.join(host);
            fs::create_dir_all(&dir)?;
            fs::write(
                dir.join("hosts.toml"),
                format!(
                    "server = \"https://{host}\"\n\n[host.\"https://{host}\"]\n  ca = {}\n",
                    toml_str(ca)
                ),
            )?;
        }
        let config = format!(
            r#"version = 2
root = {root}
state = {state}

[grpc]
  address = {socket}

[plugins."io.containerd.internal.v1.opt"]
  path = {opt}

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  # Root here lacks CAP_SYS_RESOURCE: without this every sandbox fails
  # "can't get final child's PID from pipe: EOF".
  restrict_oom_score_adj = true
  # Pod netns mounts under the state dir, not /var/run/netns.
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "{stream_port}"

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_BIN_DIR}"
    conf_dir = {net_d}

  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = {certs_d}

  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"

  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
    Root = {runc}
"#,
            root = toml_str(&s.join("containerd/root")),
            state = toml_str(&s.join("containerd/state")),
            socket = toml_str(&self.containerd_socket()),
            opt = toml_str(&s.join("containerd/opt")),
            net_d = toml_str(&net_d),
            certs_d = toml_str(&certs_d),
            runc = toml_str(&s.join("containerd/runc")),
        );
        fs::write(s.join("containerd.toml"), config)?;
        Ok(())
    }

    fn start_containerd(&mut self) -> Result<()> {
        let args: Vec<String> = vec![
            format!("--net={}", self.netns_path().display()),
            "--".into(),
            CONTAINERD.into(),
            format!("--config={}", self.scratch.join("containerd.toml").display()),
            "--log-level=info".into(),
        ];
        let log = self.scratch.join("containerd.log");
        self.containerd = Some(Proc::spawn(
            "containerd",
            Path::new("nsenter"),
            &args,
            log,
            &self.guard_dir(),
        )?);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let answered = self
                .ctr()
                .arg("version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if answered {
                return Ok(());
            }
            if let Some(status) = self.containerd.as_mut().and_then(|p| p.exited()) {
                bail!("containerd exited ({status}):\n{}", tail(&self.containerd_log(), 4000));
            }
            if Instant::now() > deadline {
                bail!(
                    "containerd did not answer within 30s:\n{}",
                    tail(&self.containerd_log(), 4000)
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn write_kubelet_config(&self) -> Result<PathBuf> {
        let path = self.scratch.join("kubelet-config.yaml");
        fs::write(&path, serde_yaml_ng::to_string(&kubelet_config(self))?)?;
        Ok(path)
    }

    /// Kills and deletes every task and container of containerd's `k8s.io`
    /// namespace (the shims unmount the rootfs and remove runc's state).
    fn stop_containers(&mut self) {
        if self.containerd.as_mut().is_some_and(|p| p.exited().is_none()) {
            let list = |what: &str| -> Vec<String> {
                self.ctr()
                    .args([what, "ls", "-q"])
                    .output()
                    .map(|o| String::from_utf8_lossy(&o.stdout).lines().map(str::to_string).collect())
                    .unwrap_or_default()
            };
            let tasks = list("tasks");
            for task in &tasks {
                let _ = self
                    .ctr()
                    .args(["tasks", "kill", "--all", "--signal", "SIGKILL", task])
                    .output();
            }
            // containerd's CRI plugin deletes the tasks it sees exit itself:
            // delete what is still listed until nothing is.
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let left = list("tasks");
                if left.is_empty() || Instant::now() > deadline {
                    break;
                }
                for task in &left {
                    let _ = self.ctr().args(["tasks", "delete", task]).output();
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            for container in list("containers") {
                let _ = self.ctr().args(["containers", "delete", &container]).output();
            }
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "cluster-harness: test failed; node {} logs follow\n{}",
                self.name,
                self.logs()
            );
        }
        let t0 = Instant::now();
        self.stop_kubelet();
        let t_kubelet = t0.elapsed();
        self.stop_containers();
        let t_containers = t0.elapsed();
        if let Some(mut containerd) = self.containerd.take() {
            containerd.stop();
        }
        let t_containerd = t0.elapsed();
        for relay in self.relays.lock().expect("relays").drain(..) {
            relay.stop();
        }
        let keep = std::env::var_os("CLUSTER_KEEP_DIR").is_some();
        let problems = clean_up(&self.netns, &self.scratch, &self.cgroup, keep);
        eprintln!(
            "cluster-harness: node {} teardown: kubelet {t_kubelet:.1?}, containers {:.1?}, containerd {:.1?}, rest {:.1?}",
            self.name,
            t_containers - t_kubelet,
            t_containerd - t_containers,
            t0.elapsed() - t_containerd
        );
        for problem in &problems {
            eprintln!("cluster-harness: node {}: {problem}", self.name);
        }
        if keep {
            eprintln!("cluster-harness: keeping {}", self.scratch.display());
        }
        eprintln!("cluster-harness: node {} torn down in {:.1?}", self.name, t0.elapsed());
    }
}

fn kubelet_config(node: &Node) -> serde_json::Value {
    let s = &node.scratch;
    serde_json::json!({
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        // kubelet >= 1.35 refuses cgroup v1 unless told (KEP-5573); this machine has v1.
        "failCgroupV1": false,
        // containerd 1.6 has no RuntimeConfig call: kubelet uses its own driver.
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": node.cgroup,
        "failSwapOn": false,
        "containerRuntimeEndpoint": format!("unix://{}", node.containerd_socket().display()),
        "address": "127.0.0.1",
        "port": node.kubelet_port,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": node.healthz_port,
        "readOnlyPort": 0,
        "authentication": {
            "anonymous": {"enabled": false},
            "webhook": {"enabled": true},
            "x509": {"clientCAFile": node.ca_file},
        },
        "authorization": {"mode": "Webhook"},
        "registerNode": true,
        // The disk is shared with CI and may be nearly full: the defaults
        // (nodefs < 10 %, imagefs < 15 %, image GC at 85 %) would give
        // DiskPressure, its taint and evictions.
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1Mi",
            "nodefs.inodesFree": "1",
            "imagefs.available": "1Mi",
            "imagefs.inodesFree": "1",
        },
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "nodeStatusUpdateFrequency": "2s",
        "nodeStatusReportFrequency": "10s",
        "syncFrequency": "10s",
        // Paths kubelet would otherwise create on the host.
        "volumePluginDir": s.join("volume-plugins"),
        "podLogsDir": s.join("pod-logs"),
    })
}

fn node_ready(node: &NodeObject) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Waits until the pod's phase is Running; the error names its last status
/// and events.
pub async fn wait_pod_running(client: &kube::Client, namespace: &str, name: &str, timeout: Duration) -> Result<Pod> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let deadline = Instant::now() + timeout;
    loop {
        let last = match pods.get_opt(name).await {
            Ok(Some(pod)) if pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running") => return Ok(pod),
            Ok(Some(pod)) => format!("{:?}", pod.status),
            Ok(None) => "no such pod".to_string(),
            Err(e) => e.to_string(),
        };
        if Instant::now() > deadline {
            let events = pod_events(client, namespace, name).await;
            bail!("pod {namespace}/{name} not Running within {timeout:?}: {last}\nevents: {events:#?}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The pod's events, oldest first, each `REASON: message`.
pub async fn pod_events(client: &kube::Client, namespace: &str, name: &str) -> Vec<String> {
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    let params = ListParams::default().fields(&format!("involvedObject.kind=Pod,involvedObject.name={name}"));
    let mut list = match events.list(&params).await {
        Ok(list) => list.items,
        Err(e) => return vec![format!("(events not read: {e})")],
    };
    list.sort_by_key(|e| e.last_timestamp.clone().or(e.first_timestamp.clone()).map(|t| t.0));
    list.into_iter()
        .map(|e| format!("{}: {}", e.reason.unwrap_or_default(), e.message.unwrap_or_default()))
        .collect()
}

/// Waits until one of the pod's events ([`pod_events`]) satisfies `found`
/// (polled every 250 ms); all its events then. The error lists the events.
pub async fn wait_pod_event(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    within: Duration,
    found: impl Fn(&str) -> bool,
) -> Result<Vec<String>> {
    let deadline = Instant::now() + within;
    loop {
        let events = pod_events(client, namespace, name).await;
        if events.iter().any(|e| found(e)) {
            return Ok(events);
        }
        if Instant::now() >= deadline {
            bail!("pod {namespace}/{name}: no such event within {within:?}: {events:#?}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A pod for `node` (no scheduler needed): one container `main` running
/// `image` with `pull_policy`, grace period 0, and no service-account token
/// mounted (no kube-controller-manager here: no kube-root-ca.crt ConfigMap to
/// project). A test adds what it needs (`metadata.namespace`,
/// `spec.serviceAccountName`, `spec.imagePullSecrets`) before making it a
/// `Pod` with `serde_json::from_value`.
pub fn pod_manifest(name: &str, node: &str, image: &str, pull_policy: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeName": node,
            "automountServiceAccountToken": false,
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": image, "imagePullPolicy": pull_policy}],
        },
    })
}

/// Why the pod's first container waits (`ErrImagePull`,
/// `ImagePullBackOff`, ...), if it waits.
pub fn waiting_reason(pod: &Pod) -> Option<String> {
    let status = pod.status.as_ref()?.container_statuses.as_ref()?.first()?;
    status.state.as_ref()?.waiting.as_ref()?.reason.clone()
}

/// The pause image as an oci-archive, built once per machine (buildah, its
/// own vfs store) into `.cache/cluster-node/pause.tar`: `FROM scratch`,
/// Debian's static busybox, `ENTRYPOINT ["/bin/busybox","sleep","1000000"]`,
/// named [`PAUSE_IMAGE`].
pub fn pause_image_archive() -> Result<PathBuf> {
    let dir = workspace_root().join(".cache/cluster-node");
    let archive = dir.join("pause.tar");
    if archive.is_file() {
        return Ok(archive);
    }
    fs::create_dir_all(&dir)?;
    let work = tempfile::Builder::new().prefix("pause-build-").tempdir_in(&dir)?;
    let buildah = || {
        let mut cmd = Command::new("buildah");
        cmd.arg("--root")
            .arg(work.path().join("root"))
            .arg("--runroot")
            .arg(work.path().join("run"))
            .args(["--storage-driver", "vfs"]);
        cmd
    };
    let busybox = Path::new("/bin/busybox");
    if !busybox.is_file() {
        bail!("/bin/busybox is missing: install busybox-static (make node-tools)");
    }
    let out = run_ok(buildah().args(["from", "--quiet", "scratch"]))?;
    let container = String::from_utf8_lossy(&out.stdout).trim().to_string();
    run_ok(buildah().args(["copy", &container, "/bin/busybox", "/bin/busybox"]))?;
    run_ok(buildah().args([
        "config",
        "--entrypoint",
        r#"["/bin/busybox","sleep","1000000"]"#,
        &container,
    ]))?;
    let partial = work.path().join("pause.tar");
    run_ok(
        buildah()
            .args(["commit", "--quiet", "--timestamp", "0", &container])
            .arg(format!("oci-archive:{}:{PAUSE_IMAGE}", partial.display())),
    )?;
    let _ = buildah().args(["rm", &container]).output();
    // vfs layers are plain directories; nothing is mounted.
    fs::rename(&partial, &archive)?;
    Ok(archive)
}

/// A listener on 127.0.0.1:`port` in a netns whose connections are copied
/// to and from 127.0.0.1:`port` on the host.
struct Relay {
    netns: PathBuf,
    port: u16,
    stop: Arc<AtomicBool>,
    connections: Arc<Mutex<HashMap<u64, TcpStream>>>,
    thread: Option<JoinHandle<()>>,
}

impl Relay {
    fn start(netns: &Path, port: u16) -> Result<Relay> {
        let listener = in_netns(netns, move || {
            TcpListener::bind(("127.0.0.1", port)).with_context(|| format!("binding 127.0.0.1:{port} in the netns"))
        })?;
        let stop = Arc::new(AtomicBool::new(false));
        let connections: Arc<Mutex<HashMap<u64, TcpStream>>> = Arc::default();
        let next = AtomicU64::new(0);
        let thread = {
            let stop = stop.clone();
            let connections = connections.clone();
            std::thread::Builder::new()
                .name(format!("relay-{port}"))
                .spawn(move || {
                    loop {
                        let accepted = listener.accept();
                        if stop.load(Ordering::SeqCst) {
                            break;
                        }
                        match accepted {
                            Ok((inner, _)) => relay(inner, port, next.fetch_add(1, Ordering::SeqCst), &connections),
                            // e.g. out of file descriptors: try again soon
                            Err(_) => std::thread::sleep(Duration::from_millis(20)),
                        }
                    }
                })?
        };
        Ok(Relay {
            netns: netns.to_path_buf(),
            port,
            stop,
            connections,
            thread: Some(thread),
        })
    }

    /// Closes the listener and every connection (a socket would keep the
    /// netns alive).
    fn stop(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // A connection from inside the netns wakes the blocked accept.
        let port = self.port;
        let woken = in_netns(&self.netns, move || Ok(TcpStream::connect(("127.0.0.1", port))?)).is_ok();
        if let Some(thread) = self.thread.take()
            && woken
        {
            let _ = thread.join();
        }
        for (_, stream) in self.connections.lock().expect("connections").drain() {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}

/// Runs `f` on a short-lived thread that entered the netns at `netns`: a
/// socket keeps the netns it was created in, the caller's thread stays where
/// it is.
fn in_netns<T: Send + 'static>(netns: &Path, f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    let ns = fs::File::open(netns).with_context(|| format!("opening {}", netns.display()))?;
    std::thread::spawn(move || -> Result<T> {
        setns(&ns, CloneFlags::CLONE_NEWNET).context("setns into the node's netns")?;
        f()
    })
    .join()
    .map_err(|_| anyhow!("a thread in the node's netns panicked"))?
}

fn relay(inner: TcpStream, port: u16, id: u64, connections: &Arc<Mutex<HashMap<u64, TcpStream>>>) {
    let _ = inner.set_nonblocking(false);
    // This thread is in the host's netns: the peer is the host's port.
    let Ok(outer) = TcpStream::connect(("127.0.0.1", port)) else {
        return; // dropping `inner` closes it, as a refused connection would
    };
    let (Ok(inner2), Ok(outer2), Ok(inner3), Ok(outer3)) = (
        inner.try_clone(),
        outer.try_clone(),
        inner.try_clone(),
        outer.try_clone(),
    ) else {
        return;
    };
    {
        let mut map = connections.lock().expect("connections");
        map.insert(2 * id, inner3);
        map.insert(2 * id + 1, outer3);
    }
    let pending = Arc::new(AtomicUsize::new(2));
    for (from, to) in [(inner, outer2), (outer, inner2)] {
        let pending = pending.clone();
        let connections = connections.clone();
        std::thread::spawn(move || {
            let (mut from, mut to) = (from, to);
            let _ = io::copy(&mut from, &mut to);
            let _ = to.shutdown(Shutdown::Write);
            if pending.fetch_sub(1, Ordering::SeqCst) == 1 {
                let mut map = connections.lock().expect("connections");
                map.remove(&(2 * id));
                map.remove(&(2 * id + 1));
            }
        });
    }
}

fn port_of(server: &str) -> Result<u16> {
    server
        .rsplit(':')
        .next()
        .and_then(|p| p.trim_end_matches('/').parse().ok())
        .with_context(|| format!("no port in {server}"))
}

fn toml_str(path: &Path) -> String {
    serde_json::to_string(&path.display().to_string()).expect("a JSON string is a TOML string")
}

fn tail(text: &str, max: usize) -> &str {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// Mount points of the cgroup hierarchies (v1 controllers, named, unified).
fn cgroup_hierarchies() -> Vec<PathBuf> {
    mounts()
        .into_iter()
        .filter(|(_, fstype)| fstype == "cgroup" || fstype == "cgroup2")
        .map(|(point, _)| point)
        .collect()
}

/// `(mount point, fstype)` of every mount this process sees.
fn mounts() -> Vec<(PathBuf, String)> {
    let text = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let point = fields.get(4)?;
            let dash = fields.iter().position(|f| *f == "-")?;
            let fstype = fields.get(dash + 1)?;
            Some((PathBuf::from(unescape_mount_point(point)), fstype.to_string()))
        })
        .collect()
}

/// mountinfo writes space, tab, newline and backslash as `\ooo`.
fn unescape_mount_point(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 4 <= bytes.len()
            && let Ok(code) = u8::from_str_radix(&field[i + 1..i + 4], 8)
        {
            out.push(code);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Everything under `dir` that is mounted, deepest first.
fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    let mut points: Vec<PathBuf> = mounts()
        .into_iter()
        .map(|(p, _)| p)
        .filter(|p| p.starts_with(dir))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    points.dedup();
    points
}

/// Unmounts everything under `dir` (lazily where a plain unmount fails);
/// the mounts still there after a few passes.
fn unmount_all_under(dir: &Path) -> Vec<PathBuf> {
    for _ in 0..5 {
        let points = mounts_under(dir);
        if points.is_empty() {
            return points;
        }
        for point in &points {
            if umount2(point, MntFlags::empty()).is_err() {
                let _ = umount2(point, MntFlags::MNT_DETACH);
            }
        }
    }
    mounts_under(dir)
}

/// SIGKILLs every process in the netns at `netns` (by its inode) and in the
/// cgroup trees `cgroup` of every hierarchy; waits up to 10 s for them.
fn kill_node_processes(netns: &Path, cgroup: &str) {
    let netns_link = fs::metadata(netns).ok().map(|m| format!("net:[{}]", m.ino()));
    let me = std::process::id();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut pids: Vec<i32> = Vec::new();
        if let Some(link) = &netns_link
            && let Ok(entries) = fs::read_dir("/proc")
        {
            for entry in entries.filter_map(|e| e.ok()) {
                let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
                    continue;
                };
                if pid as u32 != me
                    && fs::read_link(entry.path().join("ns/net")).is_ok_and(|l| l.to_string_lossy() == *link)
                {
                    pids.push(pid);
                }
            }
        }
        for hierarchy in cgroup_hierarchies() {
            for dir in dirs_depth_first(&hierarchy.join(cgroup.trim_start_matches('/'))) {
                let procs = fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
                pids.extend(procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
            }
        }
        pids.retain(|p| *p as u32 != me && is_alive(*p));
        if pids.is_empty() || Instant::now() > deadline {
            return;
        }
        for pid in pids {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A process that exists and is not a zombie.
fn is_alive(pid: i32) -> bool {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat.rsplit(") ").next().unwrap_or("").split(' ').next().unwrap_or("");
    !state.is_empty() && state != "Z" && state != "X"
}

/// `root` and the directories below it, deepest first.
fn dirs_depth_first(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.filter_map(|e| e.ok()) {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(entry.path());
            }
        }
        out.push(dir);
    }
    out.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    out
}

/// Removes what a node leaves behind once its processes are asked to stop:
/// leftover processes, mounts under `scratch`, the cgroups, the netns,
/// kubelet's `/var/log/containers` links into `scratch`, and `scratch`
/// itself (only its logs and configs with `keep`). Returns what could not be
/// removed.
fn clean_up(netns: &str, scratch: &Path, cgroup: &str, keep: bool) -> Vec<String> {
    let mut problems = Vec::new();
    let netns_path = Path::new("/run/netns").join(netns);
    kill_node_processes(&netns_path, cgroup);
    remove_cni_results(scratch);
    let left = unmount_all_under(scratch);
    if !left.is_empty() {
        problems.push(format!("still mounted: {left:?}"));
    }
    for hierarchy in cgroup_hierarchies() {
        let root = hierarchy.join(cgroup.trim_start_matches('/'));
        for dir in dirs_depth_first(&root) {
            let deadline = Instant::now() + Duration::from_secs(5);
            while let Err(e) = fs::remove_dir(&dir) {
                if e.kind() == io::ErrorKind::NotFound {
                    break;
                }
                if Instant::now() > deadline {
                    problems.push(format!("rmdir {}: {e}", dir.display()));
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
    if netns_path.exists() {
        let out = Command::new("ip").args(["netns", "delete", netns]).output();
        if !out.is_ok_and(|o| o.status.success()) {
            problems.push(format!("ip netns delete {netns} failed"));
        }
    }
    if let Ok(entries) = fs::read_dir("/var/log/containers") {
        for entry in entries.filter_map(|e| e.ok()) {
            if fs::read_link(entry.path()).is_ok_and(|target| target.starts_with(scratch)) {
                let _ = fs::remove_file(entry.path());
            }
        }
    }
    // Never remove a directory with something still mounted below it.
    if left.is_empty() && scratch.exists() {
        let result = if keep {
            // The sweep of a later run leaves a kept directory alone.
            ["containerd", "kubelet", "cni-ipam"]
                .iter()
                .map(|d| scratch.join(d))
                .filter(|d| d.exists())
                .try_for_each(fs::remove_dir_all)
                .and_then(|()| fs::write(scratch.join(KEPT), "kept: CLUSTER_KEEP_DIR was set\n"))
        } else {
            fs::remove_dir_all(scratch)
        };
        if let Err(e) = result {
            problems.push(format!("removing {}: {e}", scratch.display()));
        }
    }
    problems
}

/// libcni caches each attachment's result in `/var/lib/cni/results`
/// (`<network>-<sandbox id>-<interface>`, a path containerd 1.6 does not
/// let us move) and removes it only at CNI DEL, which the teardown never
/// runs: remove those of this node's sandboxes.
fn remove_cni_results(scratch: &Path) {
    let containerd = scratch.join("containerd");
    let mut ids: Vec<String> = Vec::new();
    for dir in [
        "root/io.containerd.grpc.v1.cri/sandboxes",
        "state/io.containerd.grpc.v1.cri/sandboxes",
    ] {
        if let Ok(entries) = fs::read_dir(containerd.join(dir)) {
            ids.extend(
                entries
                    .filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned()),
            );
        }
    }
    ids.retain(|id| id.len() >= 32);
    if ids.is_empty() {
        return;
    }
    let Ok(entries) = fs::read_dir(CNI_RESULTS) else {
        return;
    };
    for entry in entries.filter_map(|e| e.ok()) {
        let name = entry.file_name().to_string_lossy().into_owned();
        if ids.iter().any(|id| name.contains(&format!("-{id}-"))) {
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// The pid in a name `PREFIX<pid>-<n>`.
fn owner_pid(name: &str, prefix: &str) -> Option<u32> {
    let rest = name.strip_prefix(prefix)?;
    let (pid, n) = rest.split_once('-')?;
    n.parse::<u32>().ok()?;
    pid.parse().ok()
}

fn stale(name: &str, prefix: &str) -> bool {
    owner_pid(name, prefix).is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists())
}

/// Removes what killed earlier runs left (CI reuses machines): the netns,
/// scratch directories (not those marked kept) and cgroups of nodes whose
/// test process is gone, the processes in them and the mounts below them.
/// The first [`Node::create`] of a process runs it.
pub fn sweep_stale_nodes() {
    sweep_stale();
}

fn sweep_stale() {
    let mut names: Vec<String> = Vec::new();
    if let Ok(entries) = fs::read_dir("/run/netns") {
        names.extend(
            entries
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| stale(n, NETNS_PREFIX)),
        );
    }
    if let Ok(entries) = fs::read_dir(std::env::temp_dir()) {
        names.extend(
            entries
                .filter_map(|e| e.ok())
                .filter(|e| !e.path().join(KEPT).exists())
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    stale(&name, SCRATCH_PREFIX).then(|| format!("{NETNS_PREFIX}{}", &name[SCRATCH_PREFIX.len()..]))
                }),
        );
    }
    for hierarchy in cgroup_hierarchies() {
        if let Ok(entries) = fs::read_dir(&hierarchy) {
            names.extend(entries.filter_map(|e| e.ok()).filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                stale(&name, CGROUP_PREFIX).then(|| format!("{NETNS_PREFIX}{}", &name[CGROUP_PREFIX.len()..]))
            }));
        }
    }
    names.sort();
    names.dedup();
    for netns in names {
        let suffix = &netns[NETNS_PREFIX.len()..];
        let scratch = std::env::temp_dir().join(format!("{SCRATCH_PREFIX}{suffix}"));
        let cgroup = format!("/{CGROUP_PREFIX}{suffix}");
        eprintln!("cluster-harness: removing what a killed run left: node {netns}");
        let keep = scratch.join(KEPT).exists();
        for problem in clean_up(&netns, &scratch, &cgroup, keep) {
            eprintln!("cluster-harness: stale node {netns}: {problem}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_the_owner_pid() {
        assert_eq!(owner_pid("node-123-0", NETNS_PREFIX), Some(123));
        assert_eq!(owner_pid("harness-node-9-12", CGROUP_PREFIX), Some(9));
        assert_eq!(owner_pid("node-a", NETNS_PREFIX), None);
        assert_eq!(owner_pid("cni-1234-abcd", NETNS_PREFIX), None);
    }

    #[test]
    fn mount_points_are_unescaped() {
        assert_eq!(unescape_mount_point(r"/tmp/a\040b"), "/tmp/a b");
        assert_eq!(unescape_mount_point("/plain"), "/plain");
    }
}
