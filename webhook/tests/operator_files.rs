//! Files named by flags (`--rules`, `--tls-cert-file`, `--tls-key-file`,
//! `--client-ca-file`) are read as regular files only, with a size cap: a FIFO is refused
//! instead of blocking the start, a device (here /dev/zero behind a symlink, as a Secret
//! volume would link) is refused instead of read without end, and an oversized file is
//! refused. Each message names the flag and the path.

mod common;

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use common::net::*;
use pv_topology_webhook::metrics::Metrics;
use pv_topology_webhook::rules::Rules;
use pv_topology_webhook::tls::{CertReloader, NamedFile, TlsFiles};

fn mkfifo(path: &Path) {
    assert!(
        std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .unwrap()
            .success()
    );
}

/// Runs `f` on a thread and fails the test, rather than hanging it, if `f` blocks.
fn without_blocking<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|_| panic!("{what} blocked"))
}

/// Paths to a FIFO, a symlink to /dev/zero and a file of `big` bytes, in `dir`.
fn bad_files(dir: &Path, big: usize) -> [(PathBuf, &'static str); 3] {
    let fifo = dir.join("fifo");
    mkfifo(&fifo);
    let zero = dir.join("zero");
    symlink("/dev/zero", &zero).unwrap();
    let large = dir.join("large");
    // Valid YAML and PEM-free text, so that only the size can refuse it.
    let mut text = b"rules: []\n".to_vec();
    text.resize(big, b'#');
    text.push(b'\n');
    std::fs::write(&large, text).unwrap();
    [
        (fifo, "is a FIFO, not a regular file"),
        (zero, "is a character device, not a regular file"),
        (large, "larger than"),
    ]
}

fn rules_error(path: PathBuf) -> String {
    let error = without_blocking("--rules", move || Rules::load(&[path]).unwrap_err());
    pv_topology_webhook::Error::from(error).to_string()
}

#[test]
fn rules_files_must_be_regular_and_small() {
    let dir = tempfile::tempdir().unwrap();
    for (path, reason) in bad_files(dir.path(), 2 * 1024 * 1024) {
        let message = rules_error(path.clone());
        assert!(message.starts_with("--rules: "), "{message}");
        assert!(message.contains(&*path.to_string_lossy()), "{message}");
        assert!(message.contains(reason), "{message}");
    }
}

fn tls_error(files: TlsFiles, client_ca: Option<NamedFile>) -> String {
    install_provider();
    without_blocking("loading the certificate", move || {
        CertReloader::load(files, client_ca, Arc::new(Metrics::new()))
            .map(|_| ())
            .unwrap_err()
            .to_string()
    })
}

#[test]
fn certificate_key_and_client_ca_files_must_be_regular_and_small() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("ca");
    let good = write_pair(&dir.path().join("good"), &ca.server());
    let ca_file = dir.path().join("ca.crt");
    std::fs::write(&ca_file, &ca.pem).unwrap();
    for (path, reason) in bad_files(dir.path(), 2 * 1024 * 1024) {
        let cases = [
            ("--tls-cert-file", tls_files(&path, &good.key.path), None),
            ("--tls-key-file", tls_files(&good.cert.path, &path), None),
            ("--client-ca-file", good.clone(), Some(client_ca_file(&path))),
        ];
        for (flag, files, client_ca) in cases {
            let message = tls_error(files, client_ca);
            assert!(message.starts_with(flag), "{message}");
            assert!(message.contains(&*path.to_string_lossy()), "{message}");
            assert!(message.contains(reason), "{flag}: {message}");
        }
    }
    // The good files still load.
    install_provider();
    assert!(CertReloader::load(good, Some(client_ca_file(ca_file)), Arc::new(Metrics::new())).is_ok());
}
