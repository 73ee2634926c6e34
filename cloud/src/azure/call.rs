//! One Azure call: sent within the caller's deadline, the answer read
//! through the crate's bounded reader, a refusal turned into a typed error
//! with Azure's own code and message and every secret of the call cut out.

use std::time::Instant;

use serde_json::Value;
use url::Url;

use super::error::{AzureError, ErrorDetail};
use crate::http::{BodyError, shown_url};

/// Far above any answer these calls get (a disk or a token is a few KB).
pub(crate) const MAX_ANSWER: usize = 1 << 20;

/// An answer, whatever its status.
pub(crate) struct Answer {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Vec<u8>,
}

/// Sends `request` (to `url`, for messages) and reads the answer, whatever
/// its status, before `deadline`.
pub(crate) async fn exchange(
    service: &'static str,
    url: &Url,
    request: reqwest::RequestBuilder,
    deadline: Instant,
) -> Result<Answer, AzureError> {
    let started = Instant::now();
    let exchange = async {
        let response = request.send().await.map_err(|e| transport(service, url, started, e))?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = crate::http::read_body(response, MAX_ANSWER)
            .await
            .map_err(|e| match e {
                BodyError::Transport(e) => transport(service, url, started, e),
                too_large => AzureError::TooLarge {
                    service,
                    source: too_large,
                },
            })?;
        Ok::<_, AzureError>(Answer { status, headers, body })
    };
    tokio::time::timeout_at(deadline.into(), exchange)
        .await
        .map_err(|_| AzureError::Deadline {
            service,
            url: shown_url(url),
            after: deadline.saturating_duration_since(started),
        })?
}

/// [`exchange`], then: 2xx gives the body; 404 is [`AzureError::NotFound`];
/// any other status is [`AzureError::Api`]. `secrets` (what the request
/// carried) are cut out of anything the server sent back.
pub(crate) async fn send(
    service: &'static str,
    url: &Url,
    request: reqwest::RequestBuilder,
    deadline: Instant,
    secrets: &[&str],
) -> Result<Vec<u8>, AzureError> {
    let answer = exchange(service, url, request, deadline).await?;
    check(service, url, answer, secrets)
}

/// The body of a 2xx answer, or the typed refusal.
pub(crate) fn check(service: &'static str, url: &Url, answer: Answer, secrets: &[&str]) -> Result<Vec<u8>, AzureError> {
    match answer.status {
        200..=299 => Ok(answer.body),
        404 => Err(AzureError::NotFound {
            service,
            url: shown_url(url),
            detail: ErrorDetail::parse(&answer.body, secrets),
        }),
        status => Err(AzureError::Api {
            service,
            url: shown_url(url),
            status,
            detail: ErrorDetail::parse(&answer.body, secrets),
        }),
    }
}

/// A transport failure, named by its cause (DNS, refused, TLS) but never by
/// reqwest's own rendering of the URL, which could carry a query.
pub(crate) fn transport(service: &'static str, url: &Url, started: Instant, error: reqwest::Error) -> AzureError {
    if error.is_timeout() {
        return AzureError::Deadline {
            service,
            url: shown_url(url),
            after: started.elapsed(),
        };
    }
    AzureError::Transport {
        service,
        url: shown_url(url),
        reason: crate::logging::clean_text(&crate::logging::error_chain(&error.without_url()), &[], 500),
    }
}

/// A JSON answer as a tree. Values are never quoted in the error (serde's
/// syntax errors name a line and column only): the answer may be a token.
pub(crate) fn json(service: &'static str, url: &Url, body: &[u8]) -> Result<Value, AzureError> {
    serde_json::from_slice(body).map_err(|e| garbage(service, url, format!("not JSON ({e})")))
}

pub(crate) fn garbage(service: &'static str, url: &Url, problem: impl Into<String>) -> AzureError {
    AzureError::Garbage {
        service,
        url: shown_url(url),
        problem: problem.into(),
    }
}
