//! The fake metadata server's own rules (tests/fakes/metadata_server.py),
//! which the metadata tests rely on to catch a request the real service
//! would refuse, and what node-ip-helper does when a service fails: an
//! Azure IMDS answering HTTP 500 (the fake's `server-error` mode) and
//! AWS's IPv6 IMDS endpoint, `http://[fd00:ec2::254]/`, given to the fake
//! on a veth of the test's own network namespace.
//!
//! Azure's rules are those of its Instance Metadata Service documentation
//! ("Versioning"): every request needs the header `Metadata: true` and an
//! `api-version` the service knows, else HTTP 400; the load balancer
//! endpoint exists from 2020-10-01 on.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;

use common::Netns;
use serde_json::Value;

fn scenario(name: &str) -> PathBuf {
    common::workspace_root()
        .join("tests/data/node-ip-helper/metadata")
        .join(name)
}

/// `GET path` with `headers` from 127.0.0.1:`port`: the status and the body.
fn get(port: u16, path: &str, headers: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to the fake");
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n{headers}\r\n").expect("send");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("read the answer");
    let (head, body) = answer.split_once("\r\n\r\n").expect("an HTTP answer");
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status");
    (status, body.to_owned())
}

/// On the host's loopback: no namespace needed.
#[test]
fn the_azure_fake_wants_the_metadata_header_and_a_known_api_version() {
    let fake = test_fakes::MetadataFake::start(&scenario("azure-instance-public-ip.json"));
    let port = fake.port;
    let header = "Metadata: true\r\n";
    let instance = "/metadata/instance?api-version=2021-10-01&format=json";
    let (status, body) = get(port, instance, header);
    assert_eq!(status, 200, "{body}");
    let json: Value = serde_json::from_str(&body).expect("the instance document");
    assert!(json["network"]["interface"].is_array(), "{body}");

    for headers in ["", "Metadata: false\r\n", "Metadata: True\r\n"] {
        let (status, body) = get(port, instance, headers);
        assert_eq!(status, 400, "{headers:?}: {body}");
        assert!(body.contains("Required metadata header not specified"), "{body}");
    }

    let (status, body) = get(port, "/metadata/instance?format=json", header);
    assert_eq!(status, 400, "{body}");
    let json: Value = serde_json::from_str(&body).expect("a JSON error");
    assert!(
        json["error"]
            .as_str()
            .expect("error")
            .contains("api-version was not specified"),
        "{body}"
    );
    assert_eq!(json["newest-versions"].as_array().map(Vec::len), Some(3), "{body}");
    for version in ["", "2099-01-01", "latest", "2021-10-01x"] {
        let (status, body) = get(port, &format!("/metadata/instance?api-version={version}"), header);
        assert_eq!(status, 400, "api-version={version}: {body}");
        assert!(body.contains("Bad request. api-version"), "{body}");
    }

    // The load balancer endpoint came with 2020-10-01.
    let (status, body) = get(port, "/metadata/loadbalancer?api-version=2019-06-01", header);
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("api-version is invalid"), "{body}");
    let (status, _) = get(port, "/metadata/instance?api-version=2019-06-01", header);
    assert_eq!(status, 200);
}

/// An Azure IMDS that answers HTTP 500: `detect`, `write` and `check` fail
/// at once (no retry of their own: the unit's `Restart=on-failure` retries),
/// naming the service, the URL and the status, and nothing is written.
/// Nor does `auto`: a failing service means a cloud whose addresses are
/// unknown for now, so the host's own addresses must not stand in for them.
#[test]
fn a_failing_azure_metadata_service_is_an_error_naming_it() {
    let ns = Netns::new();
    ns.nic("eth0");
    ns.ip("addr add 10.240.0.4/16 dev eth0");
    ns.ip("route add default via 10.240.0.1 dev eth0");
    let mut failing: Value =
        serde_json::from_str(&std::fs::read_to_string(scenario("azure.json")).expect("azure.json")).expect("JSON");
    failing["mode"] = "server-error".into();
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("azure-server-error.json");
    std::fs::write(&path, failing.to_string()).expect("write the scenario");
    let fake = ns.fake_metadata_from(&path);
    let url = format!("http://127.0.0.1:{}/", fake.port);
    let expected =
        format!("azure metadata service answered HTTP 500 for {url}metadata/instance?api-version=2021-10-01");

    let out = ns.helper(&["detect", "--source", "azure", "--metadata-endpoint", &url]);
    assert_eq!(out.status, 1, "{}", out.stdout);
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    assert!(out.stderr.contains(&expected), "{}", out.stderr);

    let env_file = dir.path().join("kubelet.env");
    let env = env_file.to_str().expect("UTF-8 path");
    let out = ns.helper(&[
        "write",
        "--env-file",
        env,
        "--source",
        "azure",
        "--metadata-endpoint",
        &url,
    ]);
    assert_eq!(out.status, 1, "{}", out.stderr);
    assert!(out.stderr.contains(&expected), "{}", out.stderr);
    assert!(!env_file.exists(), "nothing written when the service fails");

    let out = ns.helper(&[
        "check",
        "--node-ip",
        "10.240.0.4",
        "--source",
        "azure",
        "--metadata-endpoint",
        &url,
    ]);
    assert_ne!(out.status, 0, "{}", out.stdout);
    assert!(out.stderr.contains(&expected), "{}", out.stderr);

    let out = ns.helper(&["detect", "--source", "auto", "--metadata-endpoint", &url]);
    assert_eq!(out.status, 1, "{}", out.stdout);
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    assert!(
        out.stderr.contains("--source auto: no metadata service answered, and ")
            && out.stderr.contains("metadata service answered HTTP 500")
            && out.stderr.contains(
                "give --source local (for the unit: NODE_IP_HELPER_SOURCE=local in /etc/default/node-ip-helper)"
            ),
        "{}",
        out.stderr
    );
    let out = ns.helper(&[
        "write",
        "--env-file",
        env,
        "--source",
        "auto",
        "--metadata-endpoint",
        &url,
    ]);
    assert_eq!(out.status, 1, "{}", out.stderr);
    assert!(!env_file.exists(), "nothing written when auto meets a failing service");
}

/// With `--ip-family ipv6` and no `--metadata-endpoint`, the aws source asks
/// IMDS at its IPv6 address, [fd00:ec2::254]:80, which only the namespace's
/// eth0p holds here.
#[test]
fn aws_ipv6_only_asks_the_ipv6_imds_endpoint() {
    let ns = Netns::new();
    ns.nic("eth0");
    ns.ip("addr add 2a05:d018::99/64 dev eth0 nodad");
    ns.ip("addr add fd00:ec2::254/128 dev eth0p nodad");
    let _imds = ns.fake_metadata_on(&scenario("aws-ipv6-only.json"), "fd00:ec2::254", 80);
    let out = ns.helper(&["detect", "--source", "aws", "--ip-family", "ipv6", "--output", "json"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let json: Value = serde_json::from_str(&out.stdout).expect("JSON output");
    assert_eq!(json["source"], "aws");
    assert_eq!(json["nodeIPs"], serde_json::json!(["2a05:d018::99"]));
    assert_eq!(json["hostname"], Value::Null);
    assert!(
        json["cloudAddresses"]
            .as_array()
            .expect("cloudAddresses")
            .iter()
            .any(|a| a["address"] == "2a05:d018::99"),
        "{}",
        out.stdout
    );
}
