//! moto's server (AWS APIs) for the tests that need EC2, ECR or STS, in
//! its default mode (any signature accepted) or its authenticated one
//! (signatures and session tokens verified), and a fake STS for the one call
//! moto cannot answer in that mode.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::process::{Proc, wait_tcp};
use crate::workspace_root;

/// moto's server (AWS APIs; `make tools` installs it) on a free loopback
/// port, stopped (process group) when dropped.
pub struct Moto {
    proc: Proc,
    _dir: tempfile::TempDir,
    pub url: String,
    python: PathBuf,
    auth: Option<MotoAuth>,
}

/// AWS credentials as the tests hand them to a program.
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
pub struct AwsKeys {
    pub access_key_id: String,
    pub secret_access_key: String,
    /// Set for temporary credentials (STS), which moto accepts only with it.
    #[serde(default)]
    pub session_token: Option<String>,
    /// `2026-11-30T22:04:13Z`, for temporary credentials.
    #[serde(default)]
    pub expiration: Option<String>,
}

/// What the bootstrap of an authenticated moto created.
#[derive(Clone, Debug, serde::Deserialize)]
pub struct MotoAuth {
    /// The IAM user's long-term access key (AKIA…).
    #[serde(flatten)]
    pub user: AwsKeys,
    pub user_arn: String,
    /// A role that trusts the user and may call what the user may.
    pub role_arn: String,
}

/// The bootstrap script (boto3 signs, not our code).
fn script() -> PathBuf {
    workspace_root().join("tests/fakes/moto_auth.py")
}

/// The unauthenticated calls `moto_auth.py bootstrap` makes (its
/// BOOTSTRAP_CALLS): after them moto verifies every request.
const BOOTSTRAP_CALLS: u32 = 5;

impl Moto {
    /// moto accepting any signature (its default).
    pub fn start() -> Moto {
        Self::launch(None)
    }

    /// moto verifying every request's SigV4 signature and session token
    /// (`INITIAL_NO_AUTH_ACTION_COUNT`), after tests/fakes/moto_auth.py has
    /// created an IAM user with an access key and a role the user may assume
    /// ([`Moto::auth`]). A wrong secret gets 403, so does temporary
    /// credentials' key without (or with a changed) session token.
    pub fn start_authenticated() -> Moto {
        let mut moto = Self::launch(Some(BOOTSTRAP_CALLS));
        let out = moto.script(&["bootstrap", &moto.url.clone()]);
        moto.auth = Some(serde_json::from_str(&out).expect("moto_auth.py bootstrap's JSON"));
        moto
    }

    /// The user and role of an authenticated moto.
    pub fn auth(&self) -> &MotoAuth {
        self.auth.as_ref().expect("Moto::start_authenticated")
    }

    /// Temporary credentials (with a session token) for the role, from a
    /// `sts:AssumeRole` that boto3 signs with the user's key.
    pub fn assume_role(&self, session_name: &str) -> AwsKeys {
        let auth = self.auth();
        let out = self.script(&[
            "assume-role",
            &self.url,
            &auth.user.access_key_id,
            &auth.user.secret_access_key,
            &auth.role_arn,
            session_name,
        ]);
        serde_json::from_str(&out).expect("moto_auth.py assume-role's JSON")
    }

    /// A 1 GiB volume in `zone`, created by boto3 with the user's key; its ID.
    pub fn create_volume(&self, region: &str, zone: &str) -> String {
        let auth = self.auth();
        self.script(&[
            "create-volume",
            &self.url,
            &auth.user.access_key_id,
            &auth.user.secret_access_key,
            region,
            zone,
        ])
        .trim()
        .to_owned()
    }

    /// `count` 1 GiB volumes in `zone`, created by boto3 with the user's key in one
    /// process; their IDs.
    pub fn create_volumes(&self, region: &str, zone: &str, count: usize) -> Vec<String> {
        let auth = self.auth();
        self.script(&[
            "create-volumes",
            &self.url,
            &auth.user.access_key_id,
            &auth.user.secret_access_key,
            region,
            zone,
            &count.to_string(),
        ])
        .lines()
        .map(str::to_owned)
        .collect()
    }

    /// One EC2 instance in `region`, launched by boto3 with the user's key:
    /// (instance ID, its `PrivateDnsName`).
    pub fn run_instance(&self, region: &str) -> (String, String) {
        #[derive(serde::Deserialize)]
        struct Launched {
            instance_id: String,
            private_dns_name: String,
        }
        let auth = self.auth();
        let out = self.script(&[
            "run-instance",
            &self.url,
            &auth.user.access_key_id,
            &auth.user.secret_access_key,
            region,
        ]);
        let launched: Launched = serde_json::from_str(&out).expect("moto_auth.py run-instance's JSON");
        (launched.instance_id, launched.private_dns_name)
    }

