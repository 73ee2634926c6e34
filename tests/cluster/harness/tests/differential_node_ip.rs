//! node-ip-helper reads `--node-ip` as kubelet does: on every value of
//! tests/data/node-ip-helper/odd-node-ip-values.json (the table of
//! node-ip-helper's unit test), our port (`ccm::parse_node_ip_argument`,
//! `ccm::parse_node_ip_annotation`) and kubelet's own code
//! (component-helpers `ParseNodeIPArgument` and `ParseNodeIPAnnotation` on
//! k8s.io/utils `ParseIPSloppy`, run by `kubelet-nodeip`) give the same
//! addresses (as Go's `ip.String()`), the same ignored entries and the same
//! errors.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::IpAddr;
use std::process::{Command, Stdio};

use cluster_harness::{assert_disagreements, cluster_bin, workspace_root};
use node_ip_helper::ccm::{self, NodeIpError};
use serde::Deserialize;

#[derive(Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
struct Parsed {
    ips: Vec<String>,
    ignored: Vec<String>,
    error: String,
}

#[derive(Deserialize)]
struct KubeletVerdict {
    value: String,
    argument: Parsed,
    annotation: Parsed,
}

fn table_values() -> Vec<String> {
    let path = workspace_root().join("tests/data/node-ip-helper/odd-node-ip-values.json");
    let table: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    table["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|case| case["node_ip"].as_str().unwrap().to_owned())
        .collect()
}

/// Kubelet's verdicts on `values`, in order.
fn kubelet(values: &[String]) -> Vec<KubeletVerdict> {
    let mut child = Command::new(cluster_bin("kubelet-nodeip"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let input = serde_json::to_vec(values).unwrap();
    child.stdin.take().unwrap().write_all(&input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "kubelet-nodeip failed: {}", out.status);
    let verdicts: Vec<KubeletVerdict> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(verdicts.len(), values.len());
    verdicts
}

/// Our result in the program's terms. kubelet's messages are ours, except
/// that it quotes the unparsable entry with Go's `%q`: compared up to it.
fn ours(result: Result<(Vec<IpAddr>, Vec<String>), NodeIpError>) -> Parsed {
    match result {
        Ok((ips, ignored)) => Parsed {
            ips: ips.iter().map(IpAddr::to_string).collect(),
            ignored,
            error: String::new(),
        },
        Err(NodeIpError::Unparsable(_)) => Parsed {
            error: "could not parse".into(),
            ..Parsed::default()
        },
        Err(other) => Parsed {
            error: other.to_string(),
            ..Parsed::default()
        },
    }
}

/// kubelet's result made comparable: the unparsable entry left out of the
/// message, and the ignored entries (which it also returns with an error)
/// kept only beside a result.
fn comparable(mut kubelet: Parsed) -> Parsed {
    if kubelet.error.starts_with("could not parse ") {
        kubelet.error = "could not parse".into();
    }
    if !kubelet.error.is_empty() {
        kubelet.ignored.clear();
    }
    kubelet
}

#[test]
fn node_ip_parsing_agrees_with_kubelet() {
    let values = table_values();
    let mut found: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for verdict in kubelet(&values) {
        let value = &verdict.value;
        let argument = ours(ccm::parse_node_ip_argument(value));
        let annotation = ours(ccm::parse_node_ip_annotation(value).map(|ips| (ips, Vec::new())));
        for (what, ours, theirs) in [
            ("argument", argument, comparable(verdict.argument)),
            ("annotation", annotation, comparable(verdict.annotation)),
        ] {
            if ours != theirs {
                found
                    .entry(format!("{what} {value:?}"))
                    .or_default()
                    .push(format!("ours {ours:?}, kubelet {theirs:?}"));
            }
        }
    }
    eprintln!("{} --node-ip values compared", values.len());
    assert_disagreements("node-ip", &found, true);
}
