//! Reading a JWT's expiry to size kubelet's cache (`backend::cache_window`). Reading `exp` is not
//! trusting the token: the registry or token endpoint verifies it.

use std::time::SystemTime;

use cloud_access::go_duration::unix_time;

use jsonwebtoken::dangerous::insecure_decode;
use serde::Deserialize;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum JwtError {
    #[error("{what} is not a JWT (expected three base64url parts separated by dots)")]
    Malformed { what: &'static str },
    #[error("{what} has no numeric \"exp\" claim")]
    NoExpiry { what: &'static str },
    #[error("{what} has an \"exp\" claim that is not a time this system can represent: the token's issuer is broken")]
    ExpiryOutOfRange { what: &'static str },
}

#[derive(Deserialize)]
struct ExpiryClaim {
    exp: Option<serde_json::Value>,
}

/// The `exp` claim of `token`, unverified: a NumericDate (RFC 7519), which
/// may have a fraction or lie before 1970. `what` names the token in errors;
/// the token itself never appears in them.
pub fn expiry(what: &'static str, token: &str) -> Result<SystemTime, JwtError> {
    let data = insecure_decode::<ExpiryClaim>(token).map_err(|_| JwtError::Malformed { what })?;
    let seconds = data
        .claims
        .exp
        .as_ref()
        .and_then(serde_json::Value::as_f64)
        .ok_or(JwtError::NoExpiry { what })?;
    unix_time(seconds).ok_or(JwtError::ExpiryOutOfRange { what })
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
    use std::time::{Duration, UNIX_EPOCH};

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
    fn exp_out_of_range_is_an_error_not_a_panic() {
        for exp in ["9223372036854775808", "18446744073709551615", "1e300"] {
            let token = jwt(&format!(r#"{{"exp":{exp}}}"#));
            assert_eq!(
                expiry("serviceAccountToken", &token),
                Err(JwtError::ExpiryOutOfRange {
                    what: "serviceAccountToken"
                }),
                "{exp}"
            );
        }
        let fractional = jwt(r#"{"exp":1000.5}"#);
        assert_eq!(
            expiry("t", &fractional),
            Ok(UNIX_EPOCH + Duration::from_millis(1_000_500))
        );
        assert_eq!(
            expiry("t", &jwt(r#"{"exp":-5}"#)),
            Ok(UNIX_EPOCH - Duration::from_secs(5))
        );
        assert_eq!(
            expiry("t", &jwt(r#"{"exp":"soon"}"#)),
            Err(JwtError::NoExpiry { what: "t" })
        );
    }
}
