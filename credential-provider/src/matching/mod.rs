//! kubelet's image-matching rules, in one place: which `matchImages` pattern
//! selects a provider, and which credential key applies to an image.
//!
//! A pattern matches an image when the ports are equal, both hosts have the
//! same number of dot-separated labels, each host label matches under Go's
//! `filepath.Match`, and the pattern's path is a plain prefix of the image's
//! (`pkg/credentialprovider/keyring.go`, `URLsMatch`).

mod glob;
mod go_url;

pub use glob::{BadPattern, glob_match};
pub use go_url::{SchemelessUrl, UrlError, parse_schemeless, split_host_port};

/// Why a pattern could not be compared; kubelet counts it as no match.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MatchError {
    #[error("{0}")]
    Url(#[from] UrlError),
    #[error("syntax error in a host label's glob")]
    BadPattern,
}

/// kubelet's `URLsMatchStr(pattern, image)`.
pub fn urls_match(pattern: &str, image: &str) -> Result<bool, MatchError> {
    match compare(pattern, image) {
        Ok(()) => Ok(true),
        Err(Mismatch::Unparsable { error, .. }) => Err(error),
        Err(Mismatch::BadGlob { .. }) => Err(MatchError::BadPattern),
        Err(_) => Ok(false),
    }
}

/// kubelet's `URLsMatchStr`, where an error means no match (as in kubelet).
pub fn matches(pattern: &str, image: &str) -> bool {
    urls_match(pattern, image).unwrap_or(false)
}

/// The first of kubelet's checks (`URLsMatch`, in its order) that `image`
/// fails against `pattern`, for `explain`. Hosts and paths are shown as
/// text (lossy where an escape decodes to bytes that are not UTF-8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mismatch {
    /// kubelet cannot parse one of them as a URL: no match.
    Unparsable {
        image_side: bool,
        error: MatchError,
    },
    Port {
        pattern: String,
        image: String,
    },
    HostLabels {
        pattern_host: String,
        pattern: usize,
        image_host: String,
        image: usize,
    },
    Path {
        pattern: String,
        image: String,
    },
    /// Label `index` (from 0) differs.
    HostLabel {
        index: usize,
        pattern: String,
        image: String,
    },
    /// Label `index` is not a valid glob: kubelet counts it as no match.
    BadGlob {
        index: usize,
        pattern: String,
    },
}

impl Mismatch {
    /// A short name of the failed check, for `explain -o json`.
    pub fn check(&self) -> &'static str {
        match self {
            Mismatch::Unparsable { .. } => "url",
            Mismatch::Port { .. } => "port",
            Mismatch::HostLabels { .. } => "host-labels",
            Mismatch::Path { .. } => "path",
            Mismatch::HostLabel { .. } | Mismatch::BadGlob { .. } => "host-label",
        }
    }
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let port = |port: &str| {
            if port.is_empty() {
                "no port".to_owned()
            } else {
                format!("port {port}")
            }
        };
        match self {
            Mismatch::Unparsable { image_side, error } => write!(
                f,
                "kubelet cannot parse the {} as a URL ({error}), so it matches nothing",
                if *image_side { "image" } else { "pattern" }
            ),
            Mismatch::Port { pattern, image } => write!(
                f,
                "port: the pattern has {}, the image {} (ports must be equal)",
                port(pattern),
                port(image)
            ),
            Mismatch::HostLabels {
                pattern_host,
                pattern,
                image_host,
                image,
            } => write!(
                f,
                "host labels: the pattern's host {pattern_host} has {pattern}, the image's host {image_host} has {image} (a `*` stands for one label)"
            ),
            Mismatch::Path { pattern, image } => write!(
                f,
                "path: the image's path {image:?} does not start with the pattern's {pattern:?}"
            ),
            Mismatch::HostLabel { index, pattern, image } => {
                write!(f, "host label {}: {pattern:?} does not match {image:?}", index + 1)
            }
            Mismatch::BadGlob { index, pattern } => write!(
                f,
                "host label {}: {pattern:?} is not a valid glob, so it matches nothing",
                index + 1
            ),
        }
    }
}

/// kubelet's `URLsMatchStr(pattern, image)`, saying which check failed.
pub fn compare(pattern: &str, image: &str) -> Result<(), Mismatch> {
    let pattern = parse_schemeless(pattern).map_err(|e| Mismatch::Unparsable {
        image_side: false,
        error: e.into(),
    })?;
    let image = parse_schemeless(image).map_err(|e| Mismatch::Unparsable {
        image_side: true,
        error: e.into(),
    })?;
    compare_parsed(&pattern, &image)
}

