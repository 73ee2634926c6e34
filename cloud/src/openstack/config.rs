//! The OpenStack settings an operator already has: `cloud.conf` (gcfg, the names of
//! cloud-provider-openstack's `pkg/client` `AuthOpts`: `[Global]` `auth-url`,
//! `region`, `application-credential-id|name|secret`, `user-id`/`username`,
//! `password`, `tenant-id`/`tenant-name`, `trust-id`, `domain-*`, `tenant-domain-*`,
//! `user-domain-*`, `os-endpoint-type`, `ca-file`, `tls-insecure`, `use-clouds`,
//! `clouds-file`, `cloud`; `[BlockStorage] ignore-volume-az`) or a `clouds.yaml`
//! entry (`clouds.NAME.auth.*`, `region_name`, `interface`, `cacert`, `verify`).
//!
//! As upstream, with `use-clouds` the `clouds.yaml` entry fills what `cloud.conf`
//! leaves empty. Unlike upstream, settings that cannot work are refused when read,
//! each error naming the file and the field and saying what to set; `tls-insecure`
//! (or `verify: false`) is refused unless the caller explicitly allows it. Client
//! certificates (`cert-file`, `key-file`) are not supported and refused. Secrets are
//! [`SecretString`]s: no error or `Debug` shows them.

use std::path::{Path, PathBuf};

use secrecy::SecretString;
use serde_yaml_ng::Value;

use crate::endpoint::SecureEndpoint;
use crate::gcfg::{Gcfg, Section};

/// Far above any real `cloud.conf` or `clouds.yaml` (a few KB).
pub const MAX_CONFIG_FILE: u64 = 1 << 20;

/// Why the settings were not read. Each names the file.
#[derive(Debug, thiserror::Error)]
pub enum OpenStackConfigError {
    #[error("cannot read the OpenStack config: {0}")]
    File(#[from] crate::files::FileError),
    #[error("{path}: {problem}")]
    Syntax { path: PathBuf, problem: String },
    /// A field that is missing, malformed or refused: `[Global] auth-url`,
    /// `clouds.NAME.auth.auth_url`.
    #[error("{path}: {field}: {problem}")]
    Field {
        path: PathBuf,
        field: String,
        problem: String,
    },
    /// `tls-insecure` (`verify: false`) without the caller's consent; the caller's
    /// message says how to give it.
    #[error(
        "{path}: {field}: turns off the checking of Keystone's and Cinder's certificates, which lets anyone on the path take the credential; set ca-file to the cloud's CA bundle instead"
    )]
    InsecureRefused { path: PathBuf, field: String },
}

/// Which endpoints of the catalog to use (`os-endpoint-type`, `interface`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Interface {
    #[default]
    Public,
    Internal,
    Admin,
}

impl Interface {
    pub fn as_str(self) -> &'static str {
        match self {
            Interface::Public => "public",
            Interface::Internal => "internal",
            Interface::Admin => "admin",
        }
    }

    /// `public`, `internal`, `admin`, also with the v2 catalog's `URL` suffix
    /// (`publicURL`), as gophercloud's clientconfig accepts them.
    pub fn parse(value: &str) -> Option<Self> {
        let value = value.trim();
        let value = value.strip_suffix("URL").unwrap_or(value);
        [Interface::Public, Interface::Internal, Interface::Admin]
            .into_iter()
            .find(|i| i.as_str().eq_ignore_ascii_case(value))
    }
}

/// A domain, by ID or name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Domain {
    Id(String),
    Name(String),
}

/// A user or project, by ID, or by name within a domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Named {
    Id(String),
    Name { name: String, domain: Domain },
}

/// What a password token is scoped to: the catalog comes with a scoped token only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    Project(Named),
    Trust(String),
}

/// How to get a token from Keystone.
#[derive(Debug, Clone)]
pub enum Credential {
    /// An application credential by ID, or by name with its user; scoped to the
    /// credential's own project.
    ApplicationCredential {
        id: Option<String>,
        name: Option<String>,
        user: Option<Named>,
        secret: SecretString,
    },
    Password {
        user: Named,
        password: SecretString,
        scope: Scope,
    },
}

