//! AWS answers with credentials, chosen by the first byte: STS
//! `AssumeRoleWithWebIdentity` XML (`aws::sts::parse_credentials`), the
//! credentials document of IMDS and the container credentials endpoints
//! (`aws::credentials::CredentialsDocument`), and ECR's
//! `GetAuthorizationToken` answer (`aws::ecr::parse_authorization_answer`).
//!
//! Properties: credentials read have a non-empty key and secret, and their
//! expiry is the one the input wrote (`parse_timestamp` of its text, or the
//! Unix time of ECR's `expiresAt`); writing what was read back in the same
//! format and reading it again gives the same credentials; an ECR login is
//! the base64 `user:password` of the input; `Debug` never shows a secret.
#![no_main]

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use cloud_access::aws::credentials::{AwsCredentials, CredentialsDocument, parse_timestamp};
use cloud_access::aws::ecr::{AuthorizationToken, parse_authorization_answer};
use cloud_access::aws::sts::parse_credentials;
use libfuzzer_sys::fuzz_target;
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};

/// What can be compared of credentials: key, secret, session token, expiry.
fn fields(c: &AwsCredentials) -> (String, String, Option<String>, Option<SystemTime>) {
    (
        c.access_key_id.clone(),
        c.secret_access_key.expose_secret().to_owned(),
        c.session_token.as_ref().map(|t| t.expose_secret().to_owned()),
        c.expires_at,
    )
}

fn check_credentials(c: &AwsCredentials) {
    assert!(!c.access_key_id.is_empty(), "an empty key: {c:?}");
    // Debug does not depend on the secrets: the same with others in their place.
    let other = AwsCredentials {
        secret_access_key: SecretString::from("other"),
        session_token: c.session_token.as_ref().map(|_| SecretString::from("other")),
        ..c.clone()
    };
    assert_eq!(format!("{c:?}"), format!("{other:?}"), "Debug shows a secret");
}

fn time_text(at: SystemTime) -> String {
    humantime::format_rfc3339_nanos(at).to_string()
}

fn xml_text(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('\r', "&#13;")
}

fn sts(xml: &str) {
    let Some(credentials) = parse_credentials(xml) else {
        return;
    };
    check_credentials(&credentials);
    assert!(!credentials.secret_access_key.expose_secret().is_empty());
    // The Expiration the input wrote, read independently of the parser.
    let document = roxmltree::Document::parse(xml).expect("it parsed once");
    let written = document
        .descendants()
        .find(|n| n.has_tag_name("Credentials"))
        .and_then(|c| c.children().find(|n| n.has_tag_name("Expiration")))
        .and_then(|n| n.text());
    assert_eq!(credentials.expires_at, written.and_then(parse_timestamp), "{written:?}");
    let (key, secret, session, expires) = fields(&credentials);
    let element = |name: &str, text: Option<String>| {
        text.map(|t| format!("<{name}>{}</{name}>", xml_text(&t)))
            .unwrap_or_default()
    };
    let again = format!(
        "<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><AssumeRoleWithWebIdentityResult><Credentials>{}{}{}{}</Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>",
        element("AccessKeyId", Some(key)),
        element("SecretAccessKey", Some(secret)),
        element("SessionToken", session),
        element("Expiration", expires.map(time_text)),
    );
    let reread = parse_credentials(&again).unwrap_or_else(|| panic!("written back, not read: {again}"));
    assert_eq!(fields(&reread), fields(&credentials), "{again}");
}

fn document(body: &[u8]) {
    let Some(document) = CredentialsDocument::parse(body) else {
        return;
    };
    let credentials = document.into_credentials("fuzz");
    check_credentials(&credentials);
    // serde skips the fields it does not read without checking their UTF-8
    // (as W2 of the webhook): such a document is read but is no JSON `Value`.
    let Ok(input) = serde_json::from_slice::<Value>(body) else {
        return;
    };
    assert_eq!(input["AccessKeyId"].as_str(), Some(credentials.access_key_id.as_str()));
    assert_eq!(
        input["SecretAccessKey"].as_str(),
        Some(credentials.secret_access_key.expose_secret())
    );
    assert_eq!(
        credentials.expires_at,
        input["Expiration"].as_str().and_then(parse_timestamp)
    );
    let (key, secret, session, expires) = fields(&credentials);
    let again = json!({"Code": "Success", "Type": "AWS-HMAC", "AccessKeyId": key, "SecretAccessKey": secret,
        "Token": session, "Expiration": expires.map(time_text)});
    let again = serde_json::to_vec(&again).expect("JSON");
    let reread = CredentialsDocument::parse(&again)
        .expect("written back, read")
        .into_credentials("fuzz");
    assert_eq!(fields(&reread), fields(&credentials));
}

fn login(token: &AuthorizationToken) -> (String, String, Option<SystemTime>) {
    (
        token.username.clone(),
        token.password.expose_secret().to_owned(),
        token.expires_at,
    )
}

fn ecr(body: &[u8]) {
    let Ok(answer) = serde_json::from_slice::<Value>(body) else {
        return;
    };
    let Ok(token) = parse_authorization_answer(&answer) else {
        return;
    };
    let data = match &answer["authorizationData"] {
        Value::Array(list) => &list[0],
        object => object,
    };
    let decoded = STANDARD
        .decode(data["authorizationToken"].as_str().expect("a token was read"))
        .expect("base64");
    let (username, password, expires_at) = login(&token);
    assert_eq!(decoded, format!("{username}:{password}").into_bytes());
    let expected = data["expiresAt"]
        .as_f64()
        .and_then(cloud_access::go_duration::unix_time);
    assert_eq!(expires_at, expected, "{}", data["expiresAt"]);
    // Debug does not depend on the password.
    let other = AuthorizationToken {
        username: username.clone(),
        password: SecretString::from("other"),
        expires_at,
    };
    assert_eq!(format!("{token:?}"), format!("{other:?}"), "Debug shows the password");
    // Written back as ECR Public does (one object) and as private ECR does (a list).
    let seconds = expires_at.map(|at| match at.duration_since(UNIX_EPOCH) {
        Ok(after) => after.as_secs_f64(),
        Err(before) => -before.duration().as_secs_f64(),
    });
    let entry = json!({"authorizationToken": STANDARD.encode(format!("{username}:{password}")), "expiresAt": seconds});
    for again in [
        json!({"authorizationData": entry}),
        json!({"authorizationData": [entry]}),
    ] {
        let reread = parse_authorization_answer(&again).expect("written back, read");
        let (u, p, at) = login(&reread);
        assert_eq!((&u, &p), (&username, &password));
        // f64 seconds carry the expiry to within a microsecond.
        let drift = match (at, expires_at) {
            (Some(a), Some(b)) => a
                .duration_since(b)
                .or_else(|e| Ok::<_, ()>(e.duration()))
                .expect("a duration"),
            (None, None) => std::time::Duration::ZERO,
            other => panic!("the expiry changed: {other:?}"),
        };
        assert!(
            drift.as_secs_f64() <= 1e-6 * seconds.unwrap_or(0.0).abs().max(1.0),
            "{drift:?}"
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    match which % 3 {
        0 => {
            if let Ok(xml) = std::str::from_utf8(rest) {
                sts(xml);
            }
        }
        1 => document(rest),
        _ => ecr(rest),
    }
});
