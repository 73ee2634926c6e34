//! Shared by the tests that run in real network namespaces. They need root
//! and iproute2 (`make test` runs as root); without them they fail, saying
//! so, rather than pass or skip unseen.
#![allow(dead_code)]

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

pub static NEXT: AtomicUsize = AtomicUsize::new(0);

/// A network namespace, deleted (with its interfaces) when dropped.
pub struct Netns {
    pub name: String,
}

impl Netns {
    pub fn new() -> Self {
        let name = format!("nih-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::SeqCst));
        sh(&format!("ip netns add {name}"));
        let ns = Self { name };
        ns.ip("link set lo up");
        ns
    }

    /// `ip -n NS ARGS`.
    pub fn ip(&self, args: &str) {
        sh(&format!("ip -n {} {args}", self.name));
    }

    /// What `ip -n NS ARGS` prints.
    pub fn ip_output(&self, args: &str) -> String {
        let out = Command::new("sh")
            .args(["-c", &format!("ip -n {} {args}", self.name)])
            .output()
            .expect("run ip");
        assert!(out.status.success(), "`ip {args}` failed");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// A veth pair inside the namespace, both ends up; `name` is the end we use.
    pub fn nic(&self, name: &str) {
        let peer = format!("{}p", &name[..name.len().min(13)]);
        self.ip(&format!("link add {name} type veth peer name {peer}"));
        self.ip(&format!("link set {peer} up"));
        self.ip(&format!("link set {name} up"));
    }

    pub fn sysctl(&self, setting: &str) {
        sh(&format!("ip netns exec {} sysctl -qw {setting}", self.name));
    }

    pub fn helper(&self, args: &[&str]) -> Output {
        self.helper_env(&[], args)
    }

    /// `helper` with these environment variables set (and no other
    /// `NODE_IP_HELPER_*` one the test runner may have).
    pub fn helper_env(&self, env: &[(&str, &str)], args: &[&str]) -> Output {
        let mut command = Command::new("ip");
        // A run that blocks (on a FIFO, say) fails the test instead of hanging it.
        command
            .args(["netns", "exec", &self.name, "timeout", "-k", "5", "60"])
            .arg(env!("CARGO_BIN_EXE_node-ip-helper"))
            .args(args);
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("NODE_IP_HELPER_") {
                command.env_remove(name);
            }
        }
        command.envs(env.iter().copied());
        let out = command.output().expect("run node-ip-helper in the namespace");
        Output {
            status: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// `detect` with JSON output: the chosen IPs, or the failure message.
    pub fn detect(&self, args: &[&str]) -> Result<Vec<String>, String> {
        let mut all = vec!["detect", "--output", "json"];
        all.extend(args);
        let out = self.helper(&all);
        if out.status != 0 {
            assert!(out.stdout.is_empty(), "nothing on stdout on failure");
            return Err(out.stderr);
        }
        let json: serde_json::Value = serde_json::from_str(&out.stdout).expect("JSON output");
        Ok(json["nodeIPs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|ip| ip.as_str().unwrap().to_owned())
            .collect())
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.name]).status();
    }
}

pub struct Output {
    pub status: i32,
    pub stdout: String,
    pub stderr: String,
}

/// `mkfifo PATH`.
pub fn mkfifo(path: &std::path::Path) {
    let status = Command::new("mkfifo").arg(path).status().expect("run mkfifo");
    assert!(status.success());
}

pub fn sh(command: &str) {
    let status = Command::new("sh").args(["-c", command]).status().expect("run sh");
    assert!(
        status.success(),
        "`{command}` failed: these tests need root and iproute2"
    );
}

/// A server running inside a namespace (the fake metadata server, moto, or
/// nothing at all), stopped when dropped.
pub struct Server {
    pub port: u16,
    running: Running,
}

enum Running {
    Fake(test_fakes::MetadataFake),
    Child(std::process::Child),
}

impl Server {
    /// A port with nothing listening (bound, then released).
    pub fn closed() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("true").spawn().expect("spawn true");
        Server {
            port,
            running: Running::Child(child),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Running::Child(child) = &mut self.running {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

pub fn workspace_root() -> std::path::PathBuf {
    std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

impl Netns {
    /// The fake metadata server (tests/fakes/metadata_server.py) with one
    /// scenario from tests/data/node-ip-helper/metadata/.
    pub fn fake_metadata(&self, scenario: &str) -> Server {
        self.fake_metadata_from(
            &workspace_root()
                .join("tests/data/node-ip-helper/metadata")
                .join(scenario),
        )
    }

    /// The fake metadata server with a scenario file anywhere.
    pub fn fake_metadata_from(&self, scenario: &std::path::Path) -> Server {
        self.fake_metadata_on(scenario, "127.0.0.1", 0)
    }

    /// The fake metadata server listening on `address`:`port` of the
    /// namespace (`port` 0: a free one), such as AWS's IPv6 endpoint.
    pub fn fake_metadata_on(&self, scenario: &std::path::Path, address: &str, port: u16) -> Server {
        let mut python = Command::new("ip");
        python
            .args(["netns", "exec", &self.name, "python3"])
            .env("METADATA_FAKE_ADDRESS", address)
            .env("METADATA_FAKE_PORT", port.to_string());
        let fake = test_fakes::MetadataFake::start_with(python, scenario);
        Server {
            port: fake.port,
            running: Running::Fake(fake),
        }
    }

    /// A listener on the namespace's loopback that takes connections (the
    /// kernel's backlog) and never answers.
    pub fn silent_listener(&self) -> Server {
        let port = 6000 + (std::process::id() % 1000) as u16 + NEXT.fetch_add(1, Ordering::SeqCst) as u16;
        let script = format!(
            "import socket, sys, time\ns = socket.socket()\ns.bind(('127.0.0.1', {port}))\ns.listen(64)\nprint('ready', flush=True)\ntime.sleep(120)\n"
        );
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.name, "python3", "-c", &script])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("start python3");
        let mut ready = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().expect("its stdout")),
            &mut ready,
        )
        .expect("read from python3");
        assert_eq!(ready.trim(), "ready", "the silent listener did not start");
        Server {
            port,
            running: Running::Child(child),
        }
    }

    /// moto's server (PyPI `moto[server]`, installed by `make tools`) on
    /// the namespace's loopback.
    pub fn moto(&self) -> Server {
        let moto = std::env::var_os("MOTO_SERVER")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| workspace_root().join(".cache/venv/bin/moto_server"));
        assert!(
            moto.exists(),
            "{} not found: run `make tools` (installs moto[server])",
            moto.display()
        );
        let port = 5000 + (std::process::id() % 1000) as u16 + NEXT.fetch_add(1, Ordering::SeqCst) as u16;
        let child = Command::new("ip")
            .args(["netns", "exec", &self.name])
            .arg(&moto)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start moto_server");
        let server = Server {
            port,
            running: Running::Child(child),
        };
        // moto takes a second or two to import; wait until it answers.
        for _ in 0..100 {
            let ready = Command::new("ip")
                .args(["netns", "exec", &self.name, "python3", "-c"])
                .arg(format!(
                    "import socket; socket.create_connection(('127.0.0.1', {port}), timeout=0.2)"
                ))
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ready {
                return server;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!("moto_server did not start on port {port}");
    }
}
