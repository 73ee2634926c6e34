//! Which URLs a credential may be sent to.
//!
//! A token or password must only travel over TLS. Plain `http` is allowed for
//! loopback addresses alone, so that tests and node-local proxies work without
//! opening a path for a credential to cross the network in the clear.

use std::net::IpAddr;

use url::{Host, Url};

/// An endpoint URL that is `https`, or `http` on a loopback address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecureEndpoint(Url);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EndpointError {
    #[error("{what} {url:?} is not a valid URL: {reason}")]
    Invalid { what: String, url: String, reason: String },
    #[error(
        "{what} {url:?} uses {scheme}: use an https:// URL (plain http is accepted only for loopback addresses such as 127.0.0.1 or [::1])"
    )]
    Insecure { what: String, url: String, scheme: String },
    #[error("{what} {url:?} must not carry a username or password in the URL")]
    Userinfo { what: String, url: String },
}

impl SecureEndpoint {
    /// Parses `raw`; `what` names the flag or field the value came from, for
    /// the error message.
    pub fn parse(what: &str, raw: &str) -> Result<Self, EndpointError> {
        let url = Url::parse(raw).map_err(|e| EndpointError::Invalid {
            what: what.to_owned(),
            url: raw.to_owned(),
            reason: e.to_string(),
        })?;
        if !url.username().is_empty() || url.password().is_some() {
            return Err(EndpointError::Userinfo {
                what: what.to_owned(),
                url: redact_userinfo(&url),
            });
        }
        match url.scheme() {
            "https" => Ok(Self(url)),
            "http" if is_loopback(&url) => Ok(Self(url)),
            other => Err(EndpointError::Insecure {
                what: what.to_owned(),
                url: raw.to_owned(),
                scheme: other.to_owned(),
            }),
        }
    }

    pub fn url(&self) -> &Url {
        &self.0
    }

    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }
}

impl std::fmt::Display for SecureEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.as_str())
    }
}

/// True for `localhost`, 127.0.0.0/8 and ::1.
pub fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(Host::Ipv4(ip)) => IpAddr::V4(ip).is_loopback(),
        Some(Host::Ipv6(ip)) => IpAddr::V6(ip).is_loopback(),
        Some(Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        None => false,
    }
}

fn redact_userinfo(url: &Url) -> String {
    let mut shown = url.clone();
    // Both setters only fail for URLs that cannot have credentials at all.
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn https_is_accepted_anywhere() {
        let e = SecureEndpoint::parse("--token-endpoint", "https://sts.example.com/token").unwrap();
        assert_eq!(e.as_str(), "https://sts.example.com/token");
    }

    #[test]
    fn plain_http_is_accepted_only_on_loopback() {
        for ok in [
            "http://127.0.0.1:8080/token",
            "http://127.8.9.10/token",
            "http://[::1]:9000/",
            "http://localhost/token",
        ] {
            assert!(SecureEndpoint::parse("--token-endpoint", ok).is_ok(), "{ok}");
        }
        for bad in [
            "http://10.0.0.1/token",
            "http://sts.example.com/token",
            "http://[::2]/",
            "ftp://127.0.0.1/",
        ] {
            let err = SecureEndpoint::parse("--token-endpoint", bad).unwrap_err();
            assert!(matches!(err, EndpointError::Insecure { .. }), "{bad}: {err}");
            assert!(err.to_string().contains("--token-endpoint"), "{err}");
        }
    }

    #[test]
    fn credentials_in_the_url_are_refused_and_not_echoed() {
        let err = SecureEndpoint::parse("--token-endpoint", "https://user:hunter2@sts.example.com/").unwrap_err();
        let text = err.to_string();
        assert!(!text.contains("hunter2"), "{text}");
        assert!(matches!(err, EndpointError::Userinfo { .. }));
    }

    #[test]
    fn garbage_names_the_flag() {
        let err = SecureEndpoint::parse("--token-endpoint", "not a url").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("--token-endpoint \"not a url\" is not a valid URL")
        );
    }
}
