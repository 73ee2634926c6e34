//! `detect` and `write` from the host's own state, in real network
//! namespaces (`ip netns`, veth pairs, routes with metrics). Needs root.

mod common;

use common::Netns;

#[test]
#[ignore = "needs root and iproute2: a network namespace (cargo test -- --ignored)"]
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
#[ignore = "needs root and iproute2: a network namespace (cargo test -- --ignored)"]
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
#[ignore = "needs root and iproute2: a network namespace (cargo test -- --ignored)"]
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
#[ignore = "needs root and iproute2: a network namespace (cargo test -- --ignored)"]
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
#[ignore = "needs root and iproute2: a network namespace (cargo test -- --ignored)"]
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
#[ignore = "needs root and iproute2: a network namespace (cargo test -- --ignored)"]
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
#[ignore = "needs root and iproute2: a network namespace (cargo test -- --ignored)"]
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
#[ignore = "needs root and iproute2: a network namespace (cargo test -- --ignored)"]
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
#[ignore = "needs root and iproute2: a network namespace (cargo test -- --ignored)"]
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
