//! Which cluster, and with which credentials: `--kubeconfig` (with `--context`), else
//! kube's inference ($KUBECONFIG, ~/.kube/config, the in-cluster service account).

use kube::config::{KubeConfigOptions, Kubeconfig};
use thiserror::Error;

use crate::cli::ClusterArgs;

/// Why no client for the cluster could be made; each names the flag or the place read.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ConnectError {
    #[error("--kubeconfig {path}: {source}")]
    Kubeconfig {
        path: String,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error("cannot find the cluster (--kubeconfig, $KUBECONFIG, ~/.kube/config or in-cluster): {0}")]
    Infer(#[source] kube::config::InferConfigError),
    #[error("--context: {0}")]
    Context(#[source] kube::config::KubeconfigError),
    #[error("cannot make a client for the cluster: {0}")]
    Client(#[source] kube::Error),
    #[error(
        "the kubeconfig's cluster names a proxy-url: pv-topology-webhook reaches the apiserver directly, without proxies"
    )]
    Proxy,
}

/// The kube configuration for the cluster `args` name.
pub async fn config(args: &ClusterArgs) -> Result<kube::Config, ConnectError> {
    let options = KubeConfigOptions {
        context: args.context.clone(),
        ..KubeConfigOptions::default()
    };
    match (&args.kubeconfig, &args.context) {
        (Some(path), _) => {
            let kubeconfig_error = |source| ConnectError::Kubeconfig {
                path: path.display().to_string(),
                source,
            };
            let kubeconfig = Kubeconfig::read_from(path).map_err(kubeconfig_error)?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .map_err(kubeconfig_error)
        }
        (None, Some(_)) => kube::Config::from_kubeconfig(&options)
            .await
            .map_err(ConnectError::Context),
        (None, None) => kube::Config::infer().await.map_err(ConnectError::Infer),
    }
}
