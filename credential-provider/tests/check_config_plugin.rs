//! `check-config` says what will really run (issue 25 items 7 and 8): a
//! provider entry that runs this plugin has its `args` and `env` parsed by
//! the plugin's own command line, and the line the plugin would print at
//! every pull is reported with hints for upstream spellings; `--bin-dir`
//! finds the plugin under other names; `--kubelet-version` judges
//! `tokenAttributes`; `-o json`; exit 0 valid, 2 refused, 1 not checked
//! (one line on stderr).

mod common;

use common::{data, run, run_with_env};
use serde_json::Value;

fn plugin_args(name: &str) -> String {
    data("plugin-args").join(name).display().to_string()
}

fn configs(name: &str) -> String {
    data("configs").join(name).display().to_string()
}

fn check_json(args: &[&str]) -> (i32, Value) {
    let mut all = vec!["check-config", "-o", "json"];
    all.extend(args);
    let out = run(&all, b"");
    let report = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}: {}", out.stdout));
    (out.status, report)
}

/// Each case: the fixture, the field named, and what the line must say.
const REFUSED: [(&str, &str, &[&str]); 5] = [
    (
        "ecr-typo.yaml",
        "providers[0].args",
        &["--allowed-acount-id", "--allowed-account-id"],
    ),
    (
        "upstream-ecr.yaml",
        "providers[0].args",
        &["get-credentials", "ecr-credential-provider", "args: [ecr]"],
    ),
    (
        "upstream-gcp.yaml",
        "providers[0].args",
        &["--v", "klog", "--log-level"],
    ),
    (
        "env-timeout.yaml",
        "providers[1].env[1]",
        &["CLOUD_CREDENTIAL_PROVIDER_TIMEOUT", "--timeout", "\"5min\""],
    ),
    ("no-args.yaml", "providers[0].args", &["subcommand is required"]),
];

#[test]
fn our_plugins_arguments_are_judged_by_its_own_parser() {
    for (fixture, field, wants) in REFUSED {
        let path = plugin_args(fixture);
        let out = run(&["check-config", &path], b"");
        assert_eq!(out.status, 2, "{fixture}: {}{}", out.stdout, out.stderr);
        let line = out
            .stdout
            .lines()
            .find(|l| l.starts_with(&format!("{path}: {field}: ")))
            .unwrap_or_else(|| panic!("{fixture}: no line for {field}:\n{}", out.stdout));
        for want in wants {
            assert!(line.contains(want), "{fixture}: {want:?} missing in {line}");
        }
        assert_eq!(out.stdout.lines().count(), 1, "{fixture}: {}", out.stdout);
    }
}

/// The line reported is the one the plugin itself prints when kubelet runs
/// it with the entry's args and env.
#[test]
fn the_reported_line_is_the_plugins_own() {
    type Invocation<'a> = (&'a str, &'a [&'a str], &'a [(&'a str, &'a str)]);
    let cases: [Invocation; 5] = [
        ("ecr-typo.yaml", &["ecr", "--allowed-acount-id=123456789012"], &[]),
        ("upstream-ecr.yaml", &["get-credentials"], &[]),
        ("upstream-gcp.yaml", &["gcp", "--v=3"], &[]),
        (
            "env-timeout.yaml",
            &["ecr"],
            &[
                ("AWS_REGION", "eu-west-1"),
                ("CLOUD_CREDENTIAL_PROVIDER_TIMEOUT", "5min"),
            ],
        ),
        ("no-args.yaml", &[], &[]),
    ];
    for (fixture, args, env) in cases {
        let plugin = run_with_env(args, b"", env);
        assert_eq!(plugin.status, 1, "{fixture}: {}", plugin.stderr);
        let said = plugin.stderr.trim_end();
        assert!(!said.contains('\n'), "{said}");
        let (status, report) = check_json(&[&plugin_args(fixture)]);
        assert_eq!(status, 2, "{fixture}: {report}");
        let problem = &report["problems"][0];
        assert_eq!(problem["refused_by"], "plugin", "{fixture}: {report}");
        assert_eq!(problem["plugin_says"], said, "{fixture}: {report}");
    }
}

