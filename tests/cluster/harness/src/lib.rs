//! Cluster test tier support: a real etcd and kube-apiserver (and, for the
//! tests that schedule pods, kube-scheduler and kube-controller-manager),
//! built from the Go module proxy by `tests/cluster/build.sh`, started on
//! free loopback ports with generated certificates, and kubelet's own credential-provider
//! code (`kubelet-credcheck`) for the Rust tests to compare against.
//!
//! ```text
//! let mut cluster = TestCluster::start().await; // etcd + kube-apiserver, /readyz ok
//! let client = cluster.client();             // kube::Client as system:masters
//! cluster.start_scheduler()?;                // kube-scheduler, kube-controller-manager
//! cluster.start_controller_manager(&["persistentvolume-binder-controller"])?;
//! // ... the cluster is torn down when `cluster` drops, even on panic.
//! ```
//!
//! This crate is not among the workspace's default members and `make test`
//! leaves it out of its first cargo run: `tests/cluster/run.sh` builds the Go
//! binaries and then runs the tier.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use anyhow::{Context, Result, bail};

pub mod audit;
pub mod cloud_node_controller;
mod cluster;
mod control_plane;
pub mod corpus;
mod differential;
mod moto;
pub mod node;
mod pki;
mod process;
pub mod readme;
pub mod registry;
mod tls_proxy;
pub mod token_exchange;
mod token_review;
pub mod vsphere_sim;
pub mod webhook;

pub use cluster::{SERVICE_ACCOUNT_ISSUER, TestCluster};
pub use differential::{assert_disagreements, go_error_class, known_disagreements};
pub use moto::{AwsKeys, Moto, MotoAuth, WebIdentityCall, WebIdentitySts, tampered};
pub use node::{
    KubeletOptions, Node, NodeOptions, PAUSE_IMAGE, POD_ROUTE_HOST_SIDE, POD_ROUTE_NODE_SIDE, POD_SUBNET, PodRoute,
    pause_image_archive, pod_events, pod_manifest, wait_pod_event, wait_pod_running, waiting_reason,
};
pub use pki::{Pem, Pki};
pub use process::group_running;
pub use registry::{Registry, TokenRealm};
pub use tls_proxy::{TlsProxy, certificates};

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

/// Random bytes as hex, from the kernel.
pub fn random_hex(bytes: usize) -> String {
    use std::io::Read as _;
    let mut buf = vec![0u8; bytes];
    fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut buf))
        .expect("/dev/urandom");
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

/// JSON lines on stdout, one value each.
pub fn json_lines(out: &Output) -> Result<Vec<serde_json::Value>> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).with_context(|| format!("not JSON: {l}")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pinned_kubernetes_version_is_read_from_go_mod() {
        let v = kubernetes_version();
        assert!(v.starts_with("v1."), "{v}");
        assert!(cluster_bin_dir().ends_with(&v) || std::env::var_os("CLUSTER_BIN_DIR").is_some());
    }
}
