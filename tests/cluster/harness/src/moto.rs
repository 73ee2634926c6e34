//! moto's server (AWS APIs) for the tests that need EC2, ECR or STS.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::process::{Proc, wait_tcp};
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
        // Port 0: moto binds a port of its own and reports it. A port picked
        // here and passed in could be taken by another test's server during
        // the second or two moto spends importing; the readiness check would
        // then have found that server, and ECR calls got its 404s.
        let args = vec!["-H".to_string(), "127.0.0.1".into(), "-p".into(), "0".into()];
        let mut proc = Proc::spawn("moto_server", &program, &args, dir.path().join("moto.log"), dir.path())
            .expect("start moto_server");
        let ready = proc
            .wait_for_log_line(LISTENING, Duration::from_secs(30))
            .and_then(|line| reported_port(&line))
            .and_then(|port| {
                wait_tcp(
                    SocketAddr::from(([127, 0, 0, 1], port)),
                    &mut proc,
                    Duration::from_secs(5),
                )?;
                Ok(port)
            });
        let port = match ready {
            Ok(port) => port,
            Err(e) => {
                let log = proc.tail(4000);
                proc.stop();
                panic!("moto_server: {e:#}\n{log}");
            }
        };
        Moto {
            proc,
            _dir: dir,
            url: format!("http://127.0.0.1:{port}"),
        }
    }
}

/// What werkzeug (moto's server) logs once it has bound its socket.
const LISTENING: &str = " * Running on http://127.0.0.1:";

/// The port in werkzeug's ` * Running on http://127.0.0.1:PORT` line.
fn reported_port(line: &str) -> anyhow::Result<u16> {
    let rest = line
        .split_once(LISTENING)
        .map(|(_, rest)| rest)
        .ok_or_else(|| anyhow::anyhow!("no address in {line:?}"))?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().map_err(|e| anyhow::anyhow!("port in {line:?}: {e}"))
}

impl Drop for Moto {
    fn drop(&mut self) {
        self.proc.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::reported_port;

    #[test]
    fn reads_the_port_werkzeug_reports() {
        assert_eq!(
            reported_port(" * Running on http://127.0.0.1:40123\n").expect("a port"),
            40123
        );
        assert!(reported_port(" * Running on http://127.0.0.1:\n").is_err());
        assert!(reported_port("Address already in use").is_err());
    }
}
