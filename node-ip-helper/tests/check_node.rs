//! `check --node NAME --source auto` as the docs' first debugging step runs
//! it on a node: the Node from the API server, the cloud's addresses from
//! whichever metadata service answers (here the fake GCE one, on the host's
//! loopback, for all six: the others' paths are not there), and the CCM's
//! rule applied to them.
//!
//! The API server is a fake in this file that serves one Node as the
//! Kubernetes API documents it (`GET /api/v1/nodes/{name}`: the Node, or a
//! `Status` with reason NotFound and code 404). The cluster tier checks
//! `check --node` against a real kube-apiserver, with a file of addresses.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::process::Command;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

const NODE: &str = "node-a";
const TOKEN: &str = "fake-node-token";

/// The fake API server: the Node it serves (replaceable) and the requests
/// it saw (request line and Authorization header).
struct FakeApiServer {
    port: u16,
    node: Arc<Mutex<Value>>,
    requests: Arc<Mutex<Vec<(String, String)>>>,
}

impl FakeApiServer {
    fn start(node: Value) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("address").port();
        let node = Arc::new(Mutex::new(node));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (served, seen) = (node.clone(), requests.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().expect("clone the stream"));
                let mut line = String::new();
                if reader.read_line(&mut line).is_err() {
                    continue;
                }
                let mut authorization = String::new();
                loop {
                    let mut header = String::new();
                    if reader.read_line(&mut header).is_err() || header.trim().is_empty() {
                        break;
                    }
                    if let Some((name, value)) = header.split_once(':')
                        && name.eq_ignore_ascii_case("authorization")
                    {
                        authorization = value.trim().to_owned();
                    }
                }
                let path = line.split_whitespace().nth(1).unwrap_or_default().to_owned();
                seen.lock().expect("lock").push((line.trim().to_owned(), authorization));
                let node = served.lock().expect("lock").clone();
                let name = node["metadata"]["name"].as_str().unwrap_or(NODE).to_owned();
                let (status, body) = if path.split('?').next() == Some(&format!("/api/v1/nodes/{name}")) {
                    ("200 OK", node)
                } else {
                    let name = path.rsplit('/').next().unwrap_or_default().to_owned();
                    (
                        "404 Not Found",
                        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                               "message": format!("nodes \"{name}\" not found"), "reason": "NotFound",
                               "details": {"name": name, "kind": "nodes"}, "code": 404}),
                    )
                };
                let body = body.to_string();
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        FakeApiServer { port, node, requests }
    }

    fn kubeconfig(&self, dir: &std::path::Path) -> std::path::PathBuf {
        let path = dir.join("kubelet.conf");
        std::fs::write(
            &path,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: http://127.0.0.1:{}\n\
                 users:\n- name: kubelet\n  user:\n    token: {TOKEN}\n\
                 contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: kubelet\ncurrent-context: fake\n",
                self.port
            ),
        )
        .expect("write the kubeconfig");
        path
    }
}

/// The Node as kubelet registers it with `--cloud-provider=external`.
fn registered(provided_ip: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": NODE,
            "annotations": {"alpha.kubernetes.io/provided-node-ip": provided_ip},
        },
        "spec": {"taints": [{"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"}]},
        "status": {"addresses": [{"type": "Hostname", "address": NODE}]},
    })
}

