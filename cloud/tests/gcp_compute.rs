//! Compute `disks.get` and `regionDisks.get` against the fake, with tokens
//! from the fake metadata server: typed disks, Google's refusals with their
//! reason, message, URL and status, 404 as its own error, and the caller's
//! deadline kept.

#[path = "gcp_fake.rs"]
mod fake;

use std::sync::Arc;
use std::time::{Duration, Instant};

use cloud_access::api::{CallErrorKind, CallFailure};
use cloud_access::gcp::{AccessToken, CachedTokenSource, ComputeClient, Disk, GcpError, MAX_REGION_ZONES, TokenSource};
use fake::{Fake, FakeExt};
use secrecy::SecretString;
use serde_json::json;

const TOKEN_PATH: &str = "GET /computeMetadata/v1/instance/service-accounts/default/token";

fn compute(fake: &Fake) -> ComputeClient {
    compute_with(fake, Arc::new(CachedTokenSource::new(fake.metadata())))
}

fn compute_with(fake: &Fake, tokens: Arc<dyn TokenSource<GcpError>>) -> ComputeClient {
    ComputeClient::new(fake::http(), &fake.endpoint("compute/v1"), tokens)
}

fn soon() -> Instant {
    Instant::now() + Duration::from_secs(5)
}

#[tokio::test]
async fn zonal_and_regional_disks() {
    let fake = Fake::start();
    let compute = compute(&fake);
    let zonal = compute
        .disk("demo-project", "us-central1-a", "pd-zonal", soon())
        .await
        .unwrap();
    assert_eq!(
        zonal,
        Disk {
            name: "pd-zonal".into(),
            zone: Some("us-central1-a".into()),
            region: Some("us-central1".into()),
            replica_zones: vec![],
        }
    );
    let regional = compute
        .region_disk("demo-project", "us-central1", "pd-regional", soon())
        .await
        .unwrap();
    assert!(regional.is_regional());
    assert_eq!(regional.zone, None);
    assert_eq!(regional.region.as_deref(), Some("us-central1"));
    assert_eq!(regional.replica_zones, ["us-central1-a", "us-central1-c"]);
    // One token for both calls.
    assert_eq!(fake.requests(TOKEN_PATH), 1);
}

#[tokio::test]
async fn a_missing_disk_is_not_found() {
    let fake = Fake::start();
    let compute = compute(&fake);
    // pd-zonal exists, but in us-central1-a: the webhook tries zone after zone.
    let error = compute
        .disk("demo-project", "us-central1-b", "pd-zonal", soon())
        .await
        .unwrap_err();
    assert!(error.is_not_found(), "{error}");
    assert_eq!(error.status(), Some(404));
    assert_eq!(error.detail().unwrap().reason.as_deref(), Some("notFound"));
    let text = error.to_string();
    let url = format!(
        "{}compute/v1/projects/demo-project/zones/us-central1-b/disks/pd-zonal",
        fake.base()
    );
    assert!(text.contains(&url), "{text}");
    let regional = compute
        .region_disk("demo-project", "europe-west1", "pd-regional", soon())
        .await
        .unwrap_err();
    assert!(regional.is_not_found(), "{regional}");
}

#[tokio::test]
async fn a_refusal_shows_googles_reason_message_url_and_status() {
    let fake = Fake::start();
    let error = compute(&fake)
        .disk("locked-project", "us-central1-a", "pd-zonal", soon())
        .await
        .unwrap_err();
    assert!(
        matches!(error.call_kind(), Some(CallErrorKind::Api { status: 403, .. })),
        "{error}"
    );
    let detail = error.detail().unwrap();
    assert_eq!(detail.reason.as_deref(), Some("forbidden"));
    assert_eq!(detail.status.as_deref(), Some("PERMISSION_DENIED"));
    let text = error.to_string();
    let url = format!(
        "{}compute/v1/projects/locked-project/zones/us-central1-a/disks/pd-zonal",
        fake.base()
    );
    assert_eq!(
        text,
        format!(
            "compute answered HTTP 403 for {url}: forbidden (PERMISSION_DENIED): Required 'compute.disks.get' permission for 'projects/locked-project/zones/us-central1-a/disks/pd-zonal'"
        )
    );
    assert!(!text.contains("ya29"), "{text}");
}

#[tokio::test]
async fn a_token_without_a_compute_scope_is_refused_with_googles_reason() {
    let fake = Fake::with(|s| {
        s["metadata"]["tree"]["instance/service-accounts/default/scopes"] =
            json!("https://www.googleapis.com/auth/devstorage.read_only")
    });
    let error = compute(&fake)
        .disk("demo-project", "us-central1-a", "pd-zonal", soon())
        .await
        .unwrap_err();
    assert_eq!(error.status(), Some(403));
    let text = error.to_string();
    assert!(text.contains("insufficientPermissions"), "{text}");
    assert!(text.contains("insufficient authentication scopes"), "{text}");
}

#[tokio::test]
async fn a_token_google_does_not_accept_is_unauthenticated() {
    let fake = Fake::start();
    let stale = AccessToken::new(SecretString::from("ya29.never-issued-token"), Duration::from_secs(60));
    let error = compute_with(&fake, Arc::new(stale))
        .disk("demo-project", "us-central1-a", "pd-zonal", soon())
        .await
        .unwrap_err();
    assert_eq!(error.status(), Some(401));
    assert_eq!(error.detail().unwrap().status.as_deref(), Some("UNAUTHENTICATED"));
}

