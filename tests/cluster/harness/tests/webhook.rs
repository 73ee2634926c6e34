//! pv-topology-webhook behind a real kube-apiserver: `pv-topology-webhook serve`
//! on loopback, registered with the MutatingWebhookConfiguration of
//! `manifests/webhook/base` (its rules and matchConditions, read at run time;
//! only `clientConfig` becomes `url: https://127.0.0.1:PORT/mutate` with the
//! caBundle printed by `pv-topology-webhook certs`). PVs are created through the
//! API and read back as stored.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use base64::Engine;
use cluster_harness::{Moto, TestCluster, run_ok, workspace_binary, workspace_root};
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::PersistentVolume;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const CONFIGURATION: &str = "pv-topology-webhook";
const ZONE: &str = "topology.kubernetes.io/zone";
const REGION: &str = "topology.kubernetes.io/region";

fn webhook_binary() -> PathBuf {
    workspace_binary("pv-topology-webhook", "PV_TOPOLOGY_WEBHOOK_BIN")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `GET path` over plain HTTP/1.0 (no chunking); status and body.
fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Some((status, body))
}

/// `pv-topology-webhook certs` for 127.0.0.1 into `dir`: (`ca.crt` PEM, caBundle it printed).
fn certs(dir: &Path) -> (String, String) {
    let out = run_ok(
        Command::new(webhook_binary())
            .args([
                "certs",
                "--service",
                "pv-topology-webhook",
                "--namespace",
                "pv-topology-webhook",
            ])
            .arg("--out-dir")
            .arg(dir)
            .args(["--extra-san", "127.0.0.1"]),
    )
    .unwrap();
    let bundle = String::from_utf8(out.stdout).unwrap().trim().to_string();
    (std::fs::read_to_string(dir.join("ca.crt")).unwrap(), bundle)
}

fn base64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// One `serve` process in its own process group, log in a file; killed (the
/// whole group) when dropped, its log printed if the test is failing.
struct Webhook {
    child: Child,
    port: u16,
    metrics: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Webhook {
    /// `serve` with `cert`/`key` and `extra` flags; waits for `/readyz`.
    fn start(cert: &Path, key: &Path, extra: &[&str], env: &[(&str, &str)]) -> Webhook {
        use std::os::unix::process::CommandExt;
        let dir = tempfile::Builder::new().prefix("webhook-test-").tempdir().unwrap();
        let log = dir.path().join("webhook.log");
        let file = std::fs::File::create(&log).unwrap();
        let (port, metrics) = (free_port(), free_port());
        let child = Command::new(webhook_binary())
            .args(["--log-level", "info", "serve", "--tls-cert-file"])
            .arg(cert)
            .arg("--tls-key-file")
            .arg(key)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--metrics-listen", &format!("127.0.0.1:{metrics}")])
            .args(extra)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .process_group(0)
            .spawn()
            .expect("start pv-topology-webhook serve");
        let mut webhook = Webhook {
            child,
            port,
            metrics,
            log,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some((200, _)) = http_get(metrics, "/readyz") {
                return webhook;
            }
            if let Some(status) = webhook.child.try_wait().unwrap() {
                panic!("webhook exited ({status}):\n{}", webhook.log());
            }
            assert!(Instant::now() < deadline, "webhook not ready:\n{}", webhook.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn url(&self) -> String {
        format!("https://127.0.0.1:{}/mutate", self.port)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn metrics_text(&self) -> String {
        match http_get(self.metrics, "/metrics") {
            Some((200, body)) => body,
            other => panic!("/metrics: {other:?}"),
        }
    }

    /// Sum of the samples of the metric `name` whose label set contains `labels`.
    fn counter(&self, name: &str, labels: &str) -> u64 {
        self.metrics_text()
            .lines()
            .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']) && l.contains(labels))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as u64
    }

    /// Admission requests answered so far.
    fn requests(&self) -> u64 {
        self.counter("pv_topology_webhook_admission_requests_total", "")
    }

    fn sigterm(&self) {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
    }

    fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "webhook did not exit:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Webhook {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("--- webhook log ({}) ---\n{}", self.log.display(), self.log());
        }
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
        let _ = self.child.wait();
    }
}

/// The base MutatingWebhookConfiguration (rules, matchConditions, objectSelector,
/// timeouts as shipped), pointed at `url` with `ca_bundle` and `failure_policy`.
fn configuration(url: &str, ca_bundle: &str, failure_policy: &str) -> MutatingWebhookConfiguration {
    let path = workspace_root().join("manifests/webhook/base/mutatingwebhookconfiguration.yaml");
    let mut object: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    object["metadata"] = json!({"name": CONFIGURATION});
    for webhook in object["webhooks"].as_array_mut().unwrap() {
        webhook["clientConfig"] = json!({"url": url, "caBundle": ca_bundle});
        webhook["failurePolicy"] = json!(failure_policy);
    }
    let configuration: MutatingWebhookConfiguration = serde_json::from_value(object).unwrap();
    assert!(
        configuration.webhooks.as_ref().unwrap()[0].match_conditions.is_some(),
        "matchConditions read from the manifest"
    );
    configuration
}

/// Creates or replaces the configuration (server-side apply).
async fn register(client: &kube::Client, url: &str, ca_bundle: &str, failure_policy: &str) {
    let api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    api.patch(
        CONFIGURATION,
        &PatchParams::apply("webhook-test").force(),
        &Patch::Apply(&configuration(url, ca_bundle, failure_policy)),
    )
    .await
    .expect("apply MutatingWebhookConfiguration");
}

fn pv(name: &str, labels: Value, annotations: Value, spec: Value) -> PersistentVolume {
    let mut spec = spec;
    spec["capacity"] = json!({"storage": "10Gi"});
    spec["accessModes"] = json!(["ReadWriteOnce"]);
    spec["persistentVolumeReclaimPolicy"] = json!("Retain");
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": spec,
    }))
    .unwrap()
}

