//! `check-config`: whether kubelet will take a config, and whether this
//! plugin will take the command line of each entry that runs it.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::plugin::{self, Binary};
use super::versions::KubeletTarget;
use super::{ConfigError, CredentialProviderConfig};
use crate::MAX_ERROR_LINE;
use crate::cli::OutputFormat;

/// What kubelet does when its bin dir or a provider's binary is missing:
/// RegisterCredentialProviderPlugins fails and kubelet exits (v1.37.2,
/// kuberuntime_manager.go; seen on the cluster tier's real node).
const KUBELET_EXITS: &str = "kubelet exits at start (1, \"Failed to register CRI auth plugins\")";

/// What to check beyond kubelet's own reading and validation.
#[derive(Debug, Clone, Default)]
pub struct CheckOptions {
    /// kubelet's `--image-credential-provider-bin-dir`.
    pub bin_dir: Option<PathBuf>,
    pub target: KubeletTarget,
    /// The binary whose parser judges the entries that run this plugin
    /// (`None`: they are not judged).
    pub plugin_exe: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// kubelet and this plugin take it.
    Valid,
    /// kubelet, or this plugin at every pull, refuses it.
    Refused,
    /// It could not be read or parsed: no verdict, an error instead of a
    /// report ([`CheckReport::no_verdict_line`]).
    Unreadable,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RefusedBy {
    Kubelet,
    Plugin,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// The field path (`providers[1].tokenAttributes.cacheType`), where
    /// there is one.
    pub field: Option<String>,
    /// Who refuses it; `null` when the config could not be read.
    pub refused_by: Option<RefusedBy>,
    pub message: String,
    /// The plugin's own line, as kubelet would log it at every pull.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugin_says: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Warning {
    pub field: String,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckReport {
    pub path: String,
    pub verdict: Verdict,
    /// Providers read (0 when the config could not be decoded).
    pub providers: usize,
    pub problems: Vec<Problem>,
    /// What has no effect, without a refusal: a variable no flag reads.
    pub warnings: Vec<Warning>,
    /// Whether the config was decoded (kubelet's rules applied).
    #[serde(skip)]
    decoded: bool,
    /// The audiences kubelet will request tokens for ([`super::rbac::audiences`]),
    /// read with the config: what `--rbac` grants.
    #[serde(skip)]
    pub audiences: Vec<String>,
}

/// Reads, validates and judges the config at `path`.
pub fn check(path: &Path, options: &CheckOptions) -> CheckReport {
    let shown = path.display().to_string();
    match super::load(path) {
        Err(error) => CheckReport {
            path: shown,
            verdict: if is_unreadable(&error) {
                Verdict::Unreadable
            } else {
                Verdict::Refused
            },
            providers: 0,
            warnings: Vec::new(),
            decoded: false,
            audiences: Vec::new(),
            problems: vec![Problem {
                field: match &error {
                    ConfigError::Field { field, .. } => Some(field.clone()),
                    _ => None,
                },
                refused_by: (!is_unreadable(&error)).then_some(RefusedBy::Kubelet),
                message: clean(&error.to_string()),
                plugin_says: None,
                hint: None,
            }],
        },
        Ok(config) => {
            let (problems, warnings) = problems(&config, options);
            let verdict = if problems.is_empty() {
                Verdict::Valid
            } else if problems.iter().any(|p| p.refused_by.is_none()) {
                Verdict::Unreadable
            } else {
                Verdict::Refused
            };
            CheckReport {
                path: shown,
                verdict,
                providers: config.providers.len(),
                problems,
                warnings,
                decoded: true,
                audiences: super::rbac::audiences(&config),
            }
        }
    }
}

/// Errors before kubelet's rules could be applied: the file could not be
/// read, or is no YAML/JSON (or nests deeper than this check reads).
fn is_unreadable(error: &ConfigError) -> bool {
    matches!(
        error,
        ConfigError::Read { .. } | ConfigError::File(_) | ConfigError::TooDeep { .. } | ConfigError::Syntax { .. }
    )
}

fn problems(config: &CredentialProviderConfig, options: &CheckOptions) -> (Vec<Problem>, Vec<Warning>) {
    let kubelet = |field: Option<String>, message: String| Problem {
        field,
        refused_by: Some(RefusedBy::Kubelet),
        message: clean(&message),
        plugin_says: None,
        hint: None,
    };
    let mut problems: Vec<Problem> = super::validate_for(config, &options.target)
        .into_iter()
        .map(|e| kubelet(Some(e.field), e.message))
        .collect();
    if config.directory && !options.target.reads_directories() {
        problems.push(kubelet(
            None,
            format!(
                "is a directory: {} reads --image-credential-provider-config as one file (a directory needs kubelet 1.{} or later): give it one file",
                options.target.describe(),
                super::versions::DIRECTORY_SINCE
            ),
        ));
    }
    let mut warnings = Vec::new();
    let mut bin_dir_ok = true;
    if let Some(dir) = &options.bin_dir
        && !dir.is_dir()
    {
        bin_dir_ok = false;
        problems.push(kubelet(
            None,
            format!(
                "plugin binary directory {} is not a directory kubelet can read (--bin-dir): {KUBELET_EXITS}",
                dir.display()
            ),
        ));
    }
    for (i, provider) in config.providers.iter().enumerate() {
        let runs_this_plugin = match &options.bin_dir {
            Some(dir) if bin_dir_ok => match plugin::find_binary(dir, &provider.name, options.plugin_exe.as_deref()) {
                Binary::ThisPlugin => true,
                Binary::Other => false,
                Binary::Missing(why) => {
                    problems.push(kubelet(
                        Some(format!("providers[{i}].name")),
                        format!("{why}: {KUBELET_EXITS}"),
                    ));
                    provider.name == plugin::PLUGIN_NAME
                }
            },
            _ => provider.name == plugin::PLUGIN_NAME,
        };
        if !runs_this_plugin {
            continue;
        }
        let Some(exe) = options.plugin_exe.as_deref() else {
            problems.push(Problem {
                field: Some(format!("providers[{i}].args")),
                refused_by: None,
                message: "cannot find this binary (/proc/self/exe) to parse the entry's args and env with".into(),
                plugin_says: None,
                hint: None,
            });
            continue;
        };
        warnings.extend(
            plugin::env_warnings(i, provider)
                .into_iter()
                .map(|(field, message)| Warning {
                    field,
                    message: clean(&message),
                }),
        );
        match plugin::judge(i, provider, exe) {
            Ok(None) => {}
            Ok(Some(refusal)) => {
                let cause = match &refusal.variable {
                    Some(variable) => format!("the plugin refuses the value of env {variable}"),
                    None => "the plugin refuses these args".to_owned(),
                };
                problems.push(Problem {
                    message: clean(&format!(
                        "{cause} at every pull (kubelet logs this line and pulls anonymously): {}",
                        refusal.says
                    )),
                    field: Some(refusal.field),
                    refused_by: Some(RefusedBy::Plugin),
                    plugin_says: Some(refusal.says),
                    hint: refusal.hint.map(|h| clean(&h)),
                });
            }
            Err(why) => problems.push(Problem {
                field: Some(format!("providers[{i}].args")),
                refused_by: None,
                message: clean(&why),
                plugin_says: None,
                hint: None,
            }),
        }
    }
    (problems, warnings)
}

fn clean(text: &str) -> String {
    cloud_access::logging::clean_text(text, &[], MAX_ERROR_LINE)
}

impl CheckReport {
    /// 0 valid, 2 refused, 1 unreadable.
    pub fn exit_code(&self) -> std::process::ExitCode {
        std::process::ExitCode::from(match self.verdict {
            Verdict::Valid => 0,
            Verdict::Refused => 2,
            Verdict::Unreadable => 1,
        })
    }

    /// Why no verdict could be given (the config not read or not parsed,
    /// an entry not judged), as one line for stderr; `None` with a verdict.
    pub fn no_verdict_line(&self) -> Option<String> {
        if self.verdict != Verdict::Unreadable {
            return None;
        }
        self.problems
            .iter()
            .find(|p| p.refused_by.is_none())
            .map(|problem| self.line(problem))
    }

    /// The first problem that refuses the config, as its line; `None` when
    /// kubelet and this plugin take it.
    pub fn first_refusal_line(&self) -> Option<String> {
        self.problems
            .iter()
            .find(|p| p.refused_by.is_some())
            .map(|problem| self.line(problem))
    }

    /// `PATH: FIELD: MESSAGE[; hint: ...]`.
    fn line(&self, problem: &Problem) -> String {
        let mut line = match &problem.field {
            // A decoding error names its file and field already.
            _ if !self.decoded => problem.message.clone(),
            Some(field) => format!("{}: {field}: {}", self.path, problem.message),
            None => format!("{}: {}", self.path, problem.message),
        };
        if let Some(hint) = &problem.hint {
            line.push_str("; hint: ");
            line.push_str(hint);
        }
        line
    }

    pub fn render(&self, format: OutputFormat) -> String {
        match format {
            OutputFormat::Json => format!("{}\n", serde_json::to_string_pretty(self).unwrap_or_default()),
            OutputFormat::Text => self.text(),
        }
    }

    /// One line per problem, `PATH: FIELD: MESSAGE[; hint: ...]`; a
    /// config that could not be decoded gives its error line as it is.
    fn text(&self) -> String {
        let mut out = String::new();
        if self.verdict == Verdict::Valid {
            let n = self.providers;
            let noun = if n == 1 { "provider" } else { "providers" };
            out.push_str(&format!("{}: valid ({n} {noun})\n", self.path));
        }
        for problem in &self.problems {
            out.push_str(&self.line(problem));
            out.push('\n');
        }
        for warning in &self.warnings {
            out.push_str(&format!(
                "{}: {}: warning: {}\n",
                self.path, warning.field, warning.message
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ENTRY: &str = "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n- name: NAME\n  matchImages: [reg.io]\n  defaultCacheDuration: 1m\n  apiVersion: credentialprovider.kubelet.k8s.io/v1\n  args: [ecr]\n";

    fn report(name: &str, options: &CheckOptions) -> CheckReport {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let path = dir.path().join("c.yaml");
        std::fs::write(&path, ENTRY.replace("NAME", name)).expect("write a test file");
        check(&path, options)
    }

    /// Without a binary to parse with, an entry of this plugin is not
    /// passed unjudged: no verdict (exit 1).
    #[test]
    fn an_entry_that_cannot_be_judged_is_no_verdict() {
        let report = report(plugin::PLUGIN_NAME, &CheckOptions::default());
        assert_eq!(report.verdict, Verdict::Unreadable);
        assert_eq!(report.problems[0].field.as_deref(), Some("providers[0].args"));
        assert_eq!(report.exit_code(), std::process::ExitCode::from(1));
        // Another plugin's entry needs no judging.
        let other = self::report("other", &CheckOptions::default());
        assert_eq!(other.verdict, Verdict::Valid);
        assert_eq!(
            other.render(OutputFormat::Text),
            format!("{}: valid (1 provider)\n", other.path)
        );
    }

    #[test]
    fn decoding_errors_are_shown_as_they_are() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let path = dir.path().join("c.yaml");
        std::fs::write(&path, "apiVersion: kubelet.config.k8s.io/v1\nkind: Other\n").expect("write a test file");
        let report = check(&path, &CheckOptions::default());
        assert_eq!(report.verdict, Verdict::Refused);
        let text = report.render(OutputFormat::Text);
        assert_eq!(text.matches(&report.path).count(), 1, "{text}");
        assert!(text.contains("kind \"Other\" is wrong"), "{text}");
    }
}
