//! The gcfg format (`gopkg.in/gcfg.v1`, git-config-like) that OpenStack's `cloud.conf`
//! and the vSphere CSI driver's `csi-vsphere.conf` are written in, read as the Go
//! providers read it: `[Section]` and `[Section "subsection"]` headers, `name = value`
//! variables, `;` and `#` comments, double-quoted values with `\"`, `\\`, `\n`, `\t`
//! and `\b` escapes, a trailing `\` continuing a value on the next line, and a name
//! alone meaning `true`. Section and variable names compare without case; subsection
//! names and values keep theirs.
//!
//! Only reading: callers give meaning to the values and name their file in errors
//! ([`GcfgError`] gives the line).
//!
//! ```
//! use cloud_access::gcfg::Gcfg;
//!
//! let conf = Gcfg::parse(
//!     "[Global]\nauth-url = https://keystone.example:5000/v3 ; a comment\n\
//!      region = \"Region One\"\n\
//!      [BlockStorage]\nignore-volume-az\n\
//!      [VirtualCenter \"10.0.0.1\"]\ndatacenters = dc1\n",
//! )?;
//! let global = conf.section("global").expect("[Global]"); // names compare without case
//! assert_eq!(global.get("Auth-URL"), Some("https://keystone.example:5000/v3"));
//! assert_eq!(global.get("region"), Some("Region One"));
//! assert_eq!(conf.section("BlockStorage").expect("section").get_bool("ignore-volume-az")?, Some(true));
//! let vc = conf.sections("virtualcenter").next().expect("a vCenter");
//! assert_eq!((vc.subsection.as_deref(), vc.get("datacenters")), (Some("10.0.0.1"), Some("dc1")));
//!
//! // The first malformed line is the error, with its number.
//! let error = Gcfg::parse("[Global]\nregion = \"unterminated\n").unwrap_err();
//! assert_eq!(error.line, 2);
//! # Ok::<(), cloud_access::gcfg::GcfgError>(())
//! ```

use thiserror::Error;

/// Why a gcfg document was not read: the line and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("line {line}: {problem}")]
pub struct GcfgError {
    /// 1-based line number.
    pub line: usize,
    pub problem: String,
}

/// One `[Section]` or `[Section "subsection"]` block (a header given twice is two
/// blocks, as gcfg merges them into one value: [`Gcfg::section`] merges too).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// The section name as written.
    pub name: String,
    pub subsection: Option<String>,
    /// The header's line.
    pub line: usize,
    /// Variables in order: lower-cased name, value (`None` for a name alone), line.
    entries: Vec<(String, Option<String>, usize)>,
}

impl Section {
    /// The last value of `key` (case-insensitive); a name written alone gives `""`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries
            .iter()
            .rev()
            .find(|(name, _, _)| name.eq_ignore_ascii_case(key))
            .map(|(_, value, _)| value.as_deref().unwrap_or(""))
    }

    /// Every value of `key`, in order (gcfg's multi-valued variables).
    pub fn get_all<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.entries
            .iter()
            .filter(move |(name, _, _)| name.eq_ignore_ascii_case(key))
            .map(|(_, value, _)| value.as_deref().unwrap_or(""))
    }

    /// `key` as gcfg reads a bool: `true`/`yes`/`on`/`1`, `false`/`no`/`off`/`0` (any
    /// case), or the name alone for `true`.
    pub fn get_bool(&self, key: &str) -> Result<Option<bool>, GcfgError> {
        let Some((_, value, line)) = self
            .entries
            .iter()
            .rev()
            .find(|(name, _, _)| name.eq_ignore_ascii_case(key))
        else {
            return Ok(None);
        };
        let Some(value) = value else { return Ok(Some(true)) };
        match value.to_ascii_lowercase().as_str() {
            "true" | "yes" | "on" | "1" => Ok(Some(true)),
            "false" | "no" | "off" | "0" => Ok(Some(false)),
            _ => Err(GcfgError {
                line: *line,
                problem: format!("{key} = {value:?} is not a bool: write true or false"),
            }),
        }
    }

    /// The variables' names (lower-cased), in order, each once.
    pub fn keys(&self) -> Vec<&str> {
        let mut keys: Vec<&str> = Vec::new();
        for (name, _, _) in &self.entries {
            if !keys.contains(&name.as_str()) {
                keys.push(name);
            }
        }
        keys
    }

    /// The line `key` was last set on, for messages.
    pub fn line_of(&self, key: &str) -> Option<usize> {
        self.entries
            .iter()
            .rev()
            .find(|(name, _, _)| name.eq_ignore_ascii_case(key))
            .map(|(_, _, line)| *line)
    }
}

