//! GCE disk topology from Compute Engine: the `review` binary with `--gce-lookup`
//! against the fake of Google's APIs (tests/fakes/gcp_server.py, metadata server and
//! Compute on one loopback port: `GCE_METADATA_HOST` and `--gce-compute-endpoint` point
//! at it, so nothing here reaches a Google or link-local address), and the lookup itself
//! behind the shared cache. The pure parts (which volumes, hints, keys, what a search's
//! answers say) are tested in `src/gce/place.rs`.

mod common;

use std::num::NonZeroUsize;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cloud_access::SecureEndpoint;
use cloud_access::gcp::{GceMetadata, metadata_base};
use common::{Answer, assert_idempotent, create_review, csi, patched, pv, review_binary};
use pv_topology_webhook::decision::DecisionConfig;
use pv_topology_webhook::lookup::gce::{CALLS_IN_TOTAL, CALLS_PER_LOOKUP, GceLookup, GceScope, MAX_REGION_ZONES};
use pv_topology_webhook::lookup::{CachedLookup, TopologyLookup};
use pv_topology_webhook::metrics::Metrics;
use pv_topology_webhook::resolve::Resolver;
use pv_topology_webhook::review::Reviewer;
use pv_topology_webhook::rules::Rules;
use pv_topology_webhook::source::{InTree, VolumeIdentity};
use serde_json::{Value, json};
use test_fakes::GcpFake as Fake;

const PD: &str = "pd.csi.storage.gke.io";
const TOKEN: &str = "GET /computeMetadata/v1/instance/service-accounts/default/token";
const REGIONS_GET: &str = "GET /compute/v1/projects/demo-project/regions/us-central1";

fn disk_get(zone: &str, name: &str) -> String {
    format!("GET /compute/v1/projects/demo-project/zones/{zone}/disks/{name}")
}

fn region_disk_get(name: &str) -> String {
    format!("GET /compute/v1/projects/demo-project/regions/us-central1/disks/{name}")
}

/// The fake with four zones in us-central1 and, besides tests/data/gcp/scenario.json's
/// disks (pd-zonal in -a, pd-slow in -b answering after 3 s, pd-regional in -a and -c),
/// pd-b in -b, pd-twice in both -a and -c, and a regional disk answering after 400 ms.
fn start(edit: impl FnOnce(&mut Value)) -> Fake {
    Fake::with(|scenario| {
        let compute = &mut scenario["compute"];
        compute["regions"] =
            json!({"us-central1": ["us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f"]});
        let disks = compute["disks"].as_array_mut().unwrap();
        disks.push(json!({"project": "demo-project", "zone": "us-central1-b", "name": "pd-b"}));
        disks.push(json!({"project": "demo-project", "zone": "us-central1-a", "name": "pd-twice"}));
        disks.push(json!({"project": "demo-project", "zone": "us-central1-c", "name": "pd-twice"}));
        compute["regionDisks"].as_array_mut().unwrap().push(json!({
            "project": "demo-project", "region": "us-central1", "name": "pd-regional-slow",
            "replicaZones": ["us-central1-f", "us-central1-b"], "delay_seconds": 0.4
        }));
        edit(scenario);
    })
}

fn in_tree(name: &str) -> Value {
    json!({"gcePersistentDisk": {"pdName": name, "fsType": "ext4"}})
}

fn zone_label(zone: &str) -> Option<Value> {
    Some(json!({"topology.kubernetes.io/zone": zone}))
}

/// `review --gce-lookup …` of `pv` against the fake.
fn review(fake: &Fake, pv: Value, extra: &[&str]) -> Answer {
    review_within(fake, pv, extra, "10s")
}

fn review_within(fake: &Fake, pv: Value, extra: &[&str], timeout: &str) -> Answer {
    let compute = format!("--gce-compute-endpoint={}compute/v1/", fake.base());
    let mut args = vec!["--gce-lookup", "--lookup-timeout", timeout, &compute];
    args.extend(extra);
    review_binary(&args, &[("GCE_METADATA_HOST", &fake.host())], pv)
}

fn labels(answer: &Answer) -> Value {
    patched(answer, "/metadata/labels")
}

