//! The `gce` source end to end, against the fake metadata server
//! (tests/fakes/metadata_server.py, `Metadata-Flavor: Google` enforced) on
//! the loopback of a network namespace whose interfaces carry the
//! instance's addresses. Needs root.
//!
//! The order is kubernetes/cloud-provider-gcp's (providers/gce/
//! gce_instances.go): per network interface in index order its internal IP,
//! its access configs' external IPs and one IPv6 address (the first of
//! `ipv6s`); the hostname as InternalDNS and Hostname; then `orderAddresses`
//! puts IPv4 (and the names) before IPv6. Alias IP ranges and forwarded IPs
//! are never node addresses.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};

use common::{Netns, Output, Server};
use serde_json::Value;

const SCENARIO: &str = "gce-multi-nic.json";
const HOSTNAME: &str = "node-gce-7.us-central1-b.c.my-project.internal";
const NIC0_V4: &str = "10.128.0.12";
const NIC0_EXTERNAL: &str = "34.118.1.2";
const NIC0_V6: &str = "fd20:6b4:1a2b:4000::1";
/// NIC 0's second `ipv6s` entry: on the host, but the CCM lists only the first.
const NIC0_V6_SECOND: &str = "fd20:6b4:1a2b:4000::2";
const NIC1_V4: &str = "10.130.0.7";
/// NIC 2 is IPv6 only, with an external IPv6 (which GCE writes to `ipv6s` too).
const NIC2_V6: &str = "2600:1900:4010:c1e:0:2::";
/// In the fixture's `ip-aliases` (a /32 alias is on the host) and `forwarded-ips`.
const NOT_NODE_IPS: [&str; 4] = ["10.4.0.", "10.128.5.9", "10.8.0.", "35.190.1.2"];

/// The instance's NICs as a GCE guest sees them: ens4, ens5 and ens6, with
/// NIC 0's second IPv6 and its /32 alias IP on ens4 as well.
fn gce_host() -> Netns {
    let ns = Netns::new();
    for nic in ["ens4", "ens5", "ens6"] {
        ns.nic(nic);
    }
    ns.ip(&format!("addr add {NIC0_V4}/32 dev ens4"));
    ns.ip("addr add 10.128.5.9/32 dev ens4");
    ns.ip(&format!("addr add {NIC1_V4}/32 dev ens5"));
    for (ip, dev) in [(NIC0_V6, "ens4"), (NIC0_V6_SECOND, "ens4"), (NIC2_V6, "ens6")] {
        ns.ip(&format!("addr add {ip}/128 dev {dev} nodad"));
    }
    ns
}

fn endpoint(server: &Server) -> String {
    format!("http://127.0.0.1:{}/", server.port)
}

/// `SUBCOMMAND --source SOURCE --metadata-endpoint <server> ARGS…`.
fn run(ns: &Netns, server: &Server, subcommand: &str, source: &str, args: &[&str]) -> Output {
    let url = endpoint(server);
    let mut all = vec![subcommand, "--source", source, "--metadata-endpoint", &url];
    all.extend(args);
    ns.helper(&all)
}

/// `detect --source gce --output json`, parsed, or the error text.
fn detect(ns: &Netns, server: &Server, args: &[&str]) -> Result<Value, String> {
    let mut all = vec!["--output", "json"];
    all.extend(args);
    let out = run(ns, server, "detect", "gce", &all);
    if out.status != 0 {
        assert_eq!(out.status, 1, "{}", out.stderr);
        assert!(out.stdout.is_empty(), "nothing on stdout on failure: {}", out.stdout);
        return Err(out.stderr);
    }
    Ok(serde_json::from_str(&out.stdout).expect("JSON output"))
}

/// `detect --output flags`: what kubelet is given.
fn flags(ns: &Netns, server: &Server, source: &str, args: &[&str]) -> Result<String, String> {
    let mut all = vec!["--output", "flags"];
    all.extend(args);
    let out = run(ns, server, "detect", source, &all);
    if out.status != 0 {
        assert_eq!(out.status, 1, "{}", out.stderr);
        assert!(out.stdout.is_empty(), "nothing on stdout on failure: {}", out.stdout);
        return Err(out.stderr);
    }
    Ok(out.stdout)
}

fn node_ips(json: &Value) -> Vec<String> {
    json["nodeIPs"]
        .as_array()
        .expect("nodeIPs")
        .iter()
        .map(|ip| ip.as_str().expect("an address").to_owned())
        .collect()
}

fn cloud_addresses(json: &Value) -> Vec<String> {
    json["cloudAddresses"]
        .as_array()
        .expect("cloudAddresses")
        .iter()
        .map(|a| format!("{} {}", a["type"].as_str().unwrap(), a["address"].as_str().unwrap()))
        .collect()
}

