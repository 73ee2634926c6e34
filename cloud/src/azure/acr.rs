//! Azure Container Registry's token exchange: an Entra ID token (for
//! [`super::ACR_AUDIENCE`]) traded for the registry's refresh token, which
//! is the password of username [`ACR_USERNAME`] for `docker login`-style
//! pulls.
//!
//! Two calls, as acr-credential-provider makes them: `GET https://{registry}/v2/`
//! without credentials, which must answer 401 with `Www-Authenticate:
//! Bearer realm="…",service="…"`; then `POST {realm's scheme and host}/oauth2/exchange`.
//! The exchange sends the documented form (Azure/acr `docs/AAD-OAuth.md`):
//! `grant_type=access_token`, `service`, `tenant`, `access_token`.
//! Upstream still sends `grant_type=access_token_refresh_token` with the
//! Entra token as both `access_token` and `refresh_token`, a grant that
//! document marks deprecated.
//!
//! Unlike upstream, the realm must be on the registry's own host (ACR's
//! always is): the Entra token is never sent to a host the image did not
//! name. Registry names are checked to be `host[:port]` before any call,
//! and every URL must be https (plain http only on loopback, for tests).

use std::fmt;
use std::time::{Instant, SystemTime};

use base64::Engine;
use secrecy::{ExposeSecret, SecretString};
use url::Url;

use super::Call;
use super::error::AzureError;
use super::token::{AccessToken, TokenSource};
use crate::api::InvalidName;
use crate::endpoint::SecureEndpoint;

/// The username that goes with an ACR refresh token.
pub const ACR_USERNAME: &str = "00000000-0000-0000-0000-000000000000";

const SERVICE: &str = "container registry";

/// What a registry's `/v2/` challenge said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcrChallenge {
    /// The registry asked (`host[:port]`).
    pub registry: String,
    /// `realm`: where tokens are issued (`https://{registry}/oauth2/token`).
    pub realm: Url,
    /// `service`: the registry's name for itself.
    pub service: String,
}

/// A registry refresh token. `Debug` never shows it.
#[derive(Clone)]
pub struct AcrRefreshToken {
    pub secret: SecretString,
    /// Its `exp` claim, read without verifying the token (the registry
    /// does); `None` if it is not a JWT with a numeric `exp`.
    pub expires_at: Option<SystemTime>,
}

impl fmt::Debug for AcrRefreshToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AcrRefreshToken")
            .field("secret", &crate::logging::REDACTED)
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

/// Checks that `registry` is `host[:port]` ([`crate::names::check_host_port`]),
/// so it can only name a registry's root.
pub fn check_registry(registry: &str) -> Result<&str, AzureError> {
    crate::names::check_host_port(registry)
        .map_err(|problem| AzureError::InvalidName(InvalidName::new("registry", registry, problem)))?;
    Ok(registry)
}

/// The `exp` claim of a JWT, read without verifying it.
pub fn jwt_expiry(token: &str) -> Option<SystemTime> {
    let payload = token.split('.').nth(1)?;
    let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let bytes = engine.decode(payload.trim_end_matches('=')).ok()?;
    let claims: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    crate::go_duration::unix_time(claims["exp"].as_f64()?)
}

/// A `Www-Authenticate` value: its scheme (lower case) and its parameters
/// (names lower case), read as RFC 9110 writes them: `token=token` or
/// `token="quoted \" string"`, comma-separated, spaces anywhere between.
pub fn parse_www_authenticate(value: &str) -> Option<(String, Vec<(String, String)>)> {
    let value = value.trim();
    let (scheme, mut rest) = value.split_once(char::is_whitespace).unwrap_or((value, ""));
    if scheme.is_empty() {
        return None;
    }
    let mut params = Vec::new();
    loop {
        rest = rest.trim_start_matches(|c: char| c.is_whitespace() || c == ',');
        if rest.is_empty() {
            return Some((scheme.to_ascii_lowercase(), params));
        }
        let (name, after) = rest.split_once('=')?;
        let name = name.trim();
        if name.is_empty() || name.contains(|c: char| c.is_whitespace() || c == ',' || c == '"') {
            return None;
        }
        let after = after.trim_start();
        let (value, remainder) = if let Some(quoted) = after.strip_prefix('"') {
            let mut value = String::new();
            let mut chars = quoted.char_indices();
            let end = loop {
                match chars.next()? {
                    (i, '"') => break i,
                    (_, '\\') => value.push(chars.next()?.1),
                    (_, c) => value.push(c),
                }
            };
            (value, &quoted[end + 1..])
        } else {
            let end = after.find(',').unwrap_or(after.len());
            (after[..end].trim().to_owned(), &after[end..])
        };
        let remainder = remainder.trim_start();
        if !remainder.is_empty() && !remainder.starts_with(',') {
            return None;
        }
        params.push((name.to_ascii_lowercase(), value));
        rest = remainder;
    }
}

