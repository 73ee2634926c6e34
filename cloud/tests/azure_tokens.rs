//! Entra ID tokens against the fake: IMDS managed identity (system- and
//! user-assigned, answers with strings or numbers, the header IMDS requires,
//! MSAL's retries), client secret and federated client assertion; tokens
//! cached, refreshed before they expire and fetched once for concurrent
//! callers; Entra's refusals typed, never with the secret in them.

#[path = "azure_fake.rs"]
mod fake;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use cloud_access::api::CallFailure;
use cloud_access::azure::{
    ACR_AUDIENCE, Assertion, AzureConfig, AzureError, CachedTokenSource, ClientAssertionCredential,
    UserAssignedIdentity, credential_from_config,
};
use fake::{ARM_AUDIENCE, ENTRA_TOKEN, Fake, FakeExt, IMDS_TOKEN};
use secrecy::{ExposeSecret, SecretString};
use serde_json::json;

#[tokio::test]
async fn managed_identity_system_and_user_assigned() {
    let fake = Fake::start();
    let system = fake.managed_identity(None, ACR_AUDIENCE).fetch().await.unwrap();
    assert_eq!(system.secret().expose_secret(), "imds-token-1");
    let remaining = system.remaining().as_secs();
    assert!((86_390..=86_399).contains(&remaining), "{remaining}");
    assert!(!format!("{system:?}").contains("imds-token"));
    for identity in [
        UserAssignedIdentity::ClientId(fake::KUBELET_CLIENT.into()),
        UserAssignedIdentity::ResourceId(fake::KUBELET_RESOURCE_ID.into()),
    ] {
        fake.managed_identity(Some(&identity), ARM_AUDIENCE)
            .fetch()
            .await
            .unwrap();
    }
    assert_eq!(fake.requests(IMDS_TOKEN), 3);
}

#[tokio::test]
async fn managed_identity_answers_as_strings_numbers_or_one_field() {
    for (numbers, fields) in [
        (true, "both"),
        (false, "expires_in"),
        (true, "expires_on"),
        (false, "expires_on"),
    ] {
        let fake = Fake::with(|s| {
            s["imds"]["identity"]["numbers"] = json!(numbers);
            s["imds"]["identity"]["fields"] = json!(fields);
            s["imds"]["identity"]["expires_in"] = json!(600);
        });
        let token = fake.managed_identity(None, ARM_AUDIENCE).fetch().await.unwrap();
        let remaining = token.remaining().as_secs();
        assert!((590..=600).contains(&remaining), "{numbers} {fields}: {remaining}");
        let expires = token.expires_at().duration_since(SystemTime::now()).unwrap().as_secs();
        assert!((590..=600).contains(&expires), "{numbers} {fields}: {expires}");
    }
}

#[tokio::test]
async fn imds_requires_the_metadata_header_so_the_client_sends_it() {
    let fake = Fake::start();
    let url = format!(
        "{}metadata/identity/oauth2/token?api-version=2018-02-01&resource=https://management.core.windows.net",
        fake.base()
    );
    let plain = reqwest::Client::builder().no_proxy().build().unwrap();
    let refused = plain.get(&url).send().await.unwrap();
    assert_eq!(refused.status(), 400);
    assert!(
        refused
            .text()
            .await
            .unwrap()
            .contains("Required metadata header not specified")
    );
    let forwarded = plain
        .get(&url)
        .header("Metadata", "true")
        .header("X-Forwarded-For", "10.0.0.9")
        .send()
        .await
        .unwrap();
    assert_eq!(forwarded.status(), 400);
    fake.managed_identity(None, ARM_AUDIENCE).fetch().await.unwrap();
}

#[tokio::test]
async fn imds_takes_only_published_api_versions_and_the_client_sends_one() {
    let fake = Fake::start();
    let plain = reqwest::Client::builder().no_proxy().build().unwrap();
    let token = |version: &str| {
        plain
            .get(format!(
                "{}metadata/identity/oauth2/token?api-version={version}&resource=https://management.core.windows.net",
                fake.base()
            ))
            .header("Metadata", "true")
            .send()
    };
    // 2017-12-01 is an IMDS version, but older than the identity endpoint.
    for version in ["2018-02-02", "2017-12-01", "latest"] {
        let refused = token(version).await.unwrap();
        assert_eq!(refused.status(), 400, "{version}");
        let body: serde_json::Value = refused.json().await.unwrap();
        assert_eq!(body["error"], "invalid_request", "{version}: {body}");
    }
    assert_eq!(token("2019-08-01").await.unwrap().status(), 200);
    let instance = |version: &str| {
        plain
            .get(format!(
                "{}metadata/instance?api-version={version}&format=json",
                fake.base()
            ))
            .header("Metadata", "true")
            .send()
    };
    let refused = instance("2021-10-02").await.unwrap();
    assert_eq!(refused.status(), 400);
    let body: serde_json::Value = refused.json().await.unwrap();
    assert!(body["newest-versions"].is_array(), "{body}");
    assert_eq!(instance("2021-10-01").await.unwrap().status(), 200);

    // What the client sent: MSAL's 2018-02-01.
    let fake = Fake::start();
    fake.managed_identity(None, ARM_AUDIENCE).fetch().await.unwrap();
    assert_eq!(
        fake.requests("api-version=2018-02-01 GET /metadata/identity/oauth2/token"),
        1
    );
}

