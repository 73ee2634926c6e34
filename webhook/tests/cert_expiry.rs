//! The serving certificate's validity: warned about at load when it is expired, not yet
//! valid or near its end, and again during `serve` each time that changes (not on every
//! reload tick). Readiness does not depend on it (docs/decisions.md).

mod common;

use std::process::Command;

use common::net::*;
use pv_topology_webhook::tls::{CertInfo, ExpiryWatch, Validity};
use rcgen::{CertificateParams, KeyPair};
use time::OffsetDateTime;

const DAY: i64 = 86_400;

fn info(not_before: i64, not_after: i64) -> CertInfo {
    CertInfo {
        serial: "01".to_owned(),
        not_before,
        not_after,
        chain_len: 1,
    }
}

#[test]
fn validity_is_judged_against_a_third_of_the_lifetime_at_most_seven_days() {
    // A 90-day certificate: warned about in its last 7 days.
    let cert = info(0, 90 * DAY);
    assert_eq!(cert.validity_at(-1), Validity::NotYetValid);
    assert_eq!(cert.validity_at(0), Validity::Valid);
    assert_eq!(cert.validity_at(83 * DAY - 1), Validity::Valid);
    assert_eq!(cert.validity_at(83 * DAY), Validity::ExpiringSoon);
    assert_eq!(cert.validity_at(90 * DAY), Validity::ExpiringSoon);
    assert_eq!(cert.validity_at(90 * DAY + 1), Validity::Expired);
    // A 24-hour certificate: in its last third (8 h), not for all of its life.
    let short = info(0, DAY);
    assert_eq!(short.validity_at(DAY / 2), Validity::Valid);
    assert_eq!(short.validity_at(DAY - DAY / 3), Validity::ExpiringSoon);
}

#[test]
fn a_warning_is_given_once_per_change_of_validity() {
    let mut watch = ExpiryWatch::default();
    let cert = info(0, 90 * DAY);
    assert_eq!(watch.observe(&cert, DAY), None, "valid: nothing to say");
    let soon = watch.observe(&cert, 84 * DAY).expect("warned when it nears its end");
    assert!(soon.contains("expires in 6 days"), "{soon}");
    assert_eq!(watch.observe(&cert, 85 * DAY), None, "said once, not on every tick");
    assert_eq!(watch.observe(&cert, 89 * DAY), None);
    let expired = watch.observe(&cert, 91 * DAY).expect("warned when it expires");
    assert!(expired.contains("has expired"), "{expired}");
    assert_eq!(watch.observe(&cert, 92 * DAY), None);
    // A renewed certificate ends the warnings; its own end is warned about in turn.
    let renewed = info(91 * DAY, 181 * DAY);
    assert_eq!(watch.observe(&renewed, 92 * DAY), None);
    assert!(watch.observe(&renewed, 175 * DAY).is_some());
    let early = info(200 * DAY, 290 * DAY);
    let not_yet = watch.observe(&early, 176 * DAY).expect("warned when not yet valid");
    assert!(not_yet.contains("not valid before"), "{not_yet}");
}

/// A self-signed certificate for localhost valid from `not_before` to `not_after`.
fn self_signed(not_before: OffsetDateTime, not_after: OffsetDateTime) -> (String, String) {
    let mut params = CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
    params.not_before = not_before;
    params.not_after = not_after;
    let key = KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    (cert.pem(), key.serialize_pem())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_warns_at_start_about_an_expired_certificate_and_stays_ready() {
    let dir = tempfile::tempdir().unwrap();
    let now = OffsetDateTime::now_utc();
    let (cert, key) = self_signed(now - time::Duration::days(30), now - time::Duration::days(1));
    std::fs::write(dir.path().join("tls.crt"), cert).unwrap();
    std::fs::write(dir.path().join("tls.key"), key).unwrap();
    let files = tls_files(dir.path().join("tls.crt"), dir.path().join("tls.key"));
    let ServeProcess { child, .. } = spawn_serve(&[], &files, &["--shutdown-delay", "0s"]).await;
    assert!(
        Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    let output = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    // The default log level is warn: the warning is there without asking for it.
    assert!(stderr.contains("WARN"), "{stderr}");
    assert!(stderr.contains("has expired"), "{stderr}");
    assert!(stderr.contains("--tls-cert-file"), "{stderr}");
}
