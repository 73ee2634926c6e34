//! `repair`'s requests, through [`Apiserver`] (every answer bounded), counted: the test
//! hook [`PAUSE_VARIABLE`] stops the run after a given request, so that the tests can
//! kill it there and show that a rerun finishes the job.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use serde::Deserialize;
use serde_json::{Value, json};

use super::plan::{JOURNAL_ANNOTATION, Journal};
use crate::apiserver::{self, ApiError, Apiserver, PERSISTENT_VOLUMES, Page};

/// The field manager of repair's writes.
pub const FIELD_MANAGER: &str = "pv-topology-webhook-repair";
/// Test hook: after this many requests, `repair` says so on stderr and waits to be
/// killed (the crash-safety tests kill it there with SIGKILL).
pub const PAUSE_VARIABLE: &str = "PV_TOPOLOGY_WEBHOOK_REPAIR_PAUSE_AFTER_CALL";
/// Items asked for per page of a list.
pub const PAGE_SIZE: u32 = 500;
/// The most pages of one list (pods of a namespace, claims of the cluster): a million
/// items at [`PAGE_SIZE`].
pub const MAX_PAGES: usize = 2_000;

const CLAIMS: &str = "/api/v1/persistentvolumeclaims";

/// The cluster as repair sees it.
#[derive(Debug)]
pub struct Cluster {
    apiserver: Apiserver,
    calls: AtomicU64,
    pause_after: Option<u64>,
}

/// A pod, as far as repair reads it: which claims it uses while it runs.
#[derive(Debug, Deserialize)]
struct PodView {
    #[serde(default)]
    metadata: PodMeta,
    #[serde(default)]
    spec: PodSpecView,
    #[serde(default)]
    status: PodStatusView,
}

#[derive(Debug, Default, Deserialize)]
struct PodMeta {
    #[serde(default)]
    name: String,
}

#[derive(Debug, Default, Deserialize)]
struct PodSpecView {
    #[serde(default)]
    volumes: Vec<VolumeView>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct VolumeView {
    #[serde(default)]
    name: String,
    persistent_volume_claim: Option<ClaimSource>,
    ephemeral: Option<serde::de::IgnoredAny>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ClaimSource {
    #[serde(default)]
    claim_name: String,
}

#[derive(Debug, Default, Deserialize)]
struct PodStatusView {
    #[serde(default)]
    phase: String,
}

impl PodView {
    /// Whether the pod holds `claim`: a volume of it names the claim (a generic
    /// ephemeral volume's claim is `<pod>-<volume>`), and it has not finished.
    fn uses(&self, claim: &str) -> bool {
        let finished = matches!(self.status.phase.as_str(), "Succeeded" | "Failed");
        !finished
            && self.spec.volumes.iter().any(|v| {
                v.persistent_volume_claim
                    .as_ref()
                    .is_some_and(|c| c.claim_name == claim)
                    || (v.ephemeral.is_some() && format!("{}-{}", self.metadata.name, v.name) == claim)
            })
    }
}

/// A claim, as far as the search for unfinished repairs reads it.
#[derive(Debug, Deserialize)]
struct ClaimView {
    #[serde(default)]
    metadata: ClaimMeta,
}

#[derive(Debug, Default, Deserialize)]
struct ClaimMeta {
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
}

impl Cluster {
    /// `apiserver`, with the pause of [`PAUSE_VARIABLE`] if set (read once, here).
    pub fn new(apiserver: Apiserver, pause_after: Option<u64>) -> Self {
        Self {
            apiserver,
            calls: AtomicU64::new(0),
            pause_after,
        }
    }

    /// The server as error lines name it.
    pub fn server(&self) -> &str {
        self.apiserver.server()
    }

    /// Counts a request that was answered; at the pause, waits to be killed.
    async fn answered(&self) {
        let call = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        if self.pause_after == Some(call) {
            eprintln!("repair: paused after API call {call} ({PAUSE_VARIABLE})");
            std::future::pending::<()>().await;
        }
    }

    async fn counted<T>(&self, result: Result<T, ApiError>) -> Result<T, ApiError> {
        self.answered().await;
        result
    }

    pub async fn pv(&self, name: &str) -> Result<Option<PersistentVolume>, ApiError> {
        let got = self.apiserver.get(PERSISTENT_VOLUMES, "PersistentVolume", name).await;
        self.counted(got).await
    }

    pub async fn claim(&self, namespace: &str, name: &str) -> Result<Option<PersistentVolumeClaim>, ApiError> {
        let path = format!("/api/v1/namespaces/{namespace}/persistentvolumeclaims");
        let got = self.apiserver.get(&path, "PersistentVolumeClaim", name).await;
        self.counted(got).await
    }

    /// A page of the PVs, for `--all`.
    pub async fn pvs(&self, continue_token: Option<&str>) -> Result<Page<PersistentVolume>, ApiError> {
        let page = apiserver::list(&self.apiserver, PAGE_SIZE, continue_token).await;
        self.counted(page).await
    }

    /// Every page of a list, items as `T`, at most [`MAX_PAGES`].
    async fn whole_list<T: serde::de::DeserializeOwned + Send + 'static>(
        &self,
        path: &str,
        kind: &'static str,
    ) -> Result<Vec<T>, ApiError> {
        let mut items = Vec::new();
        let mut token: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let page = self.apiserver.list_page(path, kind, PAGE_SIZE, token.as_deref()).await;
            let page: Page<T> = self.counted(page).await?;
            items.extend(page.items);
            token = page.continue_token;
            if token.is_none() {
                return Ok(items);
            }
        }
        Err(ApiError::Transport(format!(
            "{path}: more than {MAX_PAGES} pages of {PAGE_SIZE}"
        )))
    }