fn terms(answer: &Answer) -> Value {
    patched(answer, "/spec/nodeAffinity")["required"]["nodeSelectorTerms"].clone()
}

#[tokio::test]
async fn a_zonal_disk_is_found_in_the_second_of_several_zones() {
    let fake = start(|_| {});
    // Zones and region from the metadata server and regions.get.
    let answer = review(&fake, pv(in_tree("pd-b"), None), &[]);
    assert!(answer.allowed(), "{:?}", answer.response());
    assert_eq!(
        (answer.outcome(), answer.audit("source")),
        ("labeled", Some("lookup gce"))
    );
    assert_eq!(
        labels(&answer),
        json!({"topology.kubernetes.io/region": "us-central1", "topology.kubernetes.io/zone": "us-central1-b"})
    );
    assert_eq!(
        terms(&answer),
        json!([{"matchExpressions": [
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-central1-b"]},
            {"key": "topology.kubernetes.io/region", "operator": "In", "values": ["us-central1"]}
        ]}])
    );
    // Every place was asked once: the region (a regional disk of the name) and each zone.
    for key in [
        region_disk_get("pd-b"),
        disk_get("us-central1-a", "pd-b"),
        disk_get("us-central1-b", "pd-b"),
        disk_get("us-central1-f", "pd-b"),
        REGIONS_GET.to_owned(),
        "GET /computeMetadata/v1/instance/zone".to_owned(),
        "GET /computeMetadata/v1/project/project-id".to_owned(),
    ] {
        assert_eq!(fake.requests(&key), 1, "{key}");
    }

    // Configured zones: only those are asked; a CSI handle with UNSPECIFIED gets the
    // driver's key.
    let handle = "projects/UNSPECIFIED/zones/UNSPECIFIED/disks/pd-zonal";
    let answer = review(
        &fake,
        pv(csi(PD, handle), None),
        &[
            "--gce-zones",
            "us-central1-c,us-central1-a",
            "--gce-project",
            "demo-project",
        ],
    );
    assert_eq!(labels(&answer)["topology.kubernetes.io/zone"], "us-central1-a");
    assert_eq!(
        terms(&answer),
        json!([{"matchExpressions": [{"key": "topology.gke.io/zone", "operator": "In", "values": ["us-central1-a"]}]}])
    );
    assert_eq!(fake.requests(&disk_get("us-central1-b", "pd-zonal")), 0);
    assert_eq!(fake.requests(&disk_get("us-central1-c", "pd-zonal")), 1);
    assert_eq!(fake.requests(REGIONS_GET), 1, "configured zones need no regions.get");
}

#[tokio::test]
async fn the_zone_label_is_tried_first() {
    let fake = start(|_| {});
    let object = pv(in_tree("pd-b"), zone_label("us-central1-b"));
    let answer = review(&fake, object.clone(), &[]);
    assert_eq!(answer.outcome(), "labeled");
    let patched = common::patched_object(&create_review(object), &answer);
    assert_eq!(
        patched["metadata"]["labels"],
        json!({"topology.kubernetes.io/region": "us-central1", "topology.kubernetes.io/zone": "us-central1-b"})
    );
    // One call, where the label said: no search, no zones or region asked for.
    assert_eq!(fake.requests(&disk_get("us-central1-b", "pd-b")), 1);
    assert_eq!(fake.all_requests(), 3, "project, token, one disks.get");

    // A label naming another zone is only a hint: the disk is looked for, found, and
    // the label replaced, with a warning.
    let answer = review(&fake, pv(in_tree("pd-b"), zone_label("us-central1-f")), &[]);
    assert!(answer.allowed());
    let warnings = answer.warnings();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("replaced \"us-central1-f\" with \"us-central1-b\"")),
        "{warnings:?}"
    );
}

