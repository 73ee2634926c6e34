//! moto's server (AWS APIs) for the tests that need EC2, ECR or STS.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::process::{Proc, free_port, wait_tcp};
use crate::workspace_root;

/// moto's server (AWS APIs; `make tools` installs it) on a free loopback
/// port, stopped (process group) when dropped.
pub struct Moto {
    proc: Proc,
    _dir: tempfile::TempDir,
    pub url: String,
}

impl Moto {
    /// `$MOTO_SERVER`, else `.cache/venv/bin/moto_server`.
    pub fn start() -> Moto {
        let program = std::env::var_os("MOTO_SERVER")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace_root().join(".cache/venv/bin/moto_server"));
        assert!(program.exists(), "{} not found: run `make tools`", program.display());
        let dir = tempfile::Builder::new()
            .prefix("cluster-harness-moto-")
            .tempdir()
            .expect("a temporary directory for moto");
        let (port, listener) = free_port().expect("a free loopback port for moto");
        drop(listener);
        let args = vec!["-H".to_string(), "127.0.0.1".into(), "-p".into(), port.to_string()];
        let mut proc = Proc::spawn("moto_server", &program, &args, dir.path().join("moto.log"), dir.path())
            .expect("start moto_server");
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        if let Err(e) = wait_tcp(addr, &mut proc, Duration::from_secs(30)) {
            let log = proc.tail(4000);
            proc.stop();
            panic!("moto_server: {e:#}\n{log}");
        }
        Moto {
            proc,
            _dir: dir,
            url: format!("http://127.0.0.1:{port}"),
        }
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        self.proc.stop();
    }
}
