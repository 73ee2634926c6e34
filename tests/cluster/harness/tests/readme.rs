//! The README's quick start, run as written, and the offline first results
//! of docs/webhook.md and docs/node-ip-helper.md: every ```sh block after a
//! `<!-- readme-test -->` line runs in bash (`-euo pipefail`) from a scratch
//! directory laid out as the repository's top directory (its `manifests/`),
//! with only the programs' paths substituted: `pv-topology-webhook`,
//! `cloud-credential-provider` and `node-ip-helper` are this build's, first
//! on `PATH`. A ```text block right after such a block is its output: each of
//! its lines must be a line of what the block printed (`…` stands for any
//! text), so neither the commands nor what the README says they print can
//! drift from the programs.
//!
//! No cluster is started: these are the commands a user runs on a laptop.
//! `node-ip-helper write --source auto` asks the metadata services: here
//! `NODE_IP_HELPER_METADATA_ENDPOINT` names a closed loopback port, so that
//! none answers (as on a laptop) and nothing reaches 169.254.169.254.

use std::fs;
use std::net::TcpListener;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::Command;

use cluster_harness::readme::{Block, MARKER, matches, repository_paths, shell_commands, tested_blocks};
use cluster_harness::{workspace_binary, workspace_root};

/// The files whose marked blocks run: the README, and the docs pages whose
/// first results need no cluster.
const DOCUMENTS: [&str; 4] = [
    "README.md",
    "docs/webhook.md",
    "docs/credential-provider.md",
    "docs/node-ip-helper.md",
];

/// A scratch copy of the repository's top directory as the README's
/// commands use it, and a `bin/` of this build's programs.
fn scratch() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a scratch directory");
    let root = workspace_root();
    symlink(root.join("manifests"), dir.path().join("manifests")).expect("link manifests/");
    let bin = dir.path().join(".bin");
    fs::create_dir(&bin).expect("make .bin/");
    for (name, variable) in [
        ("pv-topology-webhook", "PV_TOPOLOGY_WEBHOOK_BIN"),
        ("cloud-credential-provider", "CLOUD_CREDENTIAL_PROVIDER_BIN"),
        ("node-ip-helper", "NODE_IP_HELPER_BIN"),
    ] {
        symlink(workspace_binary(name, variable), bin.join(name)).expect("link a program");
    }
    dir
}

/// A loopback port nothing listens on (connections are refused).
fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free loopback port");
    listener.local_addr().expect("its address").port()
}

fn run(file: &str, block: &Block, dir: &Path) -> String {
    let path = format!(
        "{}:{}",
        dir.join(".bin").display(),
        std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into())
    );
    // A clean environment: no PV_TOPOLOGY_WEBHOOK_*, CLOUD_CREDENTIAL_PROVIDER_*
    // or NODE_IP_HELPER_* of the machine running the tests changes what runs.
    let out = Command::new("bash")
        .args(["-euo", "pipefail", "-c", &block.script])
        .current_dir(dir)
        .env_clear()
        .env("PATH", path)
        .env("HOME", dir)
        .env(
            "NODE_IP_HELPER_METADATA_ENDPOINT",
            format!("http://127.0.0.1:{}/", closed_port()),
        )
        .output()
        .expect("run bash");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{file} line {}: the block failed ({}):\n{}\nstdout:\n{stdout}\nstderr:\n{}",
        block.line,
        out.status,
        block.script,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn the_readme_quick_start_runs_as_written() {
    let root = workspace_root();
    let mut readme_scripts = Vec::new();
    for file in DOCUMENTS {
        let text = fs::read_to_string(root.join(file)).expect("a document");
        let blocks = tested_blocks(&text);
        if file == "README.md" {
            readme_scripts = blocks.iter().map(|b| b.script.clone()).collect();
        }
        for block in &blocks {
            let dir = scratch();
            let stdout = run(file, block, dir.path());
            for expected in block.shown_output.iter().flatten() {
                let expected = expected.trim_end();
                if expected.is_empty() {
                    continue;
                }
                assert!(
                    stdout.lines().any(|line| matches(expected, line.trim_end())),
                    "{file} line {}: the output shown has {expected:?}, the commands printed:\n{stdout}",
                    block.line
                );
            }
        }
    }
    // Each program's first result stays in the README's tested quick start.
    for program in [
        "pv-topology-webhook review",
        "cloud-credential-provider check-config",
        "node-ip-helper write",
    ] {
        assert!(
            readme_scripts.iter().any(|script| script.contains(program)),
            "no {MARKER} block of the README runs `{program}`"
        );
    }
}

/// The README's commands that need a cluster or a node cannot run here;
/// what they name must still exist: each `helm install` is one of
/// docs/webhook.md's (which `helm.rs` runs against the cluster tier as
/// written), and each repository path they name is in the repository.
#[test]
fn the_readme_commands_for_a_cluster_or_a_node_name_what_exists() {
    let root = workspace_root();
    let readme = fs::read_to_string(root.join("README.md")).expect("README.md");
    let webhook_doc = fs::read_to_string(root.join("docs/webhook.md")).expect("docs/webhook.md");
    let documented = shell_commands(&webhook_doc);
    let commands = shell_commands(&readme);
    let helm_installs: Vec<&String> = commands.iter().filter(|c| c.starts_with("helm install ")).collect();
    assert!(
        !helm_installs.is_empty(),
        "the README's quick start shows no helm install"
    );
    for command in helm_installs {
        assert!(
            documented.contains(command),
            "the README's `{command}` is not one of docs/webhook.md's helm installs (tested by helm.rs): {:#?}",
            documented
                .iter()
                .filter(|c| c.starts_with("helm install "))
                .collect::<Vec<_>>()
        );
    }
    for command in &commands {
        for path in repository_paths(command) {
            assert!(
                root.join(path).exists(),
                "the README's `{command}` names {path}, which does not exist"
            );
        }
    }
}
