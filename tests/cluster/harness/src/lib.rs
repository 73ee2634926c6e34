//! Cluster test tier support: a real etcd and kube-apiserver, built from the
//! Go module proxy by `tests/cluster/build.sh`, started on free loopback
//! ports with generated certificates, and kubelet's own credential-provider
//! code (`kubelet-credcheck`) for the Rust tests to compare against.
//!
//! ```text
//! let cluster = TestCluster::start().await;   // etcd + kube-apiserver, /readyz ok
//! let client = cluster.client();             // kube::Client as system:masters
//! // ... the cluster is torn down when `cluster` drops, even on panic.
//! ```
//!
//! This crate is not among the workspace's default members and `make test`
//! leaves it out of its first cargo run: `tests/cluster/run.sh` builds the Go
//! binaries and then runs the tier.

use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use kube::config::{KubeConfigOptions, Kubeconfig};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};

/// The workspace root (two levels above this crate's `tests/cluster`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../..")
        .canonicalize()
        .expect("workspace root")
}

/// `k8s.io/kubernetes` version pinned in `tests/cluster/go.mod`.
pub fn kubernetes_version() -> String {
    let go_mod = workspace_root().join("tests/cluster/go.mod");
    let text = fs::read_to_string(&go_mod).expect("tests/cluster/go.mod");
    text.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find_map(|w| match w.as_slice() {
            ["k8s.io/kubernetes", v, ..] | ["require", "k8s.io/kubernetes", v, ..] if v.starts_with('v') => {
                Some(v.to_string())
            }
            _ => None,
        })
        .expect("k8s.io/kubernetes in tests/cluster/go.mod")
}

/// Where `build.sh` puts the Go binaries: `$CLUSTER_BIN_DIR`, else
/// `.cache/cluster-bin/<k8s-version>/`.
pub fn cluster_bin_dir() -> PathBuf {
    match std::env::var_os("CLUSTER_BIN_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => workspace_root().join(".cache/cluster-bin").join(kubernetes_version()),
    }
}

/// One of the Go binaries built by `tests/cluster/build.sh`.
pub fn cluster_bin(name: &str) -> PathBuf {
    let path = cluster_bin_dir().join(name);
    assert!(
        path.is_file(),
        "{} is missing: run tests/cluster/build.sh (or tests/cluster/run.sh)",
        path.display()
    );
    path
}

/// Our kubelet plugin: `$CLOUD_CREDENTIAL_PROVIDER_BIN`, else
/// `<target>/debug/cloud-credential-provider`.
pub fn provider_binary() -> PathBuf {
    workspace_binary("cloud-credential-provider", "CLOUD_CREDENTIAL_PROVIDER_BIN")
}

/// One of the workspace's programs: `$variable`, else `<target>/debug/<name>`.
pub fn workspace_binary(name: &str, variable: &str) -> PathBuf {
    let path = match std::env::var_os(variable) {
        Some(p) => PathBuf::from(p),
        None => {
            let target = std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| workspace_root().join("target"));
            target.join("debug").join(name)
        }
    };
    assert!(
        path.is_file(),
        "{} is missing: run `cargo build --workspace` (tests/cluster/run.sh does)",
        path.display()
    );
    path
}

/// Runs a command to completion; fails with its stderr unless it exits 0.
pub fn run_ok(cmd: &mut Command) -> Result<Output> {
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed ({}):\nstdout:\n{}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(out)
}

/// JSON lines on stdout, one value each.
pub fn json_lines(out: &Output) -> Result<Vec<serde_json::Value>> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).with_context(|| format!("not JSON: {l}")))
        .collect()
}

/// A process started in its own process group, output to a log file.
///
/// It runs under a small `sh` guard that also stops it when this test
/// process dies without unwinding (SIGKILL, abort): the guard reads the
/// pipe on its stdin, which closes when the test process goes away.
struct Proc {
    name: &'static str,
    child: Child,
    log: PathBuf,
    _lifeline: Option<std::process::ChildStdin>,
}

