//! Starts tests/fakes/gcp_server.py on loopback with a scenario from
//! tests/data/gcp/ (edited per test), for the gcp_* tests, which include
//! this file with `#[path]`. Nothing here ever reaches a real Google
//! address: every client is pointed at the fake.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use cloud_access::SecureEndpoint;
use cloud_access::gcp::{GceMetadata, metadata_base};
use serde_json::Value;

pub fn data(name: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/gcp")).join(name)
}

/// The service-account JWT the scenario's STS accepts, and one it refuses.
pub fn subject_token(accepted: bool) -> String {
    let name = if accepted {
        "subject-token.jwt"
    } else {
        "refused-subject-token.jwt"
    };
    std::fs::read_to_string(data(name)).unwrap().trim().to_owned()
}

/// The fake, killed when dropped.
pub struct Fake {
    child: Child,
    pub port: u16,
    _scenario: tempfile::NamedTempFile,
}

impl Fake {
    /// The fake with tests/data/gcp/scenario.json as it is.
    pub fn start() -> Self {
        Self::with(|_| {})
    }

    /// The fake with the scenario after `edit`.
    pub fn with(edit: impl FnOnce(&mut Value)) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut scenario: Value =
            serde_json::from_str(&std::fs::read_to_string(data("scenario.json")).unwrap()).unwrap();
        edit(&mut scenario);
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), scenario.to_string()).unwrap();
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fakes/gcp_server.py");
        let mut child = Command::new("python3")
            .arg(script)
            .arg(file.path())
            .stdout(Stdio::piped())
            .spawn()
            .expect("run python3 tests/fakes/gcp_server.py");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("the fake printed {line:?}"));
        Fake {
            child,
            port,
            _scenario: file,
        }
    }

    /// `http://127.0.0.1:PORT/`.
    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    pub fn endpoint(&self, path: &str) -> SecureEndpoint {
        SecureEndpoint::parse("test endpoint", &format!("{}{path}", self.base())).unwrap()
    }

    /// A metadata client of the fake, found as `GCE_METADATA_HOST=127.0.0.1:PORT` would.
    pub fn metadata(&self) -> GceMetadata {
        let base = metadata_base(Some(&format!("127.0.0.1:{}", self.port))).unwrap();
        GceMetadata::new(base, Duration::from_secs(5)).unwrap()
    }

    /// How many `METHOD /path` requests the fake has answered.
    pub async fn requests(&self, key: &str) -> u64 {
        self.counts().await[key].as_u64().unwrap_or(0)
    }

    /// How many requests the fake has answered in all.
    pub async fn all_requests(&self) -> u64 {
        let counts = self.counts().await;
        counts.as_object().unwrap().values().filter_map(Value::as_u64).sum()
    }

    async fn counts(&self) -> Value {
        let client = reqwest::Client::builder().no_proxy().build().unwrap();
        let answer = client.get(format!("{}__requests", self.base())).send().await.unwrap();
        answer.json().await.unwrap()
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The suite's HTTP client, as the programs build it.
pub fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    cloud_access::http_client("cloud-access-tests", Duration::from_secs(10)).unwrap()
}