/// The challenge of a 401 from `registry`'s `/v2/`: the realm and service of
/// the first Bearer challenge among the `Www-Authenticate` values `headers`.
/// A problem names what is missing.
pub fn parse_challenge(registry: &str, headers: &[&str]) -> Result<AcrChallenge, String> {
    if headers.is_empty() {
        return Err("the 401 has no Www-Authenticate header".into());
    }
    let Some((_, params)) = headers
        .iter()
        .filter_map(|h| parse_www_authenticate(h))
        .find(|(scheme, _)| scheme == "bearer")
    else {
        return Err(format!(
            "no Bearer challenge in Www-Authenticate \"{}\"",
            crate::logging::clean_text(&headers.join(", "), &[], 200)
        ));
    };
    let param = |name: &str| {
        params
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.trim())
            .filter(|v| !v.is_empty())
            .ok_or_else(|| format!("the Bearer challenge has no {name}"))
    };
    let realm = Url::parse(param("realm")?).map_err(|e| format!("the challenge's realm is not a URL ({e})"))?;
    Ok(AcrChallenge {
        registry: registry.to_owned(),
        realm,
        service: param("service")?.to_owned(),
    })
}

/// The answer of `/oauth2/exchange` (`{"refresh_token": "…"}`), its expiry
/// read from the token's `exp` claim. A problem never quotes the answer (it
/// holds the token).
pub fn parse_exchange_answer(json: &serde_json::Value) -> Result<AcrRefreshToken, &'static str> {
    let refresh = json["refresh_token"]
        .as_str()
        .filter(|t| !t.is_empty())
        .ok_or("the answer has no refresh_token")?;
    Ok(AcrRefreshToken {
        expires_at: jwt_expiry(refresh),
        secret: SecretString::from(refresh.to_owned()),
    })
}

/// ACR token exchanges, over https (or plain http to loopback registries,
/// for tests).
#[derive(Debug, Clone)]
pub struct AcrClient {
    http: reqwest::Client,
    scheme: &'static str,
}

impl AcrClient {
    /// `http` from [`crate::http::http_client`].
    pub fn new(http: reqwest::Client) -> Self {
        Self { http, scheme: "https" }
    }

    /// Registries are asked over plain http: accepted only for loopback
    /// registries (a fake), refused for any other.
    pub fn with_plain_http_on_loopback(mut self) -> Self {
        self.scheme = "http";
        self
    }

