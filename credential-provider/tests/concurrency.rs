//! The plugin under kubelet's concurrency: kubelet execs the plugin once per
//! image pull that misses its cache, so a node starting many pods of one
//! registry runs many copies at once. Each copy must still answer correctly
//! and well inside kubelet's exec timeout (one minute: kubelet's
//! credential-provider plugin runs each exec under a 1m context), and a
//! backend that accepts connections and never answers must be ended by the
//! plugin's own `--timeout` (default 20s), with a one-line error, before
//! kubelet kills it.
//!
//! Backends: moto's ECR (PyPI `moto[server]`, `make tools`), the RFC 8693
//! token endpoint fake (common/token_server.rs), and a listener that accepts
//! and never answers. Each test prints its figures (docs/testing.md,
//! "Node side").

mod common;

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use cluster_harness::{AwsKeys, Moto};
use common::token_server::{OPAQUE_TOKEN, TokenServer};
use common::{Output, assert_one_line_failure, request, response, run_with_env, service_account_token};

/// kubelet's limit on one exec of a credential provider plugin.
const KUBELET_EXEC_TIMEOUT: Duration = Duration::from_secs(60);
/// The plugin's `--timeout` default.
const PLUGIN_DEFAULT_TIMEOUT: Duration = Duration::from_secs(20);
/// Copies run at once.
const EXECS: usize = 32;

const ECR_REGISTRY: &str = "123456789012.dkr.ecr.us-east-1.amazonaws.com";
const EXCHANGE_REGISTRY: &str = "registry.example.com";

/// Runs `EXECS` copies at once, each with its own stdin, and returns each
/// one's output and time, and the wall time of all.
fn run_at_once(args: &[&str], stdin: impl Fn(usize) -> Vec<u8> + Sync, env: &[(&str, &str)]) -> Runs {
    let started = Instant::now();
    let barrier = std::sync::Barrier::new(EXECS);
    let outputs = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..EXECS)
            .map(|i| {
                let (barrier, stdin) = (&barrier, &stdin);
                scope.spawn(move || {
                    let input = stdin(i);
                    barrier.wait();
                    let exec_started = Instant::now();
                    let out = run_with_env(args, &input, env);
                    (out, exec_started.elapsed())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| handle.join().expect("an exec thread"))
            .collect()
    });
    Runs {
        outputs,
        wall: started.elapsed(),
    }
}

struct Runs {
    outputs: Vec<(Output, Duration)>,
    wall: Duration,
}

impl Runs {
    fn max(&self) -> Duration {
        self.outputs.iter().map(|(_, took)| *took).max().unwrap_or_default()
    }

    fn min(&self) -> Duration {
        self.outputs.iter().map(|(_, took)| *took).min().unwrap_or_default()
    }

    fn report(&self, what: &str) {
        eprintln!(
            "{what}: {EXECS} execs at once, wall {:?}, per exec min {:?} max {:?}",
            self.wall,
            self.min(),
            self.max()
        );
    }

    fn assert_inside_kubelets_timeout(&self, what: &str) {
        for (i, (_, took)) in self.outputs.iter().enumerate() {
            assert!(
                *took < KUBELET_EXEC_TIMEOUT,
                "{what}: exec {i} took {took:?}, past kubelet's {KUBELET_EXEC_TIMEOUT:?}"
            );
        }
    }
}

/// A backend that accepts every connection and never answers: connections
/// are held open (not reset) until the listener is dropped with the test.
struct Silent {
    addr: SocketAddr,
}

