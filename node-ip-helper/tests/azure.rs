//! The `azure` source end to end, against the fake metadata server
//! (tests/fakes/metadata_server.py, `Metadata: true` and `api-version`
//! enforced) on the loopback of a network namespace whose interfaces carry
//! the instance's addresses. Needs root.
//!
//! The order is kubernetes-sigs/cloud-provider-azure's
//! (pkg/provider/azure_instances_v1.go, `getLocalInstanceNodeAddresses`,
//! which cloud-node-manager runs on every node): the node's name as
//! Hostname, then the FIRST network interface's FIRST IPv4 configuration
//! (private IP as InternalIP, public IP as ExternalIP) and its FIRST IPv6
//! configuration likewise. Other NICs and secondary IP configurations are
//! never node addresses. When neither of those configurations has a public
//! IP (a Standard-SKU public IP is not in the instance document), the
//! load balancer metadata's `publicIpAddresses` entry whose private IP is
//! the configuration's gives it (pkg/provider/azure_instance_metadata.go,
//! `getMetadata` and `fillNetInterfacePublicIPs`).

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};

use common::{Netns, Output, Server};
use serde_json::Value;

const MULTI_NIC: &str = "azure-multi-nic.json";
const PUBLIC_IP: &str = "azure-instance-public-ip.json";
/// `osProfile.computerName`: the guest's hostname, which kubelet names the node after.
const COMPUTER_NAME: &str = "aks-node-host";
/// NIC 0, IP configuration 0: the only IPv4 address the CCM lists.
const V4: &str = "10.1.0.4";
/// NIC 0's secondary IPv4 configuration: on the host, never a node address.
const V4_SECONDARY: &str = "10.1.0.5";
/// NIC 1's: on the host, never a node address (nor its public IP).
const NIC1_V4: &str = "10.2.0.4";
const V6: &str = "fd00:1::4";
const V6_SECONDARY: &str = "fd00:1::5";
const NIC1_V6: &str = "fd00:2::4";
/// The load balancer's frontend public IPs for NIC 0's first IPv4 and IPv6
/// configurations (the first matching entry; IPv6 comes in brackets).
const LB_V4: &str = "20.1.1.2";
const LB_V6: &str = "2603:1020:1:2::7";
/// In the fixtures but never node addresses: an LB entry for the secondary
/// configuration, a later duplicate, NIC 1's own and the LB's, inbound and
/// outbound rules' frontends.
const NEVER: [&str; 6] = [
    "20.1.1.1",
    "20.1.1.3",
    "20.1.1.9",
    "52.10.0.9",
    "20.1.1.50",
    "20.1.1.60",
];
/// The instance public IP of `azure-instance-public-ip.json`.
const INSTANCE_PUBLIC: &str = "40.113.7.8";

