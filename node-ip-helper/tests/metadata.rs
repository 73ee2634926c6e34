//! Cloud metadata sources end to end: the binary runs in a network
//! namespace whose interfaces carry the instance's addresses, and asks a
//! metadata server on that namespace's loopback. The servers are moto's
//! (PyPI `moto[server]`, for the IMDS paths it serves) and a fake written
//! from each provider's documented API (tests/fakes/metadata_server.py;
//! no packaged emulator exists for GCE, Azure, OpenStack, DigitalOcean or
//! Hetzner metadata). Needs root.
//!
//! Node names from metadata and the hostname are in `node_names.rs`.

mod common;
mod metadata_common;

use common::{Netns, Server};
use metadata_common::{cloud, detect, endpoint, ips};
use serde_json::Value;

#[test]
fn aws_takes_the_primary_eni_address_in_the_ccms_order() {
    let ns = Netns::new();
    ns.nic("ens5");
    ns.nic("ens6");
    ns.ip("addr add 10.0.1.25/24 dev ens5");
    ns.ip("addr add 10.0.1.26/24 dev ens5");
    ns.ip("addr add 2a05:d018::1/64 dev ens5 nodad");
    ns.ip("addr add 10.0.2.40/24 dev ens6");
    let server = ns.fake_metadata("aws-multi-eni.json");

    let json = detect(&ns, &server, "aws", &[]).unwrap();
    assert_eq!(ips(&json), ["10.0.1.25"]);
    assert_eq!(json["source"], "aws");
    assert_eq!(json["addresses"][0]["interface"], "ens5");
    assert_eq!(
        cloud(&json),
        [
            "InternalIP 10.0.1.25",
            "InternalIP 10.0.1.26",
            "InternalIP 10.0.2.40",
            "InternalIP 10.0.2.41",
            "ExternalIP 203.0.113.10",
            "InternalDNS ip-10-0-1-25.eu-west-1.compute.internal",
            "Hostname ip-10-0-1-25.eu-west-1.compute.internal",
            "ExternalDNS ec2-203-0-113-10.eu-west-1.compute.amazonaws.com",
            "InternalIP 2a05:d018::1",
            "InternalIP 2a05:d018::2",
        ]
    );
    let dual = detect(
        &ns,
        &server,
        "aws",
        &["--ip-family", "dual", "--node-name-from", "instance-id"],
    )
    .unwrap();
    assert_eq!(ips(&dual), ["10.0.1.25", "2a05:d018::1"]);
    assert_eq!(dual["hostname"], "i-0123456789abcdef0");
    // The AWS CCM's form, from placement/availability-zone and instance-id.
    assert_eq!(json["providerID"], "aws:///eu-west-1a/i-0123456789abcdef0");
    let none = detect(&ns, &server, "aws", &["--no-provider-id"]).unwrap();
    assert!(none.get("providerID").is_none(), "{none}");
}

#[test]
fn aws_addresses_must_be_local_unless_told_otherwise() {
    let ns = Netns::new();
    ns.nic("ens5");
    // The primary address is missing on this host; the second one is here.
    ns.ip("addr add 10.0.1.26/24 dev ens5");
    let server = ns.fake_metadata("aws-multi-eni.json");
    let json = detect(&ns, &server, "aws", &[]).unwrap();
    assert_eq!(ips(&json), ["10.0.1.26"]);
    assert!(
        json["addresses"][0]["reason"]
            .as_str()
            .unwrap()
            .starts_with("#2 IPv4 InternalIP")
    );
    let json = detect(&ns, &server, "aws", &["--skip-local-check"]).unwrap();
    assert_eq!(ips(&json), ["10.0.1.25"]);
    let err = detect(&ns, &server, "aws", &["--deny-cidr", "10.0.1.26/32"]).unwrap_err();
    assert!(
        err.contains("10.0.1.25 on aws metadata: not on any local interface, which kubelet refuses"),
        "{err}"
    );
}

