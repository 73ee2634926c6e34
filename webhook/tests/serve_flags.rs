//! Serving features docs/webhook.md promises, each through what an operator sets: PKCS#1
//! (`BEGIN RSA PRIVATE KEY`) and SEC1 (`BEGIN EC PRIVATE KEY`) serving keys, the
//! certificate-expiry gauge following a reload, `--header-read-timeout` dropping a client
//! that connects and sends nothing (not before, not long after), and the lookup cache's
//! `--lookup-cache-ttl`, `--lookup-cache-size` and `--lookup-timeout` against the fake
//! of Google's APIs (tests/fakes/gcp_server.py, loopback only; `review` meets the same
//! timeout in tests/gce.rs).

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::net::*;
use common::*;
use rcgen::KeyPair;
use serde_json::{Value, json};
use test_fakes::GcpFake;
use time::OffsetDateTime;
use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpStream;

/// `openssl pkey -traditional` of the PKCS#8 key `pkcs8`: PKCS#1 for RSA, SEC1 for EC
/// (OpenSSL 3's "traditional" forms).
fn traditional(dir: &Path, pkcs8: &str) -> String {
    let input = dir.join("pkcs8.pem");
    std::fs::write(&input, pkcs8).expect("write the PKCS#8 key");
    let output = Command::new("openssl")
        .args(["pkey", "-traditional", "-in"])
        .arg(&input)
        .stderr(Stdio::piped())
        .output()
        .expect("the openssl CLI runs (it is in the image the tests run in)");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).expect("PEM")
}

