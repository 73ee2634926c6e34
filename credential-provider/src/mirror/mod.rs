//! Registry mirrors: an image kubelet asks for on one registry (the
//! source) that the container runtime pulls from another (the mirror).
//!
//! kubelet matches credentials against the image as the pod names it
//! (`docker.io/library/nginx`), and hands the runtime the credential it
//! picked with no server address; containerd (`ParseAuth`: an empty
//! `ServerAddress` matches every host) and CRI-O (one `DockerAuthConfig`
//! for every source) then send that one credential to each host they try,
//! mirror first. So a mirror that wants credentials gets them only if the
//! plugin answers under the source's key with the mirror's credentials:
//! [`MirrorSettings::resolve`] finds the mirror, the backend is asked for
//! the image on the mirror, and [`rekey`] files the credential kubelet's
//! keyring would pick for that image under the source.
//!
//! Mirrors come from `--registry-mirror SRC:DST` ([`parse_mirror`]), from
//! containerd's `hosts.toml` ([`containerd`]) or from CRI-O's
//! `registries.conf` ([`crio`]), tried in that order.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::matching::{DOCKER_HUB_KEY, is_docker_hub_image, keyring_key, matches};
use crate::protocol::{CacheKeyType, Credentials, RegistryAuth};

pub mod containerd;
pub mod crio;

/// A registry, or a repository path within one: `host[:port][/path]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Location {
    /// `host[:port]`, lowercase.
    pub host: String,
    /// The repository path below the host (`team/proxy`), or empty.
    pub path: String,
}

impl Location {
    /// Reads `host[:port][/path]`: a host of DNS labels (or an IPv4
    /// address), a port from 1 to 65535, path components of lowercase
    /// letters, digits, `.`, `_` and `-` (the repository grammar's).
    pub fn parse(text: &str) -> Result<Location, &'static str> {
        let (host, path) = text.split_once('/').unwrap_or((text, ""));
        cloud_access::names::check_host_port(host)?;
        let path = path.trim_end_matches('/');
        if !path.is_empty() && !path.split('/').all(is_path_component) {
            return Err("a repository path is components of lowercase letters, digits, '.', '_' and '-' between '/'");
        }
        Ok(Location {
            host: host.to_ascii_lowercase(),
            path: path.to_owned(),
        })
    }

    /// `host` or `host/path`: the key kubelet's keyring matches.
    pub fn key(&self) -> String {
        if self.path.is_empty() {
            self.host.clone()
        } else {
            format!("{}/{}", self.host, self.path)
        }
    }

    /// The rest of `repository`'s path when it lies under this location
    /// (`Some("")` for the location itself).
    pub fn remainder<'a>(&self, repository: &'a str) -> Option<&'a str> {
        let (host, path) = repository.split_once('/').unwrap_or((repository, ""));
        if !host.eq_ignore_ascii_case(&self.host) {
            return None;
        }
        if self.path.is_empty() {
            return Some(path);
        }
        match path.strip_prefix(self.path.as_str())? {
            "" => Some(""),
            rest => rest.strip_prefix('/'),
        }
    }

    /// The repository `rest` names under this location.
    pub fn join(&self, rest: &str) -> String {
        match (self.path.is_empty(), rest.is_empty()) {
            (true, true) => self.host.clone(),
            (true, false) => format!("{}/{rest}", self.host),
            (false, true) => self.key(),
            (false, false) => format!("{}/{}/{rest}", self.host, self.path),
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.key())
    }
}

fn is_path_component(component: &str) -> bool {
    !component.is_empty()
        && component.len() <= 255
        && component
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-'))
        && component.as_bytes()[0].is_ascii_alphanumeric()
}

/// One `--registry-mirror SRC:DST`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryMirror {
    pub source: Location,
    pub target: Location,
}

/// Reads `SRC:DST`, each `host[:port][/path]`: a part of digits (up to a
/// `/`) right after a host is its port, so `a:5000/x:b` is `a:5000/x` to
/// `b`, and `a:b:443` is `a` to `b:443`.
pub fn parse_mirror(text: &str) -> Result<RegistryMirror, &'static str> {
    let parts: Vec<&str> = text.trim().split(':').collect();
    let is_port = |p: &str| {
        let digits = p.split_once('/').map_or(p, |(port, _)| port);
        !digits.is_empty() && digits.len() <= 5 && digits.bytes().all(|b| b.is_ascii_digit())
    };
    // One side: a host, then its port when the next part is one (and the
    // host has no path yet).
    let take = |parts: &[&str]| -> Option<(String, usize)> {
        let first = *parts.first()?;
        match parts.get(1) {
            Some(port) if !first.contains('/') && is_port(port) => Some((format!("{first}:{port}"), 2)),
            _ => Some((first.to_owned(), 1)),
        }
    };
    let (source, used) = take(&parts).ok_or("it is empty")?;
    let rest = &parts[used..];
    let (target, used) = take(rest).ok_or("it has no ':' between SRC and DST")?;
    if used < rest.len() {
        return Err("it has too many ':' (a port is digits only)");
    }
    if source.is_empty() || target.is_empty() {
        return Err("SRC and DST must each be host[:port][/path]");
    }
    Ok(RegistryMirror {
        source: Location::parse(&source)?,
        target: Location::parse(&target)?,
    })
}

