//! Which images are Azure Container Registry images, and registry mirrors.
//!
//! acr-credential-provider matches `^[a-zA-Z0-9]+\.(azurecr\.io|azurecr\.cn|azurecr\.de|azurecr\.us)`
//! followed by the end or `/`, then, failing that, any image containing the
//! cloud's registry suffix. Here the image's registry (its first path
//! element, as kubelet reads it) must be `NAME.SUFFIX[:port]`: NAME letters
//! and digits (ACR's names), SUFFIX one of `azurecr.io`, `azurecr.cn`,
//! `azurecr.us` or the custom cloud's (`azurecr.de`, the closed German
//! cloud's, is not one), compared without case. So `x.azurecr.io.example.com`
//! is not an ACR image (upstream's suffix search takes `x.azurecr.io` from
//! it).

/// The registries' DNS suffixes of Azure's clouds.
pub const ACR_SUFFIXES: [&str; 3] = ["azurecr.io", "azurecr.cn", "azurecr.us"];

/// Why a custom cloud's registry suffix (ARM's `suffixes.acrLoginServer`)
/// cannot be one, or `Ok`: the service principal's ID and secret are
/// answered under `*.SUFFIX`, and the registries of every image under it are
/// asked, so the suffix must be a domain someone owns, not a place anyone
/// can register a name under. It must be a DNS name (labels of letters,
/// digits and `-`, at most 253 characters), no wildcard, port or IP address,
/// at least two labels, the last one a top-level domain (letters, or an
/// `xn--` IDN), and not itself a public suffix of the Public Suffix List
/// (ICANN's and the private section's: `com`, `co.uk`, `github.io`), compiled
/// into the binary by the `psl` crate. A rule alone (two labels, an
/// alphabetic TLD) would let `co.uk` through, giving the secret to every
/// `NAME.co.uk`; the list's suffixes added after this build are the gap left.
pub fn check_registry_suffix(suffix: &str) -> Result<(), &'static str> {
    use psl::Psl;
    if suffix.is_empty() {
        return Err("it is empty (a leading '.' is dropped)");
    }
    if suffix.contains('*') {
        return Err("it holds a wildcard: give the domain itself (azurecr.example.com, not *.azurecr.example.com)");
    }
    if suffix.contains(':') {
        return Err("it holds a port or is an IPv6 address: a suffix is a domain name only");
    }
    if suffix.parse::<std::net::Ipv4Addr>().is_ok() {
        return Err("it is an IP address, not a domain");
    }
    let labels: Vec<&str> = suffix.split('.').collect();
    if suffix.len() > 253 || !labels.iter().all(|l| cloud_access::names::is_dns_label(l)) {
        return Err("it is not a DNS name (labels of letters, digits and '-', separated by '.')");
    }
    if labels.len() < 2 {
        return Err("it is a single label: every host of that top-level domain would match");
    }
    let tld = labels[labels.len() - 1];
    if !(tld.chars().all(|c| c.is_ascii_alphabetic()) || tld.to_ascii_lowercase().starts_with("xn--")) {
        return Err("its last label is not a top-level domain (letters only)");
    }
    if psl::List.domain(suffix.to_ascii_lowercase().as_bytes()).is_none() {
        return Err("it is a public suffix (Public Suffix List): anyone can register a name under it");
    }
    Ok(())
}

/// One `--registry-mirror SRC:DST`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryMirror {
    /// The registry images name (`mcr.microsoft.com`, `host:5000`).
    pub source: String,
    /// The Azure container registry that serves them.
    pub target: String,
}

/// Reads `SRC:DST`, each `host[:port]` ([`crate::mirror::parse_mirror`]'s
/// grammar): acr-credential-provider's mirrors are whole registries, so a
/// path on either side is refused.
pub fn parse_mirror(text: &str) -> Result<RegistryMirror, &'static str> {
    let mirror = crate::mirror::parse_mirror(text)?;
    if !mirror.source.path.is_empty() || !mirror.target.path.is_empty() {
        return Err("SRC and DST must each be host[:port]: acr mirrors whole registries");
    }
    Ok(RegistryMirror {
        source: mirror.source.host,
        target: mirror.target.host,
    })
}

