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
/// one line of a log: every secret of `secrets` in every form a client sends it
/// redacted as [`redact`] does, control and bidirectional formatting characters
/// escaped (`\n`, `\u{1b}`), and at most `limit` characters in all, the last of
/// them `…` when cut (as [`cut`]; an escape is never cut in two).
pub fn clean_text(text: &str, secrets: &[&str], limit: usize) -> String {
    // Bound the work first: a server may send megabytes.
    let read = prefix_chars(text, limit.saturating_mul(4).saturating_add(4 * SECRET_FRAGMENT));
    let redacted = redact(read, secrets);
    let mut out = Bounded::new(limit);
    let mut escape = String::new();
    for c in redacted.chars() {
        let fits = if needs_escape(c) {
            escape.clear();
            escape.extend(c.escape_default());
            out.push(&escape)
        } else {
            out.push(c.encode_utf8(&mut [0; 4]))
        };
        if !fits {
            break;
        }
    }
    out.finish(read.len() < text.len())
}

/// `text` cut to at most `limit` characters, the last of them `…` when cut.
pub fn cut(text: &str, limit: usize) -> String {
    let mut out = Bounded::new(limit);
    for c in text.chars() {
        if !out.push(c.encode_utf8(&mut [0; 4])) {
            break;
        }
    }
    out.finish(false)
}

/// Text written in whole pieces into at most `limit` characters: all of them
/// when they fit, else as many as fit before a closing `…`. The one piece of
/// code that cuts a message.
struct Bounded {
    out: String,
    chars: usize,
    limit: usize,
    /// The length of `out` up to which `…` still fits after it.
    room_for_ellipsis: usize,
    cut: bool,
}

impl Bounded {
    fn new(limit: usize) -> Self {
        Self {
            out: String::new(),
            chars: 0,
            limit,
            room_for_ellipsis: 0,
            cut: false,
        }
    }

    /// Adds `piece`; false once the text is cut (nothing more is taken).
    fn push(&mut self, piece: &str) -> bool {
        if self.cut {
            return false;
        }
        let n = piece.chars().count();
        if self.chars + n > self.limit {
            self.close();
            return false;
        }
        self.out.push_str(piece);
        self.chars += n;
        if self.chars < self.limit {
            self.room_for_ellipsis = self.out.len();
        }
        true
    }

    fn close(&mut self) {
        self.cut = true;
        self.out.truncate(self.room_for_ellipsis);
        if self.limit > 0 {
            self.out.push('…');
        }
    }

    /// The text, cut when `more` follows what was pushed.
    fn finish(mut self, more: bool) -> String {
        if more && !self.cut {
            self.close();
        }
        self.out
    }
}