/// What the suite reads from `cloud.conf` or `clouds.yaml`. `Debug` shows no secret.
#[derive(Debug, Clone)]
pub struct OpenStackConfig {
    /// The file read, for messages.
    pub path: PathBuf,
    /// Keystone: `auth-url`, with or without its `/v3`.
    pub auth_url: SecureEndpoint,
    /// The catalog region, and the region label of every volume.
    pub region: String,
    pub interface: Interface,
    pub credential: Credential,
    /// `ca-file`/`cacert`: the CAs trusted for Keystone and Cinder instead of the
    /// system's (as upstream's `cert.NewPool`).
    pub ca_file: Option<PathBuf>,
    pub(crate) ca_roots: Vec<reqwest::Certificate>,
    /// `tls-insecure` (or `verify: false`), which the caller allowed.
    pub insecure: bool,
    /// `[BlockStorage] ignore-volume-az`.
    pub ignore_volume_az: bool,
}

/// The settings before they are checked, by cloud-provider-openstack's names.
#[derive(Default)]
struct Raw {
    auth_url: Option<String>,
    region: Option<String>,
    interface: Option<String>,
    user_id: Option<String>,
    username: Option<String>,
    password: Option<String>,
    tenant_id: Option<String>,
    tenant_name: Option<String>,
    trust_id: Option<String>,
    domain_id: Option<String>,
    domain_name: Option<String>,
    tenant_domain_id: Option<String>,
    tenant_domain_name: Option<String>,
    user_domain_id: Option<String>,
    user_domain_name: Option<String>,
    app_id: Option<String>,
    app_name: Option<String>,
    app_secret: Option<String>,
    ca_file: Option<String>,
    client_cert: Option<String>,
    insecure: bool,
}

/// How a format names each field in errors: (`cloud.conf` key, `clouds.yaml` path).
const NAMES: &[(&str, &str)] = &[
    ("auth-url", "auth.auth_url"),
    ("region", "region_name"),
    ("os-endpoint-type", "interface"),
    ("user-id", "auth.user_id"),
    ("username", "auth.username"),
    ("password", "auth.password"),
    ("tenant-id", "auth.project_id"),
    ("tenant-name", "auth.project_name"),
    ("trust-id", "auth.trust_id"),
    ("domain-id", "auth.domain_id"),
    ("domain-name", "auth.domain_name"),
    ("tenant-domain-id", "auth.project_domain_id"),
    ("tenant-domain-name", "auth.project_domain_name"),
    ("user-domain-id", "auth.user_domain_id"),
    ("user-domain-name", "auth.user_domain_name"),
    ("application-credential-id", "auth.application_credential_id"),
    ("application-credential-name", "auth.application_credential_name"),
    ("application-credential-secret", "auth.application_credential_secret"),
    ("ca-file", "cacert"),
    ("cert-file", "cert"),
    ("tls-insecure", "verify"),
];

/// The file being read and how it names fields.
struct Source<'a> {
    path: &'a Path,
    /// `None`: `cloud.conf`; `Some(cloud)`: `clouds.yaml`'s entry.
    cloud: Option<&'a str>,
}

impl Source<'_> {
    fn field(&self, key: &str) -> String {
        match self.cloud {
            None => format!("[Global] {key}"),
            Some(cloud) => {
                let path = NAMES.iter().find(|(k, _)| *k == key).map_or(key, |(_, p)| p);
                format!("clouds.{cloud}.{path}")
            }
        }
    }

    fn refused(&self, key: &str, problem: impl Into<String>) -> OpenStackConfigError {
        OpenStackConfigError::Field {
            path: self.path.to_owned(),
            field: self.field(key),
            problem: problem.into(),
        }
    }
}

impl OpenStackConfig {
    /// Reads `cloud.conf` at `path` (and the `clouds.yaml` entry it names with
    /// `use-clouds`); `allow_insecure` is the caller's explicit consent to
    /// `tls-insecure = true`.
    pub fn read_cloud_conf(path: &Path, allow_insecure: bool) -> Result<Self, OpenStackConfigError> {
        let text = crate::files::read_regular_to_string(path, MAX_CONFIG_FILE)?;
        Self::parse_cloud_conf(path, &text, allow_insecure)
    }

