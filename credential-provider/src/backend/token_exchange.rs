//! `token-exchange`: the pod's service-account token is exchanged for a
//! registry token at an OAuth 2.0 token endpoint (RFC 8693).
//!
//! The endpoint comes from a flag or the environment only, never from a
//! service-account annotation: an annotation that could redirect the
//! exchange would let any namespace collect other pods' tokens.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use cloud_access::SecureEndpoint;
use cloud_access::http::BodyError;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use super::passthrough::TOKEN_FIX;
use super::{
    BackendError, CredentialBackend, NoPodToken, TimedOut, USER_AGENT, cache_window, pod_token, within_timeout,
};
use crate::image;
use crate::jwt;
use crate::protocol::{CacheKeyType, CredentialRequest, Credentials, RegistryAuth};

pub const GRANT_TYPE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
pub const JWT_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:jwt";

/// What to ask the token endpoint for.
#[derive(Debug, Clone)]
pub struct ExchangeSettings {
    pub endpoint: SecureEndpoint,
    pub username: String,
    pub subject_token_type: String,
    pub requested_token_type: Option<String>,
    pub audience: Option<String>,
    pub scope: Option<String>,
    pub resource: Option<String>,
    pub client_id: Option<String>,
    pub timeout: Duration,
    pub expiry_margin: Duration,
}

#[derive(Debug)]
pub struct TokenExchangeBackend {
    settings: ExchangeSettings,
    client: reqwest::Client,
}

#[derive(Debug, thiserror::Error)]
pub enum TokenExchangeError {
    #[error("kubelet sent {0}: {TOKEN_FIX}")]
    NoToken(#[from] NoPodToken),
    #[error(transparent)]
    TimedOut(#[from] TimedOut),
    #[error("cannot reach token endpoint {endpoint}: {reason}")]
    Connect { endpoint: String, reason: String },
    #[error(
        "token endpoint {endpoint} answered HTTP {status}: a redirect, which is not followed (it could carry the service-account token elsewhere): set --token-endpoint to the URL that answers the exchange"
    )]
    Redirected { endpoint: String, status: u16 },
    #[error("token endpoint {endpoint} refused the exchange with HTTP {status}{detail}")]
    Refused {
        endpoint: String,
        status: u16,
        detail: String,
    },
    #[error("token endpoint {endpoint} answered HTTP {status} without a token response: {problem}")]
    BadAnswer {
        endpoint: String,
        status: u16,
        problem: &'static str,
    },
    #[error("{0}")]
    Client(#[from] cloud_access::HttpClientError),
}

/// RFC 6749 §5.1 and RFC 8693 §2.2.1; unknown fields are ignored.
#[derive(Deserialize)]
struct TokenResponse {
    access_token: Option<String>,
    /// A number, or a string holding one (as some servers send it).
    expires_in: Option<serde_json::Value>,
}

/// Far above any token response (a JWT is a few KB), and above the
/// megabytes of error text a broken server may send, which are then capped.
const MAX_ANSWER: usize = 8 << 20;

/// Longest text taken from a token endpoint's error into a message.
const MAX_REMOTE_CODE: usize = 100;
const MAX_REMOTE_DESCRIPTION: usize = 300;

/// RFC 6749 §5.2.
#[derive(Deserialize)]
struct OAuthError {
    error: Option<String>,
    error_description: Option<String>,
}

impl TokenExchangeBackend {
    pub fn new(settings: ExchangeSettings) -> Result<Self, TokenExchangeError> {
        let client = cloud_access::http::http_client_for(USER_AGENT, settings.timeout, [settings.endpoint.url()])?;
        Ok(Self { settings, client })
    }

