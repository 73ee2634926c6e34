//! What went wrong in an Azure call, typed, and Azure's error bodies read.
//!
//! An operator reading one log line must learn which URL was called, what
//! HTTP status came back and what Azure said: Entra ID's and IMDS's OAuth
//! `error`/`error_description` (`invalid_client`, `AADSTS7000215: …`), ARM's
//! `error.code`/`error.message` (`AuthorizationFailed`, `ResourceNotFound`)
//! or a registry's `errors[0].code`/`message` (`UNAUTHORIZED`), without any
//! secret the call held: every piece of remote text goes through
//! [`clean_text`] with those secrets.

use std::fmt;
use std::time::Duration;

use serde_json::Value;

use crate::files::FileError;
use crate::http::BodyError;
use crate::logging::clean_text;

/// The most of Azure's message kept in an error.
const MESSAGE_LIMIT: usize = 500;
/// The most of a code kept (they are short identifiers).
const CODE_LIMIT: usize = 100;

#[derive(Debug, thiserror::Error)]
pub enum AzureError {
    /// Azure answered 404: the resource (a disk, a resource group) does not
    /// exist. Distinct from other refusals.
    #[error("{service}: {url} not found (HTTP 404: {detail})")]
    NotFound {
        service: &'static str,
        url: String,
        detail: ErrorDetail,
    },
    /// Azure answered with an error status other than 404.
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
    /// An answer we cannot use (a success without a token, a registry
    /// challenge that is not Bearer, …).
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
    /// A value that cannot stand where it would be sent (a path segment, a
    /// registry host); nothing was sent.
    #[error("{what} {value:?} is not valid: {problem}")]
    InvalidName {
        what: &'static str,
        value: String,
        problem: &'static str,
    },
    /// The federated token (client assertion) file could not be read.
    #[error("the federated token file: {0}")]
    AssertionFile(#[source] FileError),
    /// The cloud config names no way to get a token.
    #[error(
        "the Azure cloud config names no credentials: set useManagedIdentityExtension, aadClientId with aadClientSecret, or useFederatedWorkloadIdentityExtension with aadFederatedTokenFile"
    )]
    NoCredentials,
}

crate::api::cloud_error!(AzureError, ErrorDetail);

impl AzureError {
    /// True for Azure's 404: the resource does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, AzureError::NotFound { .. })
    }

    /// The HTTP status Azure answered, for API errors.
    pub fn status(&self) -> Option<u16> {
        match self {
            AzureError::NotFound { .. } => Some(404),
            AzureError::Api { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// Azure's error details, for API errors.
    pub fn detail(&self) -> Option<&ErrorDetail> {
        match self {
            AzureError::NotFound { detail, .. } | AzureError::Api { detail, .. } => Some(detail),
            _ => None,
        }
    }

    pub(crate) fn invalid(what: &'static str, value: &str, problem: &'static str) -> Self {
        AzureError::InvalidName {
            what,
            value: clean_text(value, &[], 80),
            problem,
        }
    }
}

/// What Azure said in an error body, cleaned for a log line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ErrorDetail {
    /// The machine-readable code: OAuth's `error` (Entra ID, IMDS:
    /// `invalid_client`, `invalid_request`), ARM's `error.code`
    /// (`AuthorizationFailed`), or a registry's `errors[0].code`.
    pub code: Option<String>,
    /// `error_description` (Entra's starts with its `AADSTS…` number),
    /// `error.message`, `errors[0].message`; for a body that is none of
    /// these, the start of the body itself.
    pub message: Option<String>,
}

impl fmt::Display for ErrorDetail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.code, &self.message) {
            (Some(code), Some(message)) => write!(f, "{code}: {message}"),
            (Some(text), None) | (None, Some(text)) => f.write_str(text),
            (None, None) => f.write_str("no error details in the answer"),
        }
    }
}

impl ErrorDetail {
    /// Reads an error body in any of Azure's shapes; anything else is kept
    /// as the message. Every run of a secret in `secrets` is cut out.
    pub fn parse(body: &[u8], secrets: &[&str]) -> Self {
        let text = |value: &Value, limit| {
            value
                .as_str()
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| clean_text(s, secrets, limit))
        };
        let Ok(json) = serde_json::from_slice::<Value>(body) else {
            let body = String::from_utf8_lossy(body);
            return Self {
                code: None,
                message: Some(body.trim())
                    .filter(|b| !b.is_empty())
                    .map(|b| clean_text(b, secrets, MESSAGE_LIMIT)),
            };
        };
        let error = &json["error"];
        if error.is_string() {
            return Self {
                code: text(error, CODE_LIMIT),
                message: text(&json["error_description"], MESSAGE_LIMIT),
            };
        }
        if error.is_object() {
            return Self {
                code: text(&error["code"], CODE_LIMIT),
                message: text(&error["message"], MESSAGE_LIMIT),
            };
        }
        let first = &json["errors"][0];
        Self {
            code: text(&first["code"], CODE_LIMIT),
            message: text(&first["message"], MESSAGE_LIMIT),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entra_errors_give_error_and_description_without_the_secret() {
        let secret = "Qx8Q~super.secret-value_123";
        let body = format!(
            r#"{{"error":"invalid_client","error_description":"AADSTS7000215: Invalid client secret provided: {secret}.\r\nTrace ID: 1","error_codes":[7000215]}}"#
        );
        let detail = ErrorDetail::parse(body.as_bytes(), &[secret]);
        assert_eq!(detail.code.as_deref(), Some("invalid_client"));
        assert_eq!(
            detail.to_string(),
            "invalid_client: AADSTS7000215: Invalid client secret provided: <redacted>.\\r\\nTrace ID: 1"
        );
    }

    #[test]
    fn arm_and_registry_errors() {
        let arm = br#"{"error":{"code":"AuthorizationFailed","message":"The client 'x' does not have authorization to perform action 'Microsoft.Compute/disks/read'."}}"#;
        let detail = ErrorDetail::parse(arm, &[]);
        assert_eq!(detail.code.as_deref(), Some("AuthorizationFailed"));
        assert!(detail.to_string().starts_with("AuthorizationFailed: The client 'x'"));
        let acr = br#"{"errors":[{"code":"UNAUTHORIZED","message":"authentication required","detail":null}]}"#;
        assert_eq!(
            ErrorDetail::parse(acr, &[]).to_string(),
            "UNAUTHORIZED: authentication required"
        );
        assert_eq!(
            ErrorDetail::parse(b"<html>\n502</html>", &[]).to_string(),
            "<html>\\n502</html>"
        );
        assert_eq!(
            ErrorDetail::parse(b"", &[]).to_string(),
            "no error details in the answer"
        );
        assert_eq!(
            ErrorDetail::parse(br#"{"error":{"code":"NotFound"}}"#, &[]).to_string(),
            "NotFound"
        );
    }
}
