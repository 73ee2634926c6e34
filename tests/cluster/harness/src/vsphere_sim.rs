//! govmomi's vCenter simulator (vsphere-sim, built by tests/cluster/build.sh from
//! tests/cluster/cmd/vsphere-sim) for the vSphere lookup's tests: started on
//! 127.0.0.1 with the scenario created through its own APIs (`vsphere-sim setup`:
//! datastores mounted on chosen hosts, a First Class Disk, zone/region tags).
//!
//! The simulator's inventory: datacenter DC0; clusters DC0_C0 and DC0_C1 of hosts
//! DC0_C<n>_H0 and _H1; a standalone host DC0_H0. Tags: zone-a on cluster DC0_C0,
//! zone-b on host DC0_C1_H0, region-1 on both clusters; DC0_H0 and its ancestors
//! carry none. In a second pair of categories (zone-cat, region-cat, for a lookup
//! given other category names): alt-zone-1 on host DC0_C0_H0, alt-zone-2 on host
//! DC0_C1_H0, alt-region on datacenter DC0. Datastores: zonal-ds (DC0_C0's hosts), multi-ds (DC0_C0_H0 and
//! DC0_C1_H0), plain-ds (DC0_H0); FCD fcd-1 on zonal-ds.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::cluster_bin;

/// The simulator's user.
pub const USER: &str = "administrator@vsphere.local";
/// The simulator's password.
pub const PASSWORD: &str = "Sim-Pa55word!";

/// A running simulator, killed when dropped (its datastores' directories with it).
pub struct Sim {
    child: Child,
    /// The simulator's SOAP URL.
    pub url: String,
    dir: tempfile::TempDir,
}

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts vsphere-sim (https with `tls`'s pair when given, with `args`) and creates
/// the scenario.
pub fn start(tls: Option<(&Path, &Path, &Path)>, args: &[&str]) -> (Sim, Value) {
    let program = cluster_bin("vsphere-sim");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut command = Command::new(&program);
    // The simulator's own files (govcsim-*) go with the test's directory, even when it
    // is killed before it can remove them.
    command
        .args(["-user", USER, "-password", PASSWORD])
        .args(args)
        .env("TMPDIR", dir.path());
    if let Some((cert, key, _)) = tls {
        command.arg("-cert").arg(cert).arg("-key").arg(key);
    }
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("vsphere-sim starts");
    let stdout = child.stdout.take().expect("piped");
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).expect("its URL line");
    let url = serde_json::from_str::<Value>(&line).expect("JSON")["url"]
        .as_str()
        .expect("a url")
        .to_owned();
    let sim = Sim { child, url, dir };

    let scenario = json!({
        "datastores": [
            {"name": "zonal-ds", "hosts": ["DC0_C0_H0", "DC0_C0_H1"]},
            {"name": "multi-ds", "hosts": ["DC0_C0_H0", "DC0_C1_H0"]},
            {"name": "plain-ds", "hosts": ["DC0_H0"]},
        ],
        "disks": [{"name": "fcd-1", "datastore": "zonal-ds"}],
        "categories": ["k8s-zone", "k8s-region", "zone-cat", "region-cat"],
        "tags": [
            {"category": "k8s-zone", "name": "zone-a", "objects": ["ClusterComputeResource:DC0_C0"]},
            {"category": "k8s-zone", "name": "zone-b", "objects": ["HostSystem:DC0_C1_H0"]},
            {"category": "k8s-region", "name": "region-1",
             "objects": ["ClusterComputeResource:DC0_C0", "ClusterComputeResource:DC0_C1"]},
            {"category": "zone-cat", "name": "alt-zone-1", "objects": ["HostSystem:DC0_C0_H0"]},
            {"category": "zone-cat", "name": "alt-zone-2", "objects": ["HostSystem:DC0_C1_H0"]},
            {"category": "region-cat", "name": "alt-region", "objects": ["Datacenter:DC0"]},
        ],
    });
    // The datastores' directories, in the simulator's directory.
    let file = sim.dir.path().join("scenario.json");
    std::fs::write(&file, scenario.to_string()).expect("scenario written");
    let mut setup = Command::new(&program);
    setup
        .args(["setup", "-url", &sim.url, "-user", USER, "-password", PASSWORD])
        .arg("-scenario")
        .arg(&file)
        .arg("-dir")
        .arg(sim.dir.path());
    if let Some((_, _, ca)) = tls {
        setup.arg("-ca").arg(ca);
    }
    let out = setup.output().expect("vsphere-sim setup runs");
    assert!(out.status.success(), "setup: {}", String::from_utf8_lossy(&out.stderr));
    let created: Value = serde_json::from_slice(&out.stdout).expect("setup's JSON");
    (sim, created)
}

/// A `csi-vsphere.conf` for the simulator at `port`, with `extra` lines in its section.
pub fn config(dir: &Path, password: &str, port: u16, extra: &str) -> PathBuf {
    let path = dir.join("csi-vsphere.conf");
    let text = format!(
        "[Global]\ncluster-id = \"test\"\n\n[VirtualCenter \"127.0.0.1\"]\nuser = \"{USER}\"\npassword = \"{password}\"\nport = \"{port}\"\n{extra}"
    );
    std::fs::write(&path, text).expect("config written");
    path
}
