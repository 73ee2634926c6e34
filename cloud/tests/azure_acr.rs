//! ACR's token exchange against the fake registry, with Entra tokens from
//! the fake's IMDS and token endpoint: the `/v2/` challenge, the documented
//! exchange, the refresh token's expiry; and refusals (other statuses and
//! challenges, a realm on another host, registry names, plain http off
//! loopback, the registry's own errors without the token in them).

#[path = "azure_fake.rs"]
mod fake;

use std::time::{Duration, SystemTime};

use cloud_access::api::{CallErrorKind, CallFailure};
use cloud_access::azure::{ACR_AUDIENCE, ACR_USERNAME, AcrClient, AzureError, CachedTokenSource};
use fake::{Fake, FakeExt, TENANT, soon};
use secrecy::ExposeSecret;
use serde_json::json;

fn acr() -> AcrClient {
    AcrClient::new(fake::http()).with_plain_http_on_loopback()
}

#[tokio::test]
async fn challenge_then_documented_exchange() {
    let fake = Fake::start();
    let challenge = acr().challenge(&fake.host(), soon()).await.unwrap();
    assert_eq!(challenge.registry, fake.host());
    assert_eq!(challenge.service, fake.host());
    assert_eq!(challenge.realm.as_str(), format!("{}oauth2/token", fake.base()));
    let tokens = CachedTokenSource::new(fake.managed_identity(None, ACR_AUDIENCE));
    let refresh = acr()
        .refresh_token(&fake.host(), TENANT, &tokens, soon())
        .await
        .unwrap();
    assert!(refresh.secret.expose_secret().starts_with("eyJ"));
    assert!(!format!("{refresh:?}").contains(refresh.secret.expose_secret()));
    let lifetime = refresh
        .expires_at
        .unwrap()
        .duration_since(SystemTime::now())
        .unwrap()
        .as_secs();
    assert!((10_790..=10_800).contains(&lifetime), "{lifetime}");
    assert_eq!(fake.requests("GET /v2/"), 2);
    assert_eq!(fake.requests("exchange grant_type=access_token"), 1);
    assert_eq!(fake.requests("exchange grant_type=access_token_refresh_token"), 0);
    assert_eq!(ACR_USERNAME, "00000000-0000-0000-0000-000000000000");
}

#[tokio::test]
async fn workload_identity_tokens_work_too() {
    let fake = Fake::start();
    let tokens = cloud_access::azure::ClientAssertionCredential::new(
        fake::http(),
        &fake.cloud().authority_host,
        TENANT,
        fake::WI_CLIENT,
        cloud_access::azure::Assertion::Token(fake::federated_token(true).into()),
        ACR_AUDIENCE,
    )
    .unwrap();
    let refresh = acr()
        .refresh_token(&fake.host(), TENANT, &tokens, soon())
        .await
        .unwrap();
    assert!(refresh.expires_at.is_some());
}

#[tokio::test]
async fn the_registrys_refusal_is_typed_without_the_token() {
    let fake = Fake::with(|s| s["acr"]["echo_access_token"] = json!(true));
    let tokens = fake.managed_identity(None, ACR_AUDIENCE);
    // Another tenant than the registry's.
    let error = acr()
        .refresh_token(&fake.host(), "22222222-0000-4000-8000-000000000000", &tokens, soon())
        .await
        .unwrap_err();
    assert_eq!(error.status(), Some(401));
    assert_eq!(error.detail().unwrap().code.as_deref(), Some("UNAUTHORIZED"));
    // An expired (here: never issued) token, echoed by the registry.
    let challenge = acr().challenge(&fake.host(), soon()).await.unwrap();
    let forged = cloud_access::azure::AccessToken::new("forged-entra-token-value".into(), Duration::from_secs(60));
    let error = acr().exchange(&challenge, TENANT, &forged, soon()).await.unwrap_err();
    let text = error.to_string();
    assert!(text.starts_with("container registry answered HTTP 401 for "), "{text}");
    assert!(
        text.contains("UNAUTHORIZED: the access token <redacted> is invalid"),
        "{text}"
    );
    assert!(!text.contains("forged-entra"), "{text}");
}

#[tokio::test]
async fn registries_that_do_not_challenge_as_acr_does_are_refused() {
    for (edit, problem) in [
        (
            json!({"challenge_status": 200}),
            "HTTP 200 to a request without credentials",
        ),
        (
            json!({"www_authenticate": "Basic realm=\"registry\""}),
            "no Bearer challenge",
        ),
        (json!({"www_authenticate": "Bearer service=\"x\""}), "has no realm"),
        (
            json!({"www_authenticate": "Bearer realm=\"http://127.0.0.1:1/oauth2/token\""}),
            "has no service",
        ),
        (
            json!({"www_authenticate": "Bearer realm=\"not a url\",service=\"x\""}),
            "realm is not a URL",
        ),
    ] {
        let fake = Fake::with(|s| {
            for (key, value) in edit.as_object().unwrap() {
                s["acr"][key] = value.clone();
            }
        });
        let error = acr().challenge(&fake.host(), soon()).await.unwrap_err();
        assert!(
            matches!(error.call_kind(), Some(CallErrorKind::Garbage { .. })),
            "{error}"
        );
        assert!(error.to_string().contains(problem), "{problem}: {error}");
    }
}

#[tokio::test]
async fn the_entra_token_goes_only_to_the_registrys_own_host() {
    let fake = Fake::with(|s| s["acr"]["realm_host"] = json!("127.0.0.2:9"));
    let tokens = fake.managed_identity(None, ACR_AUDIENCE);
    let error = acr()
        .refresh_token(&fake.host(), TENANT, &tokens, soon())
        .await
        .unwrap_err();
    assert!(matches!(error, AzureError::InvalidName { .. }), "{error}");
    assert!(error.to_string().contains("not on the registry's own host"), "{error}");
    assert_eq!(fake.requests("POST /oauth2/exchange"), 0);
}

#[tokio::test]
async fn registry_names_and_plain_http_are_checked_before_any_request() {
    let fake = Fake::start();
    for bad in [
        "https://demo.azurecr.io",
        "demo.azurecr.io/v2",
        "user@demo.azurecr.io",
        "",
    ] {
        let error = acr().challenge(bad, soon()).await.unwrap_err();
        assert!(matches!(error, AzureError::InvalidName { .. }), "{bad:?}: {error}");
    }
    // Plain http is for loopback only: a real registry name is refused
    // before anything is sent (no DNS, no connection).
    let error = acr().challenge("demo.azurecr.io", soon()).await.unwrap_err();
    assert!(matches!(error, AzureError::Endpoint(_)), "{error}");
    assert!(error.to_string().contains("use an https:// URL"), "{error}");
    assert_eq!(fake.all_requests(), 0);
}
