//! A rule for a volume type an enabled lookup answers for is refused at start-up.
//!
//! Rules are tried before lookups, so such a rule would answer for every volume of
//! that driver (or in-tree type) and the lookup would never be asked: the chart's old
//! example `inTree: cinder, zones: [nova]` gave every Cinder volume the zone `nova`
//! behind `--openstack-cinder-lookup` (issue 25). `serve`, `review` and `audit`
//! assemble their resolver in one place; each refuses such a file with one line naming
//! the rule's position, the driver, the lookup flag and the fix, exit status 1, before
//! it reads a cloud config or reaches anything.

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{create_review, csi, pv};

/// Each lookup flag, and a CSI driver and an in-tree type its lookup answers for.
const LOOKUPS: [(&str, &str, &str); 5] = [
    ("--aws-ebs-lookup", "ebs.csi.aws.com", "awsElasticBlockStore"),
    ("--gce-lookup", "pd.csi.storage.gke.io", "gcePersistentDisk"),
    ("--azure-disk-lookup", "disk.csi.azure.com", "azureDisk"),
    ("--openstack-cinder-lookup", "cinder.csi.openstack.org", "cinder"),
    ("--vsphere-lookup", "csi.vsphere.vmware.com", "vsphereVolume"),
];

/// A rule no lookup answers for, first, so that the shadowing rule is `rules[1]`.
const HARMLESS_FIRST: &str =
    "  - driver: csi.example.com\n    zones: [a]\n    topologyKey: topology.csi.example.com/zone\n";

fn rules_file(dir: &Path, name: &str, second: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, format!("rules:\n{HARMLESS_FIRST}{second}")).expect("the rules file written");
    path.to_string_lossy().into_owned()
}

/// The binary with `args`, nothing on stdin but a review of `stdin_pv`, its cloud
/// settings pointed nowhere (loopback port 9, no instance metadata); killed after 10 s.
fn run(args: &[&str], stdin: &[u8]) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pv-topology-webhook"))
        .args(args)
        .env_remove("PV_TOPOLOGY_WEBHOOK_RULES")
        .env("AWS_REGION", "eu-west-1")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("GCE_METADATA_HOST", "127.0.0.1:9")
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary started");
    let _ = std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), stdin);
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().expect("waited") {
            break status.code();
        }
        if Instant::now() > deadline {
            child.kill().expect("killed");
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let Output { stderr, .. } = child.wait_with_output().expect("its output");
    (status, String::from_utf8_lossy(&stderr).into_owned())
}

/// `serve`, `review` and `audit` with these arguments.
fn each_command(rest: &[&str], stdin: &[u8]) -> Vec<(&'static str, Option<i32>, String)> {
    // TLS files that do not exist: the rules are refused before they are read.
    let serve = [
        "serve",
        "--tls-cert-file=/nonexistent/tls.crt",
        "--tls-key-file=/nonexistent/tls.key",
        "--listen=127.0.0.1:0",
        "--metrics-listen=127.0.0.1:0",
    ];
    let audit = ["audit", "--kubeconfig=/nonexistent/kubeconfig"];
    [
        ("serve", &serve[..]),
        ("review", &["review"][..]),
        ("audit", &audit[..]),
    ]
    .into_iter()
    .map(|(name, command)| {
        let args: Vec<&str> = command.iter().chain(rest).copied().collect();
        let (status, stderr) = run(&args, stdin);
        (name, status, stderr)
    })
    .collect()
}

#[test]
fn a_rule_for_a_driver_an_enabled_lookup_answers_for_is_refused_by_every_command() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    for (flag, driver, in_tree) in LOOKUPS {
        for (selector, shown) in [
            (format!("driver: {driver}"), driver),
            (format!("inTree: {in_tree}"), in_tree),
        ] {
            let name = format!("{}-{shown}.yaml", flag.trim_start_matches('-'));
            let path = rules_file(dir.path(), &name, &format!("  - {selector}\n    zones: [nova]\n"));
            let body = create_review(pv(csi(driver, "vol-0123abcd"), None));
            for (command, status, stderr) in each_command(&["--rules", &path, flag], &body) {
                let what = format!("{command} --rules [{selector}] {flag}");
                assert_eq!(status, Some(1), "{what}: {stderr}");
                let message = stderr.trim_end();
                assert_eq!(message.lines().count(), 1, "{what}: one line: {stderr}");
                assert!(message.starts_with("pv-topology-webhook: "), "{what}: {message}");
                for word in [
                    &format!("{path}#rules[1]"),
                    shown,
                    flag,
                    "rules are tried before lookups",
                    "delete the rule",
                ] {
                    assert!(message.contains(word), "{what}: {word:?} not in {message}");
                }
            }
        }
    }
}

#[test]
fn rules_for_other_volumes_and_lookups_for_other_drivers_still_start() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    // A Cinder rule without the Cinder lookup, and with the EBS lookup: accepted
    // (review answers from the rule; the EBS lookup is never asked).
    let path = rules_file(dir.path(), "cinder.yaml", "  - inTree: cinder\n    zones: [nova]\n");
    let body = create_review(pv(serde_json::json!({"cinder": {"volumeID": "v-1"}}), None));
    for args in [
        vec!["review", "--rules", &path],
        vec!["review", "--rules", &path, "--aws-ebs-lookup"],
    ] {
        let (status, stderr) = run(&args, &body);
        assert_eq!(status, Some(0), "{args:?}: {stderr}");
    }
}

/// Built-in handle parsing runs before the rules, so a rule never shadows it: a rule
/// for GCE PD or in-tree EBS applies only to the handles the parser cannot place (a
/// regional PD's zones, an EBS ID without its zone), and needs no start-up check.
#[tokio::test]
async fn a_rule_never_overrides_the_zone_a_handle_carries() {
    let reviewer = common::reviewer(common::rules(
        "rules:\n  - driver: pd.csi.storage.gke.io\n    zones: [rule-zone]\n  - inTree: awsElasticBlockStore\n    zones: [rule-zone]\n",
    ));
    for (spec, zone) in [
        (
            csi("pd.csi.storage.gke.io", "projects/p/zones/europe-west1-b/disks/d"),
            "europe-west1-b",
        ),
        (
            serde_json::json!({"awsElasticBlockStore": {"volumeID": "aws://us-east-1a/vol-0123"}}),
            "us-east-1a",
        ),
    ] {
        let answer = common::review(&reviewer, &create_review(pv(spec.clone(), None))).await;
        assert_eq!(answer.audit("source"), Some("builtin"), "{spec}");
        assert_eq!(
            common::patched(&answer, "/metadata/labels")["topology.kubernetes.io/zone"],
            zone,
            "{spec}"
        );
    }
    // The handles it cannot place are the rule's.
    for spec in [
        csi("pd.csi.storage.gke.io", "projects/p/regions/europe-west1/disks/d"),
        serde_json::json!({"awsElasticBlockStore": {"volumeID": "vol-0123"}}),
    ] {
        let answer = common::review(&reviewer, &create_review(pv(spec.clone(), None))).await;
        assert!(
            answer.audit("source").is_some_and(|s| s.starts_with("rule ")),
            "{spec}: {:?}",
            answer.audit("source")
        );
    }
}
