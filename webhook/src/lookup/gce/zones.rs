//! The region's zone list as `regions.get` last answered it, and when it may be used:
//! fresh for its TTL; past that it is asked for again, and while a refresh fails the old
//! list stands in until it is twice the TTL old (zones are added to a region once in
//! years; a list that old is not guessed on). No I/O: tested without a server.

use std::time::{Duration, Instant};

/// How long a region's zone list is used before `regions.get` is asked again.
pub const ZONE_LIST_TTL: Duration = Duration::from_secs(60 * 60);

/// A region's zones and when Compute listed them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneList {
    zones: Vec<String>,
    fetched: Instant,
}

/// What to do with the list at hand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZonesNow<'a> {
    /// Younger than the TTL: use it, ask nothing.
    Fresh(&'a [String]),
    /// Ask `regions.get`; should it fail, `stale` (if any) stands in.
    Refresh { stale: Option<&'a [String]> },
}

impl ZoneList {
    pub fn new(zones: Vec<String>, fetched: Instant) -> Self {
        Self { zones, fetched }
    }

    /// What `list` (none yet: `None`) is good for at `now`, with `ttl`.
    pub fn now<'a>(list: Option<&'a ZoneList>, now: Instant, ttl: Duration) -> ZonesNow<'a> {
        let Some(list) = list else {
            return ZonesNow::Refresh { stale: None };
        };
        let age = now.saturating_duration_since(list.fetched);
        if age < ttl {
            ZonesNow::Fresh(&list.zones)
        } else {
            let stale = (age < ttl.saturating_mul(2)).then_some(&list.zones[..]);
            ZonesNow::Refresh { stale }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_then_asked_again_then_only_a_stand_in_for_a_while() {
        let start = Instant::now();
        let ttl = Duration::from_secs(3600);
        let zones = vec!["us-central1-a".to_owned()];
        let list = ZoneList::new(zones.clone(), start);
        let at = |seconds| ZoneList::now(Some(&list), start + Duration::from_secs(seconds), ttl);
        assert_eq!(at(0), ZonesNow::Fresh(&zones));
        assert_eq!(at(3599), ZonesNow::Fresh(&zones));
        assert_eq!(at(3600), ZonesNow::Refresh { stale: Some(&zones) });
        assert_eq!(at(7199), ZonesNow::Refresh { stale: Some(&zones) });
        assert_eq!(at(7200), ZonesNow::Refresh { stale: None });
        assert_eq!(ZoneList::now(None, start, ttl), ZonesNow::Refresh { stale: None });
    }
}
