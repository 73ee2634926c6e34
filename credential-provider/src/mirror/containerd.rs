//! containerd's registry hosts (`config_path`, usually
//! `/etc/containerd/certs.d`), read as containerd reads them
//! (`core/remotes/docker/config/hosts.go`):
//!
//! - the directory for a registry is, in each root in order, the first of
//!   `HOST_PORT_` (for a registry with a port), `HOST:PORT` and `_default`
//!   that exists; the first root holding one wins;
//! - its `hosts.toml` lists `[host."URL"]` tables, tried in file order,
//!   then `server` (unset: the registry itself; Docker Hub's is
//!   `registry-1.docker.io`);
//! - a host's `capabilities` default to pull, resolve and push; only
//!   hosts that can `pull` serve a pull;
//! - a host URL's path is a prefix before `/v2` unless `override_path =
//!   true`, when it is the API root itself: `https://h/v2/proxy` then
//!   serves repository `proxy/NAME` on `h` (Harbor proxy projects, ECR
//!   pull-through prefixes, Artifact Registry remote repositories).
//!
//! - a file with no `[host]` table is refused (`getSortedHosts`: "invalid
//!   `host` tree"), and containerd pulls from the registry itself: here it
//!   is an error naming the file, since a mirror named only in `server` is
//!   never used; an empty file is no file.
//!
//! The mirror is the first pull host that is not the registry itself.

use std::path::PathBuf;

use toml::{Table, Value};

use super::{Location, MirrorError, Mirroring, Origin};

/// Most of a hosts.toml read (containerd's own are a few hundred bytes).
pub const MAX_HOSTS_TOML: u64 = 64 * 1024;
/// Most `[host]` tables looked at.
pub const MAX_HOSTS: usize = 64;

const FLAG: &str = "--containerd-hosts-dir";

/// Hosts that are Docker Hub's own registry, for `docker.io` images.
const DOCKER_HUB_HOSTS: [&str; 3] = ["registry-1.docker.io", "docker.io", "index.docker.io"];

/// The directory containerd reads for `registry` under `roots`.
pub fn host_dir(roots: &[PathBuf], registry: &str) -> Option<PathBuf> {
    let mut names = Vec::with_capacity(3);
    if let Some((host, port)) = registry.rsplit_once(':')
        && !host.is_empty()
    {
        names.push(format!("{host}_{port}_"));
    }
    names.push(registry.to_owned());
    names.push("_default".to_owned());
    roots
        .iter()
        .flat_map(|root| names.iter().map(move |name| root.join(name)))
        .find(|dir| dir.is_dir())
}

/// The mirror containerd pulls `repository` through, per `roots`.
pub fn mirror_for(roots: &[PathBuf], repository: &str) -> Result<Option<Mirroring>, MirrorError> {
    let registry = crate::image::registry(repository).to_ascii_lowercase();
    let Some(dir) = host_dir(roots, &registry) else {
        return Ok(None);
    };
    let path = dir.join("hosts.toml");
    if !path.exists() {
        // containerd reads the directory's certificate files instead: no mirror.
        return Ok(None);
    }
    let text = cloud_access::files::read_regular_to_string(&path, MAX_HOSTS_TOML)
        .map_err(|source| MirrorError::Read { flag: FLAG, source })?;
    if text.is_empty() {
        return Ok(None);
    }
    let hosts = pull_hosts(&text, &registry).map_err(|problem| MirrorError::Config {
        path: path.clone(),
        runtime: "containerd",
        flag: FLAG,
        problem,
    })?;
    let is_registry_itself = |location: &Location| {
        location.path.is_empty()
            && (location.host == registry
                || (registry == "docker.io" && DOCKER_HUB_HOSTS.contains(&location.host.as_str())))
    };
    let Some(at) = hosts.iter().position(|h| !is_registry_itself(h)) else {
        return Ok(None);
    };
    let rest = repository.split_once('/').map_or("", |(_, rest)| rest);
    let mut then_tries: Vec<String> = hosts[at + 1..].iter().map(Location::key).collect();
    then_tries.dedup();
    then_tries.retain(|host| *host != hosts[at].key());
    Ok(Some(Mirroring {
        repository: repository.to_owned(),
        source_key: registry,
        target: hosts[at].join(rest),
        origin: Origin::HostsToml(path),
        then_tries,
    }))
}

