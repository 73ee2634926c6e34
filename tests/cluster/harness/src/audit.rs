//! Helpers for the tests of `pv-topology-webhook audit` (`tests/audit.rs`,
//! `tests/audit_in_cluster.rs`): the objects of a manifests directory applied
//! as they are, a ServiceAccount's token from the TokenRequest API (and a
//! kubeconfig holding it), and the JSON report of `audit` (or `repair`) read back
//! by PV name.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::discovery::{ApiResource, Discovery, Scope};
use serde_json::Value;

/// Applies (server-side, forced) every object of the YAML files in `dir`, not
/// the Kustomization and not its subdirectories; namespaced ones in `namespace`.
pub async fn apply_dir(client: &kube::Client, dir: &Path, namespace: &str) {
    let discovery = Discovery::new(client.clone()).run().await.expect("discovery");
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("the manifests directory")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml") && !p.ends_with("kustomization.yaml"))
        .collect();
    files.sort();
    for file in files {
        let object: DynamicObject =
            serde_yaml_ng::from_str(&std::fs::read_to_string(&file).expect("a manifest")).expect("a manifest's YAML");
        let types = object.types.clone().expect("apiVersion and kind");
        let (group, version) = types.api_version.rsplit_once('/').unwrap_or(("", &types.api_version));
        let gvk = GroupVersionKind::gvk(group, version, &types.kind);
        let (resource, caps): (ApiResource, _) = discovery.resolve_gvk(&gvk).expect("a known kind");
        let api: Api<DynamicObject> = match caps.scope {
            Scope::Namespaced => Api::namespaced_with(client.clone(), namespace, &resource),
            Scope::Cluster => Api::all_with(client.clone(), &resource),
        };
        let name = object.metadata.name.clone().expect("a name");
        api.patch(&name, &PatchParams::apply("audit-test").force(), &Patch::Apply(&object))
            .await
            .unwrap_or_else(|e| panic!("apply {}: {e}", file.display()));
    }
}

/// A token of the ServiceAccount `namespace/account` from the TokenRequest API
/// (the apiserver's default audience, valid for an hour), as kubelet projects one.
pub async fn service_account_token(client: &kube::Client, namespace: &str, account: &str) -> String {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: Vec::new(),
            expiration_seconds: Some(3600),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    accounts
        .create_token_request(account, &PostParams::default(), &request)
        .await
        .unwrap_or_else(|e| panic!("a token for the ServiceAccount {namespace}/{account}: {e}"))
        .status
        .expect("a token")
        .token
}

/// A kubeconfig of its own for the ServiceAccount `namespace/account` of `cluster`
/// (a token from the TokenRequest API), written in the cluster's directory.
pub async fn account_kubeconfig(cluster: &crate::TestCluster, namespace: &str, account: &str) -> PathBuf {
    use base64::Engine as _;
    let token = service_account_token(&cluster.client(), namespace, account).await;
    let ca = std::fs::read_to_string(cluster.dir().join("pki/ca.crt")).expect("the cluster CA");
    let kubeconfig = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {
            "server": cluster.server,
            "certificate-authority-data": base64::engine::general_purpose::STANDARD.encode(ca),
        }}],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": account, "context": {"cluster": "c", "user": account}}],
        "current-context": account,
    });
    let path = cluster.dir().join(format!("{account}.kubeconfig"));
    std::fs::write(&path, serde_yaml_ng::to_string(&kubeconfig).expect("YAML")).expect("write the kubeconfig");
    path
}

/// The rows of `audit --output json` (or `repair -o json`) by PV name; panics with both streams if
/// stdout is not such a report.
pub fn report(out: &Output) -> BTreeMap<String, Value> {
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not a JSON report ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    rows.into_iter()
        .map(|row| (row["name"].as_str().expect("a name").to_owned(), row))
        .collect()
}

/// The `status` of the row of PV `name`; panics if the report has none.
pub fn status(rows: &BTreeMap<String, Value>, name: &str) -> String {
    rows.get(name)
        .unwrap_or_else(|| panic!("{name} not in the report: {rows:?}"))["status"]
        .as_str()
        .expect("a status")
        .to_owned()
}
