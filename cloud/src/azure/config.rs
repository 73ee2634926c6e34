//! The Azure cloud config (`/etc/kubernetes/azure.json`), read as
//! cloud-provider-azure reads it, so that an operator points the suite at
//! the file they already have.
//!
//! Upstream (`configloader.Load` → `sigs.k8s.io/yaml`) trims the file,
//! parses it as YAML (JSON is YAML), turns it into JSON and decodes that
//! with Go's `encoding/json`: field names match case-insensitively (a later
//! key wins), unknown fields are ignored, `null` leaves a field unset, a
//! YAML number or boolean given for a text field becomes its text, and a
//! boolean field takes only a boolean. Here the file is read as a bounded
//! regular file ([`crate::files::read_regular_to_string`]) and parsed
//! through the crate's nesting guard ([`crate::yaml::from_str`]), then the
//! same rules are applied. One difference: YAML 1.1's `yes`/`no`/`on`/`off`
//! are booleans to upstream's parser and text to ours (YAML 1.2), so such a
//! boolean field is refused with an error naming it instead of read.
//!
//! Errors name the file and the field; the client secret is never shown,
//! in an error or in `Debug`.

use std::fmt;
use std::path::{Path, PathBuf};

use secrecy::SecretString;
use serde_yaml_ng::Value;

use super::environment::AzureCloud;

/// Far above any real `azure.json` (a few KB).
pub const MAX_CONFIG_FILE: u64 = 1 << 20;

/// Why the cloud config was not read. Each names the file.
#[derive(Debug, thiserror::Error)]
pub enum AzureConfigError {
    #[error("cannot read the Azure cloud config: {0}")]
    File(#[from] crate::files::FileError),
    #[error("Azure cloud config {path}: not JSON or YAML: {source}")]
    Syntax {
        path: PathBuf,
        #[source]
        source: crate::yaml::YamlError,
    },
    #[error("Azure cloud config {path}: the document is {found}, not a mapping of settings")]
    NotAMapping { path: PathBuf, found: &'static str },
    #[error("Azure cloud config {path}: {field}: {problem}")]
    Field {
        path: PathBuf,
        field: &'static str,
        problem: String,
    },
}

/// A user-assigned managed identity, as `userAssignedIdentityID` gives it:
/// a resource ID when the value contains `/subscriptions/` (any case, as
/// upstream checks), else a client ID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UserAssignedIdentity {
    /// IMDS's `client_id=`.
    ClientId(String),
    /// IMDS's `msi_res_id=` (`/subscriptions/…/userAssignedIdentities/NAME`).
    ResourceId(String),
}

impl UserAssignedIdentity {
    pub fn from_config_value(value: &str) -> Self {
        if value.to_ascii_uppercase().contains("/SUBSCRIPTIONS/") {
            UserAssignedIdentity::ResourceId(value.to_owned())
        } else {
            UserAssignedIdentity::ClientId(value.to_owned())
        }
    }
}

/// How the config says to authenticate, in the order azclient's
/// `NewAuthProvider` chooses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthMethod {
    /// `useFederatedWorkloadIdentityExtension` (or `AZURE_FEDERATED_TOKEN_FILE`
    /// applied by [`AzureConfig::with_workload_identity_env`]): a client
    /// assertion read from `token_file` for `aadClientId` in `tenantId`.
    WorkloadIdentity { token_file: PathBuf },
    /// `useManagedIdentityExtension`: IMDS, for the system-assigned identity
    /// or the user-assigned one.
    ManagedIdentity { identity: Option<UserAssignedIdentity> },
    /// A non-empty `aadClientSecret`: a service principal.
    ClientSecret,
    /// None of these (certificates and MSI data-plane files are not read).
    None,
}

/// What the suite reads from `azure.json`. `Debug` never shows the secret.
#[derive(Clone, Default)]
pub struct AzureConfig {
    /// `cloud`, as written (see [`AzureConfig::cloud`]).
    pub cloud_name: String,
    pub tenant_id: String,
    pub subscription_id: String,
    pub resource_group: String,
    pub location: String,
    pub aad_client_id: String,
    pub aad_client_secret: Option<SecretString>,
    pub use_managed_identity_extension: bool,
    /// `userAssignedIdentityID`, as written (see [`AzureConfig::user_assigned_identity`]).
    pub user_assigned_identity_id: String,
    /// A custom cloud's ARM endpoint (see [`super::CloudEndpoints::discover`]).
    pub resource_manager_endpoint: String,
    pub aad_federated_token_file: String,
    pub use_federated_workload_identity_extension: bool,
}

impl fmt::Debug for AzureConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AzureConfig")
            .field("cloud_name", &self.cloud_name)
            .field("tenant_id", &self.tenant_id)
            .field("subscription_id", &self.subscription_id)
            .field("resource_group", &self.resource_group)
            .field("location", &self.location)
            .field("aad_client_id", &self.aad_client_id)
            .field(
                "aad_client_secret",
                &self.aad_client_secret.as_ref().map(|_| crate::logging::REDACTED),
            )
            .field("use_managed_identity_extension", &self.use_managed_identity_extension)
            .field("user_assigned_identity_id", &self.user_assigned_identity_id)
            .field("resource_manager_endpoint", &self.resource_manager_endpoint)
            .field("aad_federated_token_file", &self.aad_federated_token_file)
            .field(
                "use_federated_workload_identity_extension",
                &self.use_federated_workload_identity_extension,
            )
            .finish()
    }
}

