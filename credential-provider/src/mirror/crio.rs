//! CRI-O's mirrors: `registries.conf` (containers-registries.conf(5),
//! version 2), read as containers/image's `sysregistriesv2` reads it:
//!
//! - the `[[registry]]` whose `prefix` (unset: its `location`) is the
//!   longest that holds the image wins; a prefix matches at a `/`
//!   boundary, and `*.example.com` matches any host under `example.com`;
//! - its `[[registry.mirror]]` entries are tried in file order, then its
//!   `location` (unless `blocked`), each with the image's path below the
//!   prefix appended;
//! - a mirror with `pull-from-mirror = "digest-only"` or `"tag-only"` (or
//!   the registry's `mirror-by-digest-only = true`) serves only some
//!   pulls; kubelet's request does not say which kind this is, so those
//!   mirrors are passed over.
//!
//! The mirror is the first of these that is not the image's own place.
//! Drop-in files (`registries.conf.d/`) are not read: name the file that
//! holds the registry.

use std::path::Path;

use toml::{Table, Value};

use super::{Location, MirrorError, Mirroring, Origin};

/// Most of a registries.conf read.
pub const MAX_REGISTRIES_CONF: u64 = 256 * 1024;
/// Most `[[registry]]` entries, and mirrors of one, looked at.
pub const MAX_REGISTRIES: usize = 1000;
pub const MAX_MIRRORS: usize = 64;

const FLAG: &str = "--registries-conf";

/// One `[[registry]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Registry {
    prefix: String,
    location: String,
    blocked: bool,
    /// Mirrors serving every pull, in file order.
    mirrors: Vec<String>,
}

/// The mirror CRI-O pulls `repository` through, per the file at `path`.
pub fn mirror_for(path: &Path, repository: &str) -> Result<Option<Mirroring>, MirrorError> {
    let text = cloud_access::files::read_regular_to_string(path, MAX_REGISTRIES_CONF)
        .map_err(|source| MirrorError::Read { flag: FLAG, source })?;
    let config_error = |problem| MirrorError::Config {
        path: path.to_owned(),
        runtime: "CRI-O",
        flag: FLAG,
        problem,
    };
    let registries = registries(&text).map_err(config_error)?;
    let Some((registry, matched)) = registries
        .iter()
        .filter_map(|r| prefix_match(&r.prefix, repository).map(|len| (r, len)))
        .max_by_key(|(_, len)| *len)
    else {
        return Ok(None);
    };
    let rest = &repository[matched..];
    let wildcard = registry.prefix.starts_with("*.");
    // Each place, the image's path below the prefix appended; a wildcard
    // prefix's mirrors stand for the host it matched.
    let place = |location: &str| -> Result<Location, MirrorError> {
        let full = if wildcard && location.is_empty() {
            repository.to_owned()
        } else {
            format!("{location}{rest}")
        };
        Location::parse(&full).map_err(|problem| config_error(format!("location {location:?}: {problem}")))
    };
    let mut places = Vec::with_capacity(registry.mirrors.len() + 1);
    for mirror in &registry.mirrors {
        places.push(place(mirror)?);
    }
    if !registry.blocked {
        places.push(place(&registry.location)?);
    }
    let itself = Location::parse(repository).ok();
    let Some(at) = places.iter().position(|p| Some(p) != itself.as_ref()) else {
        return Ok(None);
    };
    let source_key = repository[..matched].to_ascii_lowercase();
    Ok(Some(Mirroring {
        repository: repository.to_owned(),
        source_key,
        target: places[at].key(),
        origin: Origin::RegistriesConf(path.to_owned()),
        then_tries: places[at + 1..].iter().map(Location::key).collect(),
    }))
}

/// How much of `repository` the prefix covers, if it holds it: the whole
/// prefix for a plain one, the host matched for `*.domain`.
fn prefix_match(prefix: &str, repository: &str) -> Option<usize> {
    if let Some(domain) = prefix.strip_prefix("*.") {
        let host = crate::image::registry(repository);
        let name = host.rsplit_once(':').map_or(host, |(name, _)| name);
        let under = name.len() > domain.len() + 1
            && name.ends_with(domain)
            && name.as_bytes()[name.len() - domain.len() - 1] == b'.';
        return (under && name.len() == host.len()).then_some(host.len());
    }
    let rest = repository.strip_prefix(prefix)?;
    (rest.is_empty() || rest.starts_with('/')).then_some(prefix.len())
}

/// The `[[registry]]` entries, checked as containers/image checks them.
fn registries(text: &str) -> Result<Vec<Registry>, String> {
    let table = super::parse_toml(text)?;
    let Some(value) = table.get("registry") else {
        return Ok(Vec::new());
    };
    let Value::Array(entries) = value else {
        return Err("\"registry\" is not an array of [[registry]] tables".into());
    };
    if entries.len() > MAX_REGISTRIES {
        return Err(format!("more than {MAX_REGISTRIES} [[registry]] entries"));
    }
    entries
        .iter()
        .enumerate()
        .map(|(i, entry)| registry(i, entry))
        .collect()
}

