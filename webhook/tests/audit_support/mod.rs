//! A small fake kube-apiserver on loopback for `audit`, written from the Kubernetes API
//! conventions: `GET /api/v1/persistentvolumes` with `limit` and `continue` answers a
//! `PersistentVolumeList` (at most `limit` items, `metadata.continue` while more
//! remain), `PATCH /api/v1/persistentvolumes/NAME` takes only
//! `application/merge-patch+json`, a request without the bearer token gets a `401`
//! `Status`, an unknown path a `404` `Status`. Each test gives it a [`Behaviour`] that
//! answers every request: [`Behaviour::cluster`] is the honest apiserver, the others are
//! hostile (never answer, drip, endless, repeated tokens, echoing statuses). Plain
//! HTTP, one request per connection (`Connection: close`), a thread per connection.
#![allow(dead_code)] // each test file uses a different subset

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The bearer token every kubeconfig of these tests carries; the fake refuses others.
pub const TOKEN: &str = "audit-test-token-0123456789abcdefghij";

/// One request as the fake read it.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    /// The path, without the query.
    pub path: String,
    /// The query's pairs, percent-decoded.
    pub query: Vec<(String, String)>,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn query(&self, name: &str) -> Option<&str> {
        self.query.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// How the fake answers one request, given the connection to write to.
pub type Behaviour = Arc<dyn Fn(&Request, &mut TcpStream) + Send + Sync>;

/// A running fake; stops accepting when dropped (threads of open connections end
/// with the test process).
pub struct FakeApiserver {
    pub port: u16,
    pub requests: Arc<Mutex<Vec<Request>>>,
}

impl FakeApiserver {
    pub fn start(behaviour: Behaviour) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let port = listener.local_addr().expect("an address").port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let behaviour = behaviour.clone();
                let seen = seen.clone();
                std::thread::spawn(move || {
                    let Some(request) = read_request(&mut stream) else {
                        return;
                    };
                    seen.lock().unwrap().push(request.clone());
                    behaviour(&request, &mut stream);
                });
            }
        });
        Self { port, requests }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn count(&self, method: &str) -> usize {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.method == method)
            .count()
    }
}

fn read_request(stream: &mut TcpStream) -> Option<Request> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_owned();
    let target = parts.next()?.to_owned();
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':')?;
        headers.push((name.trim().to_owned(), value.trim().to_owned()));
    }
    let length: usize = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let query = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (n, v) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(n), percent_decode(v))
        })
        .collect();
    Some(Request {
        method,
        path: path.to_owned(),
        query,
        headers,
        body,
    })
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 3;
                    }
                    Err(_) => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Writes a whole answer with a JSON body and closes.
pub fn respond(stream: &mut TcpStream, status: &str, body: &Value) {
    respond_raw(
        stream,
        status,
        &[("Content-Type", "application/json")],
        body.to_string().as_bytes(),
    );
}

pub fn respond_raw(stream: &mut TcpStream, status: &str, headers: &[(&str, &str)], body: &[u8]) {
    let mut head = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body);
    let _ = stream.flush();
}

/// A `metav1.Status` of a failure, as the apiserver writes it.
pub fn status(code: u16, reason: &str, message: &str) -> Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    })
}

/// A `PersistentVolumeList` page.
pub fn page(items: &[Value], continue_token: Option<&str>) -> Value {
    let mut metadata = json!({"resourceVersion": "1000"});
    if let Some(token) = continue_token {
        metadata["continue"] = json!(token);
    }
    json!({"kind": "PersistentVolumeList", "apiVersion": "v1", "metadata": metadata, "items": items})
}

/// A zonal GCE PD CSI volume in europe-west1-b with its nodeAffinity; `labelled`: with
/// both topology labels too (then `fine`; else `missing-labels`).
pub fn pd(name: &str, labelled: bool) -> Value {
    let labels = if labelled {
        json!({"topology.kubernetes.io/zone": "europe-west1-b", "topology.kubernetes.io/region": "europe-west1"})
    } else {
        json!(null)
    };
    json!({
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": labels, "resourceVersion": "7", "uid": format!("uid-{name}")},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "csi": {"driver": "pd.csi.storage.gke.io", "volumeHandle": format!("projects/P/zones/europe-west1-b/disks/{name}")},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "topology.gke.io/zone", "operator": "In", "values": ["europe-west1-b"]}]}
            ]}},
        },
    })
}

