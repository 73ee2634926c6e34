//! Image references as kubelet matches them: the repository without tag or
//! digest, with Docker Hub's implicit names filled in (as kubelet's
//! `parsers.ParseImageName` gives it to the credential provider).

/// `nginx:1.27` → `docker.io/library/nginx`; `reg.io:5000/app@sha256:…` →
/// `reg.io:5000/app`. Text that is already a repository comes back as is.
pub fn repository(image: &str) -> String {
    let without_digest = image.split_once('@').map_or(image, |(name, _)| name);
    // A tag is a `:` after the last `/`; one before it belongs to a port.
    let last_slash = without_digest.rfind('/').map_or(0, |i| i + 1);
    let name = match without_digest[last_slash..].find(':') {
        Some(colon) => &without_digest[..last_slash + colon],
        None => without_digest,
    };
    let (domain, path) = match name.split_once('/') {
        Some((first, rest)) if is_domain(first) => (first, rest.to_owned()),
        _ => ("docker.io", name.to_owned()),
    };
    let domain = if domain == "index.docker.io" {
        "docker.io"
    } else {
        domain
    };
    if domain == "docker.io" && !path.contains('/') {
        format!("docker.io/library/{path}")
    } else {
        format!("{domain}/{path}")
    }
}

/// The docker reference grammar's test for a leading registry host
/// (`splitDockerDomain`: a `.` or `:`, `localhost`, or not all lowercase).
fn is_domain(first: &str) -> bool {
    first.contains(['.', ':']) || first == "localhost" || first.to_lowercase() != first
}

/// The repository of an image reference as a pod spec carries it, if
/// kubelet can parse it (`parsers.ParseImageName`, on distribution's
/// `reference.ParseNormalizedNamed`): kubelet refuses to pull a reference
/// it cannot parse, so no credential provider runs for it. The error says
/// what is wrong, as that grammar sees it.
///
/// ```
/// use credential_provider::image::parse;
///
/// assert_eq!(parse("nginx:1.27").as_deref(), Ok("docker.io/library/nginx"));
/// let digest = format!("reg.io:5000/team/app@sha256:{}", "ab".repeat(32));
/// assert_eq!(parse(&digest).as_deref(), Ok("reg.io:5000/team/app"));
/// assert!(parse("reg.io/Team/app").is_err()); // repository names are lowercase
/// assert!(parse("reg.io/app:").is_err());     // an empty tag
/// ```
pub fn parse(image: &str) -> Result<String, String> {
    if image.len() == 64 && image.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return Err("a 64-character hexadecimal string is an image ID, not a repository name".into());
    }
    let (domain, remainder) = match image.split_once('/') {
        Some((first, rest)) if is_domain(first) => (first, rest.to_owned()),
        _ => ("docker.io", image.to_owned()),
    };
    let domain = if domain == "index.docker.io" {
        "docker.io"
    } else {
        domain
    };
    let remainder = if domain == "docker.io" && !remainder.contains('/') {
        format!("library/{remainder}")
    } else {
        remainder
    };
    let remote = remainder
        .split_once(':')
        .map_or(remainder.as_str(), |(remote, _)| remote);
    if remote.to_lowercase() != remote {
        return Err(format!("repository name ({remote}) must be lowercase"));
    }
    let full = format!("{domain}/{remainder}");
    let (named, digest) = match full.split_once('@') {
        Some((named, digest)) => (named, Some(digest)),
        None => (full.as_str(), None),
    };
    // A tag is a `:` in the last component (a port's is in the first).
    let last_slash = named.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match named[last_slash..].find(':') {
        Some(colon) => (&named[..last_slash + colon], Some(&named[last_slash + colon + 1..])),
        None => (named, None),
    };
    let components: Vec<&str> = name.split('/').collect();
    let all_paths = components.iter().all(|c| is_path_component(c));
    let registry_then_paths =
        components.len() > 1 && is_registry(components[0]) && components[1..].iter().all(|c| is_path_component(c));
    if !(all_paths || registry_then_paths) {
        return Err(format!("invalid reference format: {name:?} is not a repository name"));
    }
    if name.len() > 255 {
        return Err("repository name must not be more than 255 characters".into());
    }
    if let Some(tag) = tag
        && !is_tag(tag)
    {
        return Err(format!("invalid reference format: tag {tag:?}"));
    }
    if let Some(digest) = digest {
        check_digest(digest)?;
    }
    Ok(repository(image))
}

