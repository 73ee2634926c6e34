//! Asking a cloud API for a volume's topology: the interface cloud implementations
//! (EC2 DescribeVolumes, GCE disks, Azure disks, Cinder, vSphere) plug into, and the one
//! mechanism in front of all of them, [`CachedLookup`]: a bounded, expiring cache,
//! single-flight (concurrent reviews of one volume make one call); the deadline is the
//! [`crate::resolve::Resolver`]'s, the same for every lookup. A new
//! cloud writes only its call (a [`TopologyLookup`]) and is wrapped in a
//! [`CachedLookup`]. A disk's zone does not change, but a handle can be reused after
//! deletion, so entries still expire.

pub mod cache;

use std::future::Future;
use std::num::NonZeroUsize;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use thiserror::Error;

pub use self::cache::{Answered, LoadingCache, TtlLruCache};
pub use crate::model::Timeout;
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
    /// The lookup did not finish within its deadline (see [`Timeout`]).
    #[error("{0}")]
    TimedOut(Timeout),
}

impl LookupError {
    /// A lookup that ran out of its `after` waiting for `endpoint`, a URL as
    /// [`cloud_access::http::shown_url`] shows it (no user, password, query or fragment).
    pub fn timed_out(after: Duration, endpoint: Option<String>) -> Self {
        Self::TimedOut(Timeout { after, endpoint })
    }
}

/// The future a lookup returns; boxed so that lookups can be held as trait objects.
pub type LookupFuture<'a> = Pin<Box<dyn Future<Output = Result<Topology, LookupError>> + Send + 'a>>;

/// A source of topology that asks someone else, e.g. a cloud API.
pub trait TopologyLookup: Send + Sync {
    /// A short name for audit annotations and messages, e.g. `ec2`.
    fn name(&self) -> &str;
    /// Whether this lookup can answer for the volume; only the first lookup that can is asked.
    fn handles(&self, volume: &VolumeIdentity) -> bool;
    /// The volume's topology: one call to the cloud, no caching (see [`CachedLookup`]).
    fn lookup<'a>(&'a self, volume: &'a VolumeIdentity) -> LookupFuture<'a>;
    /// The key the answer is cached and shared under: volumes with the same key are the
    /// same disk (e.g. EBS's in-tree `aws:///vol-1` and CSI `vol-1`).
    fn cache_key(&self, volume: &VolumeIdentity) -> String {
        volume.to_string()
    }
    /// The endpoint the lookup calls, as its timeouts name it (a URL as
    /// [`cloud_access::http::shown_url`] shows it): the resolver's deadline names it too.
    /// `None` when it has none to name.
    fn endpoint(&self) -> Option<String> {
        None
    }
}

/// Forwards to the lookup behind the pointer: [`CachedLookup`] wraps any of these.
macro_rules! forward_lookup {
    ($($pointer:ident),*) => {$(
impl<L: TopologyLookup + ?Sized> TopologyLookup for $pointer<L> {
    fn name(&self) -> &str {
        (**self).name()
    }

    fn handles(&self, volume: &VolumeIdentity) -> bool {
        (**self).handles(volume)
    }

    fn lookup<'a>(&'a self, volume: &'a VolumeIdentity) -> LookupFuture<'a> {
        (**self).lookup(volume)
    }

    fn cache_key(&self, volume: &VolumeIdentity) -> String {
        (**self).cache_key(volume)
    }

    fn endpoint(&self) -> Option<String> {
        (**self).endpoint()
    }
}
    )*};
}

forward_lookup!(Arc, Box);

/// Implements [`TopologyLookup`] for a cloud's lookup from its parts: its name, the
/// function that finds what it looks up in a volume (`Some` for the volumes it
/// answers for), its `async fn find(&self, &VolumeIdentity)`, its cache-key
/// function, and its `fn shown_endpoint(&self) -> Option<String>` (what its timeouts
/// name). Each cloud then writes only what differs.
macro_rules! cloud_lookup {
    ($lookup:ty, name: $name:expr, answers_for: $answers_for:path, cache_key: $cache_key:path) => {
        impl $crate::lookup::TopologyLookup for $lookup {
            fn name(&self) -> &str {
                $name
            }

            fn handles(&self, volume: &$crate::source::VolumeIdentity) -> bool {
                $answers_for(volume).is_some()
            }

            fn lookup<'a>(&'a self, volume: &'a $crate::source::VolumeIdentity) -> $crate::lookup::LookupFuture<'a> {
                Box::pin(self.find(volume))
            }

            fn cache_key(&self, volume: &$crate::source::VolumeIdentity) -> String {
                $cache_key(volume)
            }

            fn endpoint(&self) -> Option<String> {
                self.shown_endpoint()
            }
        }
    };
}
pub(crate) use cloud_lookup;

/// A lookup behind a [`LoadingCache`]: answers are kept for `ttl` (at most `capacity`
/// of them), and concurrent reviews of one volume share one call (a caller that gives
/// up, at the resolver's deadline, hands it to one still waiting). Only successful answers are
/// cached, so a failed call (not found included) is retried on the next request.
pub struct CachedLookup<L> {
    inner: L,
    cache: LoadingCache<String, Topology, LookupError>,
    /// Hit and miss counters (see [`crate::metrics::Metrics::cache_counters`]).
    counters: Option<(Counter, Counter)>,
}

impl<L: TopologyLookup> CachedLookup<L> {
    /// Caches up to `capacity` answers of `inner`, each for `ttl`.
    pub fn new(inner: L, capacity: NonZeroUsize, ttl: Duration) -> Self {
        Self {
            inner,
            cache: LoadingCache::new(capacity, ttl),
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
    pub fn cache(&self) -> &TtlLruCache<String, Topology> {
        self.cache.entries()
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
            let key = self.inner.cache_key(volume);
            let (answer, answered) = self.cache.get_or_load(&key, || self.inner.lookup(volume)).await;
            if let Some((hits, misses)) = &self.counters {
                match answered {
                    Answered::Hit => hits.inc(),
                    Answered::Miss => misses.inc(),
                };
            }
            answer
        })
    }

    fn cache_key(&self, volume: &VolumeIdentity) -> String {
        self.inner.cache_key(volume)
    }

    fn endpoint(&self) -> Option<String> {
        self.inner.endpoint()
    }
}
