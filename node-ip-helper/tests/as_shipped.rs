//! What a user runs as written, on a node: the shipped unit's command
//! (manifests/node-ip-helper/node-ip-helper.service, with its
//! `Environment=` and, as its `EnvironmentFile`, default.env) and every
//! command a `FIX:` line of `check --node` prints, pasted into a shell.
//!
//! A node is a network namespace of its own (eth0 with the cloud's address,
//! eth1 with the lowest-metric default route, so that kubelet's rule and
//! the cloud's list choose differently), with a cloud's metadata service
//! where clouds have it (the fake GCE one on 169.254.169.254:80 of the
//! namespace's loopback) or none, and `/run` and `/var/lib` bound to a
//! temporary directory in a mount namespace of the run's own, so that the
//! unit's paths are written as they are. Needs root, iproute2 and
//! util-linux's `unshare`, as the other namespace tests.

mod common;
mod systemd;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Netns, Output, Server};
use serde_json::{Value, json};
use systemd::Unit;

const NODE: &str = "node-a";
/// nic0's address in tests/data/node-ip-helper/metadata/gce.json: the CCM's first InternalIP.
const CLOUD_IP: &str = "10.132.0.7";
/// The address on the lowest-metric default route: kubelet's, and `--source local`'s, choice.
const LOCAL_IP: &str = "192.168.56.10";
const TOKEN: &str = "fake-node-token";

struct Node {
    ns: Netns,
    /// Holds the node's `run/` and `var-lib/`, and `bin/node-ip-helper`.
    root: tempfile::TempDir,
}

impl Node {
    fn new() -> Self {
        let ns = Netns::new();
        ns.nic("eth0");
        ns.ip(&format!("addr add {CLOUD_IP}/20 dev eth0"));
        ns.ip("route add default via 10.132.0.1 dev eth0 metric 100");
        ns.nic("eth1");
        ns.ip(&format!("addr add {LOCAL_IP}/24 dev eth1"));
        ns.ip("route add default via 192.168.56.1 dev eth1 metric 50");
        let root = tempfile::tempdir().expect("temporary directory");
        for dir in ["run", "var-lib", "bin"] {
            std::fs::create_dir(root.path().join(dir)).expect("mkdir");
        }
        std::os::unix::fs::symlink(
            env!("CARGO_BIN_EXE_node-ip-helper"),
            root.path().join("bin/node-ip-helper"),
        )
        .expect("symlink the binary");
        Node { ns, root }
    }

    /// GCE's metadata service where GCE has it (the other clouds too).
    fn gce_metadata(&self) -> Server {
        self.ns.ip("addr add 169.254.169.254/32 dev lo");
        self.ns.fake_metadata_on(
            &common::workspace_root().join("tests/data/node-ip-helper/metadata/gce.json"),
            "169.254.169.254",
            80,
        )
    }