/// The VM as an Azure guest sees it: eth0 with NIC 0's configurations
/// (both IPv4 and both IPv6 ones), eth1 with NIC 1's. Public IPs are never
/// on the host (Azure translates them).
fn azure_host() -> Netns {
    let ns = Netns::new();
    ns.nic("eth0");
    ns.nic("eth1");
    ns.ip(&format!("addr add {V4}/24 dev eth0"));
    ns.ip(&format!("addr add {V4_SECONDARY}/24 dev eth0"));
    ns.ip(&format!("addr add {NIC1_V4}/24 dev eth1"));
    for (ip, dev) in [(V6, "eth0"), (V6_SECONDARY, "eth0"), (NIC1_V6, "eth1")] {
        ns.ip(&format!("addr add {ip}/64 dev {dev} nodad"));
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

/// `detect --source azure --output json`, parsed, or the error text.
fn detect(ns: &Netns, server: &Server, args: &[&str]) -> Result<Value, String> {
    let mut all = vec!["--output", "json"];
    all.extend(args);
    let out = run(ns, server, "detect", "azure", &all);
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

/// `check`'s rows after its verdict line: `TYPE ADDRESS` each.
fn check_rows(out: &Output) -> Vec<String> {
    out.stdout
        .lines()
        .skip(1)
        .map(|line| line.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

/// A copy of `scenario` with `edit` applied to its tree, served by the fake.
fn edited(ns: &Netns, dir: &tempfile::TempDir, scenario: &str, edit: impl FnOnce(&mut Value)) -> Server {
    let path = common::workspace_root()
        .join("tests/data/node-ip-helper/metadata")
        .join(scenario);
    let mut scenario: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    edit(&mut scenario["tree"]);
    static COPIES: AtomicUsize = AtomicUsize::new(0);
    let copy = dir
        .path()
        .join(format!("azure-{}.json", COPIES.fetch_add(1, Ordering::SeqCst)));
    std::fs::write(&copy, scenario.to_string()).unwrap();
    ns.fake_metadata_from(&copy)
}

fn nic0(tree: &mut Value) -> &mut Value {
    &mut tree["metadata/instance"]["network"]["interface"][0]
}

/// The whole list, in the CCM's order: the name, NIC 0's first IPv4
/// configuration with the load balancer's public IP for it, its first IPv6
/// configuration likewise (the brackets taken off). Nothing from NIC 1,
/// the secondary configurations, or the load balancer's other entries and
/// rules.
#[test]
fn first_nic_first_configurations_and_the_load_balancers_public_ips() {
    let ns = azure_host();
    let server = ns.fake_metadata(MULTI_NIC);
    let json = detect(&ns, &server, &["--ip-family", "dual"]).unwrap();
    assert_eq!(
        cloud_addresses(&json),
        [
            format!("Hostname {COMPUTER_NAME}"),
            format!("InternalIP {V4}"),
            format!("ExternalIP {LB_V4}"),
            format!("InternalIP {V6}"),
            format!("ExternalIP {LB_V6}"),
        ]
    );
    assert_eq!(node_ips(&json), [V4, V6]);
    assert_eq!(json["source"], "azure");
    assert_eq!(json["addresses"][0]["interface"], "eth0");
    let text = json.to_string();
    for never in NEVER.iter().chain(&[V4_SECONDARY, V6_SECONDARY, NIC1_V4, NIC1_V6]) {
        assert!(!text.contains(never), "{never} in {text}");
    }
}

/// `--node-ip` as the program hands it to kubelet, for every family policy:
/// always NIC 0's first configuration of the family, never a load
/// balancer's public IP (not on the host, and an InternalIP is listed).
#[test]
fn the_node_ip_for_each_family() {
    let ns = azure_host();
    let server = ns.fake_metadata(MULTI_NIC);
    for (family, want) in [
        ("ipv4", format!("--node-ip={V4}\n")),
        ("ipv6", format!("--node-ip={V6}\n")),
        ("dual", format!("--node-ip={V4},{V6}\n")),
        ("dual-ipv6-primary", format!("--node-ip={V6},{V4}\n")),
    ] {
        let got = flags(&ns, &server, "azure", &["--ip-family", family, "--no-provider-id"])
            .unwrap_or_else(|e| panic!("{family}: {e}"));
        assert_eq!(got, want, "{family}");
    }
    let out = run(
        &ns,
        &server,
        "detect",
        "azure",
        &["--ip-family", "dual", "--output", "env"],
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains(&format!("NODE_IP_HELPER_NODE_IPS='{V4},{V6}'\n")),
        "{}",
        out.stdout
    );
}

/// The CCM lists one address per family: with it set aside there is no
/// other, however many configurations and NICs the host has. A secondary
/// configuration or NIC 1 would leave the node tainted.
#[test]
fn no_secondary_configuration_or_other_nic_as_a_fallback() {
    let ns = azure_host();
    let server = ns.fake_metadata(MULTI_NIC);
    let deny = format!("{V4}/32");
    let err = detect(&ns, &server, &["--deny-cidr", &deny]).unwrap_err();
    assert!(err.contains("no IPv4 address qualifies"), "{err}");
    assert!(
        !err.contains(V4_SECONDARY) && !err.contains(NIC1_V4),
        "not even candidates: {err}"
    );
    let deny = format!("{V6}/128");
    let err = detect(&ns, &server, &["--ip-family", "ipv6", "--deny-cidr", &deny]).unwrap_err();
    assert!(err.contains("no IPv6 address qualifies"), "{err}");
    assert!(!err.contains(V6_SECONDARY) && !err.contains(NIC1_V6), "{err}");
}

/// `check` against the metadata: NIC 0's first configuration, alone or as
/// a dual-stack pair, initializes the node, keeping the load balancer's
/// public IPs and the name; a secondary configuration or NIC 1's address
/// leaves it stuck. (cloud-node-manager, which initializes Azure nodes,
/// then sets the whole list; `check` shows the generic CCM rule's
/// `GetNodeAddressesFromNodeIP` list, so only what both keep is asserted.)
#[test]
fn check_against_the_metadata() {
    let ns = azure_host();
    let server = ns.fake_metadata(MULTI_NIC);
    let check = |node_ip: &str| run(&ns, &server, "check", "azure", &["--node-ip", node_ip]);
    let kept = [
        format!("Hostname {COMPUTER_NAME}"),
        format!("InternalIP {V4}"),
        format!("ExternalIP {LB_V4}"),
        format!("ExternalIP {LB_V6}"),
    ];
    for node_ip in [V4.to_owned(), format!("{V4},{V6}"), format!("{V6},{V4}")] {
        let out = check(&node_ip);
        assert_eq!(out.status, 0, "{node_ip}: {}{}", out.stdout, out.stderr);
        assert!(!out.stdout.starts_with("STUCK"), "{node_ip}: {}", out.stdout);
        let rows = check_rows(&out);
        for row in &kept {
            assert!(rows.contains(row), "{node_ip}: {row} not in {rows:?}");
        }
        for never in NEVER.iter().chain(&[V4_SECONDARY, NIC1_V4]) {
            assert!(!out.stdout.contains(never), "{node_ip}: {never} in {}", out.stdout);
        }
    }
    for stuck in [V4_SECONDARY, NIC1_V4, V6_SECONDARY, "52.10.0.9"] {
        let out = check(stuck);
        assert_eq!(out.status, 2, "{stuck}: {}{}", out.stdout, out.stderr);
        assert!(out.stdout.starts_with("STUCK:"), "{stuck}: {}", out.stdout);
    }
}

/// With a public IP on NIC 0's first IPv4 configuration, the CCM does not
/// read the load balancer metadata at all: that IP is the only ExternalIP,
/// and the IPv6 configuration gets none, though the load balancer has one
/// for it.
#[test]
fn an_instance_public_ip_means_the_load_balancer_is_not_read() {
    let ns = azure_host();
    let server = ns.fake_metadata(PUBLIC_IP);
    let json = detect(&ns, &server, &["--ip-family", "dual"]).unwrap();
    assert_eq!(
        cloud_addresses(&json),
        [
            "Hostname node-b".to_owned(),
            format!("InternalIP {V4}"),
            format!("ExternalIP {INSTANCE_PUBLIC}"),
            format!("InternalIP {V6}"),
        ]
    );
    assert_eq!(node_ips(&json), [V4, V6]);
    drop(server);

    // A public IP on the IPv6 configuration alone is enough too.
    let dir = tempfile::tempdir().unwrap();
    let server = edited(&ns, &dir, MULTI_NIC, |tree| {
        nic0(tree)["ipv6"]["ipAddress"][0]["publicIpAddress"] = "2603:1020:1:2::99".into();
    });
    let json = detect(&ns, &server, &["--ip-family", "dual"]).unwrap();
    assert_eq!(
        cloud_addresses(&json),
        [
            format!("Hostname {COMPUTER_NAME}"),
            format!("InternalIP {V4}"),
            format!("InternalIP {V6}"),
            "ExternalIP 2603:1020:1:2::99".to_owned(),
        ]
    );
}

/// Without load balancer metadata (not in a Standard load balancer's
/// backend pool: 404), or with one the CCM cannot use (not JSON, no
/// `loadbalancer`, no matching entry), the instance's own addresses stand,
/// without ExternalIP; never an error.
#[test]
fn no_usable_load_balancer_metadata_means_no_external_ip() {
    let ns = azure_host();
    let dir = tempfile::tempdir().unwrap();
    let want = [
        format!("Hostname {COMPUTER_NAME}"),
        format!("InternalIP {V4}"),
        format!("InternalIP {V6}"),
    ];
    type Edit = Box<dyn FnOnce(&mut Value)>;
    let edits: [(&str, Edit); 5] = [
        (
            "absent",
            Box::new(|tree: &mut Value| {
                tree.as_object_mut().unwrap().remove("metadata/loadbalancer");
            }),
        ),
        (
            "not JSON",
            Box::new(|tree: &mut Value| tree["metadata/loadbalancer"] = "<html>busy</html>".into()),
        ),
        (
            "null",
            Box::new(|tree: &mut Value| tree["metadata/loadbalancer"]["loadbalancer"] = Value::Null),
        ),
        (
            "no public IPs",
            Box::new(|tree: &mut Value| {
                tree["metadata/loadbalancer"]["loadbalancer"]
                    .as_object_mut()
                    .unwrap()
                    .remove("publicIpAddresses");
            }),
        ),
        (
            "other private IPs",
            Box::new(|tree: &mut Value| {
                tree["metadata/loadbalancer"]["loadbalancer"]["publicIpAddresses"] =
                    serde_json::json!([{"frontendIpAddress": "20.1.1.1", "privateIpAddress": "10.1.0.5"}]);
            }),
        ),
    ];
    for (case, edit) in edits {
        let server = edited(&ns, &dir, MULTI_NIC, edit);
        let json = detect(&ns, &server, &["--ip-family", "dual"]).unwrap_or_else(|e| panic!("{case}: {e}"));
        assert_eq!(cloud_addresses(&json), want, "{case}");
        assert_eq!(node_ips(&json), [V4, V6], "{case}");
    }
}

/// An IPv6-only first NIC (no IPv4 configuration): its IPv6 address and the
/// load balancer's public IPv6; an IPv4 node IP is then an error (the CCM
/// lists none). A first NIC without any private IP is an error, as in the
/// CCM ("get empty IP addresses"), and so is an instance without NICs.
#[test]
fn ipv6_only_and_empty_first_nics() {
    let ns = azure_host();
    let dir = tempfile::tempdir().unwrap();
    let server = edited(&ns, &dir, MULTI_NIC, |tree| {
        nic0(tree)["ipv4"]["ipAddress"] = serde_json::json!([]);
    });
    let json = detect(&ns, &server, &["--ip-family", "ipv6"]).unwrap();
    assert_eq!(
        cloud_addresses(&json),
        [
            format!("Hostname {COMPUTER_NAME}"),
            format!("InternalIP {V6}"),
            format!("ExternalIP {LB_V6}"),
        ]
    );
    assert_eq!(node_ips(&json), [V6]);
    let err = detect(&ns, &server, &[]).unwrap_err();
    assert!(err.contains("no IPv4 address qualifies"), "{err}");
    drop(server);

    let server = edited(&ns, &dir, MULTI_NIC, |tree| {
        nic0(tree)["ipv4"]["ipAddress"] = serde_json::json!([]);
        nic0(tree)["ipv6"] = Value::Null;
    });
    let err = detect(&ns, &server, &[]).unwrap_err();
    assert!(
        err.contains("azure metadata service") && err.contains("no private IP address"),
        "{err}"
    );
    drop(server);

    let server = edited(&ns, &dir, MULTI_NIC, |tree| {
        tree["metadata/instance"]["network"]["interface"] = serde_json::json!([]);
    });
    let err = detect(&ns, &server, &[]).unwrap_err();
    assert!(err.contains("no network interface"), "{err}");
}

/// `--node-name-from instance-name`: the name the Azure CCM finds the VM by,
/// the VM's name (`compute.name`) for a standalone VM, its computer name
/// for a scale set's VM (uniform or flexible); lowercased, and refused
/// unless a valid node name.
#[test]
fn node_name_from_the_instance_name() {
    let ns = azure_host();
    let server = ns.fake_metadata(MULTI_NIC);
    let named = |server: &Server| flags(&ns, server, "azure", &["--node-name-from", "instance-name"]);
    // The provider ID as the CCM's getLocalInstanceProviderID writes it:
    // subscription and resource group lowercased, the VM's name kept.
    let standalone = "--provider-id=azure:///subscriptions/8d2a9c7e-0000-4c1e-9c5b-1f2e3d4c5b6a/resourceGroups/rg-cluster/providers/Microsoft.Compute/virtualMachines/AKS-Node-VM";
    assert_eq!(
        named(&server).unwrap(),
        format!("--node-ip={V4} {standalone} --hostname-override=aks-node-vm\n")
    );
    // `auto` finds Azure and takes its instance name too.
    assert_eq!(
        flags(&ns, &server, "auto", &["--node-name-from", "instance-name"]).unwrap(),
        format!("--node-ip={V4} {standalone} --hostname-override=aks-node-vm\n")
    );
    drop(server);

    let dir = tempfile::tempdir().unwrap();
    let vmss = |tree: &mut Value| {
        let compute = &mut tree["metadata/instance"]["compute"];
        compute["vmScaleSetName"] = "aks-pool".into();
        compute["name"] = "aks-pool_3".into();
        compute["osProfile"]["computerName"] = "AKS-Pool000003".into();
        compute["resourceId"] = "/subscriptions/8D2A9C7E-0000-4C1E-9C5B-1F2E3D4C5B6A/resourceGroups/MC_Cluster/providers/Microsoft.Compute/virtualMachineScaleSets/aks-pool/virtualMachines/3".into();
    };
    let server = edited(&ns, &dir, MULTI_NIC, vmss);
    assert_eq!(
        named(&server).unwrap(),
        format!(
            "--node-ip={V4} --provider-id=azure:///subscriptions/8d2a9c7e-0000-4c1e-9c5b-1f2e3d4c5b6a/resourceGroups/mc_cluster/providers/Microsoft.Compute/virtualMachineScaleSets/aks-pool/virtualMachines/3 --hostname-override=aks-pool000003\n"
        )
    );
    let json = detect(&ns, &server, &[]).unwrap();
    assert_eq!(cloud_addresses(&json)[0], "Hostname aks-pool000003");
    drop(server);

    let server = edited(&ns, &dir, MULTI_NIC, |tree| {
        vmss(tree);
        tree["metadata/instance"]["compute"]["osProfile"]["computerName"] = "".into();
    });
    let err = named(&server).unwrap_err();
    assert!(
        err.contains("--node-name-from instance-name: the azure source has no instance name"),
        "{err}"
    );
    drop(server);

    let hostile = "aks-node --v=10";
    let server = edited(&ns, &dir, MULTI_NIC, |tree| {
        tree["metadata/instance"]["compute"]["name"] = hostile.into();
    });
    let err = named(&server).unwrap_err();
    assert!(
        err.contains(&format!(
            "--node-name-from instance-name: the azure instance name {hostile:?} is not a valid Kubernetes node name"
        )),
        "{err}"
    );
}