#[test]
fn good_arguments_and_other_plugins_entries_pass() {
    let path = plugin_args("good.yaml");
    let out = run(&["check-config", &path], b"");
    assert_eq!(out.status, 0, "{}{}", out.stdout, out.stderr);
    assert_eq!(out.stdout, format!("{path}: valid (2 providers)\n"));
    // check-config's own environment is not the plugin's: kubelet passes
    // the entry's env, which wins.
    let out = run_with_env(
        &["check-config", &path],
        b"",
        &[
            ("CLOUD_CREDENTIAL_PROVIDER_TIMEOUT", "99min"),
            ("CLOUD_CREDENTIAL_PROVIDER_ALLOWED_ACCOUNT_IDS", "x"),
        ],
    );
    assert_eq!(out.status, 0, "{}{}", out.stdout, out.stderr);
}

#[test]
fn a_second_name_is_judged_when_the_bin_dir_says_it_is_this_plugin() {
    let path = plugin_args("symlinked.yaml");
    // By name alone, ecr-pull is some other plugin.
    let out = run(&["check-config", &path], b"");
    assert_eq!(out.status, 0, "{}", out.stdout);

    let bin = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(
        env!("CARGO_BIN_EXE_cloud-credential-provider"),
        bin.path().join("ecr-pull"),
    )
    .unwrap();
    let dir = bin.path().display().to_string();
    for flag in ["--bin-dir", "--image-credential-provider-bin-dir"] {
        let out = run(&["check-config", flag, &dir, &path], b"");
        assert_eq!(out.status, 2, "{flag}: {}{}", out.stdout, out.stderr);
        assert!(
            out.stdout.starts_with(&format!("{path}: providers[0].args: ")) && out.stdout.contains("--timeout"),
            "{flag}: {}",
            out.stdout
        );
    }

    // A copy under another name (a hard link: the same file) counts too.
    let copy = tempfile::tempdir().unwrap();
    std::fs::hard_link(
        std::fs::canonicalize(env!("CARGO_BIN_EXE_cloud-credential-provider")).unwrap(),
        copy.path().join("ecr-pull"),
    )
    .or_else(|_| {
        std::fs::copy(
            env!("CARGO_BIN_EXE_cloud-credential-provider"),
            copy.path().join("ecr-pull"),
        )
        .map(drop)
    })
    .unwrap();
    let out = run(
        &["check-config", "--bin-dir", &copy.path().display().to_string(), &path],
        b"",
    );
    assert_eq!(out.status, 2, "{}", out.stdout);

    // kubelet exits at start when a binary is missing (kubelet v1.37.2 on
    // the cluster tier's real node, node_faults.rs: exit 1, "Failed to
    // register CRI auth plugins").
    let empty = tempfile::tempdir().unwrap();
    let out = run(
        &["check-config", "--bin-dir", &empty.path().display().to_string(), &path],
        b"",
    );
    assert_eq!(out.status, 2, "{}", out.stdout);
    assert!(
        out.stdout.contains("providers[0].name: ")
            && out.stdout.contains("ecr-pull")
            && out.stdout.contains("no executable")
            && out
                .stdout
                .contains("kubelet exits at start (1, \"Failed to register CRI auth plugins\")"),
        "{}",
        out.stdout
    );
    let out = run(&["check-config", "--bin-dir", "/nonexistent/bin", &path], b"");
    assert_eq!(out.status, 2, "{}", out.stdout);
    assert!(
        out.stdout.contains("/nonexistent/bin")
            && out
                .stdout
                .contains("kubelet exits at start (1, \"Failed to register CRI auth plugins\")"),
        "{}",
        out.stdout
    );
}

#[test]
fn token_attributes_are_judged_against_the_kubelet_version() {
    let path = plugin_args("token-attributes.yaml");
    for ok in [
        &[][..],
        &["--kubelet-version", "1.34"],
        &["--kubelet-version", "v1.37.2"],
    ] {
        let mut args = vec!["check-config", &path];
        args.extend(ok);
        let out = run(&args, b"");
        assert_eq!(out.status, 0, "{ok:?}: {}{}", out.stdout, out.stderr);
    }
    let out = run(&["check-config", "--kubelet-version", "1.33.4", &path], b"");
    assert_eq!(out.status, 2, "{}", out.stdout);
    for want in [
        "providers[0].tokenAttributes: ",
        "KubeletServiceAccountTokenForCredentialProviders",
        "providers[0].tokenAttributes.cacheType: ",
        "1.34",
    ] {
        assert!(out.stdout.contains(want), "{want:?} missing in {}", out.stdout);
    }
    // With the alpha gate on, 1.33 takes tokenAttributes but not cacheType.
    let out = run(
        &[
            "check-config",
            "--kubelet-version=1.33",
            "--kubelet-feature-gates=KubeletServiceAccountTokenForCredentialProviders=true",
            &path,
        ],
        b"",
    );
    assert_eq!(out.status, 2, "{}", out.stdout);
    assert_eq!(out.stdout.lines().count(), 1, "{}", out.stdout);
    assert!(
        out.stdout.contains("providers[0].tokenAttributes.cacheType: "),
        "{}",
        out.stdout
    );
    // Before 1.33 kubelet's config has no tokenAttributes.
    let out = run(&["check-config", "--kubelet-version", "1.32", &path], b"");
    assert_eq!(out.status, 2, "{}", out.stdout);
    assert!(
        out.stdout.contains("providers[0].tokenAttributes: ") && out.stdout.contains("1.33"),
        "{}",
        out.stdout
    );
    // The gate turned off on a later kubelet.
    let out = run(
        &[
            "check-config",
            "--kubelet-feature-gates",
            "KubeletServiceAccountTokenForCredentialProviders=false",
            &path,
        ],
        b"",
    );
    assert_eq!(out.status, 2, "{}", out.stdout);
    // A version that is none: a usage error naming the flag.
    let out = run(&["check-config", "--kubelet-version", "latest", &path], b"");
    assert_eq!(out.status, 1);
    assert!(
        out.stderr.contains("--kubelet-version") && !out.stderr.trim_end().contains('\n'),
        "{}",
        out.stderr
    );
}