#[tokio::test]
async fn an_unknown_identity_is_imds_own_error() {
    let fake = Fake::start();
    let stranger = UserAssignedIdentity::ClientId("99999999-0000-4000-8000-000000000009".into());
    let error = fake
        .managed_identity(Some(&stranger), ARM_AUDIENCE)
        .fetch()
        .await
        .unwrap_err();
    assert_eq!(error.status(), Some(400));
    let text = error.to_string();
    assert!(text.starts_with("IMDS answered HTTP 400 for "), "{text}");
    assert!(text.ends_with("invalid_request: Identity not found"), "{text}");
    // The URL is shown without its query.
    assert!(text.contains("metadata/identity/oauth2/token:"), "{text}");
    // Not retried: a 400 is an answer.
    assert_eq!(fake.requests(IMDS_TOKEN), 1);
}

#[tokio::test]
async fn a_busy_imds_is_tried_again_as_msal_does() {
    let fake = Fake::with(|s| s["imds"]["identity"]["fail_first"] = json!(2));
    let token = fake.managed_identity(None, ARM_AUDIENCE).fetch().await.unwrap();
    assert_eq!(token.secret().expose_secret(), "imds-token-1");
    assert_eq!(fake.requests(IMDS_TOKEN), 3);
    let fake = Fake::with(|s| s["imds"]["identity"]["fail_first"] = json!(5));
    let error = fake.managed_identity(None, ARM_AUDIENCE).fetch().await.unwrap_err();
    assert_eq!(error.status(), Some(500), "{error}");
    assert_eq!(fake.requests(IMDS_TOKEN), 3, "three tries, then the error");
}

#[tokio::test]
async fn tokens_are_kept_then_refreshed_before_they_expire() {
    // Tokens that live 4 s: kept for half their life, then fetched anew.
    let fake = Fake::with(|s| s["imds"]["identity"]["expires_in"] = json!(4));
    let tokens = CachedTokenSource::new(fake.managed_identity(None, ARM_AUDIENCE));
    assert_eq!(tokens.get().await.unwrap().secret().expose_secret(), "imds-token-1");
    assert_eq!(tokens.get().await.unwrap().secret().expose_secret(), "imds-token-1");
    assert_eq!(fake.requests(IMDS_TOKEN), 1);
    tokio::time::sleep(Duration::from_millis(2100)).await;
    assert_eq!(tokens.get().await.unwrap().secret().expose_secret(), "imds-token-2");
    assert_eq!(fake.requests(IMDS_TOKEN), 2);

    let fake = Fake::with(|s| s["entra"]["expires_in"] = json!(4));
    let tokens = CachedTokenSource::new(fake.client_secret(fake::SP_SECRET, ARM_AUDIENCE));
    assert_eq!(tokens.get().await.unwrap().secret().expose_secret(), "secret-token-1");
    assert_eq!(tokens.get().await.unwrap().secret().expose_secret(), "secret-token-1");
    tokio::time::sleep(Duration::from_millis(2100)).await;
    assert_eq!(tokens.get().await.unwrap().secret().expose_secret(), "secret-token-2");
    assert_eq!(fake.requests(ENTRA_TOKEN), 2);
}

#[tokio::test]
async fn concurrent_callers_share_one_fetch() {
    for source in ["imds", "entra"] {
        let fake = Fake::with(|s| s[source]["delay_seconds"] = json!(0.3));
        let tokens: Arc<CachedTokenSource<Box<dyn cloud_access::azure::TokenSource<AzureError>>>> = match source {
            "imds" => Arc::new(CachedTokenSource::new(Box::new(
                fake.managed_identity(None, ARM_AUDIENCE),
            ))),
            _ => Arc::new(CachedTokenSource::new(Box::new(
                fake.client_secret(fake::SP_SECRET, ARM_AUDIENCE),
            ))),
        };
        let callers: Vec<_> = (0..16)
            .map(|_| {
                let tokens = tokens.clone();
                tokio::spawn(async move { tokens.get().await.unwrap() })
            })
            .collect();
        let mut seen = Vec::new();
        for caller in callers {
            seen.push(caller.await.unwrap().secret().expose_secret().to_owned());
        }
        seen.dedup();
        assert_eq!(seen.len(), 1, "{source}: {seen:?}");
        assert_eq!(fake.all_requests(), 1, "{source}");
    }
}

