//! pv-topology-webhook behind a real kube-apiserver: `pv-topology-webhook serve`
//! on loopback, registered with the MutatingWebhookConfiguration of
//! `manifests/webhook/base` (its rules and matchConditions, read at run time;
//! only `clientConfig` becomes `url: https://127.0.0.1:PORT/mutate` with the
//! caBundle printed by `pv-topology-webhook certs`). PVs are created through the
//! API and read back as stored. Availability (the webhook down, its
//! certificate swapped, instances replaced) is in `webhook_availability.rs`.

mod common;

use cluster_harness::readme;
use cluster_harness::webhook::{register, serve, webhook_binary};
use cluster_harness::{Moto, TestCluster, workspace_root};
use common::*;
use k8s_openapi::api::core::v1::PersistentVolume;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

#[tokio::test]
async fn created_pvs_are_stored_with_the_topology_the_decision_promises() {
    let cluster = TestCluster::start().await;
    let client = cluster.client();
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let rules = workspace_root().join("tests/data/webhook/rules.yaml");
    let served = serve(&["--rules", rules.to_str().unwrap()], &[]);
    let webhook = &served.webhook;
    register(&client, &webhook.url(), &served.ca_bundle, "Fail").await;
    wait_labeled(&pvs).await;
    let post = PostParams::default();

    // CSI GCE PD, zonal: zone and region from the handle, affinity on the driver's key.
    pvs.create(&post, &gce_pd("gce-pd-zonal", "europe-west1-b"))
        .await
        .unwrap();
    let stored = pvs.get("gce-pd-zonal").await.unwrap();
    assert_eq!(labels(&stored), json!({ZONE: "europe-west1-b", REGION: "europe-west1"}));
    assert_eq!(
        affinity(&stored),
        zone_affinity("topology.gke.io/zone", "europe-west1-b")
    );

    // The README's quick-start PV (its `cat > pv.yaml` here-document), created
    // as its `kubectl create -f pv.yaml` does: stored with the labels and the
    // nodeAffinity that `pv-topology-webhook review -f pv.yaml -o pv` printed.
    let readme = std::fs::read_to_string(workspace_root().join("README.md")).unwrap();
    let yaml = readme::tested_blocks(&readme)
        .iter()
        .find_map(|block| readme::here_document(&block.script, "pv.yaml"))
        .expect("the README's tested quick start writes pv.yaml");
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), &yaml).unwrap();
    let out = std::process::Command::new(webhook_binary())
        .args(["review", "-f"])
        .arg(file.path())
        .args(["-o", "pv"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let reviewed: PersistentVolume = serde_yaml_ng::from_slice(&out.stdout).unwrap();
    let quick_start: PersistentVolume = serde_yaml_ng::from_str(&yaml).unwrap();
    let name = quick_start.metadata.name.clone().unwrap();
    pvs.create(&post, &quick_start).await.unwrap();
    let stored = pvs.get(&name).await.unwrap();
    assert_eq!(labels(&stored), labels(&reviewed));
    assert_eq!(affinity(&stored), affinity(&reviewed));
    assert_ne!(affinity(&stored), Value::Null, "the README's PV got no nodeAffinity");

    // In-tree EBS with the zone in its ID; the PV's own labels are kept.
    let ebs = pv(
        "ebs-in-tree",
        json!({"app": "db"}),
        json!({}),
        json!({"awsElasticBlockStore": {"volumeID": "aws://us-east-1a/vol-0123456789abcdef0", "fsType": "ext4"}}),
    );
    pvs.create(&post, &ebs).await.unwrap();
    let stored = pvs.get("ebs-in-tree").await.unwrap();
    assert_eq!(
        labels(&stored),
        json!({"app": "db", ZONE: "us-east-1a", REGION: "us-east-1"})
    );
    // In-tree volumes get zone and region requirements, as the in-tree PersistentVolumeLabel did.
    assert_eq!(
        affinity(&stored),
        json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": ZONE, "operator": "In", "values": ["us-east-1a"]},
            {"key": REGION, "operator": "In", "values": ["us-east-1"]}
        ]}]}})
    );

    // A driver only the rules file (tests/data/webhook/rules.yaml) knows.
    let onprem = pv(
        "rules-driver",
        json!({}),
        json!({}),
        json!({"csi": {"driver": "csi.example.com", "volumeHandle": "dc1/dc1-rack2/vol-7"}}),
    );
    pvs.create(&post, &onprem).await.unwrap();
    let stored = pvs.get("rules-driver").await.unwrap();
    assert_eq!(labels(&stored), json!({ZONE: "dc1-rack2", REGION: "dc1"}));
    assert_eq!(
        affinity(&stored),
        zone_affinity("topology.csi.example.com/zone", "dc1-rack2")
    );

    // Existing affinity: our requirement is added to every term, no term added or removed.
    let mut existing = gce_pd("existing-affinity", "europe-west1-b");
    let terms = json!({"required": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "cloud.google.com/gke-nodepool", "operator": "In", "values": ["ssd-pool"]}]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}
    ]}});
    existing.spec.as_mut().unwrap().node_affinity = Some(serde_json::from_value(terms).unwrap());
    pvs.create(&post, &existing).await.unwrap();
    let stored = pvs.get("existing-affinity").await.unwrap();
    assert_eq!(labels(&stored), json!({ZONE: "europe-west1-b", REGION: "europe-west1"}));
    let ours = json!({"key": "topology.gke.io/zone", "operator": "In", "values": ["europe-west1-b"]});
    assert_eq!(
        affinity(&stored),
        json!({"required": {"nodeSelectorTerms": [
            {"matchExpressions": [
                {"key": "cloud.google.com/gke-nodepool", "operator": "In", "values": ["ssd-pool"]},
                ours
            ]},
            {"matchExpressions": [ours], "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}
        ]}})
    );

    // A provisioned PV with both labels is trusted: stored exactly as sent,
    // although its ID names another zone (it was sent: the trusted counter moves).
    let trusted_before = webhook.counter("pv_topology_webhook_admission_requests_total", "outcome=\"trusted\"");
    let trusted = pv(
        "trusted-provisioned",
        json!({ZONE: "us-east-1b", REGION: "us-east-1"}),
        json!({"pv.kubernetes.io/provisioned-by": "kubernetes.io/aws-ebs"}),
        json!({"awsElasticBlockStore": {"volumeID": "aws://us-east-1a/vol-1"}}),
    );
    pvs.create(&post, &trusted).await.unwrap();
    let stored = pvs.get("trusted-provisioned").await.unwrap();
    assert_eq!(labels(&stored), json!({ZONE: "us-east-1b", REGION: "us-east-1"}));
    assert_eq!(affinity(&stored), Value::Null);
    assert_eq!(
        webhook.counter("pv_topology_webhook_admission_requests_total", "outcome=\"trusted\""),
        trusted_before + 1
    );

    // NFS: stored untouched, and the matchConditions keep it from the webhook
    // (its request counter does not move).
    let before = webhook.requests();
    let nfs = pv(
        "nfs",
        json!({}),
        json!({}),
        json!({"nfs": {"server": "nfs.example.com", "path": "/exports/a"}}),
    );
    pvs.create(&post, &nfs).await.unwrap();
    let stored = pvs.get("nfs").await.unwrap();
    assert_eq!(labels(&stored), Value::Null);
    assert_eq!(affinity(&stored), Value::Null);
    assert_eq!(webhook.requests(), before, "the NFS PV was sent to the webhook");

    // dryRun: answered by the webhook (sideEffects: None), nothing stored.
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let answer = pvs.create(&dry, &gce_pd("dry-run", "europe-west1-d")).await.unwrap();
    assert_eq!(labels(&answer), json!({ZONE: "europe-west1-d", REGION: "europe-west1"}));
    assert_eq!(
        affinity(&answer),
        zone_affinity("topology.gke.io/zone", "europe-west1-d")
    );
    assert_eq!(webhook.requests(), before + 1);
    assert!(
        pvs.get_opt("dry-run").await.unwrap().is_none(),
        "a dry run stored the PV"
    );
}

