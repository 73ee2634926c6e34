//! The `dockercfg` and `dockercfg-url` flows: a Docker config held in an
//! instance attribute, or fetched from the URL one holds (https, or plain
//! http on loopback, only).

use std::collections::BTreeMap;

use cloud_access::SecureEndpoint;
use url::Url;

use super::{AuthFlow, GcpBackend, GcpBackendError};
use crate::backend::USER_AGENT;
use crate::backend::static_file::{DockerAuthEntry, MAX_DOCKER_CONFIG, usable_entries};
use crate::kubelet_config::UTF8_BOM;
use crate::protocol::{CacheKeyType, Credentials, RegistryAuth};

/// The instance attributes of the dockercfg flows.
pub const DOCKERCFG_ATTRIBUTE: &str = "google-dockercfg";
pub const DOCKERCFG_URL_ATTRIBUTE: &str = "google-dockercfg-url";

impl GcpBackend {
    pub(super) async fn dockercfg(&self) -> Result<Credentials, GcpBackendError> {
        let text = self.attribute(DOCKERCFG_ATTRIBUTE, AuthFlow::Dockercfg).await?;
        let source_name = format!("metadata attribute {DOCKERCFG_ATTRIBUTE}");
        self.dockercfg_answer(parse_dockercfg(text.as_bytes(), &source_name)?)
    }

    pub(super) async fn dockercfg_url(&self) -> Result<Credentials, GcpBackendError> {
        let raw = self.attribute(DOCKERCFG_URL_ATTRIBUTE, AuthFlow::DockercfgUrl).await?;
        let endpoint = dockercfg_endpoint(raw.trim())?;
        let url = endpoint.url().clone();
        let shown = shown_url(&url);
        let fetch_error = |problem: String| GcpBackendError::DockercfgFetch {
            url: shown.clone(),
            problem,
        };
        let http = cloud_access::http::http_client_for(USER_AGENT, self.settings.timeout, [&url])?;
        tracing::debug!(url = %shown, "fetching the Docker config");
        let response = http
            .get(url)
            .send()
            .await
            .map_err(|e| fetch_error(cloud_access::logging::error_chain(&e.without_url())))?;
        let status = response.status();
        if !status.is_success() {
            let redirect = if status.is_redirection() {
                " (redirects are not followed)"
            } else {
                ""
            };
            return Err(fetch_error(format!("HTTP {}{redirect}", status.as_u16())));
        }
        let limit = usize::try_from(MAX_DOCKER_CONFIG).unwrap_or(usize::MAX);
        let body = cloud_access::http::read_body(response, limit)
            .await
            .map_err(|e| match e {
                cloud_access::http::BodyError::Transport(e) => {
                    fetch_error(cloud_access::logging::error_chain(&e.without_url()))
                }
                cloud_access::http::BodyError::TooLarge { .. } => fetch_error(format!(
                    "the answer is larger than {} MiB, far more than a Docker config",
                    MAX_DOCKER_CONFIG >> 20
                )),
            })?;
        let source_name = format!("the Docker config at {shown}");
        self.dockercfg_answer(parse_dockercfg(&body, &source_name)?)
    }

    async fn attribute(&self, name: &'static str, flow: AuthFlow) -> Result<String, GcpBackendError> {
        let what = match flow {
            AuthFlow::DockercfgUrl => "reading the instance attribute google-dockercfg-url",
            _ => "reading the instance attribute google-dockercfg",
        };
        self.metadata()?
            .attribute(name)
            .await
            .map_err(|source| GcpBackendError::Metadata {
                what,
                source: Box::new(source),
            })?
            .filter(|text| !text.trim().is_empty())
            .ok_or(GcpBackendError::NoAttribute {
                attribute: name,
                flow: flow.name(),
            })
    }

    /// Every entry, keyed as written: the answer does not depend on the
    /// image, so kubelet may keep it for all of them (`Global`).
    fn dockercfg_answer(&self, auth: BTreeMap<String, RegistryAuth>) -> Result<Credentials, GcpBackendError> {
        tracing::debug!(keys = ?auth.keys().collect::<Vec<_>>(), "Docker config entries");
        Ok(Credentials {
            cache_key_type: CacheKeyType::Global,
            cache_duration: self.settings.cache_duration,
            auth,
        })
    }
}

/// The endpoint policy every credential-bearing URL passes (https, or http
/// on loopback; no user information), for the URL the metadata attribute
/// holds. The message never quotes the URL whole: a signed URL's query is a
/// credential.
fn dockercfg_endpoint(raw: &str) -> Result<SecureEndpoint, GcpBackendError> {
    let refused = |url: String, problem| GcpBackendError::DockercfgUrlRefused { url, problem };
    let Ok(url) = Url::parse(raw) else {
        return Err(refused("a value".into(), "is not a URL"));
    };
    SecureEndpoint::parse(DOCKERCFG_URL_ATTRIBUTE, raw).map_err(|e| {
        let problem = match e {
            cloud_access::EndpointError::Invalid { .. } => "is not a URL",
            cloud_access::EndpointError::Insecure { .. } => "is neither https nor http on a loopback address",
            cloud_access::EndpointError::Userinfo { .. } => "carries a username or password",
        };
        refused(shown_url(&url), problem)
    })
}

