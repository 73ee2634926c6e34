//! The systemd units of manifests/node-ip-helper/ as systemd reads them:
//! `systemd-analyze verify` (Debian package `systemd`) on copies whose
//! programs exist here (node-ip-helper.service's ExecStart with this
//! build's binary for /usr/local/bin/node-ip-helper, the kubelet drop-in's
//! /usr/bin/kubelet as /bin/true, under a minimal kubelet.service), with
//! the drop-in's active ExecStart line and with its commented alternative.
//! Any warning (an unknown key, a bad value, a missing program) fails.

use std::path::Path;
use std::process::Command;

fn manifest(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../manifests/node-ip-helper")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `systemd-analyze verify` of node-ip-helper.service and kubelet.service
/// with `drop_in` as its kubelet.service.d/20-node-ip-helper.conf: what it
/// printed, which must be nothing.
fn verify(drop_in: &str) -> String {
    let dir = tempfile::tempdir().expect("temporary directory");
    let service = manifest("node-ip-helper.service");
    let installed = "/usr/local/bin/node-ip-helper ";
    assert!(service.contains(&format!("ExecStart={installed}")), "{service}");
    let service = service.replace(installed, &format!("{} ", env!("CARGO_BIN_EXE_node-ip-helper")));
    std::fs::write(dir.path().join("node-ip-helper.service"), service).expect("write the unit");
    std::fs::write(
        dir.path().join("kubelet.service"),
        "[Unit]\nDescription=kubelet\n\n[Service]\nExecStart=/bin/true\n",
    )
    .expect("write kubelet.service");
    std::fs::create_dir(dir.path().join("kubelet.service.d")).expect("mkdir");
    assert!(drop_in.contains("ExecStart=/usr/bin/kubelet "), "{drop_in}");
    std::fs::write(
        dir.path().join("kubelet.service.d/20-node-ip-helper.conf"),
        drop_in.replace("=/usr/bin/kubelet ", "=/bin/true "),
    )
    .expect("write the drop-in");
    let out = Command::new("systemd-analyze")
        .env("SYSTEMD_UNIT_PATH", format!("{}:", dir.path().display()))
        .args(["verify", "--man=no"])
        .arg(dir.path().join("node-ip-helper.service"))
        .arg(dir.path().join("kubelet.service"))
        .output()
        .expect("systemd-analyze (Debian package systemd) is needed: apt-get install systemd");
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{printed}");
    printed
}

#[test]
fn the_unit_and_the_drop_in_verify_cleanly() {
    let printed = verify(&manifest("20-node-ip-helper.conf"));
    assert_eq!(printed, "", "systemd-analyze verify warned");
}

#[test]
fn the_drop_ins_alternative_line_verifies_cleanly() {
    let drop_in = manifest("20-node-ip-helper.conf");
    let alternative = drop_in
        .lines()
        .find_map(|line| line.strip_prefix("#ExecStart="))
        .expect("the commented alternative ExecStart line");
    assert!(
        alternative.contains("--hostname-override=${NODE_IP_HELPER_HOSTNAME_OVERRIDE}"),
        "{alternative}"
    );
    let active = drop_in
        .lines()
        .find(|line| line.starts_with("ExecStart=/usr/bin/kubelet "))
        .expect("the active ExecStart line");
    let printed = verify(&drop_in.replace(active, &format!("ExecStart={alternative}")));
    assert_eq!(printed, "", "systemd-analyze verify warned");
}
