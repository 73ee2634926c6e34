//! Launchers for the fakes in `tests/fakes/`: Python 3 programs (standard
//! library only) written from the documented APIs of cloud services. Each
//! binds 127.0.0.1 on a free port and prints that port on its first line.
//!
//! - [`GcpFake`]: `gcp_server.py`, the GCE metadata server, Compute
//!   `disks`/`regionDisks`/`regions`, STS and IAM Credentials, with
//!   `tests/data/gcp/scenario.json` edited per test ([`GcpFake::with`]) or
//!   any scenario ([`GcpFake::from_scenario`]); [`GcpFake::requests`] reads
//!   its `/__requests` counters.
//! - [`AzureFake`] and [`OpenStackFake`] (modules [`azure`], [`openstack`]):
//!   like [`GcpFake`], each a [`PyFake`] of its kind, the one launcher of the
//!   scenario-driven fakes (their Python side shares `fakebase.py`).
//! - [`MetadataFake`]: `metadata_server.py`, one cloud's instance metadata
//!   service (AWS IMDSv2, GCE, Azure, OpenStack, DigitalOcean, Hetzner), with
//!   a scenario file ([`MetadataFake::start`]) or value
//!   ([`MetadataFake::from_json`]); [`MetadataFake::start_with`] runs it
//!   through another launcher, such as `ip netns exec NS python3`.
//!
//! ```no_run
//! let fake = test_fakes::GcpFake::with(|s| s["metadata"]["token"]["expires_in"] = 2.into());
//! // GCE_METADATA_HOST=fake.host(); endpoints at fake.base() ("http://127.0.0.1:PORT/")
//! assert_eq!(fake.requests("GET /computeMetadata/v1/instance/service-accounts/default/token"), 0);
//! ```
//!
//! Each fake is its own process, killed and reaped when its value drops
//! (also when the test panics); a scenario written for it is removed with it.
//! Clients reach a fake only through its loopback URL: nothing here names a
//! real cloud address. This crate depends on none of the suite's crates, so
//! any of them can dev-depend on it.
//!
//! Test support: a fake that cannot start, or an answer that is not what the
//! fake always answers, panics with a message saying which.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

pub mod azure;
pub use azure::AzureFake;
pub mod openstack;
pub use openstack::OpenStackFake;
pub mod pyfake;
pub use pyfake::{FakeKind, PyFake};

/// The workspace's root directory.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `tests/fakes/<name>`: one of the fakes' programs.
pub fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(name)
}

/// `tests/data/gcp/<name>`.
pub fn gcp_data(name: &str) -> PathBuf {
    workspace_root().join("tests/data/gcp").join(name)
}

/// The service-account JWT the STS of `tests/data/gcp/scenario.json`
/// accepts, or (`accepted` false) one it refuses.
pub fn gcp_subject_token(accepted: bool) -> String {
    let name = if accepted {
        "subject-token.jwt"
    } else {
        "refused-subject-token.jwt"
    };
    read(&gcp_data(name)).trim().to_owned()
}

