//! `pv-topology-webhook serve` as a peer of the test cluster: its
//! certificates (`pv-topology-webhook certs` for 127.0.0.1), the process on
//! loopback (its own process group, log in a file, `/readyz` waited for), its
//! `/metrics`, and its registration with the base
//! `MutatingWebhookConfiguration` of `manifests/webhook/base` (rules and
//! matchConditions read at run time; only `clientConfig` becomes
//! `url: https://127.0.0.1:PORT/mutate` with the caBundle `certs` printed).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use crate::{run_ok, workspace_binary, workspace_root};

/// The name of the registered `MutatingWebhookConfiguration`.
pub const CONFIGURATION: &str = "pv-topology-webhook";

/// `$PV_TOPOLOGY_WEBHOOK_BIN`, else `<target>/debug/pv-topology-webhook`.
pub fn webhook_binary() -> PathBuf {
    workspace_binary("pv-topology-webhook", "PV_TOPOLOGY_WEBHOOK_BIN")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
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
pub fn certs(dir: &Path) -> (String, String) {
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
    .expect("pv-topology-webhook certs");
    let bundle = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let ca = std::fs::read_to_string(dir.join("ca.crt")).expect("ca.crt written by `certs`");
    (ca, bundle)
}

/// One `serve` process in its own process group, log in a file; killed (the
/// whole group) when dropped, its log printed if the test is failing.
pub struct Webhook {
    child: Child,
    port: u16,
    metrics: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Webhook {
    /// `serve` with `cert`/`key` and `extra` flags; waits for `/readyz`.
    pub fn start(cert: &Path, key: &Path, extra: &[&str], env: &[(&str, &str)]) -> Webhook {
        use std::os::unix::process::CommandExt;
        let dir = tempfile::Builder::new()
            .prefix("webhook-test-")
            .tempdir()
            .expect("a temporary directory for the webhook");
        let log = dir.path().join("webhook.log");
        let file = std::fs::File::create(&log).expect("the webhook's log file");
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
            .stdout(file.try_clone().expect("the webhook's log file"))
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
            if let Ok(Some(status)) = webhook.child.try_wait() {
                panic!("webhook exited ({status}):\n{}", webhook.log());
            }
            assert!(Instant::now() < deadline, "webhook not ready:\n{}", webhook.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `https://127.0.0.1:PORT/mutate`.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}/mutate", self.port)
    }

    /// The URL of its `/validate`.
    pub fn validate_url(&self) -> String {
        format!("https://127.0.0.1:{}/validate", self.port)
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn metrics_text(&self) -> String {
        match http_get(self.metrics, "/metrics") {
            Some((200, body)) => body,
            other => panic!("/metrics: {other:?}"),
        }
    }

    /// Sum of the samples of the metric `name` whose label set contains `labels`.
    pub fn counter(&self, name: &str, labels: &str) -> u64 {
        self.metrics_text()
            .lines()
            .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']) && l.contains(labels))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as u64
    }

    /// Admission requests answered so far.
    pub fn requests(&self) -> u64 {
        self.counter("pv_topology_webhook_admission_requests_total", "")
    }

    /// SIGTERM to the process (not its group).
    pub fn sigterm(&self) {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .expect("SIGTERM to the webhook");
    }

    /// Waits for the process to exit; panics (with its log) after `timeout`.
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
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

/// A webhook serving certificates of its own.
pub struct Served {
    _certs: tempfile::TempDir,
    pub webhook: Webhook,
    /// The caBundle for its CA.
    pub ca_bundle: String,
}

/// `certs` into a new directory and `serve` with it.
pub fn serve(extra: &[&str], env: &[(&str, &str)]) -> Served {
    let certs_dir = tempfile::tempdir().expect("a temporary directory for the certificates");
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

/// A configuration of `manifests/webhook/base` (`file`: rules, matchConditions,
/// objectSelector, timeouts as shipped), named [`CONFIGURATION`], pointed at `url` with
/// `ca_bundle` and `failure_policy`.
fn shipped<T: serde::de::DeserializeOwned>(file: &str, url: &str, ca_bundle: &str, failure_policy: &str) -> T {
    let path = workspace_root().join("manifests/webhook/base").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut object: Value = serde_yaml_ng::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    object["metadata"] = json!({"name": CONFIGURATION});
    for webhook in object["webhooks"].as_array_mut().into_iter().flatten() {
        assert!(webhook.get("matchConditions").is_some(), "{file}: matchConditions");
        webhook["clientConfig"] = json!({"url": url, "caBundle": ca_bundle});
        webhook["failurePolicy"] = json!(failure_policy);
    }
    serde_json::from_value(object).unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// The base MutatingWebhookConfiguration, pointed at `url`.
pub fn configuration(url: &str, ca_bundle: &str, failure_policy: &str) -> MutatingWebhookConfiguration {
    shipped("mutatingwebhookconfiguration.yaml", url, ca_bundle, failure_policy)
}

/// Creates or replaces the base ValidatingWebhookConfiguration, pointed at `url`
/// (a `/validate`), with `failure_policy` (server-side apply).
pub async fn register_validating(client: &kube::Client, url: &str, ca_bundle: &str, failure_policy: &str) {
    let configuration: ValidatingWebhookConfiguration =
        shipped("validatingwebhookconfiguration.yaml", url, ca_bundle, failure_policy);
    let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    api.patch(
        CONFIGURATION,
        &PatchParams::apply("webhook-test").force(),
        &Patch::Apply(&configuration),
    )
    .await
    .expect("apply ValidatingWebhookConfiguration");
}

/// Creates or replaces the configuration (server-side apply).
pub async fn register(client: &kube::Client, url: &str, ca_bundle: &str, failure_policy: &str) {
    let api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    api.patch(
        CONFIGURATION,
        &PatchParams::apply("webhook-test").force(),
        &Patch::Apply(&configuration(url, ca_bundle, failure_policy)),
    )
    .await
    .expect("apply MutatingWebhookConfiguration");
}
