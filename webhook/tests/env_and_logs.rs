//! What docs/webhook.md promises of the command line and the logs: every flag of
//! `serve`, `review`, `audit` and `repair` (and the global ones) has its `PV_TOPOLOGY_WEBHOOK_*`
//! environment variable and the binary reads it (a switch's takes 1/0, yes/no, on/off
//! and the other boolish spellings, each switch seen to take effect); `serve` runs
//! configured by the environment alone; `--log-format json` writes one JSON object per
//! line, the answer's line carrying the request's uid, kind, name and outcome.

mod audit_support;
mod common;

use std::net::SocketAddr;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use clap::CommandFactory as _;
use common::net::*;
use common::*;
use pv_topology_webhook::cli::Cli;
use serde_json::Value;
use tokio::net::TcpStream;

const PREFIX: &str = "PV_TOPOLOGY_WEBHOOK_";

/// The variable a flag's long name gives: `--lookup-cache-ttl` → `PV_TOPOLOGY_WEBHOOK_LOOKUP_CACHE_TTL`.
fn variable_of(long: &str) -> String {
    format!("{PREFIX}{}", long.to_uppercase().replace('-', "_"))
}

/// The flags that take a value or are switches (not --help, --version) of `command`,
/// with their long names, environment variables and whether they are switches.
fn flags(command: &clap::Command) -> Vec<(String, Option<String>, bool)> {
    command
        .get_arguments()
        .filter(|arg| !matches!(arg.get_action(), clap::ArgAction::Help | clap::ArgAction::Version))
        .map(|arg| {
            let long = arg
                .get_long()
                .unwrap_or_else(|| panic!("{:?} has no long name", arg.get_id()));
            (
                long.to_owned(),
                arg.get_env().map(|env| env.to_string_lossy().into_owned()),
                matches!(arg.get_action(), clap::ArgAction::SetTrue),
            )
        })
        .collect()
}

/// The global flags and those of the subcommands whose flags take variables, by
/// subcommand (`""`: global). `certs` (run by hand once, its table shows no variables)
/// and `sleep` (one positional duration) take none; a new subcommand must be placed.
fn every_flag() -> Vec<(&'static str, String, Option<String>, bool)> {
    let command = Cli::command();
    let mut out: Vec<_> = flags(&command).into_iter().map(|(l, e, s)| ("", l, e, s)).collect();
    for sub in command.get_subcommands() {
        let name = match sub.get_name() {
            "serve" => "serve",
            "review" => "review",
            "audit" => "audit",
            "repair" => "repair",
            "certs" | "sleep" => continue,
            other => panic!("a new subcommand {other}: do its flags take PV_TOPOLOGY_WEBHOOK_* variables?"),
        };
        out.extend(flags(sub).into_iter().map(|(l, e, s)| (name, l, e, s)));
    }
    out
}

#[test]
fn every_flag_has_the_variable_its_name_gives() {
    let flags = every_flag();
    for (sub, long, env, _) in &flags {
        assert_eq!(env.as_deref(), Some(variable_of(long).as_str()), "{sub} --{long}");
    }
    // The flags this test is about are all there (a flattened group lost would shrink it).
    for (sub, long) in [
        ("", "log-format"),
        ("", "log-level"),
        ("serve", "tls-cert-file"),
        ("serve", "client-ca-file"),
        ("serve", "header-read-timeout"),
        ("serve", "lookup-cache-ttl"),
        ("serve", "vsphere-lookup"),
        ("review", "validate"),
        ("review", "lookup-timeout"),
        ("audit", "fix-labels"),
        ("audit", "gce-zones"),
        ("repair", "apply"),
        ("repair", "wait"),
        ("repair", "aws-ebs-lookup"),
    ] {
        assert!(
            flags.iter().any(|(s, l, _, _)| *s == sub && l == long),
            "{sub} --{long} missing"
        );
    }
    assert!(flags.len() > 80, "{}", flags.len());
}

/// `pv-topology-webhook SUB ARGS…` with only `env` set of this program's variables
/// (any the test process has are removed).
fn run_with(sub: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_pv-topology-webhook"));
    command.arg(sub).args(args);
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with(PREFIX) {
            command.env_remove(name);
        }
    }
    command
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .expect("the binary runs")
}