fn compare_parsed(pattern: &SchemelessUrl, image: &SchemelessUrl) -> Result<(), Mismatch> {
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    let (pattern_host, pattern_port) = split_host_port(&pattern.host);
    let (image_host, image_port) = split_host_port(&image.host);
    if pattern_port != image_port {
        return Err(Mismatch::Port {
            pattern: text(pattern_port),
            image: text(image_port),
        });
    }
    let pattern_labels: Vec<&[u8]> = pattern_host.split(|&b| b == b'.').collect();
    let image_labels: Vec<&[u8]> = image_host.split(|&b| b == b'.').collect();
    if pattern_labels.len() != image_labels.len() {
        return Err(Mismatch::HostLabels {
            pattern_host: text(pattern_host),
            pattern: pattern_labels.len(),
            image_host: text(image_host),
            image: image_labels.len(),
        });
    }
    if !image.path.starts_with(&pattern.path) {
        return Err(Mismatch::Path {
            pattern: text(&pattern.path),
            image: text(&image.path),
        });
    }
    for (index, (pattern_label, image_label)) in pattern_labels.iter().zip(&image_labels).enumerate() {
        match glob_match(pattern_label, image_label) {
            Ok(true) => {}
            Ok(false) => {
                return Err(Mismatch::HostLabel {
                    index,
                    pattern: text(pattern_label),
                    image: text(image_label),
                });
            }
            Err(BadPattern) => {
                return Err(Mismatch::BadGlob {
                    index,
                    pattern: text(pattern_label),
                });
            }
        }
    }
    Ok(())
}

/// The key kubelet's keyring files a credential under (`BasicDockerKeyring.Add`):
/// the scheme is dropped, and a `/v1/` or `/v2/` path stands for the bare
/// host. `None` where kubelet would skip the entry as unparsable.
pub fn keyring_key(location: &str) -> Option<String> {
    let schemeless = location
        .strip_prefix("https://")
        .or_else(|| location.strip_prefix("http://"))
        .unwrap_or(location);
    let url = parse_schemeless(schemeless).ok()?;
    let host = String::from_utf8(url.host).ok()?;
    let path = String::from_utf8(url.path).ok()?;
    let effective = if path.starts_with("/v1/") || path.starts_with("/v2/") {
        &path[3..]
    } else {
        path.as_str()
    };
    Some(if effective.is_empty() || effective == "/" {
        host
    } else {
        format!("{host}{effective}")
    })
}

/// Docker Hub's key: kubelet falls back to it for Hub images that no other
/// key matched.
pub const DOCKER_HUB_KEY: &str = "index.docker.io";

