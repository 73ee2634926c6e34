//! The no-secret guard of no_secrets*.rs: each case runs at every log level
//! in both log formats, and its exit status, its log records (so that a
//! guard cannot pass because nothing was logged) and the absence of every
//! secret, and of every long piece of one, are asserted.

use super::{Output, run_with_env};

pub const LEVELS: [&str; 3] = ["trace", "debug", "error"];
pub const FORMATS: [&str; 2] = ["text", "json"];

/// One run of the plugin: its arguments after the global flags, stdin,
/// environment, and the exit status it must end with.
pub struct Case {
    pub what: String,
    pub args: Vec<String>,
    pub stdin: Vec<u8>,
    pub env: Vec<(String, String)>,
    pub status: i32,
    /// False for a run refused before its first record (a command-line
    /// error, a request that is not one): the error line is all there is,
    /// at every level, and that is asserted instead.
    pub logs: bool,
}

impl Case {
    pub fn new(what: &str, args: &[&str], stdin: Vec<u8>, status: i32) -> Self {
        Self {
            what: what.to_owned(),
            args: args.iter().map(|a| a.to_string()).collect(),
            stdin,
            env: Vec::new(),
            status,
            logs: true,
        }
    }

    /// Refused before any record: exit 1 with the one error line only.
    pub fn error_line_only(mut self) -> Self {
        assert_eq!(self.status, 1, "{}", self.what);
        self.logs = false;
        self
    }

    pub fn env(mut self, env: &[(&str, &str)]) -> Self {
        self.env.extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        self
    }
}

/// The log records on stderr: lines in `format` (the plugin's last line on
/// failure, `cloud-credential-provider: …`, is not a record). Each is
/// (level, line). Panics on a line that is neither.
fn records(what: &str, format: &str, stderr: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for line in stderr.lines() {
        if line.starts_with("cloud-credential-provider: ") {
            continue;
        }
        let level = match format {
            "json" => {
                let record: serde_json::Value = serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("{what}: not a JSON log record ({e}): {line:?}"));
                assert!(record["timestamp"].is_string(), "{what}: {line}");
                record["level"].as_str().unwrap_or_default().to_owned()
            }
            _ => {
                assert!(!line.starts_with('{'), "{what}: JSON in text format: {line}");
                // `2026-11-30T21:11:20.353344Z DEBUG message …`
                let mut words = line.split_whitespace();
                let time = words.next().unwrap_or_default();
                if !(time.len() > 20 && time.ends_with('Z') && time.as_bytes()[4] == b'-') {
                    // A field with newlines (aws-sigv4's canonical request at
                    // trace) continues the record before it.
                    assert!(!found.is_empty(), "{what}: not a text log record: {line:?}");
                    continue;
                }
                words.next().unwrap_or_default().to_owned()
            }
        };
        assert!(
            ["TRACE", "DEBUG", "INFO", "WARN", "ERROR"].contains(&level.as_str()),
            "{what}: no level in {line:?}"
        );
        found.push((level, line.to_owned()));
    }
    found
}

/// The passwords of a response on stdout: secrets the logs must not hold.
fn passwords(stdout: &str) -> Vec<String> {
    let Ok(response) = serde_json::from_str::<serde_json::Value>(stdout) else {
        return Vec::new();
    };
    let Some(auth) = response["auth"].as_object() else {
        return Vec::new();
    };
    auth.values()
        .filter_map(|entry| entry["password"].as_str())
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect()
}

/// No secret, and no 16 characters in a row of one, in `text`.
pub fn assert_no_secret(what: &str, text: &str, secrets: &[String]) {
    for secret in secrets {
        assert!(!text.contains(secret.as_str()), "{what}: stderr holds a secret: {text}");
        let bytes = secret.as_bytes();
        for window in bytes.windows(16.min(bytes.len())) {
            let piece = std::str::from_utf8(window).unwrap_or_default();
            assert!(
                piece.is_empty() || !text.contains(piece),
                "{what}: stderr holds part of a secret ({piece:?}): {text}"
            );
        }
    }
}

/// Runs every case at every level in both formats and asserts, for each:
/// the exit status; on failure nothing on stdout and a last line naming the
/// failure; on success a response, and nothing on stderr at level error;
/// at debug and trace at least one debug or trace record, every line a
/// record of the format asked for; no secret of `secrets` nor any password
/// the run answered with on stderr.
pub fn check_cases(cases: &[Case], secrets: &[String]) {
    for case in cases {
        for level in LEVELS {
            for format in FORMATS {
                let what = format!("{} ({level}, {format})", case.what);
                let mut args = vec!["--log-level", level, "--log-format", format];
                args.extend(case.args.iter().map(String::as_str));
                let env: Vec<(&str, &str)> = case.env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                let out: Output = run_with_env(&args, &case.stdin, &env);
                assert_eq!(out.status, case.status, "{what}: {}", out.stderr);
                if out.status == 0 {
                    let response = super::response(&out.stdout);
                    assert_eq!(response["kind"], "CredentialProviderResponse", "{what}");
                } else {
                    assert!(out.stdout.is_empty(), "{what}: stdout on failure: {}", out.stdout);
                    let last = out.stderr.lines().last().unwrap_or_default();
                    assert!(
                        last.starts_with("cloud-credential-provider: "),
                        "{what}: {}",
                        out.stderr
                    );
                }
                let records = records(&what, format, &out.stderr);
                if level == "error" {
                    assert!(
                        records.iter().all(|(l, _)| l == "ERROR"),
                        "{what}: below error at level error: {}",
                        out.stderr
                    );
                    if out.status == 0 {
                        assert!(out.stderr.is_empty(), "{what}: stderr on success: {}", out.stderr);
                    }
                } else if !case.logs {
                    assert!(records.is_empty(), "{what}: {}", out.stderr);
                    assert_eq!(out.stderr.lines().count(), 1, "{what}: {}", out.stderr);
                } else {
                    assert!(
                        records.iter().any(|(l, _)| l == "DEBUG" || l == "TRACE"),
                        "{what}: nothing logged at {level}, so the guard would prove nothing: {:?}",
                        out.stderr
                    );
                }
                let mut all = secrets.to_vec();
                all.extend(passwords(&out.stdout));
                assert_no_secret(&what, &out.stderr, &all);
            }
        }
    }
}