#[test]
fn check_config_exit_statuses_and_json() {
    let (status, report) = check_json(&[&plugin_args("good.yaml")]);
    assert_eq!(status, 0);
    assert_eq!(report["verdict"], "valid");
    assert_eq!(report["providers"], 2);
    assert_eq!(report["problems"], Value::Array(vec![]));

    let (status, report) = check_json(&[&configs("bad-rules.yaml")]);
    assert_eq!(status, 2);
    assert_eq!(report["verdict"], "refused");
    let problems = report["problems"].as_array().unwrap();
    assert!(problems.len() > 5, "{report}");
    assert!(problems.iter().all(|p| p["refused_by"] == "kubelet"), "{report}");
    assert_eq!(problems[0]["field"], "providers[0].name");

    // Decoded, then refused by kubelet: 2; not read or not parsed: 1 with
    // no JSON (a_config_that_cannot_be_checked_is_one_line_on_stderr).
    for name in ["bad-kind.yaml", "bad-unknown-field.json", "dir-duplicate"] {
        let (status, report) = check_json(&[&configs(name)]);
        assert_eq!(status, 2, "{name}: {report}");
        assert_eq!(report["verdict"], "refused", "{name}: {report}");
        assert!(report["problems"][0]["message"].as_str().is_some(), "{name}: {report}");
    }
    let (_, report) = check_json(&[&configs("bad-unknown-field.json")]);
    assert_eq!(report["problems"][0]["field"], "providers[0].matchImage", "{report}");

    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken.yaml");
    std::fs::write(&broken, "apiVersion: [\n").unwrap();
    let out = run(&["check-config", &broken.display().to_string()], b"");
    assert_eq!((out.status, out.stdout.as_str()), (1, ""), "{}", out.stderr);
}

#[test]
fn check_config_and_explain_take_the_file_both_ways() {
    let path = configs("multi.yaml");
    let positional = run(&["check-config", &path], b"");
    let flag = run(&["check-config", "--config", &path], b"");
    assert_eq!(positional.status, 0);
    assert_eq!((flag.status, &flag.stdout), (0, &positional.stdout));
    let from_env = run_with_env(&["check-config"], b"", &[("CLOUD_CREDENTIAL_PROVIDER_CONFIG", &path)]);
    assert_eq!((from_env.status, &from_env.stdout), (0, &positional.stdout));
    let twice = run(&["check-config", "--config", &path, &path], b"");
    assert_eq!(twice.status, 1);
    assert!(twice.stderr.contains("--config"), "{}", twice.stderr);
    let none = run(&["check-config"], b"");
    assert_eq!(none.status, 1);
    assert!(none.stderr.contains("--config"), "{}", none.stderr);

    let image = "registry.example.com/team/app";
    let flag = run(&["explain", "--config", &path, image], b"");
    let positional = run(&["explain", &path, image], b"");
    assert_eq!(flag.status, 0, "{}", flag.stderr);
    assert_eq!((positional.status, &positional.stdout), (0, &flag.stdout));
    let twice = run(&["explain", "--config", &path, &path, image], b"");
    assert_eq!(twice.status, 1);
    assert!(twice.stderr.contains("--config"), "{}", twice.stderr);
    // The command line wins over the environment: PATH over the variable.
    let elsewhere = [("CLOUD_CREDENTIAL_PROVIDER_CONFIG", "/nonexistent/config.yaml")];
    let out = run_with_env(&["check-config", &path], b"", &elsewhere);
    assert_eq!((out.status, &out.stderr), (0, &String::new()), "{}", out.stdout);
    let out = run_with_env(&["explain", &path, image], b"", &elsewhere);
    assert_eq!((out.status, &out.stdout), (0, &flag.stdout), "{}", out.stderr);
    let no_image = run(&["explain", &path], b"");
    assert_eq!(no_image.status, 1);
    assert!(no_image.stderr.contains("IMAGE"), "{}", no_image.stderr);
}