#[tokio::test]
async fn a_disk_in_two_zones_is_refused_not_guessed() {
    let fake = start(|_| {});
    let answer = review(&fake, pv(in_tree("pd-twice"), None), &[]);
    assert!(!answer.allowed());
    assert_eq!(answer.outcome(), "lookup-failed");
    let message = answer.message();
    assert!(
        message.contains(
            "GCE disk \"pd-twice\" of project demo-project is in several places (zone us-central1-a, zone us-central1-c): not guessing"
        ),
        "{message}"
    );
    assert!(message.contains("(--on-lookup-error=deny)"), "{message}");

    // --on-lookup-error=allow: admitted unchanged, with the same cause as a warning.
    let answer = review(&fake, pv(in_tree("pd-twice"), None), &["--on-lookup-error", "allow"]);
    assert!(answer.allowed());
    assert!(answer.patch().is_none());
    assert!(
        answer.warnings().iter().any(|w| w.contains("is in several places")),
        "{:?}",
        answer.warnings()
    );

    // The zone label says which one is meant.
    let answer = review(&fake, pv(in_tree("pd-twice"), zone_label("us-central1-c")), &[]);
    assert!(answer.allowed());
    assert_eq!(answer.outcome(), "labeled");
}

#[tokio::test]
async fn regional_disks_get_both_zones_in_one_term() {
    let fake = start(|_| {});
    let handle = "projects/demo-project/regions/us-central1/disks/pd-regional";
    let answer = review(&fake, pv(csi(PD, handle), None), &[]);
    assert_eq!(answer.outcome(), "labeled");
    assert!(answer.warnings().is_empty(), "{:?}", answer.warnings());
    assert_eq!(
        labels(&answer),
        json!({"topology.kubernetes.io/region": "us-central1", "topology.kubernetes.io/zone": "us-central1-a__us-central1-c"})
    );
    assert_eq!(
        terms(&answer),
        json!([{"matchExpressions": [
            {"key": "topology.gke.io/zone", "operator": "In", "values": ["us-central1-a", "us-central1-c"]}
        ]}])
    );
    assert_eq!(fake.requests(&region_disk_get("pd-regional")), 1);
    assert_eq!(fake.requests(REGIONS_GET), 0, "a regional handle needs no search");
    // The same answer twice is the same bytes.
    assert_eq!(review(&fake, pv(csi(PD, handle), None), &[]).bytes, answer.bytes);

    // In-tree, with a `__` label as the hint: regionDisks.get in its region, the
    // GA keys, zone and region in the one term.
    let labels_in = zone_label("us-central1-c__us-central1-a");
    let answer = review(&fake, pv(in_tree("pd-regional"), labels_in), &[]);
    assert_eq!(answer.outcome(), "labeled");
    assert_eq!(
        terms(&answer),
        json!([{"matchExpressions": [
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-central1-a", "us-central1-c"]},
            {"key": "topology.kubernetes.io/region", "operator": "In", "values": ["us-central1"]}
        ]}])
    );
    assert_eq!(fake.requests(&region_disk_get("pd-regional")), 3);
    assert_eq!(fake.requests(REGIONS_GET), 0);
}

#[tokio::test]
async fn refusals_carry_googles_reason_and_message() {
    let fake = start(|_| {});
    let answer = review(
        &fake,
        pv(in_tree("pd-zonal"), zone_label("us-central1-a")),
        &["--gce-project", "locked-project"],
    );
    assert!(!answer.allowed());
    let message = answer.message();
    for part in [
        "lookup gce failed: compute answered HTTP 403 for http://127.0.0.1:",
        "/projects/locked-project/zones/us-central1-a/disks/pd-zonal",
        "forbidden (PERMISSION_DENIED): Required 'compute.disks.get' permission",
        "roles/compute.viewer",
    ] {
        assert!(message.contains(part), "{part:?} in {message}");
    }

    // Not found anywhere: where it looked, and how to look elsewhere.
    let answer = review(&fake, pv(in_tree("pd-nowhere"), None), &[]);
    assert!(!answer.allowed());
    let message = answer.message();
    assert!(
        message.contains(
            "GCE disk \"pd-nowhere\" not found in project demo-project (looked in region us-central1, zone us-central1-a, zone us-central1-b, zone us-central1-c, zone us-central1-f)"
        ),
        "{message}"
    );
    assert!(
        message.contains("set --gce-project; set --gce-region or --gce-zones"),
        "{message}"
    );

    // A regional handle that does not exist: Google's 404, named.
    let handle = "projects/demo-project/regions/us-central1/disks/pd-gone";
    let answer = review(&fake, pv(csi(PD, handle), None), &[]);
    assert!(
        answer.message().contains("not found (HTTP 404: notFound"),
        "{}",
        answer.message()
    );
}

