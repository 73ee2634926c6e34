//! Go's `path/filepath.Match` on Unix, which kubelet applies to each host
//! label of a `matchImages` pattern or a credential key.
//!
//! Works on bytes, decoding UTF-8 only where Go decodes a rune (`?` and
//! character classes), so that it agrees with Go on every input.

/// The pattern is malformed (Go's `filepath.ErrBadPattern`). kubelet treats
/// it as "no match".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadPattern;

const SEPARATOR: u8 = b'/';

/// `filepath.Match(pattern, name)`.
pub fn glob_match(pattern: &[u8], name: &[u8]) -> Result<bool, BadPattern> {
    let mut pattern = pattern;
    let mut name = name;
    'pattern: while !pattern.is_empty() {
        let (star, chunk, rest) = scan_chunk(pattern);
        pattern = rest;
        if star && chunk.is_empty() {
            // A trailing `*` matches the rest unless it holds a separator.
            return Ok(!name.contains(&SEPARATOR));
        }
        let attempt = match_chunk(chunk, name);
        if let Ok(Some(rest_of_name)) = attempt
            && (rest_of_name.is_empty() || !pattern.is_empty())
        {
            name = rest_of_name;
            continue;
        }
        attempt?;
        if star {
            let mut i = 0;
            while i < name.len() && name[i] != SEPARATOR {
                match match_chunk(chunk, &name[i + 1..])? {
                    Some(rest_of_name) if pattern.is_empty() && !rest_of_name.is_empty() => {}
                    Some(rest_of_name) => {
                        name = rest_of_name;
                        continue 'pattern;
                    }
                    None => {}
                }
                i += 1;
            }
        }
        // Before answering "no", Go checks that the rest of the pattern is
        // well formed, so a bad pattern is an error whatever the name.
        while !pattern.is_empty() {
            let (_, chunk, rest) = scan_chunk(pattern);
            pattern = rest;
            match_chunk(chunk, b"")?;
        }
        return Ok(false);
    }
    Ok(name.is_empty())
}

/// Splits off leading stars and the chunk up to the next unbracketed star.
fn scan_chunk(pattern: &[u8]) -> (bool, &[u8], &[u8]) {
    let mut pattern = pattern;
    let mut star = false;
    while let Some((b'*', rest)) = pattern.split_first() {
        pattern = rest;
        star = true;
    }
    let mut in_range = false;
    let mut i = 0;
    while i < pattern.len() {
        match pattern[i] {
            // An escape skips the next byte; a trailing one is caught later.
            b'\\' if i + 1 < pattern.len() => i += 1,
            b'[' => in_range = true,
            b']' => in_range = false,
            b'*' if !in_range => break,
            _ => {}
        }
        i += 1;
    }
    (star, &pattern[..i], &pattern[i..])
}

/// Matches `chunk` at the start of `s`; `Ok(Some(rest))` on a match. Once
/// the match has failed, the chunk is still read to the end to find errors.
fn match_chunk<'a>(chunk: &[u8], s: &'a [u8]) -> Result<Option<&'a [u8]>, BadPattern> {
    let mut chunk = chunk;
    let mut s = s;
    let mut failed = false;
    while let Some(&first) = chunk.first() {
        if !failed && s.is_empty() {
            failed = true;
        }
        match first {
            b'[' => {
                let mut rune = '\0' as u32;
                if !failed {
                    let (r, n) = decode_rune(s);
                    rune = r;
                    s = &s[n..];
                }
                chunk = &chunk[1..];
                let negated = chunk.first() == Some(&b'^');
                if negated {
                    chunk = &chunk[1..];
                }
                let mut matched = false;
                let mut ranges = 0;
                loop {
                    if chunk.first() == Some(&b']') && ranges > 0 {
                        chunk = &chunk[1..];
                        break;
                    }
                    let (lo, rest) = class_char(chunk)?;
                    chunk = rest;
                    let mut hi = lo;
                    if chunk.first() == Some(&b'-') {
                        let (h, rest) = class_char(&chunk[1..])?;
                        hi = h;
                        chunk = rest;
                    }
                    if lo <= rune && rune <= hi {
                        matched = true;
                    }
                    ranges += 1;
                }
                if matched == negated {
                    failed = true;
                }
            }
            b'?' => {
                if !failed {
                    if s[0] == SEPARATOR {
                        failed = true;
                    }
                    let (_, n) = decode_rune(s);
                    s = &s[n..];
                }
                chunk = &chunk[1..];
            }
            _ => {
                if first == b'\\' {
                    chunk = &chunk[1..];
                    if chunk.is_empty() {
                        return Err(BadPattern);
                    }
                }
                if !failed {
                    if chunk[0] != s[0] {
                        failed = true;
                    }
                    s = &s[1..];
                }
                chunk = &chunk[1..];
            }
        }
    }
    Ok(if failed { None } else { Some(s) })
}