#[tokio::test]
async fn ebs_lookups_label_created_volumes_and_denials_reach_the_user() {
    // moto checks every signature: the webhook signs with the IAM user's key.
    let moto = Moto::start_authenticated();
    let keys = moto.auth().user.clone();
    let cluster = TestCluster::start().await;
    let client = cluster.client();
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let served = serve(
        &[
            "--aws-ebs-lookup",
            "--aws-region",
            "us-east-1",
            "--on-lookup-error",
            "deny",
        ],
        &[
            ("AWS_ENDPOINT_URL", moto.url.as_str()),
            ("AWS_ACCESS_KEY_ID", keys.access_key_id.as_str()),
            ("AWS_SECRET_ACCESS_KEY", keys.secret_access_key.as_str()),
            ("AWS_EC2_METADATA_DISABLED", "true"),
        ],
    );
    register(&client, &served.webhook.url(), &served.ca_bundle, "Fail").await;
    wait_labeled(&pvs).await;
    let post = PostParams::default();

    // An EBS CSI volume created in moto: its zone comes from DescribeVolumes.
    let id = moto.create_volume("us-east-1", "us-east-1b");
    let ebs = |name: &str, handle: &str| {
        pv(
            name,
            json!({}),
            json!({}),
            json!({"csi": {"driver": "ebs.csi.aws.com", "volumeHandle": handle, "fsType": "ext4"}}),
        )
    };
    pvs.create(&post, &ebs("ebs-csi", &id)).await.unwrap();
    let stored = pvs.get("ebs-csi").await.unwrap();
    assert_eq!(labels(&stored), json!({ZONE: "us-east-1b", REGION: "us-east-1"}));
    assert_eq!(
        affinity(&stored),
        zone_affinity("topology.ebs.csi.aws.com/zone", "us-east-1b")
    );

    // An unknown volume: denied, and the user reads the webhook's message
    // (EC2's error), not the apiserver's "failed calling webhook".
    let error = pvs
        .create(&post, &ebs("ebs-unknown", "vol-0badc0ffee0000000"))
        .await
        .expect_err("an unknown volume is denied");
    let text = message(&error);
    assert!(text.contains("denied the request"), "{text}");
    assert!(text.contains("InvalidVolume.NotFound"), "{text}");
    assert!(text.contains("vol-0badc0ffee0000000"), "{text}");
    assert!(!text.contains("failed calling webhook"), "{text}");
    assert!(pvs.get_opt("ebs-unknown").await.unwrap().is_none());
}