#[test]
fn aws_ipv6_only_instance() {
    let ns = Netns::new();
    ns.nic("ens5");
    ns.ip("addr add 2a05:d018::99/64 dev ens5 nodad");
    let server = ns.fake_metadata("aws-ipv6-only.json");
    let json = detect(&ns, &server, "aws", &["--ip-family", "ipv6"]).unwrap();
    assert_eq!(ips(&json), ["2a05:d018::99"]);
    let err = detect(&ns, &server, "aws", &[]).unwrap_err();
    assert!(err.contains("no IPv4 address qualifies"), "{err}");
}

#[test]
fn aws_failures_are_clear() {
    let ns = Netns::new();
    ns.nic("ens5");
    ns.ip("addr add 10.0.1.25/24 dev ens5");
    let refused = ns.fake_metadata("aws-token-refused.json");
    let err = detect(&ns, &refused, "aws", &[]).unwrap_err();
    assert!(
        err.contains("answered HTTP 403") && err.contains("IMDSv2 session token was refused"),
        "{err}"
    );
    let slow = ns.fake_metadata("aws-slow.json");
    let err = detect(&ns, &slow, "aws", &["--metadata-timeout", "300ms"]).unwrap_err();
    assert!(err.contains("did not answer within 300ms"), "{err}");
    let garbage = ns.fake_metadata("aws-garbage.json");
    let err = detect(&ns, &garbage, "aws", &[]).unwrap_err();
    assert!(
        err.contains("\"<html>captive portal</html>\" is not an IP address"),
        "{err}"
    );
    // Wrong provider at this address: GCE's paths are not there.
    let err = detect(&ns, &refused, "gce", &[]).unwrap_err();
    assert!(
        err.contains("gce metadata service answered HTTP 404") && err.contains("is this instance on that cloud?"),
        "{err}"
    );
}

#[test]
fn aws_against_moto() {
    let ns = Netns::new();
    let moto = ns.moto();
    // moto answers IMDSv2 with fixed values; its local-ipv4 is 127.0.0.1,
    // which kubelet refuses: the path must get that far and say so.
    let err = detect(&ns, &moto, "aws", &["--skip-local-check"]).unwrap_err();
    assert!(
        err.contains("127.0.0.1 on aws metadata: kubelet refuses it: nodeIP can't be loopback address"),
        "{err}"
    );
    let json = detect(
        &ns,
        &moto,
        "aws",
        &["--skip-local-check", "--ip-family", "ipv4", "--allow-cidr", "0.0.0.0/0"],
    );
    assert!(json.is_err(), "loopback is never chosen");
}

