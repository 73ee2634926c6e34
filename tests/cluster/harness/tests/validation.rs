//! `/validate` behind a real kube-apiserver: `pv-topology-webhook serve` registered
//! with both configurations of `manifests/webhook/base` (the mutating one on
//! `/mutate`, the validating one on `/validate`, each read at run time with only
//! `clientConfig` and `failurePolicy` replaced). GCE PD handles carry their zone, so no
//! cloud is asked: a PV whose nodeAffinity lies about its zone is refused with our
//! message, a label UPDATE that contradicts the disk is refused, and updates that leave
//! the topology alone pass. Then, on the same cluster, the install without cert-manager
//! (validation/no_cert_manager.rs).

mod common;
#[path = "validation/no_cert_manager.rs"]
mod no_cert_manager;

use std::time::{Duration, Instant};

use cluster_harness::TestCluster;
use cluster_harness::webhook::{register, register_validating, serve};
use common::*;
use k8s_openapi::api::core::v1::PersistentVolume;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

#[tokio::test]
async fn contradicting_pvs_and_label_updates_are_refused_with_our_message() {
    let cluster = TestCluster::start().await;
    let client = cluster.client();
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let served = serve(&[], &[]);
    register(&client, &served.webhook.url(), &served.ca_bundle, "Fail").await;
    register_validating(&client, &served.webhook.validate_url(), &served.ca_bundle, "Fail").await;
    wait_labeled(&pvs).await;
    // The apiserver has seen the validating configuration once a lying probe (dry
    // run) is refused.
    let lying = |name: &str| {
        let mut pv = gce_pd(name, "europe-west1-b");
        pv.spec.as_mut().expect("a spec").node_affinity = Some(
            serde_json::from_value(zone_affinity("topology.gke.io/zone", "europe-west1-c"))
                .expect("a VolumeNodeAffinity"),
        );
        pv
    };
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while pvs.create(&dry, &lying("probe")).await.is_ok() {
        assert!(Instant::now() < deadline, "the apiserver never called /validate");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let post = PostParams::default();

    // nodeAffinity names a zone the disk is not in: /mutate leaves the user's
    // nodeAffinity alone (with a warning), /validate refuses the PV.
    let refused = pvs.create(&post, &lying("lying-affinity")).await.expect_err("refused");
    let text = message(&refused);
    assert!(
        text.contains("projects/P/zones/europe-west1-b/disks/lying-affinity")
            && text.contains("nodeAffinity term 0: topology.gke.io/zone In [\"europe-west1-c\"]")
            && text.contains("but the disk is in zone europe-west1-b")
            && text.contains("--on-contradiction=deny"),
        "{text}"
    );
    assert!(pvs.get_opt("lying-affinity").await.expect("a GET").is_none());

    // A good PV: labeled by /mutate, consistent for /validate.
    pvs.create(&post, &gce_pd("good", "europe-west1-b"))
        .await
        .expect("created");
    let stored = pvs.get("good").await.expect("read");
    assert_eq!(labels(&stored)[ZONE], "europe-west1-b");

    // A label UPDATE that contradicts the disk is refused.
    let params = PatchParams::default();
    let relabel = json!({"metadata": {"labels": {ZONE: "europe-west1-d"}}});
    let refused = pvs
        .patch("good", &params, &Patch::Merge(&relabel))
        .await
        .expect_err("the contradicting label is refused");
    let text = message(&refused);
    assert!(
        text.contains("label topology.kubernetes.io/zone=\"europe-west1-d\"")
            && text.contains("but the disk is in zone europe-west1-b"),
        "{text}"
    );
    assert_eq!(labels(&pvs.get("good").await.expect("read"))[ZONE], "europe-west1-b");

    // An UPDATE that leaves the topology alone passes.
    let other = json!({"metadata": {"labels": {"team": "storage"}}});
    let updated = pvs
        .patch("good", &params, &Patch::Merge(&other))
        .await
        .expect("allowed");
    assert_eq!(labels(&updated)["team"], "storage");

    // The same cluster for the install without cert-manager (issue 25 item 3).
    drop(served);
    no_cert_manager::the_component_s_render_validates_and_mutates(&client).await;
}