/// The binary reads each variable: every flag that refuses a bad value as a usage error
/// (durations, addresses, counts, choices) refuses it the same way from its variable,
/// and every switch's variable refuses what is not a boolean (which spellings it
/// takes: [`switches_take_the_usual_spellings_from_their_variables`]). Flags that take
/// any text (file names, URLs) are shown read by the run
/// configured by the environment below, and by the other tests' runs. Each refusal is
/// one line with exit status 1 naming the flag, or the variable when it was the source.
#[test]
fn the_binary_reads_each_variable() {
    let refusal = |output: &Output| {
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        let refused = output.status.code() == Some(1)
            && stderr.lines().count() == 1
            && stderr.starts_with("pv-topology-webhook: invalid value ")
            && stderr.trim_end().ends_with("see --help)");
        refused.then_some(stderr)
    };
    let mut refused = Vec::new();
    for (sub, long, env, switch) in every_flag() {
        let env = env.expect("checked above");
        // Global flags are read under every subcommand; `review` reads stdin (null here).
        let sub = if sub.is_empty() { "review" } else { sub };
        // A switch takes no value on the command line; from its variable, a boolean.
        let by_flag = match switch {
            true => "a switch".to_owned(),
            false => match refusal(&run_with(sub, &[&format!("--{long}=not-a-value")], &[])) {
                Some(stderr) => stderr,
                None => continue,
            },
        };
        let by_env = refusal(&run_with(sub, &[], &[(&env, "not-a-value")]))
            .unwrap_or_else(|| panic!("{sub}: {env}=not-a-value was not refused as --{long} is: {by_flag}"));
        if !switch {
            assert!(
                by_flag.contains(&format!("invalid value for --{long}")),
                "--{long}: {by_flag}"
            );
            assert!(!by_flag.contains(&env), "--{long}: {by_flag}");
        }
        assert!(
            by_env.contains(&format!("invalid value in environment variable {env} (--{long}")),
            "{env}: {by_env}"
        );
        refused.push(env);
    }
    assert!(
        refused.len() >= 40,
        "only {} flags refuse a bad value: {refused:?}",
        refused.len()
    );
}

