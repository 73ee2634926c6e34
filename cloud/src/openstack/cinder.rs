//! Cinder v3 `GET {endpoint}/volumes/{id}`: a volume's availability zone, for the
//! webhook's topology labels.
//!
//! One call, no cache: the webhook's lookup mechanism caches, shares concurrent
//! lookups and owns the deadline, which every call here is given and keeps (the
//! token fetch included). A token Cinder refuses (401: revoked, or expired early)
//! is forgotten and one fresh token is fetched for one more try, within the same
//! deadline. A volume that does not exist is a 404 ([`CallFailure::is_not_found`](crate::api::CallFailure::is_not_found)).

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use secrecy::ExposeSecret;
use serde_json::Value;
use url::Url;

use super::Call;
use super::error::OpenStackError;
use super::keystone::{KEYSTONE, KeystoneAuth};
use crate::api::{CallError, CallErrorKind, InvalidName};
use crate::token::CachedTokenSource;

/// The service name Cinder's errors carry (the [`CallError`]'s `service`).
pub const CINDER: &str = "Cinder";
/// The base microversion: every field read here is in it.
pub const VOLUME_API_VERSION: &str = "volume 3.0";

/// A volume's placement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Volume {
    pub id: String,
    /// `availability_zone`; `None` when Cinder gives none (or an empty one).
    pub availability_zone: Option<String>,
}

/// Cinder calls with tokens (and the endpoint) from Keystone.
#[derive(Clone)]
pub struct VolumesClient {
    http: reqwest::Client,
    tokens: Arc<CachedTokenSource<KeystoneAuth>>,
}

impl fmt::Debug for VolumesClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VolumesClient")
            .field("keystone", self.tokens.source())
            .finish_non_exhaustive()
    }
}

impl VolumesClient {
    /// `http` for Cinder (usually the one Keystone's calls use); `tokens` Keystone's,
    /// behind the token cache.
    pub fn new(http: reqwest::Client, tokens: Arc<CachedTokenSource<KeystoneAuth>>) -> Self {
        Self { http, tokens }
    }

    pub fn tokens(&self) -> &Arc<CachedTokenSource<KeystoneAuth>> {
        &self.tokens
    }

    /// The volume `id`, all before `deadline`.
    pub async fn volume(&self, id: &str, deadline: Instant) -> Result<Volume, OpenStackError> {
        let id = check_volume_id(id)?;
        let mut refused_once = false;
        loop {
            let started = Instant::now();
            let token = tokio::time::timeout_at(deadline.into(), self.tokens.get())
                .await
                .map_err(|_| {
                    let url = crate::http::shown_url(self.tokens.source().tokens_url());
                    let after = deadline.saturating_duration_since(started);
                    CallError::new(KEYSTONE, url, CallErrorKind::Deadline { after })
                })??;
            let endpoint = self.tokens.source().endpoint().ok_or_else(|| {
                Call::garbage(
                    KEYSTONE,
                    self.tokens.source().tokens_url(),
                    "no block-storage endpoint was read",
                )
            })?;
            let url = volume_url(endpoint.url(), id)?;
            let secret = token.secret().expose_secret();
            let request = self
                .http
                .get(url.clone())
                .header("X-Auth-Token", secret)
                .header("OpenStack-API-Version", VOLUME_API_VERSION)
                .header(reqwest::header::ACCEPT, "application/json");
            let answer = Call::exchange(CINDER, &url, request, deadline).await?;
            if answer.status == 401 && !refused_once {
                // Revoked or expired before its time: one fresh token, one more try.
                refused_once = true;
                tracing::debug!(url = %crate::http::shown_url(&url), "Cinder refused the token; fetching a new one");
                self.tokens.invalidate().await;
                continue;
            }
            let body = Call::check(CINDER, &url, answer, &[secret])?;
            let json = Call::json(CINDER, &url, &body)?;
            return parse_volume(&url, &json);
        }
    }
}