/// A copy of the fixture with `edit` applied to its tree, served by the fake.
fn edited(ns: &Netns, dir: &tempfile::TempDir, edit: impl FnOnce(&mut serde_json::Map<String, Value>)) -> Server {
    let path = common::workspace_root()
        .join("tests/data/node-ip-helper/metadata")
        .join(SCENARIO);
    let mut scenario: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    edit(scenario["tree"].as_object_mut().unwrap());
    static COPIES: AtomicUsize = AtomicUsize::new(0);
    let copy = dir
        .path()
        .join(format!("gce-{}.json", COPIES.fetch_add(1, Ordering::SeqCst)));
    std::fs::write(&copy, scenario.to_string()).unwrap();
    ns.fake_metadata_from(&copy)
}

fn key(leaf: &str) -> String {
    format!("computeMetadata/v1/instance/{leaf}")
}

/// The whole list, in the CCM's order: IPv4 of every NIC by index (each
/// internal IP followed by its access configs' external IPs; an access
/// config without one, and an IPv6-only NIC's empty `ip`, add nothing), the
/// hostname, then the first IPv6 of each NIC. Nothing from `ip-aliases` or
/// `forwarded-ips`, though a /32 alias is on the host.
#[test]
fn several_nics_in_the_ccms_order_first_ipv6_only_no_alias_ranges() {
    let ns = gce_host();
    let server = ns.fake_metadata(SCENARIO);
    let json = detect(&ns, &server, &["--ip-family", "dual"]).unwrap();
    assert_eq!(
        cloud_addresses(&json),
        [
            format!("InternalIP {NIC0_V4}"),
            format!("ExternalIP {NIC0_EXTERNAL}"),
            format!("InternalIP {NIC1_V4}"),
            format!("InternalDNS {HOSTNAME}"),
            format!("Hostname {HOSTNAME}"),
            format!("InternalIP {NIC0_V6}"),
            format!("InternalIP {NIC2_V6}"),
        ]
    );
    assert_eq!(node_ips(&json), [NIC0_V4, NIC0_V6]);
    assert_eq!(json["source"], "gce");
    let text = json.to_string();
    for not_a_node_ip in NOT_NODE_IPS.iter().chain([&NIC0_V6_SECOND]) {
        assert!(!text.contains(not_a_node_ip), "{not_a_node_ip} in {text}");
    }
}

/// `--node-ip` as the program hands it to kubelet, for every family policy.
#[test]
fn the_node_ip_for_each_family() {
    let ns = gce_host();
    let server = ns.fake_metadata(SCENARIO);
    for (family, want) in [
        ("ipv4", format!("--node-ip={NIC0_V4}\n")),
        ("ipv6", format!("--node-ip={NIC0_V6}\n")),
        ("dual", format!("--node-ip={NIC0_V4},{NIC0_V6}\n")),
        ("dual-ipv6-primary", format!("--node-ip={NIC0_V6},{NIC0_V4}\n")),
    ] {
        let got = flags(&ns, &server, "gce", &["--ip-family", family, "--no-provider-id"])
            .unwrap_or_else(|e| panic!("{family}: {e}"));
        assert_eq!(got, want, "{family}");
    }
    let out = run(
        &ns,
        &server,
        "detect",
        "gce",
        &["--ip-family", "dual", "--output", "env"],
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(
        out.stdout
            .contains(&format!("NODE_IP_HELPER_NODE_IPS='{NIC0_V4},{NIC0_V6}'\n")),
        "{}",
        out.stdout
    );
}

/// The NICs' order decides: with NIC 0's addresses set aside, NIC 1's IPv4
/// and NIC 2's IPv6 come next, never NIC 0's second `ipv6s` entry (on the
/// host and allowed, but not the CCM's), nor an alias IP.
#[test]
fn the_next_nic_in_order_when_the_first_is_set_aside() {
    let ns = gce_host();
    let server = ns.fake_metadata(SCENARIO);
    let json = detect(&ns, &server, &["--deny-cidr", "10.128.0.0/16"]).unwrap();
    assert_eq!(node_ips(&json), [NIC1_V4]);
    assert_eq!(json["addresses"][0]["interface"], "ens5");
    let reason = json["addresses"][0]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("#2 IPv4 InternalIP the gce metadata service lists"),
        "{reason}"
    );

    let deny = format!("{NIC0_V6}/128");
    let json = detect(&ns, &server, &["--ip-family", "ipv6", "--deny-cidr", &deny]).unwrap();
    assert_eq!(node_ips(&json), [NIC2_V6]);
    assert_eq!(json["addresses"][0]["interface"], "ens6");

    let only_second = format!("{NIC0_V6_SECOND}/128");
    let err = detect(&ns, &server, &["--ip-family", "ipv6", "--allow-cidr", &only_second]).unwrap_err();
    assert!(err.contains("no IPv6 address qualifies"), "{err}");
}