#[tokio::test]
async fn lookups_end_at_the_deadline() {
    let fake = start(|_| {});
    let started = Instant::now();
    // pd-slow answers after 3 s.
    let answer = review_within(&fake, pv(in_tree("pd-slow"), zone_label("us-central1-b")), &[], "500ms");
    assert!(
        started.elapsed() < Duration::from_millis(2500),
        "{:?}",
        started.elapsed()
    );
    assert!(!answer.allowed());
    // The endpoint waited on is named (Compute's, where the slow disk is).
    let waited = format!(
        "lookup gce failed: timed out after 500ms waiting for {}compute/v1/",
        fake.base()
    );
    assert!(answer.message().contains(&waited), "{}", answer.message());
}

#[tokio::test]
async fn the_lookup_ends_at_the_deadline_it_is_given() {
    let fake = start(|_| {});
    let deadline = Duration::from_millis(300);
    let slow = VolumeIdentity::in_tree(InTree::GcePersistentDisk, "pd-slow").with_zone_hint(Some("us-central1-b"));
    let started = Instant::now();
    let error = lookup(&fake, deadline)
        .lookup(&slow, common::within(deadline))
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    // The disk's URL, where the time ran out.
    let url = format!("{}compute/v1/projects/", fake.base());
    let pv_topology_webhook::lookup::LookupError::TimedOut { endpoint } = &error else {
        panic!("a timeout: {error}")
    };
    let endpoint = endpoint.as_deref().unwrap_or_default();
    assert!(
        endpoint.starts_with(&url) && endpoint.ends_with("/disks/pd-slow"),
        "{error}"
    );
    // Told by the resolver, whose budget it is.
    let resolver = Resolver::new(Rules::default())
        .with_lookup(Arc::new(lookup(&fake, deadline)))
        .with_deadline(deadline);
    let pv_topology_webhook::resolve::Resolution::LookupFailed {
        error: pv_topology_webhook::resolve::LookupFailure::TimedOut(timeout),
        ..
    } = resolver.resolve(&slow).await
    else {
        panic!("a timeout")
    };
    assert_eq!(timeout.after, deadline);
}

fn lookup(fake: &Fake, deadline: Duration) -> GceLookup {
    // As in main: one crypto provider for every rustls user in the process.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let metadata = GceMetadata::new(metadata_base(Some(&fake.host())).unwrap(), Duration::from_secs(5)).unwrap();
    let compute = SecureEndpoint::parse("test endpoint", &format!("{}compute/v1", fake.base())).unwrap();
    GceLookup::new(metadata, &compute, GceScope::default(), deadline).unwrap()
}

#[tokio::test]
async fn an_expired_token_is_refreshed() {
    // Tokens valid for 4 s: kept for half of that (the refresh margin, capped at half a
    // token's life), then a new one is fetched while the old one is still valid, so a
    // margin of zero would fail here (and the fake refuses expired tokens with 401).
    let fake = start(|scenario| scenario["metadata"]["token"]["expires_in"] = json!(4));
    let lookup = lookup(&fake, Duration::from_secs(5));
    let first = VolumeIdentity::in_tree(InTree::GcePersistentDisk, "pd-b").with_zone_hint(Some("us-central1-b"));
    lookup.lookup(&first, common::soon()).await.unwrap();
    lookup.lookup(&first, common::soon()).await.unwrap();
    assert_eq!(fake.requests(TOKEN), 1);
    tokio::time::sleep(Duration::from_millis(2300)).await;
    let topology = lookup.lookup(&first, common::soon()).await.unwrap();
    assert_eq!(topology.zones(), ["us-central1-b"]);
    assert_eq!(fake.requests(TOKEN), 2);
    assert_eq!(fake.requests(&disk_get("us-central1-b", "pd-b")), 3);
}

