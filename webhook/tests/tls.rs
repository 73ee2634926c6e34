//! The HTTPS server over real loopback sockets: TLS versions, ALPN, client certificates,
//! full chains, certificate reload by Secret-volume symlink swap, a broken new pair, and
//! shutdown with requests in flight.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::net::*;
use common::*;
use pv_topology_webhook::tls::TlsFiles;
use serde_json::Value;

fn uid_of(body: &[u8]) -> Value {
    serde_json::from_slice::<Value>(body).unwrap()["request"]["uid"].clone()
}

fn answer_uid(body: &[u8]) -> Value {
    serde_json::from_slice::<Value>(body).unwrap()["response"]["uid"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_1_2_and_1_3_with_http2_and_http1_by_alpn() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("test CA");
    let files = write_pair(dir.path(), &ca.server());
    let server = Running::start(test_config(files), plain()).await;
    let body = fixture("gce-pd-csi-zonal.json");
    for version in [&rustls::version::TLS12, &rustls::version::TLS13] {
        for alpn in [&b"h2"[..], &b"http/1.1"[..]] {
            let config = client_config(&ca.pem, &[version], &[alpn], None);
            let (status, answer, negotiated) = post_once(server.addr, config, &body).await.unwrap();
            assert_eq!(status, 200);
            assert_eq!(answer_uid(&answer), uid_of(&body));
            assert_eq!(negotiated.version, version.version);
            assert_eq!(negotiated.alpn.as_deref(), Some(alpn));
        }
    }
    // A client that offers no ALPN gets HTTP/1.1.
    let config = client_config(&ca.pem, &[&rustls::version::TLS13], &[], None);
    let (status, _, negotiated) = post_once(server.addr, config, &body).await.unwrap();
    assert_eq!((status, negotiated.alpn), (200, None));
    // Many requests on one HTTP/2 connection, concurrently.
    let (conn, _) = connect(server.addr, default_client(&ca.pem)).await.unwrap();
    let Conn::H2(send) = conn else {
        panic!("expected HTTP/2")
    };
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let mut conn = Conn::H2(send.clone());
        let body = body.clone();
        tasks.push(tokio::spawn(async move { conn.post(&body).await.unwrap().0 }));
    }
    for task in tasks {
        assert_eq!(task.await.unwrap(), 200);
    }
    // A client that does not trust the CA fails the handshake, and that is counted.
    let other = TestCa::new("other CA");
    assert!(post_once(server.addr, default_client(&other.pem), &body).await.is_err());
    tokio::time::sleep(Duration::from_millis(100)).await;
    let text = server.state.metrics.encode().unwrap();
    assert!(
        text.contains("pv_topology_webhook_tls_handshake_errors_total 1"),
        "{text}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_chain_is_served_to_clients_that_trust_only_the_root() {
    let dir = tempfile::tempdir().unwrap();
    let root = TestCa::new("root");
    let intermediate = root.intermediate("intermediate");
    let files = write_pair(dir.path(), &intermediate.server().with_chain(&intermediate));
    let server = Running::start(test_config(files), plain()).await;
    let (status, _, _) = post_once(server.addr, default_client(&root.pem), &fixture("nfs.json"))
        .await
        .unwrap();
    assert_eq!(status, 200);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_are_required_when_a_client_ca_is_set() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("serving CA");
    let clients = TestCa::new("client CA");
    std::fs::write(dir.path().join("client-ca.crt"), &clients.pem).unwrap();
    let mut config = test_config(write_pair(dir.path(), &ca.server()));
    config.client_ca = Some(client_ca_file(dir.path().join("client-ca.crt")));
    let server = Running::start(config, plain()).await;
    let body = fixture("nfs.json");
    let versions = [&rustls::version::TLS13, &rustls::version::TLS12];
    for version in versions {
        let apiserver = clients.client("kube-apiserver");
        let good = client_config(&ca.pem, &[version], &[b"h2"], Some(&apiserver));
        assert_eq!(post_once(server.addr, good, &body).await.unwrap().0, 200);
        // No certificate, or one from another CA: no answer. (With TLS 1.3 the server's
        // refusal arrives after the client's handshake completes, so the request fails.)
        let none = client_config(&ca.pem, &[version], &[b"h2"], None);
        assert!(
            post_once(server.addr, none, &body).await.is_err(),
            "{version:?} without a client cert"
        );
        let stranger = TestCa::new("stranger").client("kube-apiserver");
        let bad = client_config(&ca.pem, &[version], &[b"h2"], Some(&stranger));
        assert!(
            post_once(server.addr, bad, &body).await.is_err(),
            "{version:?} with a foreign client cert"
        );
    }
    server.stop().await;
}

#[tokio::test]
async fn a_missing_or_mismatched_pair_fails_at_start_naming_the_flag() {
    install_provider();
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("ca");
    let files = write_pair(dir.path(), &ca.server());
    let other = ca.server();
    std::fs::write(&files.key.path, &other.key_pem).unwrap();
    let state = pv_topology_webhook::server::AppState::new(plain());
    let error = pv_topology_webhook::server::Server::bind(test_config(files.clone()), state.clone())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("--tls-key-file") && error.contains("does not fit --tls-cert-file"),
        "{error}"
    );
    let missing = tls_files(dir.path().join("nope.crt"), &files.key.path);
    let error = pv_topology_webhook::server::Server::bind(test_config(missing), state.clone())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("--tls-cert-file") && error.contains("nope.crt"),
        "{error}"
    );
    std::fs::write(&files.cert.path, "not PEM").unwrap();
    let error = pv_topology_webhook::server::Server::bind(test_config(files), state)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("--tls-cert-file") && error.contains("no PEM CERTIFICATE"),
        "{error}"
    );
}