#[test]
fn gce_azure_openstack_digitalocean_hetzner() {
    let ns = Netns::new();
    ns.nic("eth0");
    for address in [
        "10.132.0.7/24",
        "10.200.0.7/24",
        "10.240.0.4/16",
        "192.168.10.5/24",
        "10.110.0.2/20",
        "10.0.0.2/24",
        "49.12.1.2/32",
    ] {
        ns.ip(&format!("addr add {address} dev eth0"));
    }
    for address in [
        "2600:1900:4000::7/64",
        "fd00:db8::4/64",
        "2a03:b0c0:2:d0::abc:1001/64",
        "2a01:4f8:c17:1234::1/64",
    ] {
        ns.ip(&format!("addr add {address} dev eth0 nodad"));
    }
    // Each with the provider ID its CCM writes (cloud/src/metadata cites
    // each CCM's code).
    let cases: [(&str, &str, &[&str], &str, &str); 5] = [
        (
            "gce",
            "gce.json",
            &["10.132.0.7", "2600:1900:4000::7"],
            "InternalDNS node-a.europe-west1-b.c.my-project.internal",
            "gce://my-project/europe-west1-b/node-a",
        ),
        (
            "azure",
            "azure.json",
            &["10.240.0.4", "fd00:db8::4"],
            "ExternalIP 20.50.1.2",
            "azure:///subscriptions/8d2a9c7e-0000-4c1e-9c5b-1f2e3d4c5b6a/resourceGroups/myclusterrg/providers/Microsoft.Compute/virtualMachines/Node-A",
        ),
        (
            "openstack",
            "openstack.json",
            &["192.168.10.5", "fd10::5"],
            "ExternalIP 172.24.4.50",
            "openstack:///83679162-1378-4288-a2d4-70e13ec132aa",
        ),
        (
            "digitalocean",
            "digitalocean.json",
            &["10.110.0.2", "2a03:b0c0:2:d0::abc:1001"],
            "ExternalIP 188.166.1.2",
            "digitalocean://2756294",
        ),
        (
            "hetzner",
            "hetzner.json",
            &["10.0.0.2", "2a01:4f8:c17:1234::1"],
            "ExternalIP 49.12.1.2",
            "hcloud://42424242",
        ),
    ];
    for (source, scenario, want, listed, provider_id) in cases {
        let server = ns.fake_metadata(scenario);
        let extra: &[&str] = if source == "openstack" {
            &["--skip-local-check"]
        } else {
            &[]
        };
        let mut args = vec!["--ip-family", "dual"];
        args.extend(extra);
        let json = detect(&ns, &server, source, &args).unwrap_or_else(|e| panic!("{source}: {e}"));
        assert_eq!(ips(&json), want, "{source}");
        assert!(
            cloud(&json).contains(&listed.to_owned()),
            "{source}: {:?}",
            cloud(&json)
        );
        let single = detect(&ns, &server, source, extra).unwrap();
        assert_eq!(ips(&single), want[..1], "{source}");
        assert_eq!(json["providerID"], provider_id, "{source}");
        let mut flags = vec!["--output", "flags"];
        flags.extend(extra);
        let out = ns.helper(
            &[
                &["detect", "--source", source, "--metadata-endpoint", &endpoint(&server)],
                &flags[..],
            ]
            .concat(),
        );
        assert_eq!(
            out.stdout,
            format!("--node-ip={} --provider-id={provider_id}\n", want[0]),
            "{source}: {}",
            out.stderr
        );
    }
    // The OpenStack CCM's regional form, for one run with OS_CCM_REGIONAL=true.
    let openstack = ns.fake_metadata("openstack.json");
    let regional = detect(
        &ns,
        &openstack,
        "openstack",
        &["--skip-local-check", "--openstack-region", "RegionOne"],
    )
    .unwrap();
    assert_eq!(
        regional["providerID"],
        "openstack://RegionOne/83679162-1378-4288-a2d4-70e13ec132aa"
    );
    let out = ns.helper(&["detect", "--source", "openstack", "--openstack-region", "Region One"]);
    assert_eq!(out.status, 1, "{}", out.stderr);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(
        out.stderr.contains("--openstack-region") && out.stderr.contains("holds ' '"),
        "{}",
        out.stderr
    );
    // Azure's controller manager reads the first interface's first IP
    // configuration of each family only, hostname first (tests/azure.rs).
    let azure = ns.fake_metadata("azure.json");
    let json = detect(&ns, &azure, "azure", &["--node-name-from", "instance-id"]).unwrap();
    assert_eq!(
        cloud(&json),
        [
            "Hostname node-a",
            "InternalIP 10.240.0.4",
            "ExternalIP 20.50.1.2",
            "InternalIP fd00:db8::4"
        ]
    );
    assert_eq!(json["hostname"], "02aab8a4-74ef-476e-8182-f6d2ba4166a6");
}

