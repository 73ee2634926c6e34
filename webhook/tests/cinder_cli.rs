//! `pv-topology-webhook review --openstack-cinder-lookup` as an operator runs it: the
//! flags (and their environment variables) read cloud.conf or a clouds.yaml cloud,
//! and the binary's answer carries the volume's zone and region, against the fake of
//! Keystone v3 and Cinder v3 (tests/fakes/openstack_server.py; nothing here reaches a
//! real OpenStack). A bad config stops the command with exit status 1 and a message
//! naming the flag, the file and the field. The lookup itself is tested in `cinder.rs`.

mod common;

use std::path::Path;

use common::{csi, patched, pv, review_binary, review_output};
use serde_json::json;
use test_fakes::OpenStackFake as Fake;

const DRIVER: &str = "cinder.csi.openstack.org";
const ZONAL: &str = "5a1c9e0e-1f6e-4d55-9a3e-3b0f4e0c7d11";
const APP_SECRET: &str = "appcred-secret-Zq8x-do-not-log";
const PASSWORD: &str = "password-Xy7-do-not-log";

/// The repo's fixture with its Keystone pointed at the fake.
fn fixture_for(fake: &Fake, name: &str, dir: &Path) -> std::path::PathBuf {
    let text = std::fs::read_to_string(test_fakes::openstack::openstack_data(name)).expect("the fixture");
    let path = dir.join(name);
    std::fs::write(
        &path,
        text.replace("http://127.0.0.1:1/identity", &format!("{}/identity", fake.base())),
    )
    .expect("the config written");
    path
}

/// The binary's exit status and stderr for `args`, with a CSI Cinder PV on stdin.
fn failing(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    let out = review_output(args, env, pv(csi(DRIVER, ZONAL), None));
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[tokio::test]
async fn cloud_conf_from_the_flag_labels_a_csi_volume() {
    let fake = Fake::start();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let conf = fixture_for(&fake, "cloud.conf", dir.path());
    let flag = format!("--openstack-cloud-config={}", conf.display());
    let answer = review_binary(&["--openstack-cinder-lookup", &flag], &[], pv(csi(DRIVER, ZONAL), None));
    assert!(answer.allowed(), "{:?}", answer.response());
    assert_eq!(answer.audit("source"), Some("lookup openstack-cinder"));
    assert_eq!(
        patched(&answer, "/metadata/labels"),
        json!({"topology.kubernetes.io/region": "RegionOne", "topology.kubernetes.io/zone": "nova-az1"})
    );
    assert_eq!(
        patched(&answer, "/spec/nodeAffinity")["required"]["nodeSelectorTerms"],
        json!([{"matchExpressions": [
            {"key": "topology.cinder.csi.openstack.org/zone", "operator": "In", "values": ["nova-az1"]}
        ]}])
    );
    assert_eq!(fake.requests(test_fakes::openstack::TOKENS), 1);
}

#[tokio::test]
async fn a_clouds_yaml_cloud_from_the_environment_variables() {
    let fake = Fake::start();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let clouds = fixture_for(&fake, "clouds.yaml", dir.path());
    let clouds = clouds.to_string_lossy().into_owned();
    let answer = review_binary(
        &[],
        &[
            ("PV_TOPOLOGY_WEBHOOK_OPENSTACK_CINDER_LOOKUP", "true"),
            ("PV_TOPOLOGY_WEBHOOK_OS_CLOUD", "appcred"),
            ("PV_TOPOLOGY_WEBHOOK_OPENSTACK_CLOUDS_FILE", &clouds),
            // Not read when a cloud is named.
            ("PV_TOPOLOGY_WEBHOOK_OPENSTACK_CLOUD_CONFIG", "/nonexistent/cloud.conf"),
        ],
        pv(json!({"cinder": {"volumeID": ZONAL}}), None),
    );
    assert!(answer.allowed(), "{:?}", answer.response());
    assert_eq!(
        patched(&answer, "/metadata/labels"),
        json!({"topology.kubernetes.io/region": "RegionOne", "topology.kubernetes.io/zone": "nova-az1"})
    );
}

#[test]
fn bad_configs_stop_the_command_naming_the_flag_the_file_and_the_field() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("written");
        path.to_string_lossy().into_owned()
    };
    let no_region = write(
        "no-region.conf",
        &format!(
            "[Global]\nauth-url = https://127.0.0.1:1/v3\napplication-credential-id = x\napplication-credential-secret = {APP_SECRET}\n"
        ),
    );
    let insecure = write(
        "insecure.conf",
        &format!(
            "[Global]\nauth-url = https://127.0.0.1:1/v3\nregion = RegionOne\nusername = u\nuser-domain-name = Default\npassword = {PASSWORD}\ntenant-id = p\ntls-insecure = true\n"
        ),
    );
    let missing = dir.path().join("missing.conf").to_string_lossy().into_owned();
    for (args, words) in [
        (
            vec![
                "--openstack-cinder-lookup".to_owned(),
                format!("--openstack-cloud-config={no_region}"),
            ],
            vec!["--openstack-cloud-config", "no-region.conf", "region"],
        ),
        (
            vec![
                "--openstack-cinder-lookup".to_owned(),
                format!("--openstack-cloud-config={insecure}"),
            ],
            vec![
                "--openstack-cloud-config",
                "insecure.conf",
                "tls-insecure",
                "--openstack-allow-insecure-tls",
            ],
        ),
        (
            vec![
                "--openstack-cinder-lookup".to_owned(),
                format!("--openstack-cloud-config={missing}"),
            ],
            vec!["--openstack-cloud-config", "missing.conf"],
        ),
        (
            vec![
                "--openstack-cinder-lookup".to_owned(),
                "--os-cloud=nope".to_owned(),
                format!("--openstack-clouds-file={missing}"),
            ],
            vec!["--openstack-clouds-file", "missing.conf"],
        ),
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (status, stderr) = failing(&args, &[]);
        assert_eq!(status, Some(1), "{args:?}: {stderr}");
        for word in words {
            assert!(stderr.contains(word), "{args:?}: {word:?} not in {stderr}");
        }
        assert!(!stderr.contains(APP_SECRET) && !stderr.contains(PASSWORD), "{stderr}");
    }
    // The insecure config is accepted once the operator allows it (its Keystone is
    // never asked: nothing is reviewed that needs it).
    let (status, stderr) = failing(
        &[
            "--openstack-cinder-lookup",
            &format!("--openstack-cloud-config={insecure}"),
            "--openstack-allow-insecure-tls",
            "--on-lookup-error=allow",
            "--lookup-timeout=200ms",
        ],
        &[],
    );
    assert_eq!(status, Some(0), "{stderr}");
}