/// The hosts of one hosts.toml that serve pulls, in containerd's order,
/// the server last; an error names the field.
pub fn pull_hosts(text: &str, registry: &str) -> Result<Vec<Location>, String> {
    let table = super::parse_toml(text)?;
    let mut hosts = Vec::new();
    {
        let Some(Value::Table(entries)) = table.get("host") else {
            return Err(format!(
                "no [host.\"URL\"] table: containerd refuses such a file (\"invalid `host` tree\") and pulls from \
                 {registry} itself; name the mirror in a [host.\"URL\"] table"
            ));
        };
        if entries.len() > MAX_HOSTS {
            return Err(format!("more than {MAX_HOSTS} [host] tables"));
        }
        for (url, entry) in entries {
            let field = format!("host.{url:?}");
            let Value::Table(entry) = entry else {
                return Err(format!("{field} is not a table"));
            };
            if can_pull(entry, &field)? {
                hosts.push(host_location(url, entry, &field)?);
            }
        }
    }
    let server = match table.get("server") {
        None => format!("https://{registry}"),
        Some(Value::String(server)) => server.clone(),
        Some(_) => return Err("\"server\" is not a string".into()),
    };
    hosts.push(host_location(&server, &table, "server")?);
    Ok(hosts)
}

fn can_pull(entry: &Table, field: &str) -> Result<bool, String> {
    match entry.get("capabilities") {
        None => Ok(true),
        Some(Value::Array(capabilities)) => {
            let mut pull = false;
            for capability in capabilities {
                match capability.as_str().map(str::to_ascii_lowercase).as_deref() {
                    Some("pull") => pull = true,
                    Some("resolve" | "push") => {}
                    _ => {
                        let shown = capability
                            .as_str()
                            .map_or_else(|| "a non-string".to_owned(), |c| format!("{c:?}"));
                        return Err(format!(
                            "{field}.capabilities holds {shown}: containerd knows pull, resolve and push"
                        ));
                    }
                }
            }
            Ok(pull)
        }
        Some(_) => Err(format!("{field}.capabilities is not an array of strings")),
    }
}

