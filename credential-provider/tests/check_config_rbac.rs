//! `check-config --rbac`: the grant it prints for a config's audiences, its
//! refusals, and its live check against a small fake apiserver (loopback,
//! written from the authorization.k8s.io/v1 SubjectAccessReview API: it
//! takes only a POST of a SubjectAccessReview with the kubeconfig's bearer
//! token, answers 401 otherwise, and allows only the audiences it is given),
//! for what a real one cannot be made to do: echo the credentials, send too
//! much, or never answer. The cluster tier (node_token_audience.rs) runs the
//! live check against a real kube-apiserver.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use common::{assert_one_line_failure, data, run, run_with_env};
use serde_json::{Value, json};

fn config(name: &str) -> String {
    data("configs").join(name).display().to_string()
}

const TWO: &str = "two-audiences.yaml";
const TOKEN: &str = "kubeconfig-bearer-0123456789abcdef";

#[test]
fn the_grant_covers_every_audience_of_the_config_in_order() {
    let out = run(&["check-config", "--rbac", &config(TWO)], b"");
    assert_eq!(out.status, 0, "{}", out.stderr);
    let documents: Vec<Value> = out
        .stdout
        .split("---\n")
        .map(|d| serde_yaml_ng::from_str(d).expect("a YAML document"))
        .collect();
    assert_eq!(documents.len(), 2, "{}", out.stdout);
    assert_eq!(documents[0]["kind"], "ClusterRole");
    assert_eq!(
        documents[0]["rules"],
        json!([{"apiGroups": [""], "resources": ["harbor.example.com", "api://registry.example.org"],
                "verbs": ["request-serviceaccounts-token-audience"]}])
    );
    assert_eq!(documents[1]["kind"], "ClusterRoleBinding");
    assert_eq!(
        documents[1]["subjects"],
        json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"}])
    );
    for document in &documents {
        assert_eq!(document["metadata"]["name"], "cloud-credential-provider:token-audience");
    }

    // A node group and a name of one's own; JSON as a List kubectl applies.
    let out = run(
        &[
            "check-config",
            "--rbac",
            "--node-group",
            "pool:gpu",
            "--rbac-name",
            "gpu-pullers",
            "-o",
            "json",
            &config(TWO),
        ],
        b"",
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    let list: Value = serde_json::from_str(&out.stdout).expect("JSON");
    assert_eq!(list["kind"], "List");
    assert_eq!(list["items"][0]["metadata"]["name"], "gpu-pullers");
    assert_eq!(list["items"][1]["roleRef"]["name"], "gpu-pullers");
    assert_eq!(list["items"][1]["subjects"][0]["name"], "pool:gpu");
    // The same from the environment (kubelet's `env:` style is not involved:
    // this is an operator's tool, but every flag has its variable).
    let out = run_with_env(
        &["check-config", "--rbac", &config(TWO)],
        b"",
        &[("CLOUD_CREDENTIAL_PROVIDER_RBAC_GROUP", "pool:gpu")],
    );
    assert!(out.stdout.contains("name: pool:gpu"), "{}", out.stdout);
}

#[test]
fn a_config_without_token_attributes_needs_no_grant() {
    let out = run(&["check-config", "--rbac", &config("multi.yaml")], b"");
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(out.stdout.lines().count(), 1, "{}", out.stdout);
    assert!(
        out.stdout.starts_with('#'),
        "a comment, nothing to apply: {}",
        out.stdout
    );
    assert!(out.stdout.contains("no provider has tokenAttributes"), "{}", out.stdout);
    let out = run(&["check-config", "--rbac", "-o", "json", &config("multi.yaml")], b"");
    let list: Value = serde_json::from_str(&out.stdout).expect("JSON");
    assert_eq!(list["items"], json!([]));
}

#[test]
fn a_refused_config_gets_no_grant() {
    let out = run(&["check-config", "--rbac", &config("bad-rules.yaml")], b"");
    assert_one_line_failure(
        "refused",
        &out,
        "--rbac: kubelet or this plugin refuses the config, so no grant is printed",
    );
    assert!(
        out.stderr.contains("providers[0].name"),
        "the first problem: {}",
        out.stderr
    );
    let out = run(&["check-config", "--rbac", &config("missing.yaml")], b"");
    assert_one_line_failure("unreadable", &out, "cannot read");
}

#[test]
fn bad_rbac_flags_are_one_line_naming_the_flag() {
    let cases: [(&[&str], &str); 5] = [
        (&["--rbac", "--rbac-name", "a/b"], "--rbac-name"),
        (&["--rbac", "--node-group", ""], "--node-group"),
        (&["--node-group", "x"], "--rbac"),
        (&["--rbac", "--kubeconfig", "k"], "--node"),
        (&["--rbac", "--node", "Node_A"], "--node"),
    ];
    for (flags, want) in cases {
        let mut args = vec!["check-config"];
        args.extend_from_slice(flags);
        let path = config(TWO);
        args.push(&path);
        assert_one_line_failure(&format!("{flags:?}"), &run(&args, b""), want);
    }
}

/// What the fake apiserver does with a SubjectAccessReview.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// Allows the audiences it was given, denies the others.
    Answer,
    /// 401 whatever the token, its message echoing the Authorization header.
    EchoCredentials,
    /// A 3 MiB answer.
    Huge,
    /// Takes the request and never answers.
    Silent,
}

