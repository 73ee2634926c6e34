//! Usage errors: one line on stderr, `node-ip-helper: ` then what is wrong and the
//! fix, with exit status 1 like every other error; the environment variable is named
//! when the bad value came from it (the unit's EnvironmentFile), the flag otherwise.
//! `--help` and `--version` print to stdout with exit status 0.

use std::process::{Command, Output};

/// `node-ip-helper ARGS…` with only `env` set of its variables. Every run here stops
/// at the command line, before looking at the host or a metadata service.
fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_node-ip-helper"));
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("NODE_IP_HELPER_") {
            command.env_remove(name);
        }
    }
    command
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("the binary runs")
}

/// Exit status 1, nothing on stdout, one line on stderr starting with the program's
/// name and containing each of `wanted`; that line.
fn one_error_line(output: &Output, wanted: &[&str]) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(output.stdout.is_empty(), "{output:?}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("node-ip-helper: "), "{stderr}");
    for want in wanted {
        assert!(stderr.contains(want), "{stderr:?} should contain {want:?}");
    }
    stderr
}

const VALUES: &str = "use one of: ipv4, ipv6, dual, dual-ipv6-primary";

#[test]
fn a_bad_flag_is_named_with_its_values() {
    let line = one_error_line(
        &run(&["detect", "--ip-family", "v4"], &[]),
        &[
            "node-ip-helper: invalid value for --ip-family <IP_FAMILY>: ",
            VALUES,
            "see --help",
        ],
    );
    assert!(!line.contains("NODE_IP_HELPER_IP_FAMILY"), "{line}");
    // The flag outranks its variable, set well or badly.
    for value in ["ipv4", "v4"] {
        let line = one_error_line(
            &run(
                &["write", "--env-file", "/nonexistent/kubelet.env", "--ip-family=v4"],
                &[("NODE_IP_HELPER_IP_FAMILY", value)],
            ),
            &["invalid value for --ip-family <IP_FAMILY>: "],
        );
        assert!(!line.contains("NODE_IP_HELPER_IP_FAMILY"), "{line}");
    }
}

#[test]
fn a_bad_variable_is_named() {
    one_error_line(
        &run(&["detect"], &[("NODE_IP_HELPER_IP_FAMILY", "v4")]),
        &[
            "node-ip-helper: invalid value in environment variable NODE_IP_HELPER_IP_FAMILY (--ip-family <IP_FAMILY>): ",
            VALUES,
        ],
    );
    // An empty variable is named as empty (clap would say "a value is required").
    one_error_line(
        &run(&["detect"], &[("NODE_IP_HELPER_IP_FAMILY", "")]),
        &[
            "node-ip-helper: environment variable NODE_IP_HELPER_IP_FAMILY (--ip-family <IP_FAMILY>) is empty: ",
            VALUES,
        ],
    );
    // A global flag's variable, under any subcommand.
    one_error_line(
        &run(
            &["check", "--node-ip", "10.0.0.1"],
            &[("NODE_IP_HELPER_LOG_LEVEL", "loud")],
        ),
        &[
            "invalid value in environment variable NODE_IP_HELPER_LOG_LEVEL (--log-level <LEVEL>): invalid log level \"loud\"",
        ],
    );
}

/// A boolean variable takes 1/0, yes/no, true/false, on/off (y/n, t/f), in
/// any case, or nothing (false); anything else is refused naming it. `check --node-ip` without
/// the cloud's addresses stops right after the command line.
#[test]
fn boolean_variables_take_the_usual_spellings() {
    let needs_addresses = "--node-ip needs the cloud's addresses";
    for value in ["1", "yes", "TRUE", "on", "0", "no", "off", "f", ""] {
        one_error_line(
            &run(
                &["check", "--node-ip", "10.0.0.1"],
                &[("NODE_IP_HELPER_SKIP_LOCAL_CHECK", value)],
            ),
            &[needs_addresses],
        );
    }
    one_error_line(
        &run(&["check", "--node-ip", "10.0.0.1", "--skip-local-check"], &[]),
        &[needs_addresses],
    );
    one_error_line(
        &run(
            &["check", "--node-ip", "10.0.0.1"],
            &[("NODE_IP_HELPER_SKIP_LOCAL_CHECK", "maybe")],
        ),
        &[
            "invalid value in environment variable NODE_IP_HELPER_SKIP_LOCAL_CHECK (--skip-local-check)",
            "\"maybe\" is not a boolean: use true or false (or 1/0, yes/no, on/off, y/n, t/f)",
        ],
    );
}

#[test]
fn other_usage_errors_are_one_line_too() {
    one_error_line(
        &run(&[], &[]),
        &["a subcommand is required, one of: detect, write, check", "see --help"],
    );
    one_error_line(&run(&["detect", "--bogus"], &[]), &["--bogus", "see --help"]);
    one_error_line(
        &run(&["write"], &[]),
        &["--env-file", "NODE_IP_HELPER_ENV_FILE", "see --help"],
    );
    one_error_line(&run(&["nope"], &[]), &["nope", "see --help"]);
}

#[test]
fn help_and_version_go_to_stdout_with_exit_status_0() {
    for args in [&["--help"][..], &["detect", "--help"], &["--version"]] {
        let output = run(args, &[]);
        assert_eq!(output.status.code(), Some(0), "{args:?}: {output:?}");
        assert!(output.stderr.is_empty(), "{args:?}: {output:?}");
        assert!(!output.stdout.is_empty(), "{args:?}: {output:?}");
    }
}
