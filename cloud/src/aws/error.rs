//! What an AWS call can fail with, and how an answer's body and error
//! document are read: shared by the signed client and the unsigned STS call.

use url::Url;

use super::credentials::CredentialsError;
use super::endpoints::{self, Service};
use crate::http::BodyError;

/// Error codes AWS uses for throttling and passing trouble.
const RETRYABLE_CODES: &[&str] = &[
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestThrottledException",
    "TooManyRequestsException",
    "ProvisionedThroughputExceededException",
    "TransactionInProgressException",
    "RequestLimitExceeded",
    "BandwidthLimitExceeded",
    "LimitExceededException",
    "RequestThrottled",
    "SlowDown",
    "PriorRequestNotComplete",
    "EC2ThrottledException",
    "RequestTimeout",
    "RequestTimeoutException",
    "IDPCommunicationError",
    "InternalError",
    "InternalFailure",
    "ServiceUnavailable",
];

#[derive(Debug, thiserror::Error)]
pub enum AwsError {
    #[error("{service} {action}: {code} (HTTP {status}): {message}")]
    Api {
        service: &'static str,
        action: &'static str,
        status: u16,
        code: String,
        message: String,
    },
    #[error("{service} {action} at {url}: {reason}")]
    Transport {
        service: &'static str,
        action: &'static str,
        url: String,
        reason: String,
        timeout: bool,
    },
    #[error("{service} {action}: no answer within the deadline ({attempts} attempts); last error: {last}")]
    Deadline {
        service: &'static str,
        action: &'static str,
        attempts: u32,
        last: String,
        /// Whether the last attempt itself ran out of time (rather than failing,
        /// e.g. a refused connection or an untrusted certificate).
        last_timed_out: bool,
    },
    #[error("{service} {action}: unreadable answer: {problem}")]
    Garbage {
        service: &'static str,
        action: &'static str,
        problem: String,
    },
    #[error("{0}")]
    Credentials(#[from] CredentialsError),
    #[error("{0}")]
    Endpoint(#[from] endpoints::EndpointError),
    #[error("cannot sign the {service} request: {reason}")]
    Signing { service: &'static str, reason: String },
}

impl AwsError {
    /// The AWS error code, for API errors.
    pub fn code(&self) -> Option<&str> {
        match self {
            AwsError::Api { code, .. } => Some(code),
            _ => None,
        }
    }

    pub(crate) fn retryable(&self) -> bool {
        match self {
            AwsError::Api { status, code, .. } => {
                *status >= 500 || *status == 429 || RETRYABLE_CODES.contains(&code.as_str())
            }
            AwsError::Transport { .. } => true,
            _ => false,
        }
    }
}

pub(crate) fn transport_error(
    service: &'static str,
    action: &'static str,
    url: &Url,
    error: reqwest::Error,
) -> AwsError {
    let timeout = error.is_timeout();
    let error = error.without_url();
    let reason = crate::logging::error_chain(&error);
    AwsError::Transport {
        service,
        action,
        url: crate::http::shown_url(url),
        reason,
        timeout,
    }
}

/// The body of an answer of `service`, at most its `max_answer` bytes (an
/// error answer too).
pub(crate) async fn read_answer(
    service: Service,
    action: &'static str,
    url: &Url,
    response: reqwest::Response,
) -> Result<Vec<u8>, AwsError> {
    let service_name = service.signing_name;
    crate::http::read_body(response, service.max_answer)
        .await
        .map_err(|e| match e {
            BodyError::Transport(e) => transport_error(service_name, action, url, e),
            too_large @ BodyError::TooLarge { .. } => AwsError::Garbage {
                service: service_name,
                action,
                problem: too_large.to_string(),
            },
        })
}

/// An error from a query-protocol (XML) service: EC2's `Response/Errors/Error`
/// or STS's `ErrorResponse/Error`, with every piece of `secrets` (what the
/// call sent: its token, its keys) cut out, as a server may echo them.
pub fn xml_error(service: &'static str, action: &'static str, status: u16, body: &str, secrets: &[&str]) -> AwsError {
    let document = roxmltree::Document::parse(body).ok();
    let field = |name: &str| {
        document.as_ref().and_then(|d| {
            d.descendants()
                .find(|n| n.has_tag_name("Error"))
                .and_then(|error| error.children().find(|n| n.has_tag_name(name)))
                .and_then(|n| n.text())
                .map(str::to_owned)
        })
    };
    api_error(
        service,
        action,
        status,
        &field("Code").unwrap_or_else(|| format!("HTTP{status}")),
        &field("Message").unwrap_or_default(),
        secrets,
    )
}

/// Longest text taken from an AWS error into a message.
const MAX_CODE: usize = 100;
const MAX_MESSAGE: usize = 300;

/// An API error whose remote text is made fit for one line of a log, with
/// every piece of `secrets` cut out.
fn api_error(
    service: &'static str,
    action: &'static str,
    status: u16,
    code: &str,
    message: &str,
    secrets: &[&str],
) -> AwsError {
    AwsError::Api {
        service,
        action,
        status,
        code: crate::logging::clean_text(code, secrets, MAX_CODE),
        message: crate::logging::clean_text(message, secrets, MAX_MESSAGE),
    }
}

/// An error from a JSON-protocol service (`__type` or `x-amzn-ErrorType`),
/// with every piece of `secrets` cut out.
pub fn json_error(
    service: &'static str,
    action: &'static str,
    status: u16,
    header: Option<&str>,
    body: &[u8],
    secrets: &[&str],
) -> AwsError {
    let value: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    let raw = header
        .map(str::to_owned)
        .or_else(|| value.get("__type").and_then(|t| t.as_str()).map(str::to_owned))
        .unwrap_or_else(|| format!("HTTP{status}"));
    // `aws.protocoltests#Code` or `Code:http://...`: the code is the short name
    // (none, as in `a#`: the status).
    let short = raw.rsplit('#').next().unwrap_or(&raw).split(':').next().unwrap_or(&raw);
    let status_code = format!("HTTP{status}");
    let code = if short.trim().is_empty() { &status_code } else { short };
    let message = ["message", "Message"]
        .iter()
        .find_map(|k| value.get(*k).and_then(|m| m.as_str()))
        .unwrap_or_default();
    api_error(service, action, status, code, message, secrets)
}