const GUARD: &str = r#"exec 3<&0
"$0" "$@" </dev/null &
server=$!
( read -r _ <&3; kill -KILL "$server" 2>/dev/null; [ -z "$GUARD_REMOVE_DIR" ] || rm -rf "$GUARD_REMOVE_DIR" ) &
wait "$server"
status=$?
kill "$!" 2>/dev/null
exit "$status""#;

impl Proc {
    /// `dir` is removed by the guard if the test process dies.
    fn spawn(name: &'static str, program: &Path, args: &[String], log: PathBuf, dir: &Path) -> Result<Self> {
        let file = fs::File::create(&log)?;
        let mut child = {
            use std::os::unix::process::CommandExt;
            Command::new("sh")
                .arg("-c")
                .arg(GUARD)
                .arg(program)
                .args(args)
                .env("GUARD_REMOVE_DIR", dir)
                .stdin(Stdio::piped())
                .stdout(file.try_clone()?)
                .stderr(file)
                .process_group(0)
                .spawn()
                .with_context(|| format!("starting {}", program.display()))?
        };
        let lifeline = child.stdin.take();
        Ok(Self {
            name,
            child,
            log,
            _lifeline: lifeline,
        })
    }

    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// SIGTERM to the group; SIGKILL once the guard has gone, or after
    /// 5 s; then waits (up to 5 s more) until no process of the group runs.
    fn stop(&mut self) {
        let group = Pid::from_raw(self.child.id() as i32);
        if self.exited().is_none() {
            let _ = killpg(group, Signal::SIGTERM);
            let deadline = Instant::now() + Duration::from_secs(5);
            while self.exited().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        let _ = killpg(group, Signal::SIGKILL);
        let _ = self.child.wait();
        let deadline = Instant::now() + Duration::from_secs(5);
        while group_running(self.child.id()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn tail(&self, max: u64) -> String {
        let mut text = String::new();
        if let Ok(mut f) = fs::File::open(&self.log) {
            let len = f.metadata().map(|m| m.len()).unwrap_or(0);
            let _ = f.seek(SeekFrom::Start(len.saturating_sub(max)));
            let _ = f.read_to_string(&mut text);
        }
        text
    }
}

/// Whether a process of group `pgid` runs (zombies do not count).
pub fn group_running(pgid: u32) -> bool {
    let Ok(entries) = fs::read_dir("/proc") else {
        return false;
    };
    entries.filter_map(|e| e.ok()).any(|e| {
        let stat = fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        // After the command: state ppid pgrp ...
        let fields: Vec<&str> = stat.rsplit(") ").next().unwrap_or("").split(' ').collect();
        fields.len() > 2 && fields[0] != "Z" && fields[0] != "X" && fields[2] == pgid.to_string()
    })
}

/// A free TCP port on 127.0.0.1 (held until the listener drops).
fn free_port() -> Result<(u16, TcpListener)> {
    let l = TcpListener::bind("127.0.0.1:0")?;
    Ok((l.local_addr()?.port(), l))
}

fn wait_tcp(addr: SocketAddr, proc: &mut Proc, timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return Ok(());
        }
        if let Some(status) = proc.exited() {
            bail!("{} exited early ({status})", proc.name);
        }
        if Instant::now() > deadline {
            bail!("{} did not listen on {addr} within {timeout:?}", proc.name);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// PEM certificate and key.
pub struct Pem {
    pub cert: String,
    pub key: String,
}

/// The cluster's PKI: a CA, the apiserver's serving pair, an admin client
/// pair (O=system:masters), and the service-account signing key.
pub struct Pki {
    pub ca: Pem,
    pub serving: Pem,
    pub admin: Pem,
    pub service_account_key: String,
    pub service_account_public_key: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Pki {
    pub fn generate() -> Result<Self> {
        let mut ca_params = CertificateParams::default();
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "cluster-harness-ca");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_key = KeyPair::generate()?;
        let ca_cert = ca_params.self_signed(&ca_key)?;
        let ca = Pem {
            cert: ca_cert.pem(),
            key: ca_key.serialize_pem(),
        };
        let issuer = Issuer::new(ca_params, ca_key);

        let names = [
            "localhost",
            "127.0.0.1",
            "10.0.0.1",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ];
        let mut params = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())?;
        params.distinguished_name.push(DnType::CommonName, "kube-apiserver");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate()?;
        let serving = Pem {
            cert: params.signed_by(&key, &issuer)?.pem(),
            key: key.serialize_pem(),
        };

        let admin = client_pair(&issuer, "cluster-harness-admin", &["system:masters"])?;

        let sa = KeyPair::generate()?;
        Ok(Self {
            ca,
            serving,
            admin,
            service_account_key: sa.serialize_pem(),
            service_account_public_key: sa.public_key_pem(),
            issuer,
        })
    }

    /// A client certificate for `user` in `groups`, signed by the cluster CA.
    pub fn client(&self, user: &str, groups: &[&str]) -> Result<Pem> {
        client_pair(&self.issuer, user, groups)
    }
}

fn client_pair(issuer: &Issuer<'static, KeyPair>, user: &str, groups: &[&str]) -> Result<Pem> {
    let mut params = CertificateParams::default();
    params.distinguished_name.push(DnType::CommonName, user);
    for group in groups {
        params.distinguished_name.push(DnType::OrganizationName, *group);
    }
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let key = KeyPair::generate()?;
    Ok(Pem {
        cert: params.signed_by(&key, issuer)?.pem(),
        key: key.serialize_pem(),
    })
}

/// moto's server (AWS APIs; `make tools` installs it) on a free loopback
/// port, stopped (process group) when dropped.
pub struct Moto {
    proc: Proc,
    _dir: tempfile::TempDir,
    pub url: String,
}

impl Moto {
    /// `$MOTO_SERVER`, else `.cache/venv/bin/moto_server`.
    pub fn start() -> Moto {
        let program = std::env::var_os("MOTO_SERVER")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace_root().join(".cache/venv/bin/moto_server"));
        assert!(program.exists(), "{} not found: run `make tools`", program.display());
        let dir = tempfile::Builder::new()
            .prefix("cluster-harness-moto-")
            .tempdir()
            .expect("a temporary directory for moto");
        let (port, listener) = free_port().expect("a free loopback port for moto");
        drop(listener);
        let args = vec!["-H".to_string(), "127.0.0.1".into(), "-p".into(), port.to_string()];
        let mut proc = Proc::spawn("moto_server", &program, &args, dir.path().join("moto.log"), dir.path())
            .expect("start moto_server");
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        if let Err(e) = wait_tcp(addr, &mut proc, Duration::from_secs(30)) {
            let log = proc.tail(4000);
            proc.stop();
            panic!("moto_server: {e:#}\n{log}");
        }
        Moto {
            proc,
            _dir: dir,
            url: format!("http://127.0.0.1:{port}"),
        }
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        self.proc.stop();
    }
}

/// The issuer of the cluster's service-account tokens.
pub const SERVICE_ACCOUNT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// A running etcd + kube-apiserver. Dropping it stops both (process groups)
/// and removes its directory; if the thread is panicking, the tails of both
/// logs are printed first. Set `CLUSTER_KEEP_DIR=1` to keep the directory.
pub struct TestCluster {
    dir: Option<tempfile::TempDir>,
    etcd: Proc,
    apiserver: Proc,
    client: kube::Client,
    /// `https://127.0.0.1:<port>`.
    pub server: String,
    /// Admin kubeconfig (client certificate, system:masters).
    pub kubeconfig: PathBuf,
    pki: Pki,
}

impl TestCluster {
    /// Starts etcd and kube-apiserver and waits for `/readyz`. Panics (after
    /// printing the logs) if the cluster does not come up.
    pub async fn start() -> TestCluster {
        let mut last = None;
        // Free ports are probed, then handed over: retry once on a lost race.
        for _ in 0..2 {
            match Self::try_start().await {
                Ok(cluster) => return cluster,
                Err(e) => {
                    eprintln!("cluster-harness: start failed: {e:#}");
                    last = Some(e);
                }
            }
        }
        match last {
            Some(e) => panic!("cluster-harness: the test cluster did not start: {e:#}"),
            None => panic!("cluster-harness: the test cluster did not start"),
        }
    }

    async fn try_start() -> Result<TestCluster> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let t0 = Instant::now();
        let etcd_bin = cluster_bin("etcd");
        let apiserver_bin = cluster_bin("kube-apiserver");
        let dir = tempfile::Builder::new().prefix("cluster-harness-").tempdir()?;
        let root = dir.path().to_path_buf();
        let pki = Pki::generate()?;
        let certs = root.join("pki");
        fs::create_dir_all(&certs)?;
        let write = |name: &str, text: &str| -> Result<PathBuf> {
            let path = certs.join(name);
            fs::write(&path, text)?;
            Ok(path)
        };
        let ca_crt = write("ca.crt", &pki.ca.cert)?;
        let srv_crt = write("apiserver.crt", &pki.serving.cert)?;
        let srv_key = write("apiserver.key", &pki.serving.key)?;
        let sa_key = write("sa.key", &pki.service_account_key)?;
        let sa_pub = write("sa.pub", &pki.service_account_public_key)?;

        let (client_port, l1) = free_port()?;
        let (peer_port, l2) = free_port()?;
        let (api_port, l3) = free_port()?;
        drop((l1, l2, l3));

        let client_url = format!("http://127.0.0.1:{client_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let etcd_args: Vec<String> = vec![
            "--name=harness".into(),
            format!("--data-dir={}", root.join("etcd").display()),
            format!("--listen-client-urls={client_url}"),
            format!("--advertise-client-urls={client_url}"),
            format!("--listen-peer-urls={peer_url}"),
            format!("--initial-advertise-peer-urls={peer_url}"),
            format!("--initial-cluster=harness={peer_url}"),
            "--unsafe-no-fsync".into(),
            "--log-level=warn".into(),
        ];
        let mut etcd = Proc::spawn("etcd", &etcd_bin, &etcd_args, root.join("etcd.log"), &root)?;

        let server = format!("https://127.0.0.1:{api_port}");
        let api_args: Vec<String> = vec![
            format!("--etcd-servers={client_url}"),
            "--bind-address=127.0.0.1".into(),
            "--advertise-address=127.0.0.1".into(),
            format!("--secure-port={api_port}"),
            format!("--cert-dir={}", root.join("apiserver-certs").display()),
            format!("--tls-cert-file={}", srv_crt.display()),
            format!("--tls-private-key-file={}", srv_key.display()),
            format!("--client-ca-file={}", ca_crt.display()),
            // Node authorizer and NodeRestriction: tests act as a kubelet too.
            "--authorization-mode=Node,RBAC".into(),
            "--enable-admission-plugins=NodeRestriction".into(),
            format!("--service-account-issuer={SERVICE_ACCOUNT_ISSUER}"),
            format!("--service-account-key-file={}", sa_pub.display()),
            format!("--service-account-signing-key-file={}", sa_key.display()),
            "--service-cluster-ip-range=10.0.0.0/24".into(),
            // No kubelet or endpoints here; a loopback address cannot be an endpoint.
            "--endpoint-reconciler-type=none".into(),
            "--profiling=false".into(),
            "--v=1".into(),
        ];
        // From here on, `cluster` owns the processes: an error drops it.
        let etcd_addr: SocketAddr = format!("127.0.0.1:{client_port}").parse()?;
        if let Err(e) = wait_tcp(etcd_addr, &mut etcd, Duration::from_secs(30)) {
            eprintln!("--- etcd log ---\n{}", etcd.tail(8000));
            etcd.stop();
            return Err(e);
        }
        let mut apiserver = match Proc::spawn(
            "kube-apiserver",
            &apiserver_bin,
            &api_args,
            root.join("kube-apiserver.log"),
            &root,
        ) {
            Ok(p) => p,
            Err(e) => {
                etcd.stop();
                return Err(e);
            }
        };

        let kubeconfig = root.join("admin.kubeconfig");
        fs::write(&kubeconfig, admin_kubeconfig(&server, &pki))?;
        let client = match admin_client(&kubeconfig).await {
            Ok(c) => c,
            Err(e) => {
                apiserver.stop();
                etcd.stop();
                return Err(e);
            }
        };
        let mut cluster = TestCluster {
            dir: Some(dir),
            etcd,
            apiserver,
            client,
            server,
            kubeconfig,
            pki,
        };
        if let Err(e) = cluster.wait_ready(Duration::from_secs(90)).await {
            eprintln!("{}", cluster.logs());
            return Err(e);
        }
        eprintln!(
            "cluster-harness: kube-apiserver {} ready at {} in {:.1?} (dir {})",
            kubernetes_version(),
            cluster.server,
            t0.elapsed(),
            cluster.dir().display()
        );
        Ok(cluster)
    }

    async fn wait_ready(&mut self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let req = http::Request::get("/readyz").body(Vec::new())?;
            let last = match self.client.request_text(req).await {
                Ok(body) if body.trim() == "ok" => return Ok(()),
                Ok(body) => body,
                Err(e) => e.to_string(),
            };
            if let Some(status) = self.apiserver.exited() {
                bail!("kube-apiserver exited ({status}); last /readyz: {last}");
            }
            if Instant::now() > deadline {
                bail!("/readyz not ok within {timeout:?}; last answer: {last}");
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// A kubeconfig for `user` in `groups` (a client certificate from the
    /// cluster CA), e.g. a kubelet's `system:node:NAME` in `system:nodes`.
    pub fn user_kubeconfig(&self, user: &str, groups: &[&str]) -> Result<PathBuf> {
        let pem = self.pki.client(user, groups)?;
        let file = self.dir().join(format!("{}.kubeconfig", user.replace(':', "-")));
        fs::write(&file, kubeconfig(&self.server, &self.pki.ca, &pem))?;
        Ok(file)
    }

    /// A client for `user` in `groups`.
    pub async fn user_client(&self, user: &str, groups: &[&str]) -> Result<kube::Client> {
        admin_client(&self.user_kubeconfig(user, groups)?).await
    }

    /// A client authenticated as a cluster admin.
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// Process group ids of etcd and kube-apiserver (each runs in its own).
    pub fn pids(&self) -> (u32, u32) {
        (self.etcd.child.id(), self.apiserver.child.id())
    }

    /// The cluster's directory: certificates, etcd data, logs.
    pub fn dir(&self) -> &Path {
        self.dir.as_ref().expect("dir").path()
    }

    /// The tails of the etcd and kube-apiserver logs.
    pub fn logs(&self) -> String {
        format!(
            "--- etcd log ({}) ---\n{}\n--- kube-apiserver log ({}) ---\n{}",
            self.etcd.log.display(),
            self.etcd.tail(6000),
            self.apiserver.log.display(),
            self.apiserver.tail(20000)
        )
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("cluster-harness: test failed; cluster logs follow\n{}", self.logs());
        }
        self.apiserver.stop();
        self.etcd.stop();
        // TempDir's drop removes the directory unless it is kept here.
        if let Some(dir) = self.dir.take()
            && std::env::var_os("CLUSTER_KEEP_DIR").is_some()
        {
            eprintln!("cluster-harness: keeping {}", dir.keep().display());
        }
    }
}

fn admin_kubeconfig(server: &str, pki: &Pki) -> String {
    kubeconfig(server, &pki.ca, &pki.admin)
}

fn kubeconfig(server: &str, ca: &Pem, user: &Pem) -> String {
    use base64::Engine;
    let encode = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    serde_yaml_ng::to_string(&serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "harness", "cluster": {
            "server": server,
            "certificate-authority-data": encode(ca.cert.as_bytes()),
        }}],
        "users": [{"name": "admin", "user": {
            "client-certificate-data": encode(user.cert.as_bytes()),
            "client-key-data": encode(user.key.as_bytes()),
        }}],
        "contexts": [{"name": "harness", "context": {"cluster": "harness", "user": "admin"}}],
        "current-context": "harness",
    }))
    .expect("kubeconfig YAML")
}

