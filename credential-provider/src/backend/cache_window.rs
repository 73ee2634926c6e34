//! How long kubelet may keep a credential that expires: every backend that
//! answers an expiring token (passthrough, token-exchange, gcp, acr) sizes
//! `cacheDuration` here. `ecr` does not: it keeps half the remaining
//! validity, as ecr-credential-provider does (see `ecr::half_remaining`).

use std::time::{Duration, SystemTime};

/// How long a credential that expires at `expires_at` may be cached at
/// `now`: its remaining validity less `margin` (kept in hand so that kubelet
/// never presents an expired one), at most `cap` (`--cache-duration`) when
/// set; zero when the margin is already past.
pub fn cache_window(expires_at: SystemTime, now: SystemTime, margin: Duration, cap: Option<Duration>) -> Duration {
    let window = expires_at
        .duration_since(now)
        .unwrap_or_default()
        .saturating_sub(margin);
    cap.map_or(window, |cap| cap.min(window))
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;

    #[test]
    fn cache_window_keeps_a_margin_and_never_goes_negative() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000);
        let margin = Duration::from_secs(60);
        assert_eq!(
            cache_window(now + Duration::from_secs(3_600), now, margin, None),
            Duration::from_secs(3_540)
        );
        assert_eq!(
            cache_window(now + Duration::from_secs(30), now, margin, None),
            Duration::ZERO
        );
        assert_eq!(
            cache_window(now - Duration::from_secs(30), now, margin, None),
            Duration::ZERO
        );
    }

    #[test]
    fn cache_window_is_at_most_the_cap() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000);
        let in_3h = now + Duration::from_secs(3 * 3600);
        let hour = Some(Duration::from_secs(3600));
        assert_eq!(
            cache_window(in_3h, now, Duration::ZERO, hour),
            Duration::from_secs(3600)
        );
        assert_eq!(
            cache_window(now + Duration::from_secs(600), now, Duration::from_secs(60), hour),
            Duration::from_secs(540)
        );
    }
}
