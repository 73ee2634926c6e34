//! How systemd runs the shipped units (manifests/node-ip-helper), for the
//! tests that run them as systemd would without systemd: here
//! `dropin.rs` and `as_shipped.rs`, and the cluster tier's
//! `node_ip_helper_real.rs` (which includes this file by path), so that one
//! model of systemd serves them all.
//!
//! - A command line (systemd.service(5), "Command lines"): split into
//!   words (quotes group), a word that is exactly `$NAME` becomes the value
//!   split at whitespace, and `${NAME}` the exact value, whitespace
//!   included, inside one word.
//! - A unit's environment (systemd.exec(5)): `Environment=` first, then
//!   each `EnvironmentFile`'s assignments, which override those.
//! - `/run` and `/var/lib`: [`WITH_NODE_PATHS`] binds them to a directory
//!   of the test's in a mount namespace of the command's own, so that the
//!   unit's paths are written as they are.
#![allow(dead_code)] // each test file uses a different part

use std::collections::HashMap;

/// Words as systemd splits a command line: whitespace separates, single and
/// double quotes group, a backslash escapes the next character.
pub fn words(command: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut quote = None;
    let mut chars = command.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (None, c) if c.is_whitespace() => words.extend(word.take()),
            (None, '\'' | '"') => {
                quote = Some(c);
                word.get_or_insert_with(String::new);
            }
            (Some(q), c) if c == q => quote = None,
            (_, '\\') => word.get_or_insert_with(String::new).extend(chars.next()),
            (_, c) => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    words
}

/// systemd's expansion of one command line's words with `env`.
pub fn expand(command: &str, env: &HashMap<String, String>) -> Vec<String> {
    let value = |name: &str| env.get(name).cloned().unwrap_or_default();
    let mut argv = Vec::new();
    for word in words(command) {
        let whole = word
            .strip_prefix('$')
            .filter(|name| !name.starts_with('{') && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
        if let Some(name) = whole {
            argv.extend(value(name).split_whitespace().map(str::to_owned));
            continue;
        }
        let mut expanded = String::new();
        let mut rest = word.as_str();
        while let Some(start) = rest.find("${") {
            expanded.push_str(&rest[..start]);
            let end = rest[start..].find('}').expect("closing brace") + start;
            expanded.push_str(&value(&rest[start + 2..end]));
            rest = &rest[end + 1..];
        }
        expanded.push_str(rest);
        argv.push(expanded);
    }
    argv
}

/// `NAME=value` and `NAME='value'` lines as systemd's `EnvironmentFile=`
/// reads ours (the env file `write` writes, default.env); `#` lines and
/// blank ones skipped.
pub fn environment_file(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .map(|line| {
            let (name, value) = line.split_once('=').expect("NAME=VALUE");
            let value = value
                .strip_prefix('\'')
                .and_then(|v| v.strip_suffix('\''))
                .unwrap_or(value);
            (name.to_owned(), value.to_owned())
        })
        .collect()
}

/// A unit's command and environment, as systemd runs it.
pub struct Unit {
    pub exec_start: Vec<String>,
    pub environment: Vec<(String, String)>,
    pub environment_files: Vec<String>,
}

impl Unit {
    /// The unit file's `ExecStart=` (split at whitespace: the shipped one
    /// has no quoting or variables), `Environment=` assignments (one plain
    /// assignment each) and `EnvironmentFile=` paths (`-` dropped).
    pub fn parse(text: &str) -> Self {
        let mut unit = Unit {
            exec_start: Vec::new(),
            environment: Vec::new(),
            environment_files: Vec::new(),
        };
        for line in text.lines() {
            if let Some(command) = line.strip_prefix("ExecStart=") {
                assert!(!command.contains(['"', '\'', '$', '\\']), "{command}");
                unit.exec_start = command.split_whitespace().map(str::to_owned).collect();
            } else if let Some(assignment) = line.strip_prefix("Environment=") {
                assert!(
                    !assignment.contains(['"', '\'', ' ']),
                    "one plain assignment: {assignment}"
                );
                let (name, value) = assignment.split_once('=').expect("NAME=VALUE");
                unit.environment.push((name.to_owned(), value.to_owned()));
            } else if let Some(path) = line.strip_prefix("EnvironmentFile=") {
                unit.environment_files.push(path.trim_start_matches('-').to_owned());
            }
        }
        unit
    }

    /// The command's environment with `file` as its (one) `EnvironmentFile`.
    pub fn environment_with(&self, file: &str) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> = self.environment.clone();
        for (name, value) in environment_file(file) {
            env.retain(|(set, _)| *set != name);
            env.push((name, value));
        }
        env
    }
}

/// `sh -c WITH_NODE_PATHS sh ROOT ARGV...`, run as root in a mount
/// namespace of its own (`unshare --mount`): ROOT's `run/` and `var-lib/`
/// bound onto `/run` and `/var/lib`, ROOT's `bin/` first on the PATH, then
/// ARGV, stopped after 60 s.
pub const WITH_NODE_PATHS: &str = r#"set -e; root=$1; shift
mount --bind "$root/run" /run; mount --bind "$root/var-lib" /var/lib
PATH="$root/bin:$PATH" exec timeout -k 5 60 "$@""#;
