//! What went wrong in an OpenStack call, typed, and Keystone's and Cinder's error
//! bodies read.
//!
//! An operator reading one log line must learn which URL was called, what HTTP status
//! came back and what OpenStack said: Keystone's `{"error": {"code", "title",
//! "message"}}` or a Cinder fault `{"itemNotFound": {"code", "message"}}`, never a
//! password, secret or token the call held: every piece of remote text goes through
//! [`clean_text`] with those secrets.

use std::fmt;
use std::time::Duration;

use serde_json::Value;

use crate::http::BodyError;
use crate::logging::clean_text;

/// The most of OpenStack's message kept in an error.
const MESSAGE_LIMIT: usize = 500;
/// The most of a fault name or title kept (they are short identifiers).
const KIND_LIMIT: usize = 100;

#[derive(Debug, thiserror::Error)]
pub enum OpenStackError {
    /// OpenStack answered 404: the volume (or the API path) does not exist.
    #[error("{service}: {url} not found (HTTP 404: {detail})")]
    NotFound {
        service: &'static str,
        url: String,
        detail: ErrorDetail,
    },
    /// OpenStack answered with an error status other than 404.
    #[error("{service} answered HTTP {status} for {url}: {detail}")]
    Api {
        service: &'static str,
        url: String,
        status: u16,
        detail: ErrorDetail,
    },
    /// No answer within the caller's deadline (or the client's timeout).
    #[error("{service} did not answer {url} within {after:?}")]
    Deadline {
        service: &'static str,
        url: String,
        after: Duration,
    },
    #[error("cannot reach {service} at {url}: {reason}")]
    Transport {
        service: &'static str,
        url: String,
        reason: String,
    },
    /// An answer we cannot use (a token answer without `X-Subject-Token`, a volume
    /// without its fields, …).
    #[error("{service} sent an unusable answer for {url}: {problem}")]
    Garbage {
        service: &'static str,
        url: String,
        problem: String,
    },
    #[error("{service}: {source}")]
    TooLarge {
        service: &'static str,
        #[source]
        source: BodyError,
    },
    #[error(transparent)]
    Client(#[from] crate::http::HttpClientError),
    #[error(transparent)]
    Endpoint(#[from] crate::endpoint::EndpointError),
    /// The token's catalog has no block-storage endpoint for the region and interface.
    #[error(
        "Keystone's catalog at {url} has no block-storage endpoint (types block-storage, volumev3, volumev2, volume, block-store) for region {region:?} and interface {interface}; it has: {found}; set the region (and interface) to one of these"
    )]
    NoEndpoint {
        url: String,
        region: String,
        interface: &'static str,
        /// What the catalog has: `type region interface` of each endpoint.
        found: String,
    },
    /// Several endpoints of the preferred type match: gophercloud refuses to guess too.
    #[error(
        "Keystone's catalog at {url} has several {kind} endpoints for region {region:?} and interface {interface}: {found}"
    )]
    AmbiguousEndpoint {
        url: String,
        kind: String,
        region: String,
        interface: &'static str,
        found: String,
    },
    /// A value that cannot stand where it would be sent (a volume ID as a path
    /// segment); nothing was sent.
    #[error("{what} {value:?} is not valid: {problem}")]
    InvalidName {
        what: &'static str,
        value: String,
        problem: &'static str,
    },
    /// The CA file could not be read or holds no certificate.
    #[error("the CA file {path}: {problem}")]
    CaFile { path: String, problem: String },
}

crate::api::cloud_error!(OpenStackError, ErrorDetail);

