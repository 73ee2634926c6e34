//! `check` offline: kubelet's and the cloud controller manager's rules for
//! `--node-ip`, from the command line.

use std::process::Command;

/// A file of tests/data/node-ip-helper/, or an absolute path as it is.
fn data(name: &str) -> String {
    if name.starts_with('/') {
        return name.to_owned();
    }
    format!("{}/../tests/data/node-ip-helper/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn check(node_ip: &str, cloud: &str, extra: &[&str]) -> (i32, String, String) {
    // A run that blocks (on a FIFO) fails the test instead of hanging it, and
    // one that reads without end (/dev/zero) runs out of its 1 GiB, not of the machine's.
    let out = Command::new("sh")
        .args(["-c", r#"ulimit -v 1048576 && exec timeout -k 5 60 "$@""#, "sh"])
        .arg(env!("CARGO_BIN_EXE_node-ip-helper"))
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
    assert_eq!(status, 2, "the verdict is no");
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
    assert_eq!(status, 2, "the verdict is no: kubelet would not start");
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

/// A FIFO blocked for ever and /dev/zero was read without end.
#[test]
fn cloud_addresses_must_be_a_regular_file() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    for (path, kind) in [(fifo.to_str().unwrap(), "a FIFO"), ("/dev/zero", "a character device")] {
        let (status, _, stderr) = check("10.0.1.25", path, &[]);
        assert_eq!(status, 1, "{path}: {stderr}");
        assert!(
            stderr.contains(&format!("--cloud-addresses {path}")) && stderr.contains(kind),
            "{stderr}"
        );
    }
}

/// kubelet ignores what it cannot parse in --node-ip and annotates the node
/// with ip.String(): `check` says so instead of "REFUSED".
#[test]
fn odd_node_ip_values_as_kubelet_reads_them() {
    let (status, stdout, _) = check("1.2.3.4,", "kep-3705-cloud.json", &[]);
    assert_eq!(status, 0, "{stdout}");
    assert!(
        stdout.starts_with(
            "NOTE: kubelet cannot parse [\"\"] in --node-ip, logs \"Could not parse some node IP(s), ignoring them\" and carries on without\n\
             OK: kubelet annotates the node alpha.kubernetes.io/provided-node-ip=1.2.3.4;"
        ),
        "{stdout}"
    );
    let (status, stdout, _) = check("fe80::1%eth0", "kep-3705-cloud.json", &[]);
    assert_eq!(status, 0, "{stdout}");
    assert!(stdout.contains("sets no provided-node-ip annotation"), "{stdout}");
    let (status, stdout, _) = check("::ffff:1.2.3.4,ABCD::1234", "kep-3705-cloud.json", &["-o", "json"]);
    assert_eq!(status, 0, "{stdout}");
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json["annotation"], "1.2.3.4,abcd::1234");
}