#[tokio::test]
async fn concurrent_reviews_of_one_disk_make_one_call() {
    let fake = start(|_| {});
    let metrics = Metrics::new();
    // As the program builds it: behind the lookup cache EBS uses, counted under "gce".
    let cached = CachedLookup::new(
        lookup(&fake, Duration::from_secs(5)),
        NonZeroUsize::new(16).unwrap(),
        Duration::from_secs(60),
    )
    .with_counters(metrics.cache_counters("gce"));
    let cached = Arc::new(cached);
    let resolver = Resolver::new(Rules::default())
        .with_lookup(cached.clone())
        .with_deadline(Duration::from_secs(5));
    let reviewer = Arc::new(Reviewer::new(resolver, DecisionConfig::default()));
    let handle = "projects/demo-project/regions/us-central1/disks/pd-regional-slow";
    let body = create_review(pv(csi(PD, handle), None));
    let tasks: Vec<_> = (0..10)
        .map(|_| {
            let (reviewer, body) = (reviewer.clone(), body.clone());
            tokio::spawn(async move { common::review(&reviewer, &body).await })
        })
        .collect();
    let mut answers = Vec::new();
    for task in tasks {
        answers.push(task.await.unwrap());
    }
    for answer in &answers {
        assert_eq!(answer.bytes, answers[0].bytes);
        assert_eq!(
            labels(answer)["topology.kubernetes.io/zone"],
            "us-central1-b__us-central1-f"
        );
    }
    assert_eq!(
        fake.requests(&region_disk_get("pd-regional-slow")),
        1,
        "one regionDisks.get for ten concurrent reviews"
    );
    assert_eq!(fake.requests(TOKEN), 1);
    // Answered from the cache from now on, idempotently.
    let answer = assert_idempotent(&reviewer, &body).await;
    assert_eq!(answer.bytes, answers[0].bytes);
    assert_eq!(fake.requests(&region_disk_get("pd-regional-slow")), 1);
    let text = metrics.encode().unwrap();
    assert!(
        text.contains("pv_topology_webhook_lookup_cache_hits_total{lookup=\"gce\"} 2"),
        "{text}"
    );
    assert!(
        text.contains("pv_topology_webhook_lookup_cache_misses_total{lookup=\"gce\"} 10"),
        "{text}"
    );
}

#[tokio::test]
async fn patches_are_idempotent_and_deterministic() {
    let fake = start(|_| {});
    let cached = CachedLookup::new(
        lookup(&fake, Duration::from_secs(5)),
        NonZeroUsize::new(16).unwrap(),
        Duration::from_secs(60),
    );
    let reviewer = Reviewer::new(
        Resolver::new(Rules::default()).with_lookup(Arc::new(cached)),
        DecisionConfig::default(),
    );
    for object in [
        pv(in_tree("pd-b"), None),
        pv(in_tree("pd-regional"), zone_label("us-central1-a__us-central1-c")),
        pv(csi(PD, "projects/UNSPECIFIED/zones/UNSPECIFIED/disks/pd-zonal"), None),
        pv(
            csi(PD, "projects/demo-project/regions/us-central1/disks/pd-regional"),
            None,
        ),
    ] {
        let body = create_review(object);
        let first = assert_idempotent(&reviewer, &body).await;
        assert_eq!(first.outcome(), "labeled");
        for _ in 0..3 {
            assert_eq!(common::review(&reviewer, &body).await.bytes, first.bytes);
        }
    }
}

#[tokio::test]
async fn without_the_flag_the_warning_names_it() {
    for object in [
        pv(in_tree("pd-b"), None),
        pv(csi(PD, "projects/UNSPECIFIED/zones/UNSPECIFIED/disks/pd-b"), None),
    ] {
        let answer = common::review(&common::plain(), &create_review(object)).await;
        assert!(answer.allowed());
        assert!(
            answer.warnings().iter().any(|w| w.contains("--gce-lookup")),
            "{:?}",
            answer.warnings()
        );
    }
    let handle = "projects/demo-project/regions/us-central1/disks/pd-regional";
    let answer = common::review(&common::plain(), &create_review(pv(csi(PD, handle), None))).await;
    assert!(
        answer.warnings()[0].contains("zones need --gce-lookup or a rule"),
        "{:?}",
        answer.warnings()
    );
}

