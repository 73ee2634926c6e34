//! `explain` and `check-config` against real config files and the shipped
//! manifests.

mod common;

use std::path::PathBuf;

use common::{data, run};

fn configs(name: &str) -> String {
    data("configs").join(name).display().to_string()
}

fn manifests() -> Vec<PathBuf> {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../manifests/credential-provider"));
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

/// The providers kubelet runs for `image` (`-o json`'s `runs`); exit 0
/// when there are some, 2 when there are none.
fn explain(config: &str, image: &str) -> Vec<String> {
    let out = run(&["explain", "-o", "json", "--config", config, image], b"");
    let report: serde_json::Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.stderr));
    let runs: Vec<String> = serde_json::from_value(report["runs"].clone()).unwrap();
    assert_eq!(out.status, if runs.is_empty() { 2 } else { 0 }, "{}", out.stderr);
    runs
}

#[test]
fn explain_lists_matching_providers_in_config_order() {
    let config = configs("multi.yaml");
    let cases: [(&str, &[&str]); 8] = [
        ("123456789012.dkr.ecr.eu-west-1.amazonaws.com/app:v1", &["ecr-like"]),
        ("123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn/app", &["ecr-like"]),
        ("registry.example.com/team/app", &["team-registry", "whole-registry"]),
        ("registry.example.com/teams/app", &["team-registry", "whole-registry"]),
        (
            "registry.example.com/other/app@sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            &["whole-registry"],
        ),
        ("registry.example.com:5000/app", &["team-registry"]),
        ("quay.io/org/app", &[]),
        ("nginx", &[]),
    ];
    for (image, want) in cases {
        assert_eq!(explain(&config, image), want, "{image}");
    }
}

/// kubelet does not pull a reference it cannot parse, so no provider runs:
/// `explain` says so instead of matching its text (the cluster tier's
/// differential_match.rs compares this with kubelet's ParseImageName).
#[test]
fn explain_refuses_an_image_kubelet_cannot_parse() {
    let config = configs("multi.yaml");
    for image in [
        "registry.example.com/Team/app",
        "registry.example.com/app@sha256:00",
        "registry.example.com/app:",
    ] {
        let out = run(&["explain", "--config", &config, "--", image], b"");
        assert_eq!(out.status, 1, "{image}: {}", out.stdout);
        assert_eq!(out.stdout, "", "{image}");
        assert!(
            out.stderr.contains("kubelet cannot parse image") && out.stderr.contains(image),
            "{image}: {}",
            out.stderr
        );
    }
}

#[test]
fn explain_reads_a_directory_in_lexical_order() {
    let dir = configs("dir-ok");
    assert_eq!(explain(&dir, "extra.example.org/x"), ["extra"]);
    assert_eq!(
        explain(&dir, "registry.example.com/team/x"),
        ["team-registry", "whole-registry"]
    );
}

/// Issue 9's re-test: a provider name is text from the config, escaped as
/// every other such text, so it cannot forge lines or colour a terminal.
#[test]
fn explain_escapes_provider_names() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ansi.yaml");
    std::fs::write(
        &file,
        format!(
            "{HEADER}providers:\n- name: \"a\\n\\u001b[31mFORGED\\u202e\"\n  matchImages: [\"x.io\"]\n  defaultCacheDuration: 1h\n  apiVersion: credentialprovider.kubelet.k8s.io/v1\n"
        ),
    )
    .unwrap();
    let out = run(&["explain", &file.display().to_string(), "x.io/app"], b"");
    assert_eq!(out.status, 0, "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    // The summary, the provider, its pattern, its record, the verification.
    assert_eq!(lines.len(), 5, "{}", out.stdout);
    assert!(
        lines[0].ends_with("kubelet runs a\\n\\u{1b}[31mFORGED\\u{202e}"),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].starts_with("a\\n\\u{1b}[31mFORGED\\u{202e}: runs ("),
        "{}",
        lines[1]
    );
    assert!(
        !out.stdout.contains('\u{1b}') && !out.stdout.contains('\u{202e}'),
        "{}",
        out.stdout
    );
}

#[test]
fn explain_refuses_a_config_it_cannot_read() {
    let out = run(&["explain", "--config", &configs("bad-kind.yaml"), "nginx"], b"");
    assert_eq!(out.status, 1);
    assert!(out.stderr.contains("KubeletConfiguration"), "{}", out.stderr);
}

