//! `static`: credentials from a Docker `config.json`.
//!
//! The answer is cached by kubelet per registry (`cacheKeyType: Registry`),
//! so it must serve every image on that registry: it carries each entry
//! whose host matches the image's registry, path-scoped ones included, and
//! kubelet's keyring picks the entry for each image by path.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use secrecy::SecretString;
use serde::Deserialize;

use super::{BackendError, CredentialBackend};
use crate::image;
use crate::kubelet_config::UTF8_BOM;
use crate::matching::{DOCKER_HUB_KEY, is_docker_hub_image, keyring_key, matches};
use crate::protocol::{CacheKeyType, CredentialRequest, Credentials, RegistryAuth};

#[derive(Debug, Clone)]
pub struct StaticBackend {
    docker_config: PathBuf,
    cache_duration: Option<Duration>,
}

/// Far above any real Docker config (a few KB per hundred registries).
pub const MAX_DOCKER_CONFIG: u64 = 4 << 20;

#[derive(Debug, thiserror::Error)]
pub enum DockerConfigError {
    #[error("cannot read --docker-config {0}")]
    Read(#[source] cloud_access::files::FileError),
    #[error(
        "--docker-config {path} is not valid JSON (line {line}, column {column}): it must be a Docker config.json with an \"auths\" object"
    )]
    Json { path: PathBuf, line: usize, column: usize },
    #[error("--docker-config {path}: {field} {problem}")]
    Entry {
        path: PathBuf,
        field: String,
        problem: &'static str,
    },
}

/// The parts of config.json kubelet can use. Credential helpers and
/// identity tokens have no place in kubelet's `AuthConfig`; an entry with
/// nothing but a token is named in an error.
#[derive(Deserialize)]
struct DockerConfigFile {
    auths: Option<BTreeMap<String, DockerAuthEntry>>,
}

#[derive(Deserialize)]
pub(crate) struct DockerAuthEntry {
    auth: Option<String>,
    username: Option<String>,
    password: Option<String>,
    /// An OAuth refresh token (`identitytoken`) or bearer token
    /// (`registrytoken`): only whether one is there is kept.
    #[serde(default, deserialize_with = "present")]
    identitytoken: bool,
    #[serde(default, deserialize_with = "present")]
    registrytoken: bool,
}

/// Whether a field holds something other than null or an empty string; its
/// value, a secret, is dropped at once.
fn present<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    let value = serde_json::Value::deserialize(deserializer)?;
    Ok(!(value.is_null() || value.as_str() == Some("")))
}

impl StaticBackend {
    pub fn new(docker_config: PathBuf, cache_duration: Option<Duration>) -> Self {
        Self {
            docker_config,
            cache_duration,
        }
    }

    /// Every usable entry of the file, keyed as written. Any malformed
    /// entry is an error: a half-read file would hide the problem.
    pub fn load(path: &Path) -> Result<BTreeMap<String, RegistryAuth>, DockerConfigError> {
        let bytes = cloud_access::files::read_regular(path, MAX_DOCKER_CONFIG).map_err(DockerConfigError::Read)?;
        // Editors on Windows start files with a byte order mark.
        let bytes = bytes.strip_prefix(UTF8_BOM).unwrap_or(&bytes);
        // Entries are parsed by hand below so that no error quotes a value.
        let file: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| DockerConfigError::Json {
            path: path.to_owned(),
            line: e.line(),
            column: e.column(),
        })?;
        let entry_error = |field: String, problem| DockerConfigError::Entry {
            path: path.to_owned(),
            field,
            problem,
        };
        let file: DockerConfigFile = serde_json::from_value(file)
            .map_err(|_| entry_error("\"auths\"".into(), "must be an object of registry entries"))?;
        let auths = file.auths.ok_or_else(|| {
            entry_error(
                "\"auths\"".into(),
                "is missing: log in with `docker login --config DIR` or write the entries by hand (credential helpers are not supported)",
            )
        })?;
        usable_entries(auths, "auths").map_err(|p| entry_error(p.field, p.problem))
    }
}

/// Why a Docker config entry cannot be used: the field, as a path into the
/// document (`auths["reg.io"].auth`), and the problem. Never a value.
#[derive(Debug)]
pub(crate) struct EntryProblem {
    pub field: String,
    pub problem: &'static str,
}

