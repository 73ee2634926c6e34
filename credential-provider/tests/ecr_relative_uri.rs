//! `AWS_CONTAINER_CREDENTIALS_RELATIVE_URI` (ECS task roles): the product
//! always resolves it against http://169.254.170.2, which is not loopback.
//! So the plugin runs in a network namespace the test creates, where that
//! address is on the namespace's own loopback interface: a fake container
//! credentials endpoint (written from the ECS task-role documentation)
//! answers there, and a fake ECR endpoint on the namespace's 127.0.0.1
//! records the call; the test then verifies that call's SigV4 signature and
//! session token with the ECR fake's own verifier (common/aws_fake.rs).
//! Needs root and iproute2, as node-ip-helper's namespace tests (`make test`
//! runs as root); without them it fails, saying so.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, Uri};
use common::aws_fake::{Known, sigv4};
use common::request;

const REGISTRY: &str = "123456789012.dkr.ecr.us-east-1.amazonaws.com";

/// Serves the credentials at 169.254.170.2:80 and ECR on 127.0.0.1 (both
/// inside the namespace); prints the ECR port, then one JSON line per
/// request it gets.
const FAKES: &str = r#"
import json, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

def say(record):
    print(json.dumps(record), flush=True)

class Credentials(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        say({"server": "credentials", "path": self.path})
        body = json.dumps({"AccessKeyId": "AKIDCONTAINER", "SecretAccessKey": "container-secret",
                           "Token": "container-session", "Expiration": "2099-01-01T00:00:00Z"}).encode()
        self.send_response(200 if self.path == "/v2/credentials/task-1" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

class Ecr(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        say({"server": "ecr", "method": "POST", "path": self.path,
             "headers": [[k, v] for k, v in self.headers.items()], "body": body.decode()})
        answer = json.dumps({"authorizationData": [{"authorizationToken": "QVdTOnJlbGF0aXZlLXVyaQ==",
                                                    "expiresAt": 4102444800}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-amz-json-1.1")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

credentials = ThreadingHTTPServer(("169.254.170.2", 80), Credentials)
ecr = ThreadingHTTPServer(("127.0.0.1", 0), Ecr)
threading.Thread(target=credentials.serve_forever, daemon=True).start()
print(ecr.server_address[1], flush=True)
ecr.serve_forever()
"#;

struct Netns(String);

impl Netns {
    fn new() -> Self {
        let name = format!("ccp-ecr-{}", std::process::id());
        let ok = |args: &[&str]| {
            let status = Command::new("ip").args(args).status().expect("run ip");
            assert!(status.success(), "ip {args:?} (needs root)");
        };
        ok(&["netns", "add", &name]);
        let ns = Self(name);
        ok(&["-n", &ns.0, "link", "set", "lo", "up"]);
        ok(&["-n", &ns.0, "addr", "add", "169.254.170.2/32", "dev", "lo"]);
        ns
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

#[test]
fn relative_uri_credentials_from_169_254_170_2_sign_the_ecr_call() {
    let ns = Netns::new();
    let mut fakes = Command::new("ip")
        .args(["netns", "exec", &ns.0, "python3", "-c", FAKES])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the fakes");
    let mut lines = BufReader::new(fakes.stdout.take().expect("stdout")).lines();
    let port = lines.next().expect("a port line").expect("read");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            let _ = tx.send(serde_json::from_str::<serde_json::Value>(&line).expect("json"));
        }
    });

    let mut plugin = Command::new("ip")
        .args([
            "netns",
            "exec",
            &ns.0,
            env!("CARGO_BIN_EXE_cloud-credential-provider"),
            "ecr",
        ])
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .env("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{port}"))
        .env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/v2/credentials/task-1")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_CONFIG_FILE", "/nonexistent")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the plugin in the namespace");
    use std::io::Write;
    plugin
        .stdin
        .take()
        .expect("stdin")
        .write_all(&request("v1", &format!("{REGISTRY}/app"), None))
        .expect("write the request");
    let out = plugin.wait_with_output().expect("plugin output");
    let _ = fakes.kill();
    let _ = fakes.wait();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let answer = common::response(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(answer["auth"][REGISTRY]["password"], "relative-uri");

    let seen: Vec<serde_json::Value> = rx.try_iter().collect();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[0]["server"], "credentials");
    assert_eq!(seen[0]["path"], "/v2/credentials/task-1");
    let call = &seen[1];
    assert_eq!(call["server"], "ecr");
    let mut headers = HeaderMap::new();
    for pair in call["headers"].as_array().expect("headers") {
        headers.append(
            HeaderName::from_bytes(pair[0].as_str().expect("name").to_ascii_lowercase().as_bytes()).expect("name"),
            HeaderValue::from_str(pair[1].as_str().expect("value")).expect("value"),
        );
    }
    let uri: Uri = call["path"].as_str().expect("path").parse().expect("uri");
    let body = call["body"].as_str().expect("body").as_bytes();
    let verify = |token: &str| {
        let known = [Known::new("AKIDCONTAINER", "container-secret", Some(token))];
        sigv4::verify(&Method::POST, &uri, &headers, body, &known)
    };
    assert_eq!(
        verify("container-session"),
        Ok(()),
        "signed with the task role's credentials and token"
    );
    // Negative twin: the same call judged against another session token.
    assert!(verify("container-sessioN").is_err());
}
