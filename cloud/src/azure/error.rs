//! What went wrong in an Azure call, typed, and Azure's error bodies read.
//!
//! An operator reading one log line must learn which URL was called, what
//! HTTP status came back and what Azure said: Entra ID's and IMDS's OAuth
//! `error`/`error_description` (`invalid_client`, `AADSTS7000215: …`), ARM's
//! `error.code`/`error.message` (`AuthorizationFailed`, `ResourceNotFound`)
//! or a registry's `errors[0].code`/`message` (`UNAUTHORIZED`), without any
//! secret the call held: every piece of remote text goes through
//! [`clean_text`] with those secrets.

use serde_json::Value;

use crate::api::{CallError, CallFailure, CloudError, InvalidName};
use crate::endpoint::EndpointError;
use crate::files::FileError;
use crate::http::HttpClientError;

/// Why an Azure call (or setting up for one) failed.
#[derive(Debug, thiserror::Error)]
pub enum AzureError {
    /// A call to Entra ID, IMDS, ARM or a registry failed: refused (404:
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
    /// The federated token (client assertion) file could not be read.
    #[error("the federated token file: {0}")]
    AssertionFile(#[source] FileError),
    /// The cloud config names no way to get a token.
    #[error(
        "the Azure cloud config names no credentials: set useManagedIdentityExtension, aadClientId with aadClientSecret, or useFederatedWorkloadIdentityExtension with aadFederatedTokenFile"
    )]
    NoCredentials,
}

impl CallFailure for AzureError {
    type Detail = ErrorDetail;

    fn failed_call(&self) -> Option<&CallError<ErrorDetail>> {
        match self {
            Self::Call(call) => Some(call),
            _ => None,
        }
    }
}

impl CloudError for AzureError {
    fn read_detail(body: &[u8], secrets: &[&str]) -> ErrorDetail {
        read_detail(body, secrets)
    }
}

/// What Azure said in an error body, cleaned for a log line.
pub use crate::api::CodeMessage as ErrorDetail;

/// Reads an error body in any of Azure's shapes (Entra ID's and IMDS's OAuth
/// `error`/`error_description`, ARM's `error.code`/`error.message`, a
/// registry's `errors[0].code`/`message`); anything else is kept as the
/// message. Every run of a secret in `secrets` is cut out.
pub fn read_detail(body: &[u8], secrets: &[&str]) -> ErrorDetail {
    let Ok(json) = serde_json::from_slice::<Value>(body) else {
        return ErrorDetail::raw(body, secrets);
    };
    let error = &json["error"];
    if error.is_string() {
        return ErrorDetail::read(error, &json["error_description"], secrets);
    }
    if error.is_object() {
        return ErrorDetail::read(&error["code"], &error["message"], secrets);
    }
    let first = &json["errors"][0];
    ErrorDetail::read(&first["code"], &first["message"], secrets)
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
        let detail = read_detail(body.as_bytes(), &[secret]);
        assert_eq!(detail.code.as_deref(), Some("invalid_client"));
        assert_eq!(
            detail.to_string(),
            "invalid_client: AADSTS7000215: Invalid client secret provided: <redacted>.\\r\\nTrace ID: 1"
        );
    }

    #[test]
    fn arm_and_registry_errors() {
        let arm = br#"{"error":{"code":"AuthorizationFailed","message":"The client 'x' does not have authorization to perform action 'Microsoft.Compute/disks/read'."}}"#;
        let detail = read_detail(arm, &[]);
        assert_eq!(detail.code.as_deref(), Some("AuthorizationFailed"));
        assert!(detail.to_string().starts_with("AuthorizationFailed: The client 'x'"));
        let acr = br#"{"errors":[{"code":"UNAUTHORIZED","message":"authentication required","detail":null}]}"#;
        assert_eq!(
            read_detail(acr, &[]).to_string(),
            "UNAUTHORIZED: authentication required"
        );
        assert_eq!(
            read_detail(b"<html>\n502</html>", &[]).to_string(),
            "<html>\\n502</html>"
        );
        assert_eq!(read_detail(b"", &[]).to_string(), "no error details in the answer");
        assert_eq!(
            read_detail(br#"{"error":{"code":"NotFound"}}"#, &[]).to_string(),
            "NotFound"
        );
    }
}