#[tokio::test]
async fn client_secret_tokens_and_refusals_without_the_secret() {
    let fake = Fake::with(|s| s["entra"]["echo_credentials"] = json!(true));
    let token = fake.client_secret(fake::SP_SECRET, ARM_AUDIENCE).fetch().await.unwrap();
    assert_eq!(token.secret().expose_secret(), "secret-token-1");
    assert!(token.remaining() > Duration::from_secs(3590));
    let wrong = "Qx8Q~a-wrong.secret-value-9999";
    let error = fake.client_secret(wrong, ARM_AUDIENCE).fetch().await.unwrap_err();
    assert_eq!(error.status(), Some(401));
    let detail = error.detail().unwrap();
    assert_eq!(detail.code.as_deref(), Some("invalid_client"));
    let text = error.to_string();
    assert!(
        text.contains("invalid_client: AADSTS7000215: Invalid client secret provided '<redacted>'. "),
        "{text}"
    );
    assert!(!text.contains("a-wrong.secret"), "{text}");
    assert!(!format!("{error:?}").contains("a-wrong.secret"));
}

#[tokio::test]
async fn unknown_tenants_and_clients_are_entras_errors() {
    let fake = Fake::start();
    let stranger = cloud_access::azure::ClientSecretCredential::new(
        fake::http(),
        &fake.cloud().authority_host,
        "22222222-0000-4000-8000-000000000000",
        fake::SP_CLIENT,
        SecretString::from(fake::SP_SECRET),
        ARM_AUDIENCE,
    )
    .unwrap();
    let error = stranger.fetch().await.unwrap_err().to_string();
    assert!(error.contains("HTTP 400"), "{error}");
    assert!(
        error.contains("invalid_request: AADSTS90002: Tenant '22222222-"),
        "{error}"
    );
    assert!(!error.contains("Qx8Q"), "{error}");
    let error = ClientAssertionCredential::new(
        fake::http(),
        &fake.cloud().authority_host,
        fake::TENANT,
        "not-an-app",
        Assertion::Token(SecretString::from(fake::federated_token(true))),
        ACR_AUDIENCE,
    )
    .unwrap()
    .fetch()
    .await
    .unwrap_err()
    .to_string();
    assert!(error.contains("unauthorized_client: AADSTS700016"), "{error}");
}

fn assertion(fake: &Fake, assertion: Assertion) -> ClientAssertionCredential {
    ClientAssertionCredential::new(
        fake::http(),
        &fake.cloud().authority_host,
        fake::TENANT,
        fake::WI_CLIENT,
        assertion,
        ACR_AUDIENCE,
    )
    .unwrap()
}

#[tokio::test]
async fn client_assertions_from_a_token_or_a_file() {
    let fake = Fake::with(|s| s["entra"]["echo_credentials"] = json!(true));
    let given = Assertion::Token(SecretString::from(fake::federated_token(true)));
    let token = assertion(&fake, given).fetch().await.unwrap();
    assert_eq!(token.secret().expose_secret(), "assertion-token-1");
    // The file is read on every fetch: a rotated token is used at once.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("azure-identity-token");
    std::fs::write(&file, format!("{}\n", fake::federated_token(true))).unwrap();
    let from_file = assertion(&fake, Assertion::File(file.clone()));
    assert_eq!(
        from_file.fetch().await.unwrap().secret().expose_secret(),
        "assertion-token-2"
    );
    let refused = fake::federated_token(false);
    std::fs::write(&file, &refused).unwrap();
    let error = from_file.fetch().await.unwrap_err();
    let text = error.to_string();
    assert!(
        text.contains("invalid_client: AADSTS700211: No matching federated identity record"),
        "{text}"
    );
    assert!(text.contains("<redacted>"), "{text}");
    assert!(!text.contains(&refused[20..40]), "{text}");
    std::fs::remove_file(&file).unwrap();
    let error = from_file.fetch().await.unwrap_err();
    assert!(matches!(error, AzureError::AssertionFile(_)), "{error}");
    assert!(error.to_string().contains("azure-identity-token"), "{error}");
    assert_eq!(fake.requests(ENTRA_TOKEN), 3);
}

#[tokio::test]
async fn the_config_names_the_credential() {
    let fake = Fake::start();
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, fake::federated_token(true)).unwrap();
    for (name, want) in [
        ("managed-identity.json", "imds-token-1"),
        ("managed-identity-user.json", "imds-token-2"),
        ("managed-identity-resource-id.json", "imds-token-3"),
        ("service-principal.json", "secret-token-1"),
        ("workload-identity.json", "assertion-token-1"),
    ] {
        let mut config = AzureConfig::read(&fake::data(name)).unwrap();
        config.aad_federated_token_file = token_file.display().to_string();
        let source = credential_from_config(&config, &fake::http(), &fake.cloud(), &fake.imds(), ARM_AUDIENCE).unwrap();
        assert_eq!(source.token().await.unwrap().secret().expose_secret(), want, "{name}");
    }
    let none = AzureConfig::parse(std::path::Path::new("empty.json"), "{}").unwrap();
    let error = credential_from_config(&none, &fake::http(), &fake.cloud(), &fake.imds(), ARM_AUDIENCE)
        .err()
        .unwrap();
    assert!(matches!(error, AzureError::NoCredentials), "{error}");
}