/// A parsed document: its sections in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Gcfg {
    sections: Vec<Section>,
}

impl Gcfg {
    /// Parses `text`; the first malformed line is the error.
    pub fn parse(text: &str) -> Result<Self, GcfgError> {
        let mut sections: Vec<Section> = Vec::new();
        let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
        while let Some((number, raw)) = lines.next() {
            let error = |problem: String| GcfgError { line: number, problem };
            let line = raw.trim_start_matches('\u{feff}').trim();
            if line.is_empty() || line.starts_with(';') || line.starts_with('#') {
                continue;
            }
            if let Some(header) = line.strip_prefix('[') {
                let (name, subsection) = parse_header(header).map_err(error)?;
                sections.push(Section {
                    name,
                    subsection,
                    line: number,
                    entries: Vec::new(),
                });
                continue;
            }
            let Some(section) = sections.last_mut() else {
                return Err(error(format!(
                    "{line:?} is outside any section: put it under a [Section] header"
                )));
            };
            let (name, rest) = match line.find(['=', ';', '#']) {
                Some(at) if line[at..].starts_with('=') => (line[..at].trim(), Some(&line[at + 1..])),
                Some(at) => (line[..at].trim(), None),
                None => (line, None),
            };
            check_name(name).map_err(error)?;
            let value = match rest {
                None => None,
                Some(rest) => {
                    // A trailing backslash continues the value on the next line.
                    let mut text = rest.to_owned();
                    while ends_in_continuation(&text) {
                        text.pop();
                        match lines.next() {
                            Some((_, next)) => text.push_str(next),
                            None => return Err(error("the value's last line ends in a backslash".to_owned())),
                        }
                    }
                    Some(parse_value(&text).map_err(error)?)
                }
            };
            section.entries.push((name.to_ascii_lowercase(), value, number));
        }
        Ok(Self { sections })
    }

    /// Every block of section `name` (case-insensitive), in order, with or without a
    /// subsection.
    pub fn sections<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Section> + 'a {
        self.sections.iter().filter(move |s| s.name.eq_ignore_ascii_case(name))
    }

    /// Section `name` without a subsection; blocks given twice are merged (later
    /// values win, as in gcfg).
    pub fn section(&self, name: &str) -> Option<Section> {
        let mut blocks = self.sections(name).filter(|s| s.subsection.is_none());
        let mut merged = blocks.next()?.clone();
        for block in blocks {
            merged.entries.extend(block.entries.iter().cloned());
        }
        Some(merged)
    }

    /// All sections, in order.
    pub fn all(&self) -> &[Section] {
        &self.sections
    }
}

/// `Name]` or `Name "sub"]` (after the `[`).
fn parse_header(header: &str) -> Result<(String, Option<String>), String> {
    let header = strip_comment(header).trim_end();
    let Some(inner) = header.strip_suffix(']') else {
        return Err(format!("section header [{header} has no closing ]"));
    };
    let inner = inner.trim();
    let (name, subsection) = match inner.find(|c: char| c.is_whitespace() || c == '"') {
        None => (inner, None),
        Some(at) => {
            let quoted = inner[at..].trim_start();
            let Some(body) = quoted.strip_prefix('"').and_then(|q| q.strip_suffix('"')) else {
                return Err(format!(
                    "section header [{inner}]: write a subsection in double quotes, e.g. [Section \"name\"]"
                ));
            };
            (&inner[..at], Some(unescape(body, true)?))
        }
    };
    check_name(name).map_err(|e| format!("section header: {e}"))?;
    Ok((name.to_owned(), subsection))
}

/// gcfg's names: a letter, then letters, digits and `-`.
fn check_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let good =
        chars.next().is_some_and(|c| c.is_ascii_alphabetic()) && chars.all(|c| c.is_ascii_alphanumeric() || c == '-');
    if good {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a name: names start with a letter and hold letters, digits and '-'"
        ))
    }
}

/// Drops a `;` or `#` comment that is outside quotes.
fn strip_comment(text: &str) -> &str {
    let mut quoted = false;
    let mut escaped = false;
    for (at, c) in text.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => quoted = !quoted,
            ';' | '#' if !quoted => return &text[..at],
            _ => {}
        }
    }
    text
}

/// Whether a value's text ends in an unescaped backslash outside quotes.
fn ends_in_continuation(text: &str) -> bool {
    let text = strip_comment(text).trim_end();
    text.chars().rev().take_while(|&c| c == '\\').count() % 2 == 1
}