    /// `argv` as root on the node, with no environment variable of ours but
    /// `env`, `node-ip-helper` first on the PATH.
    fn run(&self, env: &[(String, String)], argv: &[&str]) -> Output {
        let mut command = Command::new("ip");
        command
            .args([
                "netns",
                "exec",
                &self.ns.name,
                "unshare",
                "--mount",
                "sh",
                "-c",
                systemd::WITH_NODE_PATHS,
                "sh",
            ])
            .arg(self.root.path())
            .args(argv);
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("NODE_IP_HELPER_") {
                command.env_remove(name);
            }
        }
        let out = command
            .env_remove("KUBECONFIG")
            .envs(env.iter().map(|(name, value)| (name, value)))
            .output()
            .expect("run on the node");
        Output {
            status: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// `command` as a user pastes it into a root shell on the node.
    fn shell(&self, command: &str) -> Output {
        self.run(&[], &["sh", "-c", command])
    }

    /// The node's file at `path` (under /run or /var/lib), if it exists.
    fn file(&self, path: &str) -> Option<String> {
        let inside = match path.strip_prefix("/run/") {
            Some(rest) => self.root.path().join("run").join(rest),
            None => self
                .root
                .path()
                .join("var-lib")
                .join(path.strip_prefix("/var/lib/").expect("a path under /run or /var/lib")),
        };
        std::fs::read_to_string(inside).ok()
    }

    fn forget(&self) {
        for dir in ["run", "var-lib"] {
            let dir = self.root.path().join(dir);
            std::fs::remove_dir_all(&dir).expect("clear");
            std::fs::create_dir(&dir).expect("mkdir");
        }
    }
}

fn manifest(name: &str) -> String {
    std::fs::read_to_string(common::workspace_root().join("manifests/node-ip-helper").join(name))
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The shipped unit, parsed as systemd reads it (systemd/mod.rs).
fn shipped_unit() -> Unit {
    let text = manifest("node-ip-helper.service");
    let unit = Unit::parse(&text);
    assert_eq!(unit.exec_start[0], "/usr/local/bin/node-ip-helper", "{text}");
    assert_eq!(unit.environment_files, ["/etc/default/node-ip-helper"], "{text}");
    unit
}

/// The unit's command, run on `node` with `default_env` as
/// /etc/default/node-ip-helper; and how long it took.
fn start(unit: &Unit, node: &Node, default_env: &str) -> (Output, Duration) {
    let env = unit.environment_with(default_env);
    let mut argv: Vec<&str> = unit.exec_start.iter().map(String::as_str).collect();
    argv[0] = "node-ip-helper";
    let started = Instant::now();
    let out = node.run(&env, &argv);
    (out, started.elapsed())
}

/// kubelet's arguments as the unit wrote them for its drop-in.
fn node_ips(node: &Node) -> String {
    let env = node
        .file("/run/node-ip-helper/kubelet.env")
        .expect("the unit wrote /run/node-ip-helper/kubelet.env");
    env.lines()
        .find_map(|line| line.strip_prefix("NODE_IP_HELPER_NODE_IPS="))
        .unwrap_or_else(|| panic!("no NODE_IP_HELPER_NODE_IPS in {env}"))
        .to_owned()
}

/// On a cloud, the shipped unit takes the address the cloud controller
/// manager will accept, not kubelet's own pick; and default.env's
/// `NODE_IP_HELPER_SOURCE` example, set, is what it runs with.
#[test]
fn the_shipped_unit_takes_the_clouds_address() {
    let node = Node::new();
    let _gce = node.gce_metadata();
    let unit = shipped_unit();
    let default_env = manifest("default.env");

    let (out, _) = start(&unit, &node, &default_env);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(node_ips(&node), format!("'{CLOUD_IP}'"), "{}", out.stderr);
    assert!(node.file("/var/lib/node-ip-helper/choice.json").is_some());
    let local = node.run(
        &[],
        &["node-ip-helper", "detect", "--source", "local", "--output", "flags"],
    );
    assert_eq!(
        local.stdout,
        format!("--node-ip={LOCAL_IP}\n"),
        "kubelet's pick differs here"
    );

    let example = default_env
        .lines()
        .find(|line| line.starts_with("#NODE_IP_HELPER_SOURCE="))
        .expect("default.env documents NODE_IP_HELPER_SOURCE");
    assert_eq!(example, "#NODE_IP_HELPER_SOURCE=local");
    node.forget();
    let (out, _) = start(&unit, &node, &example[1..]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(
        node_ips(&node),
        format!("'{LOCAL_IP}'"),
        "default.env overrides the unit"
    );
}

/// On a host without a cloud the shipped unit writes what `--source local`
/// chooses, once the metadata services have not answered: a gateway that
/// drops what is sent to 169.254.169.254 (the usual case: it times out,
/// `--metadata-timeout` 2s), or an address there that refuses (at once).
#[test]
fn on_a_host_without_a_cloud_the_shipped_unit_takes_the_hosts_choice() {
    let node = Node::new();
    let unit = shipped_unit();
    let default_env = manifest("default.env");

    let (out, silent) = start(&unit, &node, &default_env);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(node_ips(&node), format!("'{LOCAL_IP}'"), "{}", out.stderr);
    assert!(silent < Duration::from_secs(6), "{silent:?}");

    node.forget();
    node.ns.ip("addr add 169.254.169.254/32 dev lo");
    let (out, refused) = start(&unit, &node, &default_env);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(node_ips(&node), format!("'{LOCAL_IP}'"), "{}", out.stderr);
    assert!(refused < Duration::from_secs(2), "{refused:?}");
    eprintln!("no metadata service: {silent:?} with a silent gateway, {refused:?} when refused");
}

/// The Kubernetes API's `GET /api/v1/nodes/{name}`: the Node, or a `Status`
/// with code 404; run in the node's namespace (the test's own threads
/// cannot listen there).
const FAKE_API_SERVER: &str = r#"
import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
node = json.load(open(sys.argv[1]))
class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass
    def do_GET(self):
        if self.path.split("?")[0] == "/api/v1/nodes/" + node["metadata"]["name"]:
            status, body = 200, node
        else:
            status, body = 404, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                 "message": "not found", "reason": "NotFound", "code": 404}
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
server = HTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"#;

struct ApiServer {
    child: std::process::Child,
    port: u16,
}

impl ApiServer {
    fn start(node: &Node, served: &Value, dir: &Path) -> Self {
        let file = dir.join("node.json");
        std::fs::write(&file, served.to_string()).expect("write the Node");
        let mut child = Command::new("ip")
            .args(["netns", "exec", &node.ns.name, "python3", "-c", FAKE_API_SERVER])
            .arg(&file)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the fake API server");
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().expect("stdout")),
            &mut line,
        )
        .expect("its port");
        let port = line.trim().parse().unwrap_or_else(|_| panic!("a port, not {line:?}"));
        ApiServer { child, port }
    }