fn check(kubeconfig: &std::path::Path, metadata: &str, extra: &[&str]) -> (i32, String, String) {
    let out = Command::new("timeout")
        .args(["-k", "5", "60"])
        .arg(env!("CARGO_BIN_EXE_node-ip-helper"))
        .args([
            "check",
            "--node",
            NODE,
            "--source",
            "auto",
            "--metadata-endpoint",
            metadata,
        ])
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(extra)
        .env_remove("KUBECONFIG")
        .output()
        .expect("run node-ip-helper");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn check_node_with_source_auto_applies_the_answering_clouds_addresses() {
    let api = FakeApiServer::start(registered("192.168.56.10"));
    let dir = tempfile::tempdir().expect("temporary directory");
    let kubeconfig = api.kubeconfig(dir.path());
    let gce = test_fakes::MetadataFake::start(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/node-ip-helper/metadata/gce.json"),
    );
    let metadata = gce.base();

    // kubelet announced an address GCE does not list: stuck, and the fix
    // names GCE's first internal address.
    let (status, stdout, stderr) = check(&kubeconfig, &metadata, &[]);
    assert_eq!(status, 2, "{stdout}{stderr}");
    assert!(
        stdout.contains("Node node-a: provided-node-ip 192.168.56.10"),
        "{stdout}"
    );
    assert!(
        stdout.contains("STUCK: kubelet announced alpha.kubernetes.io/provided-node-ip=192.168.56.10, but 192.168.56.10 is not among the cloud's addresses"),
        "{stdout}"
    );
    assert!(
        stdout.contains("FIX: restart kubelet with --node-ip set to one of the cloud's addresses (10.132.0.7"),
        "{stdout}"
    );
    let requests = api.requests.lock().expect("lock").clone();
    assert_eq!(
        requests,
        [(format!("GET /api/v1/nodes/{NODE} HTTP/1.1"), format!("Bearer {TOKEN}"))]
    );

    // kubelet restarted with GCE's address: the IP is no longer the reason.
    *api.node.lock().expect("lock") = registered("10.132.0.7");
    let (status, stdout, stderr) = check(&kubeconfig, &metadata, &["--output", "json"]);
    assert_eq!(status, 2, "{stdout}{stderr}");
    let report: Value = serde_json::from_str(&stdout).expect("JSON report");
    assert_eq!(report["diagnosis"]["verdict"], "stuck", "{stdout}");
    assert!(
        report["diagnosis"]["reason"]
            .as_str()
            .expect("reason")
            .contains("the node IP is not the problem"),
        "{stdout}"
    );

    // No metadata service answers: refused, as docs/node-ip-helper.md says.
    drop(gce);
    let (status, stdout, stderr) = check(&kubeconfig, &metadata, &["--metadata-timeout", "300ms"]);
    assert_eq!(status, 1, "could not check: {stdout}");
    assert!(stdout.is_empty(), "{stdout}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(
        stderr.starts_with(&format!(
            "node-ip-helper: --source auto: no metadata service answered at {metadata} (aws: connection refused, gce: connection refused"
        )),
        "{stderr}"
    );
    // The fix: on the node itself, or the cloud's addresses from a file.
    assert!(
        stderr.contains("run this on the node itself, or give the instance's addresses as the cloud reports them with --cloud-addresses FILE instead of --source"),
        "{stderr}"
    );
}

/// With no kubeconfig anywhere (no --kubeconfig, $KUBECONFIG or
/// ~/.kube/config) and not in a pod, the error says what to give on a node,
/// not kube's "failed to read an incluster environment variable".
#[test]
fn check_node_without_a_kubeconfig_suggests_kubelets() {
    let home = tempfile::tempdir().expect("temporary directory");
    let out = Command::new("timeout")
        .args(["-k", "5", "60"])
        .arg(env!("CARGO_BIN_EXE_node-ip-helper"))
        .args(["check", "--node", NODE])
        .env_remove("KUBECONFIG")
        .env_remove("NODE_IP_HELPER_KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .env("HOME", home.path())
        .output()
        .expect("run node-ip-helper");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "could not check: {stderr}");
    assert!(out.stdout.is_empty());
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(
        stderr.starts_with("node-ip-helper: check --node: no kubeconfig"),
        "{stderr}"
    );
    assert!(stderr.contains("--kubeconfig /etc/kubernetes/kubelet.conf"), "{stderr}");
    assert!(!stderr.contains("incluster"), "{stderr}");
}

/// Against an API server that is not there (a loopback port nothing listens
/// on), one line naming the server and the cause, and exit 1 (could not
/// check): not kube's own `ERROR failed with error client error (Connect)`
/// line as well, nor a bare `ServiceError`.
#[test]
fn check_node_against_a_dead_apiserver_names_it_in_one_line() {
    let port = TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("address")
        .port();
    let dir = tempfile::tempdir().expect("temporary directory");
    let kubeconfig = FakeApiServer {
        port,
        node: Arc::default(),
        requests: Arc::default(),
    }
    .kubeconfig(dir.path());
    let (status, stderr) = check_alone(&kubeconfig, &[]);
    assert_eq!(status, 1, "could not check: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(
        stderr.starts_with(&format!(
            "node-ip-helper: cannot read Node {NODE} from http://127.0.0.1:{port}: connection refused"
        )),
        "{stderr}"
    );
    assert!(stderr.contains("--kubeconfig"), "the fix: {stderr}");
}

/// An API server that takes the connection and never answers: timed out
/// after --request-timeout, in one line naming it.
#[test]
fn check_node_against_a_silent_apiserver_times_out_in_one_line() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    // Accepted and held open, never answered.
    let held = std::thread::spawn(move || listener.accept().map(|(stream, _)| stream));
    let dir = tempfile::tempdir().expect("temporary directory");
    let kubeconfig = FakeApiServer {
        port,
        node: Arc::default(),
        requests: Arc::default(),
    }
    .kubeconfig(dir.path());
    let started = std::time::Instant::now();
    let (status, stderr) = check_alone(&kubeconfig, &["--request-timeout", "500ms"]);
    let took = started.elapsed();
    assert_eq!(status, 1, "could not check: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(
        stderr.starts_with(&format!(
            "node-ip-helper: cannot read Node {NODE} from http://127.0.0.1:{port}: timed out: no complete answer within --request-timeout 500ms"
        )),
        "{stderr}"
    );
    assert!(took < std::time::Duration::from_secs(5), "{took:?}");
    drop(held);
}