/// `url` without user information, query or fragment, cleaned for a log.
fn shown_url(url: &Url) -> String {
    let mut shown = url.clone();
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.set_query(None);
    shown.set_fragment(None);
    cloud_access::logging::clean_text(shown.as_str(), &[], 300)
}

/// A Docker config as auth-provider-gcp reads these attributes: the legacy
/// `.dockercfg` form (`{"REGISTRY": {"auth": …}}`); config.json's
/// `{"auths": {…}}` is read too. Entries are read as the `static` backend
/// reads them; no error quotes a value, and a document without one usable
/// entry is an error, not an empty answer.
pub fn parse_dockercfg(bytes: &[u8], source_name: &str) -> Result<BTreeMap<String, RegistryAuth>, GcpBackendError> {
    let bytes = bytes.strip_prefix(UTF8_BOM).unwrap_or(bytes);
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| GcpBackendError::DockercfgJson {
        source_name: source_name.to_owned(),
        line: e.line(),
        column: e.column(),
    })?;
    let entry_error = |field: String, problem| GcpBackendError::DockercfgEntry {
        source_name: source_name.to_owned(),
        field,
        problem,
    };
    let (entries, prefix) = match value.get("auths") {
        Some(auths) if auths.is_object() => (auths.clone(), "auths"),
        _ => (value, ""),
    };
    let entries: BTreeMap<String, DockerAuthEntry> = serde_json::from_value(entries).map_err(|_| {
        entry_error(
            if prefix.is_empty() {
                "the document".into()
            } else {
                "\"auths\"".into()
            },
            "must be an object of registry entries ({\"REGISTRY\": {\"auth\": \"…\"}})",
        )
    })?;
    let auth = usable_entries(entries, prefix).map_err(|p| entry_error(p.field, p.problem))?;
    if auth.is_empty() {
        return Err(entry_error(
            "the document".into(),
            "holds no entry with credentials (\"auth\", or \"username\" and \"password\")",
        ));
    }
    Ok(auth)
}

#[cfg(test)]
mod tests {
    use secrecy::ExposeSecret;

    use super::*;

    #[test]
    fn dockercfg_in_both_forms_without_quoting_values() {
        let legacy = br#"{"https://registry.example.com": {"auth": "dXNlcjpwYXNz", "email": "a@b"}}"#;
        let auth = parse_dockercfg(legacy, "attr").unwrap();
        let entry = &auth["https://registry.example.com"];
        assert_eq!(
            (entry.username.as_str(), entry.password.expose_secret()),
            ("user", "pass")
        );
        let modern = br#"{"auths": {"reg.io": {"username": "u", "password": "p"}}}"#;
        assert_eq!(parse_dockercfg(modern, "attr").unwrap().len(), 1);
        let bad = br#"{"reg.io": {"auth": "c2VjcmV0LXdpdGhvdXQtY29sb24="}}"#;
        let err = parse_dockercfg(bad, "attr").unwrap_err().to_string();
        assert!(
            err.starts_with("attr: [\"reg.io\"].auth decodes to text without"),
            "{err}"
        );
        assert!(!err.contains("c2Vj"), "{err}");
        for (input, want) in [
            (&b"{"[..], "is not valid JSON"),
            (b"[1]", "must be an object"),
            (b"{}", "holds no entry"),
            (br#"{"reg.io": {}}"#, "holds no entry"),
        ] {
            let err = parse_dockercfg(input, "attr").unwrap_err().to_string();
            assert!(err.contains(want), "{err}");
        }
    }

    #[test]
    fn dockercfg_urls_pass_the_endpoint_policy_without_being_quoted_whole() {
        assert!(dockercfg_endpoint("https://storage.googleapis.com/b/config.json?X-Goog-Signature=abc").is_ok());
        assert!(dockercfg_endpoint("http://127.0.0.1:8080/config.json").is_ok());
        for (raw, want) in [
            (
                "http://config.example.com/c.json?sig=s3cr3t",
                "http://config.example.com/c.json, which is neither https",
            ),
            ("https://u:s3cr3t@config.example.com/c.json", "carries a username"),
            ("file:///etc/passwd", "is neither https"),
            ("not a url s3cr3t", "a value, which is not a URL"),
        ] {
            let err = dockercfg_endpoint(raw).unwrap_err().to_string();
            assert!(err.contains(want), "{raw}: {err}");
            assert!(!err.contains("s3cr3t"), "{err}");
        }
    }
}