    /// [`Self::read_cloud_conf`] of `text`, the contents of `path`.
    pub fn parse_cloud_conf(path: &Path, text: &str, allow_insecure: bool) -> Result<Self, OpenStackConfigError> {
        let syntax = |problem: String| OpenStackConfigError::Syntax {
            path: path.to_owned(),
            problem,
        };
        let gcfg = Gcfg::parse(text).map_err(|e| syntax(format!("not a gcfg (INI-like) file: {e}")))?;
        let source = Source { path, cloud: None };
        let global = gcfg
            .section("Global")
            .ok_or_else(|| syntax("no [Global] section: it holds auth-url, region and the credential".into()))?;
        let bool_of = |section: &Section, name: &str, key: &str| {
            section.get_bool(key).map_err(|e| OpenStackConfigError::Field {
                path: path.to_owned(),
                field: format!("[{name}] {key}"),
                problem: format!("{e}: true or false is needed"),
            })
        };
        let text = |key: &str| {
            global
                .get(key)
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
        };
        let mut raw = Raw::default();
        for (key, _) in NAMES {
            let slot = match *key {
                "tls-insecure" => continue,
                key => raw.slot(key),
            };
            *slot = text(key);
        }
        raw.client_cert = raw.client_cert.or_else(|| text("key-file"));
        raw.insecure = bool_of(&global, "Global", "tls-insecure")?.unwrap_or(false);
        let ignore_volume_az = match gcfg.section("BlockStorage") {
            Some(section) => bool_of(&section, "BlockStorage", "ignore-volume-az")?.unwrap_or(false),
            None => false,
        };
        if bool_of(&global, "Global", "use-clouds")?.unwrap_or(false) {
            let file = text("clouds-file").ok_or_else(|| {
                source.refused("clouds-file", "not set, but use-clouds is: name the clouds.yaml file")
            })?;
            let cloud = text("cloud")
                .ok_or_else(|| source.refused("cloud", "not set, but use-clouds is: name the clouds.yaml entry"))?;
            let file = PathBuf::from(file);
            let yaml = crate::files::read_regular_to_string(&file, MAX_CONFIG_FILE)?;
            let entry = clouds_entry(&file, &yaml, &cloud)?;
            raw.fill_from(entry);
        }
        let mut config = raw.check(&source, allow_insecure)?;
        config.ignore_volume_az = ignore_volume_az;
        Ok(config)
    }

    /// Reads the entry `cloud` of `clouds.yaml` at `path` (`--os-cloud`).
    pub fn read_clouds_yaml(path: &Path, cloud: &str, allow_insecure: bool) -> Result<Self, OpenStackConfigError> {
        let text = crate::files::read_regular_to_string(path, MAX_CONFIG_FILE)?;
        Self::parse_clouds_yaml(path, &text, cloud, allow_insecure)
    }

    /// [`Self::read_clouds_yaml`] of `text`, the contents of `path`.
    pub fn parse_clouds_yaml(
        path: &Path,
        text: &str,
        cloud: &str,
        allow_insecure: bool,
    ) -> Result<Self, OpenStackConfigError> {
        let raw = clouds_entry(path, text, cloud)?;
        raw.check(
            &Source {
                path,
                cloud: Some(cloud),
            },
            allow_insecure,
        )
    }
}

impl Raw {
    fn slot(&mut self, key: &str) -> &mut Option<String> {
        match key {
            "auth-url" => &mut self.auth_url,
            "region" => &mut self.region,
            "os-endpoint-type" => &mut self.interface,
            "user-id" => &mut self.user_id,
            "username" => &mut self.username,
            "password" => &mut self.password,
            "tenant-id" => &mut self.tenant_id,
            "tenant-name" => &mut self.tenant_name,
            "trust-id" => &mut self.trust_id,
            "domain-id" => &mut self.domain_id,
            "domain-name" => &mut self.domain_name,
            "tenant-domain-id" => &mut self.tenant_domain_id,
            "tenant-domain-name" => &mut self.tenant_domain_name,
            "user-domain-id" => &mut self.user_domain_id,
            "user-domain-name" => &mut self.user_domain_name,
            "application-credential-id" => &mut self.app_id,
            "application-credential-name" => &mut self.app_name,
            "application-credential-secret" => &mut self.app_secret,
            "ca-file" => &mut self.ca_file,
            _ => &mut self.client_cert,
        }
    }