fn registry(i: usize, entry: &Value) -> Result<Registry, String> {
    let field = format!("registry[{i}]");
    let Value::Table(entry) = entry else {
        return Err(format!("{field} is not a table"));
    };
    let text = |key: &str| -> Result<String, String> {
        match entry.get(key) {
            None => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.trim_end_matches('/').to_owned()),
            Some(_) => Err(format!("{field}.{key} is not a string")),
        }
    };
    let flag = |table: &Table, key: &str, field: &str| -> Result<bool, String> {
        match table.get(key) {
            None => Ok(false),
            Some(Value::Boolean(b)) => Ok(*b),
            Some(_) => Err(format!("{field}.{key} is not a boolean")),
        }
    };
    let location = text("location")?;
    let prefix = match text("prefix")? {
        prefix if prefix.is_empty() => location.clone(),
        prefix => prefix,
    };
    if prefix.is_empty() {
        return Err(format!("{field} has neither prefix nor location"));
    }
    if prefix.starts_with("*.") && !location.is_empty() {
        return Err(format!("{field}: a wildcarded prefix takes no location"));
    }
    let digest_only = flag(entry, "mirror-by-digest-only", &field)?;
    let mut mirrors = Vec::new();
    match entry.get("mirror") {
        None => {}
        Some(Value::Array(list)) if list.len() <= MAX_MIRRORS => {
            for (j, mirror) in list.iter().enumerate() {
                let field = format!("{field}.mirror[{j}]");
                let Value::Table(mirror) = mirror else {
                    return Err(format!("{field} is not a table"));
                };
                let location = match mirror.get("location") {
                    Some(Value::String(s)) if !s.is_empty() => s.trim_end_matches('/').to_owned(),
                    _ => return Err(format!("{field}.location is missing or not a string")),
                };
                let every_pull = match mirror.get("pull-from-mirror") {
                    None => !digest_only,
                    Some(Value::String(s)) if s == "all" || s.is_empty() => !digest_only,
                    Some(Value::String(s)) if s == "digest-only" || s == "tag-only" => false,
                    Some(_) => {
                        return Err(format!(
                            "{field}.pull-from-mirror is not \"all\", \"digest-only\" or \"tag-only\""
                        ));
                    }
                };
                if every_pull {
                    mirrors.push(location);
                }
            }
        }
        Some(Value::Array(_)) => return Err(format!("{field} has more than {MAX_MIRRORS} mirrors")),
        Some(_) => return Err(format!("{field}.mirror is not an array of [[registry.mirror]] tables")),
    }
    Ok(Registry {
        prefix,
        location,
        blocked: flag(entry, "blocked", &field)?,
        mirrors,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONF: &str = r#"
unqualified-search-registries = ["docker.io"]

[[registry]]
prefix = "docker.io"
location = "docker.io"

[[registry.mirror]]
location = "digest.mirror.example"
pull-from-mirror = "digest-only"

[[registry.mirror]]
location = "harbor.example.com/dockerhub-proxy"

[[registry]]
prefix = "quay.io/team"
location = "internal.example.com/quay-team"

[[registry]]
location = "quay.io"

[[registry]]
prefix = "*.corp.example"
[[registry.mirror]]
location = "cache.corp.example:5000"

[[registry]]
location = "blocked.example"
blocked = true
[[registry.mirror]]
location = "only-way.example"
"#;

    fn resolve(repository: &str) -> Option<(String, String, Vec<String>)> {
        let tmp = tempfile::NamedTempFile::new().expect("temp file");
        std::fs::write(tmp.path(), CONF).expect("write");
        mirror_for(tmp.path(), repository)
            .expect("readable")
            .map(|m| (m.source_key, m.target, m.then_tries))
    }

    #[test]
    fn mirrors_then_the_location_of_the_longest_prefix() {
        assert_eq!(
            resolve("docker.io/library/nginx"),
            Some((
                "docker.io".into(),
                "harbor.example.com/dockerhub-proxy/library/nginx".into(),
                vec!["docker.io/library/nginx".into()],
            ))
        );
        assert_eq!(
            resolve("quay.io/team/app"),
            Some((
                "quay.io/team".into(),
                "internal.example.com/quay-team/app".into(),
                vec![]
            )),
            "a location elsewhere rewrites the prefix"
        );
        assert_eq!(resolve("quay.io/other/app"), None, "quay.io's own location");
        assert_eq!(resolve("quay.io/teams/app"), None, "a prefix matches at '/'");
        assert_eq!(resolve("gcr.io/p/app"), None);
    }

    #[test]
    fn wildcards_and_blocked_registries() {
        assert_eq!(
            resolve("build.corp.example/tools/app"),
            Some((
                "build.corp.example".into(),
                "cache.corp.example:5000/tools/app".into(),
                vec!["build.corp.example/tools/app".into()],
            ))
        );
        assert_eq!(resolve("corp.example/x"), None, "the wildcard needs a label in front");
        assert_eq!(
            resolve("blocked.example/app"),
            Some(("blocked.example".into(), "only-way.example/app".into(), vec![])),
            "a blocked location is never tried"
        );
    }

    #[test]
    fn mistakes_name_their_field() {
        for (text, says) in [
            ("registry = 1", "\"registry\" is not an array"),
            (
                "[[registry]]\nblocked = true",
                "registry[0] has neither prefix nor location",
            ),
            (
                "[[registry]]\nlocation = \"a.io\"\nblocked = \"no\"",
                "registry[0].blocked is not a boolean",
            ),
            (
                "[[registry]]\nlocation = \"a.io\"\n[[registry.mirror]]\npull-from-mirror = \"all\"",
                "registry[0].mirror[0].location is missing",
            ),
            (
                "[[registry]]\nlocation = \"a.io\"\n[[registry.mirror]]\nlocation = \"b.io\"\npull-from-mirror = \"some\"",
                "registry[0].mirror[0].pull-from-mirror",
            ),
            (
                "[[registry]]\nprefix = \"*.a.io\"\nlocation = \"b.io\"",
                "takes no location",
            ),
        ] {
            let found = registries(text).expect_err(text);
            assert!(found.contains(says), "{text:?}: {found}");
        }
    }
}
