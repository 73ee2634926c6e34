//! The GCE metadata client against the fake metadata server: what it reads,
//! the header the server requires, and tokens cached, refreshed before they
//! expire and fetched once for concurrent callers.

#[path = "gcp_fake.rs"]
mod fake;

use std::sync::Arc;
use std::time::Duration;

use cloud_access::gcp::{CachedTokenSource, DEFAULT_METADATA_BASE, GcpError, metadata_base};
use fake::{Fake, FakeExt};
use secrecy::ExposeSecret;
use serde_json::json;

const TOKEN_PATH: &str = "GET /computeMetadata/v1/instance/service-accounts/default/token";

#[tokio::test]
async fn reads_project_account_scopes_zone_and_attributes() {
    let fake = Fake::start();
    let metadata = fake.metadata();
    assert_eq!(metadata.project_id().await.unwrap(), "demo-project");
    assert_eq!(metadata.zone().await.unwrap(), "us-central1-a");
    assert_eq!(
        metadata.default_email().await.unwrap(),
        "node@demo-project.iam.gserviceaccount.com"
    );
    let scopes = metadata.default_scopes().await.unwrap();
    assert_eq!(scopes.len(), 3);
    assert_eq!(scopes[0], "https://www.googleapis.com/auth/devstorage.read_only");
    let dockercfg = metadata.attribute("google-dockercfg").await.unwrap().unwrap();
    assert!(dockercfg.contains("registry.example.com"), "{dockercfg}");
    assert_eq!(metadata.attribute("google-dockercfg-url").await.unwrap(), None);
    let token = metadata.default_token().await.unwrap();
    assert_eq!(token.secret().expose_secret(), "ya29.metadata-1");
    assert!(token.remaining() > Duration::from_secs(3500));
    assert!(!format!("{token:?}").contains("ya29"));
}

#[tokio::test]
async fn attribute_names_are_checked_before_any_request() {
    let fake = Fake::start();
    for bad in ["../token", "a/b", "", "x?recursive=true"] {
        let error = fake.metadata().attribute(bad).await.unwrap_err();
        assert!(matches!(error, GcpError::InvalidName { .. }), "{bad:?}: {error}");
    }
    assert_eq!(fake.all_requests(), 0);
}

#[tokio::test]
async fn the_server_requires_metadata_flavor_so_the_client_sends_it() {
    let fake = Fake::start();
    let url = format!("{}computeMetadata/v1/project/project-id", fake.base());
    let plain = reqwest::Client::builder().no_proxy().build().unwrap();
    let refused = plain.get(&url).send().await.unwrap();
    assert_eq!(refused.status(), 403);
    assert!(refused.text().await.unwrap().contains("Missing Metadata-Flavor:Google"));
    // Proxied requests are refused too, as the real server refuses them.
    let forwarded = plain
        .get(&url)
        .header("Metadata-Flavor", "Google")
        .header("X-Forwarded-For", "10.0.0.9")
        .send()
        .await
        .unwrap();
    assert_eq!(forwarded.status(), 403);
    // Our client gets through: it sends the header and nothing forwarded.
    assert_eq!(fake.metadata().project_id().await.unwrap(), "demo-project");
}

#[tokio::test]
async fn tokens_are_kept_then_refreshed_before_they_expire() {
    // Tokens that live 4 s: kept for half their life, then fetched anew.
    let fake = Fake::with(|s| s["metadata"]["token"] = json!({"expires_in": 4}));
    let tokens = CachedTokenSource::new(fake.metadata());
    let first = tokens.get().await.unwrap();
    let again = tokens.get().await.unwrap();
    assert_eq!(first.secret().expose_secret(), "ya29.metadata-1");
    assert_eq!(again.secret().expose_secret(), "ya29.metadata-1");
    assert_eq!(fake.requests(TOKEN_PATH), 1);
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let refreshed = tokens.get().await.unwrap();
    assert_eq!(refreshed.secret().expose_secret(), "ya29.metadata-2");
    assert_eq!(fake.requests(TOKEN_PATH), 2);
}

