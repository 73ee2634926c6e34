//! Entra ID access tokens: where a client's tokens come from, a cache in
//! front of any source (the crate's one [`crate::token::TokenCache`]: refreshed before
//! expiry, one fetch however many callers ask at once), and the token
//! answers of IMDS and Entra ID read as MSAL reads them.

use std::time::SystemTime;

use serde_json::Value;

use super::error::AzureError;
pub use crate::token::{AccessToken, CachedTokenSource, DEFAULT_REFRESH_MARGIN, TokenSource};

/// The future an Azure [`TokenSource`] returns; boxed so sources can be
/// held as trait objects (`Arc<dyn TokenSource<AzureError>>`).
pub type TokenFuture<'a> = crate::token::TokenFuture<'a, AzureError>;

/// A token answer (`{"access_token": …, "expires_in": …, "expires_on": …,
/// "token_type": "Bearer"}`) read as MSAL reads it: `expires_on` first
/// (Unix seconds as a number or a string, or a date as
/// `MM/dd/yyyy HH:mm:ss`, `yyyy-MM-dd HH:mm:ss` or RFC 3339, in UTC), else
/// `expires_in` (seconds, a number or a string). Problems never quote the
/// answer: it holds the token.
pub fn parse_token_answer(json: &Value) -> Result<AccessToken, &'static str> {
    let secret = crate::token::bearer_access_token(json)?;
    if let Some(expires_on) = json
        .get("expires_on")
        .filter(|v| !v.is_null() && v.as_str() != Some(""))
    {
        let at = expires_on_time(expires_on).ok_or("the answer's expires_on is not a time")?;
        return Ok(AccessToken::expiring_at(secret, at));
    }
    let expires_in =
        crate::token::expires_in(&json["expires_in"]).ok_or("the answer has no valid expires_in or expires_on")?;
    Ok(AccessToken::new(secret, expires_in))
}

fn expires_on_time(value: &Value) -> Option<SystemTime> {
    match value {
        Value::Number(n) => crate::go_duration::unix_time(n.as_f64()?.trunc()),
        Value::String(text) => {
            let text = text.trim();
            if let Ok(seconds) = text.parse::<i64>() {
                return crate::go_duration::unix_time(seconds as f64);
            }
            // MM/dd/yyyy HH:mm:ss, as some App Service versions send it.
            let american = text.split_once(' ').and_then(|(date, clock)| {
                let mut parts = date.split('/');
                let (month, day, year) = (parts.next()?, parts.next()?, parts.next()?);
                (parts.next().is_none()).then(|| format!("{year}-{month}-{day} {clock}"))
            });
            let text = american.as_deref().unwrap_or(text);
            humantime::parse_rfc3339_weak(text.trim_end_matches('Z'))
                .ok()
                .or_else(|| humantime::parse_rfc3339(text).ok())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret;
    use serde_json::json;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn expires_on_first_as_string_or_number_then_expires_in() {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
        for answer in [
            json!({"access_token": "eyJ0.a.b", "expires_in": "86399", "expires_on": (now + 600).to_string(), "token_type": "Bearer"}),
            json!({"access_token": "eyJ0.a.b", "expires_in": 86399, "expires_on": now + 600}),
        ] {
            let token = parse_token_answer(&answer).unwrap();
            assert_eq!(token.secret().expose_secret(), "eyJ0.a.b");
            let remaining = token.remaining().as_secs();
            assert!((595..=600).contains(&remaining), "{remaining}");
        }
        let token = parse_token_answer(&json!({"access_token": "t", "expires_in": "3599"})).unwrap();
        assert!(token.remaining() > Duration::from_secs(3590));
        let token = parse_token_answer(&json!({"access_token": "t", "expires_in": 60, "expires_on": ""})).unwrap();
        assert!(token.remaining() > Duration::from_secs(55));
    }

    #[test]
    fn dates_as_msal_reads_them() {
        let at = |text: &str| expires_on_time(&json!(text)).map(|t| t.duration_since(UNIX_EPOCH).unwrap().as_secs());
        assert_eq!(at("01/02/2030 15:04:05"), Some(1_893_596_645));
        assert_eq!(at("2030-01-02 15:04:05"), Some(1_893_596_645));
        assert_eq!(at("2030-01-02T15:04:05Z"), Some(1_893_596_645));
        assert_eq!(at("1893596645"), Some(1_893_596_645));
        assert_eq!(at("soon"), None);
    }

    #[test]
    fn unusable_answers_never_quote_the_token() {
        for bad in [
            json!({"expires_in": 60}),
            json!({"access_token": "secret-token-value", "expires_in": -1}),
            json!({"access_token": "secret-token-value", "expires_in": 60, "token_type": "pop"}),
            json!({"access_token": "secret-token-value", "expires_on": "whenever"}),
        ] {
            let problem = parse_token_answer(&bad).unwrap_err();
            assert!(!problem.contains("secret-token"), "{problem}");
        }
    }
}