    /// The one request is bounded by the client's timeout, which is
    /// `--timeout` too: its expiry is reported as the backstop's.
    async fn exchange(&self, request: &CredentialRequest) -> Result<Credentials, TokenExchangeError> {
        let subject_token = pod_token(request)?;
        let settings = &self.settings;
        let endpoint = settings.endpoint.to_string();
        let mut form: Vec<(&str, &str)> = vec![
            ("grant_type", GRANT_TYPE),
            ("subject_token", subject_token.expose_secret()),
            // An empty value (a provider env variable set to "") is unset:
            // RFC 8693 endpoints refuse empty parameters.
            (
                "subject_token_type",
                match settings.subject_token_type.as_str() {
                    "" => JWT_TOKEN_TYPE,
                    set => set,
                },
            ),
        ];
        let optional = [
            ("requested_token_type", &settings.requested_token_type),
            ("audience", &settings.audience),
            ("scope", &settings.scope),
            ("resource", &settings.resource),
            ("client_id", &settings.client_id),
        ];
        form.extend(
            optional
                .iter()
                .filter_map(|(name, value)| value.as_deref().map(|v| (*name, v)))
                .filter(|(_, value)| !value.is_empty()),
        );

        tracing::debug!(%endpoint, image = %request.image, "exchanging the service-account token");
        let response = self
            .client
            .post(settings.endpoint.url().clone())
            .header(reqwest::header::ACCEPT, "application/json")
            .form(&form)
            .send()
            .await
            .map_err(|e| self.transport_error(e))?;
        let status = response.status().as_u16();
        let body = cloud_access::http::read_body(response, MAX_ANSWER)
            .await
            .map_err(|e| match e {
                BodyError::Transport(e) => self.transport_error(e),
                BodyError::TooLarge { .. } => TokenExchangeError::BadAnswer {
                    endpoint: endpoint.clone(),
                    status,
                    problem: "the answer is larger than 8 MiB, far more than a token response",
                },
            })?;
        tracing::debug!(%endpoint, status, "token endpoint answered");

        if (300..400).contains(&status) {
            return Err(TokenExchangeError::Redirected { endpoint, status });
        }
        if !(200..300).contains(&status) {
            return Err(TokenExchangeError::Refused {
                endpoint,
                status,
                detail: oauth_error_detail(&body, subject_token.expose_secret()),
            });
        }
        let TokenAnswer {
            access_token,
            cache_duration,
        } = read_token_answer(&body, SystemTime::now(), settings.expiry_margin).map_err(|problem| {
            TokenExchangeError::BadAnswer {
                endpoint: endpoint.clone(),
                status,
                problem,
            }
        })?;

        let repository = image::repository(&request.image);
        let mut auth = BTreeMap::new();
        auth.insert(
            image::registry(&repository).to_owned(),
            RegistryAuth {
                username: settings.username.clone(),
                password: access_token,
            },
        );
        Ok(Credentials {
            cache_key_type: CacheKeyType::Registry,
            cache_duration,
            auth,
        })
    }

    fn transport_error(&self, error: reqwest::Error) -> TokenExchangeError {
        if error.is_timeout() {
            return TimedOut {
                timeout: self.settings.timeout,
                waiting_for: self.waiting_for(),
            }
            .into();
        }
        let endpoint = self.settings.endpoint.to_string();
        // reqwest's chain names the cause (DNS, refused, TLS) without the body.
        let error = error.without_url();
        let reason = cloud_access::logging::error_chain(&error);
        TokenExchangeError::Connect { endpoint, reason }
    }

    /// What an exchange waits for, as `--timeout`'s message names it.
    fn waiting_for(&self) -> String {
        format!("token endpoint {}", self.settings.endpoint)
    }
}

/// What a token response gives: the token, and how long kubelet may keep it.
pub struct TokenAnswer {
    pub access_token: SecretString,
    /// The shorter of `expires_in` (clamped to 0..=1e9 s) and a JWT token's
    /// own `exp` from `now`, less the expiry margin; `None` when neither is
    /// known.
    pub cache_duration: Option<Duration>,
}

/// A successful token response's body (RFC 6749 §5.1, RFC 8693 §2.2.1) read
/// at `now`. A problem names the field that is wrong and never quotes the
/// answer (it holds the token).
pub fn read_token_answer(body: &[u8], now: SystemTime, expiry_margin: Duration) -> Result<TokenAnswer, &'static str> {
    let answer: TokenResponse =
        cloud_access::json::object_from_slice(body).ok_or("the body is not a JSON token response")?;
    let access_token = answer
        .access_token
        .filter(|t| !t.is_empty())
        .ok_or("\"access_token\" is missing or empty")?;