/// A value: trimmed, comments dropped, quotes removed, escapes applied.
fn parse_value(text: &str) -> Result<String, String> {
    unescape(strip_comment(text).trim(), false)
}

/// Removes quotes (outside a subsection) and applies escapes.
fn unescape(text: &str, in_subsection: bool) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('"') => out.push('"'),
                Some('\\') => out.push('\\'),
                Some('n') if !in_subsection => out.push('\n'),
                Some('t') if !in_subsection => out.push('\t'),
                Some('b') if !in_subsection => {
                    out.pop();
                }
                Some(other) => return Err(format!("unknown escape \\{other} in {text:?}")),
                None => return Err(format!("{text:?} ends in a lone backslash")),
            },
            '"' if !in_subsection => quoted = !quoted,
            c => out.push(c),
        }
    }
    if quoted {
        return Err(format!("{text:?} opens a quote it does not close"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLOUD_CONF: &str = r#"
# OpenStack's cloud.conf
[Global]
auth-url = https://keystone.example:5000/v3
Region = RegionOne   ; trailing comment
application-credential-id = "abc;def"
application-credential-secret = "s3cr\"et#x"
tls-insecure

[BlockStorage]
ignore-volume-az = yes

[VirtualCenter "10.0.0.1"]
user = "administrator@vsphere.local"
password = long\
value
[Global]
region = RegionTwo
"#;

    #[test]
    fn reads_what_the_go_providers_write() -> Result<(), GcfgError> {
        let doc = Gcfg::parse(CLOUD_CONF)?;
        let global = doc.section("global").expect("a [Global] section");
        assert_eq!(global.get("AUTH-URL"), Some("https://keystone.example:5000/v3"));
        // A header given twice is merged; the later value wins.
        assert_eq!(global.get("region"), Some("RegionTwo"));
        assert_eq!(global.get_all("region").collect::<Vec<_>>(), ["RegionOne", "RegionTwo"]);
        assert_eq!(global.get("application-credential-id"), Some("abc;def"));
        assert_eq!(global.get("application-credential-secret"), Some("s3cr\"et#x"));
        assert_eq!(global.get_bool("tls-insecure")?, Some(true));
        assert_eq!(global.get_bool("missing")?, None);
        let storage = doc.section("BlockStorage").expect("a [BlockStorage] section");
        assert_eq!(storage.get_bool("ignore-volume-az")?, Some(true));
        let vcs: Vec<&Section> = doc.sections("virtualcenter").collect();
        assert_eq!(vcs.len(), 1);
        assert_eq!(vcs[0].subsection.as_deref(), Some("10.0.0.1"));
        assert_eq!(vcs[0].get("user"), Some("administrator@vsphere.local"));
        assert_eq!(vcs[0].get("password"), Some("longvalue"));
        assert_eq!(
            global.keys(),
            [
                "auth-url",
                "region",
                "application-credential-id",
                "application-credential-secret",
                "tls-insecure"
            ]
        );
        assert_eq!(global.line_of("tls-insecure"), Some(8));
        Ok(())
    }

    #[test]
    fn malformed_lines_name_their_line_and_the_fix() {
        for (text, line, words) in [
            ("auth-url = x", 1, "outside any section"),
            ("[Global]\nauth-url = \"x", 2, "does not close"),
            ("[Global\n", 1, "no closing ]"),
            ("[Global sub]\n", 1, "double quotes"),
            ("[Global]\n1bad = x", 2, "not a name"),
            ("[Global]\nbad name = x", 2, "not a name"),
            ("[Global]\nx = a\\q", 2, "unknown escape"),
            ("[Global]\nx = a\\", 2, "backslash"),
        ] {
            let error = Gcfg::parse(text).expect_err(text);
            assert_eq!(error.line, line, "{text:?}: {error}");
            assert!(error.to_string().contains(words), "{text:?}: {error}");
        }
        let doc = Gcfg::parse("[Global]\nflag = maybe").expect("parses");
        let error = doc
            .section("Global")
            .expect("section")
            .get_bool("flag")
            .expect_err("not a bool");
        assert_eq!(error.line, 2);
        assert!(error.to_string().contains("write true or false"), "{error}");
    }

    #[test]
    fn empty_and_comment_only_documents_have_no_sections() -> Result<(), GcfgError> {
        assert!(Gcfg::parse("")?.all().is_empty());
        assert!(Gcfg::parse("; nothing\n# here\n\n")?.section("Global").is_none());
        Ok(())
    }
}
