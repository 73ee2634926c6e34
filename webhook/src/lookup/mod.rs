//! Asking a cloud API for a volume's topology: the clouds (EC2 DescribeVolumes, GCE
//! disks, Azure disks, Cinder, vSphere), one module each, the table of them
//! ([`CLOUDS`]), and the one mechanism in front of all of them, [`CachedLookup`]: a
//! bounded, expiring cache, single-flight (concurrent reviews of one volume make one
//! call). The deadline is the [`crate::resolve::Resolver`]'s, the same for every
//! lookup, passed to each call. A new cloud writes its call (a [`CloudLookup`]) and its
//! entry in [`CLOUDS`] (a [`Cloud`]); the resolver's hints and the set-up go through the
//! table. A disk's zone does not change, but a handle can be reused after deletion, so
//! entries still expire.

pub mod azure;
pub mod cache;
pub mod cinder;
pub mod ebs;
pub mod gce;
pub mod vsphere;

use std::future::Future;
use std::num::NonZeroUsize;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cloud_access::api::CallFailure;
use prometheus_client::metrics::counter::Counter;
use thiserror::Error;

pub use self::cache::{Answered, LoadingCache, TtlLruCache};
use crate::cli::TopologyArgs;
pub use crate::model::Timeout;
use crate::rules::LookupScope;
use crate::source::{InTree, VolumeIdentity};
use crate::topology::Topology;

/// The user agent of every cloud call the webhook's lookups make.
pub const USER_AGENT: &str = concat!("pv-topology-webhook/", env!("CARGO_PKG_VERSION"));

/// Every cloud lookup, in the order the set-up adds them (the first that answers for
/// a volume is asked) and the resolver looks for the flag to hint.
pub const CLOUDS: &[Cloud] = &[ebs::CLOUD, gce::CLOUD, azure::CLOUD, cinder::CLOUD, vsphere::CLOUD];

/// Builds a cloud's lookup from the flags, checked at start-up.
pub type BuildLookup = fn(&TopologyArgs) -> Result<Arc<dyn TopologyLookup>, crate::setup::SetupError>;

/// One cloud lookup as the program knows it: what it is called, the flag that turns it
/// on, the volumes it answers for, and how the flags build it. Each cloud declares one
/// (its module's `CLOUD`).
#[derive(Debug, Clone, Copy)]
pub struct Cloud {
    /// A short name for audit annotations, messages and metrics, e.g. `aws-ebs`.
    pub name: &'static str,
    /// The flag that turns the lookup on, e.g. `--aws-ebs-lookup`.
    pub flag: &'static str,
    /// How a volume it answers for gets a topology while the lookup is off, as the
    /// resolver hints it: `"{flag} (or --rules)"` (a `&'static str`, as the resolution
    /// holds it).
    pub hint: &'static str,
    /// The CSI driver whose volumes it answers for.
    pub csi_driver: &'static str,
    /// The in-tree volume type it answers for, if any (the in-tree types are frozen:
    /// a new cloud has none).
    pub in_tree: Option<InTree>,
    /// Whether it answers for this volume (its driver or type, in a form it can look up).
    pub answers_for: fn(&VolumeIdentity) -> bool,
    /// Whether the flags turn it on.
    pub enabled: fn(&TopologyArgs) -> bool,
    /// The lookup the flags describe (called only when [`Cloud::enabled`]).
    pub build: BuildLookup,
}

impl Cloud {
    /// The volumes it answers for, as a rule would select them (no rule may hide them).
    pub fn scope(&self) -> LookupScope {
        LookupScope {
            flag: self.flag,
            driver: self.csi_driver,
            in_tree: self.in_tree,
        }
    }
}

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
    /// The lookup ran out of the resolver's deadline waiting for `endpoint`, a URL as
    /// [`cloud_access::http::shown_url`] shows it (no user, password, query or
    /// fragment), when it knows one. The resolver, which owns the budget, tells it as a
    /// [`Timeout`] (`timed out after 2s waiting for …`).
    #[error("timed out{}", waiting_for(endpoint))]
    TimedOut { endpoint: Option<String> },
}

fn waiting_for(endpoint: &Option<String>) -> String {
    endpoint
        .as_ref()
        .map(|e| format!(" waiting for {e}"))
        .unwrap_or_default()
}

impl LookupError {
    /// A lookup that ran out of its deadline waiting for `endpoint` (see
    /// [`LookupError::TimedOut`]).
    pub fn timed_out(endpoint: Option<String>) -> Self {
        Self::TimedOut { endpoint }
    }