#[test]
fn shipped_manifests_pass_check_config() {
    let files = manifests();
    assert!(files.len() >= 3, "one example per backend: {files:?}");
    for file in files {
        let path = file.display().to_string();
        let out = run(&["check-config", &path], b"");
        assert_eq!(out.status, 0, "{path}: {}{}", out.stdout, out.stderr);
        assert!(out.stdout.contains("valid"), "{}", out.stdout);
    }
}

/// The shipped `gcp` manifest covers Google's registries (the keys the
/// `gcp` backend answers with) and nothing else.
#[test]
fn explain_knows_the_shipped_gcp_manifest() {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../manifests/credential-provider"));
    let config = dir.join("gcp.yaml").display().to_string();
    for image in [
        "us-docker.pkg.dev/my-project/apps/web:v1",
        "europe-west4-docker.pkg.dev/p/r/app",
        "gcr.io/my-project/app",
        "eu.gcr.io/my-project/app@sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "container.cloud.google.com/x/y",
    ] {
        assert_eq!(explain(&config, image), ["cloud-credential-provider"], "{image}");
    }
    for image in ["nginx", "a.b.gcr.io/x", "pkg.dev/x", "quay.io/x/y"] {
        assert!(explain(&config, image).is_empty(), "{image}");
    }
}

/// The shipped `acr` manifest covers the clouds' ACR suffixes and the
/// mirrored registry, and nothing else.
#[test]
fn explain_knows_the_shipped_acr_manifest() {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../manifests/credential-provider"));
    let config = dir.join("acr.yaml").display().to_string();
    for image in [
        "myregistry.azurecr.io/team/app:v1",
        "demo.azurecr.cn/app",
        "demo.azurecr.us/app@sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "mcr.microsoft.com/oss/nginx/nginx:1.27",
    ] {
        assert_eq!(explain(&config, image), ["cloud-credential-provider"], "{image}");
    }
    for image in [
        "nginx",
        "a.b.azurecr.io/x",
        "azurecr.io/x",
        "demo.azurecr.de/x",
        "quay.io/x/y",
    ] {
        assert!(explain(&config, image).is_empty(), "{image}");
    }
}

#[test]
fn check_config_lists_every_problem_with_its_field_path() {
    let out = run(&["check-config", &configs("bad-rules.yaml")], b"");
    assert_eq!(out.status, 2);
    let want = [
        "providers[0].name: Invalid value: \"bad/name\": provider name cannot contain '/'",
        "providers[0].apiVersion: Unsupported value: \"credentialprovider.kubelet.k8s.io/v2\"",
        "providers[0].matchImages[1]: Invalid value: \"bad host.example.com\": match image is invalid",
        "providers[0].defaultCacheDuration: Invalid value: invalid duration \"1d\"",
        "providers[1].name: Invalid value: \"bad name\": provider name cannot contain spaces",
        "providers[1].matchImages: Required value",
        "providers[1].defaultCacheDuration: Required value",
        "providers[1].tokenAttributes.serviceAccountTokenAudience: Required value",
        "providers[1].tokenAttributes: Forbidden: tokenAttributes is only supported for credentialprovider.kubelet.k8s.io/v1",
        "providers[1].tokenAttributes.requiredServiceAccountAnnotationKeys: Forbidden",
        "providers[1].tokenAttributes.cacheType: Unsupported value: \"Pod\"",
    ];
    for line in want {
        assert!(out.stdout.contains(line), "missing {line:?} in:\n{}", out.stdout);
    }
    assert!(out.stdout.lines().all(|l| l.starts_with(&configs("bad-rules.yaml"))));
}

#[test]
fn check_config_refuses_what_kubelet_cannot_decode() {
    // Exit 2: kubelet refuses it; 1: it could not be read.
    let cases = [
        (
            "bad-unknown-field.json",
            "providers[0].matchImage: unknown field `matchImage`",
            2,
        ),
        ("bad-kind.yaml", "kind \"KubeletConfiguration\" is wrong", 2),
        ("dir-duplicate", "duplicate provider name \"ecr-like\"", 2),
        ("bad-duplicate-name.yaml", "duplicate provider name \"same\"", 2),
        ("dir-empty", "no *.json, *.yaml or *.yml files", 2),
        ("missing.yaml", "cannot read", 1),
    ];
    for (name, want, status) in cases {
        let out = run(&["check-config", &configs(name)], b"");
        assert_eq!(out.status, status, "{name}");
        // No verdict (1) is an error on stderr; a verdict goes to stdout.
        let said = if status == 1 { &out.stderr } else { &out.stdout };
        assert!(said.contains(want), "{name}: {said:?} should contain {want:?}");
    }
}

