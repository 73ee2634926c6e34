//! ARM `Disks.Get` against the fake, with managed-identity tokens from the
//! fake's IMDS: zonal, zone-redundant and regional disks, disks named by
//! their URI, ARM's refusals with their code, message, URL and status, 404
//! as its own error, and the caller's deadline kept.

#[path = "azure_fake.rs"]
mod fake;

use std::sync::Arc;
use std::time::{Duration, Instant};

use cloud_access::api::{CallErrorKind, CallFailure};
use cloud_access::azure::{
    ACR_AUDIENCE, AccessToken, AzureCloud, AzureError, CachedTokenSource, CloudEndpoints, DISKS_API_VERSION, Disk,
    DisksClient, ManagedDiskUri, TokenSource, zone_label,
};
use fake::{Fake, FakeExt, IMDS_TOKEN, RESOURCE_GROUP, SUBSCRIPTION, soon};
use secrecy::{ExposeSecret, SecretString};

fn disks(fake: &Fake) -> DisksClient {
    DisksClient::new(fake::http(), &fake.endpoint(""), fake.arm_tokens())
}

const DISK_PATH: &str = "GET /subscriptions/aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee/resourceGroups/MC_demo_demo_eastus/providers/Microsoft.Compute/disks/";

#[tokio::test]
async fn zonal_zone_redundant_and_regional_disks() {
    let fake = Fake::start();
    let client = disks(&fake);
    let zonal = client
        .disk(SUBSCRIPTION, RESOURCE_GROUP, "pvc-zonal", soon())
        .await
        .unwrap();
    assert_eq!(
        zonal,
        Disk {
            name: "pvc-zonal".into(),
            location: "eastus".into(),
            zones: vec!["2".into()],
            sku_name: Some("Premium_LRS".into()),
        }
    );
    assert_eq!(
        zone_label(&zonal.location, &zonal.zones[0]).as_deref(),
        Some("eastus-2")
    );
    let zrs = client
        .disk(SUBSCRIPTION, RESOURCE_GROUP, "pvc-zrs", soon())
        .await
        .unwrap();
    assert!(zrs.zones.is_empty() && zrs.is_zone_redundant(), "{zrs:?}");
    let regional = client
        .disk(SUBSCRIPTION, RESOURCE_GROUP, "pvc-regional", soon())
        .await
        .unwrap();
    assert!(
        regional.zones.is_empty() && !regional.is_zone_redundant(),
        "{regional:?}"
    );
    // One token for every call; each call named Disks' published 2025-01-02
    // (the fake refuses any version Disks does not publish).
    assert_eq!(fake.requests(IMDS_TOKEN), 1);
    assert_eq!(fake.requests(&format!("{DISK_PATH}pvc-zonal")), 1);
    let sent: Vec<String> = versions_sent(&fake)
        .into_iter()
        .filter(|key| key.contains("/disks/"))
        .collect();
    assert_eq!(
        sent,
        ["pvc-regional", "pvc-zonal", "pvc-zrs"].map(|disk| format!("api-version=2025-01-02 {DISK_PATH}{disk}"))
    );
    assert_eq!(DISKS_API_VERSION, "2025-01-02");
}

/// The fake's `api-version=V GET /path` counters: each api-version sent, sorted.
fn versions_sent(fake: &Fake) -> Vec<String> {
    let counts = fake.counts();
    let mut keys: Vec<String> = counts
        .as_object()
        .unwrap()
        .keys()
        .filter(|key| key.starts_with("api-version="))
        .cloned()
        .collect();
    keys.sort();
    keys
}

#[tokio::test]
async fn the_fake_refuses_api_versions_arm_does_not_publish() {
    // What a client sending another version would meet: ARM's 400, with its code.
    let fake = Fake::start();
    let token = fake.arm_tokens().token().await.unwrap();
    let disk = format!(
        "{}subscriptions/{SUBSCRIPTION}/resourceGroups/{RESOURCE_GROUP}/providers/Microsoft.Compute/disks/pvc-zonal",
        fake.base()
    );
    for (version, status, code) in [
        ("2025-01-02", 200, None),
        ("2019-07-01", 200, None),
        ("2025-01-01", 400, Some("NoRegisteredProviderFound")),
        ("2099-01-01", 400, Some("NoRegisteredProviderFound")),
        ("latest", 400, Some("InvalidApiVersionParameter")),
        ("", 400, Some("MissingApiVersionParameter")),
    ] {
        let answer = fake::http()
            .get(format!("{disk}?api-version={version}"))
            .bearer_auth(token.secret().expose_secret())
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status().as_u16(), status, "{version}");
        let body: serde_json::Value = answer.json().await.unwrap();
        assert_eq!(body["error"]["code"].as_str(), code, "{version}: {body}");
    }
    // /metadata/endpoints: the list of clouds from 2019-05-01 on, the old
    // single-cloud object for 2015-01-01, refused otherwise.
    let endpoints = |version: &str| {
        fake::http()
            .get(format!("{}metadata/endpoints?api-version={version}", fake.base()))
            .send()
    };
    let list: serde_json::Value = endpoints("2019-05-01").await.unwrap().json().await.unwrap();
    assert!(list.is_array(), "{list}");
    let legacy: serde_json::Value = endpoints("2015-01-01").await.unwrap().json().await.unwrap();
    assert!(legacy.is_object(), "{legacy}");
    let refused = endpoints("2019-05-02").await.unwrap();
    assert_eq!(refused.status().as_u16(), 400);
}