fn rsa_pkcs8() -> String {
    let output = Command::new("openssl")
        .args(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"])
        .stderr(Stdio::piped())
        .output()
        .expect("the openssl CLI runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).expect("PEM")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pkcs1_and_sec1_serving_keys_are_served() {
    let ca = TestCa::new("ca");
    for (name, pkcs8, header) in [
        ("RSA", rsa_pkcs8(), "-----BEGIN RSA PRIVATE KEY-----"),
        (
            "EC P-256",
            KeyPair::generate().expect("key").serialize_pem(),
            "-----BEGIN EC PRIVATE KEY-----",
        ),
    ] {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut issued = ca.server_with(KeyPair::from_pem(&pkcs8).expect("rcgen reads the key"), None);
        issued.key_pem = traditional(dir.path(), &pkcs8);
        assert!(issued.key_pem.starts_with(header), "{name}: {}", issued.key_pem);
        let server = Running::start(test_config(write_pair(dir.path(), &issued)), plain()).await;
        for version in [&rustls::version::TLS13, &rustls::version::TLS12] {
            let client = client_config(&ca.pem, &[version], &[b"h2"], None);
            let (status, _, negotiated) = post_once(server.addr, client, &fixture("nfs.json"))
                .await
                .unwrap_or_else(|e| panic!("{name} {version:?}: {e}"));
            assert_eq!(
                (status, negotiated.serial.as_str()),
                (200, issued.serial.as_str()),
                "{name}"
            );
        }
        server.stop().await;
    }
}

fn expiry_gauge(text: &str) -> i64 {
    text.lines()
        .find_map(|l| l.strip_prefix("pv_topology_webhook_certificate_expiry_timestamp_seconds "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no expiry gauge: {text}")) as i64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_expiry_gauge_follows_a_reloaded_certificate() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ca = TestCa::new("ca");
    let now = OffsetDateTime::now_utc().replace_nanosecond(0).expect("whole seconds");
    let (first_end, second_end) = (now + time::Duration::days(30), now + time::Duration::days(90));
    let first = ca.server_with(KeyPair::generate().expect("key"), Some(first_end));
    let files = write_pair(dir.path(), &first);
    let server = Running::start(test_config(files), plain()).await;
    let metrics = server.state.metrics.clone();
    assert_eq!(
        expiry_gauge(&metrics.encode().expect("metrics")),
        first_end.unix_timestamp()
    );
    let second = ca.server_with(KeyPair::generate().expect("key"), Some(second_end));
    write_pair(dir.path(), &second);
    eventually("the gauge says the new certificate's notAfter", || {
        let text = metrics.encode().expect("metrics");
        async move { expiry_gauge(&text) == second_end.unix_timestamp() }
    })
    .await;
    // And that certificate is the one served.
    let (_, _, negotiated) = post_once(server.addr, default_client(&ca.pem), &fixture("nfs.json"))
        .await
        .expect("a review");
    assert_eq!(negotiated.serial, second.serial);
    server.stop().await;
}

/// A serve process killed when the test ends, however it ends.
struct Serve(ServeProcess);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.child.kill();
        let _ = self.0.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_sends_nothing_is_dropped_at_the_header_read_timeout() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ca = TestCa::new("ca");
    let files = write_pair(dir.path(), &ca.server());
    let server = Serve(spawn_serve(&[], &files, &["--header-read-timeout", "2s", "--idle-timeout", "60s"]).await);
    let started = Instant::now();
    // Nothing at all; and half a TLS record header, a handshake begun and not finished.
    let mut silent = TcpStream::connect(server.0.addr).await.expect("connect");
    let mut partial = TcpStream::connect(server.0.addr).await.expect("connect");
    partial.write_all(&[0x16, 0x03, 0x01]).await.expect("write");
    // Open for most of the timeout: the server does not cut them early.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    for (name, stream) in [("silent", &mut silent), ("partial", &mut partial)] {
        assert!(
            closed_within(stream, Duration::from_millis(100)).await.is_none(),
            "the {name} connection was closed after {:?}, before the 2 s timeout",
            started.elapsed()
        );
    }
    for (name, stream) in [("silent", &mut silent), ("partial", &mut partial)] {
        let read = closed_within(stream, Duration::from_secs(5)).await;
        assert!(
            read.is_some(),
            "the {name} connection is still open after {:?}",
            started.elapsed()
        );
    }
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(1900) && elapsed < Duration::from_millis(4500),
        "{elapsed:?}"
    );
    // The server still answers.
    let (status, _, _) = post_once(server.0.addr, default_client(&ca.pem), &fixture("nfs.json"))
        .await
        .expect("a review");
    assert_eq!(status, 200);
}

/// An in-tree GCE PD review whose zone label names where to look.
fn gce_pd(name: &str, zone: &str) -> Vec<u8> {
    create_review(pv(
        json!({"gcePersistentDisk": {"pdName": name, "fsType": "ext4"}}),
        Some(json!({"topology.kubernetes.io/zone": zone})),
    ))
}

fn disk_get(zone: &str, name: &str) -> String {
    format!("GET /compute/v1/projects/demo-project/zones/{zone}/disks/{name}")
}

/// `serve --gce-lookup` against the fake, with `args`.
async fn serve_gce(fake: &GcpFake, files: &pv_topology_webhook::tls::TlsFiles, args: &[&str]) -> Serve {
    let compute = format!("--gce-compute-endpoint={}compute/v1/", fake.base());
    let mut all = vec!["--gce-lookup", compute.as_str(), "--shutdown-delay", "0s"];
    all.extend(args);
    // The metadata server (token, project) is the fake too.
    Serve(spawn_serve_env(&[], files, &all, &[("GCE_METADATA_HOST", &fake.host())]).await)
}

async fn outcome(server: &Serve, ca: &TestCa, body: &[u8]) -> Value {
    let (status, answer, _) = post_once(server.0.addr, default_client(&ca.pem), body)
        .await
        .expect("a review");
    assert_eq!(status, 200);
    let answer: Value = serde_json::from_slice(&answer).expect("JSON");
    answer["response"]["auditAnnotations"]["outcome"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lookup_cache_keeps_answers_for_its_ttl_and_size() {
    let fake = GcpFake::with(|scenario| {
        let disks = scenario["compute"]["disks"].as_array_mut().expect("disks");
        disks.push(json!({"project": "demo-project", "zone": "us-central1-b", "name": "pd-b"}));
    });
    let dir = tempfile::tempdir().expect("temp dir");
    let ca = TestCa::new("ca");
    let files = write_pair(dir.path(), &ca.server());
    let (pd_b, pd_zonal) = (gce_pd("pd-b", "us-central1-b"), gce_pd("pd-zonal", "us-central1-a"));
    let (get_b, get_zonal) = (disk_get("us-central1-b", "pd-b"), disk_get("us-central1-a", "pd-zonal"));

    // Within the TTL, a second review makes no call; after it, one more.
    let server = serve_gce(&fake, &files, &["--lookup-cache-ttl", "3s"]).await;
    let started = Instant::now();
    assert_eq!(outcome(&server, &ca, &pd_b).await, "labeled");
    assert_eq!(outcome(&server, &ca, &pd_b).await, "labeled");
    assert!(started.elapsed() < Duration::from_secs(3), "too slow to judge the TTL");
    assert_eq!(
        fake.requests(&get_b),
        1,
        "a second review within the TTL called Compute"
    );
    tokio::time::sleep(Duration::from_millis(3200).saturating_sub(started.elapsed())).await;
    assert_eq!(outcome(&server, &ca, &pd_b).await, "labeled");
    assert_eq!(fake.requests(&get_b), 2, "a review after the TTL did not call Compute");
    drop(server);

    // One entry: a second disk pushes the first out.
    let server = serve_gce(&fake, &files, &["--lookup-cache-size", "1"]).await;
    assert_eq!(outcome(&server, &ca, &pd_b).await, "labeled");
    assert_eq!(outcome(&server, &ca, &pd_zonal).await, "labeled");
    assert_eq!(outcome(&server, &ca, &pd_zonal).await, "labeled");
    assert_eq!(fake.requests(&get_zonal), 1, "the last disk is kept");
    assert_eq!(outcome(&server, &ca, &pd_b).await, "labeled");
    assert_eq!(fake.requests(&get_b), 4, "the evicted disk was not looked up again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_ends_a_slow_lookup_at_the_lookup_timeout() {
    // tests/data/gcp/scenario.json's pd-slow (us-central1-b) answers after 3 s.
    let fake = GcpFake::with(|_| {});
    let dir = tempfile::tempdir().expect("temp dir");
    let ca = TestCa::new("ca");
    let files = write_pair(dir.path(), &ca.server());
    let server = serve_gce(&fake, &files, &["--lookup-timeout", "500ms"]).await;
    let started = Instant::now();
    let (status, answer, _) = post_once(
        server.0.addr,
        default_client(&ca.pem),
        &gce_pd("pd-slow", "us-central1-b"),
    )
    .await
    .expect("a review");
    let elapsed = started.elapsed();
    assert_eq!(status, 200);
    let answer: Value = serde_json::from_slice(&answer).expect("JSON");
    assert_eq!(answer["response"]["allowed"], false, "{answer}");
    let message = answer["response"]["status"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("timed out after 500ms"), "{answer}");
    assert!(
        elapsed >= Duration::from_millis(450) && elapsed < Duration::from_millis(2500),
        "{elapsed:?}"
    );
}