async fn admin_client(path: &Path) -> Result<kube::Client> {
    let kubeconfig = Kubeconfig::read_from(path)?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    Ok(kube::Client::try_from(config)?)
}

pub mod corpus;

/// Disagreements between our code and kubelet's already reported, from
/// `tests/data/cluster/known-disagreements.txt`: lines `<kind> <key>`
/// (`#` comments). A differential test passes when what it finds equals
/// this list for its kind, so a new disagreement fails the test and so does
/// a fixed one (remove its line).
pub fn known_disagreements(kind: &str) -> std::collections::BTreeSet<String> {
    let path = workspace_root().join("tests/data/cluster/known-disagreements.txt");
    let text = fs::read_to_string(&path).unwrap_or_default();
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| l.split_once(' '))
        .filter(|(k, _)| *k == kind)
        .map(|(_, key)| key.trim().to_string())
        .collect()
}

/// Compares what a differential test found (key → examples) with the known
/// list; panics on a disagreement not listed, and, if `exhaustive` (the
/// corpus is fixed, not a random sample), on a listed one not found. Up to
/// five examples of each key are printed.
pub fn assert_disagreements(kind: &str, found: &std::collections::BTreeMap<String, Vec<String>>, exhaustive: bool) {
    let known = known_disagreements(kind);
    let examples = |list: &[String]| {
        let mut text = String::new();
        for e in list.iter().take(5) {
            text.push_str(&format!("    {e}\n"));
        }
        if list.len() > 5 {
            text.push_str(&format!("    ... and {} more\n", list.len() - 5));
        }
        text
    };
    for (key, list) in found.iter().filter(|(k, _)| known.contains(*k)) {
        eprintln!(
            "known disagreement: {kind} {key} ({} cases)\n{}",
            list.len(),
            examples(list)
        );
    }
    let new: Vec<_> = found.iter().filter(|(k, _)| !known.contains(*k)).collect();
    let mut gone: Vec<_> = known.iter().filter(|k| !found.contains_key(*k)).collect();
    if !exhaustive {
        for key in gone.drain(..) {
            eprintln!("note: listed disagreement not met by this sample: {kind} {key}");
        }
    }
    if new.is_empty() && gone.is_empty() {
        return;
    }
    let mut msg = String::new();
    for (key, list) in &new {
        msg.push_str(&format!(
            "NEW disagreement `{kind} {key}` ({} cases; a bug in ours: report it, then list the line in tests/data/cluster/known-disagreements.txt):\n{}",
            list.len(),
            examples(list)
        ));
    }
    for key in &gone {
        msg.push_str(&format!(
            "listed but no longer found (fixed? remove the line): {kind} {key}\n"
        ));
    }
    panic!("{kind}: our code and kubelet's disagree:\n{msg}");
}

