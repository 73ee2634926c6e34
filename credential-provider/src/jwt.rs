//! Reading a JWT's expiry to size kubelet's cache. Reading `exp` is not
//! trusting the token: the registry or token endpoint verifies it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jsonwebtoken::dangerous::insecure_decode;
use serde::Deserialize;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum JwtError {
    #[error("{what} is not a JWT (expected three base64url parts separated by dots)")]
    Malformed { what: &'static str },
    #[error("{what} has no numeric \"exp\" claim")]
    NoExpiry { what: &'static str },
}

#[derive(Deserialize)]
struct ExpiryClaim {
    exp: Option<u64>,
}

/// The `exp` claim of `token`, unverified. `what` names the token in errors;
/// the token itself never appears in them.
pub fn expiry(what: &'static str, token: &str) -> Result<SystemTime, JwtError> {
    let data = insecure_decode::<ExpiryClaim>(token).map_err(|_| JwtError::Malformed { what })?;
    let exp = data.claims.exp.ok_or(JwtError::NoExpiry { what })?;
    Ok(UNIX_EPOCH + Duration::from_secs(exp))
}

/// How long a credential that expires at `expires_at` may be cached at
/// `now`, keeping `margin` in hand; zero when that is already past.
pub fn cache_window(expires_at: SystemTime, now: SystemTime, margin: Duration) -> Duration {
    expires_at
        .duration_since(now)
        .unwrap_or_default()
        .saturating_sub(margin)
}

#[cfg(test)]
pub(crate) mod test_tokens {
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;

    /// An unsigned-looking JWT with the given claims (signature is junk:
    /// nothing here verifies it).
    pub(crate) fn jwt(claims: &str) -> String {
        let header = URL_SAFE_NO_PAD.encode(r#"{"alg":"RS256","typ":"JWT"}"#);
        let body = URL_SAFE_NO_PAD.encode(claims);
        format!("{header}.{body}.c2lnbmF0dXJl")
    }
}

#[cfg(test)]
mod tests {
    use super::test_tokens::jwt;
    use super::*;

    #[test]
    fn reads_exp_without_verifying() {
        let token = jwt(r#"{"exp":2000000000,"aud":["x"],"sub":"system:serviceaccount:ns:sa"}"#);
        assert_eq!(
            expiry("serviceAccountToken", &token),
            Ok(UNIX_EPOCH + Duration::from_secs(2_000_000_000))
        );
    }

    #[test]
    fn names_the_token_not_its_value() {
        let no_exp = jwt(r#"{"sub":"x"}"#);
        assert_eq!(
            expiry("serviceAccountToken", &no_exp),
            Err(JwtError::NoExpiry {
                what: "serviceAccountToken"
            })
        );
        let err = expiry("access_token", "opaque-secret-value").unwrap_err();
        assert_eq!(err, JwtError::Malformed { what: "access_token" });
        assert!(!err.to_string().contains("opaque-secret-value"));
    }

    #[test]
    fn cache_window_keeps_a_margin_and_never_goes_negative() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000);
        let margin = Duration::from_secs(60);
        assert_eq!(
            cache_window(now + Duration::from_secs(3_600), now, margin),
            Duration::from_secs(3_540)
        );
        assert_eq!(cache_window(now + Duration::from_secs(30), now, margin), Duration::ZERO);
        assert_eq!(cache_window(now - Duration::from_secs(30), now, margin), Duration::ZERO);
    }
}