/// Where a mirror was read from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "file", rename_all = "kebab-case")]
pub enum Origin {
    /// `--registry-mirror` (or its variable).
    Flag,
    /// containerd's hosts.toml at this path.
    HostsToml(PathBuf),
    /// CRI-O's registries.conf at this path.
    RegistriesConf(PathBuf),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Flag => f.write_str("--registry-mirror"),
            Origin::HostsToml(path) | Origin::RegistriesConf(path) => write!(f, "{}", path.display()),
        }
    }
}

/// An image the runtime pulls through a mirror, and how it is answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mirroring {
    /// The repository kubelet asked for.
    pub repository: String,
    /// The key the answer is filed under: the source the mirror serves.
    pub source_key: String,
    /// The repository on the mirror, which the backend is asked for.
    pub target: String,
    pub origin: Origin,
    /// Hosts the runtime tries after the mirror, with the same credential
    /// (the source's own registry unless the runtime's config replaces it).
    pub then_tries: Vec<String>,
}

impl Mirroring {
    /// One line for `explain` and the logs.
    pub fn describe(&self) -> String {
        let mut line = format!(
            "pulled through the mirror {} ({}): the backend is asked for it, and its credential is answered under {}",
            self.target, self.origin, self.source_key
        );
        if !self.then_tries.is_empty() {
            line.push_str(&format!(
                "; when the mirror fails the runtime sends the same credential to {}",
                self.then_tries.join(", ")
            ));
        }
        line
    }
}

/// Every place mirrors are read from, from the flags.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MirrorSettings {
    pub mirrors: Vec<RegistryMirror>,
    /// containerd's `config_path` directories, in its order.
    pub containerd_hosts_dirs: Vec<PathBuf>,
    pub registries_conf: Option<PathBuf>,
}

impl MirrorSettings {
    pub fn is_empty(&self) -> bool {
        self.mirrors.is_empty() && self.containerd_hosts_dirs.is_empty() && self.registries_conf.is_none()
    }

    /// The mirror `repository` is pulled through: the flag whose source is
    /// the longest that holds it, else containerd's hosts.toml for its
    /// registry, else CRI-O's registries.conf. `None`: pulled from where
    /// it is named. Reads a file only when it is configured.
    pub fn resolve(&self, repository: &str) -> Result<Option<Mirroring>, MirrorError> {
        let flag = self
            .mirrors
            .iter()
            .filter_map(|m| m.source.remainder(repository).map(|rest| (m, rest)))
            .max_by_key(|(m, _)| m.source.key().len());
        if let Some((mirror, rest)) = flag {
            return Ok(Some(Mirroring {
                repository: repository.to_owned(),
                source_key: mirror.source.key(),
                target: mirror.target.join(rest),
                origin: Origin::Flag,
                then_tries: Vec::new(),
            }));
        }
        if !self.containerd_hosts_dirs.is_empty()
            && let Some(found) = containerd::mirror_for(&self.containerd_hosts_dirs, repository)?
        {
            return Ok(Some(found));
        }
        match &self.registries_conf {
            Some(path) => crio::mirror_for(path, repository),
            None => Ok(None),
        }
    }
}

/// Why mirrors could not be read.
#[derive(Debug, thiserror::Error)]
pub enum MirrorError {
    /// A runtime's config named by `flag` that cannot be read.
    #[error("{flag}: {source}")]
    Read {
        flag: &'static str,
        source: cloud_access::files::FileError,
    },
    /// A runtime's config this plugin was pointed at, which it cannot read
    /// as the runtime does: `problem` names the field.
    #[error("{path}: {problem} (the {runtime} config named by {flag})")]
    Config {
        path: PathBuf,
        runtime: &'static str,
        flag: &'static str,
        problem: String,
    },
}

/// `text` as a TOML table, or the parser's first line and the line of the
/// file it points at (counted in bytes, so no offset can split a character).
fn parse_toml(text: &str) -> Result<toml::Table, String> {
    toml::from_str(text).map_err(|e| {
        let at = e.span().map_or_else(String::new, |span| {
            let before = text.as_bytes().get(..span.start).unwrap_or(text.as_bytes());
            format!(" at line {}", before.iter().filter(|&&b| b == b'\n').count() + 1)
        });
        format!(
            "not TOML{at}: {}",
            e.message().lines().next().unwrap_or_default().trim()
        )
    })
}