/// Settings that cannot be right stop the start, naming the flag or variable; none of
/// these reaches the network.
#[test]
fn bad_settings_are_refused_at_start_up() {
    let start = |flags: &[&str], metadata_host: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_pv-topology-webhook"))
            .args(["review", "--gce-lookup"])
            .args(flags)
            .env("GCE_METADATA_HOST", metadata_host)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let error = start(&["--gce-zones", "us-central1-a,europe-west1-b"], "127.0.0.1:9");
    assert!(
        error.contains("--gce-zones: zone europe-west1-b is not in region us-central1"),
        "{error}"
    );
    let error = start(&["--gce-region", "us-central1.attacker.example"], "127.0.0.1:9");
    assert!(
        error.contains("--gce-region: \"us-central1.attacker.example\" is not a GCE region"),
        "{error}"
    );
    let error = start(&["--gce-project", "p/../other"], "127.0.0.1:9");
    assert!(
        error.contains("--gce-project: \"p/../other\" is not a project ID"),
        "{error}"
    );
    let error = start(
        &["--gce-compute-endpoint", "http://192.0.2.1/compute/v1/"],
        "127.0.0.1:9",
    );
    assert!(error.contains("--gce-compute-endpoint \"http://192.0.2.1"), "{error}");
    let error = start(&[], "http://127.0.0.1:9/");
    assert!(error.contains("GCE_METADATA_HOST"), "{error}");
}

#[tokio::test]
async fn the_zone_list_is_asked_again_after_its_ttl() {
    let fake = start(|_| {});
    let lookup = lookup(&fake, Duration::from_secs(5)).with_zone_list_ttl(Duration::from_millis(800));
    let unplaced = VolumeIdentity::in_tree(InTree::GcePersistentDisk, "pd-b");
    lookup.lookup(&unplaced, common::soon()).await.unwrap();
    lookup.lookup(&unplaced, common::soon()).await.unwrap();
    assert_eq!(fake.requests(REGIONS_GET), 1, "within its TTL the list is kept");
    tokio::time::sleep(Duration::from_millis(900)).await;
    let topology = lookup.lookup(&unplaced, common::soon()).await.unwrap();
    assert_eq!(topology.zones(), ["us-central1-b"]);
    assert_eq!(
        fake.requests(REGIONS_GET),
        2,
        "past its TTL the list is asked for again"
    );
}

/// The fake whose us-central1 lists `zones` (names become zone URLs of the project asked,
/// a https:// URL is answered as it is), every Compute answer `delay` seconds late.
fn with_region(zones: Value, delay: f64) -> Fake {
    start(move |scenario| {
        scenario["compute"]["regions"] = json!({ "us-central1": zones });
        scenario["compute"]["delay_seconds"] = json!(delay);
    })
}

/// How many `disks.get` the fake has answered, wherever.
fn disks_gets(fake: &Fake) -> u64 {
    let counts = fake.counts();
    let counts = counts.as_object().unwrap();
    counts
        .iter()
        .filter(|(key, _)| key.starts_with("GET /compute/v1/projects/demo-project/zones/"))
        .filter_map(|(_, count)| count.as_u64())
        .sum()
}

/// `count` zone names of us-central1 with one-letter suffixes (at most 26).
fn letter_zones(count: usize) -> Vec<String> {
    ('a'..='z').take(count).map(|c| format!("us-central1-{c}")).collect()
}

