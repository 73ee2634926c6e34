//! kube-scheduler and kube-controller-manager, built from the same
//! `k8s.io/kubernetes` module as the apiserver, started against a
//! [`TestCluster`] on loopback with the identities a cluster gives them
//! (client certificates from the cluster CA, bound by the apiserver's
//! bootstrap RBAC). No cloud provider and no kubelet: the scheduler binds
//! pods through the API and nothing runs them.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::TestCluster;
use crate::cluster_bin;
use crate::process::{Proc, free_port, wait_tcp};

impl TestCluster {
    /// Starts kube-scheduler as `system:kube-scheduler` (no leader election,
    /// its own serving port on 127.0.0.1) and waits until it listens.
    pub fn start_scheduler(&mut self) -> Result<()> {
        let kubeconfig = self.user_kubeconfig("system:kube-scheduler", &[])?;
        self.start_component("kube-scheduler", &kubeconfig, Vec::new())
    }

    /// Starts kube-controller-manager as `system:kube-controller-manager`
    /// with only `controllers` (e.g. `persistentvolume-binder-controller`),
    /// each under its own service account's token
    /// (`--use-service-account-credentials`, tokens from the TokenRequest
    /// API), and no cloud provider; waits until it listens.
    pub fn start_controller_manager(&mut self, controllers: &[&str]) -> Result<()> {
        let kubeconfig = self.user_kubeconfig("system:kube-controller-manager", &[])?;
        let args = vec![
            format!("--controllers={}", controllers.join(",")),
            "--use-service-account-credentials=true".into(),
        ];
        self.start_component("kube-controller-manager", &kubeconfig, args)
    }

    fn start_component(&mut self, name: &'static str, kubeconfig: &std::path::Path, extra: Vec<String>) -> Result<()> {
        let t0 = Instant::now();
        let program = cluster_bin(name);
        let (port, listener) = free_port()?;
        drop(listener);
        let kubeconfig = kubeconfig.display();
        let mut args: Vec<String> = vec![
            // Only --kubeconfig: without the delegated authentication and
            // authorization kubeconfigs (which would read a requestheader CA
            // this apiserver does not have), the serving port answers the
            // always-allowed /healthz, /readyz and /livez only.
            format!("--kubeconfig={kubeconfig}"),
            "--bind-address=127.0.0.1".into(),
            format!("--secure-port={port}"),
            format!("--cert-dir={}", self.dir().join(format!("{name}-certs")).display()),
            "--leader-elect=false".into(),
            "--profiling=false".into(),
            // v=2: each binding, each claim bound, in the log a failing test prints.
            "--v=2".into(),
        ];
        args.extend(extra);
        let root = self.dir().to_path_buf();
        let mut proc = Proc::spawn(name, &program, &args, root.join(format!("{name}.log")), &root)?;
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        if let Err(e) = wait_tcp(addr, &mut proc, Duration::from_secs(60)) {
            let log = proc.tail(8000);
            proc.stop();
            return Err(e).with_context(|| format!("--- {name} log ---\n{log}"));
        }
        eprintln!("cluster-harness: {name} listening on {addr} in {:.1?}", t0.elapsed());
        self.components.push(proc);
        Ok(())
    }
}
