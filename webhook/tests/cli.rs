//! The `review` subcommand, end to end through the built binary.

mod common;

use std::io::Write as _;
use std::process::{Command, Output, Stdio};

use common::*;
use serde_json::Value;

fn run(args: &[&str], envs: &[(&str, &str)], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pv-topology-webhook"))
        .args(args)
        .env_remove("PV_TOPOLOGY_WEBHOOK_RULES")
        .env_remove("PV_TOPOLOGY_WEBHOOK_ON_LOOKUP_ERROR")
        .envs(envs.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The binary may exit before reading stdin (bad rules file): ignore a broken pipe.
    let _ = child.stdin.take().unwrap().write_all(stdin);
    child.wait_with_output().unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

fn assert_one_line_error(output: &Output, needle: &str) {
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(output.stdout.is_empty(), "{output:?}");
    let message = stderr(output);
    assert_eq!(message.lines().count(), 1, "{message}");
    assert!(message.starts_with("pv-topology-webhook: "), "{message}");
    assert!(!message.starts_with("pv-topology-webhook: error: "), "{message}");
    assert!(message.contains(needle), "{message}");
}

#[tokio::test]
async fn review_answers_a_fixture_like_the_library() {
    let body = fixture("gce-pd-csi-zonal.json");
    let output = run(&["review"], &[], &body);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    // One code path: the binary's bytes are the library's bytes.
    assert_eq!(output.stdout, plain().review(&body).await.unwrap().body);
    let answer: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(answer["response"]["uid"], "7f0d2a51-0001-4c53-9d7e-gce-zonal");
    assert_eq!(answer["response"]["patchType"], "JSONPatch");
}

#[test]
fn review_uses_rules_files_from_flag_and_environment() {
    let rules = data_dir().join("rules.yaml");
    let rules = rules.to_str().unwrap();
    let body = fixture("rules-driver.json");
    for output in [
        run(&["review", "--rules", rules], &[], &body),
        run(&["review"], &[("PV_TOPOLOGY_WEBHOOK_RULES", rules)], &body),
    ] {
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        let answer: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(answer["response"]["auditAnnotations"]["outcome"], "labeled");
    }
    // Without the rules the driver is unknown.
    let output = run(&["review"], &[], &body);
    let answer: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(answer["response"]["auditAnnotations"]["outcome"], "unrecognized");
}

#[test]
fn bad_input_exits_1_with_a_message() {
    assert_one_line_error(&run(&["review"], &[], b"not json"), "input is not JSON");
    assert_one_line_error(&run(&["review"], &[], b""), "input is not JSON");
    assert_one_line_error(
        &run(&["review"], &[], br#"{"apiVersion":"v1","kind":"Pod"}"#),
        "not an admission.k8s.io/v1 AdmissionReview",
    );
    assert_one_line_error(
        &run(
            &["review"],
            &[],
            br#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{}}"#,
        ),
        "admission.k8s.io/v1beta1",
    );
    assert_one_line_error(
        &run(
            &["review"],
            &[],
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#,
        ),
        "it has no `request`",
    );
    // Valid JSON of the wrong shape is not called "not JSON" (serde_json reports an
    // enum given a number as a syntax error).
    let mut wrong_operation: Value = serde_json::from_slice(&fixture("nfs.json")).unwrap();
    wrong_operation["request"]["operation"] = serde_json::json!(5);
    assert_one_line_error(
        &run(&["review"], &[], &serde_json::to_vec(&wrong_operation).unwrap()),
        "not an admission.k8s.io/v1 AdmissionReview",
    );
    assert_one_line_error(
        &run(
            &["review"],
            &[],
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":1}}"#,
        ),
        "not an admission.k8s.io/v1 AdmissionReview",
    );
}

#[test]
fn bad_rules_file_exits_1_naming_index_and_reason() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rules.yaml");
    std::fs::write(
        &path,
        "rules:\n  - inTree: cinder\n    zones: [nova]\n  - driver: csi.example.com\n    zones: [a]\n",
    )
    .unwrap();
    let output = run(
        &["review", "--rules", path.to_str().unwrap()],
        &[],
        &fixture("nfs.json"),
    );
    assert_one_line_error(
        &output,
        "rules[1]: CSI driver \"csi.example.com\" has no built-in topology key",
    );
    assert!(stderr(&output).contains(path.to_str().unwrap()));
    assert_one_line_error(
        &run(&["review", "--rules", "/nonexistent.yaml"], &[], b""),
        "--rules: rules file /nonexistent.yaml: cannot read it",
    );
}

/// A usage error is one line with exit status 1, as every other error: it names the
/// environment variable when the bad value came from there (a systemd EnvironmentFile's
/// user fixes the variable, not a flag), else the flag, with the reason and a hint.
#[test]
fn usage_errors_are_one_line_naming_the_flag_or_the_variable() {
    const TIMEOUT: &str = "PV_TOPOLOGY_WEBHOOK_LOOKUP_TIMEOUT";
    let by_flag = run(&["review", "--lookup-timeout", "2"], &[], b"");
    assert_one_line_error(&by_flag, "invalid value for --lookup-timeout <DURATION>: ");
    assert_one_line_error(&by_flag, "use a Go duration such as");
    assert!(!stderr(&by_flag).contains(TIMEOUT), "{}", stderr(&by_flag));
    let by_env = run(&["review"], &[(TIMEOUT, "2")], b"");
    assert_one_line_error(
        &by_env,
        "invalid value in environment variable PV_TOPOLOGY_WEBHOOK_LOOKUP_TIMEOUT (--lookup-timeout <DURATION>): ",
    );
    assert_one_line_error(&by_env, "use a Go duration such as");
    // The flag outranks its variable: a bad flag is the flag's fault even when the
    // variable is set (well or badly).
    for value in ["2s", "2"] {
        let both = run(&["review", "--lookup-timeout=2"], &[(TIMEOUT, value)], b"");
        assert_one_line_error(&both, "invalid value for --lookup-timeout <DURATION>: ");
        assert!(!stderr(&both).contains(TIMEOUT), "{}", stderr(&both));
    }
    // A choice names its values.
    let choice = run(&["review", "--on-lookup-error", "maybe"], &[], b"");
    assert_one_line_error(&choice, "invalid value for --on-lookup-error");
    assert_one_line_error(&choice, "use one of: deny, allow");
    let choice = run(&["review"], &[("PV_TOPOLOGY_WEBHOOK_ON_LOOKUP_ERROR", "maybe")], b"");
    assert_one_line_error(&choice, "environment variable PV_TOPOLOGY_WEBHOOK_ON_LOOKUP_ERROR");
    assert_one_line_error(&choice, "use one of: deny, allow");
    // No subcommand, an unknown flag, a missing value: one line each, with the hint.
    assert_one_line_error(&run(&[], &[], b""), "a subcommand is required, one of: serve, review");
    assert_one_line_error(&run(&["review", "--bogus"], &[], b""), "--bogus");
    assert_one_line_error(&run(&["review", "--rules"], &[], b""), "--rules");
    assert_one_line_error(&run(&["nope"], &[], b""), "(see --help)");
}

#[test]
fn help_and_version_go_to_stdout_with_exit_status_0() {
    for args in [&["--help"][..], &["review", "--help"], &["--version"], &["help"]] {
        let output = run(args, &[], b"");
        assert_eq!(output.status.code(), Some(0), "{args:?}: {output:?}");
        assert!(output.stderr.is_empty(), "{args:?}: {output:?}");
        assert!(!output.stdout.is_empty(), "{args:?}: {output:?}");
    }
}