fn gce_pd(name: &str, zone: &str) -> PersistentVolume {
    let handle = format!("projects/P/zones/{zone}/disks/{name}");
    pv(
        name,
        json!({}),
        json!({}),
        json!({"csi": {"driver": "pd.csi.storage.gke.io", "volumeHandle": handle, "fsType": "ext4"}}),
    )
}

fn labels(pv: &PersistentVolume) -> Value {
    serde_json::to_value(&pv.metadata.labels).unwrap()
}

fn affinity(pv: &PersistentVolume) -> Value {
    let spec = pv.spec.as_ref().unwrap();
    serde_json::to_value(&spec.node_affinity).unwrap()
}

fn zone_affinity(key: &str, zone: &str) -> Value {
    json!({"required": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": key, "operator": "In", "values": [zone]}]}
    ]}})
}

fn message(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => status.message.clone(),
        other => other.to_string(),
    }
}

/// Dry-run creations until `check` accepts the answer: the apiserver's
/// informer has seen the configuration.
async fn wait_until<F>(pvs: &Api<PersistentVolume>, what: &str, check: F)
where
    F: Fn(&Result<PersistentVolume, kube::Error>) -> bool,
{
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    for i in 0.. {
        let answer = pvs.create(&dry, &gce_pd(&format!("probe-{i}"), "europe-west1-b")).await;
        if check(&answer) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: last answer {answer:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn wait_labeled(pvs: &Api<PersistentVolume>) {
    wait_until(pvs, "the webhook never labeled a PV", |a| {
        a.as_ref().is_ok_and(|pv| labels(pv)[ZONE] == "europe-west1-b")
    })
    .await;
}

/// Creates GCE PD PVs `{prefix}-N` one after the other until `stop`; each must
/// be created with its zone label. The number created and the failures.
fn keep_creating(
    pvs: Api<PersistentVolume>,
    prefix: &'static str,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<(usize, Vec<String>)> {
    tokio::spawn(async move {
        let mut failures = Vec::new();
        let mut created = 0;
        while !stop.load(Ordering::SeqCst) {
            let name = format!("{prefix}-{created}-{}", failures.len());
            match pvs
                .create(&PostParams::default(), &gce_pd(&name, "europe-west1-c"))
                .await
            {
                Ok(pv) if labels(&pv)[ZONE] == "europe-west1-c" => created += 1,
                Ok(pv) => failures.push(format!("{name}: stored without topology: {:?}", pv.metadata.labels)),
                Err(e) => failures.push(format!("{name}: {}", message(&e))),
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        (created, failures)
    })
}

struct Served {
    _certs: tempfile::TempDir,
    webhook: Webhook,
    ca_bundle: String,
}

/// `certs` into a new directory and `serve` with it.
fn serve(extra: &[&str], env: &[(&str, &str)]) -> Served {
    let certs_dir = tempfile::tempdir().unwrap();
    let (_, ca_bundle) = certs(certs_dir.path());
    let webhook = Webhook::start(
        &certs_dir.path().join("tls.crt"),
        &certs_dir.path().join("tls.key"),
        extra,
        env,
    );
    Served {
        _certs: certs_dir,
        webhook,
        ca_bundle,
    }
}

#[tokio::test]
async fn created_pvs_are_stored_with_the_topology_the_decision_promises() {
    let cluster = TestCluster::start().await;
    let client = cluster.client();
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let rules = workspace_root().join("tests/data/webhook/rules.yaml");
    let served = serve(&["--rules", rules.to_str().unwrap()], &[]);
    let webhook = &served.webhook;
    register(&client, &webhook.url(), &served.ca_bundle, "Fail").await;
    wait_labeled(&pvs).await;
    let post = PostParams::default();

    // CSI GCE PD, zonal: zone and region from the handle, affinity on the driver's key.
    pvs.create(&post, &gce_pd("gce-pd-zonal", "europe-west1-b"))
        .await
        .unwrap();
    let stored = pvs.get("gce-pd-zonal").await.unwrap();
    assert_eq!(labels(&stored), json!({ZONE: "europe-west1-b", REGION: "europe-west1"}));
    assert_eq!(
        affinity(&stored),
        zone_affinity("topology.gke.io/zone", "europe-west1-b")
    );

    // In-tree EBS with the zone in its ID; the PV's own labels are kept.
    let ebs = pv(
        "ebs-in-tree",
        json!({"app": "db"}),
        json!({}),
        json!({"awsElasticBlockStore": {"volumeID": "aws://us-east-1a/vol-0123456789abcdef0", "fsType": "ext4"}}),
    );
    pvs.create(&post, &ebs).await.unwrap();
    let stored = pvs.get("ebs-in-tree").await.unwrap();
    assert_eq!(
        labels(&stored),
        json!({"app": "db", ZONE: "us-east-1a", REGION: "us-east-1"})
    );
    // In-tree volumes get zone and region requirements, as the in-tree PersistentVolumeLabel did.
    assert_eq!(
        affinity(&stored),
        json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": ZONE, "operator": "In", "values": ["us-east-1a"]},
            {"key": REGION, "operator": "In", "values": ["us-east-1"]}
        ]}]}})
    );

    // A driver only the rules file (tests/data/webhook/rules.yaml) knows.
    let onprem = pv(
        "rules-driver",
        json!({}),
        json!({}),
        json!({"csi": {"driver": "csi.example.com", "volumeHandle": "dc1/dc1-rack2/vol-7"}}),
    );
    pvs.create(&post, &onprem).await.unwrap();
    let stored = pvs.get("rules-driver").await.unwrap();
    assert_eq!(labels(&stored), json!({ZONE: "dc1-rack2", REGION: "dc1"}));
    assert_eq!(
        affinity(&stored),
        zone_affinity("topology.csi.example.com/zone", "dc1-rack2")
    );

    // Existing affinity: our requirement is added to every term, no term added or removed.
    let mut existing = gce_pd("existing-affinity", "europe-west1-b");
    let terms = json!({"required": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "cloud.google.com/gke-nodepool", "operator": "In", "values": ["ssd-pool"]}]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}
    ]}});
    existing.spec.as_mut().unwrap().node_affinity = Some(serde_json::from_value(terms).unwrap());
    pvs.create(&post, &existing).await.unwrap();
    let stored = pvs.get("existing-affinity").await.unwrap();
    assert_eq!(labels(&stored), json!({ZONE: "europe-west1-b", REGION: "europe-west1"}));
    let ours = json!({"key": "topology.gke.io/zone", "operator": "In", "values": ["europe-west1-b"]});
    assert_eq!(
        affinity(&stored),
        json!({"required": {"nodeSelectorTerms": [
            {"matchExpressions": [
                {"key": "cloud.google.com/gke-nodepool", "operator": "In", "values": ["ssd-pool"]},
                ours
            ]},
            {"matchExpressions": [ours], "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}
        ]}})
    );

    // A provisioned PV with both labels is trusted: stored exactly as sent,
    // although its ID names another zone (it was sent: the trusted counter moves).
    let trusted_before = webhook.counter("pv_topology_webhook_admission_requests_total", "outcome=\"trusted\"");
    let trusted = pv(
        "trusted-provisioned",
        json!({ZONE: "us-east-1b", REGION: "us-east-1"}),
        json!({"pv.kubernetes.io/provisioned-by": "kubernetes.io/aws-ebs"}),
        json!({"awsElasticBlockStore": {"volumeID": "aws://us-east-1a/vol-1"}}),
    );
    pvs.create(&post, &trusted).await.unwrap();
    let stored = pvs.get("trusted-provisioned").await.unwrap();
    assert_eq!(labels(&stored), json!({ZONE: "us-east-1b", REGION: "us-east-1"}));
    assert_eq!(affinity(&stored), Value::Null);
    assert_eq!(
        webhook.counter("pv_topology_webhook_admission_requests_total", "outcome=\"trusted\""),
        trusted_before + 1
    );

    // NFS: stored untouched, and the matchConditions keep it from the webhook
    // (its request counter does not move).
    let before = webhook.requests();
    let nfs = pv(
        "nfs",
        json!({}),
        json!({}),
        json!({"nfs": {"server": "nfs.example.com", "path": "/exports/a"}}),
    );
    pvs.create(&post, &nfs).await.unwrap();
    let stored = pvs.get("nfs").await.unwrap();
    assert_eq!(labels(&stored), Value::Null);
    assert_eq!(affinity(&stored), Value::Null);
    assert_eq!(webhook.requests(), before, "the NFS PV was sent to the webhook");

    // dryRun: answered by the webhook (sideEffects: None), nothing stored.
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let answer = pvs.create(&dry, &gce_pd("dry-run", "europe-west1-d")).await.unwrap();
    assert_eq!(labels(&answer), json!({ZONE: "europe-west1-d", REGION: "europe-west1"}));
    assert_eq!(
        affinity(&answer),
        zone_affinity("topology.gke.io/zone", "europe-west1-d")
    );
    assert_eq!(webhook.requests(), before + 1);
    assert!(
        pvs.get_opt("dry-run").await.unwrap().is_none(),
        "a dry run stored the PV"
    );
}

