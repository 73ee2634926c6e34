//! Running the real binary, as kubelet does: arguments, stdin, exit status,
//! stdout and stderr.
#![allow(dead_code)]

pub mod aws_fake;
pub mod leaks;
pub mod proxy;
pub mod token_server;

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

pub struct Output {
    pub status: i32,
    pub stdout: String,
    pub stderr: String,
}

pub fn data(name: &str) -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/data/credential-provider"
    ))
    .join(name)
}

pub fn run(args: &[&str], stdin: &[u8]) -> Output {
    run_with_env(args, stdin, &[])
}

pub fn run_with_env(args: &[&str], stdin: &[u8], env: &[(&str, &str)]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cloud-credential-provider"))
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn cloud-credential-provider");
    // A plugin that exits before reading stdin closes the pipe: not a failure.
    let _ = child.stdin.take().expect("stdin").write_all(stdin);
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let out_reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stdout.read_to_end(&mut bytes);
        bytes
    });
    let err_reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stderr.read_to_end(&mut bytes);
        bytes
    });
    // kubelet kills a plugin after a minute; a test waits less, so that a
    // hang (a FIFO read, say) fails the test instead of stalling the suite.
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for cloud-credential-provider") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("cloud-credential-provider {args:?} did not finish within 30s");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Output {
        status: status.code().unwrap_or(-1),
        stdout: String::from_utf8(out_reader.join().unwrap()).expect("utf-8 stdout"),
        stderr: String::from_utf8(err_reader.join().unwrap()).expect("utf-8 stderr"),
    }
}

/// Asserts a failure as kubelet sees it: exit 1, nothing on stdout, one line
/// on stderr without control characters, containing `want`.
pub fn assert_one_line_failure(what: &str, out: &Output, want: &str) {
    assert_eq!(out.status, 1, "{what}: {}", out.stderr);
    assert!(out.stdout.is_empty(), "{what}: stdout on failure: {}", out.stdout);
    assert_eq!(out.stderr.lines().count(), 1, "{what}: {:?}", out.stderr);
    let line = out.stderr.trim_end_matches('\n');
    assert!(
        !line.chars().any(char::is_control),
        "{what}: control characters: {line:?}"
    );
    assert!(line.contains(want), "{what}: {line:?} should contain {want:?}");
}

/// Asserts that no long piece of a JWT's payload or signature, each a
/// secret on its own, appears in `text`.
pub fn assert_no_piece_of(token: &str, text: &str) {
    for part in token.split('.').skip(1) {
        let piece = &part[..part.len().min(40)];
        assert!(!text.contains(piece), "a piece of the token leaked: {text}");
    }
}

pub fn mkfifo(path: &std::path::Path) {
    let status = Command::new("mkfifo").arg(path).status().expect("run mkfifo");
    assert!(status.success());
}

pub fn request(version: &str, image: &str, token: Option<&str>) -> Vec<u8> {
    let mut request = serde_json::json!({
        "apiVersion": format!("credentialprovider.kubelet.k8s.io/{version}"),
        "kind": "CredentialProviderRequest",
        "image": image,
    });
    if let Some(token) = token {
        request["serviceAccountToken"] = token.into();
        request["serviceAccountAnnotations"] = serde_json::json!({"example.com/role": "puller"});
    }
    serde_json::to_vec(&request).unwrap()
}

/// A JWT with the given claims and a junk signature (nothing verifies it).
pub fn jwt(claims: &serde_json::Value) -> String {
    let header = URL_SAFE_NO_PAD.encode(r#"{"alg":"RS256","kid":"k1","typ":"JWT"}"#);
    let body = URL_SAFE_NO_PAD.encode(claims.to_string());
    format!("{header}.{body}.dGhpcy1pcy1ub3QtYS1yZWFsLXNpZ25hdHVyZQ")
}

pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

pub fn service_account_token(lifetime_secs: u64) -> String {
    jwt(&serde_json::json!({
        "aud": ["registry.example.com"],
        "exp": now() + lifetime_secs,
        "iat": now(),
        "iss": "https://kubernetes.default.svc",
        "sub": "system:serviceaccount:team:puller",
    }))
}

pub fn response(stdout: &str) -> serde_json::Value {
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("stdout is not a response ({e}): {stdout:?}"))
}

/// Go duration text of whole seconds, as the plugin writes it, in seconds.
pub fn go_seconds(text: &str) -> u64 {
    let mut total = 0;
    let mut number = String::new();
    for c in text.chars() {
        match c {
            '0'..='9' => number.push(c),
            'h' | 'm' | 's' => {
                let n: u64 = number.parse().unwrap();
                total += n * match c {
                    'h' => 3600,
                    'm' => 60,
                    _ => 1,
                };
                number.clear();
            }
            other => panic!("unexpected {other:?} in {text:?}"),
        }
    }
    total
}
