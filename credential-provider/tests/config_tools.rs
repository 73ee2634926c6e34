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

fn explain(config: &str, image: &str) -> Vec<String> {
    let out = run(&["explain", "--config", config, image], b"");
    assert_eq!(out.status, 0, "{}", out.stderr);
    out.stdout.lines().map(str::to_owned).collect()
}

#[test]
fn explain_lists_matching_providers_in_config_order() {
    let config = configs("multi.yaml");
    let cases: [(&str, &[&str]); 8] = [
        ("123456789012.dkr.ecr.eu-west-1.amazonaws.com/app:v1", &["ecr-like"]),
        ("123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn/app", &["ecr-like"]),
        ("registry.example.com/team/app", &["team-registry", "whole-registry"]),
        ("registry.example.com/teams/app", &["team-registry", "whole-registry"]),
        ("registry.example.com/other/app@sha256:00", &["whole-registry"]),
        ("registry.example.com:5000/app", &["team-registry"]),
        ("quay.io/org/app", &[]),
        ("nginx", &[]),
    ];
    for (image, want) in cases {
        assert_eq!(explain(&config, image), want, "{image}");
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

#[test]
fn check_config_lists_every_problem_with_its_field_path() {
    let out = run(&["check-config", &configs("bad-rules.yaml")], b"");
    assert_eq!(out.status, 1);
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
    let cases = [
        (
            "bad-unknown-field.json",
            "providers[0].matchImage: unknown field `matchImage`",
        ),
        ("bad-kind.yaml", "kind \"KubeletConfiguration\" is wrong"),
        ("dir-duplicate", "duplicate provider name \"ecr-like\""),
        ("bad-duplicate-name.yaml", "duplicate provider name \"same\""),
        ("dir-empty", "no *.json, *.yaml or *.yml files"),
        ("missing.yaml", "cannot read"),
    ];
    for (name, want) in cases {
        let out = run(&["check-config", &configs(name)], b"");
        assert_eq!(out.status, 1, "{name}");
        assert!(
            out.stdout.contains(want),
            "{name}: {:?} should contain {want:?}",
            out.stdout
        );
    }
}

#[test]
fn check_config_accepts_directories_and_every_config_version() {
    for name in ["dir-ok", "multi.yaml"] {
        let out = run(&["check-config", &configs(name)], b"");
        assert_eq!(out.status, 0, "{name}: {}", out.stdout);
    }
}
