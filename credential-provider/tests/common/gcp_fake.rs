//! tests/fakes/gcp_server.py (the GCE metadata server, STS and IAM
//! Credentials, written from Google's documented APIs) on 127.0.0.1, with
//! tests/data/gcp/scenario.json edited per test. The plugin is pointed at it
//! with GCE_METADATA_HOST and the endpoint flags: nothing reaches a real
//! Google address or the link-local metadata address.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use serde_json::Value;

pub fn data(name: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/gcp")).join(name)
}

/// The service-account JWT the scenario's STS accepts, or one it refuses.
pub fn subject_token(accepted: bool) -> String {
    let name = if accepted {
        "subject-token.jwt"
    } else {
        "refused-subject-token.jwt"
    };
    std::fs::read_to_string(data(name)).unwrap().trim().to_owned()
}

/// The fake, killed when dropped.
pub struct GcpFake {
    child: Child,
    pub port: u16,
    _scenario: tempfile::NamedTempFile,
}

impl GcpFake {
    pub fn start() -> Self {
        Self::with(|_| {})
    }

    /// The fake with the scenario after `edit`.
    pub fn with(edit: impl FnOnce(&mut Value)) -> Self {
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
        GcpFake {
            child,
            port,
            _scenario: file,
        }
    }

    /// `http://127.0.0.1:PORT/` (STS and IAM Credentials endpoints).
    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    /// GCE_METADATA_HOST's value for the fake.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// How many `METHOD /path` requests the fake has answered.
    pub fn requests(&self, key: &str) -> u64 {
        self.counts()[key].as_u64().unwrap_or(0)
    }

    pub fn counts(&self) -> Value {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(
            stream,
            "GET /__requests HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        let body = answer.split_once("\r\n\r\n").unwrap().1;
        serde_json::from_str(body).unwrap()
    }
}

impl Drop for GcpFake {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