/// The kinds of field.
enum Kind {
    Text(fn(&mut AzureConfig) -> &mut String),
    Secret,
    Flag(fn(&mut AzureConfig) -> &mut bool),
}

/// The fields read, by their upstream JSON names.
const FIELDS: &[(&str, Kind)] = &[
    ("cloud", Kind::Text(|c| &mut c.cloud_name)),
    ("tenantId", Kind::Text(|c| &mut c.tenant_id)),
    ("subscriptionId", Kind::Text(|c| &mut c.subscription_id)),
    ("resourceGroup", Kind::Text(|c| &mut c.resource_group)),
    ("location", Kind::Text(|c| &mut c.location)),
    ("aadClientId", Kind::Text(|c| &mut c.aad_client_id)),
    ("aadClientSecret", Kind::Secret),
    (
        "useManagedIdentityExtension",
        Kind::Flag(|c| &mut c.use_managed_identity_extension),
    ),
    (
        "userAssignedIdentityID",
        Kind::Text(|c| &mut c.user_assigned_identity_id),
    ),
    (
        "resourceManagerEndpoint",
        Kind::Text(|c| &mut c.resource_manager_endpoint),
    ),
    ("aadFederatedTokenFile", Kind::Text(|c| &mut c.aad_federated_token_file)),
    (
        "useFederatedWorkloadIdentityExtension",
        Kind::Flag(|c| &mut c.use_federated_workload_identity_extension),
    ),
];

impl AzureConfig {
    /// Reads `path` (at most [`MAX_CONFIG_FILE`] bytes, a regular file).
    pub fn read(path: &Path) -> Result<Self, AzureConfigError> {
        let text = crate::files::read_regular_to_string(path, MAX_CONFIG_FILE)?;
        Self::parse(path, &text)
    }

    /// Parses `text`, the contents of `path` (named in errors).
    pub fn parse(path: &Path, text: &str) -> Result<Self, AzureConfigError> {
        let document: Value = crate::yaml::from_str(text.trim()).map_err(|source| AzureConfigError::Syntax {
            path: path.to_owned(),
            source,
        })?;
        let mut config = AzureConfig::default();
        let mapping = match document {
            Value::Null => return Ok(config),
            Value::Mapping(mapping) => mapping,
            other => {
                return Err(AzureConfigError::NotAMapping {
                    path: path.to_owned(),
                    found: kind_of(&other),
                });
            }
        };
        for (key, value) in &mapping {
            let Some(key) = key.as_str() else { continue };
            let Some((field, kind)) = FIELDS.iter().find(|(name, _)| name.eq_ignore_ascii_case(key)) else {
                continue;
            };
            let refused = |problem: String| AzureConfigError::Field {
                path: path.to_owned(),
                field,
                problem,
            };
            match kind {
                Kind::Text(slot) => {
                    if let Some(text) = text_value(value).map_err(refused)? {
                        *slot(&mut config) = text;
                    }
                }
                Kind::Secret => {
                    if let Some(text) = text_value(value).map_err(refused)? {
                        config.aad_client_secret = Some(SecretString::from(text));
                    }
                }
                Kind::Flag(slot) => match value {
                    Value::Null => {}
                    Value::Bool(flag) => *slot(&mut config) = *flag,
                    other => {
                        return Err(refused(format!(
                            "is {}; true or false is needed (unquoted)",
                            kind_of(other)
                        )));
                    }
                },
            }
        }
        Ok(config)
    }

    /// The cloud `cloud` names, and whether upstream knows the name (an
    /// unknown name is the public cloud, as upstream has it: a program
    /// should warn).
    pub fn cloud(&self) -> (AzureCloud, bool) {
        AzureCloud::from_name(&self.cloud_name)
    }

    /// `userAssignedIdentityID`, when set.
    pub fn user_assigned_identity(&self) -> Option<UserAssignedIdentity> {
        Some(self.user_assigned_identity_id.trim())
            .filter(|id| !id.is_empty())
            .map(UserAssignedIdentity::from_config_value)
    }