/// A provider ID from metadata that could leave kubelet's flag is refused
/// in one line naming the way out, and no env file is written.
#[test]
fn a_hostile_provider_id_is_refused() {
    let ns = Netns::new();
    ns.nic("eth0");
    ns.ip("addr add 192.168.10.5/24 dev eth0");
    let dir = tempfile::tempdir().unwrap();
    let hostile = dir.path().join("openstack.json");
    let fixture =
        std::fs::read_to_string(common::workspace_root().join("tests/data/node-ip-helper/metadata/openstack.json"))
            .unwrap();
    std::fs::write(
        &hostile,
        fixture.replace(
            "83679162-1378-4288-a2d4-70e13ec132aa",
            "x --authorization-mode=AlwaysAllow --v=10",
        ),
    )
    .unwrap();
    let server = ns.fake_metadata_from(&hostile);
    let env_file = dir.path().join("kubelet.env");
    let url = endpoint(&server);
    let out = ns.helper(&[
        "write",
        "--source",
        "openstack",
        "--metadata-endpoint",
        &url,
        "--env-file",
        env_file.to_str().unwrap(),
    ]);
    assert_eq!(out.status, 1, "{}{}", out.stdout, out.stderr);
    assert_eq!(
        out.stderr.trim_end(),
        "node-ip-helper: no openstack provider ID: the server UUID \"x --authorization-mode=AlwaysAllow --v=10\" holds ' ': kubelet would get no --provider-id; fix the instance's metadata, or give --no-provider-id (for the unit: NODE_IP_HELPER_NO_PROVIDER_ID=true in /etc/default/node-ip-helper) and let the cloud controller manager find the node by its name"
    );
    assert!(!env_file.exists(), "nothing written");
    let out = ns.helper_env(
        &[("NODE_IP_HELPER_NO_PROVIDER_ID", "true")],
        &[
            "detect",
            "--source",
            "openstack",
            "--metadata-endpoint",
            &url,
            "--output",
            "flags",
        ],
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "--node-ip=192.168.10.5\n");
}

#[test]
fn auto_finds_the_cloud_or_falls_back_to_local() {
    let ns = Netns::new();
    ns.nic("eth0");
    ns.ip("addr add 10.132.0.7/24 dev eth0");
    ns.ip("addr add 10.9.9.9/24 dev eth0");
    ns.ip("route add default via 10.9.9.1 dev eth0");
    let gce = ns.fake_metadata("gce.json");
    let json = detect(&ns, &gce, "auto", &[]).unwrap();
    assert_eq!(json["source"], "gce");
    assert_eq!(ips(&json), ["10.132.0.7"]);
    // Who was asked and what each said: GCE answered, the others' paths
    // are not there.
    assert_eq!(
        answers(&json),
        [
            "aws not-this-cloud",
            "gce answered",
            "azure not-this-cloud",
            "openstack not-this-cloud",
            "digitalocean not-this-cloud",
            "hetzner not-this-cloud"
        ],
        "{json:#}"
    );
    assert_eq!(json["metadataServices"][1]["url"], endpoint(&gce));
    drop(gce);
    // Nothing listens any more: the host's own state decides, and says why,
    // in the JSON and in a line on stderr.
    let closed = Server::closed();
    let json = detect(&ns, &closed, "auto", &["--metadata-timeout", "300ms"]).unwrap();
    assert_eq!(json["source"], "local");
    assert_eq!(ips(&json), ["10.132.0.7"]);
    assert!(
        answers(&json).iter().all(|answer| answer.ends_with(" refused")),
        "{json:#}"
    );
    let error = json["metadataServices"][0]["error"].as_str().unwrap_or_default();
    assert!(error.contains(&endpoint(&closed)), "{error}");
    let url = endpoint(&closed);
    let out = ns.helper(&[
        "detect",
        "--source",
        "auto",
        "--metadata-endpoint",
        &url,
        "--output",
        "flags",
    ]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "--node-ip=10.132.0.7\n");
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(
        out.stderr.starts_with(&format!(
            "node-ip-helper: --source auto: no metadata service answered at {url} (aws: connection refused, gce: connection refused, azure: connection refused, openstack: connection refused, digitalocean: connection refused, hetzner: connection refused): chose from the host's interfaces and routes"
        )),
        "{}",
        out.stderr
    );
    // Something takes the connection and never answers: timed out.
    let silent = ns.silent_listener();
    let json = detect(&ns, &silent, "auto", &["--metadata-timeout", "300ms"]).unwrap();
    assert_eq!(json["source"], "local");
    assert!(
        answers(&json).iter().all(|answer| answer.ends_with(" timed-out")),
        "{json:#}"
    );
}