    /// Fills what is empty from `other` (upstream's `ReadClouds`: cloud.conf wins).
    fn fill_from(&mut self, mut other: Raw) {
        for (key, _) in NAMES.iter().filter(|(k, _)| *k != "tls-insecure") {
            let theirs = other.slot(key).take();
            let ours = self.slot(key);
            if ours.is_none() {
                *ours = theirs;
            }
        }
        self.insecure |= other.insecure;
    }

    fn check(self, source: &Source<'_>, allow_insecure: bool) -> Result<OpenStackConfig, OpenStackConfigError> {
        let auth_url = self.auth_url.as_deref().ok_or_else(|| {
            source.refused(
                "auth-url",
                "not set: Keystone's URL is needed, e.g. https://keystone.example:5000/v3",
            )
        })?;
        let auth_url =
            SecureEndpoint::parse("the URL", auth_url).map_err(|e| source.refused("auth-url", e.to_string()))?;
        let region = self.region.clone().ok_or_else(|| {
            source.refused(
                "region",
                "not set: the region picks Cinder's endpoint in the catalog and is every volume's region label",
            )
        })?;
        if let Err(problem) = check_label_value(&region) {
            return Err(source.refused("region", problem));
        }
        let interface = match self.interface.as_deref() {
            None => Interface::default(),
            Some(value) => Interface::parse(value).ok_or_else(|| {
                source.refused(
                    "os-endpoint-type",
                    format!("{value:?} is not public, internal or admin"),
                )
            })?,
        };
        if self.client_cert.is_some() {
            return Err(source.refused(
                "cert-file",
                "client certificates are not supported: use an application credential or a password",
            ));
        }
        if self.insecure && !allow_insecure {
            return Err(OpenStackConfigError::InsecureRefused {
                path: source.path.to_owned(),
                field: source.field("tls-insecure"),
            });
        }
        let credential = self.credential(source)?;
        let (ca_file, ca_roots) = match &self.ca_file {
            None => (None, Vec::new()),
            Some(file) => {
                let file = PathBuf::from(file);
                let roots = crate::http::read_ca_file(&file).map_err(|problem| source.refused("ca-file", problem))?;
                (Some(file), roots)
            }
        };
        Ok(OpenStackConfig {
            path: source.path.to_owned(),
            auth_url,
            region,
            interface,
            credential,
            ca_file,
            ca_roots,
            insecure: self.insecure,
            ignore_volume_az: false,
        })
    }

    fn credential(&self, source: &Source<'_>) -> Result<Credential, OpenStackConfigError> {
        let domain = |id: &Option<String>, name: &Option<String>| match (id, name) {
            (Some(id), _) => Some(Domain::Id(id.clone())),
            (None, Some(name)) => Some(Domain::Name(name.clone())),
            (None, None) => None,
        };
        let user_domain =
            domain(&self.user_domain_id, &self.user_domain_name).or_else(|| domain(&self.domain_id, &self.domain_name));
        let user = || -> Result<Option<Named>, OpenStackConfigError> {
            match (&self.user_id, &self.username) {
                (Some(id), _) => Ok(Some(Named::Id(id.clone()))),
                (None, Some(name)) => {
                    let domain = user_domain.clone().ok_or_else(|| {
                        source.refused("user-domain-name", "not set: a user given by name needs its domain (user-domain-name or user-domain-id, or domain-name)")
                    })?;
                    Ok(Some(Named::Name {
                        name: name.clone(),
                        domain,
                    }))
                }
                (None, None) => Ok(None),
            }
        };
        if self.app_id.is_some() || self.app_name.is_some() || self.app_secret.is_some() {
            let secret = self.app_secret.clone().ok_or_else(|| {
                source.refused(
                    "application-credential-secret",
                    "not set: an application credential needs its secret",
                )
            })?;
            if self.app_id.is_none() && self.app_name.is_none() {
                return Err(source.refused(
                    "application-credential-id",
                    "not set: name the application credential by ID (or by name with its user)",
                ));
            }
            let user = user()?;
            if self.app_id.is_none() && user.is_none() {
                return Err(source.refused(
                    "username",
                    "not set: an application credential given by name needs its user (user-id, or username with its domain)",
                ));
            }
            return Ok(Credential::ApplicationCredential {
                id: self.app_id.clone(),
                name: self.app_name.clone(),
                user: if self.app_id.is_some() { None } else { user },
                secret: SecretString::from(secret),
            });
        }
        let password = self.password.clone().ok_or_else(|| {
            source.refused(
                "password",
                "no credential: set application-credential-id and application-credential-secret, or a user and password",
            )
        })?;
        let user = user()?.ok_or_else(|| {
            source.refused(
                "username",
                "not set: a password needs its user (user-id, or username with its domain)",
            )
        })?;
        let scope = if let Some(trust) = &self.trust_id {
            Scope::Trust(trust.clone())
        } else if let Some(id) = &self.tenant_id {
            Scope::Project(Named::Id(id.clone()))
        } else if let Some(name) = &self.tenant_name {
            let domain = domain(&self.tenant_domain_id, &self.tenant_domain_name)
                .or_else(|| domain(&self.domain_id, &self.domain_name))
                .ok_or_else(|| {
                    source.refused("tenant-domain-name", "not set: a project given by name needs its domain (tenant-domain-name or tenant-domain-id, or domain-name)")
                })?;
            Scope::Project(Named::Name {
                name: name.clone(),
                domain,
            })
        } else {
            return Err(source.refused(
                "tenant-id",
                "not set: a password token needs a project (tenant-id, or tenant-name with its domain) to carry the service catalog",
            ));
        };
        Ok(Credential::Password {
            user,
            password: SecretString::from(password),
            scope,
        })
    }
}

