//! A token endpoint's answer to the `token-exchange` backend's RFC 8693
//! exchange -> `backend::token_exchange::read_token_answer`, at a fixed time
//! with an expiry margin of the first byte's seconds.
//!
//! Properties: a token read is the input's `access_token`, not empty; how
//! long kubelet may keep it is known exactly when the answer has an
//! `expires_in` or the token is a JWT with an `exp`, and then it is never
//! longer than `expires_in` (clamped to 0..=1e9 s) or the time to `exp`,
//! less the margin; a refusal names the field that is wrong and does not
//! depend on the token (another in its place gives the same refusal).
#![no_main]

use std::time::{Duration, UNIX_EPOCH};

use credential_provider::backend::token_exchange::read_token_answer;
use credential_provider::jwt;
use libfuzzer_sys::fuzz_target;
use secrecy::ExposeSecret;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Some((&margin, body)) = data.split_first() else {
        return;
    };
    let margin = Duration::from_secs(margin.into());
    let now = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let json = serde_json::from_slice::<Value>(body).ok();
    match read_token_answer(body, now, margin) {
        Ok(answer) => {
            // serde skips the fields it does not read without checking their
            // UTF-8 (as W2 of the webhook): such an answer is read but is no `Value`.
            let Some(json) = json else {
                return;
            };
            let token = answer.access_token.expose_secret();
            assert!(!token.is_empty());
            assert_eq!(Some(token), json["access_token"].as_str());
            let expires_in = match &json["expires_in"] {
                Value::Number(n) => n.as_f64(),
                Value::String(s) => s.trim().parse::<f64>().ok(),
                _ => None,
            }
            .map(|s| Duration::from_secs_f64(s.clamp(0.0, 1e9)));
            let exp = jwt::expiry("access_token", token).ok();
            assert_eq!(
                answer.cache_duration.is_some(),
                expires_in.is_some() || exp.is_some(),
                "{:?}",
                answer.cache_duration
            );
            if let Some(kept) = answer.cache_duration {
                if let Some(lifetime) = expires_in {
                    assert!(
                        kept <= lifetime.saturating_sub(margin),
                        "{kept:?} > {lifetime:?} - {margin:?}"
                    );
                }
                if let Some(at) = exp {
                    let lifetime = at.duration_since(now).unwrap_or_default();
                    assert!(kept <= lifetime.saturating_sub(margin), "{kept:?} past exp {at:?}");
                }
            }
        }
        Err(problem) => {
            let fields = ["JSON", "access_token", "expires_in"];
            assert!(fields.iter().any(|f| problem.contains(f)), "{problem:?} names no field");
            if let Some(json) = &json {
                fuzz::refusal_ignores_token(json, "access_token", |v| {
                    read_token_answer(v.to_string().as_bytes(), now, margin).map(|_| ())
                });
            }
        }
    }
});
