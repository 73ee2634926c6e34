//! Cloud metadata sources end to end: the binary runs in a network
//! namespace whose interfaces carry the instance's addresses, and asks a
//! metadata server on that namespace's loopback. The servers are moto's
//! (PyPI `moto[server]`, for the IMDS paths it serves) and a fake written
//! from each provider's documented API (tests/fakes/metadata_server.py;
//! no packaged emulator exists for GCE, Azure, OpenStack, DigitalOcean or
//! Hetzner metadata). Needs root.

mod common;

use common::{Netns, Server};
use serde_json::Value;

fn endpoint(server: &Server) -> String {
    format!("http://127.0.0.1:{}/", server.port)
}

/// `detect --source SOURCE` against `server`, as JSON, or the error text.
fn detect(ns: &Netns, server: &Server, source: &str, extra: &[&str]) -> Result<Value, String> {
    let url = endpoint(server);
    let mut args = vec![
        "detect",
        "--source",
        source,
        "--metadata-endpoint",
        url.as_str(),
        "--output",
        "json",
    ];
    args.extend(extra);
    let out = ns.helper(&args);
    if out.status != 0 {
        assert!(out.stdout.is_empty());
        return Err(out.stderr);
    }
    Ok(serde_json::from_str(&out.stdout).expect("JSON"))
}

