//! The guard every YAML text from outside the program passes before it is
//! parsed (a kubelet config, a metadata document).
//!
//! The YAML scanner's time grows with the number of tokens times the `[`/`{`
//! (flow) nesting depth: 200 KB nested 100 000 deep takes seconds, 1 MiB
//! minutes. Telling real brackets from brackets inside quoted, plain and
//! block scalars and comments takes a whole YAML scanner (a `"` inside a
//! plain scalar opens nothing), so this guard does not try: it counts every
//! `[` and `{` of the text, quoted or not. A text nested too deep, or with
//! too many brackets to bound the nesting at all, is refused; a document
//! with many brackets inside its quoted strings or comments is refused too,
//! which no real config or metadata document comes near.

/// Deeper `[`/`{` nesting than any config or metadata document needs (about
/// four levels), counting brackets inside strings and comments.
pub const MAX_FLOW_DEPTH: usize = 32;

/// More `[` and `{` than any config or metadata document holds. A `]` inside
/// a quoted string lowers the count of [`MAX_FLOW_DEPTH`] without closing
/// anything, so the depth alone cannot bound the real nesting: this total
/// does (and with it the scanner's time, to a few times that of a flat
/// document).
pub const MAX_FLOW_BRACKETS: usize = 512;

/// Why a YAML text is refused before parsing. Line and column count from 1.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NestingError {
    #[error(
        "nested more than {MAX_FLOW_DEPTH} levels deep with [ and {{ (line {line}, column {column}; brackets inside quoted strings and comments count too)"
    )]
    TooDeep { line: usize, column: usize },
    #[error(
        "more than {MAX_FLOW_BRACKETS} [ and {{ (line {line}, column {column}; brackets inside quoted strings and comments count too)"
    )]
    TooManyBrackets { line: usize, column: usize },
}

/// Refuses `text` if its `[`/`{` nesting exceeds [`MAX_FLOW_DEPTH`] or it
/// holds more than [`MAX_FLOW_BRACKETS`] of them, in one pass over its
/// characters; every bracket counts, wherever it is.
pub fn check_nesting(text: &str) -> Result<(), NestingError> {
    let (mut line, mut column) = (1, 0);
    let (mut depth, mut opened) = (0usize, 0usize);
    for c in text.chars() {
        if c == '\n' {
            line += 1;
            column = 0;
        } else {
            column += 1;
        }
        match c {
            '[' | '{' => {
                depth += 1;
                opened += 1;
                if depth > MAX_FLOW_DEPTH {
                    return Err(NestingError::TooDeep { line, column });
                }
                if opened > MAX_FLOW_BRACKETS {
                    return Err(NestingError::TooManyBrackets { line, column });
                }
            }
            ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// Why YAML from outside was not read.
#[derive(Debug, thiserror::Error)]
pub enum YamlError {
    #[error(transparent)]
    Nesting(#[from] NestingError),
    #[error(transparent)]
    Syntax(#[from] serde_yaml_ng::Error),
}

/// [`check_nesting`], then `serde_yaml_ng::from_str`: the one way programs
/// parse YAML from outside.
pub fn from_str<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, YamlError> {
    check_nesting(text)?;
    Ok(serde_yaml_ng::from_str(text)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nesting_up_to_the_limit_is_fine_deeper_is_refused_with_its_place() {
        let nested = "[".repeat(MAX_FLOW_DEPTH);
        let closed = "]".repeat(MAX_FLOW_DEPTH);
        assert_eq!(
            check_nesting(&format!("a: {nested}{closed}\nb: {nested}{closed}\n")),
            Ok(())
        );
        assert_eq!(
            check_nesting(&format!("a: 1\nb: {nested}{{")),
            Err(NestingError::TooDeep {
                line: 2,
                column: 3 + MAX_FLOW_DEPTH + 1
            })
        );
    }

    /// Issue 9's re-test: a `"` inside a plain scalar opens no quote, yet a
    /// scanner that took it for one skipped the brackets after it.
    #[test]
    fn a_quote_inside_a_plain_scalar_hides_no_brackets() {
        let deep = format!("x: [a:\", {}{}, b\"]\n", "[".repeat(100_000), "]".repeat(100_000));
        assert!(matches!(
            check_nesting(&deep),
            Err(NestingError::TooDeep { line: 1, .. })
        ));
        let refused: Result<serde_yaml_ng::Value, _> = from_str(&deep);
        assert!(
            refused
                .unwrap_err()
                .to_string()
                .contains("nested more than 32 levels deep")
        );
        // Brackets inside real quoted strings and comments count too.
        let nested = "[".repeat(MAX_FLOW_DEPTH + 1);
        for text in [
            format!("a: \"{nested}\"\n"),
            format!("a: '{nested}'\n"),
            format!("a: x # {nested}\n"),
        ] {
            assert!(check_nesting(&text).is_err(), "{text}");
        }
    }

    /// A `]` inside a quoted string lowers the depth count without closing
    /// anything: the total of brackets still bounds the real nesting.
    #[test]
    fn closing_brackets_in_strings_cannot_hide_deep_nesting() {
        let step = format!("{}\"{}\", ", "[".repeat(20), "]".repeat(20));
        let deep = format!("x: {}a\n", step.repeat(1000));
        let error = check_nesting(&deep).unwrap_err();
        assert!(
            matches!(error, NestingError::TooManyBrackets { line: 1, .. }),
            "{error}"
        );
        assert!(error.to_string().contains("more than 512 [ and {"), "{error}");
    }
}
