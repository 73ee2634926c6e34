//! `audit`'s classification, pure: each status from a PV and the topology resolved for
//! it (GCE PD and EBS handles carry their zone; failures are given as resolutions), the
//! report's two formats and the exit status.

use k8s_openapi::api::core::v1::PersistentVolume;
use pv_topology_webhook::audit::{Finding, Status, classify, examine, exit_code, fixed, render};
use pv_topology_webhook::cli::ReportFormat;
use pv_topology_webhook::model::{LookupFailure, Resolution};
use pv_topology_webhook::resolve::Resolver;
use pv_topology_webhook::rules::Rules;
use pv_topology_webhook::source::identify_pv;
use serde_json::{Value, json};

const ZONE: &str = "topology.kubernetes.io/zone";
const REGION: &str = "topology.kubernetes.io/region";
const GKE_ZONE: &str = "topology.gke.io/zone";

fn pv(name: &str, labels: Value, annotations: Value, spec: Value) -> PersistentVolume {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": spec,
    }))
    .unwrap()
}

/// A zonal GCE PD CSI volume in europe-west1-b, with `labels` and, if `affinity`,
/// the driver's zone requirement.
fn pd(name: &str, labels: Value, affinity: Option<&str>) -> PersistentVolume {
    let mut spec = json!({
        "capacity": {"storage": "1Gi"},
        "accessModes": ["ReadWriteOnce"],
        "csi": {"driver": "pd.csi.storage.gke.io", "volumeHandle": format!("projects/P/zones/europe-west1-b/disks/{name}")},
    });
    if let Some(zone) = affinity {
        spec["nodeAffinity"] = json!({"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": GKE_ZONE, "operator": "In", "values": [zone]}]}
        ]}});
    }
    pv(name, labels, json!({}), spec)
}

async fn judge(pv: &PersistentVolume) -> Finding {
    examine(&Resolver::new(Rules::default()), pv).await
}

fn labeled() -> Value {
    json!({ZONE: "europe-west1-b", REGION: "europe-west1"})
}

#[tokio::test]
async fn a_pv_as_mutate_would_write_it_is_fine() {
    let finding = judge(&pd("good", labeled(), Some("europe-west1-b"))).await;
    assert_eq!(finding.status, Status::Fine, "{finding:?}");
    assert_eq!(finding.name, "good");
    assert_eq!(
        finding.volume.as_deref(),
        Some("CSI pd.csi.storage.gke.io volume \"projects/P/zones/europe-west1-b/disks/good\"")
    );
    assert!(finding.detail.contains("found by builtin"), "{}", finding.detail);
    assert!(finding.missing_labels.is_empty() && finding.missing_affinity.is_empty());
}

#[tokio::test]
async fn missing_labels_are_listed_with_their_values() {
    let finding = judge(&pd("nolabels", json!({"team": "a"}), Some("europe-west1-b"))).await;
    assert_eq!(finding.status, Status::MissingLabels, "{finding:?}");
    assert_eq!(
        serde_json::to_value(&finding.missing_labels).unwrap(),
        json!({ZONE: "europe-west1-b", REGION: "europe-west1"})
    );
    assert!(finding.missing_affinity.is_empty());
    assert!(
        finding.detail.contains("topology.kubernetes.io/zone=europe-west1-b")
            && finding.detail.contains("--fix-labels"),
        "{}",
        finding.detail
    );
    // Only the absent label is missing.
    let half = judge(&pd("half", json!({ZONE: "europe-west1-b"}), Some("europe-west1-b"))).await;
    assert_eq!(half.status, Status::MissingLabels);
    assert_eq!(
        serde_json::to_value(&half.missing_labels).unwrap(),
        json!({REGION: "europe-west1"})
    );
}

#[tokio::test]
async fn missing_affinity_names_the_requirement_and_the_remedy() {
    let finding = judge(&pd("bare", json!(null), None)).await;
    assert_eq!(finding.status, Status::MissingAffinity, "{finding:?}");
    assert_eq!(
        finding.missing_affinity,
        vec![format!("{GKE_ZONE} In [europe-west1-b]")]
    );
    assert_eq!(finding.missing_labels.len(), 2, "labels are missing too");
    assert!(
        finding.detail.contains("immutable")
            && finding
                .detail
                .contains("Migrating from the in-tree PersistentVolumeLabel plugin")
            && finding.detail.contains("labels to add: "),
        "{}",
        finding.detail
    );
    // Labelled but without nodeAffinity.
    let labelled = judge(&pd("labelled", labeled(), None)).await;
    assert_eq!(labelled.status, Status::MissingAffinity);
    assert!(labelled.missing_labels.is_empty());
    assert!(!labelled.detail.contains("labels to add"), "{}", labelled.detail);
}

