//! `detect` and `write` from the host's own state, in real network
//! namespaces (`ip netns`, veth pairs, routes with metrics). Needs root.

mod common;

use common::Netns;

#[test]
fn two_default_routes_lowest_metric_wins() {
    let ns = Netns::new();
    ns.nic("eth0");
    ns.nic("eth1");
    ns.ip("addr add 10.0.2.15/24 dev eth0");
    ns.ip("addr add 192.168.56.10/24 dev eth1");
    // eth0 comes first in every listing, but eth1's route is preferred.
    ns.ip("route add default via 10.0.2.2 dev eth0 metric 200");
    ns.ip("route add default via 192.168.56.1 dev eth1 metric 100");
    assert_eq!(ns.detect(&[]).unwrap(), ["192.168.56.10"]);
    ns.ip("route del default via 192.168.56.1 dev eth1 metric 100");
    ns.ip("route add default via 192.168.56.1 dev eth1 metric 300");
    assert_eq!(ns.detect(&[]).unwrap(), ["10.0.2.15"]);
}

#[test]
fn vpn_and_container_interfaces_are_excluded_by_default() {
    let ns = Netns::new();
    ns.nic("eth0");
    ns.nic("tailscale0");
    ns.nic("docker0");
    ns.ip("addr add 10.0.0.5/24 dev eth0");
    ns.ip("addr add 100.101.102.103/32 dev tailscale0");
    ns.ip("addr add 172.17.0.1/16 dev docker0");
    ns.ip("route add default dev tailscale0 metric 5");
    ns.ip("route add default via 10.0.0.1 dev eth0 metric 100");
    assert_eq!(ns.detect(&[]).unwrap(), ["10.0.0.5"]);
    // Without the default list, the VPN's lower metric wins.
    assert_eq!(ns.detect(&["--no-default-excludes"]).unwrap(), ["100.101.102.103"]);
    // A pattern of one's own adds to the list.
    let err = ns.detect(&["--exclude-interface", "eth*"]).unwrap_err();
    assert!(
        err.contains("interface eth0 matches excluded pattern \"eth*\""),
        "{err}"
    );
    assert!(
        err.contains("100.101.102.103 on tailscale0: interface tailscale0 matches excluded pattern \"tailscale*\""),
        "{err}"
    );
}

#[test]
fn primary_address_before_secondary_and_cidr_filters() {
    let ns = Netns::new();
    ns.nic("eth0");
    ns.ip("addr add 10.0.0.5/24 dev eth0");
    ns.ip("addr add 10.0.0.200/24 dev eth0"); // a VIP: the kernel marks it secondary
    ns.ip("addr add 192.168.7.5/24 dev eth0");
    ns.ip("route add default via 10.0.0.1 dev eth0");
    assert_eq!(ns.detect(&[]).unwrap(), ["10.0.0.5"]);
    assert_eq!(ns.detect(&["--deny-cidr", "10.0.0.5/32"]).unwrap(), ["192.168.7.5"]);
    assert_eq!(ns.detect(&["--allow-cidr", "10.0.0.128/25"]).unwrap(), ["10.0.0.200"]);
    let err = ns.detect(&["--allow-cidr", "172.16.0.0/12"]).unwrap_err();
    assert!(
        err.contains("10.0.0.5 on eth0: outside --allow-cidr 172.16.0.0/12"),
        "{err}"
    );
}

#[test]
fn interface_filter_and_no_default_route() {
    let ns = Netns::new();
    ns.nic("eth0");
    ns.nic("ens5");
    ns.ip("addr add 10.1.0.5/24 dev eth0");
    ns.ip("addr add 10.2.0.5/24 dev ens5");
    // No default route: the first candidate in interface-index order.
    assert_eq!(ns.detect(&[]).unwrap(), ["10.1.0.5"]);
    assert_eq!(ns.detect(&["--interface", "ens*"]).unwrap(), ["10.2.0.5"]);
    let json = ns.helper(&["detect", "--interface", "ens*"]);
    assert!(
        json.stdout
            .contains("no IPv4 default route: first candidate in interface-index order, on ens5"),
        "{}",
        json.stdout
    );
}