#[tokio::test]
async fn a_region_answer_too_long_or_not_the_regions_is_refused_and_nothing_searched() {
    // 1,000 zones: before the cap, 1,001 calls at once for one review.
    let many: Vec<String> = (0..1000).map(|i| format!("us-central1-z{i}")).collect();
    let fake = with_region(json!(many), 0.0);
    let answer = review(&fake, pv(in_tree("pd-b"), None), &[]);
    assert!(!answer.allowed());
    let message = answer.message();
    for part in [
        "cannot list the zones of region us-central1: compute sent an unusable answer for http://",
        &format!("/regions/us-central1: the region lists 1000 zones, more than {MAX_REGION_ZONES}"),
        "(set --gce-region or --gce-zones)",
    ] {
        assert!(message.contains(part), "{part:?} in {message}");
    }
    assert_eq!(disks_gets(&fake), 0, "{}", fake.counts());

    // A zone of another region (where a disk of the name is) is not looked in.
    let fake = start(|scenario| {
        scenario["compute"]["regions"] = json!({"us-central1": ["us-central1-a", "europe-west1-b"]});
        scenario["compute"]["disks"]
            .as_array_mut()
            .unwrap()
            .push(json!({"project": "demo-project", "zone": "europe-west1-b", "name": "pd-elsewhere"}));
    });
    let answer = review(&fake, pv(in_tree("pd-elsewhere"), None), &[]);
    assert!(!answer.allowed());
    assert!(
        answer.message().contains(
            "zones[1] \"https://www.googleapis.com/compute/v1/projects/demo-project/zones/europe-west1-b\" is not a zone of region us-central1 in project demo-project"
        ),
        "{}",
        answer.message()
    );
    assert_eq!(disks_gets(&fake), 0, "{}", fake.counts());
}

#[tokio::test]
async fn one_search_has_at_most_calls_per_lookup_in_flight() {
    // The region and its 16 zones, each answer 200 ms late: 17 calls, at most 8 at once.
    let fake = with_region(json!(letter_zones(MAX_REGION_ZONES)), 0.2);
    let lookup = lookup(&fake, Duration::from_secs(10));
    let missing = VolumeIdentity::in_tree(InTree::GcePersistentDisk, "pd-nowhere");
    let error = lookup.lookup(&missing, common::soon()).await.unwrap_err().to_string();
    assert!(error.contains("GCE disk \"pd-nowhere\" not found"), "{error}");
    assert_eq!(disks_gets(&fake), MAX_REGION_ZONES as u64, "every zone asked once");
    assert_eq!(
        fake.requests("max in flight compute"),
        CALLS_PER_LOOKUP as u64,
        "{}",
        fake.counts()
    );
}

#[tokio::test]
async fn all_lookups_together_have_at_most_calls_in_total_in_flight() {
    // Six searches of 17 calls each at once: 102 calls, at most 32 in flight.
    let fake = with_region(json!(letter_zones(MAX_REGION_ZONES)), 0.2);
    let lookup = Arc::new(lookup(&fake, Duration::from_secs(20)));
    let searches: Vec<_> = (0..6)
        .map(|i| {
            let lookup = lookup.clone();
            tokio::spawn(async move {
                let missing = VolumeIdentity::in_tree(InTree::GcePersistentDisk, format!("pd-nowhere-{i}"));
                lookup.lookup(&missing, common::soon()).await.unwrap_err().to_string()
            })
        })
        .collect();
    for search in searches {
        let error = search.await.unwrap();
        assert!(error.contains("not found in project demo-project"), "{error}");
    }
    assert_eq!(disks_gets(&fake), 6 * MAX_REGION_ZONES as u64);
    let most = fake.requests("max in flight compute");
    assert!(
        most > CALLS_PER_LOOKUP as u64 && most <= CALLS_IN_TOTAL as u64,
        "{most} in flight: {}",
        fake.counts()
    );
}

#[tokio::test]
async fn a_failed_refresh_keeps_the_old_list_only_for_a_while() {
    // regions.get answers once, then 503: the old list stands in until twice its TTL old.
    let fake = start(|scenario| scenario["compute"]["regions_fail_after"] = json!(1));
    let lookup = lookup(&fake, Duration::from_secs(5)).with_zone_list_ttl(Duration::from_millis(1000));
    let unplaced = VolumeIdentity::in_tree(InTree::GcePersistentDisk, "pd-b");
    lookup.lookup(&unplaced, common::soon()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let topology = lookup.lookup(&unplaced, common::soon()).await.unwrap();
    assert_eq!(topology.zones(), ["us-central1-b"]);
    assert_eq!(fake.requests(REGIONS_GET), 2, "asked again past the TTL");
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let error = lookup.lookup(&unplaced, common::soon()).await.unwrap_err().to_string();
    assert_eq!(fake.requests(REGIONS_GET), 3);
    assert!(
        error.starts_with("cannot list the zones of region us-central1: compute answered HTTP 503 for http://")
            && error.contains("backendError (UNAVAILABLE)"),
        "{error}"
    );
}