/// One possibly escaped character of a class (Go's `getEsc`).
fn class_char(chunk: &[u8]) -> Result<(u32, &[u8]), BadPattern> {
    let mut chunk = chunk;
    match chunk.first() {
        None | Some(b'-') | Some(b']') => return Err(BadPattern),
        Some(b'\\') => {
            chunk = &chunk[1..];
            if chunk.is_empty() {
                return Err(BadPattern);
            }
        }
        Some(_) => {}
    }
    let (rune, n) = decode_rune(chunk);
    if rune == REPLACEMENT && n == 1 {
        return Err(BadPattern);
    }
    let rest = &chunk[n..];
    if rest.is_empty() {
        return Err(BadPattern);
    }
    Ok((rune, rest))
}

const REPLACEMENT: u32 = 0xFFFD;

/// Go's `utf8.DecodeRuneInString`: an invalid byte decodes as U+FFFD, width 1.
fn decode_rune(s: &[u8]) -> (u32, usize) {
    let Some(&first) = s.first() else {
        return (REPLACEMENT, 0);
    };
    let width = match first {
        0x00..=0x7F => return (u32::from(first), 1),
        0xC2..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF4 => 4,
        _ => return (REPLACEMENT, 1),
    };
    match s.get(..width).and_then(|bytes| std::str::from_utf8(bytes).ok()) {
        Some(text) => (text.chars().next().map_or(REPLACEMENT, u32::from), width),
        None => (REPLACEMENT, 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cases from Go's own `path/filepath` match tests (Unix).
    #[test]
    fn agrees_with_go_match_tests() {
        let cases: &[(&str, &str, Result<bool, BadPattern>)] = &[
            ("abc", "abc", Ok(true)),
            ("*", "abc", Ok(true)),
            ("*c", "abc", Ok(true)),
            ("a*", "a", Ok(true)),
            ("a*", "abc", Ok(true)),
            ("a*", "ab/c", Ok(false)),
            ("a*/b", "abc/b", Ok(true)),
            ("a*/b", "a/c/b", Ok(false)),
            ("a*b*c*d*e*/f", "axbxcxdxe/f", Ok(true)),
            ("a*b*c*d*e*/f", "axbxcxdxexxx/f", Ok(true)),
            ("a*b*c*d*e*/f", "axbxcxdxe/xxx/f", Ok(false)),
            ("a*b*c*d*e*/f", "axbxcxdxexxx/fff", Ok(false)),
            ("a*b?c*x", "abxbbxdbxebxczzx", Ok(true)),
            ("a*b?c*x", "abxbbxdbxebxczzy", Ok(false)),
            ("ab[c]", "abc", Ok(true)),
            ("ab[b-d]", "abc", Ok(true)),
            ("ab[e-g]", "abc", Ok(false)),
            ("ab[^c]", "abc", Ok(false)),
            ("ab[^b-d]", "abc", Ok(false)),
            ("ab[^e-g]", "abc", Ok(true)),
            ("a\\*b", "a*b", Ok(true)),
            ("a\\*b", "ab", Ok(false)),
            ("a?b", "a☺b", Ok(true)),
            ("a[^a]b", "a☺b", Ok(true)),
            ("a???b", "a☺b", Ok(false)),
            ("a[^a][^a][^a]b", "a☺b", Ok(false)),
            ("[a-ζ]*", "α", Ok(true)),
            ("*[a-ζ]", "A", Ok(false)),
            ("a?b", "a/b", Ok(false)),
            ("a*b", "a/b", Ok(false)),
            ("[\\]a]", "]", Ok(true)),
            ("[\\-]", "-", Ok(true)),
            ("[x\\-]", "x", Ok(true)),
            ("[x\\-]", "-", Ok(true)),
            ("[x\\-]", "z", Ok(false)),
            ("[\\-x]", "x", Ok(true)),
            ("[\\-x]", "-", Ok(true)),
            ("[\\-x]", "a", Ok(false)),
            ("[]a]", "]", Err(BadPattern)),
            ("[-]", "-", Err(BadPattern)),
            ("[x-]", "x", Err(BadPattern)),
            ("[x-]", "-", Err(BadPattern)),
            ("[x-]", "z", Err(BadPattern)),
            ("[-x]", "x", Err(BadPattern)),
            ("[-x]", "-", Err(BadPattern)),
            ("[-x]", "a", Err(BadPattern)),
            ("\\", "a", Err(BadPattern)),
            ("[a-b-c]", "a", Err(BadPattern)),
            ("[", "a", Err(BadPattern)),
            ("[^", "a", Err(BadPattern)),
            ("[^bc", "a", Err(BadPattern)),
            ("a[", "a", Err(BadPattern)),
            ("a[", "ab", Err(BadPattern)),
            ("a[", "x", Err(BadPattern)),
            ("a/b[", "x", Err(BadPattern)),
            ("*x", "xxx", Ok(true)),
        ];
        for (pattern, name, want) in cases {
            assert_eq!(
                glob_match(pattern.as_bytes(), name.as_bytes()),
                *want,
                "Match({pattern:?}, {name:?})"
            );
        }
    }
}
