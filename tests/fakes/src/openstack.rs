//! [`OpenStackFake`]: `openstack_server.py` on 127.0.0.1, the fake of Keystone v3's
//! `POST /v3/auth/tokens` and Cinder v3's `GET /v3/{project}/volumes/{id}` (every
//! block-storage endpoint of its catalog on the one port, under its own path), with
//! `tests/data/openstack/scenario.json` edited per test ([`OpenStackFake::with`]) or
//! any scenario ([`OpenStackFake::from_scenario`]).
//!
//! ```no_run
//! let fake = test_fakes::OpenStackFake::with(|s| s["keystone"]["expires_in"] = 2.into());
//! // auth-url = fake.auth_url(); Cinder's endpoints come from the catalog.
//! assert_eq!(fake.requests(test_fakes::openstack::TOKENS), 0);
//! ```

use std::path::PathBuf;

use super::{FakeKind, PyFake, workspace_root};

/// The counter key of Keystone's token requests at [`OpenStackFake::auth_url`].
pub const TOKENS: &str = "POST /identity/v3/auth/tokens";
/// The project of the scenario's credentials.
pub const PROJECT: &str = "0123456789abcdef0123456789abcdef";

/// `tests/data/openstack/<name>`.
pub fn openstack_data(name: &str) -> PathBuf {
    workspace_root().join("tests/data/openstack").join(name)
}

/// The OpenStack fake: `tests/fakes/openstack_server.py` with
/// `tests/data/openstack/`; its `header OpenStack-API-Version=V` counters
/// count how often a header was sent.
pub struct OpenStack;

impl FakeKind for OpenStack {
    const SCRIPT: &'static str = "openstack_server.py";
    const DATA: &'static str = "openstack";
    const NOT_REQUESTS: &'static [&'static str] = &["header "];
}

/// `tests/fakes/openstack_server.py` on 127.0.0.1: Keystone (`…/v3/auth/tokens`) and
/// Cinder (the catalog's block-storage endpoints) on one port. Killed when dropped.
pub type OpenStackFake = PyFake<OpenStack>;

impl OpenStackFake {
    /// `https://127.0.0.1:PORT/`: the base of a fake started with a `tls` scenario
    /// (whose counters are then out of [`Self::requests`]' reach).
    pub fn tls_base(&self) -> String {
        format!("https://127.0.0.1:{}/", self.port)
    }

    /// `http://127.0.0.1:PORT/identity/v3`: Keystone, as `auth-url`.
    pub fn auth_url(&self) -> String {
        format!("{}identity/v3", self.base())
    }

    /// The counter key of Cinder's `GET` of `volume` under the endpoint path `prefix`
    /// (`r1-public/v3` for RegionOne's public endpoint).
    pub fn volume_get(prefix: &str, volume: &str) -> String {
        format!("GET /{prefix}/{PROJECT}/volumes/{volume}")
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpStream;

    use serde_json::Value;

    use super::*;

    /// `request` sent as is: the status line, the X-Subject-Token header and the body.
    fn send(port: u16, request: &str) -> (String, Option<String>, String) {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        stream.write_all(request.as_bytes()).expect("write");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).expect("read");
        let (head, body) = answer.split_once("\r\n\r\n").expect("an HTTP answer");
        let token = head
            .lines()
            .find_map(|l| l.strip_prefix("X-Subject-Token: "))
            .map(str::to_owned);
        (
            head.lines().next().unwrap_or_default().to_owned(),
            token,
            body.to_owned(),
        )
    }

    fn post_token(port: u16, body: &str) -> (String, Option<String>, String) {
        send(
            port,
            &format!(
                "POST /identity/v3/auth/tokens HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            ),
        )
    }

    #[test]
    fn keystone_and_cinder_answer_as_documented() {
        let fake = OpenStackFake::start();
        assert_eq!(fake.auth_url(), format!("http://127.0.0.1:{}/identity/v3", fake.port));
        let good = r#"{"auth": {"identity": {"methods": ["application_credential"], "application_credential": {"id": "7d3c5f0e8a1b4c2d9e6f0a1b2c3d4e5f", "secret": "appcred-secret-Zq8x-do-not-log"}}}}"#;
        let (status, token, body) = post_token(fake.port, good);
        assert!(status.contains(" 201 "), "{status} {body}");
        let token = token.expect("X-Subject-Token");
        let json: Value = serde_json::from_str(&body).expect("JSON");
        assert!(json["token"]["expires_at"].as_str().is_some_and(|t| t.ends_with('Z')));
        assert!(json["token"]["catalog"].as_array().is_some_and(|c| c.len() == 4));
        let (status, _, body) = post_token(fake.port, &good.replace("Zq8x", "wrong"));
        assert!(
            status.contains(" 401 ") && body.contains("requires authentication"),
            "{status} {body}"
        );

        let volume = "5a1c9e0e-1f6e-4d55-9a3e-3b0f4e0c7d11";
        let get = |token: &str, path: &str| {
            send(
                fake.port,
                &format!("GET {path} HTTP/1.0\r\nX-Auth-Token: {token}\r\nOpenStack-API-Version: volume 3.0\r\n\r\n"),
            )
        };
        let (status, _, body) = get(&token, &format!("/r1-public/v3/{PROJECT}/volumes/{volume}"));
        assert!(status.contains(" 200 ") && body.contains("nova-az1"), "{status} {body}");
        let (status, _, body) = get(&token, &format!("/r2-public/v3/{PROJECT}/volumes/{volume}"));
        assert!(
            status.contains(" 404 ") && body.contains("itemNotFound"),
            "{status} {body}"
        );
        let (status, _, _) = get("not-a-token", &format!("/r1-public/v3/{PROJECT}/volumes/{volume}"));
        assert!(status.contains(" 401 "), "{status}");
        assert_eq!(fake.requests(TOKENS), 2);
        assert_eq!(fake.requests(&OpenStackFake::volume_get("r1-public/v3", volume)), 2);
        assert_eq!(fake.requests("header OpenStack-API-Version=volume 3.0"), 2);
        assert_eq!(fake.all_requests(), 5);
    }
}
