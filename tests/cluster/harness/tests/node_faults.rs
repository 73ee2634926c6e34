//! Faults on the real node (issue 26 item 5): kubelet v1.37.2 and
//! containerd 1.6 (harness `Node`) pull `127.0.0.1:PORT/team/app:1` from
//! distribution 2.8 with token auth (harness `Registry`, `TokenRealm`),
//! `imagePullPolicy: Always`, through our plugin as docs/credential-provider.md
//! installs it: the binary copied into kubelet's
//! `--image-credential-provider-bin-dir` as `cloud-credential-provider`, the
//! shipped `manifests/credential-provider/token-exchange.yaml` edited only in
//! `matchImages` (the registry) and the token endpoint's variable, and the
//! shipped `manifests/credential-provider-rbac/token-exchange.yaml` applied.
//!
//! The plugin's dependency is a token endpoint (RFC 8693), the harness's
//! `TokenExchange`: a fake written from RFC 8693 §2 and RFC 6749 §5 that accepts
//! a subject token only when kube-apiserver's TokenReview authenticates it for
//! the config's audience as a service account, and then hands out the one
//! password the registry's token realm takes. It listens on the node's own
//! 127.0.0.1:9443 (bound in the node's netns, so stopping it gives the
//! plugin a real "connection refused"; plain HTTP on loopback, which the
//! plugin allows), below the ephemeral port range, so no socket can take the
//! port while it is down.
//!
//! One cluster, one node, one test (its phases share kubelet):
//! - the token endpoint down: the pull fails, kubelet's log quotes our one
//!   line, the pull goes on without credentials (the realm's 401); the
//!   endpoint back, the backed-off pod reaches Running;
//! - the binary removed, then not executable, while kubelet runs: kubelet's
//!   exec error (`no such file or directory`, `permission denied`), a 401
//!   within a bound (no hang); the binary back, both pods reach Running;
//! - kubelet restarted: every pod keeps its container, a new pod pulls
//!   through the plugin;
//! - the binary missing, or not executable, when kubelet starts: kubelet exits
//!   1 at once with its message; back, kubelet starts and the pods still run.
//!
//! Each pod has its own service account: with `cacheType: ServiceAccount`
//! kubelet caches our answer per service account, so each pull runs the plugin.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cluster_harness::registry::{Check, push};
use cluster_harness::token_exchange::{Bind, Issue, TokenExchange, TokenExchangeConfig};
use cluster_harness::{
    KubeletOptions, Node, NodeOptions, Registry, TestCluster, TokenRealm, pause_image_archive, provider_binary,
    random_hex, wait_pod_event, wait_pod_running, workspace_root,
};
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

/// The token endpoint's port, on the node's 127.0.0.1 only.
const EXCHANGE_PORT: u16 = 9443;
/// The shipped config's `tokenAttributes.serviceAccountTokenAudience`.
const AUDIENCE: &str = "sts.example.com";
/// The shipped config's `--audience` (the exchange's `audience` parameter).
const TARGET: &str = "registry.example.com";
/// The shipped config's `--username`: the user the realm is told of.
const USERNAME: &str = "oauth2accesstoken";
const REPOSITORY: &str = "team/app:1";
const NS: &str = "default";
const PLUGIN: &str = "cloud-credential-provider";
/// containerd's words when it pulls without credentials and the realm refuses it.
const ANONYMOUS: &str = "failed to authorize: failed to fetch anonymous token: unexpected status: 401 Unauthorized";
/// kubelet's pull backoff starts at 10 s and doubles; a recovery is given
/// several rounds of it.
const RECOVERY: Duration = Duration::from_secs(120);
/// A failed pull (no hang) must be reported within this.
const PULL_FAILS: Duration = Duration::from_secs(60);

/// klog writes kubelet's log out every 5 s: a line may come that much later.
const KLOG_FLUSH: Duration = Duration::from_secs(30);

/// The token endpoint's URL in the node's netns (the config's variable).
fn endpoint_url() -> String {
    format!("http://127.0.0.1:{EXCHANGE_PORT}/token")
}