/// An alias IP is not a node IP even when it is on the host and the only
/// address the filters allow; and the CCM would refuse it as `--node-ip`.
#[test]
fn alias_ranges_are_never_node_ips() {
    let ns = gce_host();
    let server = ns.fake_metadata(SCENARIO);
    let err = detect(&ns, &server, &["--allow-cidr", "10.128.5.9/32"]).unwrap_err();
    assert!(err.contains("no IPv4 address qualifies"), "{err}");
    assert!(!err.contains("10.128.5.9 "), "the alias is not even a candidate: {err}");

    let check = |node_ip: &str| run(&ns, &server, "check", "gce", &["--node-ip", node_ip]);
    let out = check("10.128.5.9");
    assert_eq!(out.status, 2, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.starts_with("STUCK:"), "{}", out.stdout);
    let out = check(NIC1_V4);
    assert_eq!(out.status, 0, "{}{}", out.stdout, out.stderr);
    // The chosen InternalIP first; the other InternalIPs (both families)
    // dropped; the access config's external IP and the names kept.
    assert_eq!(
        out.stdout
            .lines()
            .skip(1)
            .map(str::split_whitespace)
            .map(Iterator::collect::<Vec<_>>)
            .collect::<Vec<_>>(),
        [
            vec!["InternalIP", NIC1_V4],
            vec!["ExternalIP", NIC0_EXTERNAL],
            vec!["InternalDNS", HOSTNAME],
            vec!["Hostname", HOSTNAME],
        ]
    );
}

/// `--node-name-from instance-name`: GCE's `instance/name`, the name the
/// GCE CCM looks the instance up by; refused unless a valid node name.
#[test]
fn node_name_from_the_instance_name() {
    let ns = gce_host();
    let server = ns.fake_metadata(SCENARIO);
    assert_eq!(
        flags(&ns, &server, "gce", &["--node-name-from", "instance-name"]).unwrap(),
        format!(
            "--node-ip={NIC0_V4} --provider-id=gce://my-project/us-central1-b/node-gce-7 --hostname-override=node-gce-7\n"
        )
    );
    // `auto` finds GCE and takes its instance name too.
    assert_eq!(
        flags(&ns, &server, "auto", &["--node-name-from", "instance-name"]).unwrap(),
        format!(
            "--node-ip={NIC0_V4} --provider-id=gce://my-project/us-central1-b/node-gce-7 --hostname-override=node-gce-7\n"
        )
    );
    let json = detect(&ns, &server, &["--node-name-from", "instance-name"]).unwrap();
    assert_eq!(json["hostname"], "node-gce-7");
    drop(server);

    let dir = tempfile::tempdir().unwrap();
    let hostile = "node-gce-7 --v=10";
    let server = edited(&ns, &dir, |tree| {
        tree.insert(key("name"), hostile.into());
    });
    let err = flags(&ns, &server, "gce", &["--node-name-from", "instance-name"]).unwrap_err();
    assert!(
        err.contains(&format!(
            "--node-name-from instance-name: the gce instance name {hostile:?} is not a valid Kubernetes node name"
        )),
        "{err}"
    );
    drop(server);

    let server = edited(&ns, &dir, |tree| {
        tree.remove(&key("name"));
    });
    let err = flags(&ns, &server, "gce", &["--node-name-from", "instance-name"]).unwrap_err();
    assert!(
        err.contains("--node-name-from instance-name: the gce source has no instance name"),
        "{err}"
    );
}

/// Elsewhere: DigitalOcean's droplet name and Hetzner's server name (their
/// metadata's `hostname`) and OpenStack's server name, which their CCMs
/// look nodes up by (Azure's in tests/azure.rs); the sources
/// without such a name say so, naming the flag and the source.
#[test]
fn instance_names_of_the_other_sources() {
    let ns = Netns::new();
    ns.nic("eth0");
    ns.ip("addr add 10.0.0.5/24 dev eth0");
    for (source, scenario) in [
        ("digitalocean", "digitalocean.json"),
        ("hetzner", "hetzner.json"),
        ("openstack", "openstack.json"),
    ] {
        let server = ns.fake_metadata(scenario);
        let got = flags(
            &ns,
            &server,
            source,
            &["--node-name-from", "instance-name", "--skip-local-check"],
        )
        .unwrap_or_else(|e| panic!("{source}: {e}"));
        assert!(got.ends_with(" --hostname-override=node-a\n"), "{source}: {got}");
    }
    // AWS names nodes by private DNS name or instance ID instead.
    let server = ns.fake_metadata("aws-multi-eni.json");
    let err = flags(
        &ns,
        &server,
        "aws",
        &["--node-name-from", "instance-name", "--skip-local-check"],
    )
    .unwrap_err();
    assert!(
        err.contains(
            "--node-name-from instance-name: the aws source has no instance name; use --source gce, azure, openstack, digitalocean or hetzner"
        ),
        "{err}"
    );
    let out = ns.helper(&["detect", "--node-name-from", "instance-name"]);
    assert_eq!(out.status, 1);
    assert!(
        out.stderr
            .contains("--node-name-from instance-name: the local source has no instance name"),
        "{}",
        out.stderr
    );
}
