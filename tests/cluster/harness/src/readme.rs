//! Reading the README and the docs as `tests/readme.rs` runs them: the
//! ```sh blocks marked `<!-- readme-test -->`, the output shown after them,
//! every shell command of a page, and the here-documents its commands write
//! (the quick start's `pv.yaml`, which `tests/webhook.rs` creates in the
//! cluster).

/// The line that marks the next ```sh block as run by `tests/readme.rs`.
pub const MARKER: &str = "<!-- readme-test -->";

/// One tested block: its commands, the output the document shows (if any),
/// and the line the block starts on (for messages).
#[derive(Debug, PartialEq)]
pub struct Block {
    pub line: usize,
    pub script: String,
    pub shown_output: Option<Vec<String>>,
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
pub fn tested_blocks(markdown: &str) -> Vec<Block> {
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
pub fn matches(pattern: &str, line: &str) -> bool {
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
pub fn shell_commands(markdown: &str) -> Vec<String> {
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
pub fn repository_paths(command: &str) -> Vec<&str> {
    command
        .split_whitespace()
        .filter(|word| ["manifests/", "charts/"].iter().any(|top| word.starts_with(top)))
        .collect()
}

/// The text a shell script's `cat > FILE <<'TAG'` here-document writes to
/// `file`: the lines up to the one holding only `TAG`.
pub fn here_document(script: &str, file: &str) -> Option<String> {
    let mut lines = script.lines();
    let tag = lines.by_ref().find_map(|line| {
        let rest = line.trim().strip_prefix("cat > ")?.strip_prefix(file)?.trim_start();
        let tag = rest.strip_prefix("<<")?.trim();
        Some(tag.trim_matches('\'').to_owned())
    })?;
    let mut text = String::new();
    for line in lines {
        if line == tag {
            return Some(text);
        }
        text.push_str(line);
        text.push('\n');
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn here_documents_are_read_up_to_their_tag() {
        let script = "echo a\ncat > pv.yaml <<'YAML'\nkind: PersistentVolume\n  name: x\nYAML\nnext\n";
        assert_eq!(
            here_document(script, "pv.yaml").as_deref(),
            Some("kind: PersistentVolume\n  name: x\n")
        );
        assert_eq!(here_document(script, "other.yaml"), None);
        assert_eq!(here_document("cat > pv.yaml <<EOF\nnever closed\n", "pv.yaml"), None);
    }

    #[test]
    #[should_panic(expected = "is not followed by a ```sh block")]
    fn a_marker_without_its_block_is_an_error() {
        tested_blocks("<!-- readme-test -->\n```console\n$ true\n```\n");
    }
}