/// The backend's answer for the image on the mirror, filed for the image
/// kubelet asked for: the one credential kubelet's keyring would pick for
/// the mirror's image, under the source's key (none when it picks none).
///
/// The cache key is narrowed so that kubelet never serves this answer for
/// an image it does not hold: `Global` becomes `Registry`, and a source
/// with a path (a CRI-O prefix, `--registry-mirror host/path:…`) makes it
/// `Image`, since other repositories of the registry are not mirrored.
pub fn rekey(answer: Credentials, mirroring: &Mirroring) -> Credentials {
    let source_has_path = mirroring.source_key.contains('/');
    let cache_key_type = match answer.cache_key_type {
        _ if source_has_path => CacheKeyType::Image,
        CacheKeyType::Global => CacheKeyType::Registry,
        other => other,
    };
    let mut auth = BTreeMap::new();
    let mut entries = answer.auth;
    if let Some(key) = keyring_pick(&entries, &mirroring.target)
        && let Some(picked) = entries.remove(&key)
    {
        auth.insert(mirroring.source_key.clone(), picked);
    }
    Credentials {
        cache_key_type,
        cache_duration: answer.cache_duration,
        auth,
    }
}

/// The key of the credential kubelet's keyring tries first for
/// `repository` (`BasicDockerKeyring.Lookup`): keys in reverse
/// lexicographic order of their keyring form, the first that matches;
/// failing all, Docker Hub's entry for a Docker Hub image.
pub fn keyring_pick(auth: &BTreeMap<String, RegistryAuth>, repository: &str) -> Option<String> {
    let mut keyed: Vec<(String, &String)> = auth
        .keys()
        .filter_map(|key| keyring_key(key).map(|k| (k, key)))
        .collect();
    keyed.sort_by(|a, b| b.0.cmp(&a.0));
    if let Some((_, key)) = keyed.iter().find(|(k, _)| matches(k, repository)) {
        return Some((*key).clone());
    }
    if is_docker_hub_image(repository) {
        return keyed
            .iter()
            .find(|(k, _)| k == DOCKER_HUB_KEY)
            .map(|(_, key)| (*key).clone());
    }
    None
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use secrecy::{ExposeSecret, SecretString};

    use super::*;

    fn location(host: &str, path: &str) -> Location {
        Location {
            host: host.into(),
            path: path.into(),
        }
    }

    #[test]
    fn toml_errors_name_their_line() {
        assert!(
            parse_toml("[host")
                .expect_err("not TOML")
                .starts_with("not TOML at line 1: ")
        );
        let second = parse_toml("a = 1\n[host").expect_err("not TOML");
        assert!(second.starts_with("not TOML at line 2: "), "{second}");
        let after_utf8 = parse_toml("a = \"é\"\nb = ").expect_err("not TOML");
        assert!(after_utf8.starts_with("not TOML at line 2: "), "{after_utf8}");
    }

    #[test]
    fn mirrors_take_ports_and_paths_on_either_side() {
        let m = |s: Location, t: Location| RegistryMirror { source: s, target: t };
        for (text, want) in [
            (
                "docker.io:123456789012.dkr.ecr.us-east-1.amazonaws.com/docker-hub",
                m(
                    location("docker.io", ""),
                    location("123456789012.dkr.ecr.us-east-1.amazonaws.com", "docker-hub"),
                ),
            ),
            (
                "registry.local:5000/team:harbor.example.com/proxy",
                m(
                    location("registry.local:5000", "team"),
                    location("harbor.example.com", "proxy"),
                ),
            ),
            ("a:b:443", m(location("a", ""), location("b:443", ""))),
            ("a:1:b:2/x/y", m(location("a:1", ""), location("b:2", "x/y"))),
            (
                "Docker.IO:Mirror.Example",
                m(location("docker.io", ""), location("mirror.example", "")),
            ),
        ] {
            assert_eq!(parse_mirror(text), Ok(want), "{text}");
        }
        for bad in [
            "",
            "a",
            "a:",
            ":b",
            "a:b:c",
            "a:b:99999x",
            "a:b:0",
            "a/Team:b",
            "a//x:b",
            "a:b/-x",
            "a b:c",
        ] {
            assert!(parse_mirror(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn locations_hold_repositories_at_path_boundaries() {
        let team = location("reg.io", "team");
        assert_eq!(team.remainder("reg.io/team/app"), Some("app"));
        assert_eq!(team.remainder("REG.IO/team"), Some(""));
        assert_eq!(team.remainder("reg.io/teams/app"), None);
        assert_eq!(team.remainder("reg.io:5000/team/app"), None);
        assert_eq!(location("reg.io", "").remainder("reg.io/a/b"), Some("a/b"));
        assert_eq!(location("m.io", "p").join("library/nginx"), "m.io/p/library/nginx");
        assert_eq!(location("m.io", "").join("library/nginx"), "m.io/library/nginx");
    }

    fn settings(flags: &[&str]) -> MirrorSettings {
        MirrorSettings {
            mirrors: flags.iter().map(|f| parse_mirror(f).expect("a test mirror")).collect(),
            ..MirrorSettings::default()
        }
    }

    #[test]
    fn the_longest_source_wins_and_others_are_not_mirrored() {
        let mirrors = settings(&[
            "docker.io:hub.mirror.example",
            "docker.io/library:lib.mirror.example/official",
        ]);
        let official = mirrors
            .resolve("docker.io/library/nginx")
            .expect("no files")
            .expect("mirrored");
        assert_eq!(official.source_key, "docker.io/library");
        assert_eq!(official.target, "lib.mirror.example/official/nginx");
        let user = mirrors
            .resolve("docker.io/user/app")
            .expect("no files")
            .expect("mirrored");
        assert_eq!(user.source_key, "docker.io");
        assert_eq!(user.target, "hub.mirror.example/user/app");
        assert_eq!(mirrors.resolve("quay.io/org/app").expect("no files"), None);
    }

    fn auth(keys: &[(&str, &str)]) -> BTreeMap<String, RegistryAuth> {
        keys.iter()
            .map(|(key, password)| {
                (
                    (*key).to_owned(),
                    RegistryAuth {
                        username: "u".into(),
                        password: SecretString::from(*password),
                    },
                )
            })
            .collect()
    }

    #[test]
    fn kubelet_picks_the_most_specific_matching_key() {
        let entries = auth(&[
            ("harbor.example.com", "whole"),
            ("harbor.example.com/proxy", "project"),
            ("https://other.example.com", "other"),
            ("*.pkg.dev", "ar"),
        ]);
        assert_eq!(
            keyring_pick(&entries, "harbor.example.com/proxy/library/nginx").as_deref(),
            Some("harbor.example.com/proxy")
        );
        assert_eq!(
            keyring_pick(&entries, "harbor.example.com/team/app").as_deref(),
            Some("harbor.example.com")
        );
        assert_eq!(
            keyring_pick(&entries, "us-docker.pkg.dev/p/r/app").as_deref(),
            Some("*.pkg.dev")
        );
        assert_eq!(keyring_pick(&entries, "quay.io/x").as_deref(), None);
        let hub = auth(&[("https://index.docker.io/v1/", "hub")]);
        assert_eq!(
            keyring_pick(&hub, "docker.io/library/nginx").as_deref(),
            Some("https://index.docker.io/v1/")
        );
    }

    fn mirroring(source_key: &str, target: &str) -> Mirroring {
        Mirroring {
            repository: format!("{source_key}/app"),
            source_key: source_key.into(),
            target: target.into(),
            origin: Origin::Flag,
            then_tries: Vec::new(),
        }
    }

    #[test]
    fn the_mirror_credential_is_answered_under_the_source_alone() {
        let answer = Credentials {
            cache_key_type: CacheKeyType::Global,
            cache_duration: Some(Duration::from_secs(60)),
            auth: auth(&[("harbor.example.com/proxy", "project"), ("harbor.example.com", "whole")]),
        };
        let rekeyed = rekey(
            answer,
            &mirroring("docker.io", "harbor.example.com/proxy/library/nginx"),
        );
        assert_eq!(
            rekeyed.cache_key_type,
            CacheKeyType::Registry,
            "Global would serve other registries"
        );
        assert_eq!(rekeyed.cache_duration, Some(Duration::from_secs(60)));
        assert_eq!(rekeyed.auth.keys().collect::<Vec<_>>(), ["docker.io"]);
        assert_eq!(rekeyed.auth["docker.io"].password.expose_secret(), "project");
    }

    #[test]
    fn a_source_with_a_path_is_cached_per_image() {
        let answer = Credentials {
            cache_key_type: CacheKeyType::Registry,
            cache_duration: None,
            auth: auth(&[("m.example", "p")]),
        };
        let rekeyed = rekey(answer, &mirroring("reg.io/team", "m.example/team/app"));
        assert_eq!(rekeyed.cache_key_type, CacheKeyType::Image);
        assert_eq!(rekeyed.auth.keys().collect::<Vec<_>>(), ["reg.io/team"]);
    }

    #[test]
    fn no_credential_for_the_mirror_is_no_credential() {
        let answer = Credentials {
            cache_key_type: CacheKeyType::Registry,
            cache_duration: Some(Duration::ZERO),
            auth: auth(&[("elsewhere.example", "p")]),
        };
        let rekeyed = rekey(answer, &mirroring("docker.io", "m.example/library/nginx"));
        assert!(rekeyed.auth.is_empty());
    }
}
