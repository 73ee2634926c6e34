//! The soak's expected answers (tests/data/webhook/soak-expected/, judged against by
//! bench/soak_client.py) are what `review` gives with the soak's decision flags, so
//! that they cannot drift from the program unseen. The reviews needing no lookup only:
//! the EBS CSI one needs moto, and bench/soak.sh checks it (and these) before each run.

mod common;

use common::*;
use serde_json::{Value, json};

/// bench/soak.sh's `decision` flags (the rules file given by path).
fn soak_flags(rules: &str) -> Vec<&str> {
    vec![
        "--aws-ebs-lookup",
        "--aws-region",
        "us-east-1",
        "--lookup-timeout",
        "1s",
        "--lookup-cache-ttl",
        "5s",
        "--on-lookup-error",
        "deny",
        "--rules",
        rules,
    ]
}

#[test]
fn the_soak_expected_answers_are_what_review_gives() {
    let rules = data_dir().join("rules.yaml").to_string_lossy().into_owned();
    // No lookup is made for these; were one tried, it would fail on a closed port.
    let env = [
        ("AWS_ENDPOINT_URL", "http://127.0.0.1:9"),
        ("AWS_ACCESS_KEY_ID", "AKIDSOAK"),
        ("AWS_SECRET_ACCESS_KEY", "soak-secret"),
        ("AWS_EC2_METADATA_DISABLED", "true"),
    ];
    for name in ["nfs", "gce-pd-csi-zonal", "regional-pd", "ebs-in-tree"] {
        let review: Value = serde_json::from_slice(&fixture(&format!("{name}.json"))).expect("a review fixture");
        let answer = review_binary(&soak_flags(&rules), &env, review["request"]["object"].clone());
        let got = json!({
            "allowed": answer.allowed(),
            "patch": answer.patch_json(),
            "outcome": answer.audit("outcome"),
            "warnings": answer.warnings(),
        });
        let expected: Value =
            serde_json::from_slice(&fixture(&format!("soak-expected/{name}.json"))).expect("an expected answer");
        assert_eq!(
            got, expected,
            "{name}: review's answer is not the soak's expected one (SOAK_WRITE_EXPECTED=1 bench/soak.sh)"
        );
    }
}