#[test]
fn ipv6_only_host_and_dual_stack_both_ways() {
    let ns = Netns::new();
    ns.nic("eth0");
    ns.ip("addr add 2001:db8::5/64 dev eth0 nodad");
    ns.ip("-6 route add default via 2001:db8::1 dev eth0");
    assert_eq!(ns.detect(&["--ip-family", "ipv6"]).unwrap(), ["2001:db8::5"]);
    let err = ns.detect(&[]).unwrap_err();
    assert!(err.contains("no IPv4 address qualifies"), "{err}");
    let err = ns.detect(&["--ip-family", "dual"]).unwrap_err();
    assert!(
        err.contains("no IPv4 address qualifies (found only 2001:db8::5 on eth0)"),
        "{err}"
    );

    ns.ip("addr add 10.0.0.5/24 dev eth0");
    ns.ip("route add default via 10.0.0.1 dev eth0");
    assert_eq!(
        ns.detect(&["--ip-family", "dual"]).unwrap(),
        ["10.0.0.5", "2001:db8::5"]
    );
    assert_eq!(
        ns.detect(&["--ip-family", "dual-ipv6-primary"]).unwrap(),
        ["2001:db8::5", "10.0.0.5"]
    );
    let flags = ns.helper(&["detect", "--ip-family", "dual", "--output", "flags"]);
    assert_eq!(flags.stdout, "--node-ip=10.0.0.5,2001:db8::5\n");
}

#[test]
fn unusable_ipv6_states_and_down_interfaces_are_set_aside() {
    let ns = Netns::new();
    ns.nic("eth0");
    ns.nic("eth1");
    // Slow duplicate address detection down so the address stays tentative.
    ns.sysctl("net.ipv6.conf.eth0.dad_transmits=50");
    ns.sysctl("net.ipv6.conf.eth0.accept_dad=1");
    ns.ip("addr add 2001:db8::5/64 dev eth0");
    ns.ip("addr add 2001:db8::9/64 dev eth0 nodad preferred_lft 0");
    // Linux drops IPv6 addresses of a downed link unless told to keep them.
    ns.sysctl("net.ipv6.conf.eth1.keep_addr_on_down=1");
    ns.ip("addr add 2001:db8:1::5/64 dev eth1 nodad");
    ns.ip("link set eth1 down");
    ns.ip("-6 route add default via 2001:db8::1 dev eth0");
    let err = ns.detect(&["--ip-family", "ipv6"]).unwrap_err();
    assert!(err.contains("2001:db8::5 on eth0: IPv6 address is tentative"), "{err}");
    assert!(err.contains("2001:db8::9 on eth0: IPv6 address is deprecated"), "{err}");
    assert!(err.contains("2001:db8:1::5 on eth1: interface eth1 is down"), "{err}");
    assert!(err.contains("fe80::") && err.contains("link-local address"), "{err}");
}

