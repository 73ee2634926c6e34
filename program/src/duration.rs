//! Duration flags, written as Go durations (`90s`, `15m`, `6h0m0s`) like
//! the rest of Kubernetes; the parsing itself is `cloud_access::go_duration`.

use std::time::Duration;

use cloud_access::go_duration;

/// A clap value parser: a Go duration of zero or more.
pub fn non_negative(text: &str) -> Result<Duration, String> {
    go_duration::parse_non_negative(text).map_err(|e| e.to_string())
}

/// A clap value parser: a Go duration above zero.
pub fn positive(text: &str) -> Result<Duration, String> {
    match non_negative(text)? {
        d if d.is_zero() => Err(format!("{text:?} must be more than zero")),
        d => Ok(d),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(positive("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(positive("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(positive("1m30s"), Ok(Duration::from_secs(90)));
        assert!(positive("3").is_err(), "a bare number has no unit");
        assert!(positive("0s").is_err());
        assert_eq!(non_negative("0s"), Ok(Duration::ZERO));
        assert!(non_negative("-1s").is_err());
        assert!(positive("soon").is_err());
    }
}
