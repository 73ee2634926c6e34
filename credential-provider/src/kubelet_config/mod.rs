//! kubelet's `CredentialProviderConfig` (`kubelet.config.k8s.io/{v1alpha1,
//! v1beta1,v1}`): read as kubelet reads it, from one JSON or YAML file or a
//! directory of them, with kubelet's strict decoding.

use std::path::{Path, PathBuf};

use serde::Deserialize;

mod check;
pub mod cluster;
mod explain;
pub mod plugin;
pub mod pull_records;
pub mod rbac;
mod validate;
mod versions;

pub use check::{CheckOptions, CheckReport, Problem, RefusedBy, Verdict, check};
pub use explain::{Explanation, PatternVerdict, ProviderVerdict, explain};
pub use validate::{FieldError, validate, validate_for};
pub use versions::{FeatureGates, KubeletTarget, KubeletVersion};

pub const CONFIG_GROUP: &str = "kubelet.config.k8s.io";
pub const CONFIG_VERSIONS: [&str; 3] = ["v1alpha1", "v1beta1", "v1"];
pub const CONFIG_KIND: &str = "CredentialProviderConfig";

/// The providers of one or more config files, in kubelet's order.
#[derive(Debug, Clone, PartialEq)]
pub struct CredentialProviderConfig {
    pub providers: Vec<Provider>,
    /// The file each provider came from, for messages.
    pub sources: Vec<PathBuf>,
    /// Each file read, with its `apiVersion` (`kubelet.config.k8s.io/v1`):
    /// which kubelets serve it depends on the version.
    pub files: Vec<(PathBuf, String)>,
    /// Whether the config was a directory (kubelet reads one from 1.34).
    pub directory: bool,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Provider {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub match_images: Vec<String>,
    /// Kept as text; validation parses it as kubelet does.
    #[serde(default)]
    pub default_cache_duration: Option<String>,
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: Vec<ExecEnvVar>,
    #[serde(default)]
    pub token_attributes: Option<TokenAttributes>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecEnvVar {
    pub name: String,
    pub value: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TokenAttributes {
    #[serde(default)]
    pub service_account_token_audience: String,
    #[serde(default)]
    pub cache_type: String,
    #[serde(default)]
    pub require_service_account: Option<bool>,
    #[serde(default)]
    pub required_service_account_annotation_keys: Vec<String>,
    #[serde(default)]
    pub optional_service_account_annotation_keys: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ConfigFile {
    #[allow(dead_code)]
    api_version: String,
    #[allow(dead_code)]
    kind: String,
    #[serde(default)]
    providers: Vec<Provider>,
}

/// Far above any real config (a few KB).
pub const MAX_CONFIG_FILE: u64 = 1 << 20;

/// Deeper `[`/`{` nesting than any config needs, counting brackets inside
/// strings and comments ([`cloud_access::yaml`]).
pub const MAX_FLOW_DEPTH: usize = cloud_access::yaml::MAX_FLOW_DEPTH;

/// The UTF-8 byte order mark some editors put first; neither file format
/// gives it a meaning, so it is skipped.
pub const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {reason}")]
    Read { path: PathBuf, reason: String },
    #[error("cannot read {0}")]
    File(#[source] cloud_access::files::FileError),
    /// Refused before parsing: the YAML scanner's time grows with the depth.
    #[error("{path}: {problem}: a CredentialProviderConfig nests a few levels; check that this is the right file")]
    TooDeep {
        path: PathBuf,
        problem: cloud_access::yaml::NestingError,
    },
    #[error("{path}: no *.json, *.yaml or *.yml files in this directory")]
    EmptyDirectory { path: PathBuf },
    #[error("{path}: {reason}")]
    Syntax { path: PathBuf, reason: String },
    #[error(
        "{path}: apiVersion {found:?} is not a CredentialProviderConfig version: use kubelet.config.k8s.io/v1 (or v1beta1, v1alpha1)"
    )]
    ApiVersion { path: PathBuf, found: String },
    #[error("{path}: kind {found:?} is wrong: use kind: CredentialProviderConfig")]
    Kind { path: PathBuf, found: String },
    #[error("{path}: {field}: {reason}")]
    Field {
        path: PathBuf,
        field: String,
        reason: String,
    },
    #[error("{path}: duplicate provider name {name:?} (also in {first}): each provider name must be unique")]
    DuplicateName {
        path: PathBuf,
        name: String,
        first: PathBuf,
    },
}

/// Reads a config file, or every `*.json`/`*.yaml`/`*.yml` file of a
/// directory in lexical order with their providers merged, as kubelet does.
pub fn load(path: &Path) -> Result<CredentialProviderConfig, ConfigError> {
    let read_error = |path: &Path, e: std::io::Error| ConfigError::Read {
        path: path.to_owned(),
        reason: e.to_string(),
    };
    let metadata = std::fs::metadata(path).map_err(|e| read_error(path, e))?;
    let files = if metadata.is_dir() {
        let mut files = Vec::new();
        for entry in std::fs::read_dir(path).map_err(|e| read_error(path, e))? {
            let entry = entry.map_err(|e| read_error(path, e))?;
            let file = entry.path();
            let is_config = matches!(file.extension().and_then(|e| e.to_str()), Some("json" | "yaml" | "yml"));
            if is_config && !entry.file_type().map_err(|e| read_error(&file, e))?.is_dir() {
                files.push(file);
            }
        }
        files.sort();
        if files.is_empty() {
            return Err(ConfigError::EmptyDirectory { path: path.to_owned() });
        }
        files
    } else {
        vec![path.to_owned()]
    };

    let mut config = CredentialProviderConfig {
        providers: Vec::new(),
        sources: Vec::new(),
        files: Vec::new(),
        directory: metadata.is_dir(),
    };
    for file in files {
        let text = cloud_access::files::read_regular_to_string(&file, MAX_CONFIG_FILE).map_err(ConfigError::File)?;
        let (api_version, providers) = decode_with_version(&file, &text)?;
        config.files.push((file.clone(), api_version));
        for provider in providers {
            // kubelet refuses a repeated name while merging, even in one file.
            if let Some(i) = config.providers.iter().position(|p| p.name == provider.name) {
                return Err(ConfigError::DuplicateName {
                    path: file.clone(),
                    name: provider.name,
                    first: config.sources[i].clone(),
                });
            }
            config.providers.push(provider);
            config.sources.push(file.clone());
        }
    }
    Ok(config)
}

/// Decodes one file's text (JSON is YAML too), strictly: unknown and
/// duplicate fields are errors, as in kubelet.
pub fn decode(path: &Path, text: &str) -> Result<Vec<Provider>, ConfigError> {
    decode_with_version(path, text).map(|(_, providers)| providers)
}

/// [`decode`], with the file's `apiVersion`.
fn decode_with_version(path: &Path, text: &str) -> Result<(String, Vec<Provider>), ConfigError> {
    let syntax = |reason: String| ConfigError::Syntax {
        path: path.to_owned(),
        reason,
    };
    let text = text.strip_prefix('\u{FEFF}').unwrap_or(text);
    cloud_access::yaml::check_nesting(text).map_err(|problem| ConfigError::TooDeep {
        path: path.to_owned(),
        problem,
    })?;
    // Through YAML's own value first: it refuses duplicate keys, as kubelet does.
    let yaml: serde_yaml_ng::Value = serde_yaml_ng::from_str(text).map_err(|e| syntax(e.to_string()))?;
    let value = serde_json::to_value(yaml).map_err(|e| syntax(e.to_string()))?;
    let object = value
        .as_object()
        .ok_or_else(|| syntax("the file must hold one CredentialProviderConfig object".into()))?;
    let text_field = |name: &str| object.get(name).and_then(|v| v.as_str()).unwrap_or_default().to_owned();
    let api_version = text_field("apiVersion");
    let kind = text_field("kind");
    if kind.is_empty() {
        return Err(syntax("\"kind\" is missing: use kind: CredentialProviderConfig".into()));
    }
    let version_ok = api_version
        .split_once('/')
        .is_some_and(|(group, version)| group == CONFIG_GROUP && CONFIG_VERSIONS.contains(&version));
    if !version_ok {
        return Err(ConfigError::ApiVersion {
            path: path.to_owned(),
            found: api_version,
        });
    }
    if kind != CONFIG_KIND {
        return Err(ConfigError::Kind {
            path: path.to_owned(),
            found: kind,
        });
    }
    // Only the v1 config type has tokenAttributes: in v1alpha1 and v1beta1
    // kubelet's strict decoding refuses it as an unknown field, whatever it
    // holds (so this comes before its contents are read).
    let providers = object.get("providers").and_then(|p| p.as_array());
    if api_version != format!("{CONFIG_GROUP}/v1")
        && let Some(i) = providers.and_then(|list| list.iter().position(|p| p.get("tokenAttributes").is_some()))
    {
        return Err(ConfigError::Field {
            path: path.to_owned(),
            field: format!("providers[{i}].tokenAttributes"),
            reason: format!("unknown field `tokenAttributes` in {api_version}: only kubelet.config.k8s.io/v1 has it"),
        });
    }
    let file: ConfigFile = serde_path_to_error::deserialize(value).map_err(|e| ConfigError::Field {
        path: path.to_owned(),
        field: e.path().to_string(),
        reason: e.into_inner().to_string(),
    })?;
    Ok((api_version, file.providers))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_text(text: &str) -> Result<Vec<Provider>, ConfigError> {
        decode(Path::new("config.yaml"), text)
    }

    #[test]
    fn deep_flow_nesting_is_refused_before_parsing() {
        let header = "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\n";
        let deep = format!("{header}providers: {}{}\n", "[".repeat(40), "]".repeat(40));
        match decode_text(&deep).unwrap_err() {
            ConfigError::TooDeep { problem, .. } => assert_eq!(
                problem,
                cloud_access::yaml::NestingError::TooDeep {
                    line: 3,
                    column: 11 + MAX_FLOW_DEPTH + 1
                }
            ),
            other => panic!("unexpected {other:?}"),
        }
        // Brackets in quoted strings count too: a false refusal no real
        // config comes near, and the message says so.
        let quoted = format!("{header}providers: []\nx: \"{}\"\n", "[".repeat(40));
        let error = decode_text(&quoted).unwrap_err().to_string();
        assert!(
            error.contains("brackets inside quoted strings and comments count too"),
            "{error}"
        );
    }

    /// Issue 9's re-test: a `"` inside a plain scalar is no quote, and the
    /// brackets after it nest for real.
    #[test]
    fn a_quote_in_a_plain_scalar_does_not_hide_deep_nesting() {
        let header = "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\n";
        let n = 100_000;
        let deep = format!("{header}x: [a:\", {}{}, b\"]\n", "[".repeat(n), "]".repeat(n));
        let error = decode_text(&deep).unwrap_err().to_string();
        assert!(
            error.starts_with("config.yaml: nested more than 32 levels deep") && error.contains("(line 3, column 41;"),
            "{error}"
        );
        // A `]` in a string lowers the count without closing anything: the
        // number of brackets is bounded too.
        let step = format!("{}\"{}\", ", "[".repeat(20), "]".repeat(20));
        let deep = format!("{header}x: {}a\n", step.repeat(1000));
        let error = decode_text(&deep).unwrap_err().to_string();
        assert!(error.contains("more than 512 [ and {"), "{error}");
    }

    #[test]
    fn a_byte_order_mark_is_skipped() {
        let yaml = "\u{FEFF}apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders: []\n";
        assert!(decode_text(yaml).unwrap().is_empty());
    }

    #[test]
    fn reads_yaml_and_json() {
        let yaml = "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n- name: p\n  matchImages: [\"*.reg.io\"]\n  defaultCacheDuration: 10m\n  apiVersion: credentialprovider.kubelet.k8s.io/v1\n";
        let providers = decode_text(yaml).unwrap();
        assert_eq!(providers[0].name, "p");
        assert_eq!(providers[0].default_cache_duration.as_deref(), Some("10m"));
        let json = r#"{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"CredentialProviderConfig","providers":[]}"#;
        assert!(decode_text(json).unwrap().is_empty());
    }

    #[test]
    fn unknown_fields_are_errors_with_their_path() {
        let yaml = "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n- name: p\n  matchImage: [x]\n";
        match decode_text(yaml).unwrap_err() {
            ConfigError::Field { field, reason, .. } => {
                assert_eq!(field, "providers[0].matchImage");
                assert!(reason.contains("unknown field `matchImage`"), "{reason}");
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn token_attributes_exist_only_in_the_v1_config() {
        let config = |version: &str| {
            format!(
                "apiVersion: kubelet.config.k8s.io/{version}\nkind: CredentialProviderConfig\nproviders:\n- name: p\n  tokenAttributes: {{serviceAccountTokenAudience: a}}\n"
            )
        };
        assert!(decode_text(&config("v1")).is_ok());
        for version in ["v1beta1", "v1alpha1"] {
            match decode_text(&config(version)).unwrap_err() {
                ConfigError::Field { field, .. } => assert_eq!(field, "providers[0].tokenAttributes"),
                other => panic!("{version}: {other:?}"),
            }
            // kubelet never reads inside a field its version lacks: what is
            // wrong in there is not the error (its strict decoder names
            // `providers[1].tokenAttributes`, found by the cluster tier's
            // random config differential).
            for inside in ["{audience: x}", "{requireServiceAccount: \"true\"}"] {
                let text = format!(
                    "apiVersion: kubelet.config.k8s.io/{version}\nkind: CredentialProviderConfig\nproviders:\n- name: q\n- name: p\n  tokenAttributes: {inside}\n"
                );
                match decode_text(&text).expect_err("tokenAttributes outside v1") {
                    ConfigError::Field { field, .. } => assert_eq!(field, "providers[1].tokenAttributes", "{inside}"),
                    other => panic!("{version} {inside}: {other:?}"),
                }
            }
        }
    }

    #[test]
    fn wrong_group_version_and_kind_are_refused() {
        let bad_version = "apiVersion: kubelet.config.k8s.io/v2\nkind: CredentialProviderConfig\n";
        assert!(matches!(decode_text(bad_version), Err(ConfigError::ApiVersion { .. })));
        let bad_kind = "apiVersion: kubelet.config.k8s.io/v1\nkind: KubeletConfiguration\n";
        assert!(matches!(decode_text(bad_kind), Err(ConfigError::Kind { .. })));
        assert!(matches!(
            decode_text("apiVersion: x\n"),
            Err(ConfigError::Syntax { .. })
        ));
        let duplicate_key =
            "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nkind: CredentialProviderConfig\n";
        assert!(matches!(decode_text(duplicate_key), Err(ConfigError::Syntax { .. })));
    }
}