#[tokio::test]
async fn the_callers_deadline_is_kept() {
    // pd-slow answers after 3 s.
    let fake = Fake::start();
    let compute = compute(&fake);
    let started = Instant::now();
    let error = compute
        .disk(
            "demo-project",
            "us-central1-b",
            "pd-slow",
            started + Duration::from_millis(400),
        )
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    assert!(
        matches!(error.call_kind(), Some(CallErrorKind::Deadline { .. })),
        "{error}"
    );
    let text = error.to_string();
    assert!(text.contains("compute did not answer"), "{text}");
    assert!(text.contains("/disks/pd-slow"), "{text}");
}

#[tokio::test]
async fn a_slow_token_source_counts_against_the_deadline() {
    let fake = Fake::with(|s| s["metadata"]["token"] = json!({"expires_in": 3599, "delay_seconds": 3}));
    let started = Instant::now();
    let error = compute(&fake)
        .disk(
            "demo-project",
            "us-central1-a",
            "pd-zonal",
            started + Duration::from_millis(300),
        )
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(
        matches!(error.call_kind(), Some(CallErrorKind::Deadline { .. })),
        "{error}"
    );
}

#[tokio::test]
async fn names_that_are_not_one_path_segment_are_refused_unsent() {
    let fake = Fake::start();
    let compute = compute(&fake);
    for (project, zone, disk) in [
        (
            "demo-project",
            "us-central1-a",
            "../../regions/us-central1/disks/pd-regional",
        ),
        ("demo-project", "us-central1-a/disks/pd-zonal?x=", "d"),
        ("", "us-central1-a", "pd-zonal"),
        ("demo-project", "us-central1-a", "UNSPECIFIED/.."),
    ] {
        let error = compute.disk(project, zone, disk, soon()).await.unwrap_err();
        assert!(matches!(error, GcpError::InvalidName { .. }), "{error}");
    }
    assert_eq!(fake.all_requests(), 0);
}

#[tokio::test]
async fn a_regions_zones_by_name() {
    let fake = Fake::with(|s| {
        s["compute"]["regions"] = json!({"us-central1": ["us-central1-a", "us-central1-b", "us-central1-f"]})
    });
    let compute = compute(&fake);
    let zones = compute
        .region_zones("demo-project", "us-central1", soon())
        .await
        .unwrap();
    assert_eq!(zones, ["us-central1-a", "us-central1-b", "us-central1-f"]);
    let error = compute
        .region_zones("demo-project", "europe-west1", soon())
        .await
        .unwrap_err();
    assert!(error.is_not_found(), "{error}");
    let error = compute
        .region_zones("locked-project", "us-central1", soon())
        .await
        .unwrap_err();
    assert_eq!(error.status(), Some(403));
    assert!(error.to_string().contains("compute.regions.get"), "{error}");
    let error = compute.region_zones("demo-project", "../x", soon()).await.unwrap_err();
    assert!(matches!(error, GcpError::InvalidName { .. }), "{error}");
}

/// `zones` of us-central1 as the fake answers them (names become URLs of the project
/// asked; a full URL is answered as it is).
fn region_answering(zones: serde_json::Value) -> Fake {
    Fake::with(move |s| s["compute"]["regions"] = json!({ "us-central1": zones }))
}

#[tokio::test]
async fn a_region_listing_more_zones_than_any_region_has_is_refused() {
    // GCE regions have 3 or 4 zones (a handful at most); an answer listing thousands would fan one review out
    // into as many disks.get.
    let many: Vec<String> = (0..100).map(|i| format!("us-central1-z{i}")).collect();
    let fake = region_answering(json!(many));
    let error = compute(&fake)
        .region_zones("demo-project", "us-central1", soon())
        .await
        .unwrap_err();
    let text = error.to_string();
    assert!(
        text.starts_with("compute sent an unusable answer for http://")
            && text.ends_with(&format!(
                "/projects/demo-project/regions/us-central1: the region lists 100 zones, more than {MAX_REGION_ZONES} (GCE regions have a handful)"
            )),
        "{text}"
    );
    // At the cap, still an answer.
    let letters: Vec<String> = ('a'..='z')
        .take(MAX_REGION_ZONES)
        .map(|c| format!("us-central1-{c}"))
        .collect();
    let fake = region_answering(json!(letters));
    let zones = compute(&fake)
        .region_zones("demo-project", "us-central1", soon())
        .await
        .unwrap();
    assert_eq!(zones, letters);
}

#[tokio::test]
async fn zones_outside_the_region_or_the_project_are_refused() {
    let other_project = "https://www.googleapis.com/compute/v1/projects/other-project/zones/us-central1-b";
    for (zone, shown) in [
        (
            "europe-west1-b",
            "https://www.googleapis.com/compute/v1/projects/demo-project/zones/europe-west1-b",
        ),
        (
            "us-central1",
            "https://www.googleapis.com/compute/v1/projects/demo-project/zones/us-central1",
        ),
        (
            "us-central10-a",
            "https://www.googleapis.com/compute/v1/projects/demo-project/zones/us-central10-a",
        ),
        (
            "us-central1-A",
            "https://www.googleapis.com/compute/v1/projects/demo-project/zones/us-central1-A",
        ),
        (other_project, other_project),
        (
            "https://www.googleapis.com/compute/v1/projects/demo-project/regions/us-central1-b",
            "https://www.googleapis.com/compute/v1/projects/demo-project/regions/us-central1-b",
        ),
    ] {
        let fake = region_answering(json!(["us-central1-a", zone]));
        let error = compute(&fake)
            .region_zones("demo-project", "us-central1", soon())
            .await
            .unwrap_err();
        let text = error.to_string();
        assert!(
            text.ends_with(&format!(
                "/regions/us-central1: zones[1] {shown:?} is not a zone of region us-central1 in project demo-project"
            )),
            "{zone}: {text}"
        );
    }
}