fn credentials() -> cloud_access::aws::AwsCredentials {
    cloud_access::aws::AwsCredentials {
        access_key_id: "AKIDTEST".into(),
        secret_access_key: "test-secret".into(),
        session_token: None,
        expires_at: None,
        source: "test",
    }
}

/// A 1 GiB volume created in moto's EC2; its ID.
async fn create_volume(moto: &Moto, zone: &str) -> String {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let options = cloud_access::aws::endpoints::EndpointOptions {
        global_override: Some(moto.url.clone()),
        ..Default::default()
    };
    let client = cloud_access::aws::AwsClient::new(reqwest::Client::new(), "us-east-1", options);
    let xml = client
        .query(
            cloud_access::aws::endpoints::EC2,
            "CreateVolume",
            "2016-11-15",
            &[("AvailabilityZone", zone), ("Size", "1")],
            &credentials(),
            Instant::now() + Duration::from_secs(10),
        )
        .await
        .expect("CreateVolume");
    let start = xml.find("<volumeId>").expect("volumeId") + "<volumeId>".len();
    let end = xml[start..].find('<').unwrap() + start;
    xml[start..end].to_owned()
}

#[tokio::test]
async fn ebs_lookups_label_created_volumes_and_denials_reach_the_user() {
    let moto = Moto::start();
    let cluster = TestCluster::start().await;
    let client = cluster.client();
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let served = serve(
        &[
            "--aws-ebs-lookup",
            "--aws-region",
            "us-east-1",
            "--on-lookup-error",
            "deny",
        ],
        &[
            ("AWS_ENDPOINT_URL", moto.url.as_str()),
            ("AWS_ACCESS_KEY_ID", "AKIDTEST"),
            ("AWS_SECRET_ACCESS_KEY", "test-secret"),
            ("AWS_EC2_METADATA_DISABLED", "true"),
        ],
    );
    register(&client, &served.webhook.url(), &served.ca_bundle, "Fail").await;
    wait_labeled(&pvs).await;
    let post = PostParams::default();

    // An EBS CSI volume created in moto: its zone comes from DescribeVolumes.
    let id = create_volume(&moto, "us-east-1b").await;
    let ebs = |name: &str, handle: &str| {
        pv(
            name,
            json!({}),
            json!({}),
            json!({"csi": {"driver": "ebs.csi.aws.com", "volumeHandle": handle, "fsType": "ext4"}}),
        )
    };
    pvs.create(&post, &ebs("ebs-csi", &id)).await.unwrap();
    let stored = pvs.get("ebs-csi").await.unwrap();
    assert_eq!(labels(&stored), json!({ZONE: "us-east-1b", REGION: "us-east-1"}));
    assert_eq!(
        affinity(&stored),
        zone_affinity("topology.ebs.csi.aws.com/zone", "us-east-1b")
    );

    // An unknown volume: denied, and the user reads the webhook's message
    // (EC2's error), not the apiserver's "failed calling webhook".
    let error = pvs
        .create(&post, &ebs("ebs-unknown", "vol-0badc0ffee0000000"))
        .await
        .expect_err("an unknown volume is denied");
    let text = message(&error);
    assert!(text.contains("denied the request"), "{text}");
    assert!(text.contains("InvalidVolume.NotFound"), "{text}");
    assert!(text.contains("vol-0badc0ffee0000000"), "{text}");
    assert!(!text.contains("failed calling webhook"), "{text}");
    assert!(pvs.get_opt("ebs-unknown").await.unwrap().is_none());
}

