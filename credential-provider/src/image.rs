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

/// The docker reference grammar's test for a leading registry host.
fn is_domain(first: &str) -> bool {
    first.contains(['.', ':']) || first == "localhost" || first.chars().any(|c| c.is_ascii_uppercase())
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
    fn registry_is_the_first_component() {
        assert_eq!(registry("reg.io:5000/team/app"), "reg.io:5000");
        assert_eq!(registry("reg.io"), "reg.io");
    }
}
