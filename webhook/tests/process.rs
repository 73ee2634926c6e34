//! The binary itself: `certs` output, `sleep`, and `serve` stopped by SIGTERM.

mod common;

use std::os::unix::fs::PermissionsExt as _;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use common::net::*;
use common::*;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier as _;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use x509_parser::extensions::GeneralName;

const BIN: &str = env!("CARGO_BIN_EXE_pv-topology-webhook");

#[test]
fn certs_writes_a_ca_and_a_serving_certificate_it_signed() {
    install_provider();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let output = Command::new(BIN)
        .args([
            "certs",
            "--service",
            "pvt",
            "--namespace",
            "infra",
            "--validity",
            "720h",
        ])
        .arg("--out-dir")
        .arg(&out)
        .args(["--extra-san", "10.96.0.10", "--extra-san", "webhook.example.com,::1"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let ca_pem = std::fs::read(out.join("ca.crt")).unwrap();
    let bundle = String::from_utf8(output.stdout).unwrap();
    assert_eq!(
        base64::engine::general_purpose::STANDARD.decode(bundle.trim()).unwrap(),
        ca_pem,
        "stdout is the caBundle"
    );
    let mode = |name: &str| std::fs::metadata(out.join(name)).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode("tls.key"), 0o600);
    assert_eq!(mode("tls.crt"), 0o644);
    assert!(
        std::fs::read_dir(&out).unwrap().count() == 3,
        "no temporary files left behind"
    );

    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(out.join("tls.crt"))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from_pem_slice(&ca_pem).unwrap()).unwrap();
    let verifier = WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots),
        Arc::new(rustls::crypto::ring::default_provider()),
    )
    .build()
    .unwrap();
    let verify = |name: &str| {
        verifier.verify_server_cert(
            &chain[0],
            &chain[1..],
            &ServerName::try_from(name.to_owned()).unwrap(),
            &[],
            UnixTime::now(),
        )
    };
    for name in [
        "pvt",
        "pvt.infra",
        "pvt.infra.svc",
        "pvt.infra.svc.cluster.local",
        "webhook.example.com",
        "10.96.0.10",
        "::1",
    ] {
        assert!(verify(name).is_ok(), "{name}: {:?}", verify(name));
    }
    assert!(verify("pvt.other.svc").is_err());

    let (_, leaf) = x509_parser::parse_x509_certificate(&chain[0]).unwrap();
    let sans = leaf
        .subject_alternative_name()
        .unwrap()
        .unwrap()
        .value
        .general_names
        .clone();
    assert!(sans.contains(&GeneralName::DNSName("pvt.infra.svc")), "{sans:?}");
    assert!(sans.contains(&GeneralName::IPAddress(&[10, 96, 0, 10])), "{sans:?}");
    let lifetime = leaf.validity().not_after.timestamp() - leaf.validity().not_before.timestamp();
    assert!((720 * 3600..=720 * 3600 + 600).contains(&lifetime), "{lifetime}");
    let (_, ca) = x509_parser::parse_x509_certificate(&chain[1]).unwrap();
    assert!(ca.is_ca());

    // The pair loads as the webhook's serving certificate.
    let files = tls_files(out.join("tls.crt"), out.join("tls.key"));
    let pem = |p: &std::path::Path| std::fs::read(p).unwrap();
    pv_topology_webhook::tls::certified_key(&files, &pem(&files.cert.path), &pem(&files.key.path)).unwrap();

    // Running it again replaces the files.
    let again = Command::new(BIN)
        .args(["certs", "--service", "pvt", "--namespace", "infra", "--out-dir"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(again.status.success());
    assert_ne!(std::fs::read(out.join("ca.crt")).unwrap(), ca_pem);
}

#[test]
fn certs_refuses_bad_names_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    for (args, flag) in [
        (vec!["--service", "Bad_Name", "--namespace", "ns"], "--service"),
        (
            vec![
                "--service",
                "ok",
                "--namespace",
                "ns",
                "--extra-san",
                "no spaces allowed",
            ],
            "--extra-san",
        ),
    ] {
        let output = Command::new(BIN)
            .arg("certs")
            .args(&args)
            .arg("--out-dir")
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(!output.status.success());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(flag), "{stderr}");
    }
}

#[test]
fn certs_never_replaces_a_fifo_or_device_in_the_out_dir() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("tls.key");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let output = Command::new(BIN)
        .args(["certs", "--service", "pvt", "--namespace", "infra", "--out-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--out-dir"), "{stderr}");
    assert!(stderr.contains("a FIFO, not a regular file"), "{stderr}");
    use std::os::unix::fs::FileTypeExt as _;
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
}

#[test]
fn sleep_sleeps_and_exits_0() {
    let started = Instant::now();
    let status = Command::new(BIN).args(["sleep", "300ms"]).status().unwrap();
    assert!(status.success());
    assert!(started.elapsed() >= Duration::from_millis(300));
    let output = Command::new(BIN).args(["sleep", "soon"]).output().unwrap();
    assert!(!output.status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_stops_on_sigterm_after_the_delay_with_exit_0() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("ca");
    let files = write_pair(dir.path(), &ca.server());
    let rules = data_dir().join("rules.yaml");
    let ServeProcess {
        child,
        addr,
        metrics: metrics_addr,
    } = spawn_serve(
        &["--log-level", "info"],
        &files,
        &[
            "--shutdown-delay",
            "3s",
            "--drain-timeout",
            "2s",
            "--rules",
            rules.to_str().unwrap(),
        ],
    )
    .await;
    let body = fixture("rules-driver.json");
    let (status, _, _) = post_once(addr, default_client(&ca.pem), &body).await.unwrap();
    assert_eq!(status, 200);

    let signalled = Instant::now();
    assert!(
        Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(get_status(metrics_addr, "/readyz").await.unwrap(), 503);
    let (status, _, _) = post_once(addr, default_client(&ca.pem), &body).await.unwrap();
    assert_eq!(status, 200, "still serving during the delay");
    let status = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let elapsed = signalled.elapsed();
    let stderr = String::from_utf8_lossy(&status.stderr);
    assert!(status.status.success(), "{stderr}");
    assert!(
        elapsed >= Duration::from_secs(3),
        "stopped before the delay: {elapsed:?}"
    );
    assert!(elapsed < Duration::from_secs(15), "{elapsed:?}");
    assert!(stderr.contains("SIGTERM received"), "{stderr}");
    // The request span carries the uid and outcome, and no object.
    assert!(stderr.contains("uid=\"7f0d2a51"), "{stderr}");
    assert!(stderr.contains("outcome=\"labeled\""), "{stderr}");
    assert!(!stderr.contains("volumeHandle"), "{stderr}");
}

#[test]
fn serve_refuses_a_missing_certificate_naming_the_flag() {
    let output = Command::new(BIN)
        .args([
            "serve",
            "--tls-cert-file",
            "/nonexistent/tls.crt",
            "--tls-key-file",
            "/nonexistent/tls.key",
        ])
        .args(["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--tls-cert-file /nonexistent/tls.crt"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_stops_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_pair(dir.path(), &TestCa::new("ca").server());
    let ServeProcess { child, .. } = spawn_serve(&[], &files, &["--shutdown-delay", "30s"]).await;
    let started = Instant::now();
    for _ in 0..2 {
        Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let output = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("SIGINT received during shutdown"), "{stderr}");
}