#[test]
fn nothing_qualifying_lists_every_candidate_seen() {
    let ns = Netns::new();
    let out = ns.helper(&["detect"]);
    assert_eq!(out.status, 1);
    assert!(out.stdout.is_empty());
    assert!(
        out.stderr.starts_with("node-ip-helper: no IPv4 address qualifies"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("127.0.0.1 on lo: loopback address"),
        "{}",
        out.stderr
    );
}

#[test]
fn write_is_atomic_changes_only_on_change_and_sticks() {
    let ns = Netns::new();
    ns.nic("eth0");
    ns.nic("eth1");
    ns.ip("addr add 10.0.0.5/24 dev eth0");
    ns.ip("addr add 10.9.0.5/24 dev eth1");
    ns.ip("route add default via 10.0.0.1 dev eth0 metric 100");
    let dir = tempfile::tempdir().unwrap();
    let env_file = dir.path().join("run/kubelet.env");
    let sticky = dir.path().join("lib/first-choice.json");
    let env = env_file.to_str().unwrap();
    let sticky_path = sticky.to_str().unwrap();
    let write = |extra: &[&str]| {
        let mut args = vec!["write", "--env-file", env];
        args.extend(extra);
        ns.helper(&args)
    };

    let out = write(&["--sticky", sticky_path]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(out.stderr.contains("wrote"), "{}", out.stderr);
    let content = std::fs::read_to_string(&env_file).unwrap();
    assert!(
        content.contains("NODE_IP_HELPER_KUBELET_ARGS='--node-ip=10.0.0.5'"),
        "{content}"
    );
    let written_at = std::fs::metadata(&env_file).unwrap().modified().unwrap();

    let out = write(&["--sticky", sticky_path]);
    assert!(out.stderr.contains("kept"), "{}", out.stderr);
    assert_eq!(std::fs::metadata(&env_file).unwrap().modified().unwrap(), written_at);

    // The route moves to eth1: the sticky choice stays while it is usable...
    ns.ip("route add default via 10.9.0.1 dev eth1 metric 50");
    write(&["--sticky", sticky_path]);
    assert!(
        std::fs::read_to_string(&env_file)
            .unwrap()
            .contains("--node-ip=10.0.0.5'")
    );
    // ...a fresh choice follows the route...
    write(&[]);
    assert!(
        std::fs::read_to_string(&env_file)
            .unwrap()
            .contains("--node-ip=10.9.0.5'")
    );
    // ...and once the sticky address is gone, the record is replaced.
    ns.ip("addr del 10.0.0.5/24 dev eth0");
    write(&["--sticky", sticky_path]);
    assert!(
        std::fs::read_to_string(&env_file)
            .unwrap()
            .contains("--node-ip=10.9.0.5'")
    );
    assert!(std::fs::read_to_string(&sticky).unwrap().contains("10.9.0.5"));

    let leftovers: Vec<_> = std::fs::read_dir(env_file.parent().unwrap()).unwrap().collect();
    assert_eq!(leftovers.len(), 1, "no temporary files left");
}

/// `write` replaces only a regular file (or creates a missing one): never a
/// device (as /dev/null once was), a FIFO (which blocked for ever) or a
/// dangling link, and it fails before writing anything. A link to a regular
/// file is followed: the file is replaced, the link kept.
#[test]
fn write_refuses_what_is_not_a_regular_file_without_blocking() {
    use std::os::unix::fs::{FileTypeExt, symlink};
    let ns = Netns::new();
    ns.nic("eth0");
    ns.ip("addr add 10.0.0.5/24 dev eth0");
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    common::mkfifo(&fifo);
    // A private node for the null device: a regression replaces this, not /dev/null.
    let null = dir.path().join("null");
    common::sh(&format!("mknod {} c 1 3", null.display()));
    let to_null = dir.path().join("to-null");
    symlink(&null, &to_null).unwrap();
    let dangling = dir.path().join("dangling");
    symlink(dir.path().join("missing"), &dangling).unwrap();
    let env = dir.path().join("kubelet.env");
    let env_path = env.to_str().unwrap();
    for (flag, bad, kind) in [
        ("--env-file", &fifo, "is a FIFO"),
        ("--env-file", &null, "is a character device"),
        ("--env-file", &to_null, "is a character device"),
        ("--env-file", &dangling, "symbolic link to a missing file"),
        ("--sticky", &fifo, "is a FIFO"),
        ("--sticky", &to_null, "is a character device"),
        ("--sticky", &dangling, "symbolic link to a missing file"),
    ] {
        let bad_path = bad.to_str().unwrap();
        let args: Vec<&str> = if flag == "--env-file" {
            vec!["write", "--env-file", bad_path]
        } else {
            vec!["write", "--env-file", env_path, "--sticky", bad_path]
        };
        let out = ns.helper(&args);
        assert_eq!(out.status, 1, "{flag} {bad_path}: {}", out.stderr);
        assert!(
            out.stderr.contains(&format!("{flag} {bad_path}")) && out.stderr.contains(kind),
            "{flag} {bad_path}: {}",
            out.stderr
        );
        assert!(!env.exists(), "nothing is written when {flag} is refused");
    }
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
    assert!(std::fs::symlink_metadata(&null).unwrap().file_type().is_char_device());
    for link in [&to_null, &dangling] {
        assert!(std::fs::symlink_metadata(link).unwrap().file_type().is_symlink());
    }

    let real = dir.path().join("real.env");
    std::fs::write(&real, "# old\n").unwrap();
    let link = dir.path().join("link.env");
    symlink(&real, &link).unwrap();
    let out = ns.helper(&["write", "--env-file", link.to_str().unwrap()]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    assert!(std::fs::read_to_string(&real).unwrap().contains("--node-ip=10.0.0.5"));
}

/// The lines of `ip -6 addr show dev DEV` that hold an address, once `done`
/// says they are settled (duplicate address detection takes a second).
fn settled_ipv6(ns: &Netns, dev: &str, done: impl Fn(&[String]) -> bool) -> Vec<String> {
    for _ in 0..100 {
        let lines: Vec<String> = ns
            .ip_output(&format!("-6 addr show dev {dev}"))
            .lines()
            .filter(|line| line.trim_start().starts_with("inet6 "))
            .map(|line| line.trim().to_owned())
            .collect();
        if done(&lines) {
            return lines;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("the addresses of {dev} did not settle");
}

/// An address whose duplicate address detection failed (the kernel flags it
/// `dadfailed`, and it stays `tentative`) is never chosen, and says why; a
/// temporary (privacy extension) address is passed over for the stable one
/// on the same interface, though the kernel lists it first.
#[test]
fn failed_dad_and_temporary_ipv6_addresses_are_not_chosen() {
    let ns = Netns::new();
    ns.nic("eth0"); // its peer, eth0p, is on the same link
    ns.sysctl("net.ipv6.conf.eth0.accept_dad=1");
    ns.sysctl("net.ipv6.conf.eth0.dad_transmits=1");
    ns.sysctl("net.ipv6.conf.eth0.use_tempaddr=2");
    // eth0p holds 2001:db8:9::7 already: eth0's detection for it fails.
    ns.ip("-6 addr add 2001:db8:9::7/64 dev eth0p nodad");
    ns.ip("-6 addr add 2001:db8:9::7/64 dev eth0");
    // The kernel derives a temporary address from this one's prefix.
    ns.ip("-6 addr add 2001:db8::5/64 dev eth0 mngtmpaddr nodad");
    ns.ip("-6 route add default via 2001:db8::1 dev eth0");
    let lines = settled_ipv6(&ns, "eth0", |lines| {
        lines
            .iter()
            .any(|l| l.contains("2001:db8:9::7/") && l.contains("dadfailed"))
            && lines
                .iter()
                .any(|l| l.contains(" temporary ") && !l.contains("tentative"))
    });
    let position = |needle: &str| {
        lines
            .iter()
            .position(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("{needle} in {lines:?}"))
    };
    assert!(
        position(" temporary ") < position("2001:db8::5/"),
        "the kernel lists the temporary address first: {lines:?}"
    );

    let out = ns.helper(&["detect", "--ip-family", "ipv6"]);
    let json: serde_json::Value = serde_json::from_str(&out.stdout).expect("JSON output");
    assert_eq!(json["nodeIPs"], serde_json::json!(["2001:db8::5"]), "{}", out.stderr);
    let reason = json["addresses"][0]["reason"].as_str().expect("a reason");
    assert!(reason.starts_with("primary address on eth0"), "{reason}");
    let err = ns
        .detect(&[
            "--ip-family",
            "ipv6",
            "--allow-cidr",
            "2001:db8:9::/64",
            "--interface",
            "eth0",
        ])
        .expect_err("only the failed address is allowed");
    assert!(
        err.contains("2001:db8:9::7 on eth0: IPv6 duplicate address detection failed"),
        "{err}"
    );
}

/// Each list flag's environment variable (as in /etc/default/node-ip-helper)
/// is split at commas, like the flag given once per value.
#[test]
fn list_variables_in_the_environment_split_at_commas() {
    let ns = Netns::new();
    for (i, (nic, ip)) in [("eth0", "10.0.0.5"), ("eth1", "10.1.0.5"), ("ens5", "10.2.0.5")]
        .into_iter()
        .enumerate()
    {
        ns.nic(nic);
        ns.ip(&format!("addr add {ip}/24 dev {nic}"));
        let gateway = ip.replace(".5", ".1");
        ns.ip(&format!(
            "route add default via {gateway} dev {nic} metric {}",
            100 * (i + 1)
        ));
    }
    let detect = |name: &str, value: &str| {
        let out = ns.helper_env(&[(name, value)], &["detect", "--output", "flags"]);
        assert_eq!(out.status, 0, "{name}={value}: {}", out.stderr);
        out.stdout
    };
    assert_eq!(detect("NODE_IP_HELPER_IP_FAMILY", "ipv4"), "--node-ip=10.0.0.5\n");
    for (name, value, chosen) in [
        ("NODE_IP_HELPER_DENY_CIDR", "10.0.0.0/24,10.1.0.0/24", "10.2.0.5"),
        ("NODE_IP_HELPER_ALLOW_CIDR", "192.168.0.0/16,10.1.0.0/24", "10.1.0.5"),
        ("NODE_IP_HELPER_EXCLUDE_INTERFACE", "eth0,eth1", "10.2.0.5"),
        ("NODE_IP_HELPER_INTERFACE", "ens*,eth1", "10.1.0.5"),
    ] {
        assert_eq!(detect(name, value), format!("--node-ip={chosen}\n"), "{name}={value}");
    }
    // A bad entry is refused naming the variable and what is wrong with it.
    let out = ns.helper_env(&[("NODE_IP_HELPER_ALLOW_CIDR", "10.0.0.0/8,10.0.0.0/33")], &["detect"]);
    assert_eq!(out.status, 1, "{}", out.stdout);
    assert!(
        out.stderr.contains("NODE_IP_HELPER_ALLOW_CIDR")
            && out
                .stderr
                .contains("the prefix length 33 is longer than 32, the most for IPv4"),
        "{}",
        out.stderr
    );
}

/// The examples of manifests/node-ip-helper/default.env, uncommented, are
/// variables the binary reads (each named in `write --help`) and do what
/// their comments say: the host's own addresses, both families, only
/// 10.0.0.0/8 and fd00::/8, eth9 left out, the kernel's host name as the
/// node name (the provider ID's two, for a cloud source, in
/// tests/metadata.rs).
#[test]
fn the_default_env_examples_are_read_and_applied() {
    let text = std::fs::read_to_string(common::workspace_root().join("manifests/node-ip-helper/default.env"))
        .expect("default.env");
    let examples: Vec<(String, String)> = text
        .lines()
        .filter_map(|line| line.strip_prefix('#')?.split_once('='))
        .filter(|(name, _)| name.starts_with("NODE_IP_HELPER_"))
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .collect();
    let names: Vec<&str> = examples.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        names,
        [
            "NODE_IP_HELPER_SOURCE",
            "NODE_IP_HELPER_IP_FAMILY",
            "NODE_IP_HELPER_ALLOW_CIDR",
            "NODE_IP_HELPER_EXCLUDE_INTERFACE",
            "NODE_IP_HELPER_NODE_NAME_FROM",
            "NODE_IP_HELPER_NO_PROVIDER_ID",
            "NODE_IP_HELPER_OPENSTACK_REGION"
        ]
    );
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_node-ip-helper"))
        .args(["write", "--help"])
        .output()
        .expect("write --help");
    let help = String::from_utf8_lossy(&help.stdout);
    for name in &names {
        assert!(help.contains(&format!("[env: {name}")), "{name} is not read:\n{help}");
    }

    let ns = Netns::new();
    for (nic, v4, v6, metric) in [
        ("eth0", "10.0.0.5", "fd00:1::5", 100),
        ("eth1", "192.168.1.5", "2001:db8:1::5", 70),
        ("eth9", "10.9.0.5", "fd00:9::5", 50),
    ] {
        ns.nic(nic);
        ns.ip(&format!("addr add {v4}/24 dev {nic}"));
        ns.ip(&format!("addr add {v6}/64 dev {nic} nodad"));
        let (gw4, gw6) = (v4.replace(".5", ".1"), v6.replace("::5", "::1"));
        ns.ip(&format!("route add default via {gw4} dev {nic} metric {metric}"));
        ns.ip(&format!("-6 route add default via {gw6} dev {nic} metric {metric}"));
    }
    // The kernel's host name, in a UTS namespace of the run's own.
    let mut command = std::process::Command::new("ip");
    command
        .args(["netns", "exec", &ns.name, "unshare", "--uts", "sh", "-c"])
        .arg(r#"hostname Node-From-Env && exec "$@""#)
        .arg("sh")
        .arg(env!("CARGO_BIN_EXE_node-ip-helper"))
        .args(["detect", "--output", "flags"]);
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("NODE_IP_HELPER_") {
            command.env_remove(name);
        }
    }
    let out = command.envs(examples).output().expect("run node-ip-helper");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        stdout,
        "--node-ip=10.0.0.5,fd00:1::5 --hostname-override=node-from-env\n"
    );
}

/// The boolean flags' variables take the spellings an EnvironmentFile uses
/// (`=1`, `=yes`, `=on`, `=true` and `=0`, `=no`, `=off`, `=false`, in any
/// case); the flag alone still sets it.
#[test]
fn boolean_variables_take_the_usual_spellings() {
    let ns = Netns::new();
    ns.nic("eth0");
    ns.nic("tailscale0");
    ns.ip("addr add 10.0.0.5/24 dev eth0");
    ns.ip("addr add 100.101.102.103/32 dev tailscale0");
    ns.ip("route add default dev tailscale0 metric 5");
    ns.ip("route add default via 10.0.0.1 dev eth0 metric 100");
    let chosen = |value: &str| {
        let out = ns.helper_env(
            &[("NODE_IP_HELPER_NO_DEFAULT_EXCLUDES", value)],
            &["detect", "--output", "flags"],
        );
        assert_eq!(out.status, 0, "{value:?}: {}", out.stderr);
        out.stdout
    };
    for yes in ["1", "yes", "true", "on", "Y", "TRUE"] {
        assert_eq!(chosen(yes), "--node-ip=100.101.102.103\n", "{yes:?}");
    }
    for no in ["0", "no", "false", "off", "N", ""] {
        assert_eq!(chosen(no), "--node-ip=10.0.0.5\n", "{no:?}");
    }
    assert_eq!(ns.detect(&["--no-default-excludes"]).unwrap(), ["100.101.102.103"]);
}

/// The `kubelet.env` README.md and docs/node-ip-helper.md show after their
/// `write … --env-file kubelet.env` is the whole file, line for line (`…`
/// for the addresses), as `write` writes it on a host with one address.
#[test]
fn the_env_file_the_docs_show_is_the_whole_file() {
    let ns = Netns::new();
    ns.nic("eth0");
    ns.ip("addr add 10.0.0.5/24 dev eth0");
    ns.ip("route add default via 10.0.0.1 dev eth0");
    let dir = tempfile::tempdir().expect("temporary directory");
    let env_file = dir.path().join("kubelet.env");
    let out = ns.helper(&["write", "--source", "local", "--env-file", env_file.to_str().unwrap()]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let written = std::fs::read_to_string(&env_file).expect("the env file");
    let written: Vec<&str> = written.lines().collect();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for document in ["README.md", "docs/node-ip-helper.md"] {
        let text = std::fs::read_to_string(root.join(document)).expect("the document");
        let shown: Vec<String> = cluster_harness::readme::tested_blocks(&text)
            .into_iter()
            .filter(|block| block.script.contains("cat kubelet.env"))
            .flat_map(|block| block.shown_output.expect("the output shown"))
            .collect();
        assert_eq!(
            shown.len(),
            written.len(),
            "{document} shows {shown:#?}, written: {written:#?}"
        );
        for (shown, written) in shown.iter().zip(&written) {
            assert!(
                cluster_harness::readme::matches(shown, written),
                "{document}: {shown:?} is not {written:?}"
            );
        }
    }
}