/// A Go `url.Parse` error without its specifics: `parse "…": invalid
/// IP-literal` becomes `invalid IP-literal`, quoted strings become `"…"`.
pub fn go_error_class(error: &str) -> String {
    let tail = match error.find("\": ") {
        Some(i) if error.starts_with("parse \"") => &error[i + 3..],
        _ => error,
    };
    let mut out = String::new();
    let mut quoted = false;
    for c in tail.chars() {
        if c == '"' {
            if !quoted {
                out.push_str("\"…\"");
            }
            quoted = !quoted;
        } else if !quoted {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_errors_lose_their_specifics() {
        assert_eq!(
            go_error_class(r#"parse "https://reg[a].io": invalid IP-literal"#),
            "invalid IP-literal"
        );
        assert_eq!(
            go_error_class(r#"parse "https://[b.c]": invalid host: ParseAddr("b.c"): unexpected character (at "b.c")"#),
            r#"invalid host: ParseAddr("…"): unexpected character (at "…")"#
        );
        assert_eq!(go_error_class("plain"), "plain");
    }

    #[test]
    fn the_pinned_kubernetes_version_is_read_from_go_mod() {
        let v = kubernetes_version();
        assert!(v.starts_with("v1."), "{v}");
        assert!(cluster_bin_dir().ends_with(&v) || std::env::var_os("CLUSTER_BIN_DIR").is_some());
    }

    #[test]
    fn pki_is_generated() {
        let pki = Pki::generate().unwrap();
        assert!(pki.ca.cert.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(pki.admin.key.contains("PRIVATE KEY"));
        assert!(pki.service_account_public_key.contains("PUBLIC KEY"));
        assert!(admin_kubeconfig("https://127.0.0.1:1", &pki).contains("client-certificate-data"));
    }
}
