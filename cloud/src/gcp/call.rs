//! One Google API call: sent within the caller's deadline, the answer read
//! through the crate's bounded reader, a refusal turned into a typed error
//! with Google's own reason and every secret of the call cut out.

use std::time::Instant;

use serde_json::Value;
use url::Url;

use super::error::{ErrorDetail, GcpError};
use crate::http::{BodyError, shown_url};

/// Far above any answer these calls get (a disk is a few KB, a token less).
pub(crate) const MAX_ANSWER: usize = 1 << 20;

/// Sends `request` (to `url`, for messages) and reads the answer before
/// `deadline`. 2xx gives the body; 404 is [`GcpError::NotFound`]; any other
/// status is [`GcpError::Api`]. `secrets` (tokens the request carried) are
/// cut out of anything the server sent back.
pub(crate) async fn send(
    service: &'static str,
    url: &Url,
    request: reqwest::RequestBuilder,
    deadline: Instant,
    secrets: &[&str],
) -> Result<Vec<u8>, GcpError> {
    let started = Instant::now();
    let exchange = async {
        let response = request.send().await.map_err(|e| transport(service, url, started, e))?;
        let status = response.status().as_u16();
        let body = crate::http::read_body(response, MAX_ANSWER)
            .await
            .map_err(|e| match e {
                BodyError::Transport(e) => transport(service, url, started, e),
                too_large => GcpError::TooLarge {
                    service,
                    source: too_large,
                },
            })?;
        Ok::<_, GcpError>((status, body))
    };
    let (status, body) =
        tokio::time::timeout_at(deadline.into(), exchange)
            .await
            .map_err(|_| GcpError::Deadline {
                service,
                url: shown_url(url),
                after: deadline.saturating_duration_since(started),
            })??;
    match status {
        200..=299 => Ok(body),
        404 => Err(GcpError::NotFound {
            service,
            url: shown_url(url),
            detail: ErrorDetail::parse(&body, secrets),
        }),
        _ => Err(GcpError::Api {
            service,
            url: shown_url(url),
            status,
            detail: ErrorDetail::parse(&body, secrets),
        }),
    }
}

/// A transport failure, named by its cause (DNS, refused, TLS) but never by
/// reqwest's own rendering of the URL, which could carry a query.
fn transport(service: &'static str, url: &Url, started: Instant, error: reqwest::Error) -> GcpError {
    if error.is_timeout() {
        return GcpError::Deadline {
            service,
            url: shown_url(url),
            after: started.elapsed(),
        };
    }
    GcpError::Transport {
        service,
        url: shown_url(url),
        reason: crate::logging::clean_text(&crate::logging::error_chain(&error.without_url()), &[], 500),
    }
}

/// A JSON answer as a tree. Values are never quoted in the error (serde's
/// syntax errors name a line and column only): the answer may be a token.
pub(crate) fn json(service: &'static str, url: &Url, body: &[u8]) -> Result<Value, GcpError> {
    serde_json::from_slice(body).map_err(|e| garbage(service, url, format!("not JSON ({e})")))
}

pub(crate) fn garbage(service: &'static str, url: &Url, problem: impl Into<String>) -> GcpError {
    GcpError::Garbage {
        service,
        url: shown_url(url),
        problem: problem.into(),
    }
}

/// `url` joined with a relative API path built from checked names.
pub(crate) fn join(service: &'static str, base: &Url, path: &str) -> Result<Url, GcpError> {
    base.join(path)
        .map_err(|e| garbage(service, base, format!("cannot join {path:?}: {e}")))
}
