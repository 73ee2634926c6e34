//! Text made fit for one line of a log: error chains flattened, secrets
//! redacted, control characters escaped, length bounded. (The log set-up
//! itself is the programs' skeleton, `suite-program`.)

/// `error`'s message followed by each of its causes', `: `-separated: a
/// transport error names its cause (DNS, refused, TLS) only in its chain.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut line = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        line.push_str(": ");
        line.push_str(&cause.to_string());
        source = cause.source();
    }
    line
}

/// The shortest run of a secret's characters that counts as leaking it: a
/// server that echoes a token cut short, or a message that quotes part of
/// one, still must not put it in a log.
pub const SECRET_FRAGMENT: usize = 12;

/// Secrets shorter than this are not searched for: they would redact
/// ordinary words and leak nothing worth hiding.
const MIN_SECRET: usize = 6;

/// What replaces a secret.
pub const REDACTED: &str = "<redacted>";

/// Text from outside (a server's error, a value from a request) made fit for
/// one line of a log: every run of [`SECRET_FRAGMENT`] or more characters of
/// any of `secrets` replaced by [`REDACTED`], control and bidirectional
/// formatting characters escaped (`\n`, `\u{1b}`), and at most `limit`
/// characters kept, with `…` when cut.
pub fn clean_text(text: &str, secrets: &[&str], limit: usize) -> String {
    // Bound the work first: a server may send megabytes.
    let text = prefix_chars(text, limit.saturating_mul(4).saturating_add(4 * SECRET_FRAGMENT));
    let redacted = redact(text, secrets);
    let mut out = String::with_capacity(redacted.len().min(limit));
    for (kept, c) in redacted.chars().enumerate() {
        if kept >= limit {
            out.push('…');
            return out;
        }
        if needs_escape(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// `text` with every run of at least [`SECRET_FRAGMENT`] characters of a
/// secret (the whole secret when shorter) replaced by [`REDACTED`]. Linear
/// in the text for each secret: each window of the text is looked up among
/// the secret's windows.
pub fn redact(text: &str, secrets: &[&str]) -> String {
    let bytes = text.as_bytes();
    let mut hidden = vec![false; bytes.len()];
    for secret in secrets.iter().map(|s| s.as_bytes()).filter(|s| s.len() >= MIN_SECRET) {
        let width = secret.len().min(SECRET_FRAGMENT);
        if bytes.len() < width {
            continue;
        }
        let windows: std::collections::HashSet<&[u8]> = secret.windows(width).collect();
        for (start, window) in bytes.windows(width).enumerate() {
            if windows.contains(window) {
                hidden[start..start + width].fill(true);
            }
        }
    }
    let mut out = String::with_capacity(text.len());
    let mut in_secret = false;
    for (i, c) in text.char_indices() {
        // A character is hidden when any of its bytes is.
        if hidden[i..i + c.len_utf8()].contains(&true) {
            if !in_secret {
                out.push_str(REDACTED);
                in_secret = true;
            }
        } else {
            in_secret = false;
            out.push(c);
        }
    }
    out
}

/// Characters that would break a log line or change how a terminal shows it.
fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200B}'..='\u{200F}' | '\u{2028}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}')
}

/// The first `n` characters of `text`.
fn prefix_chars(text: &str, n: usize) -> &str {
    text.char_indices().nth(n).map_or(text, |(i, _)| &text[..i])
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQifQ.c2lnbmF0dXJlLXNlY3JldA";

    #[test]
    fn any_long_piece_of_a_secret_is_redacted() {
        let cut = &TOKEN[5..TOKEN.len() - 3];
        assert_eq!(
            redact(&format!("token {cut} is bad"), &[TOKEN]),
            "token <redacted> is bad"
        );
        assert_eq!(redact(&format!("a{TOKEN}b{TOKEN}"), &[TOKEN]), "a<redacted>b<redacted>");
        // Eleven characters of it are not a leak; twelve are.
        assert_eq!(
            redact(&format!("x {} y", &TOKEN[30..41]), &[TOKEN]),
            format!("x {} y", &TOKEN[30..41])
        );
        assert_eq!(redact(&format!("x {} y", &TOKEN[30..42]), &[TOKEN]), "x <redacted> y");
        // A short secret is redacted whole; a tiny one is ignored.
        assert_eq!(redact("user hunter2 denied", &["hunter2"]), "user <redacted> denied");
        assert_eq!(redact("a b", &["a"]), "a b");
    }

    #[test]
    fn error_chains_are_one_line() {
        #[derive(Debug, thiserror::Error)]
        #[error("outer")]
        struct Outer(#[source] std::io::Error);
        let error = Outer(std::io::Error::other("inner"));
        assert_eq!(error_chain(&error), "outer: inner");
        assert_eq!(error_chain(&std::io::Error::other("alone")), "alone");
    }

    #[test]
    fn clean_text_is_one_escaped_bounded_line() {
        assert_eq!(
            clean_text("bad\nE1130 forged \u{1b}[31mred\u{202E}", &[], 100),
            "bad\\nE1130 forged \\u{1b}[31mred\\u{202e}"
        );
        let huge = "x".repeat(5 << 20);
        assert_eq!(clean_text(&huge, &[TOKEN], 10), format!("{}…", "x".repeat(10)));
        assert_eq!(clean_text("naïve ✓", &[], 100), "naïve ✓");
        assert_eq!(clean_text(&format!("t={TOKEN}\n"), &[TOKEN], 100), "t=<redacted>\\n");
    }
}