/// Whether `registry` (`host[:port]`) is an Azure container registry: a
/// name of letters and digits under one of `suffixes`.
pub fn is_acr(registry: &str, suffixes: &[&str]) -> bool {
    let host = match registry.rsplit_once(':') {
        Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) => host,
        _ => registry,
    };
    let Some((name, suffix)) = host.split_once('.') else {
        return false;
    };
    !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric())
        && suffixes.iter().any(|s| !s.is_empty() && s.eq_ignore_ascii_case(suffix))
        && cloud_access::azure::acr::check_registry(registry).is_ok()
}

/// The registry to ask for `registry`: its mirror's target when a mirror's
/// source is `registry`, and that source.
pub fn mirrored<'a>(registry: &str, mirrors: &'a [RegistryMirror]) -> Option<&'a RegistryMirror> {
    mirrors.iter().find(|m| m.source.eq_ignore_ascii_case(registry))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirrors_take_ports_on_either_side() {
        let m = |s: &str, t: &str| RegistryMirror {
            source: s.into(),
            target: t.into(),
        };
        assert_eq!(
            parse_mirror("mcr.microsoft.com:demo.azurecr.io").unwrap(),
            m("mcr.microsoft.com", "demo.azurecr.io")
        );
        assert_eq!(
            parse_mirror("registry.local:5000:demo.azurecr.io").unwrap(),
            m("registry.local:5000", "demo.azurecr.io")
        );
        assert_eq!(
            parse_mirror("mcr.microsoft.com:127.0.0.1:8443").unwrap(),
            m("mcr.microsoft.com", "127.0.0.1:8443")
        );
        assert_eq!(parse_mirror("a:1:b:2").unwrap(), m("a:1", "b:2"));
        for bad in ["", "a", "a:", ":b", "a:b:c", "a/x:b", "a:b/y", "a:b:99999x"] {
            assert!(parse_mirror(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn registry_suffixes_are_registry_domains() {
        for ok in [
            "azurecr.io",
            "azurecr.cn",
            "azurecr.us",
            "AZURECR.IO",
            "azurecr.demo.example",
            "azurecr.example.internal",
            "azsacr.local.azurestack.external",
            "example.co.uk",
            "registry.xn--p1ai",
        ] {
            assert_eq!(check_registry_suffix(ok), Ok(()), "{ok}");
        }
        for (bad, problem) in [
            ("", "empty"),
            ("com", "single label"),
            ("internal", "single label"),
            ("co.uk", "public suffix"),
            ("CO.UK", "public suffix"),
            ("github.io", "public suffix"),
            ("x.ck", "public suffix"),
            ("127.0.0.1", "IP address"),
            ("example.123", "top-level domain"),
            ("*.azurecr.io", "wildcard"),
            ("azurecr.io:443", "port"),
            ("::1", "port or is an IPv6"),
            ("azurecr..io", "not a DNS name"),
            ("azurecr.io.", "not a DNS name"),
            ("azure cr.io", "not a DNS name"),
            ("-azurecr.io", "not a DNS name"),
            ("azurecr.io/x", "not a DNS name"),
        ] {
            let found = check_registry_suffix(bad).expect_err(bad);
            assert!(found.contains(problem), "{bad:?}: {found}");
        }
    }

    #[test]
    fn acr_registries_as_upstream_matches_them() {
        let custom = ["azurecr.io", "azurecr.cn", "azurecr.us", "azurecr.demo.example"];
        for ok in [
            "demo.azurecr.io",
            "Demo01.AZURECR.IO",
            "demo.azurecr.cn",
            "demo.azurecr.us",
            "demo.azurecr.io:443",
            "demo.azurecr.demo.example",
        ] {
            assert!(is_acr(ok, &custom), "{ok}");
        }
        for no in [
            "demo.azurecr.de",
            "my-reg.azurecr.io",
            "a.b.azurecr.io",
            "demo.azurecr.io.example.com",
            "azurecr.io",
            ".azurecr.io",
            "mcr.microsoft.com",
            "demo.azurecr.io:x",
        ] {
            assert!(!is_acr(no, &custom), "{no}");
        }
        assert!(!is_acr("demo.azurecr.demo.example", &ACR_SUFFIXES));
    }
}