/// kubelet's `isDefaultRegistryMatch`: the image is pulled from Docker Hub.
pub fn is_docker_hub_image(image: &str) -> bool {
    let (first, rest) = match image.split_once('/') {
        Some((first, rest)) => (first, Some(rest)),
        None => (image, None),
    };
    if first.is_empty() {
        return false;
    }
    if rest.is_none() || first == "docker.io" || first == "index.docker.io" {
        return true;
    }
    !first.contains(['.', ':'])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// kubelet's own `TestURLsMatch` cases, plus the rules the reference
    /// spells out (ports, label counts, path prefixes).
    #[test]
    fn match_table() {
        let cases: &[(&str, &str, bool)] = &[
            // Exact, wildcard and label-count cases.
            ("*.kubernetes.io", "prefix.kubernetes.io", true),
            ("prefix.*.io", "prefix.kubernetes.io", true),
            ("prefix.kubernetes.*", "prefix.kubernetes.io", true),
            ("*-good.kubernetes.io", "prefix-good.kubernetes.io", true),
            ("*.kubernetes.io", "kubernetes.io", false),
            ("*.kubernetes.io", "a.b.kubernetes.io", false),
            ("*.*.kubernetes.io", "a.b.kubernetes.io", true),
            ("*", "kubernetes.io", false),
            ("*.io", "kubernetes.io", true),
            ("*.*", "kubernetes.io", true),
            ("*.*.*", "kubernetes.io", false),
            ("kubernetes.io", "kubernetes.io", true),
            ("kubernetes.io", "KUBERNETES.io", false),
            ("*.kubernetes.io", "kubernetes.com", false),
            // Ports must be exactly equal.
            ("kubernetes.io:5000", "kubernetes.io:5000", true),
            ("kubernetes.io", "kubernetes.io:5000", false),
            ("kubernetes.io:5000", "kubernetes.io", false),
            ("*.kubernetes.io:5000", "a.kubernetes.io:5000", true),
            ("kubernetes.io:*", "kubernetes.io:5000", false),
            // The pattern path is a raw prefix of the image path.
            ("kubernetes.io/foo", "kubernetes.io/foo/bar", true),
            ("kubernetes.io/foo", "kubernetes.io/foobar", true),
            ("kubernetes.io/foo/", "kubernetes.io/foobar", false),
            ("kubernetes.io/foo/bar", "kubernetes.io/foo", false),
            ("kubernetes.io", "kubernetes.io/any/path", true),
            ("kubernetes.io/*", "kubernetes.io/foo", false),
            // ECR, GCR and ACR style patterns.
            (
                "*.dkr.ecr.*.amazonaws.com",
                "123456789012.dkr.ecr.us-east-1.amazonaws.com/app",
                true,
            ),
            (
                "*.dkr.ecr.*.amazonaws.com",
                "123456789012.dkr.ecr.us-east-1.amazonaws.com.cn/app",
                false,
            ),
            ("*.gcr.io", "eu.gcr.io/project/app", true),
            ("*.pkg.dev", "europe-docker.pkg.dev/p/r/app", true),
            ("*.azurecr.io", "myreg.azurecr.io/app", true),
            // Character classes: Go 1.26's URL parser refuses `[` in a host
            // that is not an IPv6 literal, so kubelet never matches them.
            ("reg-[0-9].example.com", "reg-7.example.com", false),
            ("reg-[0-9].example.com", "reg-x.example.com", false),
            ("reg-?.example.com", "reg-a.example.com", false), // `?` starts a URL query
            ("reg-*.example.com", "reg-a.example.com", true),
            // Malformed globs and images never match.
            ("reg-[.example.com", "reg-[.example.com", false),
            ("kubernetes.io", "kubernetes.io:latest", false),
        ];
        for (pattern, image, want) in cases {
            assert_eq!(matches(pattern, image), *want, "URLsMatchStr({pattern:?}, {image:?})");
        }
    }

    #[test]
    fn each_mismatch_names_kubelets_first_failing_check() {
        let check = |pattern: &str, image: &str| compare(pattern, image).map_err(|m| m.check());
        assert_eq!(check("reg.io", "reg.io/app"), Ok(()));
        assert_eq!(check("reg.io", "reg.io:5000/app"), Err("port"));
        // The port comes first: a label-count mismatch too is not reported.
        assert_eq!(check("*.reg.io:5000", "reg.io/app"), Err("port"));
        assert_eq!(check("*.reg.io", "reg.io/app"), Err("host-labels"));
        assert_eq!(check("reg.io/team", "reg.io/other"), Err("path"));
        // The path comes before the labels, as in kubelet.
        assert_eq!(check("a.io/team", "b.io/other"), Err("path"));
        assert_eq!(check("a.io", "b.io"), Err("host-label"));
        assert_eq!(check("reg-[.io", "reg-a.io"), Err("url"));
        assert_eq!(
            compare("*.example.com", "a.example.org").unwrap_err().to_string(),
            "host label 3: \"com\" does not match \"org\""
        );
        assert_eq!(
            compare("reg.io", "reg.io:5000").unwrap_err().to_string(),
            "port: the pattern has no port, the image port 5000 (ports must be equal)"
        );
    }

    #[test]
    fn unparsable_patterns_are_errors_not_matches() {
        assert_eq!(
            urls_match("reg-[.io", "reg-a.io"),
            Err(MatchError::Url(UrlError::IpLiteral))
        );
        assert!(!matches("reg-[.io", "reg-[.io"));
    }

    #[test]
    fn keyring_keys_follow_kubelet() {
        let cases = [
            ("https://index.docker.io/v1/", Some("index.docker.io")),
            ("index.docker.io", Some("index.docker.io")),
            ("http://reg.io:5000", Some("reg.io:5000")),
            ("reg.io/v2/", Some("reg.io")),
            ("reg.io/v2/team", Some("reg.io/team")),
            ("quay.io/coreos/", Some("quay.io/coreos/")),
            ("reg.io/", Some("reg.io")),
            ("reg io", None),
        ];
        for (location, want) in cases {
            assert_eq!(keyring_key(location).as_deref(), want, "{location}");
        }
    }

    #[test]
    fn docker_hub_detection_follows_kubelet() {
        for hub in [
            "nginx",
            "library/nginx",
            "docker.io/library/nginx",
            "index.docker.io/x/y",
            "user/app",
        ] {
            assert!(is_docker_hub_image(hub), "{hub}");
        }
        for other in ["quay.io/x", "localhost:5000/x", "reg.io/app", "/x", ""] {
            assert!(!is_docker_hub_image(other), "{other}");
        }
    }
}
