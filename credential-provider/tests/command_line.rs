//! Command-line mistakes reach kubelet's log as one line each: kubelet logs
//! the plugin's stderr, and a usage text over several lines reads as several
//! unrelated log entries.

mod common;

use common::{assert_one_line_failure, request, run, run_with_env};

#[test]
fn flag_errors_are_one_line_naming_the_flag() {
    let stdin = request("v1", "registry.example.com/app", None);
    let cases: [(&[&str], &str); 7] = [
        (
            &["static", "--docker-config", "c.json", "--cache-duration=abc"],
            "--cache-duration",
        ),
        (
            &[
                "token-exchange",
                "--token-endpoint",
                "http://127.0.0.1/t",
                "--timeout=51s",
            ],
            "--timeout",
        ),
        (&["token-exchange"], "--token-endpoint"),
        (&["static", "--docker-config", "c.json", "--bogus"], "--bogus"),
        (
            &[
                "static",
                "--docker-config",
                "c.json",
                "--cache-duration",
                "1m\nE1130 12:00:00 forged",
            ],
            "--cache-duration",
        ),
        (&[], "subcommand"),
        (&["no-such-backend"], "no-such-backend"),
    ];
    for (args, want) in cases {
        let out = run(args, &stdin);
        assert_one_line_failure(&format!("{args:?}"), &out, want);
        assert!(out.stderr.starts_with("cloud-credential-provider: "), "{}", out.stderr);
    }
    // A value from the provider's env is reported the same way, naming the
    // variable: the fix goes in the config's `env`, not in its `args`.
    let out = run_with_env(
        &["token-exchange", "--token-endpoint", "http://127.0.0.1/t"],
        &stdin,
        &[("CLOUD_CREDENTIAL_PROVIDER_TIMEOUT", "51s")],
    );
    assert_one_line_failure(
        "timeout from env",
        &out,
        "cloud-credential-provider: invalid value in environment variable CLOUD_CREDENTIAL_PROVIDER_TIMEOUT (--timeout <DURATION>): \"51s\" is out of range",
    );
    // The flag outranks its variable: a bad flag is named even with the variable set.
    let out = run_with_env(
        &[
            "token-exchange",
            "--token-endpoint",
            "http://127.0.0.1/t",
            "--timeout=51s",
        ],
        &stdin,
        &[("CLOUD_CREDENTIAL_PROVIDER_TIMEOUT", "20s")],
    );
    assert_one_line_failure(
        "timeout by flag, env set",
        &out,
        "invalid value for --timeout <DURATION>: ",
    );
    assert!(
        !out.stderr.contains("CLOUD_CREDENTIAL_PROVIDER_TIMEOUT"),
        "{}",
        out.stderr
    );
    // A choice names its values, from the flag or from the variable.
    let out = run(&["gcp", "--auth-flow", "nope"], &stdin);
    assert_one_line_failure("auth flow by flag", &out, "invalid value for --auth-flow");
    assert_one_line_failure("auth flow by flag", &out, "use one of: gcr, dockercfg, dockercfg-url");
    let out = run_with_env(&["gcp"], &stdin, &[("CLOUD_CREDENTIAL_PROVIDER_AUTH_FLOW", "nope")]);
    assert_one_line_failure(
        "auth flow from env",
        &out,
        "invalid value in environment variable CLOUD_CREDENTIAL_PROVIDER_AUTH_FLOW (--auth-flow",
    );
    assert_one_line_failure("auth flow from env", &out, "use one of: gcr, dockercfg, dockercfg-url");
    // A conflict with a flag set by a variable names the variable.
    let out = run_with_env(
        &[
            "gcp",
            "--identity-provider",
            "https://idp.example.com",
            "--project-id",
            "my-project",
        ],
        &stdin,
        &[("CLOUD_CREDENTIAL_PROVIDER_STS_AUDIENCE", "aud")],
    );
    assert_one_line_failure(
        "conflict from env",
        &out,
        "--sts-audience <AUDIENCE> (set by environment variable CLOUD_CREDENTIAL_PROVIDER_STS_AUDIENCE)",
    );
}

#[test]
fn a_password_in_an_endpoint_flag_is_not_echoed() {
    let out = run(
        &[
            "token-exchange",
            "--token-endpoint",
            "https://user:hunter2@sts.example.com/token",
        ],
        &request("v1", "registry.example.com/app", None),
    );
    assert_one_line_failure("userinfo", &out, "--token-endpoint");
    assert!(!out.stderr.contains("hunter2"), "{}", out.stderr);
}

#[test]
fn help_and_version_still_succeed() {
    let out = run(&["--help"], b"");
    assert_eq!(out.status, 0);
    assert!(out.stdout.contains("token-exchange"), "{}", out.stdout);
    let out = run(&["--version"], b"");
    assert_eq!(out.status, 0);
}

/// Boolean flags take the usual spellings from their variables (clap's
/// BoolishValueParser: y/yes/t/true/on/1 and n/no/f/false/off/0, any case):
/// a systemd EnvironmentFile or a kubelet `env:` says `=1` as often as
/// `=true`. Proved by the refusal a required annotation gives before any
/// network call; the false spellings are judged by check-config (a pull
/// with them would go on to the cloud).
#[test]
fn boolean_variables_take_the_usual_spellings() {
    let stdin = request("v1", "123456789012.dkr.ecr.us-east-1.amazonaws.com/app", None);
    let gcp_stdin = request("v1", "us-docker.pkg.dev/p/r/app", None);
    for value in ["1", "yes", "on", "TRUE", "y", "t"] {
        let out = run_with_env(
            &["ecr"],
            &stdin,
            &[("CLOUD_CREDENTIAL_PROVIDER_REQUIRE_ROLE_ANNOTATION", value)],
        );
        assert_one_line_failure(value, &out, "--require-role-annotation is set");
        let out = run_with_env(
            &["gcp"],
            &gcp_stdin,
            &[
                ("CLOUD_CREDENTIAL_PROVIDER_REQUIRE_WORKLOAD_IDENTITY", value),
                ("GCE_METADATA_HOST", "127.0.0.1:9"),
            ],
        );
        assert_one_line_failure(value, &out, "--require-workload-identity is set");
    }
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("c.yaml");
    let entry = |value: &str| {
        format!(
            "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n- name: cloud-credential-provider\n  matchImages: [\"*.dkr.ecr.*.amazonaws.com\"]\n  defaultCacheDuration: 1m\n  apiVersion: credentialprovider.kubelet.k8s.io/v1\n  args: [ecr]\n  env: [{{name: CLOUD_CREDENTIAL_PROVIDER_REQUIRE_ROLE_ANNOTATION, value: \"{value}\"}}]\n"
        )
    };
    let path = config.display().to_string();
    for value in ["0", "no", "off", "false", "N", "1", "yes"] {
        std::fs::write(&config, entry(value)).unwrap();
        let out = run(&["check-config", &path], b"");
        assert_eq!(out.status, 0, "{value}: {}{}", out.stdout, out.stderr);
    }
    std::fs::write(&config, entry("maybe")).unwrap();
    let out = run(&["check-config", &path], b"");
    assert_eq!(out.status, 2, "{}", out.stdout);
    assert!(
        out.stdout.contains("CLOUD_CREDENTIAL_PROVIDER_REQUIRE_ROLE_ANNOTATION") && out.stdout.contains("maybe"),
        "{}",
        out.stdout
    );
}
