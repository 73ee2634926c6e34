//! KEP-4412 on the real node (issue 26 item 2): kubelet v1.37.2 pulls a
//! private image as the pod's service account, with no node-wide secret.
//!
//! One TestCluster and one node (containerd 1.6 + kubelet in a netns) for
//! the file; one kubelet config holding the two shipped token entries,
//! edited only where their comments and docs/credential-provider.md say:
//! - `passthrough.yaml` (cacheType Token): matchImages the first registry,
//!   its audience [`PASSTHROUGH_AUDIENCE`]; the nodes' grant the one
//!   `check-config --rbac` prints for this kubelet config (and
//!   `check-config --rbac --node` says MISSING before it, granted after). kubelet requests the pod's token for that audience, our
//!   plugin hands it on, and the registry's token service (harness
//!   `TokenRealm`) accepts it only if kube-apiserver's TokenReview validates
//!   it for that audience and the service account team/app.
//! - `token-exchange.yaml` (cacheType ServiceAccount), named
//!   `cloud-credential-provider-token-exchange` (the docs: a second entry
//!   needs the binary under a second name), its endpoint the harness's RFC
//!   8693 token endpoint (`TokenExchange` on the host's 127.0.0.1, relayed
//!   into the node: TokenReview of the subject token for [`STS_AUDIENCE`],
//!   then a TokenRequest of that same service account for
//!   [`EXCHANGED_AUDIENCE`] as the access token), and the second registry's
//!   realm accepting only tokens the TokenReview validates for
//!   [`EXCHANGED_AUDIENCE`] and team/reader-a or team/reader-b. Its optional
//!   annotation key is made required (`requiredServiceAccountAnnotationKeys`).
//!
//! The controls: without the nodes' grant the pull fails (NodeRestriction's
//! refusal in kubelet's log, the registry's 401 in the pod's event, the
//! plugin never run); a service account without the required annotation
//! does not pull (the plugin not run, the event only the 401, the
//! annotation named in kubelet's V(5) log line only). Two service accounts
//! get separate credentials (two plugin runs, two subjects at the realm), a
//! second pod of one of them none more (kubelet's cache).
//!
//! The bin dir's `cloud-credential-provider` is a bash wrapper that runs our
//! binary unchanged, recording each run (its name), the request and answer
//! (to find the tokens), and its stderr (passed on to kubelet too): an
//! observer, not a stand-in. No token, in any encoding, may appear in
//! kubelet's, containerd's, the plugin's (at debug), the registries', the
//! realms' or the token endpoint's logs.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use cluster_harness::registry::{Check, pull, push};
use cluster_harness::token_exchange::{Bind, GRANT_TYPE, Issue, JWT_TYPE, TokenExchange, TokenExchangeConfig};
use cluster_harness::{
    KubeletOptions, Node, NodeOptions, Registry, TestCluster, TokenRealm, pause_image_archive, pod_manifest,
    provider_binary, run_ok, wait_pod_event, wait_pod_running, waiting_reason, workspace_root,
};
use k8s_openapi::api::core::v1::{Namespace, Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use serde_yaml_ng::Value as Yaml;

const NS: &str = "team";
const REPOSITORY: &str = "team/app:1";
/// The passthrough entry's `serviceAccountTokenAudience` (and the RBAC's resource).
const PASSTHROUGH_AUDIENCE: &str = "registry-passthrough.test";
/// The token-exchange entry's `serviceAccountTokenAudience`: the token endpoint's.
const STS_AUDIENCE: &str = "sts.test";
/// The token-exchange entry's `--audience`: what the endpoint issues tokens
/// for, the only audience the second realm accepts (no node may ask for it).
const EXCHANGED_AUDIENCE: &str = "registry-exchange.test";
/// token-exchange.yaml's optional annotation key, made required here.
const REQUIRED_ANNOTATION: &str = "registry.example.com/scope";
const EXCHANGE_PROVIDER: &str = "cloud-credential-provider-token-exchange";
/// The service account of the passthrough pods (the first realm's one account).
const APP: &str = "app";
/// The token-exchange service accounts (the second realm's), annotated.
const READER_A: &str = "reader-a";
const READER_B: &str = "reader-b";
/// A service account without the required annotation.
const UNANNOTATED: &str = "unannotated";

/// kubelet's pull backoff starts at 10 s and doubles: generous deadlines.
const PULL_TIMEOUT: Duration = Duration::from_secs(90);

fn subject(account: &str) -> String {
    format!("system:serviceaccount:{NS}:{account}")
}

fn pod(name: &str, node: &str, account: &str, image: &str) -> Pod {
    let mut pod = pod_manifest(name, node, image, "Always");
    pod["metadata"]["namespace"] = json!(NS);
    pod["spec"]["serviceAccountName"] = json!(account);
    serde_json::from_value(pod).expect("a pod")
}

/// Waits until one of the pod's events satisfies `found`; all its events.
async fn wait_event(client: &kube::Client, name: &str, found: impl Fn(&str) -> bool) -> Vec<String> {
    wait_pod_event(client, NS, name, PULL_TIMEOUT, found)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"))
}

/// Waits until the pod's container waits with ErrImagePull or ImagePullBackOff.
async fn wait_pull_failed(pods: &Api<Pod>, name: &str) {
    let deadline = Instant::now() + PULL_TIMEOUT;
    loop {
        let pod = pods.get(name).await.expect("get the pod");
        let reason = waiting_reason(&pod);
        if matches!(reason.as_deref(), Some("ErrImagePull" | "ImagePullBackOff")) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "pod {name}: waiting for {reason:?}, not a failed pull"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// containerd 1.6's words when the realm refuses an anonymous token request
/// (the end of the pod's `Failed` event).
const ANONYMOUS_REFUSED: &str =
    "failed to authorize: failed to fetch anonymous token: unexpected status: 401 Unauthorized";

/// The bin dir: `cloud-credential-provider` (a bash wrapper running our
/// binary, see the module documentation) and [`EXCHANGE_PROVIDER`], a
/// symlink to it, as the docs say a second entry is installed.
struct Plugin {
    dir: PathBuf,
    record: PathBuf,
}

impl Plugin {
    fn install(tmp: &Path) -> Plugin {
        use std::os::unix::fs::PermissionsExt;
        let dir = tmp.join("bin");
        let record = tmp.join("plugin-runs");
        std::fs::create_dir_all(&dir).expect("bin dir");
        std::fs::create_dir_all(&record).expect("record dir");
        let script = dir.join("cloud-credential-provider");
        std::fs::write(
            &script,
            format!(
                "#!/bin/bash\nset -o pipefail\numask 077\nrec='{rec}'\nname=$(basename \"$0\")\n\
                 run=\"$rec/$name-$$\"\necho \"$name\" >> \"$rec/calls\"\n\
                 tee \"$run.request\" | '{bin}' \"$@\" 2>\"$run.stderr\" | tee \"$run.answer\"\nstatus=$?\n\
                 cat \"$run.stderr\" >&2\ncat \"$run.stderr\" >> \"$rec/stderr\"\nexit $status\n",
                rec = record.display(),
                bin = provider_binary().display(),
            ),
        )
        .expect("the wrapper");
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        std::os::unix::fs::symlink("cloud-credential-provider", dir.join(EXCHANGE_PROVIDER)).expect("symlink");
        Plugin { dir, record }
    }

    /// How many times kubelet ran the entry `name`.
    fn runs(&self, name: &str) -> usize {
        std::fs::read_to_string(self.record.join("calls"))
            .unwrap_or_default()
            .lines()
            .filter(|l| *l == name)
            .count()
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self.record.join("stderr")).unwrap_or_default()
    }

    /// Every run of `name`: (request, answer) as JSON.
    fn exchanges(&self, name: &str) -> Vec<(Value, Value)> {
        let mut runs = Vec::new();
        for entry in std::fs::read_dir(&self.record).expect("record dir") {
            let path = entry.expect("entry").path();
            let file = path.file_name().expect("a name").to_string_lossy().into_owned();
            let Some(run) = file.strip_suffix(".request") else {
                continue;
            };
            if run.rsplit_once('-').map(|(n, _)| n) != Some(name) {
                continue;
            }
            let read = |ext: &str| -> Value {
                let text = std::fs::read_to_string(self.record.join(format!("{run}.{ext}"))).unwrap_or_default();
                serde_json::from_str(&text).unwrap_or(Value::Null)
            };
            runs.push((read("request"), read("answer")));
        }
        runs
    }
}

/// The claims of a JWT (not verified: the apiserver issued it).
fn claims(token: &str) -> Value {
    let part = token.split('.').nth(1).expect("a JWT");
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).expect("base64url")).expect("JSON claims")
}