impl Silent {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let addr = listener.local_addr().expect("local address");
        std::thread::spawn(move || {
            let mut held: Vec<TcpStream> = Vec::new();
            for stream in listener.incoming() {
                match stream {
                    Ok(stream) => held.push(stream),
                    Err(_) => break,
                }
            }
        });
        Self { addr }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

/// ECR at `url` with static keys (an authenticated moto's user: each exec's
/// signature is checked there).
fn ecr_env(url: &str, keys: &AwsKeys) -> Vec<(&'static str, String)> {
    vec![
        ("AWS_ENDPOINT_URL", url.to_owned()),
        ("AWS_ACCESS_KEY_ID", keys.access_key_id.clone()),
        ("AWS_SECRET_ACCESS_KEY", keys.secret_access_key.clone()),
        ("AWS_EC2_METADATA_DISABLED", "true".to_owned()),
    ]
}

fn borrowed<'a>(env: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    env.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

#[test]
fn ecr_many_execs_at_once_for_one_registry_all_answer() {
    let moto = Moto::start_authenticated();
    let env = ecr_env(&moto.url, &moto.auth().user);
    let runs = run_at_once(
        &["ecr"],
        |i| request("v1", &format!("{ECR_REGISTRY}/team/app-{i}:v1"), None),
        &borrowed(&env),
    );
    runs.report("ecr (moto)");
    for (i, (out, _)) in runs.outputs.iter().enumerate() {
        assert_eq!(out.status, 0, "exec {i}: {}", out.stderr);
        let response = response(&out.stdout);
        assert_eq!(response["cacheKeyType"], "Registry", "exec {i}");
        assert_eq!(response["auth"][ECR_REGISTRY]["username"], "AWS", "exec {i}");
        assert_eq!(
            response["auth"][ECR_REGISTRY]["password"], "123456789012-auth-token",
            "exec {i}"
        );
        assert_eq!(response["auth"].as_object().map(|auth| auth.len()), Some(1), "exec {i}");
    }
    runs.assert_inside_kubelets_timeout("ecr");
}

#[test]
fn token_exchange_many_execs_at_once_for_one_registry_all_answer() {
    let server = TokenServer::start();
    let url = server.url("/opaque");
    // Each exec carries its own pod's token; each must be exchanged, and
    // answered with the registry's token, not another exec's.
    let tokens: Vec<String> = (0..EXECS).map(|_| service_account_token(3600)).collect();
    let runs = run_at_once(
        &[
            "token-exchange",
            "--token-endpoint",
            &url,
            "--audience",
            EXCHANGE_REGISTRY,
        ],
        |i| request("v1", &format!("{EXCHANGE_REGISTRY}/team/app-{i}:v1"), Some(&tokens[i])),
        &[],
    );
    runs.report("token-exchange");
    for (i, (out, _)) in runs.outputs.iter().enumerate() {
        assert_eq!(out.status, 0, "exec {i}: {}", out.stderr);
        let response = response(&out.stdout);
        assert_eq!(
            response["auth"][EXCHANGE_REGISTRY]["password"], OPAQUE_TOKEN,
            "exec {i}"
        );
        assert_eq!(response["cacheKeyType"], "Registry", "exec {i}");
    }
    let received = server.received.lock().expect("the server's record").len();
    assert_eq!(received, EXECS, "one exchange per exec");
    runs.assert_inside_kubelets_timeout("token-exchange");
}

/// Asserts that every exec against a silent backend was ended by the
/// plugin's own deadline: exit 1, one line naming it, after the deadline
/// and before kubelet's kill.
fn assert_ended_by_the_plugins_deadline(what: &str, runs: &Runs, want: &str) {
    runs.report(what);
    if let Some((out, _)) = runs.outputs.first() {
        eprintln!("{what}: stderr {:?}", out.stderr);
    }
    for (i, (out, took)) in runs.outputs.iter().enumerate() {
        assert_one_line_failure(&format!("{what} exec {i}"), out, want);
        assert!(
            *took >= PLUGIN_DEFAULT_TIMEOUT - Duration::from_millis(500),
            "{what} exec {i}: ended after {took:?}, before the deadline: not the deadline that ended it"
        );
    }
    runs.assert_inside_kubelets_timeout(what);
}

#[test]
fn token_exchange_against_a_silent_endpoint_ends_at_the_plugins_deadline() {
    let silent = Silent::start();
    let url = silent.url();
    let token = service_account_token(3600);
    // The default --timeout: what a node runs unless told otherwise.
    let runs = run_at_once(
        &["token-exchange", "--token-endpoint", &url],
        |_| request("v1", &format!("{EXCHANGE_REGISTRY}/team/app:v1"), Some(&token)),
        &[],
    );
    assert_ended_by_the_plugins_deadline(
        "token-exchange (silent)",
        &runs,
        "no answer within --timeout 20s from token endpoint",
    );
    for (out, _) in &runs.outputs {
        common::assert_no_piece_of(&token, &out.stderr);
    }
}

#[test]
fn ecr_against_a_silent_endpoint_ends_at_the_plugins_deadline() {
    let silent = Silent::start();
    let keys = AwsKeys {
        access_key_id: "AKIDNODE".to_owned(),
        secret_access_key: "node-secret-key".to_owned(),
        session_token: None,
        expiration: None,
    };
    let env = ecr_env(&silent.url(), &keys);
    let runs = run_at_once(
        &["ecr"],
        |_| request("v1", &format!("{ECR_REGISTRY}/team/app:v1"), None),
        &borrowed(&env),
    );
    assert_ended_by_the_plugins_deadline(
        "ecr (silent)",
        &runs,
        "GetAuthorizationToken: no answer within the deadline",
    );
    for (out, _) in &runs.outputs {
        assert!(out.stderr.contains(ECR_REGISTRY), "{}", out.stderr);
        assert!(!out.stderr.contains("node-secret-key"), "{}", out.stderr);
    }
}