/// `check --node NODE --kubeconfig FILE EXTRA` at the default log level:
/// the exit status and stderr (stdout must be empty).
fn check_alone(kubeconfig: &std::path::Path, extra: &[&str]) -> (i32, String) {
    let out = Command::new("timeout")
        .args(["-k", "5", "60"])
        .arg(env!("CARGO_BIN_EXE_node-ip-helper"))
        .args(["check", "--node", NODE, "--kubeconfig"])
        .arg(kubeconfig)
        .args(extra)
        .env_remove("KUBECONFIG")
        .env_remove("NODE_IP_HELPER_LOG_LEVEL")
        .output()
        .expect("run node-ip-helper");
    assert!(out.stdout.is_empty(), "nothing on stdout");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// An answer of the API server speaks for it: a missing Node is named as
/// such (the server is named only when it was not reached).
#[test]
fn a_missing_node_is_named_as_such() {
    let api = FakeApiServer::start(registered("10.132.0.7"));
    let dir = tempfile::tempdir().expect("temporary directory");
    let kubeconfig = api.kubeconfig(dir.path());
    let out = Command::new("timeout")
        .args(["-k", "5", "60"])
        .arg(env!("CARGO_BIN_EXE_node-ip-helper"))
        .args(["check", "--node", "node-z", "--kubeconfig"])
        .arg(&kubeconfig)
        .env_remove("KUBECONFIG")
        .env_remove("NODE_IP_HELPER_LOG_LEVEL")
        .output()
        .expect("run node-ip-helper");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "could not check: {stderr}");
    assert_eq!(
        stderr,
        "node-ip-helper: cannot read Node node-z: no such Node: has kubelet registered it?\n"
    );
}