#[test]
fn check_config_accepts_directories_and_every_config_version() {
    for name in ["dir-ok", "multi.yaml"] {
        let out = run(&["check-config", &configs(name)], b"");
        assert_eq!(out.status, 0, "{name}: {}", out.stdout);
    }
}

const HEADER: &str = "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\n";

#[test]
fn check_config_reads_regular_files_only() {
    // A directory with a link to /dev/zero, and one with a FIFO: refused at
    // once, naming the file, instead of eating memory or hanging.
    let zero_dir = tempfile::tempdir().unwrap();
    std::fs::write(zero_dir.path().join("10-ok.yaml"), format!("{HEADER}providers: []\n")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", zero_dir.path().join("20-zero.yaml")).unwrap();
    let fifo_dir = tempfile::tempdir().unwrap();
    common::mkfifo(&fifo_dir.path().join("a.yaml"));
    let big = tempfile::tempdir().unwrap();
    let big_file = big.path().join("big.yaml");
    std::fs::File::create(&big_file).unwrap().set_len(64 << 20).unwrap();
    let cases = [
        (zero_dir.path().to_owned(), "20-zero.yaml: is a character device"),
        (fifo_dir.path().to_owned(), "a.yaml: is a FIFO"),
        (big_file, "larger than"),
    ];
    for (path, want) in cases {
        let out = run(&["check-config", &path.display().to_string()], b"");
        assert_eq!((out.status, out.stdout.as_str()), (1, ""), "{path:?}");
        assert_eq!(out.stderr.lines().count(), 1, "{:?}", out.stderr);
        assert!(out.stderr.contains(want), "{:?} should contain {want:?}", out.stderr);
    }
}

#[test]
fn check_config_refuses_deep_nesting_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let deep = dir.path().join("deep.yaml");
    std::fs::write(
        &deep,
        format!("{HEADER}providers: {}{}\n", "[".repeat(100_000), "]".repeat(100_000)),
    )
    .unwrap();
    // Refused by the pre-scan, before the parser's quadratic work (the runner's
    // outer timeout catches a hang; no timing is asserted).
    let out = run(&["check-config", &deep.display().to_string()], b"");
    assert_eq!(out.status, 1);
    assert!(out.stderr.contains("deep.yaml"), "{}", out.stderr);
    assert!(out.stderr.contains("nested more than 32 levels deep"), "{}", out.stderr);

    // Flow style a few levels deep is fine, with a few brackets in strings.
    let moderate = dir.path().join("moderate.yaml");
    let flow = |brackets: &str| {
        format!(
            "{HEADER}# {brackets}\nproviders: [{{name: p, apiVersion: credentialprovider.kubelet.k8s.io/v1, matchImages: ['reg.io'], defaultCacheDuration: 1m, args: [\"{brackets}\"], env: [{{name: A, value: \"x\"}}]}}]\n"
        )
    };
    std::fs::write(&moderate, flow("[{[{")).unwrap();
    let out = run(&["check-config", &moderate.display().to_string()], b"");
    assert_eq!(out.status, 0, "{}", out.stdout);
    // Brackets inside quotes and comments count too (telling them apart
    // takes a YAML scanner, which a `"` in a plain scalar fooled): many of
    // them are refused, and the message says why.
    std::fs::write(&moderate, flow(&"[{".repeat(20))).unwrap();
    let out = run(&["check-config", &moderate.display().to_string()], b"");
    assert_eq!(out.status, 1, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("brackets inside quoted strings and comments count too"),
        "{}",
        out.stderr
    );
}

/// Issue 9's re-test: a `"` inside a plain scalar opens no quote; the
/// brackets after it are refused as any others.
#[test]
fn check_config_is_not_fooled_by_a_quote_in_a_plain_scalar() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("q.yaml");
    let n = 100_000;
    std::fs::write(
        &file,
        format!("{HEADER}x: [a:\", {}{}, b\"]\n", "[".repeat(n), "]".repeat(n)),
    )
    .unwrap();
    let out = run(&["check-config", &file.display().to_string()], b"");
    assert_eq!(out.status, 1);
    assert!(
        out.stderr.contains("q.yaml: nested more than 32 levels deep"),
        "{}",
        out.stderr
    );
}

#[test]
fn check_config_accepts_a_byte_order_mark() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bom.yaml");
    let mut bytes = b"\xEF\xBB\xBF".to_vec();
    bytes.extend(std::fs::read(data("configs").join("multi.yaml")).unwrap());
    std::fs::write(&file, bytes).unwrap();
    let out = run(&["check-config", &file.display().to_string()], b"");
    assert_eq!(out.status, 0, "{}", out.stdout);
}

