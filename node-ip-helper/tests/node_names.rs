//! Node names end up as `--hostname-override` on kubelet's command line:
//! those from each metadata source, EC2's DescribeInstances and the kernel's
//! hostname are validated (and lowercased as kubelet does), and a node-name
//! source the chosen source lacks is an error. Like `metadata.rs`, these run
//! the binary in a network namespace against a metadata server; needs root.

mod common;
mod metadata_common;

use common::Netns;
use metadata_common::detect;
use serde_json::Value;

#[test]
fn node_name_sources_that_the_source_lacks_are_errors() {
    let ns = Netns::new();
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
    // moto checks every signature: the helper signs with the IAM user's key.
    let moto = cluster_harness::Moto::start_authenticated();
    let keys = moto.auth().user.clone();
    let (instance_id, private_dns) = moto.run_instance("us-east-1");

    // IMDS says a DHCP-domain name; EC2 knows the real PrivateDnsName.
    let tree = serde_json::json!({
        "latest/meta-data/instance-id": instance_id,
        "latest/meta-data/local-ipv4": "10.0.1.25",
        "latest/meta-data/local-hostname": "node-a.corp.example.com",
        "latest/meta-data/placement/region": "us-east-1",
        "latest/meta-data/placement/availability-zone": "us-east-1a",
    });
    let fake = test_fakes::MetadataFake::from_json(&serde_json::json!({"provider": "aws", "tree": tree}));
    let imds = fake.base();

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
        ("AWS_ACCESS_KEY_ID", &keys.access_key_id),
        ("AWS_SECRET_ACCESS_KEY", &keys.secret_access_key),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["hostname"], private_dns.to_lowercase());
    assert_ne!(json["hostname"], "node-a.corp.example.com");
    assert_eq!(json["providerID"], format!("aws:///us-east-1a/{instance_id}"));

    // A wrong secret: EC2 refuses the signature, and the error says what failed.
    let out = run(&[
        ("AWS_ACCESS_KEY_ID", &keys.access_key_id),
        ("AWS_SECRET_ACCESS_KEY", "not-the-secret"),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--node-name-from private-dns: EC2 DescribeInstances of"),
        "{stderr}"
    );
    assert!(!stderr.contains("not-the-secret"), "{stderr}");

    // Without credentials for EC2 the error says what to grant.
    let out = run(&[]);
    drop(fake);
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
    let ns = Netns::new();
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
    let ns = Netns::new();
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
