//! `check` offline: kubelet's and the cloud controller manager's rules for
//! `--node-ip`, from the command line.

use std::process::Command;

fn data(name: &str) -> String {
    format!("{}/../tests/data/node-ip-helper/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn check(node_ip: &str, cloud: &str, extra: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_node-ip-helper"))
        .args(["check", "--node-ip", node_ip, "--cloud-addresses", &data(cloud)])
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn kep_3705_examples_from_the_command_line() {
    let (status, stdout, _) = check("1.2.3.4,abcd::1234", "kep-3705-cloud.json", &[]);
    assert_eq!(status, 0);
    assert!(
        stdout.starts_with("OK: kubelet annotates the node alpha.kubernetes.io/provided-node-ip=1.2.3.4,abcd::1234")
    );
    assert!(
        stdout.contains("InternalIP   1.2.3.4\n  InternalIP   abcd::1234\n"),
        "{stdout}"
    );

    let (status, stdout, _) = check("9.10.11.12", "kep-3705-cloud.json", &[]);
    assert_eq!(status, 1);
    assert!(stdout.starts_with("STUCK: the node keeps the node.cloudprovider.kubernetes.io/uninitialized taint"));
    assert!(stdout.contains("failed to get node address from cloud provider that matches ip: 9.10.11.12"));

    let (status, stdout, _) = check("::", "kep-3705-cloud.json", &["--output", "json"]);
    assert_eq!(status, 0);
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json["verdict"], "initializes");
    assert_eq!(json["addresses"].as_array().unwrap().len(), 4);
    assert!(json["annotation"].is_null());
}

#[test]
fn secondary_eni_address_keeps_external_and_dns_entries() {
    let (status, stdout, _) = check("10.0.2.40", "aws-multi-eni.json", &["-o", "json"]);
    assert_eq!(status, 0);
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let addresses: Vec<&str> = json["addresses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["address"].as_str().unwrap())
        .collect();
    assert_eq!(addresses[..2], ["10.0.2.40", "203.0.113.10"]);
    assert!(!addresses.contains(&"10.0.1.25"), "the other InternalIP is dropped");
}

#[test]
fn kubelet_refusals_and_bad_files() {
    let (status, stdout, _) = check("10.0.1.25,10.0.2.40", "aws-multi-eni.json", &[]);
    assert_eq!(status, 1);
    assert!(
        stdout.contains("REFUSED by kubelet") && stdout.contains("dual-stack pair"),
        "{stdout}"
    );
    let (status, _, stderr) = check("10.0.1.25", "truncated.json", &[]);
    assert_eq!(status, 1);
    assert!(
        stderr.contains("cannot read --cloud-addresses") && stderr.contains("truncated.json"),
        "{stderr}"
    );
    let (status, _, stderr) = check("10.0.1.25", "missing.json", &[]);
    assert_eq!(status, 1);
    assert!(stderr.contains("missing.json"), "{stderr}");
}
