//! `pv-topology-webhook review` with the on-prem lookups' flags, where no vCenter is
//! needed: settings the binary refuses at start-up (exit status 1, a message naming
//! the flag, the file and the field, never the password), and the warning a Cinder or
//! vSphere PV gets when its lookup is off, and a vCenter that never answers (a
//! loopback port that accepts and stays silent) timing out. The lookups' answers are tested against
//! govmomi's simulator in the cluster tier (tests/cluster/harness/tests/vsphere.rs,
//! onprem.rs) and against the Keystone/Cinder fake (cinder.rs, cinder_cli.rs).

mod common;

use std::time::{Duration, Instant};

use common::{csi, pv, review_binary, review_output};
use pv_topology_webhook::lookup::vsphere::{VsphereLookup, VsphereSettings};
use pv_topology_webhook::lookup::{LookupError, TopologyLookup};
use pv_topology_webhook::source::{InTree, VolumeIdentity};
use serde_json::json;

const PASSWORD: &str = "vc-Pa55word-do-not-log";

/// The binary's exit status and stderr for `args`, with a vSphere PV on stdin.
fn run(args: &[&str]) -> (Option<i32>, String) {
    let spec = json!({"vsphereVolume": {"volumePath": "[ds1] kubevols/pv-1.vmdk"}});
    let out = review_output(args, &[], pv(spec, None));
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn bad_vsphere_settings_stop_the_command_naming_what_to_fix() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("written");
        format!("--vsphere-config={}", path.display())
    };
    let section = format!("[VirtualCenter \"127.0.0.1\"]\nuser = \"u@vsphere.local\"\npassword = \"{PASSWORD}\"\n");
    let good = write("good.conf", &section);
    let insecure = write("insecure.conf", &format!("{section}insecure-flag = \"true\"\n"));
    let bad_bool = write("bad-bool.conf", &format!("{section}insecure-flag = \"maybe\"\n"));
    let missing = format!("--vsphere-config={}", dir.path().join("missing.conf").display());
    for (args, words) in [
        (vec![missing.as_str()], vec!["--vsphere-config", "missing.conf"]),
        (
            vec![bad_bool.as_str()],
            vec!["--vsphere-config", "bad-bool.conf", "insecure-flag"],
        ),
        (
            vec![insecure.as_str()],
            vec![
                "--vsphere-config",
                "insecure-flag",
                "ca-file",
                "--vsphere-allow-insecure-tls",
            ],
        ),
        (
            vec![good.as_str(), "--vsphere-endpoint=http://vcenter.example/"],
            vec!["--vsphere-endpoint"],
        ),
        (
            vec![good.as_str(), "--vsphere-zone-category=k8s-region"],
            vec!["--vsphere-lookup", "categories"],
        ),
    ] {
        let mut all = vec!["--vsphere-lookup"];
        all.extend(&args);
        let (status, stderr) = run(&all);
        assert_eq!(status, Some(1), "{args:?}: {stderr}");
        for word in words {
            assert!(stderr.contains(word), "{args:?}: {word:?} not in {stderr}");
        }
        assert!(!stderr.contains(PASSWORD), "{stderr}");
    }
    // Allowed by the operator, the insecure config starts; the PV is admitted without
    // topology when its vCenter (nothing listens on 127.0.0.1:1) cannot be asked.
    let (status, stderr) = run(&[
        "--vsphere-lookup",
        &insecure,
        "--vsphere-allow-insecure-tls",
        "--vsphere-endpoint=https://127.0.0.1:1/",
        "--on-lookup-error=allow",
        "--lookup-timeout=500ms",
    ]);
    assert_eq!(status, Some(0), "{stderr}");
}

#[test]
fn cinder_and_vsphere_pvs_name_their_lookup_flag_when_it_is_off() {
    for (spec, flag) in [
        (
            json!({"cinder": {"volumeID": "5a1c9e0e-1f6e-4d55-9a3e-3b0f4e0c7d11"}}),
            "--openstack-cinder-lookup",
        ),
        (
            csi("cinder.csi.openstack.org", "5a1c9e0e-1f6e-4d55-9a3e-3b0f4e0c7d11"),
            "--openstack-cinder-lookup",
        ),
        (
            json!({"vsphereVolume": {"volumePath": "[ds1] kubevols/pv-1.vmdk"}}),
            "--vsphere-lookup",
        ),
        (
            csi("csi.vsphere.vmware.com", "[ds1] kubevols/pv-1.vmdk"),
            "--vsphere-lookup",
        ),
    ] {
        let answer = review_binary(&[], &[], pv(spec.clone(), None));
        assert!(answer.allowed(), "{spec}");
        assert_eq!(answer.outcome(), "not-configured", "{spec}");
        let warnings = answer.response()["warnings"].to_string();
        assert!(warnings.contains(&format!("{flag} (or --rules)")), "{spec}: {warnings}");
    }
}

/// A loopback "vCenter" that accepts connections and never answers; its URL.
fn silent_vcenter() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let port = listener.local_addr().expect("its address").port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    format!("http://127.0.0.1:{port}/")
}

fn config_file(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("csi-vsphere.conf");
    let text = format!("[VirtualCenter \"127.0.0.1\"]\nuser = \"u@vsphere.local\"\npassword = \"{PASSWORD}\"\n");
    std::fs::write(&path, text).expect("written");
    path
}

#[test]
fn a_silent_vcenter_times_out_naming_the_volume_and_the_vcenter() {
    let vcenter = silent_vcenter();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let config = format!("--vsphere-config={}", config_file(dir.path()).display());
    let endpoint = format!("--vsphere-endpoint={vcenter}");
    let spec = json!({"vsphereVolume": {"volumePath": "[ds1] kubevols/pv-1.vmdk"}});
    let started = Instant::now();
    let answer = review_binary(
        &[
            "--vsphere-lookup",
            &config,
            &endpoint,
            "--lookup-timeout=500ms",
            "--on-lookup-error=deny",
        ],
        &[],
        pv(spec, None),
    );
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    assert!(!answer.allowed());
    assert_eq!(answer.outcome(), "lookup-failed");
    let message = answer.message();
    assert!(
        message.contains("[ds1] kubevols/pv-1.vmdk")
            && message.contains(&format!(
                "lookup vsphere failed: timed out after 500ms waiting for {vcenter}"
            )),
        "{message}"
    );
    assert!(!message.contains(PASSWORD), "{message}");
}

#[tokio::test]
async fn the_lookups_client_timeout_is_a_timeout_naming_the_vcenter() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let vcenter = silent_vcenter();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut settings = VsphereSettings::new(config_file(dir.path()));
    settings.server = Some(cloud_access::SecureEndpoint::parse("the silent vCenter", &vcenter).expect("loopback http"));
    let deadline = Duration::from_millis(300);
    let lookup = VsphereLookup::new(settings, deadline).expect("the lookup is set up");
    let volume = VolumeIdentity::in_tree(InTree::VsphereVolume, "[ds1] kubevols/pv-1.vmdk");
    let started = Instant::now();
    // The deadline is far: the HTTP client's cap (each vCenter call's) ends it.
    let error = lookup.lookup(&volume, common::soon()).await.expect_err("no answer");
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
    // Counted as a timeout (lookups_total{result="timeout"}), not as an error.
    assert_eq!(error, LookupError::timed_out(Some(vcenter.clone())));
    assert_eq!(lookup.endpoint(), Some(vcenter));
}