    /// A fake STS for `AssumeRoleWithWebIdentity` (see [`WebIdentitySts`]).
    pub fn web_identity_sts(&self) -> WebIdentitySts {
        WebIdentitySts::start(self)
    }

    fn script(&self, args: &[&str]) -> String {
        run_script(&self.python, args)
    }

    /// `$MOTO_SERVER`, else `.cache/venv/bin/moto_server`.
    fn launch(no_auth_calls: Option<u32>) -> Moto {
        let program = std::env::var_os("MOTO_SERVER")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace_root().join(".cache/venv/bin/moto_server"));
        assert!(program.exists(), "{} not found: run `make tools`", program.display());
        // The venv's python, beside moto_server: it has boto3.
        let python = program.with_file_name("python3");
        let dir = tempfile::Builder::new()
            .prefix("cluster-harness-moto-")
            .tempdir()
            .expect("a temporary directory for moto");
        // Port 0: moto binds a port of its own and reports it. A port picked
        // here and passed in could be taken by another test's server during
        // the second or two moto spends importing; the readiness check would
        // then have found that server, and ECR calls got its 404s.
        let mut args = vec!["-H".to_string(), "127.0.0.1".into(), "-p".into(), "0".into()];
        let mut command = program.clone();
        if let Some(count) = no_auth_calls {
            // Only moto's environment: `env NAME=VALUE moto_server ARGS`.
            args.insert(0, program.display().to_string());
            args.insert(0, format!("INITIAL_NO_AUTH_ACTION_COUNT={count}"));
            command = PathBuf::from("/usr/bin/env");
        }
        let mut proc = Proc::spawn("moto_server", &command, &args, dir.path().join("moto.log"), dir.path())
            .expect("start moto_server");
        let ready = proc
            .wait_for_log_line(LISTENING, Duration::from_secs(30))
            .and_then(|line| reported_port(&line))
            .and_then(|port| {
                wait_tcp(
                    SocketAddr::from(([127, 0, 0, 1], port)),
                    &mut proc,
                    Duration::from_secs(5),
                )?;
                Ok(port)
            });
        let port = match ready {
            Ok(port) => port,
            Err(e) => {
                let log = proc.tail(4000);
                proc.stop();
                panic!("moto_server: {e:#}\n{log}");
            }
        };
        Moto {
            proc,
            _dir: dir,
            url: format!("http://127.0.0.1:{port}"),
            python,
            auth: None,
        }
    }
}

fn run_script(python: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new(python)
        .arg(script())
        .args(args)
        .output()
        .expect("run moto_auth.py");
    assert!(
        out.status.success(),
        "moto_auth.py {}: {}",
        args[0],
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 from moto_auth.py")
}

/// One `AssumeRoleWithWebIdentity` call as the fake STS saw it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WebIdentityCall {
    pub role_arn: String,
    pub web_identity_token: String,
    pub role_session_name: String,
    /// Whether the call carried an `Authorization` header (it should not:
    /// the token is the proof).
    pub signed: bool,
}

/// A fake STS on loopback, written from the STS API reference, for the one
/// call moto's authenticated mode cannot answer (it gives HTTP 500 to an
/// unsigned `AssumeRoleWithWebIdentity`). It records each call's role ARN
/// and token, refuses a role other than moto's (`AccessDenied`) or an empty
/// token (`InvalidIdentityToken`), and answers with temporary credentials
/// that moto issued by a signed `sts:AssumeRole`, so whatever the program
/// then calls is verified by moto with their session token.
pub struct WebIdentitySts {
    pub url: String,
    calls: Arc<Mutex<Vec<WebIdentityCall>>>,
    tamper: Arc<AtomicBool>,
}

/// `token` with one character changed: what a program that altered or
/// mangled a session token would send.
pub fn tampered(token: &str) -> String {
    let mut chars: Vec<char> = token.chars().collect();
    let middle = chars.len() / 2;
    if let Some(c) = chars.get_mut(middle) {
        *c = if *c == 'A' { 'B' } else { 'A' };
    }
    chars.into_iter().collect()
}

impl WebIdentitySts {
    fn start(moto: &Moto) -> Self {
        let auth = moto.auth().clone();
        let (python, moto_url) = (moto.python.clone(), moto.url.clone());
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback for the fake STS");
        let url = format!("http://{}", listener.local_addr().expect("the fake STS's address"));
        let calls: Arc<Mutex<Vec<WebIdentityCall>>> = Arc::default();
        let seen = calls.clone();
        let tamper: Arc<AtomicBool> = Arc::default();
        let tampering = tamper.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (auth, python, moto_url, seen) = (auth.clone(), python.clone(), moto_url.clone(), seen.clone());
                let tamper = tampering.load(Ordering::SeqCst);
                std::thread::spawn(move || {
                    let _ = answer_web_identity(stream, &auth, &python, &moto_url, &seen, tamper);
                });
            }
        });
        Self { url, calls, tamper }
    }

    /// From now on, answer with the session token changed (a negative
    /// test: moto must then refuse what the program calls with it).
    pub fn tamper_session_token(&self, on: bool) {
        self.tamper.store(on, Ordering::SeqCst);
    }

    /// Every call so far.
    pub fn calls(&self) -> Vec<WebIdentityCall> {
        self.calls.lock().expect("calls lock").clone()
    }
}

