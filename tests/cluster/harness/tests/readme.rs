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

use cluster_harness::{workspace_binary, workspace_root};

const MARKER: &str = "<!-- readme-test -->";

/// The files whose marked blocks run: the README, and the docs pages whose
/// first results need no cluster.
const DOCUMENTS: [&str; 4] = [
    "README.md",
    "docs/webhook.md",
    "docs/credential-provider.md",
    "docs/node-ip-helper.md",
];

/// One tested block: its commands, the output the document shows (if any),
/// and the line the block starts on (for messages).
#[derive(Debug, PartialEq)]
struct Block {
    line: usize,
    script: String,
    shown_output: Option<Vec<String>>,
}

/// The fenced block starting at `lines[at]` (its opening fence) if its
/// info string is `info`: its body and the index after its closing fence.
fn fenced(lines: &[&str], at: usize, info: &str) -> Option<(Vec<String>, usize)> {
    if lines.get(at)?.trim_end() != format!("```{info}") {
        return None;
    }
    let body: Vec<String> = lines[at + 1..]
        .iter()
        .take_while(|l| l.trim_end() != "```")
        .map(|l| l.to_string())
        .collect();
    let close = at + 1 + body.len();
    assert!(
        close < lines.len(),
        "line {}: a ```{info} block is never closed",
        at + 1
    );
    Some((body, close + 1))
}

fn skip_blank(lines: &[&str], mut at: usize) -> usize {
    while lines.get(at).is_some_and(|l| l.trim().is_empty()) {
        at += 1;
    }
    at
}

/// The marked blocks of a Markdown text. A marker not followed by a ```sh
/// block is an error: a test that silently tests nothing could not fail.
fn tested_blocks(markdown: &str) -> Vec<Block> {
    let lines: Vec<&str> = markdown.lines().collect();
    let mut blocks = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        if line.trim() != MARKER {
            continue;
        }
        let start = skip_blank(&lines, index + 1);
        let Some((body, after)) = fenced(&lines, start, "sh") else {
            panic!("line {}: {MARKER} is not followed by a ```sh block", index + 1);
        };
        let shown_output = fenced(&lines, skip_blank(&lines, after), "text").map(|(text, _)| text);
        blocks.push(Block {
            line: start + 1,
            script: body.join("\n") + "\n",
            shown_output,
        });
    }
    blocks
}

/// Does `line` match `pattern`, where `…` stands for any text?
fn matches(pattern: &str, line: &str) -> bool {
    let parts: Vec<&str> = pattern.split('…').collect();
    let (first, rest) = parts.split_first().expect("split gives one part at least");
    let Some(mut remaining) = line.strip_prefix(first) else {
        return false;
    };
    for (n, part) in rest.iter().enumerate() {
        if n + 1 == rest.len() {
            return remaining.ends_with(part);
        }
        match remaining.find(part) {
            Some(at) => remaining = &remaining[at + part.len()..],
            None => return false,
        }
    }
    remaining.is_empty()
}

/// Every ```sh block of a Markdown text, marked or not, as shell lines
/// with backslash continuations joined.
fn shell_commands(markdown: &str) -> Vec<String> {
    let lines: Vec<&str> = markdown.lines().collect();
    let mut commands = Vec::new();
    let mut at = 0;
    while at < lines.len() {
        let Some((body, after)) = fenced(&lines, at, "sh") else {
            at += 1;
            continue;
        };
        let mut command = String::new();
        for line in body {
            let line = line.trim();
            match line.strip_suffix('\\') {
                Some(head) => command.push_str(head.trim_end()),
                None => {
                    command.push_str(line);
                    commands.push(std::mem::take(&mut command));
                    continue;
                }
            }
            command.push(' ');
        }
        at = after;
    }
    commands
}

/// The repository paths a command names (words starting with one of the
/// repository's top directories that ship to users).
fn repository_paths(command: &str) -> Vec<&str> {
    command
        .split_whitespace()
        .filter(|word| ["manifests/", "charts/"].iter().any(|top| word.starts_with(top)))
        .collect()
}

#[test]
fn the_markers_and_the_shown_output_are_read_as_documented() {
    let text = "intro\n<!-- readme-test -->\n```sh\necho a\necho b\n```\n\n```text\na\n```\n\
                ```sh\nnot tested\n```\n<!-- readme-test -->\n\n```sh\ntrue\n```\nafter\n";
    let blocks = tested_blocks(text);
    assert_eq!(
        blocks,
        vec![
            Block {
                line: 3,
                script: "echo a\necho b\n".into(),
                shown_output: Some(vec!["a".into()])
            },
            Block {
                line: 16,
                script: "true\n".into(),
                shown_output: None
            },
        ]
    );
    assert!(matches("zone: europe-west1-b", "zone: europe-west1-b"));
    assert!(!matches("zone: europe-west1-b", "zone: europe-west1-c"));
    assert!(!matches("zone", "zone: europe-west1-b"), "a whole line, not a prefix");
    assert!(matches(
        "NODE_IP_HELPER_NODE_IPS='…'",
        "NODE_IP_HELPER_NODE_IPS='192.0.2.2'"
    ));
    assert!(!matches(
        "NODE_IP_HELPER_NODE_IPS='…'",
        "NODE_IP_HELPER_NODE_IP='192.0.2.2'"
    ));
    assert!(matches("a … b … c", "a 1 b 2 c"));
    assert!(!matches("a … b … c", "a 1 c 2 b"));
}

#[test]
fn shell_commands_join_continuations() {
    let text =
        "```sh\nhelm install a b \\\n  --set x=1 \\\n  -f c.yaml\n# a comment\n```\n```text\nnot a command\n```\n";
    assert_eq!(
        shell_commands(text),
        vec![
            "helm install a b --set x=1 -f c.yaml".to_string(),
            "# a comment".to_string()
        ]
    );
    assert_eq!(
        repository_paths("install -m 0644 manifests/a.yaml /etc/a.yaml -f charts/x/ci/v.yaml"),
        vec!["manifests/a.yaml", "charts/x/ci/v.yaml"]
    );
}

#[test]
#[should_panic(expected = "is not followed by a ```sh block")]
fn a_marker_without_its_block_is_an_error() {
    tested_blocks("<!-- readme-test -->\n```console\n$ true\n```\n");
}

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