    /// The pods of `namespace` that hold `claim`, by name.
    pub async fn users(&self, namespace: &str, claim: &str) -> Result<Vec<String>, ApiError> {
        let path = format!("/api/v1/namespaces/{namespace}/pods");
        let pods: Vec<PodView> = self.whole_list(&path, "PodList").await?;
        Ok(pods
            .into_iter()
            .filter(|p| p.uses(claim))
            .map(|p| format!("{namespace}/{}", p.metadata.name))
            .collect())
    }

    /// The claims holding a repair journal: `(namespace, name, the journal's PV)`. An
    /// unreadable journal is named with its claim.
    pub async fn unfinished(&self) -> Result<Vec<(String, String, Result<Journal, String>)>, ApiError> {
        let claims: Vec<ClaimView> = self.whole_list(CLAIMS, "PersistentVolumeClaimList").await?;
        Ok(claims
            .into_iter()
            .filter_map(|c| {
                let text = c.metadata.annotations.get(JOURNAL_ANNOTATION)?;
                let journal = serde_json::from_str::<Journal>(text).map_err(|e| {
                    format!(
                        "claim {}/{}: annotation {JOURNAL_ANNOTATION} is not a repair journal: {e}",
                        c.metadata.namespace, c.metadata.name
                    )
                });
                Some((c.metadata.namespace, c.metadata.name, journal))
            })
            .collect())
    }

    /// A dry-run create of `pv`: what admission (the webhooks) makes of it.
    pub async fn dry_run(&self, pv: &PersistentVolume) -> Result<PersistentVolume, ApiError> {
        let created = self
            .apiserver
            .create(PERSISTENT_VOLUMES, "PersistentVolume", pv, true, FIELD_MANAGER)
            .await;
        self.counted(created).await
    }

    pub async fn create(&self, pv: &PersistentVolume) -> Result<PersistentVolume, ApiError> {
        let created = self
            .apiserver
            .create(PERSISTENT_VOLUMES, "PersistentVolume", pv, false, FIELD_MANAGER)
            .await;
        self.counted(created).await
    }

    /// A merge patch of PV `name`.
    pub async fn patch_pv(&self, name: &str, patch: &Value) -> Result<PersistentVolume, ApiError> {
        let patched = self
            .apiserver
            .merge_patch(PERSISTENT_VOLUMES, "PersistentVolume", name, patch, FIELD_MANAGER)
            .await;
        self.counted(patched).await
    }

    pub async fn delete_pv(&self, name: &str, uid: &str, resource_version: &str) -> Result<(), ApiError> {
        let deleted = self
            .apiserver
            .delete(PERSISTENT_VOLUMES, name, uid, resource_version)
            .await;
        self.counted(deleted).await
    }

    /// Sets (or, with `None`, removes) the journal on a claim; with `resource_version`,
    /// only if the claim has not changed since it was read.
    pub async fn set_journal(
        &self,
        namespace: &str,
        name: &str,
        journal: Option<&str>,
        resource_version: Option<&str>,
    ) -> Result<(), ApiError> {
        let mut patch = json!({"metadata": {"annotations": {JOURNAL_ANNOTATION: journal}}});
        if let Some(version) = resource_version {
            patch["metadata"]["resourceVersion"] = json!(version);
        }
        let path = format!("/api/v1/namespaces/{namespace}/persistentvolumeclaims");
        let patched = self
            .apiserver
            .merge_patch::<serde::de::IgnoredAny>(&path, "PersistentVolumeClaim", name, &patch, FIELD_MANAGER)
            .await;
        self.counted(patched).await.map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_holds_a_claim_by_name_or_as_its_ephemeral_volume_until_it_finishes() {
        let pod = |phase: &str, volumes: Value| -> PodView {
            serde_json::from_value(json!({
                "metadata": {"name": "web-0"},
                "spec": {"volumes": volumes, "containers": [{"name": "c", "image": "i"}]},
                "status": {"phase": phase},
            }))
            .expect("a pod")
        };
        let by_name = json!([{"name": "data", "persistentVolumeClaim": {"claimName": "data-web-0"}}]);
        assert!(pod("Running", by_name.clone()).uses("data-web-0"));
        assert!(pod("Pending", by_name.clone()).uses("data-web-0"));
        assert!(!pod("Running", by_name.clone()).uses("other"));
        assert!(!pod("Succeeded", by_name.clone()).uses("data-web-0"));
        assert!(!pod("Failed", by_name).uses("data-web-0"));
        let ephemeral = json!([{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]);
        assert!(pod("Running", ephemeral.clone()).uses("web-0-scratch"));
        assert!(!pod("Running", ephemeral).uses("scratch"));
    }
}
