//! [`AzureFake`]: `azure_server.py` on 127.0.0.1, the fake of IMDS (managed
//! identity tokens, instance and load balancer metadata), Entra ID's token
//! endpoint, ARM `Disks.Get` and an ACR registry, with
//! `tests/data/azure/scenario.json` edited per test ([`AzureFake::with`]) or
//! any scenario ([`AzureFake::from_scenario`]).
//!
//! ```no_run
//! let fake = test_fakes::AzureFake::with(|s| s["entra"]["expires_in"] = 4.into());
//! // IMDS, Entra ID (authority host), ARM at fake.base(); the registry is fake.host().
//! assert_eq!(fake.requests("GET /metadata/identity/oauth2/token"), 0);
//! ```

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use super::{Process, python, read, scenario_file, script, workspace_root};

/// `tests/data/azure/<name>`.
pub fn azure_data(name: &str) -> PathBuf {
    workspace_root().join("tests/data/azure").join(name)
}

/// The federated service-account token the scenario's Entra ID accepts for
/// its workload-identity client, or (`accepted` false) one it refuses.
pub fn azure_federated_token(accepted: bool) -> String {
    let name = if accepted {
        "federated-token.jwt"
    } else {
        "refused-federated-token.jwt"
    };
    read(&azure_data(name)).trim().to_owned()
}

/// `tests/fakes/azure_server.py` on 127.0.0.1: IMDS (`/metadata/…`), Entra
/// ID (`/{tenant}/oauth2/v2.0/token`), ARM (`/subscriptions/…`,
/// `/metadata/endpoints`) and a registry (`/v2/`, `/oauth2/exchange`) on one
/// port. Killed when dropped.
pub struct AzureFake {
    _process: Process,
    /// The port it listens on, on 127.0.0.1.
    pub port: u16,
}

impl AzureFake {
    /// The fake with `tests/data/azure/scenario.json` as it is.
    pub fn start() -> Self {
        Self::with(|_| {})
    }

    /// The fake with `tests/data/azure/scenario.json` after `edit`.
    pub fn with(edit: impl FnOnce(&mut Value)) -> Self {
        let path = azure_data("scenario.json");
        let mut scenario: Value =
            serde_json::from_str(&read(&path)).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
        edit(&mut scenario);
        Self::from_scenario(&scenario)
    }

    /// The fake with `scenario` (the format `azure_server.py` describes).
    pub fn from_scenario(scenario: &Value) -> Self {
        let file = scenario_file(scenario);
        let path = file.path().to_owned();
        let (process, port) = Process::spawn(python(), &script("azure_server.py"), &path, Some(file));
        AzureFake {
            _process: process,
            port,
        }
    }

    /// `http://127.0.0.1:PORT/`: the base of IMDS, Entra ID and ARM.
    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    /// `127.0.0.1:PORT`: the fake as a registry name.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// How many `METHOD /path` requests (or `exchange grant_type=G`
    /// exchanges) the fake has answered (0 for none).
    pub fn requests(&self, key: &str) -> u64 {
        self.counts()[key].as_u64().unwrap_or(0)
    }

    /// How many requests the fake has answered in all.
    pub fn all_requests(&self) -> u64 {
        let counts = self.counts();
        let counts = counts.as_object().expect("/__requests answers an object");
        counts
            .iter()
            .filter(|(key, _)| !key.starts_with("exchange "))
            .filter_map(|(_, count)| count.as_u64())
            .sum()
    }

    /// `/__requests`: the counters so far.
    pub fn counts(&self) -> Value {
        let what = format!("GET {}__requests", self.base());
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap_or_else(|e| panic!("{what}: {e}"));
        let timeout = Some(Duration::from_secs(10));
        stream
            .set_read_timeout(timeout)
            .and_then(|()| stream.set_write_timeout(timeout))
            .and_then(|()| stream.write_all(b"GET /__requests HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n"))
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let mut answer = String::new();
        stream
            .read_to_string(&mut answer)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let (head, body) = answer
            .split_once("\r\n\r\n")
            .unwrap_or_else(|| panic!("{what}: not an HTTP answer: {answer:?}"));
        assert!(head.split_whitespace().nth(1) == Some("200"), "{what}: {head}");
        serde_json::from_str(body).unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {body:?}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `METHOD path` with `headers` and `body`: the status line and body.
    fn send(port: u16, request: &str) -> (String, String) {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        stream.write_all(request.as_bytes()).expect("write");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).expect("read");
        let (head, body) = answer.split_once("\r\n\r\n").expect("an HTTP answer");
        (head.lines().next().unwrap_or_default().to_owned(), body.to_owned())
    }

    #[test]
    fn the_azure_fake_serves_its_scenario_counts_requests_and_stops_when_dropped() {
        let fake =
            AzureFake::with(|s| s["imds"]["tree"]["metadata/instance"]["compute"]["location"] = "westeurope".into());
        assert_eq!(fake.base(), format!("http://127.0.0.1:{}/", fake.port));
        assert_eq!(fake.all_requests(), 0);
        let (status, body) = send(
            fake.port,
            "GET /metadata/instance/compute/location?api-version=2021-10-01&format=text HTTP/1.0\r\nMetadata: true\r\n\r\n",
        );
        assert!(status.contains(" 200 "), "{status}");
        assert_eq!(body, "westeurope");
        let (status, body) = send(
            fake.port,
            "GET /metadata/instance?api-version=2021-10-01 HTTP/1.0\r\n\r\n",
        );
        assert!(
            status.contains(" 400 ") && body.contains("metadata header"),
            "{status} {body}"
        );
        let (status, body) = send(
            fake.port,
            "GET /metadata/loadbalancer?api-version=2020-10-01&format=json HTTP/1.0\r\nMetadata: true\r\n\r\n",
        );
        assert!(status.contains(" 200 "), "{status}");
        let lb: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            lb["loadbalancer"]["publicIpAddresses"][0]["frontendIpAddress"],
            "20.50.1.2"
        );
        assert_eq!(fake.requests("GET /metadata/instance"), 1);
        assert_eq!(fake.all_requests(), 3);
        let port = fake.port;
        drop(fake);
        assert!(
            TcpStream::connect(("127.0.0.1", port)).is_err(),
            "the fake still listens on {port}"
        );
    }

    #[test]
    fn the_federated_tokens_are_read_from_the_data() {
        let accepted = azure_federated_token(true);
        assert_ne!(accepted, azure_federated_token(false));
        assert_eq!(accepted.split('.').count(), 3, "a JWT");
    }
}
