//! Host names as registries and endpoints are named: the one check of a
//! `host[:port]` every caller shares.

/// Checks that `text` is `host[:port]`: DNS labels of letters, digits and
/// `-` (or an IPv4 address), an optional port from 1 to 65535, nothing else
/// (no scheme, path, user or query). The error says what is wrong.
pub fn check_host_port(text: &str) -> Result<(), &'static str> {
    if text.is_empty() || text.len() > 253 + 6 {
        return Err("it is empty or longer than a host name and port");
    }
    let (host, port) = match text.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => (host, Some(port)),
        _ => (text, None),
    };
    if let Some(port) = port
        && !port.parse::<u16>().is_ok_and(|p| p != 0)
    {
        return Err("its port is not a number from 1 to 65535");
    }
    if !host.split('.').all(is_dns_label) {
        return Err("it is not host[:port] (letters, digits, '-' and '.' in the host)");
    }
    Ok(())
}

/// One label of a host name, in any case: letters, digits and `-`, at most 63
/// characters, not starting or ending with `-`.
pub fn is_dns_label(label: &str) -> bool {
    !label.is_empty()
        && label.len() <= 63
        && !label.starts_with('-')
        && !label.ends_with('-')
        && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_with_ports_and_nothing_else() {
        for ok in ["demo.azurecr.io", "127.0.0.1:5443", "REG.example:1", "localhost"] {
            assert_eq!(check_host_port(ok), Ok(()), "{ok}");
        }
        for (bad, says) in [
            ("", "empty"),
            ("a:0", "port"),
            ("a:65536", "port"),
            ("a:x", "port"),
            ("https://a", "port"),
            ("a/b", "not host[:port]"),
            ("a..b", "not host[:port]"),
            ("-a.b", "not host[:port]"),
            ("::1", "not host[:port]"),
        ] {
            let found = check_host_port(bad).expect_err(bad);
            assert!(found.contains(says), "{bad:?}: {found}");
        }
    }
}
