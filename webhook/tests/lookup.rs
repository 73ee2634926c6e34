//! The lookup interface: the generic loading cache (single-flight, TTL, bound, errors,
//! deadline), and what a failing lookup does to the answer.

mod common;

use std::future::Future;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::*;
use pv_topology_webhook::decision::DecisionConfig;
use pv_topology_webhook::decision::OnLookupError;
use pv_topology_webhook::lookup::{Answered, CachedLookup, LoadingCache, LookupError, TopologyLookup, TtlLruCache};
use pv_topology_webhook::resolve::Resolver;
use pv_topology_webhook::review::Reviewer;
use pv_topology_webhook::source::VolumeIdentity;
use pv_topology_webhook::topology::Topology;
use serde_json::json;

const EBS: &str = "ebs.csi.aws.com";

fn cap(n: usize) -> NonZeroUsize {
    NonZeroUsize::new(n).unwrap()
}

fn topo(zone: &str) -> Topology {
    Topology::new([zone], Some("us-east-1".to_owned())).unwrap()
}

#[test]
fn cache_is_bounded_and_evicts_least_recently_used() {
    let cache = TtlLruCache::new(cap(2), Duration::from_secs(60));
    let now = Instant::now();
    cache.insert("a", 1, now);
    cache.insert("b", 2, now);
    assert_eq!(cache.get(&"a", now), Some(1)); // `a` is now the most recently used
    cache.insert("c", 3, now);
    assert_eq!(cache.len(), 2);
    assert_eq!(cache.get(&"b", now), None);
    assert_eq!(cache.get(&"a", now), Some(1));
    assert_eq!(cache.get(&"c", now), Some(3));
}

#[test]
fn cache_entries_expire_after_ttl() {
    let ttl = Duration::from_secs(10);
    let cache = TtlLruCache::new(cap(4), ttl);
    let t0 = Instant::now();
    cache.insert("a", 1, t0);
    assert_eq!(cache.get(&"a", t0 + Duration::from_secs(9)), Some(1));
    assert_eq!(cache.get(&"a", t0 + ttl), None);
    assert!(cache.is_empty(), "an expired entry is dropped when seen");
    // Re-inserting starts a new lifetime; a clock that went backwards does not expire it.
    cache.insert("a", 2, t0 + ttl);
    assert_eq!(cache.get(&"a", t0 + ttl + Duration::from_secs(9)), Some(2));
    assert_eq!(cache.get(&"a", t0), Some(2));
}

#[tokio::test]
async fn cached_lookup_asks_once_and_does_not_cache_failures() {
    let cached = CachedLookup::new(
        FakeLookup::new(EBS, Ok(topo("us-east-1a"))),
        cap(8),
        Duration::from_secs(60),
    );
    let volume = VolumeIdentity::csi(EBS, "vol-1");
    for _ in 0..3 {
        assert_eq!(cached.lookup(&volume, common::soon()).await, Ok(topo("us-east-1a")));
    }
    assert_eq!(cached.cache().len(), 1);
    assert_eq!(cached.name(), "fake");

    let failing = CachedLookup::new(
        FakeLookup::new(EBS, Err(LookupError::Failed("throttled".into()))),
        cap(8),
        Duration::from_secs(60),
    );
    for _ in 0..3 {
        assert!(failing.lookup(&volume, common::soon()).await.is_err());
    }
    assert!(failing.cache().is_empty());
}

#[tokio::test]
async fn cached_lookup_calls_inner_once() {
    let inner = Arc::new(FakeLookup::new(EBS, Ok(topo("us-east-1a"))));
    struct Shared(Arc<FakeLookup>);
    impl TopologyLookup for Shared {
        fn name(&self) -> &str {
            self.0.name()
        }
        fn handles(&self, volume: &VolumeIdentity) -> bool {
            self.0.handles(volume)
        }
        fn lookup<'a>(
            &'a self,
            volume: &'a VolumeIdentity,
            deadline: Instant,
        ) -> pv_topology_webhook::lookup::LookupFuture<'a> {
            self.0.lookup(volume, deadline)
        }
    }
    let cached = Arc::new(CachedLookup::new(
        Shared(inner.clone()),
        cap(8),
        Duration::from_secs(60),
    ));
    let reviewer = with_lookup(cached, OnLookupError::Deny);
    let body = create_review(pv(csi(EBS, "vol-1"), None));
    for _ in 0..3 {
        assert_eq!(review(&reviewer, &body).await.outcome(), "labeled");
    }
    assert_eq!(inner.calls(), 1);
}

