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
    let pattern = parse_schemeless(pattern)?;
    let image = parse_schemeless(image)?;
    urls_match_parsed(&pattern, &image)
}

/// kubelet's `URLsMatchStr`, where an error means no match (as in kubelet).
pub fn matches(pattern: &str, image: &str) -> bool {
    urls_match(pattern, image).unwrap_or(false)
}

fn urls_match_parsed(pattern: &SchemelessUrl, image: &SchemelessUrl) -> Result<bool, MatchError> {
    let (pattern_host, pattern_port) = split_host_port(&pattern.host);
    let (image_host, image_port) = split_host_port(&image.host);
    if pattern_port != image_port {
        return Ok(false);
    }
    let pattern_labels: Vec<&[u8]> = pattern_host.split(|&b| b == b'.').collect();
    let image_labels: Vec<&[u8]> = image_host.split(|&b| b == b'.').collect();
    if pattern_labels.len() != image_labels.len() {
        return Ok(false);
    }
    if !image.path.starts_with(&pattern.path) {
        return Ok(false);
    }
    for (pattern_label, image_label) in pattern_labels.iter().zip(&image_labels) {
        if !glob_match(pattern_label, image_label).map_err(|BadPattern| MatchError::BadPattern)? {
            return Ok(false);
        }
    }
    Ok(true)
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
