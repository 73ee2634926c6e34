//! Go's `time.Duration` text form. Kubernetes users write durations this way,
//! and kubelet uses it for `cacheDuration` in
//! a CredentialProviderResponse and `defaultCacheDuration` in its config.
//!
//! kubelet parses with `time.ParseDuration`, so `1d` or a bare `60` are
//! errors there and must be errors here too.
//!
//! Also the one checked conversion of an untrusted Unix time (a JWT's `exp`,
//! ECR's `expiresAt`) into a time, from which cache durations are computed.
//!
//! ```
//! use std::time::Duration;
//! use cloud_access::go_duration::{format, parse, parse_non_negative};
//!
//! assert_eq!(parse("1h30m"), Ok(5_400_000_000_000)); // nanoseconds, as Go's time.Duration
//! assert_eq!(parse("-1.5s"), Ok(-1_500_000_000));
//! assert!(parse("1d").is_err()); // no days in Go
//! assert!(parse("60").is_err()); // a number needs a unit, but for "0"
//! assert_eq!(parse_non_negative("90s"), Ok(Duration::from_secs(90)));
//! assert!(parse_non_negative("-1s").is_err());
//! assert_eq!(format(Duration::from_secs(6 * 3600)), "6h0m0s"); // time.Duration.String
//! assert_eq!(format(Duration::from_millis(1500)), "1.5s");
//! ```

use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GoDurationError {
    #[error("invalid duration {0:?}: use a Go duration such as \"90s\", \"15m\" or \"6h0m0s\"")]
    Invalid(String),
    #[error("invalid duration {text:?}: unknown unit {unit:?} (valid units are ns, us, µs, ms, s, m, h)")]
    UnknownUnit { text: String, unit: String },
    #[error("invalid duration {0:?}: out of range")]
    Overflow(String),
}

const UNITS: [(&str, u64); 9] = [
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000), // U+00B5 micro sign
    ("μs", 1_000), // U+03BC Greek small letter mu
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60 * 1_000_000_000),
    ("h", 3_600 * 1_000_000_000),
    ("", 0),
];

/// Parses like Go's `time.ParseDuration`, returning signed nanoseconds.
pub fn parse(text: &str) -> Result<i64, GoDurationError> {
    let invalid = || GoDurationError::Invalid(text.to_owned());
    let mut rest = text;
    let negative = match rest.as_bytes().first() {
        Some(b'-') => {
            rest = &rest[1..];
            true
        }
        Some(b'+') => {
            rest = &rest[1..];
            false
        }
        _ => false,
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    // Go accumulates in uint64 and allows exactly 1<<63 when negative.
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let int_part = &rest[..int_len];
        rest = &rest[int_len..];
        let mut frac_part = "";
        if let Some(after_dot) = rest.strip_prefix('.') {
            let frac_len = after_dot.bytes().take_while(u8::is_ascii_digit).count();
            frac_part = &after_dot[..frac_len];
            rest = &after_dot[frac_len..];
            if int_part.is_empty() && frac_part.is_empty() {
                return Err(invalid());
            }
        } else if int_part.is_empty() {
            return Err(invalid());
        }
        let unit_len = rest
            .char_indices()
            .find(|(_, c)| *c == '.' || c.is_ascii_digit())
            .map_or(rest.len(), |(i, _)| i);
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        if unit.is_empty() {
            return Err(GoDurationError::Invalid(text.to_owned()));
        }
        let scale = UNITS
            .iter()
            .find(|(name, _)| *name == unit)
            .map(|(_, scale)| *scale)
            .ok_or_else(|| GoDurationError::UnknownUnit {
                text: text.to_owned(),
                unit: unit.to_owned(),
            })?;
        let overflow = || GoDurationError::Overflow(text.to_owned());
        let whole: u128 = if int_part.is_empty() {
            0
        } else {
            int_part.parse::<u128>().map_err(|_| overflow())?
        };
        let mut value = whole.checked_mul(scale as u128).ok_or_else(overflow)?;
        if !frac_part.is_empty() {
            // Go's `leadingFraction`: the fraction's digits are kept while
            // they fit in 1<<63 and scale the kept part, digits past that
            // precision are dropped; the scale is a float64 (leading zeros
            // beyond any integer's range make it huge, not an overflow).
            let mut frac: u128 = 0;
            let mut divisor: f64 = 1.0;
            for digit in frac_part.bytes() {
                if frac > ((1u128 << 63) - 1) / 10 {
                    break;
                }
                let next = frac * 10 + u128::from(digit - b'0');
                if next > 1u128 << 63 {
                    break;
                }
                frac = next;
                divisor *= 10.0;
            }
            value += (frac as f64 * (scale as f64 / divisor)) as u128;
        }
        total = total.checked_add(value).ok_or_else(overflow)?;
        if total > 1u128 << 63 {
            return Err(overflow());
        }
    }
    if negative {
        Ok((total as i128).wrapping_neg() as i64)
    } else if total > i64::MAX as u128 {
        Err(GoDurationError::Overflow(text.to_owned()))
    } else {
        Ok(total as i64)
    }
}