#[derive(Clone)]
struct Fake {
    mode: Mode,
    allowed: Vec<String>,
    reviews: Arc<Mutex<Vec<Value>>>,
}

async fn review(State(fake): State<Fake>, headers: HeaderMap, body: String) -> Response {
    let authorization = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let status = |code: StatusCode, reason: &str, message: String| {
        let body = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                          "reason": reason, "message": message, "code": code.as_u16()});
        (code, body.to_string()).into_response()
    };
    match fake.mode {
        Mode::Silent => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            return StatusCode::OK.into_response();
        }
        Mode::EchoCredentials => {
            return status(
                StatusCode::UNAUTHORIZED,
                "Unauthorized",
                format!("bad credentials: {authorization}"),
            );
        }
        _ if authorization != format!("Bearer {TOKEN}") => {
            return status(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized".to_owned());
        }
        Mode::Huge => return (StatusCode::CREATED, "x".repeat(3 << 20)).into_response(),
        Mode::Answer => {}
    }
    let Ok(mut review) = serde_json::from_str::<Value>(&body) else {
        return status(StatusCode::BAD_REQUEST, "BadRequest", "not JSON".to_owned());
    };
    if review["kind"] != "SubjectAccessReview" || review["apiVersion"] != "authorization.k8s.io/v1" {
        return status(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            "not a SubjectAccessReview".to_owned(),
        );
    }
    fake.reviews.lock().unwrap().push(review.clone());
    let resource = review["spec"]["resourceAttributes"]["resource"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    let allowed = fake.allowed.contains(&resource);
    review["status"] = if allowed {
        json!({"allowed": true, "reason": "RBAC: allowed by ClusterRoleBinding \"pullers\""})
    } else {
        json!({"allowed": false})
    };
    (StatusCode::CREATED, review.to_string()).into_response()
}

/// The fake on loopback, in its own thread; its address and the reviews it took.
fn start(mode: Mode, allowed: &[&str]) -> (SocketAddr, Arc<Mutex<Vec<Value>>>) {
    let fake = Fake {
        mode,
        allowed: allowed.iter().map(|s| s.to_string()).collect(),
        reviews: Arc::default(),
    };
    let reviews = fake.reviews.clone();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let address = listener.local_addr().expect("an address");
    listener.set_nonblocking(true).expect("non-blocking");
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("a listener");
            let app = Router::new()
                .route("/apis/authorization.k8s.io/v1/subjectaccessreviews", post(review))
                .with_state(fake);
            axum::serve(listener, app).await.expect("serve");
        });
    });
    (address, reviews)
}

fn kubeconfig(dir: &Path, address: SocketAddr) -> String {
    let path = dir.join("kubeconfig");
    let text = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
         clusters:\n- name: k\n  cluster:\n    server: http://{address}\n\
         users:\n- name: u\n  user:\n    token: {TOKEN}\n\
         contexts:\n- name: c\n  context:\n    cluster: k\n    user: u\n"
    );
    std::fs::write(&path, text).expect("write the kubeconfig");
    path.display().to_string()
}

fn live(kubeconfig: &str, extra: &[&str]) -> common::Output {
    live_logging(kubeconfig, extra, "error")
}

fn live_logging(kubeconfig: &str, extra: &[&str], level: &str) -> common::Output {
    let path = config(TWO);
    let mut args = vec!["check-config", "--rbac", "--node", "node-a", "--kubeconfig", kubeconfig];
    args.extend_from_slice(extra);
    args.push(&path);
    run_with_env(&args, b"", &[("CLOUD_CREDENTIAL_PROVIDER_LOG_LEVEL", level)])
}

