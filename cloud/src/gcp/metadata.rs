//! The GCE metadata server: the node's project, its default service
//! account's token, e-mail and scopes, and instance attributes.
//!
//! Read through [`MetadataClient`] (never proxied, bounded answers, typed
//! errors), with `Metadata-Flavor: Google`, which the server requires. The
//! server is found as Google's own client libraries find it: the host named
//! by `GCE_METADATA_HOST` (`host[:port]`, plain HTTP), else the documented
//! name; tests point it at a fake on loopback.

use std::time::Duration;

use serde_json::Value;
use url::Url;

use super::error::GcpError;
use super::token::{AccessToken, TokenFuture, TokenSource};
use crate::api::InvalidName;
use crate::metadata::{MetadataClient, MetadataError, Provider};

/// The variable Google's libraries (Go, Python, Java, Node) read for the
/// metadata server's `host[:port]`.
pub const METADATA_HOST_ENV: &str = "GCE_METADATA_HOST";

/// The server's documented name, fully qualified (trailing dot) so that no
/// resolver search domain is tried first, as auth-provider-gcp calls it.
pub const DEFAULT_METADATA_BASE: &str = "http://metadata.google.internal./";

const FLAVOR: [(&str, &str); 1] = [("Metadata-Flavor", "Google")];
const ROOT: &str = "computeMetadata/v1/";
const DEFAULT_ACCOUNT: &str = "instance/service-accounts/default/";

/// The metadata server's base URL for a value of `GCE_METADATA_HOST`
/// (`None` or empty: unset), without reading the environment. As in
/// Google's libraries the value is `host[:port]` and the scheme plain HTTP
/// (`http://{value}/computeMetadata/v1/…`); a URL, path or user is refused
/// instead of producing a request to somewhere unexpected.
pub fn metadata_base(gce_metadata_host: Option<&str>) -> Result<Url, GcpError> {
    let Some(value) = gce_metadata_host.map(str::trim).filter(|v| !v.is_empty()) else {
        return Url::parse(DEFAULT_METADATA_BASE).map_err(|e| GcpError::MetadataHost {
            value: DEFAULT_METADATA_BASE.into(),
            problem: e.to_string(),
        });
    };
    let refused = |problem: String| GcpError::MetadataHost {
        value: crate::logging::clean_text(value, &[], 120),
        problem,
    };
    if value.contains("://") {
        return Err(refused(
            "is a URL: give host[:port] only, as Google's libraries read it (plain HTTP is implied)".into(),
        ));
    }
    if let Some(c) = value
        .chars()
        .find(|c| matches!(c, '/' | '?' | '#' | '@' | '\\') || c.is_whitespace())
    {
        return Err(refused(format!("contains {c:?}: give host[:port] only")));
    }
    let url = Url::parse(&format!("http://{value}/")).map_err(|e| refused(format!("is not host[:port] ({e})")))?;
    if url.host_str().is_none_or(str::is_empty) {
        return Err(refused("has no host".into()));
    }
    Ok(url)
}

/// A client of the GCE metadata server.
#[derive(Debug, Clone)]
pub struct GceMetadata {
    client: MetadataClient,
    base: Url,
}

impl GceMetadata {
    /// The server at `base` (a flag's value, or [`metadata_base`]'s), each
    /// request within `timeout`.
    pub fn new(base: Url, timeout: Duration) -> Result<Self, GcpError> {
        let client = MetadataClient::new(Provider::Gce, base.clone(), timeout)?;
        Ok(Self { client, base })
    }

    /// The server `GCE_METADATA_HOST` names, else the documented one.
    pub fn from_env(timeout: Duration) -> Result<Self, GcpError> {
        let value = match std::env::var(METADATA_HOST_ENV) {
            Ok(value) => Some(value),
            Err(std::env::VarError::NotPresent) => None,
            Err(std::env::VarError::NotUnicode(raw)) => {
                return Err(GcpError::MetadataHost {
                    value: raw.to_string_lossy().into_owned(),
                    problem: "is not valid UTF-8".into(),
                });
            }
        };
        Self::new(metadata_base(value.as_deref())?, timeout)
    }

    pub fn base(&self) -> &Url {
        &self.base
    }

    /// `project/project-id`: the project the instance runs in.
    pub async fn project_id(&self) -> Result<String, GcpError> {
        let path = format!("{ROOT}project/project-id");
        let id = self.client.get_required(&path, &FLAVOR).await?;
        Ok(super::check_name("project ID", id.trim())
            .map_err(|e| self.client.garbage(&path, e.to_string()))?
            .to_owned())
    }