/// A shipped kubelet config's one provider entry.
fn shipped_entry(file: &str) -> Yaml {
    let text = std::fs::read_to_string(workspace_root().join("manifests/credential-provider").join(file))
        .expect("a shipped config");
    let config: Yaml = serde_yaml_ng::from_str(&text).expect("YAML");
    config["providers"][0].clone()
}

fn yaml(value: Value) -> Yaml {
    serde_yaml_ng::to_value(value).expect("YAML")
}

/// Sets the provider entry's env variable `name` (adding it if absent).
fn set_env(entry: &mut Yaml, name: &str, value: &str) {
    let env = entry["env"].as_sequence_mut();
    let env = match env {
        Some(env) => env,
        None => {
            entry["env"] = Yaml::Sequence(Vec::new());
            entry["env"].as_sequence_mut().expect("a sequence")
        }
    };
    match env.iter_mut().find(|e| e["name"].as_str() == Some(name)) {
        Some(e) => e["value"] = Yaml::from(value),
        None => env.push(yaml(json!({"name": name, "value": value}))),
    }
}

/// The kubelet config: the two shipped entries, edited where their comments
/// and docs say (hosts, audiences, endpoint, the second entry's name), plus
/// the plugin's debug log and the required annotation.
fn kubelet_config(passthrough_host: &str, exchange_host: &str, sts_url: &str) -> Yaml {
    let mut passthrough = shipped_entry("passthrough.yaml");
    passthrough["matchImages"] = yaml(json!([passthrough_host]));
    passthrough["tokenAttributes"]["serviceAccountTokenAudience"] = Yaml::from(PASSTHROUGH_AUDIENCE);
    set_env(&mut passthrough, "CLOUD_CREDENTIAL_PROVIDER_LOG_LEVEL", "debug");

    let mut exchange = shipped_entry("token-exchange.yaml");
    exchange["name"] = Yaml::from(EXCHANGE_PROVIDER);
    exchange["matchImages"] = yaml(json!([exchange_host]));
    let attributes = &mut exchange["tokenAttributes"];
    attributes["serviceAccountTokenAudience"] = Yaml::from(STS_AUDIENCE);
    assert_eq!(
        attributes["optionalServiceAccountAnnotationKeys"],
        yaml(json!([REQUIRED_ANNOTATION])),
        "token-exchange.yaml's optional key"
    );
    attributes
        .as_mapping_mut()
        .expect("tokenAttributes")
        .remove("optionalServiceAccountAnnotationKeys");
    attributes["requiredServiceAccountAnnotationKeys"] = yaml(json!([REQUIRED_ANNOTATION]));
    let args = exchange["args"].as_sequence_mut().expect("args");
    let audience = args
        .iter_mut()
        .find(|a| a.as_str().is_some_and(|a| a.starts_with("--audience=")))
        .expect("token-exchange.yaml's --audience");
    *audience = Yaml::from(format!("--audience={EXCHANGED_AUDIENCE}"));
    set_env(&mut exchange, "CLOUD_CREDENTIAL_PROVIDER_TOKEN_ENDPOINT", sts_url);
    set_env(&mut exchange, "CLOUD_CREDENTIAL_PROVIDER_LOG_LEVEL", "debug");

    let text = std::fs::read_to_string(workspace_root().join("manifests/credential-provider/passthrough.yaml"))
        .expect("passthrough.yaml");
    let mut config: Yaml = serde_yaml_ng::from_str(&text).expect("YAML");
    config["providers"] = Yaml::Sequence(vec![passthrough, exchange]);
    config
}

