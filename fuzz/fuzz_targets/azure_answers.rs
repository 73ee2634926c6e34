//! Azure answers with credentials, chosen by the first byte: the token
//! answer of IMDS and Entra ID (`azure::token::parse_token_answer`), a
//! `Www-Authenticate` value (`azure::acr::parse_www_authenticate`), a JWT's
//! `exp` (`azure::acr::jwt_expiry`), ACR's `/oauth2/exchange` answer
//! (`azure::acr::parse_exchange_answer`) and a registry's 401 challenge
//! (`azure::acr::parse_challenge`, header values one per line).
//!
//! Properties: a token read is the input's `access_token`, and expires at
//! the Unix time `expires_on` gives (a number or an integer string) or
//! `expires_in` from now; a refusal names the field that is wrong and does
//! not depend on the token (another in its place gives the same refusal); `Www-Authenticate` values and challenges written back
//! from what was read (parameters quoted and escaped) read the same; a JWT
//! made with an `exp` gives that time back; a refresh token's expiry is its
//! JWT's and its `Debug` does not depend on the token.
#![no_main]

use std::time::{Duration, SystemTime};

use base64::Engine as _;
use cloud_access::azure::acr::{
    AcrRefreshToken, jwt_expiry, parse_challenge, parse_exchange_answer, parse_www_authenticate,
};
use cloud_access::azure::token::parse_token_answer;
use cloud_access::go_duration::unix_time;
use fuzz::refusal_ignores_token;
use libfuzzer_sys::fuzz_target;
use secrecy::{ExposeSecret, SecretString};
use serde_json::Value;

fn token_answer(json: &Value) {
    let before = SystemTime::now();
    match parse_token_answer(json) {
        Ok(token) => {
            assert_eq!(Some(token.secret().expose_secret()), json["access_token"].as_str());
            assert!(!token.secret().expose_secret().is_empty());
            let on = json
                .get("expires_on")
                .filter(|v| !v.is_null() && v.as_str() != Some(""));
            match on {
                Some(Value::Number(n)) => {
                    let seconds = n.as_f64().expect("a number").trunc();
                    assert_eq!(Some(token.expires_at()), unix_time(seconds), "expires_on {n}");
                }
                Some(Value::String(s)) if s.trim().parse::<i64>().is_ok() => {
                    let seconds = s.trim().parse::<i64>().expect("an integer") as f64;
                    assert_eq!(Some(token.expires_at()), unix_time(seconds), "expires_on {s:?}");
                }
                Some(_) => {} // a date, as MSAL reads several forms
                None => {
                    let seconds = match &json["expires_in"] {
                        Value::Number(n) => n.as_f64(),
                        Value::String(s) => s.trim().parse().ok(),
                        _ => None,
                    }
                    .expect("a token without expires_on has expires_in");
                    let lifetime = Duration::from_secs_f64(seconds);
                    let after = SystemTime::now();
                    assert!(token.expires_at() >= before + lifetime && token.expires_at() <= after + lifetime);
                }
            }
        }
        Err(problem) => {
            let fields = ["access_token", "token_type", "expires_on", "expires_in"];
            assert!(fields.iter().any(|f| problem.contains(f)), "{problem:?} names no field");
            refusal_ignores_token(json, "access_token", parse_token_answer);
        }
    }
}

/// A parameter value as RFC 9110 quotes it.
fn quoted(value: &str) -> String {
    format!("\"{}\"", value.replace('\\', "\\\\").replace('"', "\\\""))
}

fn www_authenticate(value: &str) {
    let Some((scheme, params)) = parse_www_authenticate(value) else {
        return;
    };
    assert!(!scheme.is_empty());
    let again = std::iter::once(scheme.clone())
        .chain(
            params
                .iter()
                .enumerate()
                .map(|(i, (name, value))| format!("{}{name}={}", if i == 0 { " " } else { ", " }, quoted(value))),
        )
        .collect::<String>();
    assert_eq!(
        parse_www_authenticate(&again),
        Some((scheme, params)),
        "{again:?} (written back from {value:?}) reads differently"
    );
}

fn jwt(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = jwt_expiry(text);
    }
    // A JWT made with an `exp` from the input gives that time back.
    let mut bytes = [0u8; 8];
    let n = data.len().min(8);
    bytes[..n].copy_from_slice(&data[..n]);
    let exp = i64::from_le_bytes(bytes) % 100_000_000_000;
    let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let token = format!(
        "{}.{}.c2ln",
        engine.encode(r#"{"alg":"RS256","typ":"JWT"}"#),
        engine.encode(format!(r#"{{"exp":{exp},"sub":"fuzz"}}"#))
    );
    assert_eq!(jwt_expiry(&token), unix_time(exp as f64), "exp {exp}");
}

fn exchange(json: &Value) {
    match parse_exchange_answer(json) {
        Ok(token) => {
            let refresh = token.secret.expose_secret();
            assert!(!refresh.is_empty());
            assert_eq!(Some(refresh), json["refresh_token"].as_str());
            assert_eq!(token.expires_at, jwt_expiry(refresh));
            let other = AcrRefreshToken {
                secret: SecretString::from("other"),
                expires_at: token.expires_at,
            };
            assert_eq!(format!("{token:?}"), format!("{other:?}"), "Debug shows the token");
        }
        Err(problem) => assert!(problem.contains("refresh_token"), "{problem:?}"),
    }
}

fn challenge(text: &str) {
    let headers: Vec<&str> = text.lines().collect();
    match parse_challenge("r.azurecr.io", &headers) {
        Ok(challenge) => {
            assert!(!challenge.service.is_empty() && challenge.service.trim() == challenge.service);
            let again = format!(
                "Bearer realm={},service={}",
                quoted(challenge.realm.as_str()),
                quoted(&challenge.service)
            );
            let reread = parse_challenge("r.azurecr.io", &[&again]).expect("written back, read");
            assert_eq!(reread, challenge, "{again:?}");
        }
        Err(problem) => {
            let named = ["Www-Authenticate", "realm", "service"];
            assert!(named.iter().any(|n| problem.contains(n)), "{problem:?}");
            assert!(!problem.chars().any(char::is_control), "{problem:?}");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let text = std::str::from_utf8(rest).ok();
    match which % 5 {
        0 | 3 => {
            if let Ok(json) = serde_json::from_slice::<Value>(rest) {
                if which % 5 == 0 {
                    token_answer(&json)
                } else {
                    exchange(&json)
                }
            }
        }
        1 => text.into_iter().for_each(www_authenticate),
        2 => jwt(rest),
        _ => text.into_iter().for_each(challenge),
    }
});