/// The opt-out label of the base configuration's objectSelector
/// (docs/webhook.md, "Which PVs reach the webhook").
const SKIP: &str = "pv-topology-webhook.io/skip";

#[tokio::test]
async fn a_pv_labelled_to_opt_out_is_never_sent_and_stored_as_created() {
    let cluster = TestCluster::start().await;
    let client = cluster.client();
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let served = serve(&[], &[]);
    let webhook = &served.webhook;
    register(&client, &webhook.url(), &served.ca_bundle, "Fail").await;
    wait_labeled(&pvs).await;
    let post = PostParams::default();
    let with_labels = |name: &str, labels: Value| {
        let mut pv = gce_pd(name, "europe-west1-c");
        pv.metadata.labels = serde_json::from_value(labels).expect("labels");
        pv
    };

    // Opted out: the apiserver does not call the webhook (its request
    // counter does not move) and stores the PV as sent, a zonal PD that the
    // webhook would have labelled.
    let before = webhook.requests();
    pvs.create(&post, &with_labels("opted-out", json!({SKIP: "true", "app": "db"})))
        .await
        .expect("create the opted-out PV");
    let stored = pvs.get("opted-out").await.expect("the opted-out PV");
    assert_eq!(labels(&stored), json!({SKIP: "true", "app": "db"}));
    assert_eq!(affinity(&stored), Value::Null);
    assert_eq!(webhook.requests(), before, "the opted-out PV was sent to the webhook");

    // The same disk without the label, and with another value of it: both
    // sent (one request each) and stored with the topology.
    for (name, own) in [
        ("not-opted-out", json!({"app": "db"})),
        ("skip-false", json!({SKIP: "false", "app": "db"})),
    ] {
        let before = webhook.requests();
        pvs.create(&post, &with_labels(name, own.clone()))
            .await
            .unwrap_or_else(|e| panic!("create {name}: {e}"));
        let stored = pvs.get(name).await.unwrap_or_else(|e| panic!("get {name}: {e}"));
        let mut expected = own;
        expected[ZONE] = json!("europe-west1-c");
        expected[REGION] = json!("europe-west1");
        assert_eq!(labels(&stored), expected, "{name}");
        assert_eq!(
            affinity(&stored),
            zone_affinity("topology.gke.io/zone", "europe-west1-c"),
            "{name}"
        );
        assert_eq!(webhook.requests(), before + 1, "{name}: one request");
    }
}
