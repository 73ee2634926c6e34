//! Workload identity against the fake: a service-account JWT exchanged at
//! STS for a federated token, that token used to impersonate a Google
//! service account through IAM Credentials, and the result used with
//! Compute. Refusals carry Google's reason and never the tokens.

#[path = "gcp_fake.rs"]
mod fake;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use cloud_access::api::{CallErrorKind, CallFailure};
use cloud_access::gcp::{
    CLOUD_PLATFORM_SCOPE, ComputeClient, GcpError, IamCredentialsClient, StsClient, workload_identity_audience,
};
use cloud_access::logging::SECRET_FRAGMENT;
use fake::{Fake, FakeExt};
use secrecy::{ExposeSecret, SecretString};
use test_fakes::gcp_subject_token as subject_token;

const PROVIDER: &str = "https://container.googleapis.com/v1/projects/demo-project/locations/us-central1/clusters/demo";
const ACCOUNT: &str = "builder@demo-project.iam.gserviceaccount.com";

fn soon() -> Instant {
    Instant::now() + Duration::from_secs(5)
}

fn sts(fake: &Fake) -> StsClient {
    StsClient::new(fake::http(), &fake.endpoint("")).unwrap()
}

fn iam(fake: &Fake) -> IamCredentialsClient {
    IamCredentialsClient::new(fake::http(), &fake.endpoint(""))
}

fn audience() -> String {
    workload_identity_audience("demo-project", PROVIDER)
}

/// No run of [`SECRET_FRAGMENT`] characters of `secret` appears in `text`.
fn assert_no_piece_of(secret: &str, text: &str) {
    for start in 0..=secret.len().saturating_sub(SECRET_FRAGMENT) {
        let piece = &secret[start..start + SECRET_FRAGMENT];
        assert!(!text.contains(piece), "{piece:?} of the secret is in: {text}");
    }
}

async fn federated(fake: &Fake) -> SecretString {
    let subject = SecretString::from(subject_token(true));
    let token = sts(fake)
        .exchange_token(&audience(), &subject, CLOUD_PLATFORM_SCOPE, soon())
        .await
        .unwrap();
    token.secret().clone()
}

#[tokio::test]
async fn a_service_account_token_is_exchanged_for_a_federated_token() {
    let fake = Fake::start();
    let client = sts(&fake);
    assert_eq!(client.url().as_str(), format!("{}v1/token", fake.base()));
    let subject = SecretString::from(subject_token(true));
    let token = client
        .exchange_token(&audience(), &subject, CLOUD_PLATFORM_SCOPE, soon())
        .await
        .unwrap();
    assert_eq!(token.secret().expose_secret(), "ya29.federated-1");
    assert!(token.remaining() > Duration::from_secs(3590), "{token:?}");
}