/// manifests/credential-provider-rbac/`file`, its audience (`resources`)
/// replaced by `audience` as its comment says, created as `kubectl apply` would.
async fn apply_rbac(client: &kube::Client, file: &str, audience: &str) {
    let path = workspace_root().join("manifests/credential-provider-rbac").join(file);
    let text = std::fs::read_to_string(&path).expect("an RBAC manifest");
    create_rbac(client, &text, Some(audience)).await;
}

/// The ClusterRole and ClusterRoleBinding of `text` (YAML documents), the
/// role's audiences replaced by `audience` when given.
async fn create_rbac(client: &kube::Client, text: &str, audience: Option<&str>) {
    for doc in serde_yaml_ng::Deserializer::from_str(text) {
        let mut object: Value = serde::Deserialize::deserialize(doc).expect("an object");
        match object["kind"].as_str() {
            Some("ClusterRole") => {
                let rules = object["rules"].as_array_mut().expect("rules");
                assert_eq!(rules.len(), 1, "one rule: {text}");
                if let Some(audience) = audience {
                    rules[0]["resources"] = json!([audience]);
                }
                let role: ClusterRole = serde_json::from_value(object).expect("a ClusterRole");
                Api::<ClusterRole>::all(client.clone())
                    .create(&PostParams::default(), &role)
                    .await
                    .expect("create the ClusterRole");
            }
            Some("ClusterRoleBinding") => {
                let binding: ClusterRoleBinding = serde_json::from_value(object).expect("a ClusterRoleBinding");
                Api::<ClusterRoleBinding>::all(client.clone())
                    .create(&PostParams::default(), &binding)
                    .await
                    .expect("create the ClusterRoleBinding");
            }
            other => panic!("unexpected kind {other:?}: {text}"),
        }
    }
}