#[tokio::test]
async fn contradictions_say_what_and_where() {
    let lying = judge(&pd("lying", json!({ZONE: "europe-west1-c"}), Some("europe-west1-b"))).await;
    assert_eq!(lying.status, Status::Contradicts, "{lying:?}");
    assert!(
        lying
            .detail
            .contains("label topology.kubernetes.io/zone=\"europe-west1-c\", but the disk is in zone europe-west1-b")
            && lying.detail.contains("(found by builtin)"),
        "{}",
        lying.detail
    );
    let affinity = judge(&pd("aff", labeled(), Some("europe-west1-d"))).await;
    assert_eq!(affinity.status, Status::Contradicts);
    assert!(
        affinity
            .detail
            .contains("nodeAffinity term 0: topology.gke.io/zone In [\"europe-west1-d\"]"),
        "{}",
        affinity.detail
    );
    // A provisioner's labels are trusted by /mutate, not by /validate: nor here.
    let mut provisioned = pd("prov", json!({ZONE: "europe-west1-c", REGION: "europe-west1"}), None);
    provisioned.metadata.annotations = Some(
        [(
            "pv.kubernetes.io/provisioned-by".to_owned(),
            "pd.csi.storage.gke.io".to_owned(),
        )]
        .into(),
    );
    assert_eq!(judge(&provisioned).await.status, Status::Contradicts);
}

/// What the in-tree labeler wrote (the beta keys, in labels and nodeAffinity) is judged
/// as the standard keys are: agreeing is fine, naming another zone contradicts.
#[tokio::test]
async fn the_legacy_beta_keys_are_judged() {
    let documents = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/data/webhook/files/legacy-beta-keys.yaml"
    ))
    .unwrap();
    let pvs: Vec<PersistentVolume> = documents
        .split("\n---\n")
        .map(|d| serde_yaml_ng::from_str(d).unwrap())
        .collect();
    let good = judge(&pvs[0]).await;
    // /mutate adds the standard keys beside the beta ones.
    assert_ne!(good.status, Status::Contradicts, "{good:?}");
    let lying = judge(&pvs[1]).await;
    assert_eq!(lying.status, Status::Contradicts, "{lying:?}");
    for says in [
        "label failure-domain.beta.kubernetes.io/zone=\"us-east-1c\", but the disk is in zone us-east-1a",
        "nodeAffinity term 0: failure-domain.beta.kubernetes.io/zone In [\"us-east-1c\"]",
    ] {
        assert!(lying.detail.contains(says), "{says} not in {}", lying.detail);
    }
}

#[tokio::test]
async fn a_provisioned_and_labelled_pv_is_trusted_only_without_a_topology() {
    let provisioned = |mut pv: PersistentVolume| {
        pv.metadata.annotations = Some(
            [(
                "pv.kubernetes.io/provisioned-by".to_owned(),
                "pd.csi.storage.gke.io".to_owned(),
            )]
            .into(),
        );
        pv
    };
    let complete = provisioned(pd("prov", labeled(), Some("europe-west1-b")));
    assert_eq!(judge(&complete).await.status, Status::Fine);
    // /mutate trusts it and adds nothing, but the scheduler has no constraint: reported,
    // with the command that recreates it.
    let bare = provisioned(pd("prov", labeled(), None));
    let finding = judge(&bare).await;
    assert_eq!(finding.status, Status::MissingAffinity, "{finding:?}");
    assert!(
        finding.detail.contains("repair writes the topology anew")
            && finding.detail.contains("`pv-topology-webhook repair --pv prov`"),
        "{}",
        finding.detail
    );
    // Without a topology to judge it by, its labels are trusted.
    let identity = identify_pv(&bare).unwrap();
    let finding = classify(&bare, Some(&identity), &Resolution::NotConfigured { flag: "--rules" });
    assert_eq!(finding.status, Status::Fine);
    assert!(finding.detail.contains("trusted"), "{}", finding.detail);
}

#[tokio::test]
async fn unresolvable_says_why() {
    let ebs = pv(
        "ebs",
        json!(null),
        json!({}),
        json!({"csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-0123456789abcdef0"}}),
    );
    let finding = judge(&ebs).await;
    assert_eq!(finding.status, Status::Unresolvable, "{finding:?}");
    assert!(finding.detail.contains("--aws-ebs-lookup"), "{}", finding.detail);

    let identity = identify_pv(&ebs).unwrap();
    let failed = Resolution::LookupFailed {
        lookup: "aws-ebs".to_owned(),
        error: LookupFailure::Failed("UnauthorizedOperation: no".to_owned()),
    };
    let finding = classify(&ebs, Some(&identity), &failed);
    assert_eq!(finding.status, Status::Unresolvable);
    assert_eq!(finding.detail, "lookup aws-ebs failed: UnauthorizedOperation: no");

    let placeholder = pv(
        "placeholder",
        json!(null),
        json!({}),
        json!({"csi": {"driver": "pd.csi.storage.gke.io", "volumeHandle": "placeholder-for-provisioning"}}),
    );
    let finding = judge(&placeholder).await;
    assert_eq!(finding.status, Status::Unresolvable);
    assert!(finding.detail.contains("placeholder"), "{}", finding.detail);
}

