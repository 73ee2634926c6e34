//! The part of Go's `net/url.Parse` that kubelet's `ParseSchemelessURL`
//! exercises: it parses `"https://" + text` and keeps the host (with port)
//! and the unescaped path. Config validation rejects exactly what this
//! rejects, so the error cases follow Go's (as of Go 1.26, which is stricter
//! about brackets and colons in hosts than earlier releases).

/// Host (with any port) and unescaped path of a schemeless URL. Bytes, not
/// text: `%`-escapes may decode to bytes that are not UTF-8, as in Go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemelessUrl {
    pub host: Vec<u8>,
    pub path: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    #[error("invalid control character in URL")]
    ControlCharacter,
    #[error("invalid URL escape {0:?}")]
    Escape(String),
    #[error("invalid character {0:?} in host name")]
    HostCharacter(String),
    #[error("invalid port {0:?} after host")]
    Port(String),
    #[error("missing ']' in host")]
    MissingBracket,
    #[error("invalid userinfo")]
    Userinfo,
    #[error("invalid IP-literal")]
    IpLiteral,
    #[error("invalid host: {0}")]
    InvalidHost(String),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Host,
    Zone,
    Path,
    UserPassword,
    Fragment,
}

/// `url.Parse("https://" + text)`, keeping what `URLsMatch` reads.
pub fn parse_schemeless(text: &str) -> Result<SchemelessUrl, UrlError> {
    let (before_fragment, fragment) = match text.split_once('#') {
        Some((u, f)) => (u, Some(f)),
        None => (text, None),
    };
    if before_fragment.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return Err(UrlError::ControlCharacter);
    }
    // Go strips a lone trailing `?` or everything from the first `?`.
    let rest = before_fragment.split_once('?').map_or(before_fragment, |(r, _)| r);
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let host = parse_authority(authority)?;
    let path = unescape(path.as_bytes(), Mode::Path)?;
    if let Some(fragment) = fragment {
        unescape(fragment.as_bytes(), Mode::Fragment)?;
    }
    Ok(SchemelessUrl { host, path })
}

fn parse_authority(authority: &str) -> Result<Vec<u8>, UrlError> {
    let (userinfo, host) = match authority.rfind('@') {
        Some(i) => (Some(&authority[..i]), &authority[i + 1..]),
        None => (None, authority),
    };
    let host = parse_host(host)?;
    if let Some(userinfo) = userinfo {
        if !userinfo.bytes().all(valid_userinfo_byte) {
            return Err(UrlError::Userinfo);
        }
        for part in userinfo.splitn(2, ':') {
            unescape(part.as_bytes(), Mode::UserPassword)?;
        }
    }
    Ok(host)
}

fn valid_userinfo_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._:~!$&'()*+,;=%@".contains(&b)
}

/// Go 1.26's `parseHost` for an https URL: a bracketed host must be an
/// IPv6 literal (with an optional zone), and an unbracketed host may hold
/// one colon only, before the port.
fn parse_host(host: &str) -> Result<Vec<u8>, UrlError> {
    match host.rfind('[') {
        Some(open) if open > 0 => return Err(UrlError::IpLiteral),
        Some(_) => return parse_ip_literal(host),
        None => {}
    }
    if let Some(first_colon) = host.find(':') {
        let colon_port = &host[first_colon..];
        if !valid_optional_port(colon_port) {
            return Err(UrlError::Port(colon_port.to_owned()));
        }
    }
    unescape(host.as_bytes(), Mode::Host)
}

/// `[IPv6]`, `[IPv6%25zone]`, with an optional `:port`.
fn parse_ip_literal(host: &str) -> Result<Vec<u8>, UrlError> {
    let close = host.rfind(']').ok_or(UrlError::MissingBracket)?;
    let colon_port = &host[close + 1..];
    if !valid_optional_port(colon_port) {
        return Err(UrlError::Port(colon_port.to_owned()));
    }
    let inside = &host.as_bytes()[1..close];
    let unescaped = match host[1..close].find("%25") {
        Some(zone) => {
            let mut out = unescape(&inside[..zone], Mode::Host)?;
            out.extend(unescape(&inside[zone..], Mode::Zone)?);
            out
        }
        None => unescape(inside, Mode::Host)?,
    };
    check_ip_literal(&unescaped)?;
    let mut out = Vec::with_capacity(unescaped.len() + colon_port.len() + 2);
    out.push(b'[');
    out.extend(unescaped);
    out.push(b']');
    out.extend(colon_port.as_bytes());
    Ok(out)
}

