//! The test cluster: etcd and kube-apiserver on free loopback ports, with
//! the certificates of [`Pki`], torn down when dropped.

use std::fs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};

use crate::pki::{Pki, admin_client, admin_kubeconfig, kubeconfig};
use crate::process::{Proc, free_port, wait_tcp};
use crate::{cluster_bin, kubernetes_version};

/// The issuer of the cluster's service-account tokens.
pub const SERVICE_ACCOUNT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// A running etcd + kube-apiserver, and the control-plane components a test
/// started against them (`start_scheduler`, `start_controller_manager`).
/// Dropping it stops them all (process groups, the components first) and
/// removes its directory; if the thread is panicking, the tails of the logs
/// are printed first. Set `CLUSTER_KEEP_DIR=1` to keep the directory.
pub struct TestCluster {
    dir: Option<tempfile::TempDir>,
    etcd: Proc,
    apiserver: Proc,
    /// kube-scheduler, kube-controller-manager: in the order started.
    pub(crate) components: Vec<Proc>,
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
        Self::start_with_apiserver_args(&[]).await
    }

    /// [`TestCluster::start`] with `extra` kube-apiserver flags after the
    /// harness's own (e.g. `--enable-aggregator-routing=true`).
    pub async fn start_with_apiserver_args(extra: &[&str]) -> TestCluster {
        let mut last = None;
        // Free ports are probed, then handed over: retry once on a lost race.
        for _ in 0..2 {
            match Self::try_start(extra).await {
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

    async fn try_start(extra: &[&str]) -> Result<TestCluster> {
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
        let api_args: Vec<String> = [
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
        ]
        .into_iter()
        .chain(extra.iter().map(|arg| arg.to_string()))
        .collect();
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
            components: Vec::new(),
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

    /// The tails of the etcd, kube-apiserver and components' logs.
    pub fn logs(&self) -> String {
        let mut text = format!(
            "--- etcd log ({}) ---\n{}\n--- kube-apiserver log ({}) ---\n{}",
            self.etcd.log.display(),
            self.etcd.tail(6000),
            self.apiserver.log.display(),
            self.apiserver.tail(20000)
        );
        for component in &self.components {
            text.push_str(&format!(
                "\n--- {} log ({}) ---\n{}",
                component.name,
                component.log.display(),
                component.tail(8000)
            ));
        }
        text
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("cluster-harness: test failed; cluster logs follow\n{}", self.logs());
        }
        for component in self.components.iter_mut().rev() {
            component.stop();
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
