//! The credential chain keeps what it found until shortly before it
//! expires, then asks again: a long-running program (the webhook) never
//! signs with expired credentials. The source here is a container
//! credentials endpoint (as EKS Pod Identity serves) on loopback.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use cloud_access::aws::{AwsConfig, CredentialsChain};

/// Serves credentials that expire `lifetime` from each call; counts calls.
async fn endpoint(lifetime: Duration) -> (String, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let app = axum::Router::new().route(
        "/creds",
        axum::routing::get(move || {
            let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
            async move {
                let expires = humantime::format_rfc3339_seconds(SystemTime::now() + lifetime).to_string();
                serde_json::json!({
                    "AccessKeyId": format!("AKIDCALL{n}"), "SecretAccessKey": "secret",
                    "Token": "session", "Expiration": expires
                })
                .to_string()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/creds", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, calls)
}

fn chain(url: &str) -> CredentialsChain {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = AwsConfig::from_variables([("AWS_CONTAINER_CREDENTIALS_FULL_URI", url)]);
    CredentialsChain::new(reqwest::Client::new(), "us-east-1", config)
}

#[tokio::test]
async fn credentials_are_reused_while_fresh() {
    let (url, calls) = endpoint(Duration::from_secs(3600)).await;
    let chain = chain(&url);
    let first = chain.credentials().await.unwrap();
    let second = chain.credentials().await.unwrap();
    assert_eq!(first.access_key_id, "AKIDCALL1");
    assert_eq!(second.access_key_id, "AKIDCALL1");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn credentials_about_to_expire_are_refreshed() {
    // Two minutes left is inside the five-minute refresh margin.
    let (url, calls) = endpoint(Duration::from_secs(120)).await;
    let chain = chain(&url);
    assert_eq!(chain.credentials().await.unwrap().access_key_id, "AKIDCALL1");
    assert_eq!(chain.credentials().await.unwrap().access_key_id, "AKIDCALL2");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn nothing_found_names_every_source_tried() {
    let config = AwsConfig::from_variables([("AWS_EC2_METADATA_DISABLED", "true")]);
    let chain = CredentialsChain::new(reqwest::Client::new(), "us-east-1", config);
    let error = chain.credentials().await.unwrap_err().to_string();
    assert!(error.starts_with("no AWS credentials found"), "{error}");
    assert!(error.contains("IMDS disabled"), "{error}");
}