/// Go's `netip.ParseAddr` on the bracketed text, which must give an IPv6
/// address: an IPv4 one is not an IP-literal.
fn check_ip_literal(text: &[u8]) -> Result<(), UrlError> {
    let text = std::str::from_utf8(text).map_err(|_| UrlError::InvalidHost("not UTF-8".into()))?;
    let (address, zone) = match text.split_once('%') {
        Some((address, zone)) => (address, Some(zone)),
        None => (text, None),
    };
    if address.parse::<std::net::Ipv4Addr>().is_ok() && zone.is_none() {
        return Err(UrlError::IpLiteral);
    }
    if zone == Some("") {
        return Err(UrlError::InvalidHost(format!(
            "{text:?}: zone must be a non-empty string"
        )));
    }
    address
        .parse::<std::net::Ipv6Addr>()
        .map(|_| ())
        .map_err(|_| UrlError::InvalidHost(format!("{text:?} is not an IPv6 address")))
}

/// Empty, or `:` followed by digits only (`:` alone is valid).
fn valid_optional_port(port: &str) -> bool {
    port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|digits| digits.bytes().all(|b| b.is_ascii_digit()))
}

fn unhex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

fn unescape(s: &[u8], mode: Mode) -> Result<Vec<u8>, UrlError> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'%' => {
                let (Some(hi), Some(lo)) = (
                    s.get(i + 1).copied().and_then(unhex),
                    s.get(i + 2).copied().and_then(unhex),
                ) else {
                    let end = (i + 3).min(s.len());
                    return Err(UrlError::Escape(String::from_utf8_lossy(&s[i..end]).into_owned()));
                };
                let escape = &s[i..i + 3];
                // In a host, %-escapes may only stand for non-ASCII bytes,
                // except %25 in an IPv6 zone (RFC 6874).
                if mode == Mode::Host && hi < 8 && escape != b"%25" {
                    return Err(UrlError::Escape(String::from_utf8_lossy(escape).into_owned()));
                }
                if mode == Mode::Zone {
                    let byte = hi << 4 | lo;
                    if escape != b"%25" && byte != b' ' && should_escape(byte, Mode::Host) {
                        return Err(UrlError::Escape(String::from_utf8_lossy(escape).into_owned()));
                    }
                }
                out.push(hi << 4 | lo);
                i += 3;
            }
            b => {
                if matches!(mode, Mode::Host | Mode::Zone) && b < 0x80 && should_escape(b, mode) {
                    return Err(UrlError::HostCharacter((b as char).to_string()));
                }
                out.push(b);
                i += 1;
            }
        }
    }
    Ok(out)
}

/// Go's `shouldEscape` for the modes used here.
fn should_escape(c: u8, mode: Mode) -> bool {
    if c.is_ascii_alphanumeric() {
        return false;
    }
    if matches!(mode, Mode::Host | Mode::Zone) && b"!$&'()*+,;=:[]<>\"".contains(&c) {
        return false;
    }
    match c {
        b'-' | b'_' | b'.' | b'~' => false,
        b'$' | b'&' | b'+' | b',' | b'/' | b':' | b';' | b'=' | b'?' | b'@' => match mode {
            Mode::Path => c == b'?',
            Mode::UserPassword => matches!(c, b'@' | b'/' | b'?' | b':'),
            Mode::Fragment => false,
            Mode::Host | Mode::Zone => true,
        },
        b'!' | b'(' | b')' | b'*' if mode == Mode::Fragment => false,
        _ => true,
    }
}

/// Go's `net.SplitHostPort`, falling back to (whole, "") on error as
/// kubelet's `SplitURL` does.
pub fn split_host_port(host_port: &[u8]) -> (&[u8], &[u8]) {
    try_split_host_port(host_port).unwrap_or((host_port, b""))
}