    fn kubeconfig(&self, path: &Path) {
        std::fs::write(
            path,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: http://127.0.0.1:{}\n\
                 users:\n- name: kubelet\n  user:\n    token: {TOKEN}\n\
                 contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: kubelet\ncurrent-context: fake\n",
                self.port
            ),
        )
        .expect("write the kubeconfig");
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The Node as kubelet registers it with `--cloud-provider=external`.
fn registered(provided_ip: Option<&str>) -> Value {
    let mut node = json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": NODE, "annotations": {}},
        "spec": {"taints": [{"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"}]},
        "status": {"addresses": [{"type": "Hostname", "address": NODE}]},
    });
    if let Some(ip) = provided_ip {
        node["metadata"]["annotations"]["alpha.kubernetes.io/provided-node-ip"] = ip.into();
    }
    node
}

/// The `FIX:` line of a `check` output, if any.
fn fix_line(out: &Output) -> Option<String> {
    out.stdout
        .lines()
        .find_map(|line| line.strip_prefix("FIX: "))
        .map(str::to_owned)
}

/// The commands a line suggests: its `quoted` spans.
fn commands(line: &str) -> Vec<String> {
    line.split('`').skip(1).step_by(2).map(str::to_owned).collect()
}

/// Each way `check --node` finds a node stuck prints a FIX line; each
/// command in one runs as printed, pasted into a shell on the node, and
/// neither fails on its usage nor for want of an option (exit 0, or 2: a
/// verdict), nor leaves the user where they were; the commands those print
/// run as well.
#[test]
fn every_fix_line_runs_as_printed() {
    let node = Node::new();
    let _gce = node.gce_metadata();
    let dir = tempfile::tempdir().expect("temporary directory");
    // A directory with a space: the printed command must quote it.
    let kubeconfig_dir = dir.path().join("kube config");
    std::fs::create_dir(&kubeconfig_dir).expect("mkdir");
    let kubeconfig = kubeconfig_dir.join("kubelet.conf");
    let kubeconfig_arg = kubeconfig.to_str().expect("UTF-8 path");
    let no_addresses = dir.path().join("none.json");
    std::fs::write(&no_addresses, "[]").expect("write");
    let no_addresses = no_addresses.to_str().expect("UTF-8 path");

    let auto: &[&str] = &["--source", "auto"];
    let with_provider_id = |id: &str| {
        let mut node = registered(Some(CLOUD_IP));
        node["spec"]["providerID"] = id.into();
        node
    };
    let mut renamed = registered(Some(CLOUD_IP));
    renamed["metadata"]["name"] = "worker-1".into();
    let cases: [(&str, Value, &[&str]); 9] = [
        ("an IP the cloud does not list", registered(Some(LOCAL_IP)), auto),
        ("the cloud's IP", registered(Some(CLOUD_IP)), auto),
        ("no cloud addresses given", registered(Some(LOCAL_IP)), &[]),
        ("an invalid annotation", registered(Some("10.132.0.7, fd00::1")), auto),
        (
            "a cloud with no addresses",
            registered(Some(CLOUD_IP)),
            &["--cloud-addresses", no_addresses],
        ),
        ("no annotation", registered(None), auto),
        // The identity: gce.json is node-a in europe-west1-b of my-project.
        (
            "another instance's provider ID",
            with_provider_id("gce://my-project/europe-west1-c/node-a"),
            auto,
        ),
        (
            "a provider ID the CCM cannot parse",
            with_provider_id("gce:///node-a"),
            auto,
        ),
        ("a name the cloud does not know", renamed, auto),
    ];
    let mut fixes = std::collections::BTreeSet::new();
    let mut ran = Vec::new();
    let mut kubectl = Vec::new();
    for (case, served, extra) in cases {
        let api = ApiServer::start(&node, &served, dir.path());
        api.kubeconfig(&kubeconfig);
        let name = served["metadata"]["name"].as_str().expect("a name");
        let mut argv = vec![
            "node-ip-helper",
            "check",
            "--node",
            name,
            "--kubeconfig",
            kubeconfig_arg,
        ];
        argv.extend(extra);
        let out = node.run(&[], &argv);
        assert_eq!(out.status, 2, "{case}: stuck\n{}{}", out.stdout, out.stderr);
        let fix = fix_line(&out).unwrap_or_else(|| panic!("{case}: no FIX line in {}", out.stdout));
        if case == "a cloud with no addresses" {
            assert!(fix.contains("spec.providerID"), "{case}: {fix}");
        }
        fixes.insert(fix.clone());
        let mut pending = vec![(case.to_owned(), fix)];
        while let Some((from, fix)) = pending.pop() {
            for command in commands(&fix) {
                if command == "systemctl restart node-ip-helper kubelet" {
                    // No systemd here: the unit it restarts runs as the
                    // shipped-unit tests above (and units.rs) show.
                    continue;
                }
                if command.starts_with("kubectl ") {
                    // Changes to the Node need a real API server: the
                    // cluster tier's node_ip_helper_real.rs runs them.
                    kubectl.push(command);
                    continue;
                }
                assert!(
                    command.starts_with("node-ip-helper "),
                    "{from}: a suggested command this test cannot run: {command}"
                );
                assert!(ran.len() < 20, "suggestions lead to suggestions without end: {ran:?}");
                let out = node.shell(&command);
                assert!(
                    out.status == 0 || (out.status == 2 && command.starts_with("node-ip-helper check ")),
                    "{from}: `{command}` failed ({}): {}{}",
                    out.status,
                    out.stdout,
                    out.stderr
                );
                if command.starts_with("node-ip-helper detect ") {
                    assert!(out.stdout.contains(CLOUD_IP), "{from}: `{command}`: {}", out.stdout);
                }
                if let Some(next) = fix_line(&out) {
                    assert_ne!(next, fix, "{from}: `{command}` only repeats its suggestion");
                    pending.push((format!("{from}, then `{command}`"), next));
                }
                ran.push(command);
            }
        }
    }
    eprintln!("ran: {ran:#?}");
    assert!(
        ran.iter().any(|c| c.starts_with("node-ip-helper check "))
            && ran.iter().any(|c| c.starts_with("node-ip-helper detect ")),
        "{ran:?}"
    );
    // Every FIX the diagnosis can give was met (stuck_elsewhere's twice),
    // and the identity's two with this instance's provider ID known.
    let live = include_str!("../src/live.rs");
    let code = live.split("#[cfg(test)]").next().expect("code");
    let sites =
        code.matches("fix: ").count() - code.matches("fix: String").count() - code.matches("fix: mismatch.fix").count();
    assert_eq!(fixes.len(), sites + 2, "{fixes:#?}");
    assert_eq!(
        kubectl,
        [
            "kubectl delete node node-a",
            "kubectl delete node node-a",
            r#"kubectl patch node worker-1 --type merge -p '{"spec":{"providerID":"gce://my-project/europe-west1-b/node-a"}}'"#,
        ],
        "{fixes:#?}"
    );
}