    /// `GET {scheme}://{registry}/v2/` without credentials: the 401 Bearer
    /// challenge's realm and service.
    pub async fn challenge(&self, registry: &str, deadline: Instant) -> Result<AcrChallenge, AzureError> {
        let registry = check_registry(registry)?;
        let endpoint = SecureEndpoint::parse("registry", &format!("{}://{registry}/v2/", self.scheme))?;
        let url = endpoint.url().clone();
        let answer = Call::exchange(SERVICE, &url, self.http.get(url.clone()), deadline).await?;
        let garbage = |problem: String| Call::garbage(SERVICE, &url, problem);
        if answer.status != 401 {
            return Err(garbage(format!(
                "HTTP {} to a request without credentials, where an Azure container registry answers 401 with a Bearer challenge",
                answer.status
            )));
        }
        let headers: Vec<&str> = answer
            .headers
            .get_all(reqwest::header::WWW_AUTHENTICATE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        parse_challenge(registry, &headers).map_err(garbage)
    }

    /// `POST {realm scheme+host}/oauth2/exchange` with `entra_token` (for
    /// [`super::ACR_AUDIENCE`]) for `tenant`: the registry's refresh token.
    pub async fn exchange(
        &self,
        challenge: &AcrChallenge,
        tenant: &str,
        entra_token: &AccessToken,
        deadline: Instant,
    ) -> Result<AcrRefreshToken, AzureError> {
        let realm = &challenge.realm;
        let same_host = realm.host_str().is_some_and(|h| {
            let realm_host = match realm.port() {
                Some(port) => format!("{h}:{port}"),
                None => h.to_owned(),
            };
            realm_host.eq_ignore_ascii_case(&challenge.registry)
        });
        if !same_host {
            return Err(AzureError::InvalidName(InvalidName::new(
                "challenge realm",
                &crate::http::shown_url(realm),
                "it is not on the registry's own host, so the Entra token is not sent there",
            )));
        }
        let mut root = realm.clone();
        root.set_path("/oauth2/exchange");
        root.set_query(None);
        root.set_fragment(None);
        let endpoint = SecureEndpoint::parse("challenge realm", root.as_str())?;
        let url = endpoint.url().clone();
        let access_token = entra_token.secret().expose_secret();
        let form = [
            ("grant_type", "access_token"),
            ("service", challenge.service.as_str()),
            ("tenant", tenant),
            ("access_token", access_token),
        ];
        let request = self.http.post(url.clone()).form(&form);
        let body = Call::send(SERVICE, &url, request, deadline, &[access_token]).await?;
        let json = Call::json(SERVICE, &url, &body)?;
        parse_exchange_answer(&json).map_err(|problem| Call::garbage(SERVICE, &url, problem))
    }

    /// Both steps for `registry`, with a token from `tokens`, all before
    /// `deadline`.
    pub async fn refresh_token(
        &self,
        registry: &str,
        tenant: &str,
        tokens: &dyn TokenSource<AzureError>,
        deadline: Instant,
    ) -> Result<AcrRefreshToken, AzureError> {
        let challenge = self.challenge(registry, deadline).await?;
        let token = Call::token_within(
            tokens,
            deadline,
            "the access token source for the registry",
            &challenge.realm,
        )
        .await?;
        self.exchange(&challenge, tenant, &token, deadline).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges_parse_robustly() {
        let params = |v: &str| parse_www_authenticate(v).map(|(s, p)| (s, p.into_iter().collect::<Vec<_>>()));
        let (scheme, p) = params(r#"Bearer realm="https://r.azurecr.io/oauth2/token",service="r.azurecr.io""#).unwrap();
        assert_eq!(scheme, "bearer");
        assert_eq!(p[0], ("realm".into(), "https://r.azurecr.io/oauth2/token".into()));
        assert_eq!(p[1], ("service".into(), "r.azurecr.io".into()));
        let (_, p) = params(r#"bearer  Service = r.azurecr.io , REALM="https://r/x,y\"z" ,"#).unwrap();
        assert_eq!(p[0], ("service".into(), "r.azurecr.io".into()));
        assert_eq!(p[1], ("realm".into(), "https://r/x,y\"z".into()));
        for bad in ["", r#"Bearer realm="open"#, "Bearer realm", r#"Bearer realm="a" b="c""#] {
            assert!(params(bad).is_none(), "{bad:?}");
        }
        assert_eq!(params("Basic").unwrap(), ("basic".into(), vec![]));
    }

    #[test]
    fn registries_are_host_and_port() {
        for ok in [
            "myregistry.azurecr.io",
            "127.0.0.1:5000",
            "localhost:443",
            "a-b.azurecr.cn",
        ] {
            assert_eq!(check_registry(ok).unwrap(), ok);
        }
        for bad in [
            "",
            "https://r.azurecr.io",
            "r.azurecr.io/v2",
            "user@r.azurecr.io",
            "r.azurecr.io:0",
            "r.azurecr.io:99999",
            "r..azurecr.io",
            "-r.azurecr.io",
            "r.azurecr.io?x",
            "[::1]:5000",
        ] {
            assert!(check_registry(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn expiry_is_read_from_the_payload() {
        let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let jwt = |claims: &str| format!("{}.{}.sig", engine.encode("{}"), engine.encode(claims));
        let at = jwt_expiry(&jwt(r#"{"exp":2000000000}"#)).unwrap();
        assert_eq!(
            at.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs(),
            2_000_000_000
        );
        assert_eq!(jwt_expiry(&jwt(r#"{"sub":"x"}"#)), None);
        assert_eq!(jwt_expiry("opaque-token"), None);
        let token = AcrRefreshToken {
            secret: SecretString::from("eyJ.secret-refresh.sig"),
            expires_at: None,
        };
        assert!(!format!("{token:?}").contains("secret-refresh"));
    }
}