/// The shipped RBAC for the token-exchange config, as `kubectl apply -f` creates it.
async fn apply_shipped_rbac(client: &kube::Client) {
    let file = workspace_root().join("manifests/credential-provider-rbac/token-exchange.yaml");
    let text = std::fs::read_to_string(&file).expect("the shipped RBAC");
    let pp = PostParams::default();
    for doc in serde_yaml_ng::Deserializer::from_str(&text) {
        let object: Value = serde::Deserialize::deserialize(doc).expect("a YAML document");
        match object["kind"].as_str() {
            Some("ClusterRole") => {
                let role: ClusterRole = serde_json::from_value(object).expect("a ClusterRole");
                Api::<ClusterRole>::all(client.clone())
                    .create(&pp, &role)
                    .await
                    .expect("create the ClusterRole");
            }
            Some("ClusterRoleBinding") => {
                let binding: ClusterRoleBinding = serde_json::from_value(object).expect("a ClusterRoleBinding");
                Api::<ClusterRoleBinding>::all(client.clone())
                    .create(&pp, &binding)
                    .await
                    .expect("create the ClusterRoleBinding");
            }
            other => panic!("{}: unexpected kind {other:?}", file.display()),
        }
    }
}

/// The shipped token-exchange config with `matchImages` the registry and
/// the endpoint ours: the two edits the docs ask for.
fn config(dir: &Path, registry: &str) -> PathBuf {
    let file = workspace_root().join("manifests/credential-provider/token-exchange.yaml");
    let mut doc: Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(&file).expect("the shipped config")).expect("its YAML");
    let provider = &mut doc["providers"][0];
    assert_eq!(provider["name"], PLUGIN);
    provider["matchImages"] = json!([registry]);
    let env = provider["env"].as_array_mut().expect("env");
    let endpoint = env
        .iter_mut()
        .find(|e| e["name"] == "CLOUD_CREDENTIAL_PROVIDER_TOKEN_ENDPOINT")
        .expect("the endpoint's variable");
    endpoint["value"] = json!(endpoint_url());
    let path = dir.join("credential-providers.yaml");
    std::fs::write(&path, serde_yaml_ng::to_string(&doc).expect("YAML")).expect("the config");
    path
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

fn install_plugin(bin_dir: &Path) -> PathBuf {
    let binary = bin_dir.join(PLUGIN);
    std::fs::copy(provider_binary(), &binary).expect("copy the plugin");
    set_mode(&binary, 0o755);
    binary
}

async fn create_service_account(client: &kube::Client, name: &str) {
    let account: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": name}})).expect("a ServiceAccount");
    Api::<ServiceAccount>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &account)
        .await
        .expect("create the ServiceAccount");
}

/// A pod on the node pulling `image` (Always) as service account `account`.
async fn create_pod(client: &kube::Client, node: &Node, name: &str, account: &str, image: &str) {
    create_service_account(client, account).await;
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "nodeName": node.name(),
            "serviceAccountName": account,
            // No kube-controller-manager: no kube-root-ca.crt ConfigMap to project.
            "automountServiceAccountToken": false,
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "app", "image": image, "imagePullPolicy": "Always"}],
        },
    }))
    .expect("a pod");
    Api::<Pod>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &pod)
        .await
        .expect("create the pod");
}

/// Waits for a `Failed` pull event of `pod` containing `text`; the event.
async fn failed_pull(client: &kube::Client, pod: &str, text: &str, within: Duration) -> String {
    let failed = |e: &str| e.starts_with("Failed: ") && e.contains(text);
    let events = wait_pod_event(client, NS, pod, within, failed)
        .await
        .unwrap_or_else(|e| panic!("{pod}: no failed pull with {text:?}: {e:#}"));
    events.into_iter().find(|e| failed(e)).expect("the event found")
}

/// kubelet's log as klog records: a header line (`E1202 03:45:14.573057 …`)
/// and the lines after it (a value with a newline is written `key=<`, its
/// lines tab-indented, then ` >`).
fn klog_records(log: &str) -> Vec<String> {
    let header = |line: &str| {
        let b = line.as_bytes();
        b.len() > 5 && b"IWEF".contains(&b[0]) && b[1..5].iter().all(u8::is_ascii_digit)
    };
    let mut records: Vec<String> = Vec::new();
    for line in log.lines() {
        match records.last_mut() {
            Some(record) if !header(line) => {
                record.push('\n');
                record.push_str(line);
            }
            _ => records.push(line.to_owned()),
        }
    }
    records
}