#[test]
fn the_live_check_asks_as_node_restriction_and_names_what_is_missing() {
    let (address, reviews) = start(Mode::Answer, &["harbor.example.com"]);
    let dir = tempfile::tempdir().expect("a directory");
    let kubeconfig = kubeconfig(dir.path(), address);
    let out = live(&kubeconfig, &["--namespace", "team", "--service-account", "app"]);
    assert_eq!(out.status, 2, "{}{}", out.stdout, out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", out.stdout);
    assert_eq!(
        lines[0],
        "harbor.example.com: granted: system:node:node-a may request tokens for it (service account team/app); the authorizer: RBAC: allowed by ClusterRoleBinding \"pullers\""
    );
    assert!(
        lines[1].starts_with("api://registry.example.org: MISSING: system:node:node-a may not request tokens for it (service account team/app); NodeRestriction refuses kubelet's TokenRequest"),
        "{}",
        lines[1]
    );
    assert_eq!(
        lines[2],
        format!(
            "fix: cloud-credential-provider check-config --rbac {} | kubectl apply -f -",
            config(TWO)
        )
    );
    let reviews = reviews.lock().unwrap();
    assert_eq!(reviews.len(), 2);
    assert_eq!(
        reviews[1]["spec"],
        json!({"user": "system:node:node-a", "groups": ["system:nodes", "system:authenticated"],
               "resourceAttributes": {"verb": "request-serviceaccounts-token-audience", "group": "", "version": "v1",
                                      "resource": "api://registry.example.org", "namespace": "team", "name": "app"}})
    );
    drop(reviews);

    // Every audience granted: exit 0, no fix line; JSON for programs.
    let (address, _) = start(Mode::Answer, &["harbor.example.com", "api://registry.example.org"]);
    let kubeconfig = self::kubeconfig(dir.path(), address);
    let out = live(&kubeconfig, &["-o", "json"]);
    assert_eq!(out.status, 0, "{}{}", out.stdout, out.stderr);
    let report: Value = serde_json::from_str(&out.stdout).expect("JSON");
    assert_eq!(report["audiences"].as_array().map(Vec::len), Some(2));
    assert!(
        report["audiences"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["allowed"] == true)
    );
    assert_eq!(report["user"], "system:node:node-a");
}

#[test]
fn the_live_check_fails_in_one_line_without_echoing_the_credentials() {
    let dir = tempfile::tempdir().expect("a directory");
    let (address, _) = start(Mode::EchoCredentials, &[]);
    let out = live(&kubeconfig(dir.path(), address), &[]);
    assert_one_line_failure("echoed", &out, "(401 Unauthorized)");
    assert!(!out.stderr.contains(TOKEN), "the token is cut: {}", out.stderr);
    let out = live_logging(&kubeconfig(dir.path(), address), &[], "trace");
    assert!(out.stderr.contains("(401 Unauthorized)"), "{}", out.stderr);
    assert!(!out.stderr.contains(&TOKEN[10..]), "not even at trace: {}", out.stderr);

    let (address, _) = start(Mode::Huge, &[]);
    let out = live(&kubeconfig(dir.path(), address), &[]);
    assert_one_line_failure("huge", &out, "the answer is larger than 2 MiB");

    let (address, _) = start(Mode::Silent, &[]);
    let started = std::time::Instant::now();
    let out = live(&kubeconfig(dir.path(), address), &["--request-timeout", "500ms"]);
    assert_one_line_failure(
        "silent",
        &out,
        "timed out: no complete answer within --request-timeout 500ms",
    );
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());

    // Nothing listens: named, with the flag to check.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let out = live(&kubeconfig(dir.path(), port), &[]);
    assert_one_line_failure("refused", &out, "connection refused");
    assert!(out.stderr.contains("--kubeconfig"), "{}", out.stderr);
}

/// The kubeconfig is read for what the review needs, and what it cannot
/// use is one line naming the file and the field.
#[test]
fn kubeconfigs_the_check_cannot_use_are_named() {
    let dir = tempfile::tempdir().expect("a directory");
    let write = |name: &str, user: &str, cluster_extra: &str| {
        let path = dir.path().join(name);
        let text = format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
             clusters:\n- name: k\n  cluster:\n    server: https://127.0.0.1:1\n{cluster_extra}\
             users:\n- name: u\n  user:\n{user}\
             contexts:\n- name: c\n  context:\n    cluster: k\n    user: u\n"
        );
        std::fs::write(&path, text).expect("write");
        path.display().to_string()
    };
    let cases = [
        (
            write("exec", "    exec:\n      command: aws\n", ""),
            "authenticates with an exec plugin or auth-provider",
        ),
        (
            write("proxy", "    token: t\n", "    proxy-url: http://proxy:3128\n"),
            "proxy-url",
        ),
        (
            write("half", "    client-certificate-data: AAAA\n", ""),
            "a client certificate needs its key",
        ),
        (
            write("ca", "    token: t\n", "    certificate-authority: /dev/zero\n"),
            "certificate-authority",
        ),
        (
            write("badca", "    token: t\n", "    certificate-authority-data: '%%%'\n"),
            "not base64",
        ),
    ];
    for (kubeconfig, want) in &cases {
        let out = live(kubeconfig, &[]);
        assert_one_line_failure(kubeconfig, &out, want);
        assert!(out.stderr.contains("--rbac --node: "), "{}", out.stderr);
    }
    let ok = write("ok", "    token: t\n", "");
    let out = live(&ok, &["--context", "nope"]);
    assert_one_line_failure("context", &out, "no context \"nope\"");
}