#[tokio::test]
async fn when_the_webhook_is_down_the_failure_policy_decides() {
    let cluster = TestCluster::start().await;
    let client = cluster.client();
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let served = serve(&[], &[]);
    let (url, ca_bundle) = (served.webhook.url(), served.ca_bundle.clone());
    register(&client, &url, &ca_bundle, "Fail").await;
    wait_labeled(&pvs).await;
    drop(served); // killed: nothing listens on its port any more

    // Fail: creation is refused.
    let error = pvs
        .create(&PostParams::default(), &gce_pd("down-fail", "europe-west1-b"))
        .await
        .expect_err("created while the webhook is down under failurePolicy Fail");
    let text = message(&error);
    assert!(text.contains("failed calling webhook"), "{text}");
    assert!(pvs.get_opt("down-fail").await.unwrap().is_none());

    // Ignore: created, without topology.
    register(&client, &url, &ca_bundle, "Ignore").await;
    wait_until(&pvs, "failurePolicy Ignore never applied", |a| a.is_ok()).await;
    pvs.create(&PostParams::default(), &gce_pd("down-ignore", "europe-west1-b"))
        .await
        .unwrap();
    let stored = pvs.get("down-ignore").await.unwrap();
    assert_eq!(labels(&stored), Value::Null);
    assert_eq!(affinity(&stored), Value::Null);
}