/// Whether the switch `--long` was on in a run that set it `given`: the value of its
/// variable, or the flag alone on the command line (`None`). Each switch shows its
/// effect from outside, without a network: a run whose output is neither the on nor
/// the off state (a usage error) fails the test.
fn switch_was_on(long: &str, given: Option<&str>, scratch: &std::path::Path) -> bool {
    let variable = variable_of(long);
    let (flag, set) = match given {
        None => (vec![format!("--{long}")], vec![]),
        Some(value) => (vec![], vec![(variable.as_str(), value)]),
    };
    let file = |name: &str| data_dir().join("files").join(name).to_string_lossy().into_owned();
    let write = |name: &str, text: &str| {
        let path = scratch.join(name);
        std::fs::write(&path, text).expect("written");
        path.to_string_lossy().into_owned()
    };
    let review = |args: &[String]| {
        let args: Vec<&str> = args.iter().chain(&flag).map(String::as_str).collect();
        // No cloud is ever asked: every run below stops before a lookup or needs none.
        let mut env = set.clone();
        env.extend([
            ("AWS_REGION", "eu-west-1"),
            ("AWS_EC2_METADATA_DISABLED", "true"),
            ("GCE_METADATA_HOST", "127.0.0.1:9"),
        ]);
        run_with("review", &args, &env)
    };
    let status = |output: &Output| {
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let what = format!("--{long} given as {given:?}");
    match long {
        // The lying PV is refused only by the validation.
        "validate" => match status(&review(&["-f".into(), file("lying-zone.yaml")])) {
            (Some(2), _) => true,
            (Some(0), _) => false,
            other => panic!("{what}: {other:?}"),
        },
        // A lookup on makes its driver's rule refused at start-up.
        "aws-ebs-lookup" | "gce-lookup" | "azure-disk-lookup" | "openstack-cinder-lookup" | "vsphere-lookup" => {
            let rules = write(
                "one-rule-per-lookup.yaml",
                "rules:\n  - driver: ebs.csi.aws.com\n    zones: [a]\n  - driver: pd.csi.storage.gke.io\n    zones: [a]\n  - driver: disk.csi.azure.com\n    zones: [a]\n  - driver: cinder.csi.openstack.org\n    zones: [a]\n  - driver: csi.vsphere.vmware.com\n    zones: [a]\n",
            );
            let args = ["-f".into(), file("pd-zonal.yaml"), format!("--rules={rules}")];
            match status(&review(&args)) {
                (Some(1), stderr)
                    if stderr.contains(&format!("--{long}")) && stderr.contains("rules are tried before lookups") =>
                {
                    true
                }
                (Some(0), _) => false,
                other => panic!("{what}: {other:?}"),
            }
        }
        // An insecure config is refused unless the switch allows it.
        "openstack-allow-insecure-tls" => {
            let config = write(
                "insecure-cloud.conf",
                "[Global]\nauth-url = https://127.0.0.1:1/v3\nregion = RegionOne\nusername = u\nuser-domain-name = Default\npassword = p\ntenant-id = p\ntls-insecure = true\n",
            );
            let args = [
                "-f".into(),
                file("pd-zonal.yaml"),
                "--openstack-cinder-lookup".into(),
                format!("--openstack-cloud-config={config}"),
            ];
            match status(&review(&args)) {
                (Some(0), _) => true,
                (Some(1), stderr)
                    if stderr.contains("tls-insecure") && stderr.contains("--openstack-allow-insecure-tls") =>
                {
                    false
                }
                other => panic!("{what}: {other:?}"),
            }
        }
        "vsphere-allow-insecure-tls" => {
            let config = write(
                "insecure-vsphere.conf",
                "[VirtualCenter \"127.0.0.1\"]\nuser = \"u@vsphere.local\"\npassword = \"p\"\ninsecure-flag = \"true\"\n",
            );
            let args = [
                "-f".into(),
                file("pd-zonal.yaml"),
                "--vsphere-lookup".into(),
                format!("--vsphere-config={config}"),
                "--vsphere-endpoint=https://127.0.0.1:1/".into(),
            ];
            match status(&review(&args)) {
                (Some(0), _) => true,
                (Some(1), stderr)
                    if stderr.contains("insecure-flag") && stderr.contains("--vsphere-allow-insecure-tls") =>
                {
                    false
                }
                other => panic!("{what}: {other:?}"),
            }
        }
        // The audit patches the unlabelled PV only with --fix-labels.
        "fix-labels" => {
            let fake = audit_support::FakeApiserver::start(audit_support::cluster(vec![audit_support::pd(
                "unlabelled",
                false,
            )]));
            let kubeconfig = audit_support::kubeconfig(scratch, &fake.url());
            let flag: Vec<&str> = flag.iter().map(String::as_str).collect();
            let run = audit_support::audit(&kubeconfig, &flag, &set, Duration::from_secs(20));
            match (run.code, fake.count("PATCH")) {
                (Some(0), 1) => true,
                (Some(2), 0) => false,
                other => panic!("{what}: {other:?}: {run:?}"),
            }
        }
        // repair says at once what the run will do, before reaching for the cluster
        // (here a kubeconfig that is not there: exit status 1 naming it).
        "apply" | "allow-in-use" | "all" => {
            let missing = scratch.join("no-such-kubeconfig").to_string_lossy().into_owned();
            let mut args = vec!["--kubeconfig".to_owned(), missing];
            if long != "all" {
                args.extend(["--pv".to_owned(), "data-0".to_owned()]);
            }
            args.extend(flag.iter().cloned());
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let (code, stderr) = status(&run_with("repair", &args, &set));
            assert_eq!(code, Some(1), "{what}: {stderr}");
            let reached = stderr.contains("no-such-kubeconfig");
            match long {
                "apply" if reached => !stderr.contains("repair: the plan only: nothing is changed"),
                "allow-in-use" if reached => stderr.contains("repair: --allow-in-use: "),
                // Without --all (nor --pv) the command line is incomplete.
                "all" => reached,
                _ => panic!("{what}: {stderr}"),
            }
        }
        other => panic!("a new switch --{other}: add how its effect shows to switch_was_on"),
    }
}

/// A switch's variable takes the spellings a systemd EnvironmentFile or a pod's `env:`
/// commonly writes (clap's boolish ones: y/yes/t/true/on/1, n/no/f/false/off/0, any
/// case), each switch's 1 and 0 take effect, the flag alone still turns it on, and
/// another value is refused in one line naming the variable and the spellings.
#[test]
fn switches_take_the_usual_spellings_from_their_variables() {
    let scratch = tempfile::tempdir().expect("a temporary directory");
    let mut switches: Vec<String> = every_flag()
        .into_iter()
        .filter(|(_, _, _, switch)| *switch)
        .map(|(_, long, _, _)| long)
        .collect();
    // The lookups' switches are one definition under serve, review and audit.
    switches.sort();
    switches.dedup();
    assert!(switches.len() >= 8, "{switches:?}");
    for long in &switches {
        let variable = variable_of(long);
        assert!(switch_was_on(long, None, scratch.path()), "--{long} alone");
        assert!(switch_was_on(long, Some("1"), scratch.path()), "{variable}=1");
        assert!(!switch_was_on(long, Some("0"), scratch.path()), "{variable}=0");
    }
    for on in ["y", "yes", "t", "true", "on", "1", "YES", "True", "On"] {
        assert!(switch_was_on("validate", Some(on), scratch.path()), "{on}");
    }
    for off in ["n", "no", "f", "false", "off", "0", "NO", "False", "OFF"] {
        assert!(!switch_was_on("validate", Some(off), scratch.path()), "{off}");
    }
    let lying = data_dir().join("files/lying-zone.yaml");
    let output = run_with(
        "review",
        &["-f", lying.to_str().expect("UTF-8")],
        &[("PV_TOPOLOGY_WEBHOOK_VALIDATE", "maybe")],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    for word in [
        "pv-topology-webhook: invalid value in environment variable PV_TOPOLOGY_WEBHOOK_VALIDATE (--validate)",
        "\"maybe\"",
        "1/0, yes/no, on/off",
        "fix or unset the variable",
    ] {
        assert!(stderr.contains(word), "{word:?} not in {stderr}");
    }
}

/// `GET path` over plain HTTP/1.0: status and body.
async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut tcp = TcpStream::connect(addr).await.expect("connect");
    tcp.write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())
        .await
        .expect("write");
    let mut out = Vec::new();
    tcp.read_to_end(&mut out).await.expect("read");
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status line");
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// A server process killed if the test fails before stopping it (a leaked child would
/// keep the test harness's output pipe open).
struct Guard(Option<std::process::Child>);

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// SIGTERM, then the output.
async fn stop(mut guard: Guard) -> Output {
    let child = guard.0.take().expect("running");
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .expect("join")
        .expect("the server's output")
}

/// Every stderr line is a JSON object; returns them.
fn json_lines(stderr: &[u8]) -> Vec<Value> {
    let text = String::from_utf8_lossy(stderr);
    assert!(!text.trim().is_empty(), "nothing logged");
    text.lines()
        .map(|line| {
            let value: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
            assert!(value.is_object(), "{line}");
            assert!(value["timestamp"].is_string() && value["level"].is_string(), "{line}");
            value
        })
        .collect()
}

/// The JSON line of the answer to the request `uid`.
fn answer_line<'a>(lines: &'a [Value], uid: &str) -> &'a Value {
    lines
        .iter()
        .find(|l| l["message"] == "admission answered" && l["span"]["uid"] == uid)
        .unwrap_or_else(|| panic!("no answer line for {uid}: {lines:#?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_carry_the_request_on_every_answer_line() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ca = TestCa::new("ca");
    let files = write_pair(dir.path(), &ca.server());
    let server = spawn_serve(
        &["--log-format", "json", "--log-level", "info"],
        &files,
        &["--shutdown-delay", "0s"],
    )
    .await;
    let addr = server.addr;
    let server = Guard(Some(server.child));
    let body = fixture("gce-pd-csi-zonal.json");
    let (status, _, _) = post_once(addr, default_client(&ca.pem), &body).await.expect("a review");
    assert_eq!(status, 200);
    let nfs = fixture("nfs.json");
    let (status, _, _) = post_once(addr, default_client(&ca.pem), &nfs).await.expect("a review");
    assert_eq!(status, 200);
    let (status, _, _) = post_once(addr, default_client(&ca.pem), b"not json")
        .await
        .expect("a bad review");
    assert_eq!(status, 400);
    let output = stop(server).await;
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let lines = json_lines(&output.stderr);
    for (fixture, outcome) in [(&body, "labeled"), (&nfs, "unrecognized")] {
        let request: Value = serde_json::from_slice(fixture).expect("fixture");
        let request = &request["request"];
        let uid = request["uid"].as_str().expect("uid");
        let line = answer_line(&lines, uid);
        assert_eq!(line["level"], "INFO", "{line}");
        assert_eq!(line["span"]["kind"], "PersistentVolume", "{line}");
        // The object's name has its own field: in JSON, the span's `name` is the span's.
        assert_eq!(line["span"]["object_name"], request["name"], "{line}");
        assert_eq!(line["span"]["name"], "admission", "{line}");
        assert_eq!(line["span"]["outcome"], outcome, "{line}");
        assert_eq!(line["allowed"], true, "{line}");
        assert_eq!(line["status"], 200, "{line}");
    }
    let bad = lines
        .iter()
        .find(|l| l["message"] == "admission answered" && l["status"] == 400)
        .unwrap_or_else(|| panic!("no line for the bad request: {lines:#?}"));
    assert_eq!(bad["span"]["outcome"], "bad-request", "{bad}");
    assert!(lines.iter().any(|l| l["message"] == "serving"), "{lines:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_runs_configured_by_the_environment_alone() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ca = TestCa::new("ca");
    let files = write_pair(dir.path(), &ca.server());
    let (port, metrics_port) = (free_port(), free_port());
    let rules = data_dir().join("rules.yaml");
    let mut command = Command::new(env!("CARGO_BIN_EXE_pv-topology-webhook"));
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with(PREFIX) {
            command.env_remove(name);
        }
    }
    let listen = format!("127.0.0.1:{port}");
    let metrics_listen = format!("127.0.0.1:{metrics_port}");
    let env = [
        ("TLS_CERT_FILE", files.cert.path.to_str().expect("UTF-8")),
        ("TLS_KEY_FILE", files.key.path.to_str().expect("UTF-8")),
        ("LISTEN", &listen),
        ("METRICS_LISTEN", &metrics_listen),
        ("SHUTDOWN_DELAY", "0s"),
        ("HEADER_READ_TIMEOUT", "1s"),
        ("RULES", rules.to_str().expect("UTF-8")),
        ("LOG_FORMAT", "json"),
        ("LOG_LEVEL", "info"),
    ];
    let mut child = Guard(Some(
        command
            .arg("serve")
            .envs(env.iter().map(|(k, v)| (format!("{PREFIX}{k}"), *v)))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("serve starts"),
    ));
    let (addr, metrics): (SocketAddr, SocketAddr) = (
        listen.parse().expect("address"),
        metrics_listen.parse().expect("address"),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while get_status(metrics, "/readyz").await.ok() != Some(200) {
        let process = child.0.as_mut().expect("running");
        if Instant::now() > deadline || process.try_wait().expect("wait").is_some() {
            let _ = process.kill();
            panic!("never ready: {:?}", child.0.take().expect("running").wait_with_output());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The rules file from the environment resolves the example driver.
    let body = fixture("rules-driver.json");
    let (status, answer, _) = post_once(addr, default_client(&ca.pem), &body).await.expect("a review");
    assert_eq!(status, 200);
    let answer: Value = serde_json::from_slice(&answer).expect("JSON answer");
    assert_eq!(answer["response"]["auditAnnotations"]["outcome"], "labeled", "{answer}");
    // The header read timeout from the environment (not the 10 s default) closes a
    // connection that sends nothing.
    let started = Instant::now();
    let mut silent = TcpStream::connect(addr).await.expect("connect");
    assert!(
        closed_within(&mut silent, Duration::from_secs(5)).await.is_some(),
        "a silent connection outlived PV_TOPOLOGY_WEBHOOK_HEADER_READ_TIMEOUT=1s"
    );
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    let (status, text) = get(metrics, "/metrics").await;
    assert_eq!(status, 200);
    assert!(
        text.contains(
            "pv_topology_webhook_admission_requests_total{outcome=\"labeled\",allowed=\"true\",check=\"mutate\"} 1"
        ),
        "{text}"
    );
    let output = stop(child).await;
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    // JSON logs at info, from the environment.
    let lines = json_lines(&output.stderr);
    answer_line(&lines, "7f0d2a51-0007-4c53-9d7e-rules");
}
