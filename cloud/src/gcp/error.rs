//! What went wrong in a Google call, typed, and Google's error bodies read.
//!
//! An operator reading one log line must learn which URL was called, what
//! HTTP status came back and what Google said (`error.errors[0].reason` or
//! the `ErrorInfo` reason, `error.status`, `error.message`; or OAuth's
//! `error`/`error_description` from STS), without any secret the call held:
//! every piece of remote text goes through [`clean_text`] with those secrets.

use std::fmt;

use serde_json::Value;

use crate::api::{
    CODE_LIMIT, CallError, CallFailure, CloudError, InvalidName, MESSAGE_LIMIT, raw_message, remote_text, show_detail,
};
use crate::http::HttpClientError;
use crate::metadata::MetadataError;

/// The most of a reason or status kept (they are short identifiers).
const REASON_LIMIT: usize = CODE_LIMIT;

/// Why a Google call (or setting up for one) failed.
#[derive(Debug, thiserror::Error)]
pub enum GcpError {
    /// A call to a Google API failed: refused (404: [`CallFailure::is_not_found`]),
    /// unanswered in time, unreachable or answered with something unusable.
    #[error(transparent)]
    Call(#[from] CallError<ErrorDetail>),
    #[error(transparent)]
    Client(#[from] HttpClientError),
    /// A name that cannot stand in an API path; nothing was sent.
    #[error("{} \"{}\" is not a valid name: {}", .0.what, .0.value, .0.problem)]
    InvalidName(InvalidName),
    /// The metadata server failed or is not there.
    #[error(transparent)]
    Metadata(#[from] MetadataError),
    /// `GCE_METADATA_HOST` (or the value given in its place) is not `host[:port]`.
    #[error("GCE_METADATA_HOST \"{value}\" {problem}")]
    MetadataHost { value: String, problem: String },
}

impl CallFailure for GcpError {
    type Detail = ErrorDetail;

    fn failed_call(&self) -> Option<&CallError<ErrorDetail>> {
        match self {
            Self::Call(call) => Some(call),
            _ => None,
        }
    }
}

impl CloudError for GcpError {
    fn read_detail(body: &[u8], secrets: &[&str]) -> ErrorDetail {
        ErrorDetail::parse(body, secrets)
    }
}

/// What Google said in an error body, cleaned for a log line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ErrorDetail {
    /// The machine-readable reason: `error.errors[0].reason` (`forbidden`,
    /// `notFound`, `insufficientPermissions`), else the reason of an
    /// `ErrorInfo` in `error.details` (`IAM_PERMISSION_DENIED`), else OAuth's
    /// `error` (`invalid_grant`, from STS).
    pub reason: Option<String>,
    /// `error.status`, the gRPC code name (`PERMISSION_DENIED`).
    pub status: Option<String>,
    /// `error.message` (or OAuth's `error_description`); for a body that is
    /// not Google's JSON, the start of the body itself.
    pub message: Option<String>,
}

impl fmt::Display for ErrorDetail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let code = match (&self.reason, &self.status) {
            (Some(reason), Some(status)) if reason != status => Some(format!("{reason} ({status})")),
            (Some(code), _) | (None, Some(code)) => Some(code.clone()),
            (None, None) => None,
        };
        show_detail(f, code.as_deref(), self.message.as_deref())
    }
}

impl ErrorDetail {
    /// Reads an error body, Google's JSON (`{"error": {...}}`) or OAuth's
    /// (`{"error": "...", "error_description": "..."}`); anything else is
    /// kept as the message. Every run of a secret in `secrets` is cut out.
    pub fn parse(body: &[u8], secrets: &[&str]) -> Self {
        let text = |value: &Value, limit| remote_text(value, secrets, limit);
        let Ok(json) = serde_json::from_slice::<Value>(body) else {
            return Self {
                message: raw_message(body, secrets),
                ..Self::default()
            };
        };
        let error = &json["error"];
        if error.is_string() {
            return Self {
                reason: text(error, REASON_LIMIT),
                status: None,
                message: text(&json["error_description"], MESSAGE_LIMIT),
            };
        }
        let info_reason = error["details"].as_array().and_then(|details| {
            details
                .iter()
                .filter(|d| d["@type"].as_str().is_some_and(|t| t.ends_with("google.rpc.ErrorInfo")))
                .find_map(|d| text(&d["reason"], REASON_LIMIT))
        });
        Self {
            reason: text(&error["errors"][0]["reason"], REASON_LIMIT).or(info_reason),
            status: text(&error["status"], REASON_LIMIT),
            message: text(&error["message"], MESSAGE_LIMIT)
                .or_else(|| text(&error["errors"][0]["message"], MESSAGE_LIMIT)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compute_errors_give_reason_and_message() {
        let body = br#"{"error":{"code":403,"message":"Required 'compute.disks.get' permission for 'projects/p/zones/z/disks/d'","errors":[{"message":"Required 'compute.disks.get' permission","domain":"global","reason":"forbidden"}]}}"#;
        let detail = ErrorDetail::parse(body, &[]);
        assert_eq!(detail.reason.as_deref(), Some("forbidden"));
        assert_eq!(detail.status, None);
        assert_eq!(
            detail.to_string(),
            "forbidden: Required 'compute.disks.get' permission for 'projects/p/zones/z/disks/d'"
        );
    }

    #[test]
    fn error_info_reason_and_status() {
        let body = br#"{"error":{"code":403,"message":"Permission 'iam.serviceAccounts.getAccessToken' denied on resource (or it may not exist).","status":"PERMISSION_DENIED","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"IAM_PERMISSION_DENIED","domain":"iam.googleapis.com"}]}}"#;
        let detail = ErrorDetail::parse(body, &[]);
        assert_eq!(detail.reason.as_deref(), Some("IAM_PERMISSION_DENIED"));
        assert_eq!(detail.status.as_deref(), Some("PERMISSION_DENIED"));
        assert!(
            detail
                .to_string()
                .starts_with("IAM_PERMISSION_DENIED (PERMISSION_DENIED): Permission 'iam.")
        );
    }

    #[test]
    fn oauth_errors_and_secrets() {
        let token = "eyJhbGciOiJSUzI1NiJ9.c3ViamVjdA.c2lnbmF0dXJl";
        let body = format!(
            r#"{{"error":"invalid_grant","error_description":"The given token {token} is invalid.\nE1 forged"}}"#
        );
        let detail = ErrorDetail::parse(body.as_bytes(), &[token]);
        assert_eq!(detail.reason.as_deref(), Some("invalid_grant"));
        assert_eq!(
            detail.message.as_deref(),
            Some("The given token <redacted> is invalid.\\nE1 forged")
        );
    }

    #[test]
    fn other_bodies_are_the_message() {
        let detail = ErrorDetail::parse(b"<html>\n502 Bad Gateway</html>", &[]);
        assert_eq!(detail.to_string(), "<html>\\n502 Bad Gateway</html>");
        assert_eq!(
            ErrorDetail::parse(b"", &[]).to_string(),
            "no error details in the answer"
        );
        assert_eq!(
            ErrorDetail::parse(br#"{"error":{"status":"NOT_FOUND"}}"#, &[]).to_string(),
            "NOT_FOUND"
        );
        let huge = "x".repeat(1 << 20);
        assert!(ErrorDetail::parse(huge.as_bytes(), &[]).to_string().chars().count() <= MESSAGE_LIMIT);
    }
}