    /// A [`LookupError::Failed`] with its reason put in the lookup's words (the
    /// volume named, advice added); any other error as it is.
    #[must_use]
    pub fn map_failed(self, words: impl FnOnce(String) -> String) -> Self {
        match self {
            Self::Failed(reason) => Self::Failed(words(reason)),
            other => other,
        }
    }
}

/// Every cloud's failed call as a lookup's error, the one mapping of them all: a
/// call that ran out of time (the resolver's deadline, met first in the call) is
/// a timeout naming the URL it waited for; any other failure says why.
impl<E: CallFailure> From<E> for LookupError {
    fn from(error: E) -> Self {
        if error.is_timeout() {
            return Self::timed_out(error.url().map(str::to_owned));
        }
        Self::Failed(error.to_string())
    }
}

/// The future a lookup returns; boxed so that lookups can be held as trait objects.
pub type LookupFuture<'a> = Pin<Box<dyn Future<Output = Result<Topology, LookupError>> + Send + 'a>>;

/// The future of a batched lookup: the volumes found, each by its cache key.
pub type ManyFuture<'a> = Pin<Box<dyn Future<Output = Result<Vec<(String, Topology)>, LookupError>> + Send + 'a>>;

/// The future of a prefetch, which answers nothing: it fills a cache.
pub type PrefetchFuture<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// A source of topology that asks someone else, e.g. a cloud API: what the resolver
/// holds. Each cloud implements [`CloudLookup`] instead, and gets this.
pub trait TopologyLookup: Send + Sync {
    /// A short name for audit annotations, messages and metrics, e.g. `aws-ebs`.
    fn name(&self) -> &str;
    /// Whether this lookup can answer for the volume; only the first lookup that can is asked.
    fn handles(&self, volume: &VolumeIdentity) -> bool;
    /// The volume's topology: one call to the cloud, no caching (see [`CachedLookup`]),
    /// ending by `deadline` (the resolver's).
    fn lookup<'a>(&'a self, volume: &'a VolumeIdentity, deadline: Instant) -> LookupFuture<'a>;
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
    /// How many volumes one [`TopologyLookup::lookup_many`] call takes; 0 when the
    /// cloud's API has no call for many (the default).
    fn batch_limit(&self) -> usize {
        0
    }
    /// The topologies of up to [`TopologyLookup::batch_limit`] volumes in one call
    /// (or as few as the API allows), each found one by its cache key; a volume the
    /// answer leaves out is one the cloud does not know. Only called when the limit is
    /// not 0.
    fn lookup_many<'a>(&'a self, _volumes: &'a [VolumeIdentity], _deadline: Instant) -> ManyFuture<'a> {
        Box::pin(async { Ok(Vec::new()) })
    }
    /// Fills whatever cache the lookup has with `volumes` (a page of `audit`) in as few
    /// calls as it can, so that each volume's own lookup is then a hit. Failures are
    /// left to those lookups, which report them. The default does nothing.
    fn prefetch<'a>(&'a self, _volumes: &'a [VolumeIdentity], _deadline: Instant) -> PrefetchFuture<'a> {
        Box::pin(async {})
    }
}

/// A cloud's lookup: its entry in [`CLOUDS`] and its call. Every type implementing it
/// is a [`TopologyLookup`] (named and scoped by its [`Cloud`]).
pub trait CloudLookup: Send + Sync {
    /// The cloud's entry (its module's `CLOUD`).
    const CLOUD: &'static Cloud;
    /// The volume's topology: one call to the cloud, no caching, ending by `deadline`.
    fn find(
        &self,
        volume: &VolumeIdentity,
        deadline: Instant,
    ) -> impl Future<Output = Result<Topology, LookupError>> + Send;
    /// See [`TopologyLookup::cache_key`].
    fn cache_key(&self, volume: &VolumeIdentity) -> String {
        volume.to_string()
    }
    /// See [`TopologyLookup::endpoint`].
    fn endpoint(&self) -> Option<String> {
        None
    }
    /// See [`TopologyLookup::batch_limit`]: 0 unless the cloud implements
    /// [`CloudLookup::find_many`].
    fn batch_limit(&self) -> usize {
        0
    }
    /// See [`TopologyLookup::lookup_many`].
    fn find_many(
        &self,
        _volumes: &[VolumeIdentity],
        _deadline: Instant,
    ) -> impl Future<Output = Result<Vec<(String, Topology)>, LookupError>> + Send {
        async { Ok(Vec::new()) }
    }
}

impl<L: CloudLookup> TopologyLookup for L {
    fn name(&self) -> &str {
        L::CLOUD.name
    }