#[tokio::test]
async fn volumes_not_ours_are_reported_so_and_count_as_fine() {
    let nfs = pv(
        "nfs",
        json!(null),
        json!({}),
        json!({"nfs": {"server": "10.0.0.1", "path": "/x"}}),
    );
    let finding = judge(&nfs).await;
    assert_eq!(finding.status, Status::NotOurs, "{finding:?}");
    assert_eq!(finding.volume, None);
    let other = pv(
        "other",
        json!(null),
        json!({}),
        json!({"csi": {"driver": "example.com/csi", "volumeHandle": "v1"}}),
    );
    assert_eq!(judge(&other).await.status, Status::NotOurs);
    assert_eq!(exit_code(&[finding]), 0);
}

#[tokio::test]
async fn report_formats_and_exit_status() {
    let findings = vec![
        judge(&pd("good", labeled(), Some("europe-west1-b"))).await,
        judge(&pd("bare", json!(null), None)).await,
    ];
    assert_eq!(exit_code(&findings[..1]), 0);
    assert_eq!(exit_code(&findings), 2);
    assert_eq!(exit_code(&[]), 0);

    let table = render(&findings, ReportFormat::Table);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 3, "{table}");
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(header, ["NAME", "VOLUME", "STATUS", "DETAIL"]);
    let status_at = lines[0].find("STATUS").unwrap();
    assert!(lines[2][status_at..].starts_with("missing-affinity"), "{table}");

    let json: Value = serde_json::from_str(&render(&findings, ReportFormat::Json)).unwrap();
    let rows = json.as_array().unwrap();
    assert_eq!(rows.len(), 2);
    let keys: Vec<&str> = rows[1].as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys.iter().copied().collect::<std::collections::BTreeSet<_>>(),
        [
            "detail",
            "missing_affinity",
            "missing_labels",
            "name",
            "status",
            "volume"
        ]
        .into()
    );
    assert_eq!(rows[0]["status"], "fine");
    assert_eq!(rows[1]["status"], "missing-affinity");
    assert_eq!(rows[1]["missing_labels"][ZONE], "europe-west1-b");
    assert_eq!(
        rows[1]["missing_affinity"][0],
        format!("{GKE_ZONE} In [europe-west1-b]")
    );
}

#[tokio::test]
async fn fixed_labels_change_the_status_of_a_pv_that_lacked_only_labels() {
    let mut only_labels = judge(&pd("nolabels", json!(null), Some("europe-west1-b"))).await;
    fixed(&mut only_labels);
    assert_eq!(only_labels.status, Status::LabelsFixed);
    assert!(only_labels.missing_labels.is_empty());
    assert!(
        only_labels.detail.starts_with("labels added: "),
        "{}",
        only_labels.detail
    );
    assert_eq!(exit_code(std::slice::from_ref(&only_labels)), 0);

    let mut bare = judge(&pd("bare", json!(null), None)).await;
    fixed(&mut bare);
    assert_eq!(bare.status, Status::MissingAffinity, "nodeAffinity still lacks");
    assert!(
        bare.detail.contains("; labels added: ") && !bare.detail.contains("labels to add"),
        "{}",
        bare.detail
    );
    assert_eq!(exit_code(&[bare]), 2);
}

/// Runs the binary's `audit` with `args`, no kubeconfig from the environment.
fn run_audit(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_pv-topology-webhook"))
        .arg("audit")
        .args(args)
        .env_remove("KUBECONFIG")
        .env("HOME", "/nonexistent")
        .output()
        .unwrap()
}

#[test]
fn an_unreachable_cluster_or_a_bad_kubeconfig_is_exit_status_1() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let secret = "not-a-real-token-1234";
    std::fs::write(
        &kubeconfig,
        serde_json::to_string(&json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
            "users": [{"name": "u", "user": {"token": secret}}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "x",
        }))
        .unwrap(),
    )
    .unwrap();
    let out = run_audit(&["--kubeconfig", kubeconfig.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("cannot list PersistentVolumes"), "{stderr}");
    assert!(!stderr.contains(secret), "the token is never shown: {stderr}");
    assert!(out.stdout.is_empty());

    let missing = dir.path().join("missing");
    let out = run_audit(&["--kubeconfig", missing.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("--kubeconfig"), "{stderr}");

    let out = run_audit(&["--kubeconfig", kubeconfig.to_str().unwrap(), "--context", "nope"]);
    assert_eq!(out.status.code(), Some(1));
}