fn answer_web_identity(
    mut stream: TcpStream,
    auth: &MotoAuth,
    python: &Path,
    moto_url: &str,
    seen: &Mutex<Vec<WebIdentityCall>>,
    tamper: bool,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut length = 0;
    let mut signed = false;
    let mut first = true;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if first {
            first = false;
            continue;
        }
        if let Some((name, value)) = line.split_once(':') {
            match name.trim().to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse().unwrap_or(0),
                "authorization" => signed = true,
                _ => {}
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let form = parse_form(&String::from_utf8_lossy(&body));
    let field = |name: &str| {
        form.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let call = WebIdentityCall {
        role_arn: field("RoleArn"),
        web_identity_token: field("WebIdentityToken"),
        role_session_name: field("RoleSessionName"),
        signed,
    };
    seen.lock().expect("calls lock").push(call.clone());
    let (status, xml) = if field("Action") != "AssumeRoleWithWebIdentity" {
        (
            400,
            error_xml("InvalidAction", "only AssumeRoleWithWebIdentity is served"),
        )
    } else if call.role_arn != auth.role_arn {
        (403, error_xml("AccessDenied", "not the role this fake serves"))
    } else if call.web_identity_token.is_empty() {
        (400, error_xml("InvalidIdentityToken", "no token"))
    } else {
        let out = run_script(
            python,
            &[
                "assume-role",
                moto_url,
                &auth.user.access_key_id,
                &auth.user.secret_access_key,
                &auth.role_arn,
                &call.role_session_name,
            ],
        );
        let keys: AwsKeys = serde_json::from_str(&out).expect("moto_auth.py assume-role's JSON");
        let session_token = keys.session_token.unwrap_or_default();
        let session_token = if tamper {
            tampered(&session_token)
        } else {
            session_token
        };
        (
            200,
            format!(
                "<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><AssumeRoleWithWebIdentityResult><Credentials><AccessKeyId>{}</AccessKeyId><SecretAccessKey>{}</SecretAccessKey><SessionToken>{}</SessionToken><Expiration>{}</Expiration></Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>",
                keys.access_key_id,
                keys.secret_access_key,
                session_token,
                keys.expiration.unwrap_or_default()
            ),
        )
    };
    write!(
        stream,
        "HTTP/1.1 {status} X\r\nContent-Type: text/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{xml}",
        xml.len()
    )?;
    stream.flush()
}

fn error_xml(code: &str, message: &str) -> String {
    format!(
        "<ErrorResponse><Error><Type>Sender</Type><Code>{code}</Code><Message>{message}</Message></Error></ErrorResponse>"
    )
}

/// `application/x-www-form-urlencoded` pairs.
fn parse_form(body: &str) -> Vec<(String, String)> {
    body.split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => match text.get(i + 1..i + 3).and_then(|hex| u8::from_str_radix(hex, 16).ok()) {
                Some(b) => {
                    out.push(b);
                    i += 2;
                }
                None => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// What werkzeug (moto's server) logs once it has bound its socket.
const LISTENING: &str = " * Running on http://127.0.0.1:";

/// The port in werkzeug's ` * Running on http://127.0.0.1:PORT` line.
fn reported_port(line: &str) -> anyhow::Result<u16> {
    let rest = line
        .split_once(LISTENING)
        .map(|(_, rest)| rest)
        .ok_or_else(|| anyhow::anyhow!("no address in {line:?}"))?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().map_err(|e| anyhow::anyhow!("port in {line:?}: {e}"))
}

impl Drop for Moto {
    fn drop(&mut self) {
        self.proc.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::reported_port;

    #[test]
    fn reads_the_port_werkzeug_reports() {
        assert_eq!(
            reported_port(" * Running on http://127.0.0.1:40123\n").expect("a port"),
            40123
        );
        assert!(reported_port(" * Running on http://127.0.0.1:\n").is_err());
        assert!(reported_port("Address already in use").is_err());
    }

    #[test]
    fn form_fields_are_decoded() {
        assert_eq!(
            super::parse_form("RoleArn=arn%3Aaws%3Aiam%3A%3A1%3Arole%2Fx&T=a+b%2&E="),
            vec![
                ("RoleArn".to_owned(), "arn:aws:iam::1:role/x".to_owned()),
                ("T".to_owned(), "a b%2".to_owned()),
                ("E".to_owned(), String::new()),
            ]
        );
    }
}
