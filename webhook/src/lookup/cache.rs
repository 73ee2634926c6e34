//! The cache every lookup shares: bounded (least recently used out first), expiring
//! (TTL) and single-flight (concurrent misses of one key share one load). Only
//! successful loads are stored: a failure reaches the callers that waited for that
//! load, and the next caller loads again. Generic in key, value and error so that it
//! knows nothing of clouds; [`CachedLookup`](super::CachedLookup) puts it in front
//! of a [`TopologyLookup`](super::TopologyLookup).

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use lru::LruCache;
use tokio::sync::OnceCell;

/// An LRU map whose entries also expire `ttl` after insertion. The clock is passed in
/// so that expiry can be tested without waiting.
#[derive(Debug)]
pub struct TtlLruCache<K: Hash + Eq, V> {
    entries: Mutex<LruCache<K, (Instant, V)>>,
    ttl: Duration,
}

impl<K: Hash + Eq, V: Clone> TtlLruCache<K, V> {
    /// A cache holding at most `capacity` entries, each for at most `ttl`.
    pub fn new(capacity: NonZeroUsize, ttl: Duration) -> Self {
        Self {
            entries: Mutex::new(LruCache::new(capacity)),
            ttl,
        }
    }

    /// The value for `key`, unless absent or expired at `now` (expired entries are dropped).
    pub fn get(&self, key: &K, now: Instant) -> Option<V> {
        // A panic elsewhere while holding the lock leaves a consistent map: keep using it.
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let expired = match entries.get(key) {
            None => return None,
            Some((inserted, _)) => now.saturating_duration_since(*inserted) >= self.ttl,
        };
        if expired {
            entries.pop(key);
            return None;
        }
        entries.get(key).map(|(_, value)| value.clone())
    }

    /// Stores `value`, evicting the least recently used entry when full.
    pub fn insert(&self, key: K, value: V, now: Instant) {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.put(key, (now, value));
    }

    /// How many entries are held (expired ones included until touched or evicted).
    pub fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Where an answer of [`LoadingCache::get_or_load`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answered {
    /// A stored entry.
    Hit,
    /// A load: this caller's, or one under way that it joined.
    Miss,
}

type Flight<V, E> = Arc<OnceCell<Result<V, E>>>;

/// A [`TtlLruCache`] that loads missing entries itself, once per key at a time.
#[derive(Debug)]
pub struct LoadingCache<K: Hash + Eq, V, E> {
    entries: TtlLruCache<K, V>,
    /// Loads under way, by key: a second caller waits for the first one's answer.
    in_flight: Mutex<HashMap<K, Flight<V, E>>>,
}

impl<K: Hash + Eq + Clone, V: Clone, E: Clone> LoadingCache<K, V, E> {
    /// A cache holding at most `capacity` entries, each for at most `ttl`.
    pub fn new(capacity: NonZeroUsize, ttl: Duration) -> Self {
        Self {
            entries: TtlLruCache::new(capacity, ttl),
            in_flight: Mutex::new(HashMap::new()),
        }
    }

    /// The stored entries, for inspection.
    pub fn entries(&self) -> &TtlLruCache<K, V> {
        &self.entries
    }

    /// The value for `key`: stored, or from the load under way for it, or from `load`.
    /// A load whose caller goes away (its future dropped) is taken over by a caller
    /// still waiting for it.
    pub async fn get_or_load<F, Fut>(&self, key: &K, load: F) -> (Result<V, E>, Answered)
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<V, E>>,
    {
        if let Some(value) = self.entries.get(key, Instant::now()) {
            return (Ok(value), Answered::Hit);
        }
        let cell = {
            let mut in_flight = self.in_flight.lock().unwrap_or_else(PoisonError::into_inner);
            // A load may have stored its answer and left since the look above.
            if let Some(value) = self.entries.get(key, Instant::now()) {
                return (Ok(value), Answered::Hit);
            }
            in_flight.entry(key.clone()).or_default().clone()
        };
        let _leave = Leave {
            in_flight: &self.in_flight,
            key,
            cell: &cell,
        };
        let answer = cell
            .get_or_init(|| async {
                let answer = load().await;
                if let Ok(value) = &answer {
                    // Stored before the flight is left, so that no caller misses both.
                    self.entries.insert(key.clone(), value.clone(), Instant::now());
                }
                answer
            })
            .await
            .clone();
        (answer, Answered::Miss)
    }
}

/// Removes a flight from the map when its load has answered, or when its last caller
/// leaves without an answer (all of them cancelled).
struct Leave<'a, K: Hash + Eq, V, E> {
    in_flight: &'a Mutex<HashMap<K, Flight<V, E>>>,
    key: &'a K,
    cell: &'a Flight<V, E>,
}

impl<K: Hash + Eq, V, E> Drop for Leave<'_, K, V, E> {
    fn drop(&mut self) {
        let mut in_flight = self.in_flight.lock().unwrap_or_else(PoisonError::into_inner);
        let ours = in_flight.get(self.key).is_some_and(|c| Arc::ptr_eq(c, self.cell));
        // Clones are made under this lock: two holders are the map and this caller.
        if ours && (self.cell.initialized() || Arc::strong_count(self.cell) == 2) {
            in_flight.remove(self.key);
        }
    }
}
