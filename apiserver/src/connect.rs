//! Which cluster, and with which credentials: `--kubeconfig` (with `--context`), else
//! `$KUBECONFIG`'s list, else `~/.kube/config`, else the pod's service account
//! (in-cluster), as kubectl and kube's inference choose; every file read bounded
//! ([`crate::kubeconfig`]).

use std::path::Path;

use kube::config::KubeConfigOptions;
use thiserror::Error;

use crate::kubeconfig::{self, KubeconfigError};

/// Why no client for the cluster could be made; each names the flag or the place read.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// No kubeconfig anywhere, and not in a pod; callers with a better hint (which
    /// flag, which file on a node) say it in its place.
    #[error("cannot find the cluster: no --kubeconfig, $KUBECONFIG or ~/.kube/config, and not in a pod")]
    NotFound,
    #[error(transparent)]
    File(#[from] KubeconfigError),
    #[error("cannot load the kubeconfig{}: {reason}", .path.as_ref().map(|p| format!(" {p}")).unwrap_or_default())]
    Invalid { path: Option<String>, reason: String },
    #[error("cannot make a client for the cluster: {0}")]
    Client(#[source] kube::Error),
    #[error("the kubeconfig's cluster names a proxy-url: the suite reaches the apiserver directly, without proxies")]
    Proxy,
}

/// The kube configuration for the cluster `kubeconfig` (or the defaults) and `context`
/// (or the current context) name.
pub async fn config(kubeconfig: Option<&Path>, context: Option<&str>) -> Result<kube::Config, ConnectError> {
    let invalid = |reason: String| ConnectError::Invalid {
        path: kubeconfig.map(|p| p.display().to_string()),
        reason,
    };
    let options = KubeConfigOptions {
        context: context.map(str::to_owned),
        ..KubeConfigOptions::default()
    };
    match kubeconfig::load(&kubeconfig::files(kubeconfig))? {
        Some(file) => kube::Config::from_custom_kubeconfig(file, &options)
            .await
            .map_err(|e| match context {
                Some(name) => invalid(format!("--context {name}: {e}")),
                None => invalid(e.to_string()),
            }),
        None if context.is_some() => Err(invalid("--context needs a kubeconfig (none found)".to_owned())),
        None => kube::Config::incluster().map_err(|e| match e {
            kube::config::InClusterError::ReadEnvironmentVariable(_) => ConnectError::NotFound,
            other => invalid(other.to_string()),
        }),
    }
}
