//! The node's RBAC for KEP-4412 against the real kube-apiserver (Node
//! authorizer, NodeRestriction, its gate ServiceAccountNodeAudienceRestriction
//! on by default): as `system:node:node-a`, a TokenRequest for a Pod bound to
//! node-a, as kubelet makes one for a credential provider's
//! `serviceAccountTokenAudience`, is refused with NodeRestriction's words
//! for each shipped config's audience until the grant shipped beside it
//! (manifests/credential-provider-rbac/, applied as `kubectl apply -f`
//! would) is in place; then it is issued for that audience. An audience no
//! file grants is still refused, and one the pod's own projected volume
//! names needs no grant (NodeRestriction's other path).
//!
//! `check-config --rbac --node node-a` asks the same apiserver the same
//! question (a SubjectAccessReview per audience) and agrees with what
//! NodeRestriction did each time: every shipped config's audience MISSING
//! (exit 2, with the fix) before its grant, granted (exit 0) after; an
//! audience a namespace's RoleBinding grants is granted for that namespace's
//! service accounts only, as the TokenRequest is; a kubeconfig that may not
//! create SubjectAccessReviews is one line saying so (exit 1).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use cluster_harness::{TestCluster, workspace_root};
use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::discovery::{Discovery, Scope};
use serde::Deserialize;
use serde_json::{Value, json};

const NODE: &str = "node-a";
const NS: &str = "pullers";
const SA: &str = "app";
/// An audience no shipped file grants.
const NOT_GRANTED: &str = "registry.example.org";
/// An audience a RoleBinding in [`NS`] grants the nodes.
const NAMESPACED: &str = "registry.pullers.example";
/// An audience only the second pod's projected volume names.
const IN_VOLUME: &str = "vault.example.org";

/// The configs of manifests/credential-provider/ with `tokenAttributes`:
/// file stem → audience.
fn shipped_audiences() -> BTreeMap<String, String> {
    let dir = workspace_root().join("manifests/credential-provider");
    let mut audiences = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).expect("manifests/credential-provider") {
        let path = entry.expect("an entry").path();
        let config: Value =
            serde_yaml_ng::from_str(&std::fs::read_to_string(&path).expect("a config")).expect("a config's YAML");
        for provider in config["providers"].as_array().expect("providers") {
            if let Some(audience) = provider["tokenAttributes"]["serviceAccountTokenAudience"].as_str() {
                let stem = path.file_stem().expect("a name").to_string_lossy().into_owned();
                audiences.insert(stem, audience.to_string());
            }
        }
    }
    audiences
}

/// Every object of `file` (all its YAML documents), server-side applied as
/// `kubectl apply --server-side -f FILE` does.
async fn apply_file(client: &kube::Client, discovery: &Discovery, file: &Path) {
    let text = std::fs::read_to_string(file).expect("an RBAC manifest");
    for doc in serde_yaml_ng::Deserializer::from_str(&text) {
        let object = DynamicObject::deserialize(doc).expect("an object");
        let types = object.types.clone().expect("apiVersion and kind");
        let (group, version) = types.api_version.rsplit_once('/').unwrap_or(("", &types.api_version));
        let (resource, caps) = discovery
            .resolve_gvk(&GroupVersionKind::gvk(group, version, &types.kind))
            .expect("a served kind");
        assert!(
            matches!(caps.scope, Scope::Cluster),
            "{}: {} is namespaced",
            file.display(),
            types.kind
        );
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let name = object.metadata.name.clone().expect("a name");
        api.patch(
            &name,
            &PatchParams::apply("node-token-audience-test"),
            &Patch::Apply(&object),
        )
        .await
        .unwrap_or_else(|e| panic!("apply {}: {e}", file.display()));
    }
}

/// `cloud-credential-provider check-config --rbac --node node-a CONFIG`
/// with `kubeconfig` and `extra` flags: exit status, stdout, stderr.
fn live_check(kubeconfig: &Path, config: &Path, extra: &[&str]) -> (i32, String, String) {
    let output = std::process::Command::new(cluster_harness::provider_binary())
        .args(["check-config", "--rbac", "--node", NODE, "--kubeconfig"])
        .arg(kubeconfig)
        .args(extra)
        .arg(config)
        .output()
        .expect("run cloud-credential-provider");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The live check's line for `audience`, from its stdout.
fn line_for<'a>(stdout: &'a str, audience: &str) -> &'a str {
    stdout
        .lines()
        .find(|l| l.starts_with(&format!("{audience}: ")))
        .unwrap_or_else(|| panic!("no line for {audience}: {stdout}"))
}