#[tokio::test]
async fn a_refused_exchange_names_stss_error_but_never_the_subject_token() {
    // The fake quotes the refused token in its description.
    let fake = Fake::start();
    let refused = subject_token(false);
    let error = sts(&fake)
        .exchange_token(
            &audience(),
            &SecretString::from(refused.clone()),
            CLOUD_PLATFORM_SCOPE,
            soon(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(error.call_kind(), Some(CallErrorKind::Api { status: 400, .. })),
        "{error}"
    );
    assert_eq!(error.detail().unwrap().reason.as_deref(), Some("invalid_grant"));
    let text = error.to_string();
    assert!(
        text.starts_with(&format!(
            "sts answered HTTP 400 for {}v1/token: invalid_grant: ",
            fake.base()
        )),
        "{text}"
    );
    assert!(text.contains("<redacted>"), "{text}");
    assert_no_piece_of(&refused, &text);
    assert_no_piece_of(&refused, &format!("{error:?}"));
}

#[tokio::test]
async fn an_unknown_audience_is_invalid_target() {
    let fake = Fake::start();
    let error = sts(&fake)
        .exchange_token(
            &workload_identity_audience("other-project", PROVIDER),
            &SecretString::from(subject_token(true)),
            CLOUD_PLATFORM_SCOPE,
            soon(),
        )
        .await
        .unwrap_err();
    assert_eq!(error.detail().unwrap().reason.as_deref(), Some("invalid_target"));
    assert!(error.to_string().contains("pool or provider"), "{error}");
}

#[tokio::test]
async fn a_federated_token_impersonates_a_google_service_account() {
    let fake = Fake::start();
    let federated = federated(&fake).await;
    let token = iam(&fake)
        .generate_access_token(
            ACCOUNT,
            &[CLOUD_PLATFORM_SCOPE],
            Duration::from_secs(1800),
            &federated,
            soon(),
        )
        .await
        .unwrap();
    assert_eq!(token.secret().expose_secret(), "ya29.impersonated-1");
    let left = token.expires_at().duration_since(SystemTime::now()).unwrap();
    assert!(
        left > Duration::from_secs(1790) && left <= Duration::from_secs(1800),
        "{left:?}"
    );
    assert!(token.remaining() > Duration::from_secs(1790));
    // The impersonated token reads disks.
    let compute = ComputeClient::new(fake::http(), &fake.endpoint("compute/v1"), Arc::new(token));
    let disk = compute
        .disk("demo-project", "us-central1-a", "pd-zonal", soon())
        .await
        .unwrap();
    assert_eq!(disk.zone.as_deref(), Some("us-central1-a"));
}

#[tokio::test]
async fn impersonation_refused_names_iams_reason_but_never_the_federated_token() {
    let fake = Fake::start();
    let federated = federated(&fake).await;
    let error = iam(&fake)
        .generate_access_token(
            "intruder@demo-project.iam.gserviceaccount.com",
            &[CLOUD_PLATFORM_SCOPE],
            Duration::from_secs(3600),
            &federated,
            soon(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(error.call_kind(), Some(CallErrorKind::Api { status: 403, .. })),
        "{error}"
    );
    let detail = error.detail().unwrap();
    assert_eq!(detail.reason.as_deref(), Some("IAM_PERMISSION_DENIED"));
    assert_eq!(detail.status.as_deref(), Some("PERMISSION_DENIED"));
    let text = error.to_string();
    let url = format!(
        "{}v1/projects/-/serviceAccounts/intruder@demo-project.iam.gserviceaccount.com:generateAccessToken",
        fake.base()
    );
    assert!(text.contains(&url), "{text}");
    assert!(!text.contains(federated.expose_secret()), "{text}");
}

#[tokio::test]
async fn impersonation_needs_a_token_google_issued() {
    let fake = Fake::start();
    let error = iam(&fake)
        .generate_access_token(
            ACCOUNT,
            &[CLOUD_PLATFORM_SCOPE],
            Duration::from_secs(3600),
            &SecretString::from("ya29.not-from-sts"),
            soon(),
        )
        .await
        .unwrap_err();
    assert_eq!(error.status(), Some(401));
    // Nor is a lifetime IAM does not grant, or no scope at all, accepted.
    let federated = federated(&fake).await;
    for (scopes, lifetime) in [(&[CLOUD_PLATFORM_SCOPE][..], 7200), (&[][..], 3600)] {
        let error = iam(&fake)
            .generate_access_token(ACCOUNT, scopes, Duration::from_secs(lifetime), &federated, soon())
            .await
            .unwrap_err();
        assert_eq!(
            error.detail().unwrap().status.as_deref(),
            Some("INVALID_ARGUMENT"),
            "{error}"
        );
    }
}

#[tokio::test]
async fn an_account_that_is_not_a_name_is_refused_unsent() {
    let fake = Fake::start();
    let error = iam(&fake)
        .generate_access_token(
            "a/../../token",
            &[CLOUD_PLATFORM_SCOPE],
            Duration::from_secs(3600),
            &SecretString::from("ya29.x"),
            soon(),
        )
        .await
        .unwrap_err();
    assert!(matches!(error, GcpError::InvalidName { .. }), "{error}");
    assert_eq!(fake.all_requests(), 0);
}

const USERINFO_EMAIL_SCOPE: &str = "https://www.googleapis.com/auth/userinfo.email";

/// A federated token carrying `scope`.
async fn federated_with(fake: &Fake, scope: &str) -> SecretString {
    let subject = SecretString::from(subject_token(true));
    let token = sts(fake)
        .exchange_token(&audience(), &subject, scope, soon())
        .await
        .unwrap();
    token.secret().clone()
}

/// The status of the registry's token endpoint for a pull with `_token` and `token`.
async fn pull_status(fake: &Fake, token: &SecretString) -> u16 {
    fake::http()
        .get(format!(
            "{}v2/token?scope=repository:demo-project/apps/web:pull&service=us-docker.pkg.dev",
            fake.base()
        ))
        .basic_auth("_token", Some(token.expose_secret()))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test]
async fn sts_refuses_a_scope_google_does_not_know() {
    let fake = Fake::start();
    let error = sts(&fake)
        .exchange_token(
            &audience(),
            &SecretString::from(subject_token(true)),
            "https://www.googleapis.com/auth/no-such-scope",
            soon(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(error.call_kind(), Some(CallErrorKind::Api { status: 400, .. })),
        "{error}"
    );
    assert_eq!(error.detail().unwrap().reason.as_deref(), Some("invalid_scope"));
}

#[tokio::test]
async fn iam_refuses_a_caller_token_without_cloud_platform() {
    // STS issues a token for any scope it knows; IAM Credentials then needs
    // cloud-platform (or iam) on the caller's token, as Google does.
    let fake = Fake::start();
    let federated = federated_with(&fake, USERINFO_EMAIL_SCOPE).await;
    let error = iam(&fake)
        .generate_access_token(
            ACCOUNT,
            &[CLOUD_PLATFORM_SCOPE],
            Duration::from_secs(3600),
            &federated,
            soon(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(error.call_kind(), Some(CallErrorKind::Api { status: 403, .. })),
        "{error}"
    );
    let detail = error.detail().unwrap();
    assert_eq!(detail.reason.as_deref(), Some("ACCESS_TOKEN_SCOPE_INSUFFICIENT"));
    assert_eq!(detail.status.as_deref(), Some("PERMISSION_DENIED"));
    // Nor does IAM take a scope Google does not know.
    let error = iam(&fake)
        .generate_access_token(
            ACCOUNT,
            &["https://www.googleapis.com/auth/no-such-scope"],
            Duration::from_secs(3600),
            &federated_with(&fake, CLOUD_PLATFORM_SCOPE).await,
            soon(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        error.detail().unwrap().status.as_deref(),
        Some("INVALID_ARGUMENT"),
        "{error}"
    );
}

#[tokio::test]
async fn only_a_token_with_a_pull_scope_pulls() {
    let fake = Fake::start();
    let good = federated_with(&fake, CLOUD_PLATFORM_SCOPE).await;
    assert_eq!(pull_status(&fake, &good).await, 200);
    let impersonated = iam(&fake)
        .generate_access_token(
            ACCOUNT,
            &[USERINFO_EMAIL_SCOPE],
            Duration::from_secs(600),
            &good,
            soon(),
        )
        .await
        .unwrap();
    assert_eq!(pull_status(&fake, impersonated.secret()).await, 403);
    assert_eq!(
        pull_status(&fake, &federated_with(&fake, USERINFO_EMAIL_SCOPE).await).await,
        403
    );
    assert_eq!(pull_status(&fake, &SecretString::from("ya29.never-issued")).await, 401);
}
