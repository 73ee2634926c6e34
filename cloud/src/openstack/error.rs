//! What went wrong in an OpenStack call, typed, and Keystone's and Cinder's error
//! bodies read.
//!
//! An operator reading one log line must learn which URL was called, what HTTP status
//! came back and what OpenStack said: Keystone's `{"error": {"code", "title",
//! "message"}}` or a Cinder fault `{"itemNotFound": {"code", "message"}}`, never a
//! password, secret or token the call held: every piece of remote text goes through
//! [`clean_text`] with those secrets.

use serde_json::Value;

use crate::api::{CODE_LIMIT, CallError, CallFailure, CloudError, InvalidName};
use crate::endpoint::EndpointError;
use crate::http::HttpClientError;
use crate::logging::clean_text;

/// Why an OpenStack call (or setting up for one) failed.
#[derive(Debug, thiserror::Error)]
pub enum OpenStackError {
    /// A call to Keystone or Cinder failed: refused (404:
    /// [`CallFailure::is_not_found`]), unanswered in time, unreachable or
    /// answered with something unusable.
    #[error(transparent)]
    Call(#[from] CallError<ErrorDetail>),
    #[error(transparent)]
    Client(#[from] HttpClientError),
    /// A value that cannot stand where it would be sent; nothing was sent.
    #[error("{} \"{}\" is not valid: {}", .0.what, .0.value, .0.problem)]
    InvalidName(InvalidName),
    #[error(transparent)]
    Endpoint(#[from] EndpointError),
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
    /// The CA file could not be read or holds no certificate.
    #[error("the CA file {path}: {problem}")]
    CaFile { path: String, problem: String },
}

impl CallFailure for OpenStackError {
    type Detail = ErrorDetail;

    fn failed_call(&self) -> Option<&CallError<ErrorDetail>> {
        match self {
            Self::Call(call) => Some(call),
            _ => None,
        }
    }
}

impl CloudError for OpenStackError {
    fn read_detail(body: &[u8], secrets: &[&str]) -> ErrorDetail {
        read_detail(body, secrets)
    }
}

/// What OpenStack said in an error body, cleaned for a log line: the
/// `code` is Keystone's `error.title` or Cinder's fault name.
pub use crate::api::CodeMessage as ErrorDetail;

/// Reads an error body in Keystone's or Cinder's shape; anything else is kept as
/// the message. Every run of a secret in `secrets` is cut out.
pub fn read_detail(body: &[u8], secrets: &[&str]) -> ErrorDetail {
    let Ok(Value::Object(json)) = serde_json::from_slice::<Value>(body) else {
        return ErrorDetail::raw(body, secrets);
    };
    // Keystone: {"error": {"code": 401, "title": "Unauthorized", "message": "…"}}.
    if let Some(error) = json.get("error").filter(|e| e.is_object()) {
        return ErrorDetail::read(&error["title"], &error["message"], secrets);
    }
    // Cinder (and Nova): one fault, {"itemNotFound": {"code": 404, "message": "…"}}.
    if let Some((fault, inner)) = json.iter().find(|(_, v)| v.get("message").is_some()) {
        return ErrorDetail {
            code: Some(clean_text(fault, secrets, CODE_LIMIT)),
            ..ErrorDetail::read(&Value::Null, &inner["message"], secrets)
        };
    }
    ErrorDetail::raw(body, secrets)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keystone_and_cinder_errors() {
        let keystone =
            br#"{"error": {"code": 401, "message": "The request you have made requires authentication.", "title": "Unauthorized"}}"#;
        assert_eq!(
            read_detail(keystone, &[]).to_string(),
            "Unauthorized: The request you have made requires authentication."
        );
        let cinder = br#"{"itemNotFound": {"code": 404, "message": "Volume 5a1c could not be found."}}"#;
        let detail = read_detail(cinder, &[]);
        assert_eq!(detail.code.as_deref(), Some("itemNotFound"));
        assert_eq!(detail.to_string(), "itemNotFound: Volume 5a1c could not be found.");
        assert_eq!(
            read_detail(b"<html>\n502</html>", &[]).to_string(),
            "<html>\\n502</html>"
        );
        assert_eq!(read_detail(b"", &[]).to_string(), "no error details in the answer");
    }

    #[test]
    fn secrets_are_cut_out_of_what_openstack_says() {
        let secret = "gAAAAABtoken-value-1234567890";
        let body =
            format!(r#"{{"error": {{"code": 401, "title": "Unauthorized", "message": "token {secret} expired"}}}}"#);
        let shown = read_detail(body.as_bytes(), &[secret]).to_string();
        assert!(!shown.contains("token-value"), "{shown}");
        assert!(shown.contains("<redacted>"), "{shown}");
    }
}