/// distribution's path-component: `[a-z0-9]+` runs joined by `.`, `_`,
/// `__` or any run of `-`.
fn is_path_component(c: &str) -> bool {
    let bytes = c.as_bytes();
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if bytes.is_empty() || !alnum(bytes[0]) || !alnum(bytes[bytes.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < bytes.len() {
        if alnum(bytes[i]) {
            i += 1;
            continue;
        }
        // A separator, then an alphanumeric.
        let start = i;
        while i < bytes.len() && !alnum(bytes[i]) {
            i += 1;
        }
        let sep = &c[start..i];
        if !(sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|b| b == b'-')) {
            return false;
        }
    }
    true
}

/// distribution's domain: a host name (labels of letters, digits and inner
/// `-`) or a bracketed IPv6 address, then an optional `:port`.
fn is_registry(domain: &str) -> bool {
    let (host, port) = if let Some(rest) = domain.strip_prefix('[') {
        let Some((inside, after)) = rest.split_once(']') else {
            return false;
        };
        if inside.is_empty() || !inside.bytes().all(|b| b.is_ascii_hexdigit() || b == b':') {
            return false;
        }
        match after {
            "" => return true,
            _ => ("", after.strip_prefix(':').unwrap_or("x")),
        }
    } else {
        match domain.split_once(':') {
            Some((host, port)) => (host, port),
            None => (domain, "0"),
        }
    };
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    (host.is_empty() && domain.starts_with('[') || host.split('.').all(label_ok))
        && !port.is_empty()
        && port.bytes().all(|b| b.is_ascii_digit())
}

/// distribution's tag: a word character, then up to 127 of word
/// characters, `.` and `-`.
fn is_tag(tag: &str) -> bool {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let bytes = tag.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 128
        && word(bytes[0])
        && bytes.iter().all(|&b| word(b) || b == b'.' || b == b'-')
}

/// go-digest's validation of `algorithm:hex`, with the algorithms kubelet
/// registers (sha256, sha384, sha512): lowercase hex of the algorithm's length.
fn check_digest(digest: &str) -> Result<(), String> {
    let (algorithm, hex) = digest
        .split_once(':')
        .ok_or_else(|| format!("invalid digest {digest:?}: no algorithm"))?;
    let length = match algorithm {
        "sha256" => 64,
        "sha384" => 96,
        "sha512" => 128,
        _ => return Err(format!("unsupported digest algorithm {algorithm:?}")),
    };
    if hex.len() != length || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return Err(format!(
            "invalid digest: {algorithm} needs {length} lowercase hexadecimal digits"
        ));
    }
    Ok(())
}

/// The registry host (with port) of a repository: the text before the
/// first `/`, which is what kubelet's `Registry` cache key is.
pub fn registry(repository: &str) -> &str {
    repository.split_once('/').map_or(repository, |(host, _)| host)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_like_docker() {
        let cases = [
            ("nginx", "docker.io/library/nginx"),
            ("nginx:1.27", "docker.io/library/nginx"),
            ("library/nginx@sha256:abc", "docker.io/library/nginx"),
            ("user/app:tag", "docker.io/user/app"),
            ("index.docker.io/user/app", "docker.io/user/app"),
            ("docker.io/library/nginx", "docker.io/library/nginx"),
            ("reg.io:5000/team/app:v1", "reg.io:5000/team/app"),
            ("reg.io:5000/team/app", "reg.io:5000/team/app"),
            ("localhost/app", "localhost/app"),
            (
                "123456789012.dkr.ecr.us-east-1.amazonaws.com/app:v2@sha256:00",
                "123456789012.dkr.ecr.us-east-1.amazonaws.com/app",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(repository(input), want, "{input}");
        }
    }

    #[test]
    fn parses_what_kubelet_parses_and_refuses_the_rest() {
        let hex = "ab".repeat(32);
        let good = [
            ("nginx", "docker.io/library/nginx"),
            ("Reg.IO:5000/team/app:V1.2-x_y", "Reg.IO:5000/team/app"),
            ("localhost/a__b/c---d/e.f_g", "localhost/a__b/c---d/e.f_g"),
            ("[::1]:5000/app", "[::1]:5000/app"),
            ("registry_example.abc/team/app", "registry_example.abc/team/app"),
        ];
        for (image, want) in good {
            assert_eq!(parse(image).as_deref(), Ok(want), "{image}");
        }
        assert_eq!(
            parse(&format!("reg.io/app:v1@sha256:{hex}")).as_deref(),
            Ok("reg.io/app")
        );
        assert!(parse(&format!("reg.io/app@sha512:{hex}{hex}")).is_ok());
        let bad = [
            String::new(),
            "@".into(),
            "reg.io/".into(),
            "reg.io//app".into(),
            "reg.io/Team/app".into(),
            "reg.io/app:".into(),
            "reg.io/app:-v1".into(),
            format!("reg.io/app:{}", "v".repeat(129)),
            "reg.io/app@sha256:abc".into(),
            format!("reg.io/app@md5:{}", "ab".repeat(16)),
            format!("reg.io/app@sha256:{}", "AB".repeat(32)),
            "reg.io/app@".into(),
            "reg.io/-app".into(),
            "reg.io/a___b".into(),
            "reg.io/app 1".into(),
            "reg.io:50a/app".into(),
            "reg.io:/app".into(),
            "-reg.io/app".into(),
            hex.clone(),
            format!("reg.io/{}", "a".repeat(250)),
        ];
        for image in bad {
            assert!(parse(&image).is_err(), "{image:?} parsed");
        }
    }

    #[test]
    fn registry_is_the_first_component() {
        assert_eq!(registry("reg.io:5000/team/app"), "reg.io:5000");
        assert_eq!(registry("reg.io"), "reg.io");
    }
}