#[tokio::test]
async fn an_hour_long_token_is_fetched_once() {
    let fake = Fake::start();
    let tokens = CachedTokenSource::new(fake.metadata());
    for _ in 0..5 {
        assert_eq!(tokens.get().await.unwrap().secret().expose_secret(), "ya29.metadata-1");
    }
    assert_eq!(fake.requests(TOKEN_PATH), 1);
}

#[tokio::test]
async fn concurrent_callers_share_one_fetch() {
    // A slow token endpoint, so that every caller arrives during the fetch.
    let fake = Fake::with(|s| s["metadata"]["token"] = json!({"expires_in": 3599, "delay_seconds": 0.3}));
    let tokens = Arc::new(CachedTokenSource::new(fake.metadata()));
    let callers: Vec<_> = (0..16)
        .map(|_| {
            let tokens = tokens.clone();
            tokio::spawn(async move { tokens.get().await.unwrap() })
        })
        .collect();
    for caller in callers {
        assert_eq!(caller.await.unwrap().secret().expose_secret(), "ya29.metadata-1");
    }
    assert_eq!(fake.requests(TOKEN_PATH), 1);
}

#[tokio::test]
async fn failures_name_the_url_and_status_and_are_not_cached() {
    let fake = Fake::with(|s| s["metadata"]["token"] = json!({"status": 500}));
    let tokens = CachedTokenSource::new(fake.metadata());
    for _ in 0..2 {
        let error = tokens.get().await.unwrap_err().to_string();
        assert!(error.contains("HTTP 500"), "{error}");
        assert!(
            error.contains(&format!(
                "{}computeMetadata/v1/instance/service-accounts/default/token",
                fake.base()
            )),
            "{error}"
        );
    }
    assert_eq!(fake.requests(TOKEN_PATH), 2);
}

#[tokio::test]
async fn an_instance_without_a_service_account_says_so() {
    let fake = Fake::with(|s| s["metadata"]["token"] = serde_json::Value::Null);
    let error = fake.metadata().default_token().await.unwrap_err().to_string();
    assert!(error.contains("HTTP 404"), "{error}");
    assert!(error.contains("default service account"), "{error}");
}

#[tokio::test]
async fn an_absent_server_is_a_typed_error() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let base = metadata_base(Some(&format!("127.0.0.1:{port}"))).unwrap();
    let metadata = cloud_access::gcp::GceMetadata::new(base, Duration::from_secs(2)).unwrap();
    let error = metadata.project_id().await.unwrap_err();
    assert!(matches!(error, GcpError::Metadata(_)), "{error}");
    assert!(
        error.to_string().contains("cannot reach the gce metadata service"),
        "{error}"
    );
}

/// `GCE_METADATA_HOST` is read as Google's libraries read it, from a value
/// given (the process environment is never touched here).
#[test]
fn gce_metadata_host_is_host_and_optional_port() {
    let base = |value: Option<&str>| metadata_base(value).map(|u| u.to_string());
    assert_eq!(base(None).unwrap(), DEFAULT_METADATA_BASE);
    assert_eq!(base(Some("")).unwrap(), DEFAULT_METADATA_BASE);
    assert_eq!(base(Some("  ")).unwrap(), DEFAULT_METADATA_BASE);
    assert_eq!(base(Some("127.0.0.1:8080")).unwrap(), "http://127.0.0.1:8080/");
    assert_eq!(base(Some("[::1]:9000")).unwrap(), "http://[::1]:9000/");
    assert_eq!(base(Some("169.254.169.254")).unwrap(), "http://169.254.169.254/");
    assert_eq!(
        base(Some("metadata.google.internal")).unwrap(),
        "http://metadata.google.internal/"
    );
    assert_eq!(base(Some("localhost:1")).unwrap(), "http://localhost:1/");
    for bad in [
        "http://127.0.0.1:8080",
        "https://metadata",
        "127.0.0.1:8080/computeMetadata",
        "user@127.0.0.1",
        "host:notaport",
        "host:99999",
        "a b",
        "host?x",
        "host#f",
    ] {
        let error = metadata_base(Some(bad)).unwrap_err();
        assert!(matches!(error, GcpError::MetadataHost { .. }), "{bad:?}: {error}");
        assert!(error.to_string().starts_with("GCE_METADATA_HOST "), "{error}");
    }
}