/// `metadataServices` as "SOURCE ANSWER" lines.
fn answers(json: &Value) -> Vec<String> {
    json["metadataServices"]
        .as_array()
        .map(|asked| {
            asked
                .iter()
                .map(|a| {
                    format!(
                        "{} {}",
                        a["source"].as_str().unwrap_or("?"),
                        a["answer"].as_str().unwrap_or("?")
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// `check`'s CCM rules with a metadata source: `auto` applies those of the
/// cloud that answers; a local source, or `auto` with none answering, has no
/// cloud's list to apply them to, and is refused (docs/decisions.md).
#[test]
fn check_applies_the_answering_clouds_rules_and_refuses_local() {
    let ns = Netns::new();
    let gce = ns.fake_metadata("gce.json");
    let url = endpoint(&gce);
    let check = |node_ip: &str, source: &str, url: &str| {
        ns.helper(&[
            "check",
            "--node-ip",
            node_ip,
            "--source",
            source,
            "--metadata-endpoint",
            url,
            "--metadata-timeout",
            "300ms",
        ])
    };
    let out = check("10.132.0.7", "auto", &url);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(out.stdout.contains("provided-node-ip=10.132.0.7"), "{}", out.stdout);
    let out = check("10.9.9.9", "auto", &url);
    assert_eq!(out.status, 2, "{}", out.stderr);
    assert!(out.stdout.starts_with("STUCK:"), "{}", out.stdout);
    drop(gce);

    let closed = endpoint(&Server::closed());
    for (source, url, refusal) in [
        ("local", &url, "--source local has no cloud addresses"),
        ("auto", &closed, "--source auto: no metadata service answered"),
    ] {
        let out = check("10.132.0.7", source, url);
        assert_eq!(out.status, 1);
        assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
        assert!(out.stderr.contains(refusal), "{}", out.stderr);
        // The fix: the cloud's addresses from a file.
        assert!(out.stderr.contains("--cloud-addresses FILE"), "{}", out.stderr);
    }
}

#[test]
fn openstack_config_drive() {
    let ns = Netns::new();
    ns.nic("eth0");
    ns.ip("addr add 192.168.10.5/24 dev eth0");
    let drive = tempfile::tempdir().unwrap();
    let scenario: Value = serde_json::from_str(
        &std::fs::read_to_string(common::workspace_root().join("tests/data/node-ip-helper/metadata/openstack.json"))
            .unwrap(),
    )
    .unwrap();
    let tree = &scenario["tree"];
    std::fs::create_dir_all(drive.path().join("openstack/latest")).unwrap();
    std::fs::create_dir_all(drive.path().join("ec2/latest")).unwrap();
    for name in ["meta_data.json", "network_data.json"] {
        let key = format!("openstack/latest/{name}");
        std::fs::write(drive.path().join(&key), tree[&key].to_string()).unwrap();
    }
    std::fs::write(
        drive.path().join("ec2/latest/meta-data.json"),
        r#"{"local-ipv4":"192.168.10.5","public-ipv4":"172.24.4.50"}"#,
    )
    .unwrap();
    let path = drive.path().to_str().unwrap();
    let with_name = || {
        ns.helper(&[
            "detect",
            "--source",
            "openstack",
            "--config-drive",
            path,
            "--node-name-from",
            "instance-id",
        ])
    };
    let out = with_name();
    assert_eq!(out.status, 0, "{}", out.stderr);
    let json: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(ips(&json), ["192.168.10.5"]);
    assert_eq!(json["hostname"], "83679162-1378-4288-a2d4-70e13ec132aa");
    // The node name is validated as from the metadata service.
    std::fs::write(
        drive.path().join("openstack/latest/meta_data.json"),
        r#"{"uuid": "x --authorization-mode=AlwaysAllow --v=10", "name": "node-a"}"#,
    )
    .unwrap();
    let out = with_name();
    assert_eq!(out.status, 1, "{}", out.stdout);
    assert!(
        out.stderr.contains(
            r#"--node-name-from instance-id: the openstack instance ID "x --authorization-mode=AlwaysAllow --v=10" is not a valid Kubernetes node name"#
        ),
        "{}",
        out.stderr
    );
    let out = ns.helper(&["detect", "--source", "openstack", "--config-drive", "/nonexistent"]);
    assert_eq!(out.status, 1);
    assert!(
        out.stderr
            .contains("config drive /nonexistent/openstack/latest/meta_data.json: missing"),
        "{}",
        out.stderr
    );
}