/// `text` with every run of at least [`SECRET_FRAGMENT`] characters (the
/// whole when shorter) of each secret replaced by [`REDACTED`]: of the secret
/// as it is, and as clients send it: form-encoded (as reqwest's `form` and
/// `query` write it: `~` as `%7E`, a space `+`), percent-encoded as a URL
/// component (`~` kept, a space `%20`), in a JSON string (`\"`, `\\`), and in
/// standard base64 at each of the three byte alignments, so that the base64 of
/// `user:password` (HTTP Basic) shows no piece of the password whatever the
/// user. Linear in the text: each of its windows of each width (at most 7
/// widths, 6 to 12 bytes) is looked up among the windows of every form.
pub fn redact(text: &str, secrets: &[&str]) -> String {
    let forms: Vec<Vec<u8>> = secrets
        .iter()
        .filter(|s| s.len() >= MIN_SECRET)
        .flat_map(|s| sent_forms(s))
        .filter(|form| form.len() >= MIN_SECRET)
        .collect();
    let mut windows: std::collections::BTreeMap<usize, std::collections::HashSet<&[u8]>> = Default::default();
    for form in &forms {
        let width = form.len().min(SECRET_FRAGMENT);
        windows.entry(width).or_default().extend(form.windows(width));
    }
    let bytes = text.as_bytes();
    let mut hidden = vec![false; bytes.len()];
    for (width, windows) in windows {
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

/// `secret` in every form [`redact`] looks for; for base64, only the
/// characters made of the secret's bits alone (what comes before or after it
/// changes the others).
fn sent_forms(secret: &str) -> Vec<Vec<u8>> {
    use base64::Engine as _;
    let form: String = url::form_urlencoded::byte_serialize(secret.as_bytes()).collect();
    let component = form.replace("%7E", "~").replace('+', "%20").replace('*', "%2A");
    let json = serde_json::to_string(secret).unwrap_or_default();
    let json = json.get(1..json.len().saturating_sub(1)).unwrap_or_default().to_owned();
    let mut forms = vec![
        secret.as_bytes().to_vec(),
        form.into_bytes(),
        component.into_bytes(),
        json.into_bytes(),
    ];
    for before in 0..3 {
        let mut aligned = vec![0; before];
        aligned.extend_from_slice(secret.as_bytes());
        let encoded = base64::engine::general_purpose::STANDARD_NO_PAD.encode(&aligned);
        let own = (8 * before).div_ceil(6)..8 * aligned.len() / 6;
        forms.push(encoded.as_bytes()[own].to_vec());
    }
    forms.sort();
    forms.dedup();
    forms
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
        assert_eq!(clean_text(&huge, &[TOKEN], 10), format!("{}…", "x".repeat(9)));
        assert_eq!(clean_text("naïve ✓", &[], 100), "naïve ✓");
        assert_eq!(clean_text(&format!("t={TOKEN}\n"), &[TOKEN], 100), "t=<redacted>\\n");
    }

    /// A secret where every run of 12 characters holds a `"`, which every
    /// encoding below changes (and `~`, ` `, `+`, `/`, `\\`, `&`, `<`, on which
    /// they differ): before any encoding was searched for, none was cut.
    const SENT: &str = "Qx8Q~w\"rd 5+/k\\a&b<\"c~d e\"f+g9";

    /// `text` redacted of [`SENT`] is `before`, `<redacted>`, `after`.
    fn assert_cut(text: &str, before: &str, after: &str) {
        assert_eq!(
            redact(text, &[SENT]),
            format!("{before}{REDACTED}{after}"),
            "in {text:?}"
        );
    }

    #[test]
    fn a_secret_sent_form_encoded_is_redacted() {
        // As reqwest's `form` writes it (serde_urlencoded, form_urlencoded): `~` is
        // `%7E`, a space `+`.
        let encoded = "Qx8Q%7Ew%22rd+5%2B%2Fk%5Ca%26b%3C%22c%7Ed+e%22f%2Bg9";
        assert_eq!(
            url::form_urlencoded::byte_serialize(SENT.as_bytes()).collect::<String>(),
            encoded
        );
        assert_cut(
            &format!("grant_type=client_credentials&client_secret={encoded}&scope=x"),
            "grant_type=client_credentials&client_secret=",
            "&scope=x",
        );
        // Cut short, 12 of its characters are still a leak.
        assert_cut(&format!("…{}…", &encoded[7..19]), "…", "…");
    }

    #[test]
    fn a_secret_sent_percent_encoded_is_redacted() {
        // As a URL component (RFC 3986's unreserved kept): `~` kept, a space `%20`.
        let encoded = "Qx8Q~w%22rd%205%2B%2Fk%5Ca%26b%3C%22c~d%20e%22f%2Bg9";
        assert_cut(&format!("GET /x?secret={encoded} 401"), "GET /x?secret=", " 401");
    }

    #[test]
    fn a_secret_sent_in_json_is_redacted() {
        let encoded = r#"Qx8Q~w\"rd 5+/k\\a&b<\"c~d e\"f+g9"#;
        assert_eq!(
            serde_json::to_string(SENT).expect("a string encodes"),
            format!("\"{encoded}\"")
        );
        assert_cut(&format!(r#"{{"password":"{encoded}"}}"#), r#"{"password":""#, r#""}"#);
    }

    #[test]
    fn a_secret_sent_in_base64_is_redacted_whatever_precedes_it() {
        use base64::Engine as _;
        let base64 = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
        assert_cut(&base64(SENT), "", "");
        // HTTP Basic: base64 of `user:password`, the password at each of the three
        // byte alignments. What is left shows the user (and at most one character
        // holding a few bits of the password) and the last character and padding.
        for user in ["", "a", "ab", "administrator@vsphere.local"] {
            let header = format!("Authorization: Basic {}", base64(&format!("{user}:{SENT}")));
            let shown = redact(&header, &[SENT]);
            let rest = shown
                .strip_prefix("Authorization: Basic ")
                .expect("the header is shown");
            let (head, tail) = rest.split_once(REDACTED).unwrap_or_else(|| panic!("{user}: {shown}"));
            assert!(head.len() <= (user.len() + 1).div_ceil(3) * 4, "{user}: {shown}");
            assert!(tail.len() <= 3 && !tail.contains(REDACTED), "{user}: {shown}");
        }
    }

    #[test]
    fn a_cut_text_is_at_most_its_limit_ellipsis_included() {
        assert_eq!(cut("abc", 3), "abc");
        assert_eq!(cut("abcd", 3), "ab…");
        assert_eq!(cut("naïve ✓ text", 7), "naïve …");
        assert_eq!(cut("abc", 0), "");
        assert_eq!(clean_text(&"x".repeat(20), &[], 10), format!("{}…", "x".repeat(9)));
        assert_eq!(clean_text(&"x".repeat(10), &[], 10), "x".repeat(10));
        // Escapes count as what they show, and are never cut in two.
        assert_eq!(clean_text(&"\n".repeat(20), &[], 10), format!("{}…", "\\n".repeat(4)));
        assert_eq!(clean_text("\u{1b}\u{1b}", &[], 10), "\\u{1b}…");
        for limit in [1, 2, 64, 500] {
            let shown = clean_text(&"é\n".repeat(600), &[], limit);
            assert!(
                shown.chars().count() <= limit && shown.ends_with('…'),
                "{limit}: {shown}"
            );
        }
        // Text beyond what is read is still marked as cut.
        let hidden = format!("{}{}", TOKEN.repeat(50), "tail");
        assert_eq!(clean_text(&hidden, &[TOKEN], 20), "<redacted>…");
    }
}
