//! Prometheus metrics, one registry, served as text on the metrics address. Labels take
//! values from small fixed sets (outcomes, lookup names), never from request data.

use std::fmt;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::model::LookupResult;

/// Prefix of every metric name.
pub const PREFIX: &str = "pv_topology_webhook";

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    outcome: String,
    allowed: String,
    /// `mutate` or `validate`: which endpoint answered.
    check: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LookupLabels {
    lookup: String,
    result: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CacheLabels {
    lookup: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: String,
}

/// The webhook's metrics.
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    duration: Histogram,
    lookups: Family<LookupLabels, Counter>,
    cache_hits: Family<CacheLabels, Counter>,
    cache_misses: Family<CacheLabels, Counter>,
    cert_expiry: Gauge,
    cert_reloads: Family<ResultLabels, Counter>,
    client_ca_reloads: Family<ResultLabels, Counter>,
    handshake_errors: Counter,
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A registry with every metric registered.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix(PREFIX);
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "admission_requests",
            "AdmissionReview requests answered, by check (mutate or validate: the endpoint), outcome (the `outcome` audit annotation, or, for a body that is not answered as a review: bad-request, too-large, body-timeout (not received within --body-read-timeout) or busy (over the buffered-bytes budget)) and allowed",
            requests.clone(),
        );
        // 0.25 ms to about 4 s: loopback answers to lookups that hit their deadline.
        let duration = Histogram::new(exponential_buckets(0.000_25, 2.0, 15));
        registry.register(
            "admission_duration_seconds",
            "Time from a request's body being read to its answer being encoded",
            duration.clone(),
        );
        let lookups = Family::<LookupLabels, Counter>::default();
        registry.register(
            "lookups",
            "Topology lookups made, by lookup and result (success, error, timeout)",
            lookups.clone(),
        );
        let cache_hits = Family::<CacheLabels, Counter>::default();
        registry.register(
            "lookup_cache_hits",
            "Lookups answered from the cache",
            cache_hits.clone(),
        );
        let cache_misses = Family::<CacheLabels, Counter>::default();
        registry.register(
            "lookup_cache_misses",
            "Lookups that had to ask the cloud",
            cache_misses.clone(),
        );
        let cert_expiry = Gauge::default();
        registry.register(
            "certificate_expiry_timestamp_seconds",
            "notAfter of the serving certificate in use, in Unix seconds",
            cert_expiry.clone(),
        );
        let cert_reloads = Family::<ResultLabels, Counter>::default();
        registry.register(
            "certificate_reloads",
            "Changed certificate files seen, by result (success, or failure: the previous pair stays)",
            cert_reloads.clone(),
        );
        let client_ca_reloads = Family::<ResultLabels, Counter>::default();
        registry.register(
            "client_ca_reloads",
            "Changed --client-ca-file contents seen, by result (success, or failure: the previous CAs stay)",
            client_ca_reloads.clone(),
        );
        let handshake_errors = Counter::default();
        registry.register(
            "tls_handshake_errors",
            "Connections closed because the TLS handshake failed or timed out",
            handshake_errors.clone(),
        );
        Self {
            registry,
            requests,
            duration,
            lookups,
            cache_hits,
            cache_misses,
            cert_expiry,
            cert_reloads,
            client_ca_reloads,
            handshake_errors,
        }
    }

    /// Counts one answered request.
    pub fn request(&self, check: &str, outcome: &str, allowed: bool, elapsed: Duration) {
        self.requests
            .get_or_create(&RequestLabels {
                outcome: outcome.to_owned(),
                allowed: allowed.to_string(),
                check: check.to_owned(),
            })
            .inc();
        self.duration.observe(elapsed.as_secs_f64());
    }

    /// Counts a lookup made for a request.
    pub fn lookup(&self, lookup: &str, result: LookupResult) {
        self.lookups
            .get_or_create(&LookupLabels {
                lookup: lookup.to_owned(),
                result: result.as_str().to_owned(),
            })
            .inc();
    }

    /// The hit and miss counters of the named lookup's cache, for
    /// [`CachedLookup::with_counters`](crate::lookup::CachedLookup::with_counters).
    pub fn cache_counters(&self, lookup: &str) -> (Counter, Counter) {
        let labels = CacheLabels {
            lookup: lookup.to_owned(),
        };
        (
            self.cache_hits.get_or_create(&labels).clone(),
            self.cache_misses.get_or_create(&labels).clone(),
        )
    }

    /// Records the notAfter (Unix seconds) of the certificate now served.
    pub fn certificate_loaded(&self, not_after_unix_seconds: i64) {
        self.cert_expiry.set(not_after_unix_seconds);
    }

    /// Counts a reload attempt of the serving certificate.
    pub fn certificate_reload(&self, success: bool) {
        count_result(&self.cert_reloads, success);
    }

    /// Counts a reload attempt of the client CA file.
    pub fn client_ca_reload(&self, success: bool) {
        count_result(&self.client_ca_reloads, success);
    }

    /// Counts a failed TLS handshake.
    pub fn handshake_error(&self) {
        self.handshake_errors.inc();
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> Result<String, fmt::Error> {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

/// Counts one `success` or `failure` in `family`.
fn count_result(family: &Family<ResultLabels, Counter>, success: bool) {
    let result = if success { "success" } else { "failure" };
    family
        .get_or_create(&ResultLabels {
            result: result.to_owned(),
        })
        .inc();
}
