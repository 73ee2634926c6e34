//! kubelet's `validateCredentialProviderConfig`, rule for rule, with each
//! problem's field path (indexed, so the operator finds the entry).

use std::collections::BTreeSet;
use std::fmt;

use super::versions::{KubeletTarget, SERVICE_ACCOUNT_TOKEN_GATE, TOKEN_ATTRIBUTES_SINCE, TOKEN_GATE_ON_SINCE};
use super::{CredentialProviderConfig, Provider, TokenAttributes};
use crate::matching::parse_schemeless;
use crate::protocol::ApiVersion;
use cloud_access::go_duration;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

const CACHE_TYPES: [&str; 2] = ["ServiceAccount", "Token"];

/// Every problem kubelet would refuse the config for; empty when it loads.
/// Assumes the `KubeletServiceAccountTokenForCredentialProviders` feature
/// gate is on, as it is by default from Kubernetes 1.34.
pub fn validate(config: &CredentialProviderConfig) -> Vec<FieldError> {
    validate_for(config, &KubeletTarget::default())
}

/// [`validate`] for a given kubelet version and feature gates.
pub fn validate_for(config: &CredentialProviderConfig, target: &KubeletTarget) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if config.providers.is_empty() {
        errors.push(FieldError {
            field: "providers".into(),
            message: "Required value: at least 1 item in providers is required".into(),
        });
    }
    for (file, api_version) in &config.files {
        if let Some(mut message) = unserved(target, api_version) {
            // A directory's files each have one.
            if config.directory {
                message.push_str(&format!(" (in {})", file.display()));
            }
            errors.push(FieldError {
                field: "apiVersion".into(),
                message,
            });
        }
    }
    let mut seen = BTreeSet::new();
    for (i, provider) in config.providers.iter().enumerate() {
        let path = format!("providers[{i}]");
        validate_provider(&path, provider, target, &mut seen, &mut errors);
    }
    errors
}

fn validate_provider(
    path: &str,
    provider: &Provider,
    target: &KubeletTarget,
    seen: &mut BTreeSet<String>,
    errors: &mut Vec<FieldError>,
) {
    let mut push = |field: String, message: String| errors.push(FieldError { field, message });
    let name = &provider.name;
    let name_field = format!("{path}.name");
    for (bad, why) in [
        ("/", "provider name cannot contain '/'"),
        (" ", "provider name cannot contain spaces"),
    ] {
        if name.contains(bad) {
            push(name_field.clone(), format!("Invalid value: {name:?}: {why}"));
        }
    }
    if name == "." || name == ".." {
        push(
            name_field.clone(),
            format!("Invalid value: {name:?}: provider name cannot be '{name}'"),
        );
    }
    if !seen.insert(name.clone()) {
        push(name_field, format!("Duplicate value: {name:?}"));
    }

    let api_version_field = format!("{path}.apiVersion");
    if provider.api_version.is_empty() {
        push(
            api_version_field,
            "Required value: use credentialprovider.kubelet.k8s.io/v1".into(),
        );
    } else if let Some(message) = unserved(target, &provider.api_version) {
        push(api_version_field, message);
    } else if ApiVersion::parse(&provider.api_version).is_none() {
        let supported: Vec<_> = ApiVersion::ALL.iter().map(|v| format!("{:?}", v.as_str())).collect();
        push(
            api_version_field,
            format!(
                "Unsupported value: {:?}: supported values: {}",
                provider.api_version,
                supported.join(", ")
            ),
        );
    }

    if provider.match_images.is_empty() {
        push(
            format!("{path}.matchImages"),
            "Required value: at least 1 item in matchImages is required".into(),
        );
    }
    for (j, pattern) in provider.match_images.iter().enumerate() {
        if let Err(e) = parse_schemeless(pattern) {
            push(
                format!("{path}.matchImages[{j}]"),
                format!("Invalid value: {pattern:?}: match image is invalid: {e}"),
            );
        }
    }

    let duration_field = format!("{path}.defaultCacheDuration");
    match provider.default_cache_duration.as_deref().map(go_duration::parse) {
        None => push(
            duration_field,
            "Required value: a Go duration such as 10m or 12h".into(),
        ),
        Some(Err(e)) => push(duration_field, format!("Invalid value: {e}")),
        Some(Ok(nanos)) if nanos < 0 => push(
            duration_field,
            "Invalid value: defaultCacheDuration must be greater than or equal to 0".into(),
        ),
        Some(Ok(_)) => {}
    }

    if let Some(attributes) = &provider.token_attributes {
        validate_token_attributes(&format!("{path}.tokenAttributes"), provider, attributes, target, errors);
    }
}