fn try_split_host_port(hp: &[u8]) -> Option<(&[u8], &[u8])> {
    let last_colon = hp.iter().rposition(|&b| b == b':')?;
    let (host, open, close) = if hp.first() == Some(&b'[') {
        let end = hp.iter().position(|&b| b == b']')?;
        if end + 1 != last_colon {
            return None;
        }
        (&hp[1..end], 1, end + 1)
    } else {
        let host = &hp[..last_colon];
        if host.contains(&b':') {
            return None;
        }
        (host, 0, 0)
    };
    if hp[open..].contains(&b'[') || hp[close..].contains(&b']') {
        return None;
    }
    Some((host, &hp[last_colon + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> (String, String) {
        let url = parse_schemeless(text).unwrap();
        (
            String::from_utf8(url.host).unwrap(),
            String::from_utf8(url.path).unwrap(),
        )
    }

    #[test]
    fn splits_host_and_path() {
        assert_eq!(parsed("reg.io"), ("reg.io".into(), "".into()));
        assert_eq!(parsed("reg.io:5000/ns/app"), ("reg.io:5000".into(), "/ns/app".into()));
        assert_eq!(
            parsed("*.dkr.ecr.*.amazonaws.com"),
            ("*.dkr.ecr.*.amazonaws.com".into(), "".into())
        );
        assert_eq!(parsed("reg.io/a%2Fb?x=1#frag"), ("reg.io".into(), "/a/b".into()));
        assert_eq!(parsed("user:pw@reg.io/x"), ("reg.io".into(), "/x".into()));
        assert_eq!(parsed("[::1]:5000/x"), ("[::1]:5000".into(), "/x".into()));
        assert_eq!(parsed("[fe80::1%25eth0]/x"), ("[fe80::1%eth0]".into(), "/x".into()));
        assert_eq!(parsed("[::ffff:1.2.3.4]"), ("[::ffff:1.2.3.4]".into(), "".into()));
        assert_eq!(parsed("reg.io:"), ("reg.io:".into(), "".into()));
    }

    #[test]
    fn rejects_what_go_rejects() {
        assert_eq!(parse_schemeless("nginx:latest"), Err(UrlError::Port(":latest".into())));
        assert_eq!(parse_schemeless("reg io"), Err(UrlError::HostCharacter(" ".into())));
        assert_eq!(parse_schemeless("reg.io/a%zz"), Err(UrlError::Escape("%zz".into())));
        assert_eq!(parse_schemeless("reg.io/a\n"), Err(UrlError::ControlCharacter));
        assert_eq!(parse_schemeless("[::1"), Err(UrlError::MissingBracket));
        assert_eq!(parse_schemeless("re%41g.io"), Err(UrlError::Escape("%41".into())));
        assert_eq!(parse_schemeless("a{b}.io"), Err(UrlError::HostCharacter("{".into())));
        assert_eq!(parse_schemeless("u\"@reg.io"), Err(UrlError::Userinfo));
        // Go 1.26: one colon only outside brackets, IPv6 only inside them.
        assert_eq!(
            parse_schemeless("registry.example.com:5000:1"),
            Err(UrlError::Port(":5000:1".into()))
        );
        assert_eq!(parse_schemeless("reg[a-c].io"), Err(UrlError::IpLiteral));
        assert_eq!(parse_schemeless("[1.2.3.4]:80"), Err(UrlError::IpLiteral));
        assert!(matches!(parse_schemeless("[reg.io]"), Err(UrlError::InvalidHost(_))));
        assert!(matches!(
            parse_schemeless("[fe80::1%25]"),
            Err(UrlError::InvalidHost(_))
        ));
    }

    #[test]
    fn host_port_split_follows_go() {
        assert_eq!(split_host_port(b"reg.io:5000"), (&b"reg.io"[..], &b"5000"[..]));
        assert_eq!(split_host_port(b"reg.io"), (&b"reg.io"[..], &b""[..]));
        assert_eq!(split_host_port(b"[::1]:80"), (&b"::1"[..], &b"80"[..]));
        assert_eq!(split_host_port(b"a:b:c"), (&b"a:b:c"[..], &b""[..]));
        assert_eq!(split_host_port(b"reg.io:"), (&b"reg.io"[..], &b""[..]));
    }
}