/// AWS's CCM finds a Node without a provider ID by EC2's `PrivateDnsName`;
/// under a custom DHCP options domain IMDS's `local-hostname` differs from
/// it. A Node named after the PrivateDnsName (moto's instance, signatures
/// verified) is found when `check` may ask EC2 (DescribeInstances); without
/// credentials the verdict says the names are IMDS's and what is needed.
#[test]
fn aws_names_are_ec2s_private_dns_name() {
    let moto = cluster_harness::Moto::start_authenticated();
    let keys = moto.auth().user.clone();
    let (instance_id, private_dns) = moto.run_instance("us-east-1");
    let name = private_dns.to_lowercase();
    let tree = json!({
        "latest/meta-data/instance-id": instance_id,
        "latest/meta-data/local-ipv4": "10.0.1.25",
        "latest/meta-data/local-hostname": "node-a.corp.example.com",
        "latest/meta-data/placement/region": "us-east-1",
        "latest/meta-data/placement/availability-zone": "us-east-1a",
    });
    let fake = test_fakes::MetadataFake::from_json(&json!({"provider": "aws", "tree": tree}));
    let mut node = registered("10.0.1.25");
    node["metadata"]["name"] = json!(name);
    let api = FakeApiServer::start(node);
    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = api.kubeconfig(dir.path());
    let run = |extra: &[(&str, &str)]| {
        let out = Command::new(env!("CARGO_BIN_EXE_node-ip-helper"))
            .args([
                "check",
                "--node",
                &name,
                "--source",
                "aws",
                "--metadata-endpoint",
                &fake.base(),
            ])
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .env_remove("KUBECONFIG")
            .env("AWS_ENDPOINT_URL", &moto.url)
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env_remove("AWS_ACCESS_KEY_ID")
            .env_remove("AWS_SECRET_ACCESS_KEY")
            .envs(extra.iter().copied())
            .output()
            .expect("run node-ip-helper");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (status, stdout) = run(&[
        ("AWS_ACCESS_KEY_ID", &keys.access_key_id),
        ("AWS_SECRET_ACCESS_KEY", &keys.secret_access_key),
    ]);
    // Found by its name: what is left is the CCM itself (the fake has none).
    assert!(!stdout.contains("looks the instance up by the node's name"), "{stdout}");
    assert!(
        stdout.contains("FIX: check that the cloud controller manager runs"),
        "{stdout}"
    );
    assert_eq!(status, 2, "{stdout}");
    // Without credentials: only IMDS's names, and the verdict says so.
    let (status, stdout) = run(&[]);
    assert_eq!(status, 2, "{stdout}");
    assert!(
        stdout.contains(&format!(
            "found only as node-a.corp.example.com, {instance_id} (IMDS's local-hostname: EC2's PrivateDnsName, which the CCM compares, was not read"
        )),
        "{stdout}"
    );
    assert!(stdout.contains("ec2:DescribeInstances"), "{stdout}");
}

/// Before kubelet starts: `check --node-ip` with the --provider-id or node
/// name kubelet will register says whether the CCM finds this instance by
/// them (GCE's metadata fake on loopback: instance node-a in
/// my-project/europe-west1-b), and the fix is kubelet's flags.
#[test]
fn check_before_registration_judges_the_provider_id_and_name() {
    let gce = test_fakes::MetadataFake::start(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/node-ip-helper/metadata/gce.json"),
    );
    let run = |extra: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_node-ip-helper"))
            .args([
                "check",
                "--node-ip",
                "10.132.0.7",
                "--source",
                "gce",
                "--metadata-endpoint",
                &gce.base(),
            ])
            .args(extra)
            .output()
            .expect("run node-ip-helper");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (status, stdout, stderr) = run(&["--provider-id", "gce://my-project/europe-west1-b/node-a"]);
    assert_eq!(status, 0, "{stdout}{stderr}");
    assert!(
        stdout.ends_with(
            "OK: the cloud controller manager finds this instance by --provider-id gce://my-project/europe-west1-b/node-a\n"
        ),
        "{stdout}"
    );
    let (status, stdout, _) = run(&["--provider-id", "gce://my-project/europe-west1-c/node-a"]);
    assert_eq!(status, 2, "{stdout}");
    assert!(
        stdout.contains(
            "STUCK: spec.providerID is gce://my-project/europe-west1-c/node-a, which names another gce instance"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("FIX: start kubelet with --provider-id=gce://my-project/europe-west1-b/node-a"),
        "{stdout}"
    );
    // A name, from the variable; kubelet lowercases it.
    let out = Command::new(env!("CARGO_BIN_EXE_node-ip-helper"))
        .args([
            "check",
            "--node-ip",
            "10.132.0.7",
            "--source",
            "gce",
            "--metadata-endpoint",
            &gce.base(),
        ])
        .env("NODE_IP_HELPER_CHECK_NODE_NAME", "Node-A")
        .output()
        .expect("run node-ip-helper");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    let (status, stdout, _) = run(&["--node-name", "worker-1", "--output", "json"]);
    assert_eq!(status, 2, "{stdout}");
    let report: Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(report["identity"]["by"], "the node name worker-1");
    assert!(
        report["identity"]["mismatch"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("found only as node-a")),
        "{report}"
    );
    // Without --source there is no instance to judge them against.
    let out = Command::new(env!("CARGO_BIN_EXE_node-ip-helper"))
        .args(["check", "--node-ip", "10.132.0.7", "--provider-id", "gce://p/z/n"])
        .output()
        .expect("run node-ip-helper");
    assert_ne!(out.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--source"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