    fn handles(&self, volume: &VolumeIdentity) -> bool {
        (L::CLOUD.answers_for)(volume)
    }

    fn lookup<'a>(&'a self, volume: &'a VolumeIdentity, deadline: Instant) -> LookupFuture<'a> {
        Box::pin(self.find(volume, deadline))
    }

    fn cache_key(&self, volume: &VolumeIdentity) -> String {
        CloudLookup::cache_key(self, volume)
    }

    fn endpoint(&self) -> Option<String> {
        CloudLookup::endpoint(self)
    }

    fn batch_limit(&self) -> usize {
        CloudLookup::batch_limit(self)
    }

    fn lookup_many<'a>(&'a self, volumes: &'a [VolumeIdentity], deadline: Instant) -> ManyFuture<'a> {
        Box::pin(self.find_many(volumes, deadline))
    }
}

/// Forwards to the shared lookup: a [`CachedLookup`] may wrap one.
impl<L: TopologyLookup + ?Sized> TopologyLookup for Arc<L> {
    fn name(&self) -> &str {
        (**self).name()
    }

    fn handles(&self, volume: &VolumeIdentity) -> bool {
        (**self).handles(volume)
    }

    fn lookup<'a>(&'a self, volume: &'a VolumeIdentity, deadline: Instant) -> LookupFuture<'a> {
        (**self).lookup(volume, deadline)
    }

    fn cache_key(&self, volume: &VolumeIdentity) -> String {
        (**self).cache_key(volume)
    }

    fn endpoint(&self) -> Option<String> {
        (**self).endpoint()
    }

    fn batch_limit(&self) -> usize {
        (**self).batch_limit()
    }

    fn lookup_many<'a>(&'a self, volumes: &'a [VolumeIdentity], deadline: Instant) -> ManyFuture<'a> {
        (**self).lookup_many(volumes, deadline)
    }

    fn prefetch<'a>(&'a self, volumes: &'a [VolumeIdentity], deadline: Instant) -> PrefetchFuture<'a> {
        (**self).prefetch(volumes, deadline)
    }
}

/// A lookup behind a [`LoadingCache`]: answers are kept for `ttl` (at most `capacity`
/// of them), and concurrent reviews of one volume share one call (a caller that gives
/// up, at the resolver's deadline, hands it to one still waiting, which goes on within
/// its own deadline). Only successful answers are
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

    fn lookup<'a>(&'a self, volume: &'a VolumeIdentity, deadline: Instant) -> LookupFuture<'a> {
        Box::pin(async move {
            let key = self.inner.cache_key(volume);
            // A caller taking over a load (the first gave up) loads within its own deadline.
            let load = || self.inner.lookup(volume, deadline);
            let (answer, answered) = self.cache.get_or_load(&key, load).await;
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

    fn batch_limit(&self) -> usize {
        self.inner.batch_limit()
    }

    fn lookup_many<'a>(&'a self, volumes: &'a [VolumeIdentity], deadline: Instant) -> ManyFuture<'a> {
        self.inner.lookup_many(volumes, deadline)
    }

    /// The volumes not in the cache, asked in batches of the cloud's limit, the found
    /// ones cached; nothing when the cloud has no batched call.
    fn prefetch<'a>(&'a self, volumes: &'a [VolumeIdentity], deadline: Instant) -> PrefetchFuture<'a> {
        Box::pin(async move {
            let limit = self.inner.batch_limit();
            if limit == 0 {
                return;
            }
            let now = Instant::now();
            let mut seen = std::collections::HashSet::new();
            let missing: Vec<VolumeIdentity> = volumes
                .iter()
                .filter(|v| {
                    let key = self.inner.cache_key(v);
                    self.cache.entries().get(&key, now).is_none() && seen.insert(key)
                })
                .cloned()
                .collect();
            for chunk in missing.chunks(limit) {
                match self.inner.lookup_many(chunk, deadline).await {
                    Ok(found) => {
                        let now = Instant::now();
                        for (key, topology) in found {
                            self.cache.entries().insert(key, topology, now);
                        }
                    }
                    // Each volume's own lookup asks again and says what failed.
                    Err(error) => {
                        tracing::debug!(lookup = self.inner.name(), %error, volumes = chunk.len(), "batched lookup failed")
                    }
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cloud_hints_its_flag_or_a_rule() {
        for cloud in CLOUDS {
            assert_eq!(cloud.hint, format!("{} (or --rules)", cloud.flag), "{}", cloud.name);
        }
    }
}