/// Why `target` cannot take `api_version` (`GROUP/VERSION`), if it cannot:
/// a kubelet too old for that version.
fn unserved(target: &KubeletTarget, api_version: &str) -> Option<String> {
    let (_, version) = api_version.split_once('/')?;
    let since = target.lacks_api_version(version)?;
    let served = match target.served_api_versions() {
        served if served.is_empty() => "no version".to_owned(),
        served => served.join(", "),
    };
    Some(format!(
        "Unsupported value: {api_version:?}: {} serves {served} of this API; {version} needs kubelet 1.{since} or later",
        target.describe(),
    ))
}

fn validate_token_attributes(
    path: &str,
    provider: &Provider,
    attributes: &TokenAttributes,
    target: &KubeletTarget,
    errors: &mut Vec<FieldError>,
) {
    let mut push = |field: String, message: String| errors.push(FieldError { field, message });
    let kubelet = target.describe();
    if !target.knows_token_attributes() {
        // Its config type lacks the field: strict decoding refuses it.
        push(
            path.to_owned(),
            format!(
                "unknown field in {kubelet}: tokenAttributes came with Kubernetes 1.{TOKEN_ATTRIBUTES_SINCE} \
                 (KEP-4412, alpha; beta and on by default in 1.{TOKEN_GATE_ON_SINCE}): upgrade kubelet or remove it"
            ),
        );
        return;
    }
    if !target.token_gate_on() {
        push(
            path.to_owned(),
            format!(
                "Forbidden: tokenAttributes is not supported when {SERVICE_ACCOUNT_TOKEN_GATE} feature gate is disabled \
                 ({kubelet}: start it with --feature-gates={SERVICE_ACCOUNT_TOKEN_GATE}=true; the gate is alpha and off \
                 by default in 1.{TOKEN_ATTRIBUTES_SINCE}, on by default from 1.{TOKEN_GATE_ON_SINCE})"
            ),
        );
    }
    if attributes.service_account_token_audience.is_empty() {
        push(
            format!("{path}.serviceAccountTokenAudience"),
            "Required value: the audience the registry expects".into(),
        );
    }
    if attributes.require_service_account.is_none() {
        push(
            format!("{path}.requireServiceAccount"),
            "Required value: true or false".into(),
        );
    }
    if provider.api_version != ApiVersion::V1.as_str() {
        push(
            path.to_owned(),
            format!(
                "Forbidden: tokenAttributes is only supported for {} API version",
                ApiVersion::V1.as_str()
            ),
        );
    }
    let required = &attributes.required_service_account_annotation_keys;
    let optional = &attributes.optional_service_account_annotation_keys;
    if attributes.require_service_account == Some(false) && !required.is_empty() {
        push(
            format!("{path}.requiredServiceAccountAnnotationKeys"),
            "Forbidden: requireServiceAccount cannot be false when requiredServiceAccountAnnotationKeys is set".into(),
        );
    }
    for (field, keys) in [
        ("requiredServiceAccountAnnotationKeys", required),
        ("optionalServiceAccountAnnotationKeys", optional),
    ] {
        let mut seen = BTreeSet::new();
        for key in keys {
            for problem in qualified_name_problems(&key.to_lowercase()) {
                push(format!("{path}.{field}"), format!("Invalid value: {key:?}: {problem}"));
            }
            if !seen.insert(key) {
                push(format!("{path}.{field}"), format!("Duplicate value: {key:?}"));
            }
        }
    }
    let both: BTreeSet<_> = required.iter().filter(|k| optional.contains(k)).collect();
    if !both.is_empty() {
        push(
            path.to_owned(),
            format!("Invalid value: {both:?}: annotation keys cannot be both required and optional"),
        );
    }
    if !target.knows_cache_type() {
        if !attributes.cache_type.is_empty() {
            push(
                format!("{path}.cacheType"),
                format!(
                    "unknown field in {kubelet}: cacheType came with Kubernetes 1.{TOKEN_GATE_ON_SINCE}: remove it for this kubelet"
                ),
            );
        }
    } else if attributes.cache_type.is_empty() {
        push(
            format!("{path}.cacheType"),
            format!(
                "Required value: cacheType is required to be set when tokenAttributes is specified. Supported values are: {}",
                CACHE_TYPES.join(", ")
            ),
        );
    } else if !CACHE_TYPES.contains(&attributes.cache_type.as_str()) {
        push(
            format!("{path}.cacheType"),
            format!(
                "Unsupported value: {:?}: supported values: \"ServiceAccount\", \"Token\"",
                attributes.cache_type
            ),
        );
    }
}