    /// `instance/zone` (`projects/123/zones/us-central1-a`): the zone's name.
    pub async fn zone(&self) -> Result<String, GcpError> {
        let path = format!("{ROOT}instance/zone");
        let zone = self.client.get_required(&path, &FLAVOR).await?;
        let last = zone.trim().rsplit('/').next().unwrap_or_default();
        Ok(super::check_name("zone", last)
            .map_err(|e| self.client.garbage(&path, e.to_string()))?
            .to_owned())
    }

    /// The default service account's access token. A 404 means the
    /// instance has no service account.
    pub async fn default_token(&self) -> Result<AccessToken, GcpError> {
        let path = format!("{ROOT}{DEFAULT_ACCOUNT}token");
        let body = self.required(&path).await?;
        parse_token(&body).map_err(|problem| self.client.garbage(&path, problem).into())
    }

    /// The default service account's e-mail address.
    pub async fn default_email(&self) -> Result<String, GcpError> {
        let path = format!("{ROOT}{DEFAULT_ACCOUNT}email");
        let email = self.required(&path).await?;
        Ok(email.trim().to_owned())
    }

    /// The default service account's OAuth scopes (one per line in the
    /// answer), e.g. `https://www.googleapis.com/auth/cloud-platform`.
    pub async fn default_scopes(&self) -> Result<Vec<String>, GcpError> {
        let path = format!("{ROOT}{DEFAULT_ACCOUNT}scopes");
        let scopes = self.required(&path).await?;
        Ok(scopes
            .lines()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect())
    }

    /// `instance/attributes/{name}` (e.g. `google-dockercfg`); `None` when
    /// the instance has no such attribute.
    pub async fn attribute(&self, name: &str) -> Result<Option<String>, GcpError> {
        let valid = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'));
        if !valid {
            return Err(GcpError::InvalidName(InvalidName::new(
                "metadata attribute",
                name,
                "only letters, digits, '-' and '_' may appear in it",
            )));
        }
        Ok(self
            .client
            .get(&format!("{ROOT}instance/attributes/{name}"), &FLAVOR)
            .await?)
    }

    /// A path of the default service account: a 404 there means there is
    /// no such account, which the message says.
    async fn required(&self, path: &str) -> Result<String, GcpError> {
        self.client.get(path, &FLAVOR).await?.ok_or_else(|| {
            MetadataError::Status {
                provider: Provider::Gce.name(),
                url: self
                    .client
                    .url(path)
                    .map(|u| u.to_string())
                    .unwrap_or_else(|_| path.to_owned()),
                status: 404,
                hint: ": does the instance have a default service account?",
            }
            .into()
        })
    }
}

impl TokenSource<GcpError> for GceMetadata {
    fn token(&self) -> TokenFuture<'_> {
        Box::pin(self.default_token())
    }
}

/// `{"access_token": "…", "expires_in": 3599, "token_type": "Bearer"}`.
/// Problems never quote the answer: it holds the token.
pub fn parse_token(body: &str) -> Result<AccessToken, String> {
    let json: Value = serde_json::from_str(body).map_err(|_| "the token answer is not JSON".to_owned())?;
    let token = crate::token::bearer_access_token(&json)?;
    let expires_in = super::token::expires_in(&json["expires_in"]).ok_or("the token answer has no valid expires_in")?;
    Ok(AccessToken::new(token, expires_in))
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret;

    #[test]
    fn tokens_are_parsed_without_quoting_the_answer() {
        let token = parse_token(r#"{"access_token":"ya29.c.abc","expires_in":3599,"token_type":"Bearer"}"#).unwrap();
        assert_eq!(token.secret().expose_secret(), "ya29.c.abc");
        assert!(token.remaining() > Duration::from_secs(3590));
        for bad in [
            "ya29.c.not-json",
            r#"{"access_token":"ya29.c.abc"}"#,
            r#"{"access_token":"ya29.c.abc","expires_in":-5}"#,
            r#"{"access_token":"ya29.c.abc","expires_in":60,"token_type":"MAC"}"#,
            r#"{"expires_in":60}"#,
        ] {
            let problem = parse_token(bad).unwrap_err();
            assert!(!problem.contains("ya29"), "{problem}");
        }
        assert_eq!(
            super::super::token::expires_in(&Value::from("60")),
            Some(Duration::from_secs(60))
        );
    }
}