#[tokio::test]
async fn a_custom_cloud_is_discovered_at_a_published_api_version() {
    let fake = Fake::start();
    let base = AzureCloud::Public.endpoints().unwrap();
    let endpoints = CloudEndpoints::discover(&fake::http(), &fake.endpoint(""), "", base, soon())
        .await
        .unwrap();
    assert_eq!(endpoints.name, "AzureStackDemo");
    // What the fake received: cloud-provider-azure's 2019-05-01, and nothing else.
    assert_eq!(versions_sent(&fake), ["api-version=2019-05-01 GET /metadata/endpoints"]);
}

#[tokio::test]
async fn disks_named_by_their_uri_whatever_the_case_of_its_keywords() {
    let fake = Fake::start();
    let uri = ManagedDiskUri::parse(&format!(
        "/subscriptions/{SUBSCRIPTION}/resourcegroups/mc_demo_demo_eastus/providers/microsoft.compute/disks/PVC-ZONAL"
    ))
    .unwrap();
    let disk = disks(&fake).disk_by_uri(&uri, soon()).await.unwrap();
    assert_eq!(disk.name, "pvc-zonal");
    let blob = ManagedDiskUri::parse("https://demo.blob.core.windows.net/vhds/pvc-zonal.vhd").unwrap_err();
    assert!(blob.to_string().contains("does not name a managed disk"), "{blob}");
}

#[tokio::test]
async fn absent_disks_and_groups_are_not_found() {
    let fake = Fake::start();
    let client = disks(&fake);
    let error = client
        .disk(SUBSCRIPTION, RESOURCE_GROUP, "pvc-gone", soon())
        .await
        .unwrap_err();
    assert!(error.is_not_found(), "{error}");
    assert_eq!(error.detail().unwrap().code.as_deref(), Some("ResourceNotFound"));
    let text = error.to_string();
    assert!(
        text.starts_with(&format!(
            "ARM: {}subscriptions/{SUBSCRIPTION}/resourceGroups/",
            fake.base()
        )),
        "{text}"
    );
    assert!(!text.contains("api-version"), "the query is not shown: {text}");
    assert!(
        text.contains("ResourceNotFound: The Resource 'Microsoft.Compute/disks/pvc-gone'"),
        "{text}"
    );
    let error = client
        .disk(SUBSCRIPTION, "other-group", "pvc-zonal", soon())
        .await
        .unwrap_err();
    assert!(error.is_not_found());
    assert_eq!(error.detail().unwrap().code.as_deref(), Some("ResourceGroupNotFound"));
}

#[tokio::test]
async fn refusals_carry_arms_code_and_message() {
    let fake = Fake::start();
    let error = disks(&fake)
        .disk(fake::DENIED_SUBSCRIPTION, RESOURCE_GROUP, "pvc-zonal", soon())
        .await
        .unwrap_err();
    assert_eq!(error.status(), Some(403));
    assert!(!error.is_not_found());
    let text = error.to_string();
    assert!(text.starts_with("ARM answered HTTP 403 for "), "{text}");
    assert!(
        text.contains("AuthorizationFailed: The client '00000000-0000-0000-0000-00000000a11e'"),
        "{text}"
    );
    assert!(text.contains("'Microsoft.Compute/disks/read'"), "{text}");
    assert!(!text.contains("imds-token"), "{text}");
}

#[tokio::test]
async fn tokens_for_another_audience_or_unknown_tokens_are_refused() {
    let fake = Fake::start();
    let acr = Arc::new(CachedTokenSource::new(fake.managed_identity(None, ACR_AUDIENCE)));
    let client = DisksClient::new(fake::http(), &fake.endpoint(""), acr);
    let error = client
        .disk(SUBSCRIPTION, RESOURCE_GROUP, "pvc-zonal", soon())
        .await
        .unwrap_err();
    assert_eq!(error.status(), Some(401));
    assert_eq!(
        error.detail().unwrap().code.as_deref(),
        Some("InvalidAuthenticationTokenAudience")
    );
    let forged = AccessToken::new(SecretString::from("never-issued-token-value"), Duration::from_secs(60));
    let client = DisksClient::new(fake::http(), &fake.endpoint(""), Arc::new(forged));
    let error = client
        .disk(SUBSCRIPTION, RESOURCE_GROUP, "pvc-zonal", soon())
        .await
        .unwrap_err();
    assert_eq!(
        error.detail().unwrap().code.as_deref(),
        Some("InvalidAuthenticationToken")
    );
    assert!(!error.to_string().contains("never-issued"), "{error}");
}

#[tokio::test]
async fn names_are_checked_before_any_request() {
    let fake = Fake::start();
    let client = disks(&fake);
    for (subscription, group, name) in [
        (SUBSCRIPTION, RESOURCE_GROUP, "../../x"),
        (SUBSCRIPTION, "rg?api-version=1", "d"),
        ("", RESOURCE_GROUP, "d"),
        (SUBSCRIPTION, RESOURCE_GROUP, "a b"),
    ] {
        let error = client.disk(subscription, group, name, soon()).await.unwrap_err();
        assert!(matches!(error, AzureError::InvalidName { .. }), "{error}");
    }
    assert_eq!(fake.all_requests(), 0);
}

#[tokio::test]
async fn the_callers_deadline_is_kept() {
    let fake = Fake::start();
    let client = disks(&fake);
    // The token first, so that only the slow disk counts.
    client
        .disk(SUBSCRIPTION, RESOURCE_GROUP, "pvc-zonal", soon())
        .await
        .unwrap();
    let started = Instant::now();
    let error = client
        .disk(
            SUBSCRIPTION,
            RESOURCE_GROUP,
            "pvc-slow",
            Instant::now() + Duration::from_millis(500),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(error.call_kind(), Some(CallErrorKind::Deadline { .. })),
        "{error}"
    );
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    assert!(error.to_string().starts_with("ARM did not answer"), "{error}");
}
