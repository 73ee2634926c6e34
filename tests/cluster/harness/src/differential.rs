//! Comparing our answers with kubelet's: the list of disagreements already
//! reported, and Go error messages reduced to their class.

use std::fs;

use crate::workspace_root;

/// Disagreements between our code and kubelet's already reported, from
/// `tests/data/cluster/known-disagreements.txt`: lines `<kind> <key>`
/// (`#` comments). A differential test passes when what it finds equals
/// this list for its kind, so a new disagreement fails the test and so does
/// a fixed one (remove its line).
pub fn known_disagreements(kind: &str) -> std::collections::BTreeSet<String> {
    let path = workspace_root().join("tests/data/cluster/known-disagreements.txt");
    let text = fs::read_to_string(&path).unwrap_or_default();
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| l.split_once(' '))
        .filter(|(k, _)| *k == kind)
        .map(|(_, key)| key.trim().to_string())
        .collect()
}

/// Compares what a differential test found (key → examples) with the known
/// list; panics on a disagreement not listed, and, if `exhaustive` (the
/// corpus is fixed, not a random sample), on a listed one not found. Up to
/// five examples of each key are printed.
pub fn assert_disagreements(kind: &str, found: &std::collections::BTreeMap<String, Vec<String>>, exhaustive: bool) {
    let known = known_disagreements(kind);
    let examples = |list: &[String]| {
        let mut text = String::new();
        for e in list.iter().take(5) {
            text.push_str(&format!("    {e}\n"));
        }
        if list.len() > 5 {
            text.push_str(&format!("    ... and {} more\n", list.len() - 5));
        }
        text
    };
    for (key, list) in found.iter().filter(|(k, _)| known.contains(*k)) {
        eprintln!(
            "known disagreement: {kind} {key} ({} cases)\n{}",
            list.len(),
            examples(list)
        );
    }
    let new: Vec<_> = found.iter().filter(|(k, _)| !known.contains(*k)).collect();
    let mut gone: Vec<_> = known.iter().filter(|k| !found.contains_key(*k)).collect();
    if !exhaustive {
        for key in gone.drain(..) {
            eprintln!("note: listed disagreement not met by this sample: {kind} {key}");
        }
    }
    if new.is_empty() && gone.is_empty() {
        return;
    }
    let mut msg = String::new();
    for (key, list) in &new {
        msg.push_str(&format!(
            "NEW disagreement `{kind} {key}` ({} cases; a bug in ours: report it, then list the line in tests/data/cluster/known-disagreements.txt):\n{}",
            list.len(),
            examples(list)
        ));
    }
    for key in &gone {
        msg.push_str(&format!(
            "listed but no longer found (fixed? remove the line): {kind} {key}\n"
        ));
    }
    panic!("{kind}: our code and kubelet's disagree:\n{msg}");
}

/// A Go `url.Parse` error without its specifics: `parse "…": invalid
/// IP-literal` becomes `invalid IP-literal`, quoted strings become `"…"`.
pub fn go_error_class(error: &str) -> String {
    let tail = match error.find("\": ") {
        Some(i) if error.starts_with("parse \"") => &error[i + 3..],
        _ => error,
    };
    let mut out = String::new();
    let mut quoted = false;
    for c in tail.chars() {
        if c == '"' {
            if !quoted {
                out.push_str("\"…\"");
            }
            quoted = !quoted;
        } else if !quoted {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_errors_lose_their_specifics() {
        assert_eq!(
            go_error_class(r#"parse "https://reg[a].io": invalid IP-literal"#),
            "invalid IP-literal"
        );
        assert_eq!(
            go_error_class(r#"parse "https://[b.c]": invalid host: ParseAddr("b.c"): unexpected character (at "b.c")"#),
            r#"invalid host: ParseAddr("…"): unexpected character (at "…")"#
        );
        assert_eq!(go_error_class("plain"), "plain");
    }
}