/// A label value: what the region becomes. Checked here so the error names the field.
fn check_label_value(value: &str) -> Result<(), String> {
    let ok = value.len() <= 63
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && value.starts_with(|c: char| c.is_ascii_alphanumeric())
        && value.ends_with(|c: char| c.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{value:?} cannot be a label value (at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit)"
        ))
    }
}

/// The entry `cloud` of a `clouds.yaml` document, as [`Raw`] settings.
fn clouds_entry(path: &Path, text: &str, cloud: &str) -> Result<Raw, OpenStackConfigError> {
    let document: Value = crate::yaml::from_str(text).map_err(|e| OpenStackConfigError::Syntax {
        path: path.to_owned(),
        problem: format!("not YAML: {e}"),
    })?;
    let source = Source {
        path,
        cloud: Some(cloud),
    };
    let entry = document.get("clouds").and_then(|c| c.get(cloud)).ok_or_else(|| {
        let known: Vec<&str> = document
            .get("clouds")
            .and_then(Value::as_mapping)
            .map(|m| m.keys().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        OpenStackConfigError::Field {
            path: path.to_owned(),
            field: format!("clouds.{cloud}"),
            problem: format!(
                "no such cloud; the file has: {}",
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            ),
        }
    })?;
    let text = |value: Option<&Value>, key: &str| -> Result<Option<String>, OpenStackConfigError> {
        match value {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.trim().to_owned()).filter(|t| !t.is_empty())),
            Some(Value::Number(number)) => Ok(Some(number.to_string())),
            Some(_) => Err(source.refused(key, "is not text")),
        }
    };
    let auth = entry.get("auth");
    let mut raw = Raw::default();
    for (key, yaml) in NAMES {
        let value = match yaml.strip_prefix("auth.") {
            Some(name) => auth.and_then(|a| a.get(name)),
            None => entry.get(*yaml),
        };
        match *key {
            "tls-insecure" => match value {
                None | Some(Value::Null) => {}
                Some(Value::Bool(verify)) => raw.insecure = !verify,
                Some(_) => return Err(source.refused(key, "is not true or false")),
            },
            _ => *raw.slot(key) = text(value, key)?,
        }
    }
    // os-client-config's older names.
    let legacy = |name: &str| auth.and_then(|a| a.get(name));
    raw.tenant_id = raw.tenant_id.or(text(legacy("tenant_id"), "tenant-id")?);
    raw.tenant_name = raw.tenant_name.or(text(legacy("tenant_name"), "tenant-name")?);
    raw.interface = raw.interface.or(text(entry.get("endpoint_type"), "os-endpoint-type")?);
    raw.client_cert = raw.client_cert.or(text(entry.get("key"), "cert-file")?);
    Ok(raw)
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