/// A Secret volume's layout: `dir/..data -> <version>`, `dir/tls.* -> ..data/tls.*`;
/// a swap is a new version directory and an atomic rename of a new `..data` link.
fn secret_version(dir: &Path, version: &str, from: &Path) {
    std::fs::create_dir(dir.join(version)).unwrap();
    for name in ["tls.crt", "tls.key"] {
        std::fs::copy(from.join(name), dir.join(version).join(name)).unwrap();
    }
    std::os::unix::fs::symlink(version, dir.join("..data_tmp")).unwrap();
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
    for name in ["tls.crt", "tls.key"] {
        if !dir.join(name).exists() {
            std::os::unix::fs::symlink(format!("..data/{name}"), dir.join(name)).unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_swap_fails_no_creation() {
    let cluster = TestCluster::start().await;
    let client = cluster.client();
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let (first, second, secret) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let (first_ca, first_bundle) = certs(first.path());
    let (second_ca, second_bundle) = certs(second.path());
    assert_ne!(first_ca, second_ca);
    secret_version(secret.path(), "..2026_01_01_00_00_00.1", first.path());
    let webhook = Webhook::start(
        &secret.path().join("tls.crt"),
        &secret.path().join("tls.key"),
        &["--tls-reload-interval", "200ms"],
        &[],
    );
    // The caBundle holds both CAs while the certificate is replaced (docs/webhook.md).
    let both = base64(&format!("{first_ca}{second_ca}"));
    register(&client, &webhook.url(), &both, "Fail").await;
    wait_labeled(&pvs).await;

    let stop = Arc::new(AtomicBool::new(false));
    let creating = keep_creating(pvs.clone(), "swap", stop.clone());
    tokio::time::sleep(Duration::from_millis(500)).await;
    secret_version(secret.path(), "..2026_01_02_00_00_00.2", second.path());
    let deadline = Instant::now() + Duration::from_secs(15);
    while webhook.counter("pv_topology_webhook_certificate_reloads_total", "result=\"success\"") < 1 {
        assert!(Instant::now() < deadline, "the new certificate was never loaded");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Then the old CA is dropped from the caBundle: still no failure.
    register(&client, &webhook.url(), &second_bundle, "Fail").await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    stop.store(true, Ordering::SeqCst);
    let (created, failures) = creating.await.unwrap();
    eprintln!("{created} PVs created, {} failed", failures.len());
    assert!(failures.is_empty(), "{} created, failures: {failures:#?}", created);
    assert!(created >= 10, "only {created} created");

    // The new certificate is what is served: a caBundle of the old CA alone fails.
    register(&client, &webhook.url(), &first_bundle, "Fail").await;
    wait_until(&pvs, "the old CA still verifies the webhook", |a| {
        a.as_ref().is_err_and(|e| message(e).contains("failed calling webhook"))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replacing_webhook_instances_one_at_a_time_fails_no_creation() {
    // What this shows: two instances are replaced one at a time (A by B, then
    // B by C) while PVs keep being created under failurePolicy Fail, and none
    // fails. Each old instance gets SIGTERM first and the configuration moves
    // to the new URL just after, as endpoints lag a pod's termination; the old
    // one keeps answering for --shutdown-delay and drains what is in flight.
    // (With --shutdown-delay 0s this test sees "connection refused" in about
    // half its runs.) Without kube-proxy or endpoints here, the URL names one
    // instance: it does not show a Service spreading requests over replicas.
    let cluster = TestCluster::start().await;
    let client = cluster.client();
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let certs_dir = tempfile::tempdir().unwrap();
    let (_, ca_bundle) = certs(certs_dir.path());
    let start = || {
        Webhook::start(
            &certs_dir.path().join("tls.crt"),
            &certs_dir.path().join("tls.key"),
            &["--shutdown-delay", "1s", "--drain-timeout", "5s"],
            &[],
        )
    };
    let mut old = start();
    register(&client, &old.url(), &ca_bundle, "Fail").await;
    wait_labeled(&pvs).await;

    let stop = Arc::new(AtomicBool::new(false));
    let creating = keep_creating(pvs.clone(), "roll", stop.clone());
    for _ in 0..2 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let new = start();
        // As in a rolling update, the old instance is told to stop before the
        // apiserver stops sending to it (endpoints lag); --shutdown-delay covers that.
        old.sigterm();
        register(&client, &new.url(), &ca_bundle, "Fail").await;
        let status = old.wait_exit(Duration::from_secs(20));
        assert!(status.success(), "{status}:\n{}", old.log());
        assert!(old.log().contains("SIGTERM"), "{}", old.log());
        let deadline = Instant::now() + Duration::from_secs(10);
        while new.requests() == 0 {
            assert!(Instant::now() < deadline, "the apiserver never called the new instance");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        old = new;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::SeqCst);
    let (created, failures) = creating.await.unwrap();
    eprintln!("{created} PVs created, {} failed", failures.len());
    assert!(failures.is_empty(), "{created} created, failures: {failures:#?}");
    assert!(created >= 10, "only {created} created");
}
