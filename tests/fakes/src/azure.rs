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

use std::path::PathBuf;

use super::{FakeKind, PyFake, call, read, workspace_root};

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

/// The Azure fake: `tests/fakes/azure_server.py` with `tests/data/azure/`;
/// its `exchange grant_type=G` counters count the registry's exchanges by
/// grant type, its `api-version=V GET /path` counters the api-versions sent.
pub struct Azure;

impl FakeKind for Azure {
    const SCRIPT: &'static str = "azure_server.py";
    const DATA: &'static str = "azure";
    const NOT_REQUESTS: &'static [&'static str] = &["exchange ", "api-version="];
}

/// `tests/fakes/azure_server.py` on 127.0.0.1: IMDS (`/metadata/…`), Entra
/// ID (`/{tenant}/oauth2/v2.0/token`), ARM (`/subscriptions/…`,
/// `/metadata/endpoints`) and a registry (`/v2/`, `/oauth2/exchange`) on one
/// port. Killed when dropped.
pub type AzureFake = PyFake<Azure>;

impl AzureFake {
    /// From now on, Entra ID accepts `token` as a client assertion for
    /// application `client_id` of `tenant` (besides the scenario's
    /// `assertions`): for tokens issued while the test runs, such as a
    /// kube-apiserver's service-account tokens.
    pub fn accept_assertion(&self, tenant: &str, client_id: &str, token: &str) {
        let url = self.assertions_url(tenant, client_id);
        let path = url.strip_prefix(&self.base()).expect("the fake's own URL");
        call(self.port, "POST", &format!("/{path}"), token);
    }

    /// The URL [`accept_assertion`](Self::accept_assertion) posts to (the
    /// token as the body), for a program that learns the tokens itself
    /// (`kubelet-credcheck keyring --announce-tokens`).
    pub fn assertions_url(&self, tenant: &str, client_id: &str) -> String {
        format!(
            "{}__entra/assertions?tenant={tenant}&client_id={client_id}",
            self.base()
        )
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpStream;

    use serde_json::Value;

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
    fn entra_accepts_an_assertion_announced_at_run_time() {
        let fake = AzureFake::start();
        let (tenant, client) = (
            "11111111-2222-4333-8444-555555555555",
            "c4c4c4c4-0000-4000-8000-000000000004",
        );
        let token = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJydW4tdGltZSJ9.c2ln";
        let exchange = |token: &str| {
            let body = format!(
                "grant_type=client_credentials&client_id={client}&scope=https://containerregistry.azure.net/.default&client_assertion_type=urn:ietf:params:oauth:client-assertion-type:jwt-bearer&client_assertion={token}"
            );
            send(
                fake.port,
                &format!(
                    "POST /{tenant}/oauth2/v2.0/token HTTP/1.0\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                ),
            )
        };
        let (status, body) = exchange(token);
        assert!(
            status.contains(" 400 ") && body.contains("AADSTS700016"),
            "{status} {body}"
        );
        fake.accept_assertion(tenant, client, token);
        let (status, body) = exchange(token);
        assert!(
            status.contains(" 200 ") && body.contains("assertion-token-1"),
            "{status} {body}"
        );
        let (status, body) = exchange("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJvdGhlciJ9.c2ln");
        assert!(
            status.contains(" 400 ") && body.contains("AADSTS700211"),
            "{status} {body}"
        );
        assert_eq!(
            fake.assertions_url(tenant, client),
            format!(
                "http://127.0.0.1:{}/__entra/assertions?tenant={tenant}&client_id={client}",
                fake.port
            )
        );
        // Announcing is not counted.
        assert_eq!(fake.requests(&format!("POST /{tenant}/oauth2/v2.0/token")), 3);
        assert_eq!(fake.all_requests(), 3);
    }

    #[test]
    fn the_federated_tokens_are_read_from_the_data() {
        let accepted = azure_federated_token(true);
        assert_ne!(accepted, azure_federated_token(false));
        assert_eq!(accepted.split('.').count(), 3, "a JWT");
    }
}