/// Every usable entry of a map of registry entries (config.json's `auths`,
/// or a whole legacy `.dockercfg`), keyed as written; `prefix` starts each
/// field path in a problem. Any malformed entry is an error: a half-read
/// document would hide the problem.
pub(crate) fn usable_entries(
    auths: BTreeMap<String, DockerAuthEntry>,
    prefix: &str,
) -> Result<BTreeMap<String, RegistryAuth>, EntryProblem> {
    let entry_error = |field: String, problem| EntryProblem { field, problem };
    let mut out = BTreeMap::new();
    for (key, entry) in auths {
        let field = |name: &str| format!("{prefix}[{key:?}].{name}");
        let credentials = match (entry.auth.filter(|a| !a.is_empty()), entry.username, entry.password) {
            (Some(auth), _, _) => {
                let decoded = STANDARD
                    .decode(auth.trim())
                    .ok()
                    .and_then(|bytes| String::from_utf8(bytes).ok())
                    .ok_or_else(|| entry_error(field("auth"), "is not base64 of \"username:password\""))?;
                let (username, password) = decoded.split_once(':').ok_or_else(|| {
                    entry_error(
                        field("auth"),
                        "decodes to text without the ':' between username and password",
                    )
                })?;
                Some((username.to_owned(), password.to_owned()))
            }
            (None, Some(username), Some(password)) => Some((username, password)),
            (None, Some(_), None) => return Err(entry_error(field("password"), "is missing next to \"username\"")),
            (None, None, Some(_)) => return Err(entry_error(field("username"), "is missing next to \"password\"")),
            // kubelet's answer holds a username and password only.
            (None, None, None) if entry.identitytoken || entry.registrytoken => {
                let name = if entry.identitytoken {
                    "identitytoken"
                } else {
                    "registrytoken"
                };
                return Err(entry_error(
                    field(name),
                    "cannot be used: kubelet takes a username and password only; give \"auth\" or \"username\" and \"password\" for this registry, or remove the entry",
                ));
            }
            // Docker writes empty entries when a credential store holds
            // the secret; they carry nothing kubelet can use.
            _ => None,
        };
        if let Some((username, password)) = credentials {
            out.insert(
                key,
                RegistryAuth {
                    username,
                    password: SecretString::from(password),
                },
            );
        }
    }
    Ok(out)
}

/// The entries that serve `repository`'s registry, by kubelet's rules.
pub fn entries_for_registry(
    entries: BTreeMap<String, RegistryAuth>,
    repository: &str,
) -> BTreeMap<String, RegistryAuth> {
    let registry = image::registry(repository);
    let host_of = |key: &str| keyring_key(key).map(|k| image::registry(&k).to_owned());
    let (matched, rest): (BTreeMap<_, _>, BTreeMap<_, _>) = entries
        .into_iter()
        .partition(|(key, _)| host_of(key).is_some_and(|host| matches(&host, registry)));
    if !matched.is_empty() || !is_docker_hub_image(repository) {
        return matched;
    }
    // kubelet's fallback: Docker Hub images use the `index.docker.io` entry.
    rest.into_iter()
        .filter(|(key, _)| keyring_key(key).as_deref() == Some(DOCKER_HUB_KEY))
        .collect()
}

impl CredentialBackend for StaticBackend {
    async fn credentials(&self, request: &CredentialRequest) -> Result<Credentials, BackendError> {
        let entries = Self::load(&self.docker_config)?;
        let repository = image::repository(&request.image);
        let auth = entries_for_registry(entries, &repository);
        tracing::debug!(
            image = %repository,
            keys = ?auth.keys().collect::<Vec<_>>(),
            "docker config entries for the image's registry"
        );
        Ok(Credentials {
            cache_key_type: CacheKeyType::Registry,
            cache_duration: self.cache_duration,
            auth,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(keys: &[&str]) -> BTreeMap<String, RegistryAuth> {
        keys.iter()
            .map(|k| {
                (
                    (*k).to_owned(),
                    RegistryAuth {
                        username: "u".into(),
                        password: SecretString::from("p"),
                    },
                )
            })
            .collect()
    }

    fn keys_for(keys: &[&str], repository: &str) -> Vec<String> {
        entries_for_registry(entries(keys), repository).into_keys().collect()
    }

    #[test]
    fn keeps_every_entry_of_the_registry_including_path_scoped_ones() {
        let all = [
            "reg.io",
            "https://reg.io/v2/",
            "reg.io/team-a",
            "reg.io/team-b",
            "other.io",
            "reg.io:5000",
        ];
        assert_eq!(
            keys_for(&all, "reg.io/team-a/app"),
            ["https://reg.io/v2/", "reg.io", "reg.io/team-a", "reg.io/team-b"]
        );
        assert_eq!(keys_for(&all, "reg.io:5000/app"), ["reg.io:5000"]);
        assert!(keys_for(&all, "third.io/app").is_empty());
    }

    #[test]
    fn wildcard_keys_match_by_label() {
        assert_eq!(keys_for(&["*.reg.io", "reg.io"], "eu.reg.io/app"), ["*.reg.io"]);
    }

    #[test]
    fn docker_hub_falls_back_to_index_docker_io() {
        let keys = ["https://index.docker.io/v1/", "quay.io"];
        assert_eq!(
            keys_for(&keys, "docker.io/library/nginx"),
            ["https://index.docker.io/v1/"]
        );
        assert!(keys_for(&keys, "ghcr.io/x/y").is_empty());
        // A direct docker.io entry wins over the fallback, as in kubelet.
        assert_eq!(
            keys_for(&["docker.io", "index.docker.io"], "docker.io/library/nginx"),
            ["docker.io"]
        );
    }
}
