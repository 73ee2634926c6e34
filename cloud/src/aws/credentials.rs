//! AWS credentials as a value: keys, session token, expiry and where they
//! came from; and why none could be found. The chain that finds them is
//! [`chain`](super::chain).

use std::fmt;
use std::time::{Duration, SystemTime};

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

/// Credentials are refreshed this long before they expire.
const REFRESH_MARGIN: Duration = Duration::from_secs(5 * 60);

#[derive(Clone)]
pub struct AwsCredentials {
    pub access_key_id: String,
    pub secret_access_key: SecretString,
    pub session_token: Option<SecretString>,
    pub expires_at: Option<SystemTime>,
    /// Where they came from, for messages.
    pub source: &'static str,
}

impl fmt::Debug for AwsCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AwsCredentials")
            .field("access_key_id", &self.access_key_id)
            .field("expires_at", &self.expires_at)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl AwsCredentials {
    pub(crate) fn for_signing(&self) -> aws_credential_types::Credentials {
        aws_credential_types::Credentials::new(
            self.access_key_id.clone(),
            self.secret_access_key.expose_secret().to_owned(),
            self.session_token.as_ref().map(|t| t.expose_secret().to_owned()),
            self.expires_at,
            self.source,
        )
    }

    pub(crate) fn fresh(&self, now: SystemTime) -> bool {
        self.expires_at.is_none_or(|at| at > now + REFRESH_MARGIN)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    #[error(
        "no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN (IRSA), use EKS Pod Identity, or run on EC2 with an instance role ({tried})"
    )]
    NotFound { tried: String },
    #[error("AWS credentials from {source_name}: {reason}")]
    Source { source_name: &'static str, reason: String },
}

/// The JSON document both IMDS (`iam/security-credentials/<role>`) and the
/// container credentials endpoints serve.
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct CredentialsDocument {
    access_key_id: String,
    secret_access_key: String,
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    expiration: Option<String>,
}

impl CredentialsDocument {
    /// `None` when `body` is not such a document (not JSON, or a key or
    /// secret missing or empty: every call would be refused for it).
    pub fn parse(body: &[u8]) -> Option<Self> {
        crate::json::object_from_slice::<Self>(body)
            .filter(|d| !d.access_key_id.is_empty() && !d.secret_access_key.is_empty())
    }

    pub fn into_credentials(self, source: &'static str) -> AwsCredentials {
        AwsCredentials {
            access_key_id: self.access_key_id,
            secret_access_key: SecretString::from(self.secret_access_key),
            session_token: self.token.map(SecretString::from),
            expires_at: self.expiration.as_deref().and_then(parse_timestamp),
            source,
        }
    }
}

/// An ISO 8601 UTC timestamp as AWS writes them (`2026-11-30T05:34:04Z`,
/// with or without fractional seconds).
pub fn parse_timestamp(text: &str) -> Option<SystemTime> {
    humantime::parse_rfc3339_weak(text.trim().trim_end_matches('Z')).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    #[test]
    fn timestamps() {
        let at = |t| parse_timestamp(t).map(|s| s.duration_since(UNIX_EPOCH).unwrap().as_secs());
        assert_eq!(at("2015-01-01T00:00:00Z"), Some(1_420_070_400));
        assert_eq!(at("2015-01-01T00:00:00.5Z"), Some(1_420_070_400));
        assert_eq!(at("yesterday"), None);
    }

    #[test]
    fn debug_never_shows_secrets() {
        let credentials = AwsCredentials {
            access_key_id: "AKIDEXAMPLE".into(),
            secret_access_key: SecretString::from("wJalrXUtnFEMI/K7MDENG"),
            session_token: Some(SecretString::from("FwoGZXIvYXdzEXAMPLE")),
            expires_at: None,
            source: "test",
        };
        let shown = format!("{credentials:?}");
        assert!(shown.contains("AKIDEXAMPLE"));
        assert!(!shown.contains("wJalr") && !shown.contains("FwoGZX"), "{shown}");
    }
}