/// Waits until kubelet's log past `from` has a record with every one of `parts`; the record.
async fn kubelet_record(node: &Node, from: usize, parts: &[&str], within: Duration) -> String {
    let deadline = Instant::now() + within;
    loop {
        let log = node.kubelet_log();
        if let Some(record) = klog_records(&log[from..])
            .into_iter()
            .find(|r| parts.iter().all(|p| r.contains(p)))
        {
            return record;
        }
        assert!(
            Instant::now() < deadline,
            "no kubelet record with {parts:?} within {within:?}; kubelet's log since:\n{}",
            &log[from..]
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn container_id(pod: &Pod) -> (Option<String>, Option<i32>) {
    let status = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first());
    (
        status.and_then(|s| s.container_id.clone()),
        status.map(|s| s.restart_count),
    )
}

/// How kubelet (pkg/credentialprovider/plugin/plugin.go) words a failed run
/// of the plugin, before the cause.
fn exec_error(image_name: &str) -> String {
    format!(
        "failed to get credential from external registry credential provider: \
         error execing credential provider plugin {PLUGIN} for image {image_name}"
    )
}

/// Starts kubelet expecting it to exit at once; its exit code and log.
async fn kubelet_refuses_to_start(node: &Node, options: &KubeletOptions) -> (Option<i32>, Duration, String) {
    let from = node.kubelet_log().len();
    let t0 = Instant::now();
    node.start_kubelet(options.clone()).expect("kubelet starts");
    let deadline = t0 + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = node.kubelet_exited() {
            break status;
        }
        assert!(Instant::now() < deadline, "kubelet still runs after 60s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    (status.code(), t0.elapsed(), node.kubelet_log()[from..].to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_on_the_node_fail_clearly_and_recover() {
    let t_start = Instant::now();
    let cluster = TestCluster::start().await;
    let client = cluster.client();
    apply_shipped_rbac(&client).await;

    let access_token = random_hex(16);
    let mut realm = TokenRealm::start(Check::Password {
        user: USERNAME.to_owned(),
        password: access_token.clone(),
    })
    .expect("the token realm");
    let registry = Registry::start_token(&realm).expect("the registry");
    let archive = pause_image_archive().expect("the pause image");
    push(&archive, &registry, REPOSITORY, &realm.push_credentials()).expect("push team/app:1");
    let image = format!("{}/{REPOSITORY}", registry.host());
    // kubelet asks its providers for the image without its tag.
    let image_name = image.trim_end_matches(":1").to_owned();

    let node = Node::create(
        &cluster,
        NodeOptions {
            relay_ports: vec![registry.port(), realm.port()],
            registry_cas: vec![(registry.host(), registry.ca_path().to_path_buf())],
            ..NodeOptions::default()
        },
    )
    .expect("the node");
    let netns = PathBuf::from(format!("/run/netns/{}", node.netns()));
    let mut exchange = TokenExchange::start(
        client.clone(),
        TokenExchangeConfig {
            path: "/token".to_owned(),
            subject_audience: AUDIENCE.to_owned(),
            audience: TARGET.to_owned(),
            issue: Issue::Fixed(access_token.clone()),
        },
        Bind::Netns {
            netns,
            port: EXCHANGE_PORT,
        },
    )
    .expect("the token endpoint");

    let work = tempfile::tempdir().expect("a work dir");
    let bin_dir = work.path().join("bin");
    std::fs::create_dir(&bin_dir).expect("the bin dir");
    let binary = install_plugin(&bin_dir);
    let options = KubeletOptions {
        credential_provider: Some((config(work.path(), &registry.host()), bin_dir.clone())),
        ..KubeletOptions::default()
    };
    node.start_kubelet(options.clone()).expect("kubelet starts");
    node.wait_ready(&client, Duration::from_secs(120))
        .await
        .expect("the Node is Ready");
    let t_setup = t_start.elapsed();
    let subject = |account: &str| format!("system:serviceaccount:{NS}:{account}");

    // The working case: the plugin exchanges the pod's token, the realm takes the password.
    let t0 = Instant::now();
    create_pod(&client, &node, "app", "puller", &image).await;
    wait_pod_running(&client, NS, "app", Duration::from_secs(90))
        .await
        .expect("app runs");
    let t_working = t0.elapsed();
    assert_eq!(exchange.accepted(&subject("puller")), 1, "{}", exchange.log());
    assert!(
        realm.grants().iter().any(|g| g.subject == USERNAME),
        "{:?}",
        realm.grants()
    );

    // 1. The token endpoint down.
    exchange.stop().await;
    let from = node.kubelet_log().len();
    let t0 = Instant::now();
    create_pod(&client, &node, "app-endpoint-down", "endpoint-down", &image).await;
    let event = failed_pull(&client, "app-endpoint-down", ANONYMOUS, PULL_FAILS).await;
    let t_down_fails = t0.elapsed();
    eprintln!("node faults: token endpoint down, the pod's event: {event}");
    let record = kubelet_record(
        &node,
        from,
        &[
            "Failed to provide credentials for image",
            "pod=\"default/app-endpoint-down\"",
        ],
        KLOG_FLUSH,
    )
    .await;
    eprintln!("node faults: token endpoint down, kubelet:\n{record}");
    // Our stderr ends in a newline: klog writes the error as a block, our line alone on its own line.
    let ours = format!(
        "{PLUGIN}: cannot reach token endpoint {}: error sending request: client error (Connect): \
         tcp connect error: Connection refused (os error 111)",
        endpoint_url()
    );
    let expected = format!(
        "\"Failed to provide credentials for image\" err=<\n\t{}: exit status 1: {ours}\n > provider=\"{PLUGIN}\" \
         image=\"{image_name}\" pod=\"default/app-endpoint-down\"",
        exec_error(&image_name)
    );
    assert!(record.contains(&expected), "our one line is not in kubelet's: {record}");
    let t0 = Instant::now();
    exchange.start_again().expect("the token endpoint again");
    wait_pod_running(&client, NS, "app-endpoint-down", RECOVERY)
        .await
        .expect("the pod runs once the endpoint is back");
    let t_down_recovers = t0.elapsed();
    assert_eq!(exchange.accepted(&subject("endpoint-down")), 1, "{}", exchange.log());

    // 2. The binary removed, then not executable, while kubelet runs.
    std::fs::remove_file(&binary).expect("remove the plugin");
    let from = node.kubelet_log().len();
    let t0 = Instant::now();
    create_pod(&client, &node, "app-missing", "missing", &image).await;
    let event = failed_pull(&client, "app-missing", ANONYMOUS, PULL_FAILS).await;
    let t_missing_fails = t0.elapsed();
    eprintln!("node faults: binary missing, the pod's event: {event}");
    let record = kubelet_record(
        &node,
        from,
        &["Failed to provide credentials for image", "pod=\"default/app-missing\""],
        KLOG_FLUSH,
    )
    .await;
    eprintln!("node faults: binary missing, kubelet: {record}");
    let expected = format!(
        "\"Failed to provide credentials for image\" err=\"{}: fork/exec {}: no such file or directory: \" provider=\"{PLUGIN}\"",
        exec_error(&image_name),
        binary.display()
    );
    assert!(record.contains(&expected), "{record}");

    install_plugin(&bin_dir);
    set_mode(&binary, 0o644);
    let from = node.kubelet_log().len();
    let t0 = Instant::now();
    create_pod(&client, &node, "app-not-executable", "not-executable", &image).await;
    let event = failed_pull(&client, "app-not-executable", ANONYMOUS, PULL_FAILS).await;
    let t_noexec_fails = t0.elapsed();
    eprintln!("node faults: binary not executable, the pod's event: {event}");
    let record = kubelet_record(
        &node,
        from,
        &[
            "Failed to provide credentials for image",
            "pod=\"default/app-not-executable\"",
        ],
        KLOG_FLUSH,
    )
    .await;
    eprintln!("node faults: binary not executable, kubelet: {record}");
    let expected = format!(
        "\"Failed to provide credentials for image\" err=\"{}: fork/exec {}: permission denied: \" provider=\"{PLUGIN}\"",
        exec_error(&image_name),
        binary.display()
    );
    assert!(record.contains(&expected), "{record}");
    let t0 = Instant::now();
    set_mode(&binary, 0o755);
    for pod in ["app-missing", "app-not-executable"] {
        wait_pod_running(&client, NS, pod, RECOVERY)
            .await
            .unwrap_or_else(|e| panic!("{pod} runs once the binary is back: {e:#}"));
    }
    let t_binary_recovers = t0.elapsed();
    for account in ["missing", "not-executable"] {
        assert_eq!(exchange.accepted(&subject(account)), 1, "{}", exchange.log());
    }

    // 3. kubelet restarted: the pods keep their containers, a new pull works.
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let running = ["app", "app-endpoint-down", "app-missing", "app-not-executable"];
    let mut before = Vec::new();
    for name in running {
        let (id, restarts) = container_id(&pods.get(name).await.expect("get the pod"));
        assert!(id.is_some() && restarts == Some(0), "{name}: {id:?} {restarts:?}");
        before.push(id);
    }
    let t0 = Instant::now();
    let from = node.kubelet_log().len();
    node.restart_kubelet().expect("kubelet restarts");
    create_pod(&client, &node, "app-after-restart", "after-restart", &image).await;
    wait_pod_running(&client, NS, "app-after-restart", Duration::from_secs(90))
        .await
        .expect("a new pod pulls after the restart");
    let t_restart = t0.elapsed();
    // The restarted kubelet has taken the old pods on.
    kubelet_record(&node, from, &["SyncLoop ADD", "default/app-endpoint-down"], KLOG_FLUSH).await;
    assert_eq!(exchange.accepted(&subject("after-restart")), 1, "{}", exchange.log());
    for (name, id) in running.iter().zip(&before) {
        let pod = pods.get(name).await.expect("get the pod");
        assert_eq!(
            pod.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Running"),
            "{name}"
        );
        assert_eq!(
            &container_id(&pod),
            &(id.clone(), Some(0)),
            "{name}: its container was replaced"
        );
    }

    // 4. The binary missing, then not executable, when kubelet starts.
    node.stop_kubelet();
    std::fs::remove_file(&binary).expect("remove the plugin");
    let (code, took_missing, log) = kubelet_refuses_to_start(&node, &options).await;
    let line = log
        .lines()
        .find(|l| l.contains("Failed to register CRI auth plugins"))
        .unwrap_or_else(|| panic!("kubelet exited {code:?} without saying why:\n{log}"))
        .to_owned();
    eprintln!("node faults: binary missing at start ({code:?} after {took_missing:.1?}), kubelet: {line}");
    assert_eq!(code, Some(1), "{log}");
    assert!(
        line.contains("err=\"plugin binary executable  did not exist\""),
        "{line}"
    );

    install_plugin(&bin_dir);
    set_mode(&binary, 0o644);
    let (code, took_noexec, log) = kubelet_refuses_to_start(&node, &options).await;
    let line = log
        .lines()
        .find(|l| l.contains("Failed to register CRI auth plugins"))
        .unwrap_or_else(|| panic!("kubelet exited {code:?} without saying why:\n{log}"))
        .to_owned();
    eprintln!("node faults: binary not executable at start ({code:?} after {took_noexec:.1?}), kubelet: {line}");
    assert_eq!(code, Some(1), "{log}");
    assert!(
        line.contains(&format!(
            "err=\"error inspecting binary executable : exec: \\\"{}\\\": permission denied\"",
            binary.display()
        )),
        "{line}"
    );

    set_mode(&binary, 0o755);
    let t0 = Instant::now();
    node.start_kubelet(options.clone()).expect("kubelet starts");
    node.wait_ready(&client, Duration::from_secs(120))
        .await
        .expect("the Node is Ready with the binary back");
    create_pod(&client, &node, "app-after-start", "after-start", &image).await;
    wait_pod_running(&client, NS, "app-after-start", Duration::from_secs(90))
        .await
        .expect("a new pod pulls once kubelet runs again");
    let t_back = t0.elapsed();
    assert_eq!(exchange.accepted(&subject("after-start")), 1, "{}", exchange.log());
    for (name, id) in running.iter().zip(&before) {
        let pod = pods.get(name).await.expect("get the pod");
        assert_eq!(
            &container_id(&pod),
            &(id.clone(), Some(0)),
            "{name}: its container was replaced"
        );
    }

    assert!(
        realm
            .log_text()
            .contains("GET /token: refused (repository:team/app:pull): authentication required"),
        "the realm refused no anonymous pull"
    );
    // The password the plugin answered is in no log of kubelet, containerd or the registry.
    for (log, which) in [
        (node.kubelet_log(), "kubelet"),
        (node.containerd_log(), "containerd"),
        (registry.log_text(), "registry"),
        (realm.log_text(), "realm"),
    ] {
        assert!(!log.contains(&access_token), "the {which} log holds the access token");
    }
    realm.stop();
    eprintln!(
        "node faults: set-up {t_setup:.1?}; a pull through the plugin {t_working:.1?}; endpoint down: failed in \
         {t_down_fails:.1?}, Running {t_down_recovers:.1?} after it is back; binary missing failed in \
         {t_missing_fails:.1?}, not executable in {t_noexec_fails:.1?}, both Running {t_binary_recovers:.1?} after \
         it is back; kubelet restart and a new pod Running {t_restart:.1?}; kubelet exits with the binary missing \
         after {took_missing:.1?}, not executable {took_noexec:.1?}; started again and a new pod Running {t_back:.1?}; total {:.1?}",
        t_start.elapsed()
    );
}
