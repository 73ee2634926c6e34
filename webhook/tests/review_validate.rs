//! `pv-topology-webhook review --validate`, the built binary on fixtures
//! (tests/data/webhook/validate-*.json): it answers as `/validate` does, not as
//! `/mutate`; `--on-contradiction` and `PV_TOPOLOGY_WEBHOOK_ON_CONTRADICTION` reach the
//! decision; `PV_TOPOLOGY_WEBHOOK_VALIDATE` is `--validate`. A refusal is an answer: the
//! command exits 0 and the AdmissionReview on stdout says `allowed: false` (exit 1 is for
//! input that is not a review, 2 for a bad command line). No cloud is asked: the GCE PD
//! handle names its zone.

mod common;

use std::io::Write as _;
use std::process::{Command, Output, Stdio};

use clap::Parser as _;
use common::*;
use pv_topology_webhook::cli::{Cli, Command as Sub};
use pv_topology_webhook::model::OnContradiction;
use serde_json::Value;

/// The PV says us-central1-b; its disk (the handle) is in us-central1-a.
const LYING: &str = "validate-lying-zone.json";
/// Labels and nodeAffinity name us-central1-a and its region.
const CONSISTENT: &str = "validate-consistent.json";

const LYING_MESSAGE: &str = "CSI pd.csi.storage.gke.io volume \"projects/my-project/zones/us-central1-a/disks/pd-zonal\": \
     label topology.kubernetes.io/zone=\"us-central1-b\", but the disk is in zone us-central1-a (found by builtin)";

/// `pv-topology-webhook review ARGS…` with `env` on the fixture `name`, whatever its exit.
fn run(args: &[&str], env: &[(&str, &str)], name: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pv-topology-webhook"))
        .arg("review")
        .args(args)
        .env_remove("PV_TOPOLOGY_WEBHOOK_VALIDATE")
        .env_remove("PV_TOPOLOGY_WEBHOOK_ON_CONTRADICTION")
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    // A command line refused at start-up may exit before reading stdin.
    let _ = child.stdin.take().expect("stdin").write_all(&fixture(name));
    child.wait_with_output().expect("the binary exits")
}

/// [`run`] that must exit 0: its answer.
fn answer(args: &[&str], env: &[(&str, &str)], name: &str) -> Answer {
    let out = run(args, env, name);
    assert_eq!(
        out.status.code(),
        Some(0),
        "review {args:?} {env:?} < {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Answer {
        review: serde_json::from_slice(&out.stdout).expect("an AdmissionReview on stdout"),
        bytes: out.stdout,
    }
}

fn uid(name: &str) -> String {
    let review: Value = serde_json::from_slice(&fixture(name)).expect("a fixture of JSON");
    review["request"]["uid"].as_str().expect("a uid").to_owned()
}

#[test]
fn review_validate_refuses_the_lying_pv_and_admits_the_consistent_one() {
    for (args, env) in [
        (&["--validate"][..], &[][..]),
        (&[][..], &[("PV_TOPOLOGY_WEBHOOK_VALIDATE", "true")][..]),
    ] {
        let refused = answer(args, env, LYING);
        assert!(!refused.allowed(), "{args:?} {env:?}: {}", refused.review);
        assert_eq!(refused.uid(), uid(LYING));
        assert_eq!(refused.outcome(), "contradicts");
        assert_eq!(refused.response()["status"]["code"], 403);
        assert_eq!(refused.response()["status"]["reason"], "Forbidden");
        assert_eq!(
            refused.message(),
            format!(
                "{LYING_MESSAGE}; pods using it could be scheduled where it cannot be attached (--on-contradiction=deny)"
            )
        );
        assert!(refused.patch().is_none(), "validation never patches");

        let fine = answer(args, env, CONSISTENT);
        assert!(fine.allowed(), "{args:?} {env:?}: {}", fine.message());
        assert_eq!(fine.uid(), uid(CONSISTENT));
        assert_eq!(fine.outcome(), "consistent");
        assert!(fine.patch().is_none() && fine.warnings().is_empty(), "{}", fine.review);
    }
    // Without --validate the same PV gets /mutate's answer: its label corrected.
    let mutated = answer(&[], &[], LYING);
    assert!(mutated.allowed());
    assert_eq!(mutated.outcome(), "labeled");
    assert_eq!(
        patched_object(&fixture(LYING), &mutated)["metadata"]["labels"]["topology.kubernetes.io/zone"],
        "us-central1-a"
    );
}

#[test]
fn on_contradiction_warn_by_flag_or_variable_admits_the_lying_pv_with_the_message_as_a_warning() {
    for (args, env) in [
        (&["--validate", "--on-contradiction", "warn"][..], &[][..]),
        (&["--validate", "--on-contradiction=warn"][..], &[][..]),
        (
            &["--validate"][..],
            &[("PV_TOPOLOGY_WEBHOOK_ON_CONTRADICTION", "warn")][..],
        ),
    ] {
        let admitted = answer(args, env, LYING);
        assert!(admitted.allowed(), "{args:?} {env:?}: {}", admitted.message());
        assert_eq!(admitted.outcome(), "contradicts");
        assert_eq!(
            admitted.warnings(),
            vec![format!("{LYING_MESSAGE}; admitted (--on-contradiction=warn)")]
        );
    }
    // The flag outranks the variable, and deny is deny.
    let refused = answer(
        &["--validate", "--on-contradiction", "deny"],
        &[("PV_TOPOLOGY_WEBHOOK_ON_CONTRADICTION", "warn")],
        LYING,
    );
    assert!(!refused.allowed());
    // A value the flag does not take is a usage error naming it and its values.
    let out = run(&["--validate", "--on-contradiction", "maybe"], &[], LYING);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--on-contradiction") && stderr.contains("use one of: deny, warn"),
        "{stderr}"
    );
}

#[test]
fn the_command_line_maps_on_contradiction_into_the_decision_config() {
    let config = |argv: &[&str]| match Cli::try_parse_from(argv).expect("the flags parse").command {
        Sub::Review(review) => (review.validate, review.decision.config().on_contradiction),
        Sub::Serve(serve) => (true, serve.decision.config().on_contradiction),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        config(&["pv-topology-webhook", "review"]),
        (false, OnContradiction::Deny)
    );
    assert_eq!(
        config(&[
            "pv-topology-webhook",
            "review",
            "--validate",
            "--on-contradiction",
            "warn"
        ]),
        (true, OnContradiction::Warn)
    );
    let serve = [
        "pv-topology-webhook",
        "serve",
        "--tls-cert-file",
        "c.pem",
        "--tls-key-file",
        "k.pem",
        "--on-contradiction=warn",
    ];
    assert_eq!(config(&serve), (true, OnContradiction::Warn));
    assert_eq!(config(&serve[..6]).1, OnContradiction::Deny);
}
