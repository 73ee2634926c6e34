//! The webhook's availability behind a real kube-apiserver: with the
//! webhook down the failurePolicy decides, and a certificate swap or
//! instances replaced one at a time fail no creation of a steady stream of
//! PVs (set-up as in `webhook.rs`).

mod common;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use base64::Engine;
use cluster_harness::TestCluster;
use cluster_harness::webhook::{Webhook, certs, register, serve};
use common::*;
use k8s_openapi::api::core::v1::PersistentVolume;
use kube::api::{Api, PostParams};
use serde_json::Value;

fn base64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// Creates GCE PD PVs `{prefix}-N` one after the other until `stop`; each must
/// be created with its zone label. The number created and the failures.
fn keep_creating(
    pvs: Api<PersistentVolume>,
    prefix: &'static str,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<(usize, Vec<String>)> {
    tokio::spawn(async move {
        let mut failures = Vec::new();
        let mut created = 0;
        while !stop.load(Ordering::SeqCst) {
            let name = format!("{prefix}-{created}-{}", failures.len());
            match pvs
                .create(&PostParams::default(), &gce_pd(&name, "europe-west1-c"))
                .await
            {
                Ok(pv) if labels(&pv)[ZONE] == "europe-west1-c" => created += 1,
                Ok(pv) => failures.push(format!("{name}: stored without topology: {:?}", pv.metadata.labels)),
                Err(e) => failures.push(format!("{name}: {}", message(&e))),
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        (created, failures)
    })
}

#[tokio::test]
async fn when_the_webhook_is_down_the_failure_policy_decides() {
    let cluster = TestCluster::start().await;
    let client = cluster.client();
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let served = serve(&[], &[]);
    let (url, ca_bundle) = (served.webhook.url(), served.ca_bundle.clone());
    register(&client, &url, &ca_bundle, "Fail").await;
    wait_labeled(&pvs).await;
    drop(served); // killed: nothing listens on its port any more

    // Fail: creation is refused.
    let error = pvs
        .create(&PostParams::default(), &gce_pd("down-fail", "europe-west1-b"))
        .await
        .expect_err("created while the webhook is down under failurePolicy Fail");
    let text = message(&error);
    assert!(text.contains("failed calling webhook"), "{text}");
    assert!(pvs.get_opt("down-fail").await.unwrap().is_none());

    // Ignore: created, without topology.
    register(&client, &url, &ca_bundle, "Ignore").await;
    wait_until(&pvs, "failurePolicy Ignore never applied", |a| a.is_ok()).await;
    pvs.create(&PostParams::default(), &gce_pd("down-ignore", "europe-west1-b"))
        .await
        .unwrap();
    let stored = pvs.get("down-ignore").await.unwrap();
    assert_eq!(labels(&stored), Value::Null);
    assert_eq!(affinity(&stored), Value::Null);
}

/// A Secret volume's layout: `dir/..data -> <version>`, `dir/tls.* -> ..data/tls.*`;
/// a swap is a new version directory and an atomic rename of a new `..data` link.
fn secret_version(dir: &Path, version: &str, from: &Path) {
    std::fs::create_dir(dir.join(version)).unwrap();
    for name in ["tls.crt", "tls.key"] {
        std::fs::copy(from.join(name), dir.join(version).join(name)).unwrap();
    }
    std::os::unix::fs::symlink(version, dir.join("..data_tmp")).unwrap();
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
    for name in ["tls.crt", "tls.key"] {
        if !dir.join(name).exists() {
            std::os::unix::fs::symlink(format!("..data/{name}"), dir.join(name)).unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_swap_fails_no_creation() {
    let cluster = TestCluster::start().await;
    let client = cluster.client();
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let (first, second, secret) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let (first_ca, first_bundle) = certs(first.path());
    let (second_ca, second_bundle) = certs(second.path());
    assert_ne!(first_ca, second_ca);
    secret_version(secret.path(), "..2026_01_01_00_00_00.1", first.path());
    let webhook = Webhook::start(
        &secret.path().join("tls.crt"),
        &secret.path().join("tls.key"),
        &["--tls-reload-interval", "200ms"],
        &[],
    );
    // The caBundle holds both CAs while the certificate is replaced (docs/webhook.md).
    let both = base64(&format!("{first_ca}{second_ca}"));
    register(&client, &webhook.url(), &both, "Fail").await;
    wait_labeled(&pvs).await;

    let stop = Arc::new(AtomicBool::new(false));
    let creating = keep_creating(pvs.clone(), "swap", stop.clone());
    tokio::time::sleep(Duration::from_millis(500)).await;
    secret_version(secret.path(), "..2026_01_02_00_00_00.2", second.path());
    let deadline = Instant::now() + Duration::from_secs(15);
    while webhook.counter("pv_topology_webhook_certificate_reloads_total", "result=\"success\"") < 1 {
        assert!(Instant::now() < deadline, "the new certificate was never loaded");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Then the old CA is dropped from the caBundle: still no failure.
    register(&client, &webhook.url(), &second_bundle, "Fail").await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    stop.store(true, Ordering::SeqCst);
    let (created, failures) = creating.await.unwrap();
    eprintln!("{created} PVs created, {} failed", failures.len());
    assert!(failures.is_empty(), "{} created, failures: {failures:#?}", created);
    assert!(created >= 10, "only {created} created");

    // The new certificate is what is served: a caBundle of the old CA alone fails.
    register(&client, &webhook.url(), &first_bundle, "Fail").await;
    wait_until(&pvs, "the old CA still verifies the webhook", |a| {
        a.as_ref().is_err_and(|e| message(e).contains("failed calling webhook"))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replacing_webhook_instances_one_at_a_time_fails_no_creation() {
    // What this shows: two instances are replaced one at a time (A by B, then
    // B by C) while PVs keep being created under failurePolicy Fail, and none
    // fails. Each old instance gets SIGTERM first and the configuration moves
    // to the new URL just after, as endpoints lag a pod's termination; the old
    // one keeps answering for --shutdown-delay and drains what is in flight.
    // (With --shutdown-delay 0s this test sees "connection refused" in about
    // half its runs.) Without kube-proxy or endpoints here, the URL names one
    // instance: it does not show a Service spreading requests over replicas.
    let cluster = TestCluster::start().await;
    let client = cluster.client();
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let certs_dir = tempfile::tempdir().unwrap();
    let (_, ca_bundle) = certs(certs_dir.path());
    let start = || {
        Webhook::start(
            &certs_dir.path().join("tls.crt"),
            &certs_dir.path().join("tls.key"),
            &["--shutdown-delay", "1s", "--drain-timeout", "5s"],
            &[],
        )
    };
    let mut old = start();
    register(&client, &old.url(), &ca_bundle, "Fail").await;
    wait_labeled(&pvs).await;

    let stop = Arc::new(AtomicBool::new(false));
    let creating = keep_creating(pvs.clone(), "roll", stop.clone());
    for _ in 0..2 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let new = start();
        // As in a rolling update, the old instance is told to stop before the
        // apiserver stops sending to it (endpoints lag); --shutdown-delay covers that.
        old.sigterm();
        register(&client, &new.url(), &ca_bundle, "Fail").await;
        let status = old.wait_exit(Duration::from_secs(20));
        assert!(status.success(), "{status}:\n{}", old.log());
        assert!(old.log().contains("SIGTERM"), "{}", old.log());
        let deadline = Instant::now() + Duration::from_secs(10);
        while new.requests() == 0 {
            assert!(Instant::now() < deadline, "the apiserver never called the new instance");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        old = new;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::SeqCst);
    let (created, failures) = creating.await.unwrap();
    eprintln!("{created} PVs created, {} failed", failures.len());
    assert!(failures.is_empty(), "{created} created, failures: {failures:#?}");
    assert!(created >= 10, "only {created} created");
}