/// Parses a duration that must not be negative, for flags.
pub fn parse_non_negative(text: &str) -> Result<Duration, GoDurationError> {
    let nanos = parse(text)?;
    u64::try_from(nanos)
        .map(Duration::from_nanos)
        .map_err(|_| GoDurationError::Invalid(text.to_owned()))
}

/// `seconds` since 1970 as a time, or `None` when it is not a time the
/// system can represent (not finite, or too far from 1970 either way): a
/// number from a server or a token must not be able to panic the program.
/// Negative values are times before 1970.
pub fn unix_time(seconds: f64) -> Option<SystemTime> {
    let distance = Duration::try_from_secs_f64(seconds.abs()).ok()?;
    if seconds < 0.0 {
        UNIX_EPOCH.checked_sub(distance)
    } else {
        UNIX_EPOCH.checked_add(distance)
    }
}

/// Formats like Go's `time.Duration.String` (`"6h0m0s"`, `"1.5s"`, `"0s"`).
pub fn format(duration: Duration) -> String {
    let nanos = duration.as_nanos().min(i64::MAX as u128) as u64;
    if nanos == 0 {
        return "0s".to_owned();
    }
    if nanos < 1_000_000_000 {
        // Sub-second durations use the largest unit that keeps a leading digit.
        let (unit, scale) = match nanos {
            n if n < 1_000 => ("ns", 1),
            n if n < 1_000_000 => ("µs", 1_000),
            _ => ("ms", 1_000_000),
        };
        return format!("{}{unit}", fraction(nanos, scale));
    }
    let hours = nanos / 3_600_000_000_000;
    let minutes = nanos / 60_000_000_000 % 60;
    let seconds = fraction(nanos % 60_000_000_000, 1_000_000_000);
    if hours > 0 {
        format!("{hours}h{minutes}m{seconds}s")
    } else if minutes > 0 {
        format!("{minutes}m{seconds}s")
    } else {
        format!("{seconds}s")
    }
}

/// `value / scale` as a decimal with trailing zeros removed.
fn fraction(value: u64, scale: u64) -> String {
    let whole = value / scale;
    let rest = value % scale;
    if rest == 0 {
        return whole.to_string();
    }
    let width = scale.ilog10() as usize;
    let digits = format!("{rest:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_times_out_of_range_are_none_not_a_panic() {
        assert_eq!(unix_time(1.5), Some(UNIX_EPOCH + Duration::from_millis(1500)));
        assert_eq!(unix_time(-5.0), Some(UNIX_EPOCH - Duration::from_secs(5)));
        for bad in [
            f64::NAN,
            f64::INFINITY,
            -f64::INFINITY,
            1e300,
            -1e300,
            9.3e18,
            u64::MAX as f64,
        ] {
            assert_eq!(unix_time(bad), None, "{bad}");
        }
    }

    #[test]
    fn formats_like_go() {
        // Expected strings are Go's own output for time.Duration.String.
        let cases = [
            (Duration::ZERO, "0s"),
            (Duration::from_nanos(1), "1ns"),
            (Duration::from_nanos(1_100), "1.1µs"),
            (Duration::from_micros(2_200), "2.2ms"),
            (Duration::from_millis(1_500), "1.5s"),
            (Duration::from_secs(90), "1m30s"),
            (Duration::from_secs(6 * 3600), "6h0m0s"),
            (Duration::from_secs(3600 + 1), "1h0m1s"),
            (Duration::from_millis(3_723_500), "1h2m3.5s"),
            (Duration::from_secs(300), "5m0s"),
        ];
        for (input, want) in cases {
            assert_eq!(format(input), want, "{input:?}");
        }
    }

    #[test]
    fn parses_like_go() {
        let cases: [(&str, i64); 12] = [
            ("0", 0),
            ("-0", 0),
            ("6h0m0s", 6 * 3_600_000_000_000),
            ("1.5h", 5_400_000_000_000),
            ("90s", 90_000_000_000),
            ("-1m", -60_000_000_000),
            ("+5s", 5_000_000_000),
            ("1h2m3s4ms5us6ns", 3_723_004_005_006),
            ("1µs", 1_000),
            ("1μs", 1_000),
            (".5s", 500_000_000),
            ("1.s", 1_000_000_000),
        ];
        for (input, want) in cases {
            assert_eq!(parse(input), Ok(want), "{input}");
        }
    }

    #[test]
    fn rejects_what_go_rejects() {
        for bad in ["", "60", "1d", "s", "1h-5m", ".s", "-", "1.2.3s", " 1s", "1 s"] {
            assert!(parse(bad).is_err(), "{bad:?} should be rejected");
        }
        assert!(matches!(parse("3d"), Err(GoDurationError::UnknownUnit { .. })));
        assert!(matches!(parse("9999999999h"), Err(GoDurationError::Overflow(_))));
    }

    #[test]
    fn round_trips() {
        for secs in [1, 59, 60, 61, 3599, 3600, 86_400, 43_210] {
            let d = Duration::from_secs(secs);
            assert_eq!(parse_non_negative(&format(d)), Ok(d));
        }
    }
}