impl OpenStackError {
    /// True for OpenStack's 404: the resource does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, OpenStackError::NotFound { .. })
    }

    /// The HTTP status OpenStack answered, for API errors.
    pub fn status(&self) -> Option<u16> {
        match self {
            OpenStackError::NotFound { .. } => Some(404),
            OpenStackError::Api { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// OpenStack's error details, for API errors.
    pub fn detail(&self) -> Option<&ErrorDetail> {
        match self {
            OpenStackError::NotFound { detail, .. } | OpenStackError::Api { detail, .. } => Some(detail),
            _ => None,
        }
    }

    pub(crate) fn invalid(what: &'static str, value: &str, problem: &'static str) -> Self {
        OpenStackError::InvalidName {
            what,
            value: clean_text(value, &[], 80),
            problem,
        }
    }
}

/// What OpenStack said in an error body, cleaned for a log line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ErrorDetail {
    /// Keystone's `error.title` (`Unauthorized`) or Cinder's fault name
    /// (`itemNotFound`, `badRequest`, `overLimit`).
    pub kind: Option<String>,
    /// `message`; for a body that is neither shape, the start of the body itself.
    pub message: Option<String>,
}

impl fmt::Display for ErrorDetail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.kind, &self.message) {
            (Some(kind), Some(message)) => write!(f, "{kind}: {message}"),
            (Some(text), None) | (None, Some(text)) => f.write_str(text),
            (None, None) => f.write_str("no error details in the answer"),
        }
    }
}

impl ErrorDetail {
    /// Reads an error body in Keystone's or Cinder's shape; anything else is kept as
    /// the message. Every run of a secret in `secrets` is cut out.
    pub fn parse(body: &[u8], secrets: &[&str]) -> Self {
        let text = |value: &Value, limit| {
            value
                .as_str()
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| clean_text(s, secrets, limit))
        };
        let raw = || {
            let body = String::from_utf8_lossy(body);
            Self {
                kind: None,
                message: Some(body.trim())
                    .filter(|b| !b.is_empty())
                    .map(|b| clean_text(b, secrets, MESSAGE_LIMIT)),
            }
        };
        let Ok(Value::Object(json)) = serde_json::from_slice::<Value>(body) else {
            return raw();
        };
        // Keystone: {"error": {"code": 401, "title": "Unauthorized", "message": "…"}}.
        if let Some(error) = json.get("error").filter(|e| e.is_object()) {
            return Self {
                kind: text(&error["title"], KIND_LIMIT),
                message: text(&error["message"], MESSAGE_LIMIT),
            };
        }
        // Cinder (and Nova): one fault, {"itemNotFound": {"code": 404, "message": "…"}}.
        if let Some((fault, inner)) = json.iter().find(|(_, v)| v.get("message").is_some()) {
            return Self {
                kind: Some(clean_text(fault, secrets, KIND_LIMIT)),
                message: text(&inner["message"], MESSAGE_LIMIT),
            };
        }
        raw()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keystone_and_cinder_errors() {
        let keystone =
            br#"{"error": {"code": 401, "message": "The request you have made requires authentication.", "title": "Unauthorized"}}"#;
        assert_eq!(
            ErrorDetail::parse(keystone, &[]).to_string(),
            "Unauthorized: The request you have made requires authentication."
        );
        let cinder = br#"{"itemNotFound": {"code": 404, "message": "Volume 5a1c could not be found."}}"#;
        let detail = ErrorDetail::parse(cinder, &[]);
        assert_eq!(detail.kind.as_deref(), Some("itemNotFound"));
        assert_eq!(detail.to_string(), "itemNotFound: Volume 5a1c could not be found.");
        assert_eq!(
            ErrorDetail::parse(b"<html>\n502</html>", &[]).to_string(),
            "<html>\\n502</html>"
        );
        assert_eq!(
            ErrorDetail::parse(b"", &[]).to_string(),
            "no error details in the answer"
        );
    }

    #[test]
    fn secrets_are_cut_out_of_what_openstack_says() {
        let secret = "gAAAAABtoken-value-1234567890";
        let body =
            format!(r#"{{"error": {{"code": 401, "title": "Unauthorized", "message": "token {secret} expired"}}}}"#);
        let shown = ErrorDetail::parse(body.as_bytes(), &[secret]).to_string();
        assert!(!shown.contains("token-value"), "{shown}");
        assert!(shown.contains("<redacted>"), "{shown}");
    }
}