fn kubelet_configs(name: &str) -> String {
    data("kubelet-config").join(name).display().to_string()
}

/// `explain` says what kubelet records of a pull with each provider's
/// credentials, and what the node's KubeletConfiguration verifies again.
#[test]
fn explain_tells_the_record_scope_and_the_verification() {
    let two = configs("two-audiences.yaml");
    let report = |image: &str, kubelet: Option<&str>| -> serde_json::Value {
        let mut args = vec!["explain", "-o", "json", "--config", &two];
        let path;
        if let Some(name) = kubelet {
            path = kubelet_configs(name);
            args.extend(["--kubelet-config", &path]);
        }
        args.push(image);
        let out = run(&args, b"");
        assert_eq!(out.status, 0, "{}", out.stderr);
        serde_json::from_str(&out.stdout).unwrap()
    };
    let record = |report: &serde_json::Value| {
        let running: Vec<&serde_json::Value> = report["providers"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["runs"] == true)
            .collect();
        assert_eq!(running.len(), 1, "{report}");
        running[0]["record"].clone()
    };
    let harbor = report("harbor.example.com/team/app:1", None);
    assert_eq!(
        record(&harbor),
        serde_json::json!({"scope": "service-account", "pods_without_one_node_wide": false})
    );
    assert_eq!(
        harbor["verification"]["policy"], "NeverVerifyPreloadedImages",
        "kubelet 1.35+ defaults"
    );
    assert_eq!(harbor["verification"]["kubelet_config"], serde_json::Value::Null);
    let node = report("cdn.example.net/app:1", None);
    assert_eq!(record(&node), serde_json::json!({"scope": "node"}));

    let allowed = report("harbor.example.com/base/debian:12", Some("allowlisted.yaml"));
    assert_eq!(allowed["verification"]["policy"], "NeverVerifyAllowlistedImages");
    assert_eq!(allowed["verification"]["allowlisted_by"], "harbor.example.com/base/*");
    assert!(
        allowed["verification"]["says"]
            .as_str()
            .unwrap()
            .contains("never verified")
    );
    let not_allowed = report("harbor.example.com/team/app:1", Some("allowlisted.yaml"));
    assert_eq!(not_allowed["verification"]["allowlisted_by"], serde_json::Value::Null);
    let off = report("harbor.example.com/team/app:1", Some("records-off.yaml"));
    assert_eq!(off["verification"]["records"], false);
    assert!(
        off["verification"]["says"]
            .as_str()
            .unwrap()
            .contains("keeps no pull records")
    );

    // The text: one record line under the provider that runs, one line on verification.
    let out = run(&["explain", "--config", &two, "harbor.example.com/team/app:1"], b"");
    let records: Vec<&str> = out.stdout.lines().filter(|l| l.starts_with("  record: ")).collect();
    assert_eq!(records.len(), 1, "{}", out.stdout);
    assert!(
        records[0].starts_with("  record: per service account: kubelet sends the pod's service-account token"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .lines()
            .last()
            .unwrap()
            .starts_with("once on the node (imagePullPolicy IfNotPresent or Never"),
        "{}",
        out.stdout
    );
}

#[test]
fn explain_refuses_a_kubelet_configuration_kubelet_would() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "imagePullCredentialsVerificationPolicy: Sometimes\n",
            "imagePullCredentialsVerificationPolicy \"Sometimes\"",
        ),
        (
            "preloadedImagesVerificationAllowlist: [\"reg.io/*\"]\n",
            "preloadedImagesVerificationAllowlist",
        ),
        (
            "imagePullCredentialsVerificationPolicy: [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\n",
            "nest",
        ),
    ];
    for (body, want) in cases {
        let path = dir.path().join("kubelet.yaml");
        std::fs::write(
            &path,
            format!("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n{body}"),
        )
        .unwrap();
        let out = run(
            &[
                "explain",
                "--config",
                &configs(TWO_AUDIENCES),
                "--kubelet-config",
                path.to_str().unwrap(),
                "harbor.example.com/a:1",
            ],
            b"",
        );
        common::assert_one_line_failure(body, &out, "--kubelet-config ");
        assert!(out.stderr.contains(want), "{body:?}: {}", out.stderr);
    }
    let out = run(
        &[
            "explain",
            "--config",
            &configs(TWO_AUDIENCES),
            "--kubelet-config",
            "/dev/zero",
            "harbor.example.com/a:1",
        ],
        b"",
    );
    common::assert_one_line_failure("a device", &out, "--kubelet-config /dev/zero");
}

const TWO_AUDIENCES: &str = "two-audiences.yaml";