/// A host URL as containerd reads it: `https://` when no scheme is given,
/// its path the repository prefix only with `override_path = true`.
fn host_location(url: &str, entry: &Table, field: &str) -> Result<Location, String> {
    let with_scheme = if url.starts_with("http://") || url.starts_with("https://") {
        url.to_owned()
    } else {
        format!("https://{url}")
    };
    let parsed = url::Url::parse(&with_scheme).map_err(|e| format!("{field}: {url:?} is not a URL ({e})"))?;
    let host = match (parsed.host_str(), parsed.port()) {
        (Some(host), Some(port)) => format!("{host}:{port}"),
        (Some(host), None) => host.to_owned(),
        (None, _) => return Err(format!("{field}: {url:?} has no host")),
    };
    let override_path = match entry.get("override_path") {
        None => false,
        Some(Value::Boolean(b)) => *b,
        Some(_) => return Err(format!("{field}.override_path is not a boolean")),
    };
    let path = if override_path {
        let path = parsed.path().trim_end_matches('/');
        path.strip_prefix("/v2")
            .map_or("", |rest| rest.trim_start_matches('/'))
            .to_owned()
    } else {
        String::new()
    };
    let text = if path.is_empty() {
        host
    } else {
        format!("{host}/{path}")
    };
    Location::parse(&text).map_err(|problem| format!("{field}: {url:?}: {problem}"))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn location(text: &str) -> Location {
        Location::parse(text).expect("a test location")
    }

    #[test]
    fn hosts_in_file_order_then_the_server() {
        let text = r#"
server = "https://registry-1.docker.io"

[host."https://123456789012.dkr.ecr.us-east-1.amazonaws.com/v2/docker-hub"]
  capabilities = ["pull", "resolve"]
  override_path = true

[host."http://push-only.example"]
  capabilities = ["push"]

[host."mirror.example:5000/some/prefix"]
  ca = "/etc/ca.pem"
"#;
        assert_eq!(
            pull_hosts(text, "docker.io"),
            Ok(vec![
                location("123456789012.dkr.ecr.us-east-1.amazonaws.com/docker-hub"),
                location("mirror.example:5000"),
                location("registry-1.docker.io"),
            ])
        );
    }

    #[test]
    fn no_server_is_the_registry_itself() {
        assert_eq!(
            pull_hosts("[host.\"https://m.example\"]\n", "reg.example:5443"),
            Ok(vec![location("m.example"), location("reg.example:5443")])
        );
    }

    #[test]
    fn mistakes_name_their_field() {
        for (text, says) in [
            ("server = 1\n[host.\"https://m\"]", "\"server\" is not a string"),
            (
                "[host.\"https://m\"]\ncapabilities = [\"fetch\"]",
                "host.\"https://m\".capabilities holds \"fetch\"",
            ),
            (
                "[host.\"https://m\"]\noverride_path = \"yes\"",
                "override_path is not a boolean",
            ),
            ("host = 3", "no [host.\"URL\"] table"),
            ("server = \"https://m.example\"", "containerd refuses such a file"),
            ("server = \"https://\"\n[host.\"https://m\"]", "server"),
            ("[host", "not TOML at line 1"),
        ] {
            let found = pull_hosts(text, "r.example").expect_err(text);
            assert!(found.contains(says), "{text:?}: {found}");
        }
    }

    #[test]
    fn deep_nesting_is_refused_without_overflowing() {
        let deep = format!("a = {}{}", "[".repeat(30_000), "]".repeat(30_000));
        assert!(pull_hosts(&deep, "r.example").is_err());
    }

    fn write(root: &Path, dir: &str, text: &str) {
        std::fs::create_dir_all(root.join(dir)).expect("test dir");
        std::fs::write(root.join(dir).join("hosts.toml"), text).expect("test file");
    }

    #[test]
    fn directories_as_containerd_finds_them() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let (one, two) = (tmp.path().join("one"), tmp.path().join("two"));
        write(&two, "reg.example_5000_", "[host.\"https://port-dir.example\"]\n");
        write(&two, "reg.example:5000", "[host.\"https://colon-dir.example\"]\n");
        write(&two, "_default", "[host.\"https://default.example\"]\n");
        write(
            &one,
            "docker.io",
            "server = \"https://registry-1.docker.io\"\n[host.\"https://registry-1.docker.io\"]\n",
        );
        let roots = [one.clone(), two.clone()];
        let target = |repository: &str| {
            mirror_for(&roots, repository)
                .expect("readable")
                .map(|m| (m.target, m.source_key, m.then_tries))
        };
        assert_eq!(
            target("reg.example:5000/team/app"),
            Some((
                "port-dir.example/team/app".into(),
                "reg.example:5000".into(),
                vec!["reg.example:5000".into()]
            ))
        );
        assert_eq!(
            target("quay.io/org/app").map(|t| t.0),
            Some("default.example/org/app".into()),
            "_default serves every registry without its own directory"
        );
        assert_eq!(
            target("docker.io/library/nginx"),
            None,
            "Docker Hub itself is no mirror"
        );
    }

    #[test]
    fn a_registry_trusted_by_its_own_ca_is_not_mirrored() {
        let tmp = tempfile::tempdir().expect("temp dir");
        write(
            tmp.path(),
            "127.0.0.1:5443",
            "server = \"https://127.0.0.1:5443\"\n\n[host.\"https://127.0.0.1:5443\"]\n  ca = \"/ca.pem\"\n",
        );
        assert_eq!(
            mirror_for(&[tmp.path().to_owned()], "127.0.0.1:5443/team/app").expect("readable"),
            None
        );
    }

    #[test]
    fn a_server_that_is_the_mirror_leaves_no_fallback() {
        let tmp = tempfile::tempdir().expect("temp dir");
        write(
            tmp.path(),
            "docker.io",
            "server = \"https://harbor.example.com/v2/hub\"\noverride_path = true\n\n\
             [host.\"https://harbor.example.com/v2/hub\"]\noverride_path = true\n",
        );
        let found = mirror_for(&[tmp.path().to_owned()], "docker.io/library/nginx")
            .expect("readable")
            .expect("mirrored");
        assert_eq!(found.target, "harbor.example.com/hub/library/nginx");
        assert!(found.then_tries.is_empty(), "the server is the mirror itself");
        write(tmp.path(), "quay.io", "");
        assert_eq!(
            mirror_for(&[tmp.path().to_owned()], "quay.io/a/b").expect("readable"),
            None,
            "an empty file"
        );
    }
}
