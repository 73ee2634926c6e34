//! The PersistentVolume requests `audit` and `repair` make, through the suite's
//! bounded apiserver client (`apiserver-client`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PersistentVolume;

pub use apiserver_client::{ApiError, Apiserver, ConnectError, Page};

use crate::cli::ClusterArgs;

/// The PersistentVolumes' collection.
pub const PERSISTENT_VOLUMES: &str = "/api/v1/persistentvolumes";

/// The kube configuration for the cluster `--kubeconfig` and `--context` name.
pub async fn config(args: &ClusterArgs) -> Result<kube::Config, ConnectError> {
    apiserver_client::config(args.kubeconfig.as_deref(), args.context.as_deref()).await
}

/// One page of at most `limit` PersistentVolumes, from `continue_token` on.
pub async fn list(
    apiserver: &Apiserver,
    limit: u32,
    continue_token: Option<&str>,
) -> Result<Page<PersistentVolume>, ApiError> {
    apiserver
        .list_page(PERSISTENT_VOLUMES, "PersistentVolumeList", limit, continue_token)
        .await
}

/// Merges `labels` into PV `name`'s metadata.labels (nothing else is touched).
pub async fn patch_labels(
    apiserver: &Apiserver,
    name: &str,
    labels: &BTreeMap<String, String>,
    field_manager: &str,
) -> Result<(), ApiError> {
    let patch = serde_json::json!({"metadata": {"labels": labels}});
    apiserver
        .merge_patch::<serde::de::IgnoredAny>(PERSISTENT_VOLUMES, "PersistentVolume", name, &patch, field_manager)
        .await
        .map(drop)
}