fn ips(json: &Value) -> Vec<&str> {
    json["nodeIPs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect()
}

fn cloud(json: &Value) -> Vec<String> {
    json["cloudAddresses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| format!("{} {}", a["type"].as_str().unwrap(), a["address"].as_str().unwrap()))
        .collect()
}

#[test]
fn aws_takes_the_primary_eni_address_in_the_ccms_order() {
    let Some(ns) = Netns::new() else { return };
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
}

#[test]
fn aws_addresses_must_be_local_unless_told_otherwise() {
    let Some(ns) = Netns::new() else { return };
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
    let Some(ns) = Netns::new() else { return };
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
    let Some(ns) = Netns::new() else { return };
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
    let Some(ns) = Netns::new() else { return };
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
    let Some(ns) = Netns::new() else { return };
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
    let cases: [(&str, &str, &[&str], &str); 5] = [
        (
            "gce",
            "gce.json",
            &["10.132.0.7", "2600:1900:4000::7"],
            "InternalDNS node-a.europe-west1-b.c.my-project.internal",
        ),
        (
            "azure",
            "azure.json",
            &["10.240.0.4", "fd00:db8::4"],
            "ExternalIP 20.50.1.2",
        ),
        (
            "openstack",
            "openstack.json",
            &["192.168.10.5", "fd10::5"],
            "ExternalIP 172.24.4.50",
        ),
        (
            "digitalocean",
            "digitalocean.json",
            &["10.110.0.2", "2a03:b0c0:2:d0::abc:1001"],
            "ExternalIP 188.166.1.2",
        ),
        (
            "hetzner",
            "hetzner.json",
            &["10.0.0.2", "2a01:4f8:c17:1234::1"],
            "ExternalIP 49.12.1.2",
        ),
    ];
    for (source, scenario, want, listed) in cases {
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
    }
    // Azure's controller manager reads the first interface only, hostname first.
    let azure = ns.fake_metadata("azure.json");
    let json = detect(&ns, &azure, "azure", &["--node-name-from", "instance-id"]).unwrap();
    assert_eq!(
        cloud(&json),
        [
            "Hostname node-a",
            "InternalIP 10.240.0.4",
            "ExternalIP 20.50.1.2",
            "InternalIP 10.240.0.5",
            "InternalIP fd00:db8::4"
        ]
    );
    assert_eq!(json["hostname"], "02aab8a4-74ef-476e-8182-f6d2ba4166a6");
}

#[test]
fn auto_finds_the_cloud_or_falls_back_to_local() {
    let Some(ns) = Netns::new() else { return };
    ns.nic("eth0");
    ns.ip("addr add 10.132.0.7/24 dev eth0");
    ns.ip("addr add 10.9.9.9/24 dev eth0");
    ns.ip("route add default via 10.9.9.1 dev eth0");
    let gce = ns.fake_metadata("gce.json");
    let json = detect(&ns, &gce, "auto", &[]).unwrap();
    assert_eq!(json["source"], "gce");
    assert_eq!(ips(&json), ["10.132.0.7"]);
    drop(gce);
    // Nothing listens any more: the host's own state decides.
    let closed = Server::closed();
    let json = detect(&ns, &closed, "auto", &["--metadata-timeout", "300ms"]).unwrap();
    assert_eq!(json["source"], "local");
    assert_eq!(ips(&json), ["10.132.0.7"]);
}

/// `check`'s CCM rules with a metadata source: `auto` applies those of the
/// cloud that answers; a local source, or `auto` with none answering, has no
/// cloud's list to apply them to, and is refused (docs/decisions.md).
#[test]
fn check_applies_the_answering_clouds_rules_and_refuses_local() {
    let Some(ns) = Netns::new() else { return };
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
    assert_eq!(out.status, 1, "{}", out.stderr);
    assert!(out.stdout.starts_with("STUCK:"), "{}", out.stdout);
    drop(gce);

    let closed = endpoint(&Server::closed());
    for (source, url, refusal) in [
        ("local", &url, "--source local has no cloud addresses"),
        ("auto", &closed, "--source auto: no metadata service answered"),
    ] {
        let out = check("10.132.0.7", source, url);
        assert_eq!(out.status, 1);
        assert!(out.stderr.contains(refusal), "{}", out.stderr);
    }
}

#[test]
fn openstack_config_drive() {
    let Some(ns) = Netns::new() else { return };
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

#[test]
fn node_name_sources_that_the_source_lacks_are_errors() {
    let Some(ns) = Netns::new() else { return };
    ns.nic("eth0");
    ns.ip("addr add 10.0.0.5/24 dev eth0");
    let out = ns.helper(&["detect", "--node-name-from", "private-dns"]);
    assert_eq!(out.status, 1);
    assert!(
        out.stderr
            .contains("--node-name-from private-dns: the local source has no private DNS name; use --source aws"),
        "{}",
        out.stderr
    );
}

/// `--node-name-from private-dns` asks EC2 itself (DescribeInstances), as
/// EKS does for custom DHCP domains where IMDS's `local-hostname` differs:
/// moto's server holds the instance (PyPI `moto[server]`), the fake serves
/// its IMDS. Both on the host's loopback; `--skip-local-check` since the
/// instance's address is not on this host.
#[tokio::test]
async fn private_dns_name_comes_from_describe_instances() {
    use cloud_access::aws::endpoints::{EC2, EndpointOptions};
    use cloud_access::aws::{AwsClient, AwsCredentials};

    let _ = rustls::crypto::ring::default_provider().install_default();
    let moto = cluster_harness::Moto::start();
    let options = EndpointOptions {
        global_override: Some(moto.url.clone()),
        ..EndpointOptions::default()
    };
    let credentials = AwsCredentials {
        access_key_id: "AKIDTEST".into(),
        secret_access_key: "test-secret".into(),
        session_token: None,
        expires_at: None,
        source: "test",
    };
    let xml = AwsClient::new(reqwest::Client::new(), "us-east-1", options)
        .query(
            EC2,
            "RunInstances",
            "2016-11-15",
            &[("ImageId", "ami-12c6146b"), ("MinCount", "1"), ("MaxCount", "1")],
            &credentials,
            std::time::Instant::now() + std::time::Duration::from_secs(10),
        )
        .await
        .expect("RunInstances");
    let field = |name: &str| {
        let start = xml.find(&format!("<{name}>")).expect(name) + name.len() + 2;
        xml[start..start + xml[start..].find('<').unwrap()].to_owned()
    };
    let (instance_id, private_dns) = (field("instanceId"), field("privateDnsName"));

    // IMDS says a DHCP-domain name; EC2 knows the real PrivateDnsName.
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("imds.json");
    let tree = serde_json::json!({
        "latest/meta-data/instance-id": instance_id,
        "latest/meta-data/local-ipv4": "10.0.1.25",
        "latest/meta-data/local-hostname": "node-a.corp.example.com",
        "latest/meta-data/placement/region": "us-east-1",
    });
    std::fs::write(
        &scenario,
        serde_json::json!({"provider": "aws", "tree": tree}).to_string(),
    )
    .unwrap();
    let mut fake = std::process::Command::new("python3")
        .arg(common::workspace_root().join("tests/fakes/metadata_server.py"))
        .arg(&scenario)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(fake.stdout.take().unwrap()), &mut line).unwrap();
    let imds = format!("http://127.0.0.1:{}/", line.trim());

    let run = |extra: &[(&str, &str)]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_node-ip-helper"))
            .args([
                "detect",
                "--source",
                "aws",
                "--skip-local-check",
                "--node-name-from",
                "private-dns",
            ])
            .args(["--metadata-endpoint", &imds])
            .env("AWS_ENDPOINT_URL", &moto.url)
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .envs(extra.iter().copied())
            .output()
            .unwrap()
    };
    let out = run(&[
        ("AWS_ACCESS_KEY_ID", "AKIDNODE"),
        ("AWS_SECRET_ACCESS_KEY", "node-secret"),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["hostname"], private_dns.to_lowercase());
    assert_ne!(json["hostname"], "node-a.corp.example.com");

    // Without credentials for EC2 the error says what to grant.
    let out = run(&[]);
    let _ = fake.kill();
    let _ = fake.wait();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--node-name-from private-dns: EC2 DescribeInstances of"),
        "{stderr}"
    );
    assert!(stderr.contains("ec2:DescribeInstances"), "{stderr}");
}

/// Node names from metadata end up as `--hostname-override` on kubelet's
/// command line: a value that is not a Kubernetes node name (a DNS-1123
/// subdomain) is refused, naming the source and the value (escaped), so
/// that `x --authorization-mode=AlwaysAllow` can never become a kubelet flag.
#[test]
fn node_names_from_every_metadata_source_are_validated() {
    let Some(ns) = Netns::new() else { return };
    let dir = tempfile::tempdir().unwrap();
    let hostile = "x --authorization-mode=AlwaysAllow --v=10";
    let scenario = |name: &str| -> Value {
        serde_json::from_str(
            &std::fs::read_to_string(
                common::workspace_root()
                    .join("tests/data/node-ip-helper/metadata")
                    .join(name),
            )
            .unwrap(),
        )
        .unwrap()
    };
    let mut cases: Vec<(&str, Value, &str)> = Vec::new();
    let mut aws = scenario("aws-multi-eni.json");
    aws["tree"]["latest/meta-data/instance-id"] = hostile.into();
    cases.push(("aws", aws, hostile));
    let mut gce = scenario("gce.json");
    gce["tree"]["computeMetadata/v1/instance/id"] = "4567\t--v=10".into();
    cases.push(("gce", gce, "4567\t--v=10"));
    let mut azure = scenario("azure.json");
    azure["tree"]["metadata/instance"]["compute"]["vmId"] = "02aab8a4 \"--v=10\"".into();
    cases.push(("azure", azure, "02aab8a4 \"--v=10\""));
    let mut openstack = scenario("openstack.json");
    openstack["tree"]["openstack/latest/meta_data.json"]["uuid"] = hostile.into();
    cases.push(("openstack", openstack, hostile));
    let mut digitalocean = scenario("digitalocean.json");
    digitalocean["tree"]["metadata/v1.json"]["droplet_id"] = "droplet_1".into();
    cases.push(("digitalocean", digitalocean, "droplet_1"));
    let mut hetzner = scenario("hetzner.json");
    let yaml = hetzner["tree"]["hetzner/v1/metadata"]
        .as_str()
        .unwrap()
        .replace("instance-id: 42424242", &format!("instance-id: '{hostile}'"));
    hetzner["tree"]["hetzner/v1/metadata"] = yaml.into();
    cases.push(("hetzner", hetzner, hostile));

    for (source, tree, value) in cases {
        let path = dir.path().join(format!("{source}.json"));
        std::fs::write(&path, tree.to_string()).unwrap();
        let server = ns.fake_metadata_from(&path);
        let err = detect(
            &ns,
            &server,
            source,
            &["--skip-local-check", "--node-name-from", "instance-id"],
        )
        .expect_err(source);
        let escaped = format!("{value:?}");
        assert!(
            err.contains(&format!(
                "--node-name-from instance-id: the {source} instance ID {escaped}"
            )) && err.contains("is not a valid Kubernetes node name"),
            "{source}: {err}"
        );
    }
}

/// The same for the kernel's hostname (set in a UTS namespace of its own);
/// a valid one is lowercased as kubelet lowercases it.
#[test]
fn node_names_from_the_hostname_are_validated() {
    let Some(ns) = Netns::new() else { return };
    ns.nic("eth0");
    ns.ip("addr add 192.168.10.5/24 dev eth0");
    let with_hostname = |hostname: &str| {
        let out = std::process::Command::new("ip")
            .args(["netns", "exec", &ns.name, "unshare", "--uts", "sh", "-c"])
            .arg(r#"printf %s "$0" > /proc/sys/kernel/hostname && exec "$@""#)
            .arg(hostname)
            .arg(env!("CARGO_BIN_EXE_node-ip-helper"))
            .args(["detect", "--node-name-from", "hostname", "--output", "flags"])
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (status, stdout, stderr) = with_hostname("n --v=10");
    assert_eq!(status, Some(1), "{stdout}");
    assert!(
        stderr.contains(
            r#"--node-name-from hostname: the kernel's hostname "n --v=10" is not a valid Kubernetes node name"#
        ),
        "{stderr}"
    );
    let (status, stdout, stderr) = with_hostname("Node-A.Example");
    assert_eq!(status, Some(0), "{stderr}");
    assert_eq!(stdout, "--node-ip=192.168.10.5 --hostname-override=node-a.example\n");
}
