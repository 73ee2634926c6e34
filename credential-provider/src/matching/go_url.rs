//! The part of Go's `net/url.Parse` that kubelet's `ParseSchemelessURL`
//! exercises: it parses `"https://" + text` and keeps the host (with port)
//! and the unescaped path. Config validation rejects exactly what this
//! rejects, so the error cases follow Go's.

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

fn parse_host(host: &str) -> Result<Vec<u8>, UrlError> {
    if host.starts_with('[') {
        let close = host.rfind(']').ok_or(UrlError::MissingBracket)?;
        let colon_port = &host[close + 1..];
        if !valid_optional_port(colon_port) {
            return Err(UrlError::Port(colon_port.to_owned()));
        }
        if let Some(zone) = host[..close].find("%25") {
            let mut out = unescape(&host.as_bytes()[..zone], Mode::Host)?;
            out.extend(unescape(&host.as_bytes()[zone..close], Mode::Zone)?);
            out.extend(unescape(&host.as_bytes()[close..], Mode::Host)?);
            return Ok(out);
        }
    } else if let Some(i) = host.rfind(':') {
        let colon_port = &host[i..];
        if !valid_optional_port(colon_port) {
            return Err(UrlError::Port(colon_port.to_owned()));
        }
    }
    unescape(host.as_bytes(), Mode::Host)
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