/// `check-config --rbac` of kubelet's config with `extra` flags: exit
/// status and stdout.
fn check_rbac(config: &Path, bin_dir: &Path, extra: &[&str]) -> (i32, String) {
    let output = std::process::Command::new(provider_binary())
        .args(["check-config", "--rbac", "--bin-dir"])
        .arg(bin_dir)
        .args(extra)
        .arg(config)
        .output()
        .expect("run check-config --rbac");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.is_empty(), "check-config --rbac: {stderr}");
    (output.status.code().unwrap_or(-1), stdout)
}

/// Deletes the pod and waits until the apiserver has forgotten it (kubelet
/// has stopped it).
async fn delete_pod(pods: &Api<Pod>, name: &str) {
    pods.delete(name, &kube::api::DeleteParams::default().grace_period(0))
        .await
        .expect("delete the pod");
    let deadline = Instant::now() + Duration::from_secs(60);
    while pods.get_opt(name).await.expect("get the pod").is_some() {
        assert!(Instant::now() < deadline, "pod {name} not gone within 60s");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// No `secret` (raw, URL-encoded, or as Basic's base64 of `user:secret`
/// for any of `users`) in `log`.
fn assert_not_logged(log: &str, which: &str, secrets: &[String], users: &[&str]) {
    for secret in secrets {
        let encoded: String = url::form_urlencoded::byte_serialize(secret.as_bytes()).collect();
        let mut forms = vec![secret.clone(), encoded];
        forms.extend(users.iter().map(|u| STANDARD.encode(format!("{u}:{secret}"))));
        for form in &forms {
            assert!(!log.contains(form.as_str()), "the {which} log holds a token");
        }
        // A third of the token's signature is enough to tell.
        let signature = secret.rsplit('.').next().unwrap_or(secret);
        let piece = &signature[..signature.len() / 3];
        assert!(
            piece.len() < 8 || !log.contains(piece),
            "the {which} log holds a piece of a token"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_pull_as_their_service_accounts_with_no_node_wide_secret() {
    let t0 = Instant::now();
    let cluster = TestCluster::start().await;
    let client = cluster.client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let tmp = tempfile::tempdir().expect("tmp");

    // The two registries and their realms; the token endpoint.
    let realm = |audience: &str, accounts: &[&str]| {
        TokenRealm::start(Check::ServiceAccountToken {
            kubeconfig: cluster.kubeconfig.clone(),
            audience: audience.to_owned(),
            accounts: Some(accounts.iter().map(|a| format!("{NS}/{a}")).collect()),
        })
        .expect("a token realm")
    };
    let passthrough_realm = realm(PASSTHROUGH_AUDIENCE, &[APP]);
    let passthrough_registry = Registry::start_token(&passthrough_realm).expect("registry");
    let exchange_realm = realm(EXCHANGED_AUDIENCE, &[READER_A, READER_B]);
    let exchange_registry = Registry::start_token(&exchange_realm).expect("registry");
    let archive = pause_image_archive().expect("the pause image");
    push(
        &archive,
        &passthrough_registry,
        REPOSITORY,
        &passthrough_realm.push_credentials(),
    )
    .expect("push");
    push(
        &archive,
        &exchange_registry,
        REPOSITORY,
        &exchange_realm.push_credentials(),
    )
    .expect("push");
    let sts = TokenExchange::start(
        client.clone(),
        TokenExchangeConfig {
            path: "/oauth2/token".to_owned(),
            subject_audience: STS_AUDIENCE.to_owned(),
            audience: EXCHANGED_AUDIENCE.to_owned(),
            issue: Issue::ServiceAccountToken {
                audience: EXCHANGED_AUDIENCE.to_owned(),
            },
        },
        Bind::Host,
    )
    .expect("the token endpoint");
    let passthrough_image = format!("{}/{REPOSITORY}", passthrough_registry.host());
    let exchange_image = format!("{}/{REPOSITORY}", exchange_registry.host());

    // The namespace and service accounts (the required annotation on the readers).
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).expect("ns");
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .expect("create the namespace");
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), NS);
    for (name, annotations) in [
        (APP, json!({})),
        (READER_A, json!({REQUIRED_ANNOTATION: "repository:team/app:pull"})),
        (READER_B, json!({REQUIRED_ANNOTATION: "repository:team/app:pull"})),
        (UNANNOTATED, json!({})),
    ] {
        let account = serde_json::from_value(json!({"metadata": {"name": name, "annotations": annotations}}))
            .expect("a service account");
        accounts
            .create(&PostParams::default(), &account)
            .await
            .expect("create a ServiceAccount");
    }
    // The token-exchange entry's grant now; passthrough's after its control.
    apply_rbac(&client, "token-exchange.yaml", STS_AUDIENCE).await;

    // The node and kubelet with the config (checked by our check-config first).
    let plugin = Plugin::install(tmp.path());
    let config = tmp.path().join("credential-providers.yaml");
    let config_yaml = kubelet_config(&passthrough_registry.host(), &exchange_registry.host(), &sts.url());
    std::fs::write(&config, serde_yaml_ng::to_string(&config_yaml).expect("YAML")).expect("write the config");
    run_ok(
        std::process::Command::new(provider_binary())
            .arg("check-config")
            .arg("--bin-dir")
            .arg(&plugin.dir)
            .arg(&config),
    )
    .expect("check-config accepts the edited config");
    let node = Node::create(
        &cluster,
        NodeOptions {
            relay_ports: vec![
                passthrough_registry.port(),
                passthrough_realm.port(),
                exchange_registry.port(),
                exchange_realm.port(),
                sts.port(),
            ],
            registry_cas: vec![
                (
                    passthrough_registry.host(),
                    passthrough_registry.ca_path().to_path_buf(),
                ),
                (exchange_registry.host(), exchange_registry.ca_path().to_path_buf()),
            ],
            ..NodeOptions::default()
        },
    )
    .expect("node");
    node.start_kubelet(KubeletOptions {
        credential_provider: Some((config.clone(), plugin.dir.clone())),
        ..KubeletOptions::default()
    })
    .expect("kubelet starts");
    node.wait_ready(&client, Duration::from_secs(120))
        .await
        .expect("the Node becomes Ready");
    let setup = t0.elapsed();

    // Control 1: no grant for the audience. NodeRestriction refuses kubelet's
    // TokenRequest, the plugin is not run, the pull goes anonymous: 401.
    let t1 = Instant::now();
    pods.create(
        &PostParams::default(),
        &pod("no-grant", node.name(), APP, &passthrough_image),
    )
    .await
    .expect("create no-grant");
    let events = wait_event(&client, "no-grant", |e| {
        e.starts_with("Failed: ") && e.ends_with(ANONYMOUS_REFUSED)
    })
    .await;
    let refusal = format!(
        "system:node:{} is not authorized to request tokens for audience \\\"{PASSTHROUGH_AUDIENCE}\\\"",
        node.name()
    );
    let log = node.kubelet_log();
    let line = log
        .lines()
        .find(|l| l.contains("Failed to provide credentials for image") && l.contains(&refusal))
        .unwrap_or_else(|| {
            panic!(
                "kubelet did not log NodeRestriction's refusal ({refusal}):\n{}",
                node.logs()
            )
        });
    eprintln!("control, no grant: kubelet logs: {line}\n  the pod's events: {events:#?}");
    // check-config's live check says the same of this node: the passthrough
    // audience missing, the token exchange's (granted above) there.
    let ops = cluster
        .user_kubeconfig("ops", &["system:masters"])
        .expect("the admin's kubeconfig");
    let live = [
        "--node",
        node.name(),
        "--kubeconfig",
        ops.to_str().expect("a UTF-8 path"),
    ];
    let (status, report) = check_rbac(&config, &plugin.dir, &live);
    assert_eq!(status, 2, "{report}");
    let said = |audience: &str| {
        report
            .lines()
            .find(|l| l.starts_with(&format!("{audience}: ")))
            .unwrap_or_else(|| panic!("no line for {audience}: {report}"))
            .to_owned()
    };
    assert!(said(PASSTHROUGH_AUDIENCE).contains(": MISSING: "), "{report}");
    assert!(said(STS_AUDIENCE).contains(": granted: "), "{report}");
    eprintln!("check-config --rbac --node before the grant:\n{report}");
    assert!(line.contains("failed to get service account token"), "{line}");
    wait_pull_failed(&pods, "no-grant").await;
    assert_eq!(
        plugin.runs("cloud-credential-provider"),
        0,
        "the plugin ran without a token"
    );
    assert!(
        passthrough_realm.grants().iter().all(|g| g.subject != subject(APP)),
        "the realm granted without a token"
    );
    let no_grant = t1.elapsed();
    // Gone before the grant, so that its retries cannot run the plugin.
    delete_pod(&pods, "no-grant").await;

    // With the grant check-config --rbac prints for kubelet's config (the
    // shipped file's objects with this config's audiences), applied: the
    // pod's own token, handed on, accepted.
    let t2 = Instant::now();
    let (status, grant) = check_rbac(&config, &plugin.dir, &["--rbac-name", "kubelet-audiences"]);
    assert_eq!(status, 0, "{grant}");
    create_rbac(&client, &grant, None).await;
    pods.create(
        &PostParams::default(),
        &pod("passthrough", node.name(), APP, &passthrough_image),
    )
    .await
    .expect("create passthrough");
    let running = wait_pod_running(&client, NS, "passthrough", PULL_TIMEOUT)
        .await
        .expect("passthrough runs");
    let passthrough_uid = running.metadata.uid.clone().expect("uid");
    let passthrough_time = t2.elapsed();
    let (status, report) = check_rbac(&config, &plugin.dir, &live);
    assert_eq!(status, 0, "every audience granted after the pull: {report}");
    assert!(
        passthrough_realm
            .grants()
            .iter()
            .any(|g| g.subject == subject(APP) && g.granted.contains("repository:team/app:pull")),
        "grants: {:?}",
        passthrough_realm.grants()
    );
    assert_eq!(plugin.runs("cloud-credential-provider"), 1, "{}", plugin.stderr());
    let passthrough_runs = plugin.exchanges("cloud-credential-provider");
    assert_eq!(passthrough_runs.len(), 1);
    let (request, answer) = &passthrough_runs[0];
    let token = request["serviceAccountToken"]
        .as_str()
        .expect("kubelet sent the pod's token")
        .to_owned();
    let token_claims = claims(&token);
    assert_eq!(token_claims["aud"], json!([PASSTHROUGH_AUDIENCE]), "{token_claims}");
    assert_eq!(token_claims["sub"], subject(APP));
    assert_eq!(token_claims["kubernetes.io"]["pod"]["name"], "passthrough");
    assert_eq!(token_claims["kubernetes.io"]["pod"]["uid"], passthrough_uid.as_str());
    let auth = &answer["auth"][passthrough_registry.host()];
    assert_eq!(auth["username"], "jwt", "{answer}");
    assert_eq!(auth["password"], token.as_str(), "the plugin hands the token on");

    // token-exchange, two service accounts: two runs, two exchanges, two subjects.
    let t3 = Instant::now();
    for (name, account) in [("reader-a", READER_A), ("reader-b", READER_B)] {
        pods.create(
            &PostParams::default(),
            &pod(name, node.name(), account, &exchange_image),
        )
        .await
        .expect("create a reader pod");
    }
    for name in ["reader-a", "reader-b"] {
        wait_pod_running(&client, NS, name, PULL_TIMEOUT)
            .await
            .expect("the reader runs");
    }
    let exchange_time = t3.elapsed();
    assert_eq!(plugin.runs(EXCHANGE_PROVIDER), 2, "{}", plugin.stderr());
    let exchanges = sts.exchanges();
    let exchanged: Vec<&str> = exchanges.iter().map(|e| e.subject.as_str()).collect();
    assert_eq!(exchanged.len(), 2, "{}", sts.log());
    assert!(exchanged.contains(&subject(READER_A).as_str()) && exchanged.contains(&subject(READER_B).as_str()));
    let realm_subjects: Vec<String> = exchange_realm.grants().into_iter().map(|g| g.subject).collect();
    for account in [READER_A, READER_B] {
        assert!(realm_subjects.contains(&subject(account)), "{realm_subjects:?}");
    }
    let answers = plugin.exchanges(EXCHANGE_PROVIDER);
    let mut passwords: Vec<String> = answers
        .iter()
        .map(|(_, answer)| {
            let auth = &answer["auth"][exchange_registry.host()];
            assert_eq!(auth["username"], "oauth2accesstoken", "{answer}");
            auth["password"].as_str().expect("a password").to_owned()
        })
        .collect();
    passwords.sort();
    let mut issued: Vec<String> = exchanges.iter().map(|e| e.access_token.clone()).collect();
    issued.sort();
    assert_eq!(
        passwords, issued,
        "the plugin's passwords are the endpoint's access tokens"
    );
    assert_ne!(passwords[0], passwords[1], "one credential for both service accounts");
    for (request, _) in &answers {
        let token = request["serviceAccountToken"]
            .as_str()
            .expect("kubelet sent the pod's token");
        assert_eq!(claims(token)["aud"], json!([STS_AUDIENCE]));
    }

    // The exchange matters: the registry refuses the token kubelet gave the
    // plugin, and the endpoint refuses a token for another audience.
    let refused = pull(
        &exchange_registry,
        REPOSITORY,
        Some(&format!("oauth2accesstoken:{}", exchanges[0].subject_token)),
    )
    .expect_err("the registry took the subject token itself");
    assert!(
        format!("{refused:#}").contains(&format!(
            "did not authenticate the token for audience {EXCHANGED_AUDIENCE}"
        )),
        "{refused:#}"
    );
    let form = [
        ("grant_type", GRANT_TYPE),
        ("subject_token", token.as_str()),
        ("subject_token_type", JWT_TYPE),
        ("audience", EXCHANGED_AUDIENCE),
    ];
    let answer = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("a client")
        .post(sts.url())
        .form(&form)
        .send()
        .await
        .expect("the endpoint answers");
    assert_eq!(answer.status().as_u16(), 400);
    let body: Value = answer.json().await.expect("JSON");
    assert_eq!(body["error"], "invalid_grant", "{body}");

    // A second pod of reader-a: kubelet's cache (cacheType ServiceAccount), no run.
    pods.create(
        &PostParams::default(),
        &pod("reader-a-2", node.name(), READER_A, &exchange_image),
    )
    .await
    .expect("create reader-a-2");
    wait_pod_running(&client, NS, "reader-a-2", PULL_TIMEOUT)
        .await
        .expect("reader-a-2 runs");
    assert_eq!(plugin.runs(EXCHANGE_PROVIDER), 2, "the cache was not used");

    // Control 2: the required annotation missing. kubelet skips the plugin;
    // the pull goes anonymous; the event says 401 only, the V(5) log line why.
    let t4 = Instant::now();
    pods.create(
        &PostParams::default(),
        &pod("unannotated", node.name(), UNANNOTATED, &exchange_image),
    )
    .await
    .expect("create unannotated");
    let events = wait_event(&client, "unannotated", |e| {
        e.starts_with("Failed: ") && e.ends_with(ANONYMOUS_REFUSED)
    })
    .await;
    let missing = format!("required annotation {REQUIRED_ANNOTATION} not found");
    let log = node.kubelet_log();
    let line = log
        .lines()
        .find(|l| l.contains("Failed to get service account data") && l.contains(&missing))
        .unwrap_or_else(|| panic!("kubelet did not log {missing:?}:\n{}", node.logs()));
    eprintln!("control, no annotation: kubelet logs: {line}\n  the pod's events: {events:#?}");
    assert!(
        line.contains(&format!("serviceAccount=\"{NS}/{UNANNOTATED}\"")),
        "{line}"
    );
    assert!(
        events.iter().all(|e| !e.contains(REQUIRED_ANNOTATION)),
        "an event names the annotation: the docs say none does"
    );
    wait_pull_failed(&pods, "unannotated").await;
    assert_eq!(
        plugin.runs(EXCHANGE_PROVIDER),
        2,
        "the plugin ran without the annotation"
    );
    assert!(
        !exchange_realm
            .grants()
            .iter()
            .any(|g| g.subject == subject(UNANNOTATED))
    );
    let unannotated_time = t4.elapsed();

    // No token in any log: kubelet's, containerd's, the plugin's (debug),
    // the registries', the realms', the token endpoint's.
    let mut secrets = vec![token];
    for exchange in &exchanges {
        secrets.push(exchange.subject_token.clone());
        secrets.push(exchange.access_token.clone());
    }
    for (request, _) in plugin.exchanges(EXCHANGE_PROVIDER) {
        secrets.push(request["serviceAccountToken"].as_str().expect("a token").to_owned());
    }
    let stderr = plugin.stderr();
    assert!(stderr.contains("DEBUG"), "the plugin's debug log is on: {stderr}");
    let users = ["jwt", "oauth2accesstoken"];
    for (log, which) in [
        (node.kubelet_log(), "kubelet"),
        (node.containerd_log(), "containerd"),
        (stderr, "plugin's stderr"),
        (passthrough_registry.log_text(), "passthrough registry"),
        (passthrough_realm.log_text(), "passthrough realm"),
        (exchange_registry.log_text(), "exchange registry"),
        (exchange_realm.log_text(), "exchange realm"),
        (sts.log(), "token endpoint"),
    ] {
        assert_not_logged(&log, which, &secrets, &users);
    }
    eprintln!(
        "node_kep4412: cluster, registries and node Ready {setup:.1?}; no grant → 401 in {no_grant:.1?}; \
         passthrough Running in {passthrough_time:.1?}; two token-exchange pods Running in {exchange_time:.1?}; \
         no annotation → 401 in {unannotated_time:.1?}; total {:.1?}",
        t0.elapsed()
    );
}
