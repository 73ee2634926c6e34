//! Asking a cloud API for a volume's topology: the interface cloud implementations
//! (EC2 DescribeVolumes, GCE disks, Azure disks, Cinder) plug into, and a bounded,
//! expiring cache in front of them. A disk's zone does not change, but a handle can be
//! reused after deletion, so entries still expire.

use std::future::Future;
use std::hash::Hash;
use std::num::NonZeroUsize;
use std::pin::Pin;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use lru::LruCache;
use prometheus_client::metrics::counter::Counter;
use thiserror::Error;

use crate::source::VolumeIdentity;
use crate::topology::Topology;

/// Why a lookup gave no topology.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum LookupError {
    /// The cloud does not know the volume.
    #[error("volume not found")]
    NotFound,
    /// The call failed (network, credentials, throttling, …).
    #[error("{0}")]
    Failed(String),
    /// The cloud answered with values we cannot use.
    #[error("unusable answer: {0}")]
    Invalid(String),
    /// The lookup did not finish within its deadline.
    #[error("timed out after {0:?}")]
    TimedOut(Duration),
}

/// The future a lookup returns; boxed so that lookups can be held as trait objects.
pub type LookupFuture<'a> = Pin<Box<dyn Future<Output = Result<Topology, LookupError>> + Send + 'a>>;

/// A source of topology that asks someone else, e.g. a cloud API.
pub trait TopologyLookup: Send + Sync {
    /// A short name for audit annotations and messages, e.g. `ec2`.
    fn name(&self) -> &str;
    /// Whether this lookup can answer for the volume; only the first lookup that can is asked.
    fn handles(&self, volume: &VolumeIdentity) -> bool;
    /// The volume's topology.
    fn lookup<'a>(&'a self, volume: &'a VolumeIdentity) -> LookupFuture<'a>;
}

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

/// A lookup with a [`TtlLruCache`] in front. Only successful answers are cached, so a
/// failed call is retried on the next request.
pub struct CachedLookup<L> {
    inner: L,
    cache: TtlLruCache<VolumeIdentity, Topology>,
    /// Hit and miss counters (see [`crate::metrics::Metrics::cache_counters`]).
    counters: Option<(Counter, Counter)>,
}

impl<L: TopologyLookup> CachedLookup<L> {
    /// Caches up to `capacity` answers of `inner`, each for `ttl`.
    pub fn new(inner: L, capacity: NonZeroUsize, ttl: Duration) -> Self {
        Self {
            inner,
            cache: TtlLruCache::new(capacity, ttl),
            counters: None,
        }
    }

    /// Counts hits and misses on these counters.
    #[must_use]
    pub fn with_counters(mut self, (hits, misses): (Counter, Counter)) -> Self {
        self.counters = Some((hits, misses));
        self
    }

    /// The cache, for inspection.
    pub fn cache(&self) -> &TtlLruCache<VolumeIdentity, Topology> {
        &self.cache
    }
}

impl<L: TopologyLookup> TopologyLookup for CachedLookup<L> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn handles(&self, volume: &VolumeIdentity) -> bool {
        self.inner.handles(volume)
    }

    fn lookup<'a>(&'a self, volume: &'a VolumeIdentity) -> LookupFuture<'a> {
        Box::pin(async move {
            if let Some(topology) = self.cache.get(volume, Instant::now()) {
                if let Some((hits, _)) = &self.counters {
                    hits.inc();
                }
                return Ok(topology);
            }
            if let Some((_, misses)) = &self.counters {
                misses.inc();
            }
            let topology = self.inner.lookup(volume).await?;
            self.cache.insert(volume.clone(), topology.clone(), Instant::now());
            Ok(topology)
        })
    }
}
