//! The lookup cache under concurrency: the webhook's `LoadingCache` (an LRU map with
//! TTL and a single-flight map, both behind mutexes) against `moka::future::Cache`
//! (LRU policy, TTL, `try_get_with` for single-flight), on three workloads:
//! - hits: every key cached, callers on all workers read them;
//! - single-flight: each new key asked by 8 tasks at once, the load yielding once
//!   (counts the loads: one per key is right; includes spawning the tasks);
//! - churn: keys drawn from 10× the capacity, so most asks miss, load and evict.
//!
//! Prints one line per workload and cache: ns per ask (wall time × workers / asks),
//! loads and hit share. Criterion-free on purpose: a few million asks per case.

use std::future::Future;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use moka::policy::EvictionPolicy;
use pv_topology_webhook::lookup::{Answered, LoadingCache, LookupError};
use pv_topology_webhook::topology::Topology;

const WORKERS: usize = 2;
const TASKS: usize = 8;
const CAPACITY: usize = 1000;
const TTL: Duration = Duration::from_secs(3600);

trait Cache: Send + Sync + 'static {
    const NAME: &'static str;
    fn new(capacity: usize) -> Self;
    /// The value and whether it was a hit.
    fn get_or_load<F>(
        &self,
        key: String,
        load: F,
    ) -> impl Future<Output = (Result<Topology, LookupError>, bool)> + Send
    where
        F: Future<Output = Result<Topology, LookupError>> + Send;
}

impl Cache for LoadingCache<String, Topology, LookupError> {
    const NAME: &'static str = "LoadingCache";
    fn new(capacity: usize) -> Self {
        // A capacity of 0 is no cache: the bench asks for at least one place.
        LoadingCache::new(NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN), TTL)
    }
    async fn get_or_load<F>(&self, key: String, load: F) -> (Result<Topology, LookupError>, bool)
    where
        F: Future<Output = Result<Topology, LookupError>> + Send,
    {
        let (answer, answered) = LoadingCache::get_or_load(self, &key, || load).await;
        (answer, answered == Answered::Hit)
    }
}

impl Cache for moka::future::Cache<String, Topology> {
    const NAME: &'static str = "moka";
    fn new(capacity: usize) -> Self {
        moka::future::Cache::builder()
            .max_capacity(capacity as u64)
            .time_to_live(TTL)
            .eviction_policy(EvictionPolicy::lru())
            .build()
    }
    async fn get_or_load<F>(&self, key: String, load: F) -> (Result<Topology, LookupError>, bool)
    where
        F: Future<Output = Result<Topology, LookupError>> + Send,
    {
        // As a lookup would count hits: look first, then load once for all callers.
        if let Some(value) = self.get(&key).await {
            return (Ok(value), true);
        }
        let answer = self.try_get_with(key, load).await.map_err(|e| (*e).clone());
        (answer, false)
    }
}

fn topology(key: &str) -> Topology {
    let zone = format!("us-east-1{}", (b'a' + (key.len() % 6) as u8) as char);
    Topology::new([zone], Some("us-east-1".to_owned())).unwrap_or_else(|e| panic!("bench topology {key:?}: {e}"))
}

async fn load(loads: Arc<AtomicUsize>, key: String) -> Result<Topology, LookupError> {
    loads.fetch_add(1, Ordering::Relaxed);
    tokio::task::yield_now().await;
    Ok(topology(&key))
}

struct Run {
    asks: usize,
    elapsed: Duration,
    loads: usize,
    hits: usize,
}

/// `TASKS` tasks, each asking for the keys `keys(task)` gives, in order.
async fn run<C: Cache>(cache: Arc<C>, asks_per_task: usize, keys: fn(usize, usize) -> String) -> Run {
    let loads = Arc::new(AtomicUsize::new(0));
    let hits = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| {
            let (cache, loads, hits) = (cache.clone(), loads.clone(), hits.clone());
            tokio::spawn(async move {
                for i in 0..asks_per_task {
                    let key = keys(task, i);
                    let (answer, hit) = cache.get_or_load(key.clone(), load(loads.clone(), key)).await;
                    assert!(answer.is_ok());
                    if hit {
                        hits.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap_or_else(|e| panic!("bench task failed: {e}"));
    }
    Run {
        asks: TASKS * asks_per_task,
        elapsed: started.elapsed(),
        loads: loads.load(Ordering::Relaxed),
        hits: hits.load(Ordering::Relaxed),
    }
}

/// `rounds` times, `TASKS` tasks ask for one new key at the same moment: one load each.
async fn rounds<C: Cache>(cache: Arc<C>, rounds: usize) -> Run {
    let loads = Arc::new(AtomicUsize::new(0));
    let mut hits = 0;
    let started = Instant::now();
    for round in 0..rounds {
        let key = format!("vol-{round:x}");
        let tasks: Vec<_> = (0..TASKS)
            .map(|_| {
                let (cache, loads, key) = (cache.clone(), loads.clone(), key.clone());
                tokio::spawn(async move { cache.get_or_load(key.clone(), load(loads, key)).await })
            })
            .collect();
        for task in tasks {
            let (answer, hit) = task.await.unwrap_or_else(|e| panic!("bench task failed: {e}"));
            assert!(answer.is_ok());
            hits += usize::from(hit);
        }
    }
    Run {
        asks: TASKS * rounds,
        elapsed: started.elapsed(),
        loads: loads.load(Ordering::Relaxed),
        hits,
    }
}

fn report<C: Cache>(workload: &str, run: &Run) {
    let ns = run.elapsed.as_nanos() as f64 * WORKERS as f64 / run.asks as f64;
    println!(
        "{workload:<14} {:<13} {ns:>8.0} ns/ask  {:>9} asks  {:>7} loads  {:>5.1}% hits",
        C::NAME,
        run.asks,
        run.loads,
        100.0 * run.hits as f64 / run.asks as f64
    );
}

/// A cheap, fixed pseudo-random sequence (no dependency for a random number generator).
fn scatter(task: usize, i: usize) -> usize {
    let x = (task as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (i as u64).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    (x ^ (x >> 31)) as usize
}

async fn workloads<C: Cache>() {
    // Hits: the capacity's worth of keys, loaded once, then asked over and over.
    let cache = Arc::new(C::new(CAPACITY));
    run(cache.clone(), CAPACITY / TASKS, |task, i| {
        format!("vol-{:x}", task * (CAPACITY / TASKS) + i)
    })
    .await;
    report::<C>(
        "hits",
        &run(cache, 250_000, |task, i| {
            format!("vol-{:x}", scatter(task, i) % CAPACITY)
        })
        .await,
    );
    // Single-flight: all tasks ask for one new key at once, round after round.
    report::<C>("single-flight", &rounds(Arc::new(C::new(CAPACITY)), 20_000).await);
    // Churn: ten times the capacity in keys, drawn at random.
    let cache = Arc::new(C::new(CAPACITY));
    report::<C>(
        "churn",
        &run(cache, 100_000, |task, i| {
            format!("vol-{:x}", scatter(task, i) % (10 * CAPACITY))
        })
        .await,
    );
}

fn main() -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .enable_all()
        .build()?;
    println!("{WORKERS} workers, {TASKS} tasks, capacity {CAPACITY}");
    for _ in 0..2 {
        runtime.block_on(workloads::<LoadingCache<String, Topology, LookupError>>());
        runtime.block_on(workloads::<moka::future::Cache<String, Topology>>());
    }
    Ok(())
}