/// A Secret volume: `dir/..data -> ..<version>`, `dir/tls.crt -> ..data/tls.crt`.
fn secret_volume(dir: &Path, version: &str, issued: &Issued) -> TlsFiles {
    write_pair(&dir.join(version), issued);
    std::os::unix::fs::symlink(version, dir.join("..data")).unwrap();
    for name in ["tls.crt", "tls.key"] {
        std::os::unix::fs::symlink(format!("..data/{name}"), dir.join(name)).unwrap();
    }
    tls_files(dir.join("tls.crt"), dir.join("tls.key"))
}

/// What the kubelet does on a Secret update: a new directory, then an atomic rename of
/// a new `..data` link over the old one.
fn swap_secret(dir: &Path, version: &str, issued: &Issued) {
    write_pair(&dir.join(version), issued);
    std::os::unix::fs::symlink(version, dir.join("..data_tmp")).unwrap();
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
}

/// New connections, one after the other, until `stop`; returns the serials seen and the
/// number of failures.
fn keep_sending(
    addr: std::net::SocketAddr,
    ca_pem: String,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<(BTreeSet<String>, Vec<String>, usize)> {
    tokio::spawn(async move {
        let body = fixture("gce-pd-csi-zonal.json");
        let mut serials = BTreeSet::new();
        let mut failures = Vec::new();
        let mut count = 0;
        while !stop.load(Ordering::SeqCst) {
            count += 1;
            match post_once(addr, default_client(&ca_pem), &body).await {
                Ok((200, _, negotiated)) => {
                    serials.insert(negotiated.serial);
                }
                Ok((status, _, _)) => failures.push(format!("HTTP {status}")),
                Err(error) => failures.push(error.to_string()),
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        (serials, failures, count)
    })
}

async fn wait_for_serial(addr: std::net::SocketAddr, ca_pem: &str, serial: &str) -> bool {
    for _ in 0..400 {
        if let Ok((_, _, negotiated)) = post_once(addr, default_client(ca_pem), &fixture("nfs.json")).await
            && negotiated.serial == serial
        {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_symlink_swap_reloads_the_certificate_while_requests_keep_succeeding() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("ca");
    let first = ca.server();
    let second = ca.server();
    assert_ne!(first.serial, second.serial);
    let files = secret_volume(dir.path(), "..2025_01_01_00_00_00.1", &first);
    let server = Running::start(test_config(files), plain()).await;

    let stop = Arc::new(AtomicBool::new(false));
    let client = keep_sending(server.addr, ca.pem.clone(), stop.clone());
    tokio::time::sleep(Duration::from_millis(200)).await;
    swap_secret(dir.path(), "..2025_01_02_00_00_00.2", &second);
    assert!(
        wait_for_serial(server.addr, &ca.pem, &second.serial).await,
        "never reloaded"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.store(true, Ordering::SeqCst);
    let (serials, failures, count) = client.await.unwrap();
    assert!(
        failures.is_empty(),
        "{} of {count} failed: {failures:?}",
        failures.len()
    );
    assert_eq!(serials, BTreeSet::from([first.serial.clone(), second.serial.clone()]));
    let text = server.state.metrics.encode().unwrap();
    assert!(
        text.contains("pv_topology_webhook_certificate_reloads_total{result=\"success\"} 1"),
        "{text}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_new_pair_keeps_the_old_one_until_a_good_one_arrives() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("ca");
    let first = ca.server();
    let files = secret_volume(dir.path(), "..v1", &first);
    let server = Running::start(test_config(files), plain()).await;
    let expiry_before = server.state.metrics.encode().unwrap();

    // A certificate with someone else's key.
    let mut mismatched = ca.server();
    mismatched.key_pem = ca.server().key_pem;
    swap_secret(dir.path(), "..v2", &mismatched);
    let metrics = server.state.metrics.clone();
    let failures = |n: u32| {
        let metrics = metrics.clone();
        move || {
            let text = metrics.encode().unwrap();
            async move {
                text.contains(&format!(
                    "pv_topology_webhook_certificate_reloads_total{{result=\"failure\"}} {n}"
                ))
            }
        }
    };
    eventually("the mismatched pair is tried", failures(1)).await;
    let (status, _, negotiated) = post_once(server.addr, default_client(&ca.pem), &fixture("nfs.json"))
        .await
        .unwrap();
    assert_eq!((status, negotiated.serial.as_str()), (200, first.serial.as_str()));
    // Garbage.
    let garbage = Issued {
        chain_pem: "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n".to_owned(),
        key_pem: "nothing".to_owned(),
        serial: String::new(),
    };
    swap_secret(dir.path(), "..v3", &garbage);
    eventually("the garbage pair is tried", failures(2)).await;
    let (_, _, negotiated) = post_once(server.addr, default_client(&ca.pem), &fixture("nfs.json"))
        .await
        .unwrap();
    assert_eq!(negotiated.serial, first.serial);
    let text = server.state.metrics.encode().unwrap();
    assert!(
        text.contains("pv_topology_webhook_certificate_reloads_total{result=\"failure\"} 2"),
        "{text}"
    );
    assert_eq!(
        expiry_line(&text),
        expiry_line(&expiry_before),
        "the gauge still describes the certificate in use"
    );

    // Then a good pair is picked up.
    let good = ca.server();
    swap_secret(dir.path(), "..v4", &good);
    assert!(wait_for_serial(server.addr, &ca.pem, &good.serial).await);
    server.stop().await;
}

fn expiry_line(text: &str) -> String {
    text.lines()
        .find(|l| l.starts_with("pv_topology_webhook_certificate_expiry_timestamp_seconds "))
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_finishes_requests_in_flight_and_reports_not_ready_during_the_delay() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("ca");
    let mut config = test_config(write_pair(dir.path(), &ca.server()));
    // Requests in flight must outlast the delay, so that the drain is what keeps them.
    config.shutdown_delay = Duration::from_millis(1500);
    // A lookup that takes 2.5 s (the common helper's 200 ms deadline is too short).
    let mut slow = FakeLookup::new(
        "ebs.csi.aws.com",
        Ok(pv_topology_webhook::topology::Topology::new(["us-east-1a"], Some("us-east-1".to_owned())).unwrap()),
    );
    slow.delay = Some(Duration::from_millis(2500));
    let reviewer = pv_topology_webhook::review::Reviewer::new(
        pv_topology_webhook::resolve::Resolver::new(Default::default())
            .with_lookup(Arc::new(slow))
            .with_deadline(Duration::from_secs(8)),
        Default::default(),
    );
    let mut server = Running::start(config, reviewer).await;
    assert_eq!(get_status(server.metrics_addr, "/readyz").await.unwrap(), 200);

    let body = create_review(pv(csi("ebs.csi.aws.com", "vol-0abc"), None));
    let mut in_flight = Vec::new();
    // HTTP/1.1 and HTTP/2 connections, opened before the signal.
    for alpn in [&b"h2"[..], &b"http/1.1"[..]] {
        for _ in 0..5 {
            let config = client_config(&ca.pem, &[&rustls::version::TLS13], &[alpn], None);
            let (mut conn, _) = connect(server.addr, config).await.unwrap();
            let body = body.clone();
            in_flight.push(tokio::spawn(async move { conn.post(&body).await }));
        }
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    server.shutdown();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(get_status(server.metrics_addr, "/readyz").await.unwrap(), 503);
    // Still accepting during the delay.
    let (status, _, _) = post_once(server.addr, default_client(&ca.pem), &fixture("nfs.json"))
        .await
        .unwrap();
    assert_eq!(status, 200);
    for request in in_flight {
        let (status, answer) = request.await.unwrap().expect("an in-flight request was lost");
        assert_eq!(status, 200);
        let answer: Value = serde_json::from_slice(&answer).unwrap();
        assert_eq!(answer["response"]["allowed"], true, "{answer}");
    }
    let addr = server.addr;
    server.stop().await;
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "the listener is closed after shutdown"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_ca_file_is_reloaded_and_a_broken_one_keeps_the_old_cas() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("serving CA");
    let (old, new) = (TestCa::new("old client CA"), TestCa::new("new client CA"));
    let ca_file = dir.path().join("client-ca.crt");
    std::fs::write(&ca_file, &old.pem).unwrap();
    let mut config = test_config(write_pair(dir.path(), &ca.server()));
    config.client_ca = Some(client_ca_file(&ca_file));
    let server = Running::start(config, plain()).await;
    let body = fixture("nfs.json");
    let as_client = |issuer: &TestCa| {
        client_config(
            &ca.pem,
            &[&rustls::version::TLS13],
            &[b"h2"],
            Some(&issuer.client("kube-apiserver")),
        )
    };
    assert!(post_once(server.addr, as_client(&old), &body).await.is_ok());
    assert!(post_once(server.addr, as_client(&new), &body).await.is_err());

    // Broken: once the reload has failed (counted), the old CAs still serve.
    std::fs::write(&ca_file, "not a certificate").unwrap();
    let metrics = server.state.metrics.clone();
    eventually("the broken CA file is seen and refused", || {
        let metrics = metrics.clone();
        async move {
            let text = metrics.encode().unwrap();
            text.contains("pv_topology_webhook_client_ca_reloads_total{result=\"failure\"} 1")
        }
    })
    .await;
    assert!(post_once(server.addr, as_client(&old), &body).await.is_ok());

    // Both CAs during a rotation, then only the new one.
    std::fs::write(&ca_file, format!("{}{}", old.pem, new.pem)).unwrap();
    let (addr, new_client, old_client) = (server.addr, as_client(&new), as_client(&old));
    eventually("the new CA is accepted", || {
        let (config, body) = (new_client.clone(), body.clone());
        async move { post_once(addr, config, &body).await.is_ok() }
    })
    .await;
    assert!(post_once(server.addr, as_client(&old), &body).await.is_ok());
    std::fs::write(&ca_file, &new.pem).unwrap();
    eventually("the old CA is refused", || {
        let (config, body) = (old_client.clone(), body.clone());
        async move { post_once(addr, config, &body).await.is_err() }
    })
    .await;
    assert!(post_once(server.addr, as_client(&new), &body).await.is_ok());
    let text = server.state.metrics.encode().unwrap();
    assert!(
        text.contains("pv_topology_webhook_client_ca_reloads_total{result=\"success\"} 2"),
        "{text}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ipv6_wildcard_also_takes_ipv4() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("ca");
    let mut config = test_config(write_pair(dir.path(), &ca.server()));
    config.listen = "[::]:0".parse().unwrap();
    let server = Running::start(config, plain()).await;
    let v4 = std::net::SocketAddr::from(([127, 0, 0, 1], server.addr.port()));
    let (status, _, _) = post_once(v4, default_client(&ca.pem), &fixture("nfs.json"))
        .await
        .unwrap();
    assert_eq!(status, 200);
    // And IPv6 loopback, where the host has it.
    if std::net::TcpListener::bind("[::1]:0").is_ok() {
        let v6 = std::net::SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, server.addr.port()));
        let (status, _, _) = post_once(v6, default_client(&ca.pem), &fixture("nfs.json"))
            .await
            .unwrap();
        assert_eq!(status, 200);
    }
    server.stop().await;
}

/// With `--client-ca-file`, TLS session resumption is off (docs/webhook.md): a client
/// coming back with the session (TLS 1.3 ticket, TLS 1.2 session id) of a connection
/// made while its CA was trusted gets a full handshake, so once the CA file stops
/// trusting it, it is refused instead of resumed past the new check. The control: the
/// same clients do resume on a server without a client CA file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_from_before_a_client_ca_change_is_not_resumed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ca = TestCa::new("serving CA");
    let (old, new) = (TestCa::new("old client CA"), TestCa::new("new client CA"));
    let apiserver = old.client("kube-apiserver");
    let versions = [&rustls::version::TLS13, &rustls::version::TLS12];
    let body = fixture("nfs.json");

    // Control: resumption is what this client does when the server allows it.
    let open = Running::start(test_config(write_pair(&dir.path().join("open"), &ca.server())), plain()).await;
    for version in versions {
        let client = client_config(&ca.pem, &[version], &[b"h2"], Some(&apiserver));
        let (_, _, first) = post_once(open.addr, client.clone(), &body)
            .await
            .expect("first connection");
        let (_, _, second) = post_once(open.addr, client, &body).await.expect("second connection");
        assert!(
            !first.resumed && second.resumed,
            "{version:?}: the control client did not resume ({first:?}, {second:?})"
        );
    }
    open.stop().await;

    let ca_file = dir.path().join("client-ca.crt");
    std::fs::write(&ca_file, &old.pem).expect("client CA file");
    let mut config = test_config(write_pair(dir.path(), &ca.server()));
    config.client_ca = Some(client_ca_file(&ca_file));
    let server = Running::start(config, plain()).await;
    let mut clients = Vec::new();
    for version in versions {
        let client = client_config(&ca.pem, &[version], &[b"h2"], Some(&apiserver));
        let (status, _, first) = post_once(server.addr, client.clone(), &body)
            .await
            .expect("trusted client");
        assert_eq!(status, 200);
        // Still trusted, but checked again: a full handshake, not a resumed one.
        let (status, _, second) = post_once(server.addr, client.clone(), &body)
            .await
            .expect("trusted client again");
        assert_eq!(status, 200);
        assert!(!first.resumed && !second.resumed, "{version:?}: resumed ({second:?})");
        clients.push((version, client));
    }

    // The CA file now trusts only the new CA; the old clients still hold their sessions.
    std::fs::write(&ca_file, &new.pem).expect("new client CA file");
    let metrics = server.state.metrics.clone();
    eventually("the new client CA file is loaded", || {
        let text = metrics.encode().expect("metrics");
        async move { text.contains("pv_topology_webhook_client_ca_reloads_total{result=\"success\"} 1") }
    })
    .await;
    for (version, client) in clients {
        match post_once(server.addr, client, &body).await {
            Err(_) => {}
            Ok((status, _, negotiated)) => {
                panic!("{version:?}: a client the CA file no longer trusts was answered {status} ({negotiated:?})")
            }
        }
    }
    server.stop().await;
}