/// A variable the plugin does not read is not a refusal (the plugin runs
/// without it) but is said: a typo in its name, an upstream plugin's.
#[test]
fn variables_without_effect_are_warnings() {
    let path = plugin_args("env-typo.yaml");
    let out = run(&["check-config", &path], b"");
    assert_eq!(out.status, 0, "{}{}", out.stdout, out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines[0], format!("{path}: valid (1 provider)"));
    assert_eq!(lines.len(), 3, "{}", out.stdout);
    assert!(
        lines[1].starts_with(&format!("{path}: providers[0].env[0]: warning: "))
            && lines[1].contains("did you mean CLOUD_CREDENTIAL_PROVIDER_TIMEOUT?"),
        "{}",
        lines[1]
    );
    assert!(
        lines[2].contains("providers[0].env[1]") && lines[2].contains("--cache-duration"),
        "{}",
        lines[2]
    );
    let (status, report) = check_json(&[&path]);
    assert_eq!((status, &report["verdict"]), (0, &Value::from("valid")));
    assert_eq!(report["warnings"].as_array().map(Vec::len), Some(2), "{report}");
}

/// The variable that stops the plugin after parsing, set by mistake where
/// kubelet runs it, fails every pull loudly (never an empty answer taken
/// for one), and check-config refuses it in an entry's env.
#[test]
fn the_check_only_variable_is_never_a_silent_answer() {
    let stdin = br#"{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderRequest","image":"registry.example.com/app"}"#;
    let docker_config = data("docker-config.json").display().to_string();
    let out = run_with_env(
        &["static", "--docker-config", &docker_config],
        stdin,
        &[("CLOUD_CREDENTIAL_PROVIDER_CHECK_ONLY", "check-config")],
    );
    assert_eq!(out.status, 3);
    assert_eq!(out.stdout, "");
    assert!(
        out.stderr.contains("CLOUD_CREDENTIAL_PROVIDER_CHECK_ONLY is set") && out.stderr.lines().count() == 1,
        "{}",
        out.stderr
    );
    // Another value is no request to stop: the plugin answers.
    let out = run_with_env(
        &["static", "--docker-config", &docker_config],
        stdin,
        &[("CLOUD_CREDENTIAL_PROVIDER_CHECK_ONLY", "1")],
    );
    assert_eq!(out.status, 0, "{}", out.stderr);

    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("c.yaml");
    let good = std::fs::read_to_string(data("plugin-args").join("good.yaml")).unwrap();
    let with_variable = good.replacen(
        "      - name: CLOUD_CREDENTIAL_PROVIDER_TIMEOUT",
        "      - name: CLOUD_CREDENTIAL_PROVIDER_CHECK_ONLY\n        value: check-config\n      - name: CLOUD_CREDENTIAL_PROVIDER_TIMEOUT",
        1,
    );
    assert_ne!(good, with_variable);
    std::fs::write(&config, with_variable).unwrap();
    let out = run(&["check-config", &config.display().to_string()], b"");
    assert_eq!(out.status, 2, "{}", out.stdout);
    assert!(
        out.stdout.contains("providers[0].env[0]: ") && out.stdout.contains("CLOUD_CREDENTIAL_PROVIDER_CHECK_ONLY"),
        "{}",
        out.stdout
    );
}