/// `python3`: the launcher the fakes run under unless told otherwise.
pub fn python() -> Command {
    Command::new("python3")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// `value` in a temporary file, removed when the file value drops.
fn scenario_file(value: &Value) -> tempfile::NamedTempFile {
    let file = tempfile::Builder::new()
        .prefix("fake-scenario-")
        .suffix(".json")
        .tempfile()
        .expect("a temporary file for the fake's scenario");
    std::fs::write(file.path(), value.to_string())
        .unwrap_or_else(|e| panic!("cannot write the scenario to {}: {e}", file.path().display()));
    file
}

/// A fake's process, killed and reaped when dropped, with the scenario file
/// written for it (if any).
struct Process {
    child: Child,
    _scenario: Option<tempfile::NamedTempFile>,
}

impl Process {
    /// `launcher SCRIPT SCENARIO`, and the port it prints first.
    fn spawn(
        mut launcher: Command,
        script: &Path,
        scenario: &Path,
        written: Option<tempfile::NamedTempFile>,
    ) -> (Process, u16) {
        let what = format!("{} {}", script.display(), scenario.display());
        launcher
            .arg(script)
            .arg(scenario)
            // No `__pycache__` of `fakebase.py` left in the source tree.
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped());
        let mut child = launcher
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {launcher:?} (the fakes need Python 3): {e}"));
        let stdout = child.stdout.take().expect("the fake's stdout is piped");
        // From here on, a panic kills the child.
        let process = Process {
            child,
            _scenario: written,
        };
        let mut line = String::new();
        let read = BufReader::new(stdout).read_line(&mut line);
        match (read, line.trim().parse::<u16>()) {
            (Ok(_), Ok(port)) if port != 0 => (process, port),
            (read, _) => panic!("{what} printed {line:?} instead of its port ({read:?}); its stderr is above"),
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `METHOD path` on 127.0.0.1:`port` with `body`; the body of its 200
/// answer as JSON.
fn call(port: u16, method: &str, path: &str, body: &str) -> Value {
    let what = format!("{method} http://127.0.0.1:{port}{path}");
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap_or_else(|e| panic!("{what}: {e}"));
    let timeout = Some(Duration::from_secs(10));
    stream
        .set_read_timeout(timeout)
        .and_then(|()| stream.set_write_timeout(timeout))
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap_or_else(|e| panic!("{what}: {e}"));
    let mut answer = String::new();
    stream
        .read_to_string(&mut answer)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("{what}: not an HTTP answer: {answer:?}"));
    assert!(
        head.split_whitespace().nth(1) == Some("200"),
        "{what}: {head}\n\n{body}"
    );
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {body:?}"))
}

/// The GCP fake: `tests/fakes/gcp_server.py` with `tests/data/gcp/`.
pub struct Gcp;

impl FakeKind for Gcp {
    const SCRIPT: &'static str = "gcp_server.py";
    const DATA: &'static str = "gcp";
    const NOT_REQUESTS: &'static [&'static str] = &["connections", "max in flight"];
}

/// `tests/fakes/gcp_server.py` on 127.0.0.1: the GCE metadata server
/// (`/computeMetadata/v1/…`), Compute (`/compute/v1/…`), STS (`/v1/token`)
/// and IAM Credentials (`/v1/projects/-/serviceAccounts/…`) on one port.
/// Killed when dropped.
pub type GcpFake = PyFake<Gcp>;

impl GcpFake {
    /// From now on, STS accepts `token` as a subject token (besides the
    /// scenario's `sts.subject_tokens`): for tokens issued while the test
    /// runs, such as a kube-apiserver's service-account tokens.
    pub fn accept_subject_token(&self, token: &str) {
        call(self.port, "POST", "/__sts/subject_tokens", token);
    }

    /// The URL [`accept_subject_token`](Self::accept_subject_token) posts to
    /// (the token as the body), for a program that learns the tokens itself.
    pub fn subject_tokens_url(&self) -> String {
        format!("{}__sts/subject_tokens", self.base())
    }
}

/// `tests/fakes/metadata_server.py` on 127.0.0.1 of the namespace it runs
/// in: one cloud's instance metadata service, from a scenario
/// (`{"provider": "aws", "tree": {…}, "mode": …}`). Killed when dropped.
pub struct MetadataFake {
    _process: Process,
    /// The port it listens on, on 127.0.0.1.
    pub port: u16,
}

impl MetadataFake {
    /// The fake serving the scenario file `scenario`.
    pub fn start(scenario: &Path) -> Self {
        Self::start_with(python(), scenario)
    }

    /// The fake serving `scenario`.
    pub fn from_json(scenario: &Value) -> Self {
        let file = scenario_file(scenario);
        let path = file.path().to_owned();
        Self::spawn(python(), &path, Some(file))
    }

    /// The fake serving `scenario`, started as `launcher SCRIPT SCENARIO`:
    /// for example `ip netns exec NS python3`, to serve a network
    /// namespace's loopback.
    pub fn start_with(launcher: Command, scenario: &Path) -> Self {
        Self::spawn(launcher, scenario, None)
    }

    fn spawn(launcher: Command, scenario: &Path, written: Option<tempfile::NamedTempFile>) -> Self {
        let (process, port) = Process::spawn(launcher, &script("metadata_server.py"), scenario, written);
        MetadataFake {
            _process: process,
            port,
        }
    }

    /// `http://127.0.0.1:PORT/`.
    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `GET path` with `headers`: the status line and body.
    fn get(port: u16, path: &str, headers: &str) -> (String, String) {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        write!(stream, "GET {path} HTTP/1.0\r\n{headers}\r\n").expect("write");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).expect("read");
        let (head, body) = answer.split_once("\r\n\r\n").expect("an HTTP answer");
        (head.lines().next().unwrap_or_default().to_owned(), body.to_owned())
    }

    fn refused(port: u16) -> bool {
        TcpStream::connect(("127.0.0.1", port)).is_err()
    }

    #[test]
    fn the_gcp_fake_serves_its_scenario_counts_requests_and_stops_when_dropped() {
        let fake = GcpFake::with(|s| s["metadata"]["tree"]["project/project-id"] = json!("edited-project"));
        assert_eq!(fake.base(), format!("http://127.0.0.1:{}/", fake.port));
        assert_eq!(fake.host(), format!("127.0.0.1:{}", fake.port));
        assert_eq!(fake.all_requests(), 0);
        let (status, body) = get(
            fake.port,
            "/computeMetadata/v1/project/project-id",
            "Metadata-Flavor: Google\r\n",
        );
        assert!(status.contains(" 200 "), "{status}");
        assert_eq!(body, "edited-project");
        assert_eq!(fake.requests("GET /computeMetadata/v1/project/project-id"), 1);
        assert_eq!(fake.requests("GET /nothing"), 0);
        // Reading the counters is not counted.
        assert_eq!(fake.all_requests(), 1);
        let port = fake.port;
        drop(fake);
        assert!(refused(port), "the fake still listens on {port}");
    }

    #[test]
    fn the_metadata_fake_serves_a_scenario_value_or_file() {
        let scenario =
            json!({"provider": "gce", "tree": {"computeMetadata/v1/instance/hostname": "node-a.c.p.internal"}});
        let fake = MetadataFake::from_json(&scenario);
        assert_eq!(fake.base(), format!("http://127.0.0.1:{}/", fake.port));
        let (status, body) = get(
            fake.port,
            "/computeMetadata/v1/instance/hostname",
            "Metadata-Flavor: Google\r\n",
        );
        assert!(status.contains(" 200 "), "{status}");
        assert_eq!(body, "node-a.c.p.internal");
        let port = fake.port;
        drop(fake);
        assert!(refused(port), "the fake still listens on {port}");

        let file = scenario_file(&scenario);
        let fake = MetadataFake::start(file.path());
        let (status, _) = get(fake.port, "/computeMetadata/v1/instance/hostname", "");
        assert!(status.contains(" 403 "), "Metadata-Flavor is required: {status}");
    }

    /// The STS exchange of `subject` at the fake: its status line and body.
    fn exchange(fake: &GcpFake, subject: &str) -> (String, String) {
        let audience = "identitynamespace:demo-project.svc.id.goog:https://container.googleapis.com/v1/projects/demo-project/locations/us-central1/clusters/demo";
        let form = format!(
            "grant_type=urn:ietf:params:oauth:grant-type:token-exchange&requested_token_type=urn:ietf:params:oauth:token-type:access_token&subject_token_type=urn:ietf:params:oauth:token-type:jwt&scope=https://www.googleapis.com/auth/cloud-platform&audience={audience}&subject_token={subject}"
        );
        let mut stream = TcpStream::connect(("127.0.0.1", fake.port)).expect("connect");
        write!(
            stream,
            "POST /v1/token HTTP/1.0\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{form}",
            form.len()
        )
        .expect("write");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).expect("read");
        let (head, body) = answer.split_once("\r\n\r\n").expect("an HTTP answer");
        (head.lines().next().unwrap_or_default().to_owned(), body.to_owned())
    }

    #[test]
    fn sts_accepts_a_subject_token_announced_at_run_time() {
        let fake = GcpFake::with(|s| s["sts"]["subject_tokens"] = json!([]));
        let token = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhIn0.issued-while-the-test-runs";
        let (status, body) = exchange(&fake, token);
        assert!(
            status.contains(" 400 ") && body.contains("invalid_grant"),
            "{status} {body}"
        );
        fake.accept_subject_token(token);
        let (status, body) = exchange(&fake, token);
        assert!(status.contains(" 200 "), "{status} {body}");
        assert!(body.contains("ya29.federated-1"), "{body}");
        assert_eq!(fake.requests("POST /v1/token"), 2, "announcements are not counted");
        assert_eq!(
            fake.subject_tokens_url(),
            format!("http://127.0.0.1:{}/__sts/subject_tokens", fake.port)
        );
    }

    #[test]
    fn the_subject_tokens_are_read_from_the_data() {
        let accepted = gcp_subject_token(true);
        assert_ne!(accepted, gcp_subject_token(false));
        assert_eq!(accepted.split('.').count(), 3, "a JWT");
    }

    #[test]
    #[should_panic(expected = "instead of its port")]
    fn a_fake_that_prints_no_port_is_a_clear_failure() {
        let mut launcher = Command::new("sh");
        launcher.args(["-c", "echo not-a-port", "sh"]);
        MetadataFake::start_with(launcher, Path::new("/nonexistent"));
    }
}