#[tokio::test]
async fn lookup_answer_is_used_after_builtin_and_rules() {
    let lookup = Arc::new(FakeLookup::new(
        EBS,
        Ok(Topology::new(["us-east-1b", "us-east-1a"], Some("us-east-1".into())).unwrap()),
    ));
    let reviewer = with_lookup(lookup.clone(), OnLookupError::Deny);
    let body = create_review(pv(csi(EBS, "vol-1"), None));
    let answer = assert_idempotent(&reviewer, &body).await;
    assert_eq!(answer.audit("source"), Some("lookup fake"));
    let object = patched_object(&body, &answer);
    assert_eq!(
        object["metadata"]["labels"]["topology.kubernetes.io/zone"],
        "us-east-1a__us-east-1b"
    );
    assert_eq!(
        object["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"],
        json!([{"key": "topology.ebs.csi.aws.com/zone", "operator": "In", "values": ["us-east-1a", "us-east-1b"]}])
    );

    // A rule for the same driver answers first: no lookup.
    let calls = lookup.calls();
    let with_rule = Reviewer::new(
        Resolver::new(rules("rules:\n  - driver: ebs.csi.aws.com\n    zones: [z]\n")).with_lookup(lookup.clone()),
        DecisionConfig::default(),
    );
    assert_eq!(
        review(&with_rule, &body).await.audit("source"),
        Some("rule test-rules.yaml#rules[0]")
    );
    // A trusted PV is not looked up either.
    let mut trusted = pv(
        csi(EBS, "vol-1"),
        Some(json!({"topology.kubernetes.io/zone": "a", "topology.kubernetes.io/region": "r"})),
    );
    trusted["metadata"]["annotations"] = json!({"pv.kubernetes.io/provisioned-by": "ebs.csi.aws.com"});
    assert_eq!(review(&reviewer, &create_review(trusted)).await.outcome(), "trusted");
    assert_eq!(lookup.calls(), calls);
}

#[tokio::test]
async fn failed_lookup_is_denied_by_default() {
    let lookup = Arc::new(FakeLookup::new(
        EBS,
        Err(LookupError::Failed("UnauthorizedOperation".into())),
    ));
    let answer = review(
        &with_lookup(lookup, OnLookupError::Deny),
        &create_review(pv(csi(EBS, "vol-0abc"), None)),
    )
    .await;
    assert!(!answer.allowed());
    assert_eq!(answer.raw_patch(), None);
    let message = answer.message();
    assert!(
        message.contains("vol-0abc") && message.contains("UnauthorizedOperation"),
        "{message}"
    );
    assert!(message.contains("--on-lookup-error=deny"), "{message}");
    assert_eq!(answer.response()["status"]["code"], 403);
    assert_eq!(answer.outcome(), "lookup-failed");
    assert_eq!(answer.audit("source"), Some("lookup fake"));
}

#[tokio::test]
async fn failed_lookup_is_allowed_with_warning_when_configured() {
    let lookup = Arc::new(FakeLookup::new(EBS, Err(LookupError::NotFound)));
    let answer = review(
        &with_lookup(lookup, OnLookupError::Allow),
        &create_review(pv(csi(EBS, "vol-0abc"), None)),
    )
    .await;
    assert!(answer.allowed());
    assert_eq!(answer.raw_patch(), None);
    let warnings = answer.warnings();
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0].contains("vol-0abc") && warnings[0].contains("volume not found"),
        "{warnings:?}"
    );
    assert_eq!(answer.outcome(), "lookup-failed");
}