/// A config with one passthrough entry whose audience is `audience`.
fn config_for(dir: &Path, audience: &str) -> std::path::PathBuf {
    let path = dir.join(format!("{audience}.yaml"));
    let config = format!(
        "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n\
         - name: cloud-credential-provider\n  matchImages: [\"{audience}\"]\n  defaultCacheDuration: 1m\n\
         \x20 apiVersion: credentialprovider.kubelet.k8s.io/v1\n  args: [passthrough]\n\
         \x20 tokenAttributes:\n    serviceAccountTokenAudience: {audience}\n    cacheType: Token\n    requireServiceAccount: true\n"
    );
    std::fs::write(&path, config).expect("write a config");
    path
}

/// Creates `pod` (bound to node-a) as the admin; its UID.
async fn bound_pod(admin: &kube::Client, pod: Value) -> String {
    let pod: Pod = serde_json::from_value(pod).expect("a pod");
    let pod = Api::<Pod>::namespaced(admin.clone(), NS)
        .create(&PostParams::default(), &pod)
        .await
        .expect("create the pod");
    pod.metadata.uid.expect("the pod's uid")
}

/// The TokenRequest kubelet's credential-provider code makes
/// (pkg/credentialprovider/plugin/plugin.go, getServiceAccountToken): one
/// audience, bound to the pod, default expiry; the token's claims, or the
/// apiserver's refusal (status code, message).
async fn request_token(
    node: &kube::Client,
    pod: &str,
    pod_uid: &str,
    sa_uid: &str,
    audience: &str,
) -> Result<Value, (u16, String)> {
    let request = TokenRequest {
        metadata: kube::api::ObjectMeta {
            uid: Some(sa_uid.to_string()),
            ..Default::default()
        },
        spec: TokenRequestSpec {
            audiences: vec![audience.to_string()],
            bound_object_ref: Some(BoundObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: Some(pod.into()),
                uid: Some(pod_uid.into()),
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    match Api::<ServiceAccount>::namespaced(node.clone(), NS)
        .create_token_request(SA, &PostParams::default(), &request)
        .await
    {
        Ok(issued) => Ok(claims(&issued.status.expect("a status").token)),
        Err(kube::Error::Api(status)) => Err((status.code, status.message)),
        Err(e) => panic!("TokenRequest for {audience}: {e}"),
    }
}

/// The claims of a JWT (not verified: the apiserver issued it).
fn claims(token: &str) -> Value {
    use base64::Engine;
    let payload = token.split('.').nth(1).expect("a JWT");
    serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(payload)
            .expect("base64url"),
    )
    .expect("JSON claims")
}

/// NodeRestriction's refusal (plugin/pkg/admission/noderestriction/admission.go,
/// validateNodeServiceAccountAudience), as the apiserver words a Forbidden
/// admission error on the ServiceAccount's token subresource.
fn node_restriction_refusal(audience: &str) -> String {
    format!(
        "serviceaccounts \"{SA}\" is forbidden: system:node:{NODE} is not authorized to request tokens for audience \"{audience}\""
    )
}

/// [`request_token`] until `done` holds for its answer (the Node
/// authorizer's graph and RBAC's caches follow the objects by watch), at
/// most 60 s; the last answer.
async fn request_until(
    node: &kube::Client,
    pod: &str,
    pod_uid: &str,
    sa_uid: &str,
    audience: &str,
    done: impl Fn(&Result<Value, (u16, String)>) -> bool,
) -> Result<Value, (u16, String)> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let answer = request_token(node, pod, pod_uid, sa_uid, audience).await;
        if done(&answer) || Instant::now() > deadline {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn nodes_get_the_shipped_audiences_with_the_shipped_rbac_only() {
    let t0 = Instant::now();
    let cluster = TestCluster::start().await;
    let started = t0.elapsed();
    let admin = cluster.client();
    let node = cluster
        .user_client(&format!("system:node:{NODE}"), &["system:nodes"])
        .await
        .expect("the node's client");
    let pp = PostParams::default();

    // The node registers itself; the namespace, service account and pods are
    // the admin's (the scheduler's binding is spec.nodeName).
    let node_object: Node = serde_json::from_value(json!({"metadata": {"name": NODE}})).expect("a node");
    Api::<Node>::all(node.clone())
        .create(&pp, &node_object)
        .await
        .expect("the node registers itself");
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).expect("a namespace");
    Api::<Namespace>::all(admin.clone())
        .create(&pp, &namespace)
        .await
        .expect("namespace");
    let account: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": SA}})).expect("an account");
    let sa_uid = Api::<ServiceAccount>::namespaced(admin.clone(), NS)
        .create(&pp, &account)
        .await
        .expect("service account")
        .metadata
        .uid
        .expect("its uid");
    let container = json!([{"name": "app", "image": "registry.example.com/team/app:1"}]);
    let puller = bound_pod(
        &admin,
        json!({"metadata": {"name": "puller"}, "spec": {
            "nodeName": NODE, "serviceAccountName": SA, "automountServiceAccountToken": false,
            "containers": container,
        }}),
    )
    .await;

    let audiences = shipped_audiences();
    assert!(!audiences.is_empty(), "no shipped config has tokenAttributes");

    // Control: no grant yet. The first answers may be the Node authorizer's,
    // until its graph has the pod and its service account.
    for audience in audiences.values().map(String::as_str).chain([NOT_GRANTED]) {
        let want = node_restriction_refusal(audience);
        let answer = request_until(&node, "puller", &puller, &sa_uid, audience, |a| {
            a.as_ref().is_ok() || a.as_ref().is_err_and(|(_, m)| m == &want)
        })
        .await;
        assert_eq!(answer, Err((403, want)), "without the RBAC, audience {audience}");
    }
    eprintln!("refused without the RBAC: {}", node_restriction_refusal("AUDIENCE"));

    // The live check agrees: each shipped config's audience is missing, for
    // every service account and for this one, with the command that fixes it.
    let ops = cluster
        .user_kubeconfig("ops", &["system:masters"])
        .expect("the admin's kubeconfig");
    let configs = workspace_root().join("manifests/credential-provider");
    for (backend, audience) in &audiences {
        let config = configs.join(format!("{backend}.yaml"));
        for extra in [&[][..], &["--namespace", NS, "--service-account", SA][..]] {
            let (status, stdout, stderr) = live_check(&ops, &config, extra);
            assert_eq!(status, 2, "{backend} {extra:?}: {stdout}{stderr}");
            let line = line_for(&stdout, audience);
            assert!(
                line.starts_with(&format!(
                    "{audience}: MISSING: system:node:{NODE} may not request tokens for it"
                )),
                "{line}"
            );
            assert!(
                stdout.contains(&format!(
                    "fix: cloud-credential-provider check-config --rbac {} | kubectl apply -f -",
                    config.display()
                )),
                "{stdout}"
            );
        }
    }
    // Without `create` on subjectaccessreviews: one line saying what is needed.
    let viewer = cluster.user_kubeconfig("viewer", &[]).expect("a viewer's kubeconfig");
    let (status, stdout, stderr) = live_check(&viewer, &configs.join("ecr.yaml"), &[]);
    assert_eq!((status, stdout.as_str()), (1, ""), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("(403 Forbidden)")
            && stderr.contains("needs `create` on subjectaccessreviews.authorization.k8s.io"),
        "{stderr}"
    );

    // NodeRestriction's other path: an audience the pod's own projected
    // volume names is issued without any grant.
    let mounter = bound_pod(
        &admin,
        json!({"metadata": {"name": "mounter"}, "spec": {
            "nodeName": NODE, "serviceAccountName": SA, "automountServiceAccountToken": false,
            "containers": container,
            "volumes": [{"name": "token", "projected": {"sources": [
                {"serviceAccountToken": {"audience": IN_VOLUME, "path": "token"}}]}}],
        }}),
    )
    .await;
    let issued = request_until(&node, "mounter", &mounter, &sa_uid, IN_VOLUME, Result::is_ok).await;
    assert_eq!(issued.expect("the volume's audience")["aud"], json!([IN_VOLUME]));
    let other = request_token(&node, "mounter", &mounter, &sa_uid, NOT_GRANTED).await;
    assert_eq!(other, Err((403, node_restriction_refusal(NOT_GRANTED))));

    // The shipped grants, applied as a user would.
    let discovery = Discovery::new(admin.clone()).run().await.expect("discovery");
    let rbac = workspace_root().join("manifests/credential-provider-rbac");
    for backend in audiences.keys() {
        apply_file(&admin, &discovery, &rbac.join(format!("{backend}.yaml"))).await;
    }
    for (backend, audience) in &audiences {
        let issued = request_until(&node, "puller", &puller, &sa_uid, audience, Result::is_ok).await;
        let claims = issued.unwrap_or_else(|e| panic!("with {backend}'s RBAC, audience {audience}: {e:?}"));
        assert_eq!(claims["aud"], json!([audience]), "{claims}");
        assert_eq!(claims["sub"], format!("system:serviceaccount:{NS}:{SA}"), "{claims}");
        assert_eq!(claims["kubernetes.io"]["pod"]["uid"], puller, "{claims}");
        assert_eq!(claims["kubernetes.io"]["node"]["name"], NODE, "{claims}");
    }
    // Still refused: an audience none of them grants.
    let answer = request_token(&node, "puller", &puller, &sa_uid, NOT_GRANTED).await;
    assert_eq!(answer, Err((403, node_restriction_refusal(NOT_GRANTED))));
    // The live check sees each grant (the tokens above were issued, so RBAC's
    // caches have it) and still none for NOT_GRANTED.
    for (backend, audience) in &audiences {
        let (status, stdout, stderr) = live_check(&ops, &configs.join(format!("{backend}.yaml")), &[]);
        assert_eq!(status, 0, "{backend}: {stdout}{stderr}");
        let line = line_for(&stdout, audience);
        assert!(
            line.starts_with(&format!("{audience}: granted: system:node:{NODE} may request tokens for it (every service account); the authorizer: RBAC: allowed by ClusterRoleBinding")),
            "{line}"
        );
    }
    let (status, stdout, _) = live_check(&ops, &config_for(cluster.dir(), NOT_GRANTED), &[]);
    assert_eq!(status, 2, "{stdout}");

    // A namespace's RoleBinding grants its own service accounts only: the
    // TokenRequest is issued, and the live check says granted with
    // --namespace, missing without (a ClusterRoleBinding is what grants all).
    let role: Role = serde_json::from_value(json!({"metadata": {"name": "pullers-audience"}, "rules": [
        {"apiGroups": [""], "resources": [NAMESPACED], "verbs": ["request-serviceaccounts-token-audience"]}]}))
    .expect("a role");
    Api::<Role>::namespaced(admin.clone(), NS)
        .create(&pp, &role)
        .await
        .expect("the role");
    let binding: RoleBinding = serde_json::from_value(json!({"metadata": {"name": "pullers-audience"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pullers-audience"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"}]}))
    .expect("a binding");
    Api::<RoleBinding>::namespaced(admin.clone(), NS)
        .create(&pp, &binding)
        .await
        .expect("the binding");
    let issued = request_until(&node, "puller", &puller, &sa_uid, NAMESPACED, Result::is_ok).await;
    assert_eq!(issued.expect("the namespace's grant")["aud"], json!([NAMESPACED]));
    let namespaced = config_for(cluster.dir(), NAMESPACED);
    let (status, stdout, stderr) = live_check(&ops, &namespaced, &["--namespace", NS, "--service-account", SA]);
    assert_eq!(status, 0, "{stdout}{stderr}");
    assert!(
        line_for(&stdout, NAMESPACED).contains(&format!(
            "granted: system:node:{NODE} may request tokens for it (service account {NS}/{SA})"
        )),
        "{stdout}"
    );
    let (status, stdout, _) = live_check(&ops, &namespaced, &[]);
    assert_eq!(status, 2, "{stdout}");
    assert!(line_for(&stdout, NAMESPACED).contains("MISSING"), "{stdout}");
    eprintln!(
        "node_token_audience: control plane {started:.1?}, checks {:.1?}",
        t0.elapsed() - started
    );
}