/// apimachinery's `IsQualifiedName`: `[prefix/]name`, the name 1–63
/// alphanumerics, `-`, `_` or `.` starting and ending alphanumeric, the
/// prefix a DNS-1123 subdomain.
pub fn qualified_name_problems(value: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                problems.push("prefix part must be non-empty".into());
            } else {
                problems.extend(
                    dns1123_subdomain_problems(prefix)
                        .into_iter()
                        .map(|p| format!("prefix part {p}")),
                );
            }
            *name
        }
        _ => {
            problems.push(
                "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')".into(),
            );
            return problems;
        }
    };
    if name.is_empty() {
        problems.push("name part must be non-empty".into());
    } else if name.len() > 63 {
        problems.push("name part must be no more than 63 bytes".into());
    }
    let edges_ok = name.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && name.chars().last().is_some_and(|c| c.is_ascii_alphanumeric());
    let chars_ok = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !(name.is_empty() || edges_ok && chars_ok) {
        problems.push(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character".into(),
        );
    }
    problems
}

fn dns1123_subdomain_problems(value: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if value.len() > 253 {
        problems.push("must be no more than 253 bytes".into());
    }
    let label_ok = |label: &str| {
        !label.is_empty()
            && label
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !label.starts_with('-')
            && !label.ends_with('-')
    };
    if !value.split('.').all(label_ok) {
        problems.push(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character".into(),
        );
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider() -> Provider {
        Provider {
            name: "p".into(),
            match_images: vec!["*.reg.io".into()],
            default_cache_duration: Some("10m".into()),
            api_version: ApiVersion::V1.as_str().into(),
            args: vec![],
            env: vec![],
            token_attributes: None,
        }
    }

    fn fields(providers: Vec<Provider>) -> Vec<String> {
        let n = providers.len();
        let config = CredentialProviderConfig {
            providers,
            sources: vec![Default::default(); n],
            files: vec![],
            directory: false,
        };
        validate(&config).into_iter().map(|e| e.field).collect()
    }

    fn attributes() -> TokenAttributes {
        TokenAttributes {
            service_account_token_audience: "registry".into(),
            cache_type: "Token".into(),
            require_service_account: Some(true),
            required_service_account_annotation_keys: vec![],
            optional_service_account_annotation_keys: vec![],
        }
    }

    #[test]
    fn a_good_provider_passes() {
        assert!(fields(vec![provider()]).is_empty());
        let with_token = Provider {
            token_attributes: Some(attributes()),
            ..provider()
        };
        assert!(fields(vec![with_token]).is_empty());
    }

    #[test]
    fn each_rule_reports_its_field() {
        let cases: Vec<(Provider, &str)> = vec![
            (
                Provider {
                    name: "a/b".into(),
                    ..provider()
                },
                "providers[0].name",
            ),
            (
                Provider {
                    name: "a b".into(),
                    ..provider()
                },
                "providers[0].name",
            ),
            (
                Provider {
                    name: "..".into(),
                    ..provider()
                },
                "providers[0].name",
            ),
            (
                Provider {
                    api_version: String::new(),
                    ..provider()
                },
                "providers[0].apiVersion",
            ),
            (
                Provider {
                    api_version: "credentialprovider.kubelet.k8s.io/v2".into(),
                    ..provider()
                },
                "providers[0].apiVersion",
            ),
            (
                Provider {
                    match_images: vec![],
                    ..provider()
                },
                "providers[0].matchImages",
            ),
            (
                Provider {
                    match_images: vec!["ok.io".into(), "bad host".into()],
                    ..provider()
                },
                "providers[0].matchImages[1]",
            ),
            (
                Provider {
                    default_cache_duration: None,
                    ..provider()
                },
                "providers[0].defaultCacheDuration",
            ),
            (
                Provider {
                    default_cache_duration: Some("-1m".into()),
                    ..provider()
                },
                "providers[0].defaultCacheDuration",
            ),
            (
                Provider {
                    default_cache_duration: Some("1d".into()),
                    ..provider()
                },
                "providers[0].defaultCacheDuration",
            ),
        ];
        for (provider, want) in cases {
            assert_eq!(fields(vec![provider.clone()]), [want], "{provider:?}");
        }
        assert_eq!(fields(vec![provider(), provider()]), ["providers[1].name"]);
        assert_eq!(fields(vec![]), ["providers"]);
    }

    #[test]
    fn token_attribute_rules() {
        let with = |attributes: TokenAttributes| Provider {
            token_attributes: Some(attributes),
            ..provider()
        };
        let cases: Vec<(Provider, Vec<&str>)> = vec![
            (
                with(TokenAttributes {
                    service_account_token_audience: String::new(),
                    ..attributes()
                }),
                vec!["providers[0].tokenAttributes.serviceAccountTokenAudience"],
            ),
            (
                with(TokenAttributes {
                    require_service_account: None,
                    ..attributes()
                }),
                vec!["providers[0].tokenAttributes.requireServiceAccount"],
            ),
            (
                with(TokenAttributes {
                    cache_type: String::new(),
                    ..attributes()
                }),
                vec!["providers[0].tokenAttributes.cacheType"],
            ),
            (
                with(TokenAttributes {
                    cache_type: "Pod".into(),
                    ..attributes()
                }),
                vec!["providers[0].tokenAttributes.cacheType"],
            ),
            (
                with(TokenAttributes {
                    require_service_account: Some(false),
                    required_service_account_annotation_keys: vec!["example.com/role".into()],
                    ..attributes()
                }),
                vec!["providers[0].tokenAttributes.requiredServiceAccountAnnotationKeys"],
            ),
            (
                with(TokenAttributes {
                    optional_service_account_annotation_keys: vec!["bad key!".into()],
                    ..attributes()
                }),
                vec!["providers[0].tokenAttributes.optionalServiceAccountAnnotationKeys"],
            ),
            (
                with(TokenAttributes {
                    required_service_account_annotation_keys: vec!["a.io/x".into()],
                    optional_service_account_annotation_keys: vec!["a.io/x".into()],
                    ..attributes()
                }),
                vec!["providers[0].tokenAttributes"],
            ),
            (
                Provider {
                    api_version: ApiVersion::V1Beta1.as_str().into(),
                    ..with(attributes())
                },
                vec!["providers[0].tokenAttributes"],
            ),
        ];
        for (provider, want) in cases {
            assert_eq!(fields(vec![provider.clone()]), want, "{provider:?}");
        }
    }

    #[test]
    fn qualified_names() {
        for ok in ["a", "eks.amazonaws.com/ecr-role-arn", "Example.com/Name", "a.b_c-d"] {
            assert!(qualified_name_problems(&ok.to_lowercase()).is_empty(), "{ok}");
        }
        for bad in ["", "-a", "a/", "/a", "a/b/c", "bad_prefix/a", "a!", &"x".repeat(64)] {
            assert!(!qualified_name_problems(bad).is_empty(), "{bad:?}");
        }
    }
}