/// A config that cannot be checked (not found, not YAML) is an error, not a
/// verdict: one line on stderr with the program's prefix, exit 1, nothing on
/// stdout in either output format (as explain does it).
#[test]
fn a_config_that_cannot_be_checked_is_one_line_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken.yaml");
    std::fs::write(&broken, "providers: [\n").unwrap();
    let broken = broken.display().to_string();
    let missing = dir.path().join("nonexist.yaml").display().to_string();
    for (path, want) in [(&missing, "No such file"), (&broken, "broken.yaml")] {
        for format in ["text", "json"] {
            let out = run(&["check-config", "-o", format, path], b"");
            assert_eq!(out.status, 1, "{path} {format}: {}{}", out.stdout, out.stderr);
            assert_eq!(out.stdout, "", "{path} {format}: stdout");
            assert_eq!(out.stderr.lines().count(), 1, "{path} {format}: {}", out.stderr);
            assert!(
                out.stderr.starts_with("cloud-credential-provider: ") && out.stderr.contains(want),
                "{path} {format}: {}",
                out.stderr
            );
        }
    }
    let out = run(&["explain", "--config", &missing, "nginx"], b"");
    assert_eq!((out.status, out.stdout.as_str()), (1, ""));
    assert!(
        out.stderr.starts_with("cloud-credential-provider: cannot read"),
        "{}",
        out.stderr
    );
}

/// An AWS account ID is 12 digits: `abc` or 13 digits never matches a role's
/// account, so the plugin refuses it at parse time and check-config says so,
/// naming the flag or the variable.
#[test]
fn a_malformed_account_id_is_refused_by_the_plugin() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("c.yaml");
    let path = config.display().to_string();
    let entry = "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n- name: cloud-credential-provider\n  matchImages: [\"*.dkr.ecr.*.amazonaws.com\"]\n  defaultCacheDuration: 1m\n  apiVersion: credentialprovider.kubelet.k8s.io/v1\n";
    let cases = [
        (
            "  args: [ecr, --allowed-account-id=abc]\n",
            "providers[0].args",
            "--allowed-account-id",
        ),
        (
            "  args: [ecr]\n  env: [{name: CLOUD_CREDENTIAL_PROVIDER_ALLOWED_ACCOUNT_IDS, value: \"123456789012,1234567890123\"}]\n",
            "providers[0].env[0]",
            "CLOUD_CREDENTIAL_PROVIDER_ALLOWED_ACCOUNT_IDS",
        ),
    ];
    for (rest, field, names) in cases {
        std::fs::write(&config, format!("{entry}{rest}")).unwrap();
        let out = run(&["check-config", &path], b"");
        assert_eq!(out.status, 2, "{rest}: {}{}", out.stdout, out.stderr);
        let line = out.stdout.lines().next().unwrap_or_default();
        assert!(line.starts_with(&format!("{path}: {field}: ")), "{line}");
        assert!(line.contains(names) && line.contains("12 digits"), "{line}");
    }
}

/// `--kubelet-version` knows which API versions a kubelet serves (v1alpha1
/// from 1.20, v1beta1 from 1.24, v1 from 1.26; none removed as of 1.37)
/// and that it reads a config directory only from 1.34.
#[test]
fn api_versions_and_directories_are_judged_for_the_kubelet_version() {
    let versions = |name: &str| data("kubelet-versions").join(name).display().to_string();
    let cases: [(&str, &str, &str); 4] = [
        ("v1.yaml", "1.25", "1.26"),
        ("v1beta1.yaml", "1.23", "1.24"),
        ("v1alpha1.yaml", "1.19", "1.20"),
        ("v1beta1.yaml", "1.37", "1.37"),
    ];
    for (file, too_old, first) in cases {
        let path = versions(file);
        let version = file.trim_end_matches(".yaml");
        if too_old != first {
            let out = run(&["check-config", "--kubelet-version", too_old, &path], b"");
            assert_eq!(out.status, 2, "{file} at {too_old}: {}{}", out.stdout, out.stderr);
            for field in ["apiVersion", "providers[0].apiVersion"] {
                let line = out
                    .stdout
                    .lines()
                    .find(|l| l.starts_with(&format!("{path}: {field}: ")))
                    .unwrap_or_else(|| panic!("{file} at {too_old}: no {field} line:\n{}", out.stdout));
                assert!(
                    line.contains(version) && line.contains(&format!("kubelet {too_old}")) && line.contains(first),
                    "{line}"
                );
            }
        }
        let out = run(&["check-config", "--kubelet-version", first, &path], b"");
        assert_eq!(out.status, 0, "{file} at {first}: {}{}", out.stdout, out.stderr);
    }
    let dir = configs("dir-ok");
    let out = run(&["check-config", "--kubelet-version", "1.31", &dir], b"");
    assert_eq!(out.status, 2, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout.starts_with(&format!("{dir}: ")) && out.stdout.contains("directory") && out.stdout.contains("1.34"),
        "{}",
        out.stdout
    );
    let out = run(&["check-config", "--kubelet-version", "1.34", &dir], b"");
    assert_eq!(out.status, 0, "{}{}", out.stdout, out.stderr);
}