/// `{endpoint}/volumes/{id}`.
fn volume_url(endpoint: &Url, id: &str) -> Result<Url, OpenStackError> {
    let mut url = endpoint.clone();
    url.set_query(None);
    url.set_fragment(None);
    url.path_segments_mut()
        .map_err(|()| Call::garbage(CINDER, endpoint, "the endpoint cannot have a path"))?
        .pop_if_empty()
        .extend(["volumes", id]);
    Ok(url)
}

/// A volume ID as one path segment: not empty, at most 255 characters, and only
/// letters, digits, `-`, `_` and `.` (a Cinder ID is a UUID), so an ID from a
/// PersistentVolume cannot reach another resource.
pub fn check_volume_id(id: &str) -> Result<&str, OpenStackError> {
    let id = id.trim();
    if id.is_empty() {
        return Err(OpenStackError::InvalidName(InvalidName::new(
            "volume ID",
            id,
            "it is empty",
        )));
    }
    if id.len() > 255 {
        return Err(OpenStackError::InvalidName(InvalidName::new(
            "volume ID",
            id,
            "it is longer than 255 characters",
        )));
    }
    if id == "."
        || id == ".."
        || !id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err(OpenStackError::InvalidName(InvalidName::new(
            "volume ID",
            id,
            "only letters, digits, '-', '_' and '.' may appear in it (a Cinder volume ID is a UUID)",
        )));
    }
    Ok(id)
}

/// The volume in a Cinder `GET /volumes/{id}` answer: its ID and availability
/// zone (none when empty). Public for the fuzz targets (fuzz/): `url` only
/// names the answer in errors.
pub fn parse_volume(url: &Url, json: &Value) -> Result<Volume, OpenStackError> {
    let volume = json
        .get("volume")
        .filter(|v| v.is_object())
        .ok_or_else(|| Call::garbage(CINDER, url, "the answer has no volume"))?;
    let id = volume["id"].as_str().map(str::trim).unwrap_or_default();
    let availability_zone = match volume.get("availability_zone") {
        None | Some(Value::Null) => None,
        Some(Value::String(zone)) => Some(zone.trim()).filter(|z| !z.is_empty()).map(str::to_owned),
        Some(_) => return Err(Call::garbage(CINDER, url, "availability_zone is not text")),
    };
    Ok(Volume {
        id: crate::logging::clean_text(id, &[], 255),
        availability_zone: availability_zone.map(|z| crate::logging::clean_text(&z, &[], 255)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn volume_urls_and_ids() {
        let endpoint = Url::parse("https://cinder.example:8776/v3/0123abcd").expect("a URL");
        let url = volume_url(&endpoint, "5a1c9e0e-1f6e-4d55-9a3e-3b0f4e0c7d11").expect("joined");
        assert_eq!(
            url.as_str(),
            "https://cinder.example:8776/v3/0123abcd/volumes/5a1c9e0e-1f6e-4d55-9a3e-3b0f4e0c7d11"
        );
        let slash = Url::parse("https://cinder.example/v3/p/").expect("a URL");
        assert_eq!(
            volume_url(&slash, "v1").expect("joined").as_str(),
            "https://cinder.example/v3/p/volumes/v1"
        );
        for bad in ["", "..", "a/b", "a?b", "a b", "a%2Fb"] {
            let error = check_volume_id(bad).expect_err("not an ID").to_string();
            assert!(error.starts_with("volume ID "), "{bad:?}: {error}");
        }
    }

    #[test]
    fn volumes_with_and_without_a_zone() {
        let url = Url::parse("https://cinder.example/v3/p/volumes/v").expect("a URL");
        let zoned =
            parse_volume(&url, &json!({"volume": {"id": "v", "availability_zone": "nova-az1"}})).expect("a volume");
        assert_eq!(zoned.availability_zone.as_deref(), Some("nova-az1"));
        for none in [
            json!({"volume": {"id": "v"}}),
            json!({"volume": {"id": "v", "availability_zone": ""}}),
        ] {
            assert_eq!(parse_volume(&url, &none).expect("a volume").availability_zone, None);
        }
        assert!(parse_volume(&url, &json!({"volumes": []})).is_err());
        assert!(parse_volume(&url, &json!({"volume": {"availability_zone": 3}})).is_err());
    }
}