/// The checks a real apiserver makes before anything else: the bearer token, the path,
/// the verb and, for a patch, its content type. `None`: the request passes them.
pub fn refused(request: &Request) -> Option<(&'static str, Value)> {
    if request.header("authorization") != Some(&format!("Bearer {TOKEN}")) {
        return Some(("401 Unauthorized", status(401, "Unauthorized", "Unauthorized")));
    }
    let collection = "/api/v1/persistentvolumes";
    let name = request
        .path
        .strip_prefix(collection)
        .and_then(|rest| rest.strip_prefix('/'));
    match (request.method.as_str(), name) {
        ("GET", None) if request.path == collection => None,
        ("PATCH", Some(name)) if !name.is_empty() && !name.contains('/') => {
            if request.header("content-type") == Some("application/merge-patch+json") {
                None
            } else {
                Some((
                    "415 Unsupported Media Type",
                    status(
                        415,
                        "UnsupportedMediaType",
                        "the body of the request was in an unknown format",
                    ),
                ))
            }
        }
        _ => Some((
            "404 Not Found",
            status(404, "NotFound", "the server could not find the requested resource"),
        )),
    }
}

/// `pvs` served as an apiserver pages them: `limit` items from the offset the continue
/// token names, the next offset as the token while more remain (an unknown token:
/// `410 Gone`, as for an expired one); a patch answers the PV with the patch's labels.
pub fn cluster(pvs: Vec<Value>) -> Behaviour {
    Arc::new(move |request, stream| {
        if let Some((code, body)) = refused(request) {
            return respond(stream, code, &body);
        }
        if request.method == "PATCH" {
            let name = request.path.rsplit('/').next().unwrap_or_default();
            let Some(mut pv) = pvs.iter().find(|p| p["metadata"]["name"] == name).cloned() else {
                return respond(
                    stream,
                    "404 Not Found",
                    &status(404, "NotFound", &format!("persistentvolumes \"{name}\" not found")),
                );
            };
            let patch: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
            pv["metadata"]["labels"] = patch["metadata"]["labels"].clone();
            return respond(stream, "200 OK", &pv);
        }
        let limit = request
            .query("limit")
            .and_then(|l| l.parse().ok())
            .unwrap_or(usize::MAX);
        let start: usize = match request.query("continue") {
            None | Some("") => 0,
            Some(token) => match token.strip_prefix("offset-").and_then(|o| o.parse().ok()) {
                Some(offset) => offset,
                None => {
                    return respond(
                        stream,
                        "410 Gone",
                        &status(410, "Expired", "The provided continue parameter is too old"),
                    );
                }
            },
        };
        let end = start.saturating_add(limit).min(pvs.len());
        let token = (end < pvs.len()).then(|| format!("offset-{end}"));
        respond(stream, "200 OK", &page(&pvs[start.min(end)..end], token.as_deref()));
    })
}

/// A kubeconfig in `dir` naming `server` with [`TOKEN`].
pub fn kubeconfig(dir: &Path, server: &str) -> PathBuf {
    let path = dir.join("kubeconfig");
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": TOKEN}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    });
    std::fs::write(&path, config.to_string()).expect("write the kubeconfig");
    path
}

/// What a run of `audit` gave; `code` is `None` when it was killed at the limit.
#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Run {
    /// The stderr lines.
    pub fn lines(&self) -> Vec<&str> {
        self.stderr.lines().collect()
    }
}

/// Runs `audit --kubeconfig KUBECONFIG ARGS…` with the `PV_TOPOLOGY_WEBHOOK_*` variables
/// `env` only, killed after `limit`.
pub fn audit(kubeconfig: &Path, args: &[&str], env: &[(&str, &str)], limit: Duration) -> Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_pv-topology-webhook"));
    command.arg("audit").arg("--kubeconfig").arg(kubeconfig).args(args);
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("PV_TOPOLOGY_WEBHOOK_") {
            command.env_remove(name);
        }
    }
    let mut child = command
        .envs(env.iter().copied())
        .env_remove("KUBECONFIG")
        .env("HOME", "/nonexistent")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let read = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            let _ = pipe.read_to_end(&mut text);
            String::from_utf8_lossy(&text).into_owned()
        })
    };
    let stdout = read(Box::new(child.stdout.take().expect("stdout")));
    let stderr = read(Box::new(child.stderr.take().expect("stderr")));
    let start = Instant::now();
    let code = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status.code();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Run {
        code,
        stdout: stdout.join().expect("stdout read"),
        stderr: stderr.join().expect("stderr read"),
        elapsed: start.elapsed(),
    }
}
