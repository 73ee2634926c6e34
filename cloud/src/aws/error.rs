//! What an AWS call can fail with, and how an answer's body and error
//! document are read: shared by the signed client and the unsigned STS call.

use std::fmt;

use url::Url;

use super::credentials::CredentialsError;
use super::endpoints::{self, Service};
use crate::api::{CallError, CallErrorKind, CallFailure, shown_wait};
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

/// Why an AWS call (or setting up for one) failed.
#[derive(Debug, thiserror::Error)]
pub enum AwsError {
    /// One call failed (or the last of its attempts, when retrying cannot
    /// help): AWS refused it ([`CallErrorKind::Api`], its code in the
    /// detail), it did not get through, or its answer is unusable.
    #[error("{}", ShownCall(.action, .error))]
    Call {
        action: &'static str,
        error: CallError<AwsDetail>,
    },
    /// Retrying throttling and passing trouble ran out of attempts or of the
    /// deadline; `last` is the last attempt's failure (a timeout when it ran
    /// out of time itself, rather than failing: a refused connection, an
    /// untrusted certificate).
    #[error(
        "{} {action}: no answer within the deadline ({attempts} attempts); last error: {}",
        .last.service,
        ShownCall(.action, .last)
    )]
    Deadline {
        action: &'static str,
        attempts: u32,
        last: CallError<AwsDetail>,
    },
    #[error("{0}")]
    Credentials(#[from] CredentialsError),
    #[error("{0}")]
    Endpoint(#[from] endpoints::EndpointError),
    #[error("cannot sign the {service} request: {reason}")]
    Signing { service: &'static str, reason: String },
}

/// What AWS said refusing a call, cleaned for a log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsDetail {
    /// The error code (`InvalidVolume.NotFound`, `ThrottlingException`), else
    /// `HTTP<status>`.
    pub code: String,
    pub message: String,
}

impl fmt::Display for AwsDetail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

/// A call's failure in AWS's words: the service and action, and the URL
/// when the call did not get through.
struct ShownCall<'a>(&'a str, &'a CallError<AwsDetail>);

impl fmt::Display for ShownCall<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ShownCall(action, CallError { service, url, kind }) = self;
        match kind {
            CallErrorKind::Api { status, detail } => {
                write!(
                    f,
                    "{service} {action}: {} (HTTP {status}): {}",
                    detail.code, detail.message
                )
            }
            CallErrorKind::NotFound { detail } => {
                write!(f, "{service} {action}: {} (HTTP 404): {}", detail.code, detail.message)
            }
            CallErrorKind::Transport { reason, .. } => write!(f, "{service} {action} at {url}: {reason}"),
            CallErrorKind::Deadline { after } => {
                write!(
                    f,
                    "{service} {action} at {url}: no answer within {}",
                    shown_wait(*after)
                )
            }
            CallErrorKind::Garbage { problem } => write!(f, "{service} {action}: unreadable answer: {problem}"),
            CallErrorKind::TooLarge { source } => write!(f, "{service} {action}: unreadable answer: {source}"),
        }
    }
}

impl AwsError {
    /// A failure of `service`'s `action` at `url` (shown; empty when the
    /// failure names none).
    pub(crate) fn call(
        service: &'static str,
        action: &'static str,
        url: impl Into<String>,
        kind: CallErrorKind<AwsDetail>,
    ) -> Self {
        AwsError::Call {
            action,
            error: CallError::new(service, url, kind),
        }
    }

    /// An answer of `service`'s `action` we cannot use (read apart from its
    /// call: no URL).
    pub(crate) fn garbage(service: &'static str, action: &'static str, problem: impl Into<String>) -> Self {
        let problem = problem.into();
        Self::call(service, action, String::new(), CallErrorKind::Garbage { problem })
    }

    /// The AWS error code, for API errors.
    pub fn code(&self) -> Option<&str> {
        match self {
            AwsError::Call { error, .. } => error.detail().map(|d| d.code.as_str()),
            _ => None,
        }
    }

    pub(crate) fn retryable(&self) -> bool {
        let AwsError::Call { error, .. } = self else {
            return false;
        };
        match &error.kind {
            CallErrorKind::Api { status, detail } => {
                *status >= 500 || *status == 429 || RETRYABLE_CODES.contains(&detail.code.as_str())
            }
            CallErrorKind::Transport { .. } => true,
            _ => false,
        }
    }
}

impl CallFailure for AwsError {
    type Detail = AwsDetail;

    /// This call, or the last attempt after retries: a timeout when that
    /// attempt ran out of time itself.
    fn failed_call(&self) -> Option<&CallError<AwsDetail>> {
        match self {
            AwsError::Call { error, .. } => Some(error),
            AwsError::Deadline { last, .. } => Some(last),
            _ => None,
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
    AwsError::call(
        service,
        action,
        crate::http::shown_url(url),
        CallErrorKind::Transport { reason, timeout },
    )
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
            // Shown as an unreadable answer, as a body that does not parse.
            too_large @ BodyError::TooLarge { .. } => AwsError::call(
                service_name,
                action,
                crate::http::shown_url(url),
                CallErrorKind::Garbage {
                    problem: too_large.to_string(),
                },
            ),
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
    let detail = AwsDetail {
        code: crate::logging::clean_text(code, secrets, MAX_CODE),
        message: crate::logging::clean_text(message, secrets, MAX_MESSAGE),
    };
    // The URL is the caller's to know: an API error is shown without it.
    AwsError::call(service, action, String::new(), CallErrorKind::Api { status, detail })
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
