//! The kubelet drop-in (manifests/node-ip-helper/20-node-ip-helper.conf):
//! kubelet's command line as systemd builds it from the drop-in's
//! `ExecStart` and the environment file, following systemd.service(5),
//! "Command lines": the line is split into words (quotes group), a word
//! that is exactly `$NAME` becomes the value split at whitespace, and
//! `${NAME}` becomes the exact value, whitespace included, inside one word.
//! Whatever our variables hold, they must stay inside their own flag.

mod systemd;

use std::collections::HashMap;

use systemd::{environment_file, expand};

fn drop_in() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../manifests/node-ip-helper/20-node-ip-helper.conf"
    ))
    .unwrap()
}

/// Every kubelet command line the drop-in ships: the active `ExecStart`
/// and the commented alternative.
fn exec_starts(unit: &str) -> Vec<String> {
    unit.lines()
        .map(|line| line.trim_start_matches('#').trim())
        .filter_map(|line| line.strip_prefix("ExecStart="))
        .filter(|command| !command.is_empty())
        .map(str::to_owned)
        .collect()
}

#[test]
fn values_with_spaces_stay_inside_their_flag() {
    let unit = drop_in();
    let commands = exec_starts(&unit);
    assert!(!commands.is_empty(), "no ExecStart in the drop-in");
    let hostile = "x --authorization-mode=AlwaysAllow --v=10";
    let mut env = environment_file(&format!(
        "NODE_IP_HELPER_NODE_IP='10.0.0.5 --v=10'\n\
         NODE_IP_HELPER_NODE_IPS='10.0.0.5 --v=10'\n\
         NODE_IP_HELPER_HOSTNAME_OVERRIDE='{hostile}'\n\
         NODE_IP_HELPER_KUBELET_ARGS='--node-ip=10.0.0.5 --hostname-override={hostile}'\n"
    ));
    // kubeadm's own variables (10-kubeadm.conf) hold several flags each.
    env.insert(
        "KUBELET_KUBECONFIG_ARGS".into(),
        "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"
            .into(),
    );
    env.insert(
        "KUBELET_CONFIG_ARGS".into(),
        "--config=/var/lib/kubelet/config.yaml".into(),
    );
    for command in &commands {
        let argv = expand(command, &env);
        assert_eq!(argv[0], "/usr/bin/kubelet", "{command}");
        assert!(
            argv.contains(&"--kubeconfig=/etc/kubernetes/kubelet.conf".to_owned()),
            "kubeadm's variables are still split into flags: {argv:?}"
        );
        assert!(
            argv.contains(&"--node-ip=10.0.0.5 --v=10".to_owned()),
            "{command}: {argv:?}"
        );
        for smuggled in ["--authorization-mode=AlwaysAllow", "--v=10"] {
            assert!(!argv.contains(&smuggled.to_owned()), "{command}: {argv:?}");
        }
        if command.contains("hostname-override") {
            assert!(
                argv.contains(&format!("--hostname-override={hostile}")),
                "{command}: {argv:?}"
            );
        }
    }
    assert!(
        commands
            .iter()
            .any(|c| c.contains("--hostname-override=${NODE_IP_HELPER_HOSTNAME_OVERRIDE}")),
        "the drop-in shows how to pass the node name"
    );
}

/// The active line never passes an empty `--hostname-override=`, which
/// would undo kubeadm's own (`nodeRegistration.name`): the node name goes
/// only on the commented alternative, for `--node-name-from`.
#[test]
fn the_active_line_leaves_the_node_name_alone() {
    let unit = drop_in();
    let active: Vec<&str> = unit
        .lines()
        .filter_map(|line| line.strip_prefix("ExecStart="))
        .filter(|command| !command.is_empty())
        .collect();
    assert_eq!(active.len(), 1, "{active:?}");
    assert!(
        active[0].ends_with("--node-ip=${NODE_IP_HELPER_NODE_IPS} $NODE_IP_HELPER_PROVIDER_ID_ARG"),
        "{}",
        active[0]
    );
}

/// The provider ID reaches kubelet as exactly one `--provider-id=ID`
/// argument, from the env file node-ip-helper writes, on both lines; and as
/// none at all when there is none (no empty `--provider-id=`, which kubelet
/// would take as "no ID" but which would also hide a kubeadm one).
#[test]
fn the_provider_id_is_one_argument_or_none() {
    use node_ip_helper::output::{Detection, OutputFormat};
    use node_ip_helper::source::Origin;
    let unit = drop_in();
    let commands = exec_starts(&unit);
    assert_eq!(commands.len(), 2, "{commands:?}");
    let written = |provider_id: Option<&str>| Detection {
        node_ips: vec!["10.0.0.5".parse().unwrap()],
        hostname: Some("node-a".into()),
        provider_id: provider_id.map(str::to_owned),
        source: Origin::Local,
        addresses: Vec::new(),
        cloud_addresses: None,
        metadata_services: Vec::new(),
    };
    for command in &commands {
        let id = "azure:///subscriptions/8d2a/resourceGroups/myrg/providers/Microsoft.Compute/virtualMachines/Node-A";
        let env = environment_file(&written(Some(id)).render(OutputFormat::Env));
        let argv = expand(command, &env);
        let flags: Vec<&String> = argv.iter().filter(|a| a.starts_with("--provider-id")).collect();
        assert_eq!(flags, [&format!("--provider-id={id}")], "{command}: {argv:?}");
        let env = environment_file(&written(None).render(OutputFormat::Env));
        let argv = expand(command, &env);
        assert!(
            !argv.iter().any(|a| a.contains("provider-id") || a.is_empty()),
            "{command}: {argv:?}"
        );
        assert!(argv.contains(&"--node-ip=10.0.0.5".to_owned()), "{argv:?}");
    }
}

#[test]
fn the_model_splits_as_systemd_documents() {
    let env: HashMap<String, String> = [("A", "1 2"), ("B", "")]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    assert_eq!(
        expand("/bin/x $A ${A} --a=${A} $B \"q r\"", &env),
        ["/bin/x", "1", "2", "1 2", "--a=1 2", "q r"]
    );
}
