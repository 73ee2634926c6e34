//! Google answers with credentials, chosen by the first byte: the metadata
//! server's token (`gcp::metadata::parse_token`), STS's exchange
//! (`gcp::sts::parse_exchange_answer`), IAM Credentials'
//! `generateAccessToken` (`gcp::iam::parse_access_token_answer`), and the
//! Docker config of the `google-dockercfg` attribute or URL
//! (`backend::gcp::parse_dockercfg`).
//!
//! Properties: a token read is the input's `access_token`/`accessToken`, not
//! empty, and expires when the input said (`expires_in` from now, a number
//! or a string of one; `expireTime` as RFC 3339, which written back reads
//! the same); a refusal names the field that is wrong and does not depend
//! on the input's token (another in its place gives the same refusal); a
//! Docker config read has an entry, and its refusal quotes no credential of
//! the input.
#![no_main]

use std::time::{Duration, SystemTime};

use cloud_access::gcp::iam::parse_access_token_answer;
use cloud_access::gcp::metadata::parse_token;
use cloud_access::gcp::sts::parse_exchange_answer;
use cloud_access::gcp::token::AccessToken;
use credential_provider::backend::gcp::parse_dockercfg;
use fuzz::{refusal_ignores_token, token_like};
use libfuzzer_sys::fuzz_target;
use secrecy::ExposeSecret;
use serde_json::{Value, json};

/// `expires_in` as OAuth servers write it, read here independently: seconds
/// as a number or a string holding one, more than 0 and less than 1e9.
fn expires_in(value: &Value) -> Option<f64> {
    let seconds = match value {
        Value::Number(n) => n.as_f64()?,
        Value::String(s) => s.trim().parse().ok()?,
        _ => return None,
    };
    (seconds > 0.0 && seconds < 1e9).then_some(seconds)
}

/// A token read from `json[field]`, expiring `expires_in` seconds from `before`.
fn check_in(token: &AccessToken, json: &Value, field: &str, before: SystemTime) {
    assert_eq!(Some(token.secret().expose_secret()), json[field].as_str());
    assert!(!token.secret().expose_secret().is_empty());
    let seconds = expires_in(&json["expires_in"]).expect("a token read has a valid expires_in");
    let after = SystemTime::now();
    let lifetime = Duration::from_secs_f64(seconds);
    assert!(
        token.expires_at() >= before + lifetime && token.expires_at() <= after + lifetime,
        "{seconds} s from now is not {:?}",
        token.expires_at()
    );
}

/// A refusal names one of `fields`.
fn check_refusal(problem: &str, fields: &[&str]) {
    assert!(fields.iter().any(|f| problem.contains(f)), "{problem:?} names no field");
}

fn metadata(body: &str) {
    let before = SystemTime::now();
    let json = serde_json::from_str::<Value>(body).ok();
    match parse_token(body) {
        Ok(token) => check_in(&token, json.as_ref().expect("JSON"), "access_token", before),
        Err(problem) => {
            check_refusal(&problem, &["JSON", "access_token", "token_type", "expires_in"]);
            if let Some(json) = &json {
                refusal_ignores_token(json, "access_token", |v| parse_token(&v.to_string()));
            }
        }
    }
}

fn sts(json: &Value) {
    let before = SystemTime::now();
    match parse_exchange_answer(json) {
        Ok(token) => check_in(&token, json, "access_token", before),
        Err(problem) => {
            check_refusal(problem, &["access_token", "token_type", "expires_in"]);
            refusal_ignores_token(json, "access_token", parse_exchange_answer);
        }
    }
}

fn iam(json: &Value) {
    match parse_access_token_answer(json) {
        Ok(token) => {
            assert_eq!(Some(token.secret().expose_secret()), json["accessToken"].as_str());
            let written = json["expireTime"].as_str().expect("an expiry was read");
            assert_eq!(Ok(token.expires_at()), humantime::parse_rfc3339(written.trim()));
            let again = json!({"accessToken": json["accessToken"],
                "expireTime": humantime::format_rfc3339_nanos(token.expires_at()).to_string()});
            let reread = parse_access_token_answer(&again).expect("written back, read");
            assert_eq!(reread.expires_at(), token.expires_at());
        }
        Err(problem) => {
            check_refusal(problem, &["accessToken", "expireTime"]);
            refusal_ignores_token(json, "accessToken", parse_access_token_answer);
        }
    }
}

/// Every string the input holds under a credential's name, and every key.
fn credentials_and_keys(value: &Value, secrets: &mut Vec<String>, keys: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                keys.push(key.clone());
                match inner {
                    Value::String(s)
                        if ["auth", "password", "identitytoken", "registrytoken"].contains(&key.as_str()) =>
                    {
                        secrets.push(s.clone())
                    }
                    _ => credentials_and_keys(inner, secrets, keys),
                }
            }
        }
        Value::Array(list) => list.iter().for_each(|v| credentials_and_keys(v, secrets, keys)),
        _ => {}
    }
}

fn dockercfg(body: &[u8]) {
    match parse_dockercfg(body, "the fuzzed config") {
        Ok(auth) => assert!(!auth.is_empty(), "a config read with no entry"),
        Err(error) => {
            let shown = error.to_string();
            assert!(shown.starts_with("the fuzzed config"), "{shown:?}");
            let Ok(json) = serde_json::from_slice::<Value>(body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(body)) else {
                return;
            };
            let (mut secrets, mut keys) = (Vec::new(), Vec::new());
            credentials_and_keys(&json, &mut secrets, &mut keys);
            for secret in secrets.iter().filter_map(|s| token_like(s)) {
                // A key is quoted as the field's path: a secret that is also a key may show.
                if !keys.iter().any(|k| k.contains(secret)) {
                    assert!(!shown.contains(secret), "{shown:?} quotes a credential");
                }
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    match which % 4 {
        0 => {
            if let Ok(body) = std::str::from_utf8(rest) {
                metadata(body);
            }
        }
        1 | 2 => {
            if let Ok(json) = serde_json::from_slice::<Value>(rest) {
                if which % 4 == 1 { sts(&json) } else { iam(&json) }
            }
        }
        _ => dockercfg(rest),
    }
});