#[tokio::test]
async fn slow_lookup_hits_the_deadline() {
    let mut slow = FakeLookup::new(EBS, Ok(topo("us-east-1a")));
    slow.delay = Some(Duration::from_secs(30));
    let started = Instant::now();
    let answer = review(
        &with_lookup(Arc::new(slow), OnLookupError::Deny),
        &create_review(pv(csi(EBS, "vol-1"), None)),
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(!answer.allowed());
    assert!(
        answer.message().contains("timed out after 200ms"),
        "{}",
        answer.message()
    );
}

// The generic cache every lookup goes through: single-flight, TTL, bound, errors, deadline.

/// A load that counts its calls, answers after `delay`, and fails for keys starting with `!`.
fn counted(calls: &AtomicUsize, key: &str, delay: Duration) -> impl Future<Output = Result<String, String>> + use<> {
    calls.fetch_add(1, Ordering::SeqCst);
    let key = key.to_owned();
    async move {
        tokio::time::sleep(delay).await;
        match key.strip_prefix('!') {
            Some(reason) => Err(reason.to_owned()),
            None => Ok(format!("zone of {key}")),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loading_cache_makes_one_load_per_key_for_concurrent_callers() {
    let cache = Arc::new(LoadingCache::<String, String, String>::new(
        cap(8),
        Duration::from_secs(60),
    ));
    let calls = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..40)
        .map(|i| {
            let (cache, calls) = (cache.clone(), calls.clone());
            let key = format!("vol-{}", i % 4);
            tokio::spawn(async move {
                let load = || counted(&calls, &key, Duration::from_millis(100));
                cache.get_or_load(&key, load).await
            })
        })
        .collect();
    for task in tasks {
        let (answer, _) = task.await.unwrap();
        assert!(answer.unwrap().starts_with("zone of vol-"));
    }
    assert_eq!(calls.load(Ordering::SeqCst), 4, "one load per key");
    let (answer, answered) = cache
        .get_or_load(&"vol-1".to_owned(), || counted(&calls, "vol-1", Duration::ZERO))
        .await;
    assert_eq!((answer.unwrap().as_str(), answered), ("zone of vol-1", Answered::Hit));
    assert_eq!(calls.load(Ordering::SeqCst), 4);
}

#[tokio::test]
async fn loading_cache_shares_a_failure_among_its_waiters_and_then_forgets_it() {
    let cache = Arc::new(LoadingCache::<String, String, String>::new(
        cap(8),
        Duration::from_secs(60),
    ));
    let calls = Arc::new(AtomicUsize::new(0));
    let key = "!throttled".to_owned();
    let load = || counted(&calls, &key, Duration::from_millis(100));
    let (a, b) = tokio::join!(cache.get_or_load(&key, load), cache.get_or_load(&key, load));
    assert_eq!(a, (Err("throttled".to_owned()), Answered::Miss));
    assert_eq!(b, (Err("throttled".to_owned()), Answered::Miss));
    assert_eq!(calls.load(Ordering::SeqCst), 1, "waiters share the failed load");
    assert!(cache.entries().is_empty(), "failures are not cached");
    let _ = cache.get_or_load(&key, load).await;
    assert_eq!(calls.load(Ordering::SeqCst), 2, "the next caller loads again");
}

#[tokio::test]
async fn loading_cache_entries_expire_and_are_bounded() {
    let calls = AtomicUsize::new(0);
    let load = |key: &str| counted(&calls, key, Duration::ZERO);
    // A zero TTL keeps nothing.
    let expiring = LoadingCache::<String, String, String>::new(cap(8), Duration::ZERO);
    let key = "vol-1".to_owned();
    for _ in 0..3 {
        assert_eq!(expiring.get_or_load(&key, || load(&key)).await.1, Answered::Miss);
    }
    assert_eq!(calls.load(Ordering::SeqCst), 3);

    let bounded = LoadingCache::<String, String, String>::new(cap(2), Duration::from_secs(60));
    for key in ["a", "b", "a", "c"] {
        let _ = bounded.get_or_load(&key.to_owned(), || load(key)).await;
    }
    assert_eq!(bounded.entries().len(), 2);
    let bounded = &bounded;
    let load = &load;
    let answered = |key: &'static str| async move { bounded.get_or_load(&key.to_owned(), || load(key)).await.1 };
    assert_eq!(answered("a").await, Answered::Hit, "used most recently before `c`");
    assert_eq!(answered("c").await, Answered::Hit);
    assert_eq!(answered("b").await, Answered::Miss, "least recently used: evicted");
}

#[tokio::test]
async fn loading_cache_load_is_taken_over_when_its_caller_goes_away() {
    let cache = LoadingCache::<String, String, String>::new(cap(8), Duration::from_secs(60));
    let calls = AtomicUsize::new(0);
    let key = "vol-1".to_owned();
    let load = || counted(&calls, &key, Duration::from_millis(200));
    // The first caller gives up early; the second, waiting on the same load, finishes it.
    let first = tokio::time::timeout(Duration::from_millis(50), cache.get_or_load(&key, load));
    let (first, second) = tokio::join!(first, cache.get_or_load(&key, load));
    assert!(first.is_err());
    assert_eq!(second, (Ok("zone of vol-1".to_owned()), Answered::Miss));
    assert_eq!(cache.get_or_load(&key, load).await.1, Answered::Hit);
    // A cancelled caller leaves nothing behind that would block the next one.
    let other = "vol-2".to_owned();
    let gone = tokio::time::timeout(Duration::from_millis(50), cache.get_or_load(&other, load)).await;
    assert!(gone.is_err());
    let (answer, _) = cache
        .get_or_load(&other, || counted(&calls, "vol-2", Duration::ZERO))
        .await;
    assert_eq!(answer, Ok("zone of vol-2".to_owned()));
}

#[tokio::test]
async fn the_resolvers_deadline_fails_slow_cached_calls_without_caching_them() {
    let mut slow = FakeLookup::new(EBS, Ok(topo("us-east-1a")));
    slow.delay = Some(Duration::from_secs(30));
    let cached = Arc::new(CachedLookup::new(slow, cap(8), Duration::from_secs(60)));
    let resolver = Resolver::new(Default::default())
        .with_lookup(cached.clone())
        .with_deadline(Duration::from_millis(100));
    let started = Instant::now();
    let resolution = resolver.resolve(&VolumeIdentity::csi(EBS, "vol-1")).await;
    assert!(
        matches!(
            resolution,
            pv_topology_webhook::model::Resolution::LookupFailed {
                error: pv_topology_webhook::model::LookupFailure::TimedOut(_),
                ..
            }
        ),
        "{resolution:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(cached.cache().is_empty());
}

#[tokio::test]
async fn cached_lookup_shares_one_call_among_concurrent_lookups() {
    let mut fake = FakeLookup::new(EBS, Ok(topo("us-east-1a")));
    fake.delay = Some(Duration::from_millis(100));
    let fake = Arc::new(fake);
    let cached = Arc::new(CachedLookup::new(fake.clone(), cap(8), Duration::from_secs(60)));
    let tasks: Vec<_> = (0..10)
        .map(|_| {
            let cached = cached.clone();
            tokio::spawn(async move { cached.lookup(&VolumeIdentity::csi(EBS, "vol-1"), common::soon()).await })
        })
        .collect();
    for task in tasks {
        assert_eq!(task.await.unwrap(), Ok(topo("us-east-1a")));
    }
    assert_eq!(fake.calls(), 1);
}

/// A cloud added as docs/architecture.md's "Where a new cloud plugs in" says: a lookup
/// implementing `CloudLookup` and its `Cloud` entry, and nothing else.
mod example_cloud {
    use std::sync::Arc;
    use std::time::Instant;

    use pv_topology_webhook::lookup::{Cloud, CloudLookup, LookupError};
    use pv_topology_webhook::source::{VolumeIdentity, VolumeKind};
    use pv_topology_webhook::topology::Topology;

    pub const DRIVER: &str = "disk.csi.example.test";

    /// Answers every volume of its driver with zone `example-1a`.
    pub struct ExampleLookup;

    pub const CLOUD: Cloud = Cloud {
        name: "example",
        flag: "--example-lookup",
        hint: "--example-lookup (or --rules)",
        csi_driver: DRIVER,
        in_tree: None,
        answers_for: |volume| matches!(&volume.kind, VolumeKind::Csi { driver } if driver == DRIVER),
        enabled: |_| true,
        build: |_| Ok(Arc::new(ExampleLookup)),
    };

    impl CloudLookup for ExampleLookup {
        const CLOUD: &'static Cloud = &CLOUD;

        async fn find(&self, _volume: &VolumeIdentity, deadline: Instant) -> Result<Topology, LookupError> {
            // The resolver's deadline, given to the call.
            assert!(deadline > Instant::now(), "a deadline ahead");
            Topology::new(["example-1a"], Some("example-1".to_owned())).map_err(|e| LookupError::Invalid(e.to_string()))
        }
    }
}

#[tokio::test]
async fn a_cloud_is_a_lookup_and_a_table_entry() {
    use clap::Parser as _;
    use pv_topology_webhook::cli::{Cli, Command};
    use pv_topology_webhook::lookup::Cloud;
    use pv_topology_webhook::resolve::{Resolution, TopologySource};
    use pv_topology_webhook::setup::resolver_of;

    const ON: &[Cloud] = &[example_cloud::CLOUD];
    const OFF: &[Cloud] = &[Cloud {
        enabled: |_| false,
        ..example_cloud::CLOUD
    }];
    let Command::Review(args) = Cli::try_parse_from(["pv-topology-webhook", "review"]).unwrap().command else {
        panic!("review's flags");
    };
    let volume = VolumeIdentity::csi(example_cloud::DRIVER, "disk-1");
    // On: the set-up builds it from the table and the resolver asks it.
    let Resolution::Resolved(resolved) = resolver_of(ON, &args.topology, None).unwrap().resolve(&volume).await else {
        panic!("resolved by the example lookup");
    };
    assert_eq!(resolved.source, TopologySource::Lookup("example".to_owned()));
    assert_eq!(resolved.topology.zones(), ["example-1a"]);
    assert_eq!(resolved.topology.region(), Some("example-1"));
    // Off: the resolver hints its flag.
    assert_eq!(
        resolver_of(OFF, &args.topology, None).unwrap().resolve(&volume).await,
        Resolution::NotConfigured {
            flag: "--example-lookup (or --rules)"
        }
    );
    // Not in the table: unknown to the webhook.
    assert_eq!(
        resolver_of(&[], &args.topology, None).unwrap().resolve(&volume).await,
        Resolution::Unrecognized
    );
}