    /// The variables Azure's workload identity webhook injects into a pod,
    /// applied as azclient's getters apply them: `AZURE_CLIENT_ID`,
    /// `AZURE_TENANT_ID` and `AZURE_CLIENT_SECRET` replace the file's values,
    /// and `AZURE_FEDERATED_TOKEN_FILE` turns workload identity on with that
    /// file. `env` reads a variable (the process environment, or a map in
    /// tests); empty counts as unset.
    pub fn with_workload_identity_env(mut self, env: impl Fn(&str) -> Option<String>) -> Self {
        let var = |name: &str| env(name).filter(|v| !v.is_empty());
        if let Some(id) = var("AZURE_CLIENT_ID") {
            self.aad_client_id = id;
        }
        if let Some(tenant) = var("AZURE_TENANT_ID") {
            self.tenant_id = tenant;
        }
        if let Some(secret) = var("AZURE_CLIENT_SECRET") {
            self.aad_client_secret = Some(SecretString::from(secret));
        }
        if let Some(file) = var("AZURE_FEDERATED_TOKEN_FILE") {
            self.aad_federated_token_file = file;
            self.use_federated_workload_identity_extension = true;
        }
        self
    }

    /// How to authenticate, in azclient's order: workload identity, managed
    /// identity, client secret.
    pub fn auth_method(&self) -> AuthMethod {
        use secrecy::ExposeSecret;
        if self.use_federated_workload_identity_extension {
            AuthMethod::WorkloadIdentity {
                token_file: PathBuf::from(&self.aad_federated_token_file),
            }
        } else if self.use_managed_identity_extension {
            AuthMethod::ManagedIdentity {
                identity: self.user_assigned_identity(),
            }
        } else if self
            .aad_client_secret
            .as_ref()
            .is_some_and(|s| !s.expose_secret().is_empty())
        {
            AuthMethod::ClientSecret
        } else {
            AuthMethod::None
        }
    }
}

/// A text field's value: text as it is, a number or boolean as its text
/// (as `sigs.k8s.io/yaml` converts them for a string field), `None` for
/// null. Never quotes the value: it may be the secret.
fn text_value(value: &Value) -> Result<Option<String>, String> {
    match value {
        Value::Null => Ok(None),
        Value::String(text) => Ok(Some(text.clone())),
        Value::Bool(flag) => Ok(Some(flag.to_string())),
        Value::Number(number) => Ok(Some(number.to_string())),
        other => Err(format!("is {}; text is needed", kind_of(other))),
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "empty",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "text",
        Value::Sequence(_) => "a list",
        Value::Mapping(_) => "a mapping",
        Value::Tagged(_) => "a tagged value",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret;

    fn parse(text: &str) -> Result<AzureConfig, AzureConfigError> {
        AzureConfig::parse(Path::new("/etc/kubernetes/azure.json"), text)
    }

    #[test]
    fn names_match_case_insensitively_later_keys_win_unknown_ignored() {
        let config = parse(
            r#"{"TENANTID": "t1", "tenantId": "t2", "aadclientid": "c", "vmType": "vmss",
                "useManagedIdentityExtension": true, "subscriptionId": 1234, "location": null}"#,
        )
        .unwrap();
        assert_eq!(config.tenant_id, "t2");
        assert_eq!(config.aad_client_id, "c");
        assert_eq!(config.subscription_id, "1234");
        assert_eq!(config.location, "");
        assert!(config.use_managed_identity_extension);
        assert_eq!(config.auth_method(), AuthMethod::ManagedIdentity { identity: None });
    }

    #[test]
    fn empty_files_are_defaults_other_documents_are_errors() {
        assert_eq!(parse("  \n").unwrap().auth_method(), AuthMethod::None);
        let error = parse("[1, 2]").unwrap_err().to_string();
        assert_eq!(
            error,
            "Azure cloud config /etc/kubernetes/azure.json: the document is a list, not a mapping of settings"
        );
    }

    #[test]
    fn field_errors_name_the_field_and_never_the_secret() {
        let error = parse(r#"{"useManagedIdentityExtension": "true"}"#)
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "Azure cloud config /etc/kubernetes/azure.json: useManagedIdentityExtension: is text; true or false is needed (unquoted)"
        );
        let error = parse(r#"{"aadClientSecret": {"value": "hunter2-secret"}}"#)
            .unwrap_err()
            .to_string();
        assert!(error.contains("aadClientSecret: is a mapping"), "{error}");
        assert!(!error.contains("hunter2"), "{error}");
    }

    #[test]
    fn workload_identity_variables_and_the_order_of_methods() {
        let config = parse("aadClientId: file-client\naadClientSecret: s3cr3t-value\n").unwrap();
        assert_eq!(config.auth_method(), AuthMethod::ClientSecret);
        let env = |name: &str| match name {
            "AZURE_CLIENT_ID" => Some("pod-client".to_owned()),
            "AZURE_FEDERATED_TOKEN_FILE" => Some("/var/run/secrets/azure/tokens/azure-identity-token".to_owned()),
            "AZURE_TENANT_ID" => Some(String::new()),
            _ => None,
        };
        let config = config.with_workload_identity_env(env);
        assert_eq!(config.aad_client_id, "pod-client");
        assert_eq!(
            config.auth_method(),
            AuthMethod::WorkloadIdentity {
                token_file: "/var/run/secrets/azure/tokens/azure-identity-token".into()
            }
        );
        assert_eq!(
            config.aad_client_secret.as_ref().map(|s| s.expose_secret().to_owned()),
            Some("s3cr3t-value".to_owned())
        );
    }
}
