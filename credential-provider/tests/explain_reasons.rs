//! `explain` says for each provider why it runs for an image or does not
//! (issue 25 item 7): the pattern, and the first of kubelet's checks it
//! fails (port, host label count, path prefix, a host label); `-o json`;
//! exit 0 when a provider runs, 2 when none does, 1 on error.

mod common;

use common::{data, run};
use serde_json::Value;

fn multi() -> String {
    data("configs").join("multi.yaml").display().to_string()
}

fn explain_json(image: &str) -> (i32, Value) {
    let out = run(&["explain", "-o", "json", "--config", &multi(), "--", image], b"");
    let report =
        serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{image}: {e}: {}{}", out.stdout, out.stderr));
    (out.status, report)
}

/// The verdict on one pattern of one provider.
fn pattern<'a>(report: &'a Value, provider: &str, pattern: &str) -> &'a Value {
    let provider = report["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == provider)
        .unwrap_or_else(|| panic!("no provider {provider} in {report}"));
    provider["patterns"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pattern"] == pattern)
        .unwrap_or_else(|| panic!("no pattern {pattern} in {provider}"))
}

#[test]
fn each_pattern_says_which_check_it_fails() {
    // (image, provider, pattern, the failing check or None, words of the reason)
    type Case<'a> = (&'a str, &'a str, &'a str, Option<&'a str>, &'a [&'a str]);
    let cases: [Case; 7] = [
        (
            "registry.example.com/team/app",
            "team-registry",
            "registry.example.com/team",
            None,
            &["matches"],
        ),
        (
            "registry.example.com:5000/app",
            "whole-registry",
            "registry.example.com",
            Some("port"),
            &["5000", "port"],
        ),
        (
            "registry.example.com/team/app",
            "team-registry",
            "registry.example.com:5000",
            Some("port"),
            &["port 5000", "no port"],
        ),
        (
            "123456789012.dkr.ecr.eu-west-1.amazonaws.com/app",
            "whole-registry",
            "*.example.com",
            Some("host-labels"),
            &["3", "6"],
        ),
        (
            "registry.example.com/other/app",
            "team-registry",
            "registry.example.com/team",
            Some("path"),
            &["/other/app", "/team"],
        ),
        (
            "registry.example.org/app",
            "whole-registry",
            "*.example.com",
            Some("host-label"),
            &["\"com\"", "\"org\""],
        ),
        (
            "nginx",
            "ecr-like",
            "*.dkr.ecr.*.amazonaws.com",
            Some("host-labels"),
            &["docker.io", "2"],
        ),
    ];
    for (image, provider, pat, check, words) in cases {
        let (_, report) = explain_json(image);
        let verdict = pattern(&report, provider, pat);
        assert_eq!(verdict["matches"], check.is_none(), "{image} {pat}: {verdict}");
        assert_eq!(
            verdict["check"],
            check.map_or(Value::Null, Value::from),
            "{image} {pat}: {verdict}"
        );
        let reason = verdict["reason"].as_str().unwrap();
        for word in words {
            assert!(reason.contains(word), "{image} {pat}: {word:?} missing in {reason:?}");
        }
    }
}

#[test]
fn exit_status_is_the_verdict() {
    let (status, report) = explain_json("registry.example.com/team/app:v1");
    assert_eq!(status, 0);
    assert_eq!(report["runs"], serde_json::json!(["team-registry", "whole-registry"]));
    assert_eq!(report["repository"], "registry.example.com/team/app");
    let (status, report) = explain_json("quay.io/org/app");
    assert_eq!(status, 2, "{report}");
    assert_eq!(report["runs"], serde_json::json!([]));
    assert_eq!(report["providers"].as_array().unwrap().len(), 3);

    // Text: one line per provider, then its patterns, and the verdict.
    let out = run(&["explain", &multi(), "nginx"], b"");
    assert_eq!(out.status, 2, "{}", out.stderr);
    assert!(
        out.stdout.contains("docker.io/library/nginx") && out.stdout.contains("no provider runs"),
        "{}",
        out.stdout
    );
    for provider in ["ecr-like", "team-registry", "whole-registry"] {
        assert!(
            out.stdout
                .lines()
                .any(|l| l.starts_with(provider) && l.contains("does not run")),
            "{provider}: {}",
            out.stdout
        );
    }
    assert!(out.stdout.contains("host labels"), "{}", out.stdout);
    let out = run(&["explain", &multi(), "registry.example.com:5000/app"], b"");
    assert_eq!(out.status, 0);
    assert!(
        out.stdout
            .lines()
            .any(|l| l.starts_with("team-registry") && l.contains("runs")),
        "{}",
        out.stdout
    );

    // Errors stay 1: a config that cannot be read, an image kubelet refuses.
    let out = run(&["explain", "/nonexistent.yaml", "nginx"], b"");
    assert_eq!(out.status, 1);
    let out = run(&["explain", &multi(), "--", "Bad/Image"], b"");
    assert_eq!(out.status, 1);
}