    let mut expiries = Vec::new();
    if let Some(expires_in) = &answer.expires_in {
        let seconds = match expires_in {
            serde_json::Value::Number(n) => n.as_f64(),
            serde_json::Value::String(text) => text.trim().parse::<f64>().ok(),
            _ => None,
        }
        .filter(|s| s.is_finite())
        .ok_or("\"expires_in\" is not a number of seconds")?;
        // A negative or absurd lifetime is clamped (1e9 s is 31 years).
        let lifetime = Duration::from_secs_f64(seconds.clamp(0.0, 1e9));
        expiries.extend(now.checked_add(lifetime));
    }
    // An opaque access token is fine; a JWT's own expiry also bounds the cache.
    match jwt::expiry("access_token", &access_token) {
        Ok(expires_at) => expiries.push(expires_at),
        Err(jwt::JwtError::ExpiryOutOfRange { .. }) => {
            return Err("\"access_token\" is a JWT whose \"exp\" is not a representable time");
        }
        Err(_) => {}
    }
    let cache_duration = expiries
        .into_iter()
        .min()
        .map(|expires_at| cache_window(expires_at, now, expiry_margin, None));
    Ok(TokenAnswer {
        access_token: SecretString::from(access_token),
        cache_duration,
    })
}

/// `: error_code (description)` from an OAuth error body, as remote text
/// made fit for one line: escaped, capped, and with any long piece of the
/// subject token removed in case the endpoint echoes it.
pub fn oauth_error_detail(body: &[u8], subject_token: &str) -> String {
    let Ok(OAuthError {
        error: Some(code),
        error_description,
    }) = serde_json::from_slice::<OAuthError>(body)
    else {
        return String::new();
    };
    let clean = |text: &str, limit| cloud_access::logging::clean_text(text, &[subject_token], limit);
    let mut detail = format!(": {}", clean(&code, MAX_REMOTE_CODE));
    if let Some(description) = error_description.filter(|d| !d.is_empty()) {
        detail.push_str(&format!(" ({})", clean(&description, MAX_REMOTE_DESCRIPTION)));
    }
    detail
}

impl CredentialBackend for TokenExchangeBackend {
    async fn credentials(&self, request: &CredentialRequest) -> Result<Credentials, BackendError> {
        let answer = within_timeout(self.settings.timeout, || self.waiting_for(), |_| self.exchange(request));
        Ok(answer.await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `["token", 3]` (token_exchange_answer): serde reads a struct from a JSON
    /// array too, so an answer that is no token response was read as one.
    #[test]
    fn an_answer_that_is_not_an_object_is_not_a_token_response() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/data/fuzz/token_exchange_answer/array-answer.json"
        );
        let body = std::fs::read(path).expect("the fuzz input");
        let read = read_token_answer(&body, SystemTime::now(), Duration::ZERO);
        assert_eq!(read.err(), Some("the body is not a JSON token response"));
        let object = br#" {"access_token": "opaque", "expires_in": 3}"#;
        let answer = read_token_answer(object, SystemTime::now(), Duration::ZERO).expect("an object is read");
        assert_eq!(answer.cache_duration, Some(Duration::from_secs(3)));
    }

    #[test]
    fn oauth_error_detail_names_the_code_and_hides_the_token() {
        let body = br#"{"error":"invalid_grant","error_description":"token eyJsecret is not trusted"}"#;
        assert_eq!(
            oauth_error_detail(body, "eyJsecret"),
            ": invalid_grant (token <redacted> is not trusted)"
        );
        assert_eq!(oauth_error_detail(b"<html>nope</html>", "x"), "");
        let hostile = br#"{"error":"bad\nforged \u001b[31m","error_description":"token JzZWNyZXQtdG9rZW4t was cut"}"#;
        assert_eq!(
            oauth_error_detail(hostile, "eyJzZWNyZXQtdG9rZW4tdmFsdWU"),
            ": bad\\nforged \\u{1b}[31m (token <redacted> was cut)"
        );
    }
}
