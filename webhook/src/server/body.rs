//! Request bodies, read within a deadline and a budget of bytes shared by all requests.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody as _};
use axum::extract::Request;
use axum::http::{StatusCode, header};
use thiserror::Error;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::review::MAX_REVIEW_BYTES;

/// Reads request bodies within a deadline and a budget of bytes shared by all requests.
#[derive(Debug, Clone)]
pub(super) struct BodyReader {
    pub(super) budget: Arc<Semaphore>,
    pub(super) deadline: Duration,
}

/// Why a request body was not read.
#[derive(Debug, Error)]
pub(super) enum BodyError {
    #[error("request body over {MAX_REVIEW_BYTES} bytes")]
    TooLarge,
    #[error("request body not received within {}", cloud_access::go_duration::format(*.0))]
    Timeout(Duration),
    #[error("too many request bodies buffered at once; try again")]
    Busy,
    #[error("cannot read the request body: {0}")]
    Read(#[source] axum::Error),
}

impl BodyError {
    /// The outcome label and the status.
    pub(super) fn outcome(&self) -> (&'static str, StatusCode) {
        match self {
            Self::TooLarge => ("too-large", StatusCode::PAYLOAD_TOO_LARGE),
            Self::Timeout(_) => ("body-timeout", StatusCode::REQUEST_TIMEOUT),
            Self::Busy => ("busy", StatusCode::SERVICE_UNAVAILABLE),
            Self::Read(_) => ("bad-request", StatusCode::BAD_REQUEST),
        }
    }
}

impl BodyReader {
    /// The whole body, and its share of the budget, to hold until the answer is built
    /// (parsing costs a multiple of the body).
    pub(super) async fn read(&self, request: Request) -> Result<(Bytes, Option<OwnedSemaphorePermit>), BodyError> {
        let declared = request
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        // Refused before any of the body is read: the client need not send it.
        let capacity = match declared {
            Some(n) if n > MAX_REVIEW_BYTES as u64 => return Err(BodyError::TooLarge),
            Some(n) => usize::try_from(n).unwrap_or(0),
            None => 0,
        };
        let mut body = request.into_body();
        // Pages are only touched as bytes arrive, so a declared length that is never sent
        // costs address space, not memory.
        let mut buffer = Vec::with_capacity(capacity);
        let mut held: Option<OwnedSemaphorePermit> = None;
        let read = async {
            while let Some(frame) = next_frame(&mut body).await {
                let Ok(data) = frame.map_err(BodyError::Read)?.into_data() else {
                    continue; // trailers
                };
                if buffer.len() + data.len() > MAX_REVIEW_BYTES {
                    return Err(BodyError::TooLarge);
                }
                // Refused, not queued: a queued request would still hold its connection
                // and its flow-control window, and the apiserver gives up within
                // timeoutSeconds anyway.
                let n = u32::try_from(data.len()).map_err(|_| BodyError::TooLarge)?;
                let permit = self
                    .budget
                    .clone()
                    .try_acquire_many_owned(n)
                    .map_err(|_| BodyError::Busy)?;
                match &mut held {
                    Some(held) => held.merge(permit),
                    None => held = Some(permit),
                }
                buffer.extend_from_slice(&data);
            }
            Ok(())
        };
        match tokio::time::timeout(self.deadline, read).await {
            Err(_) => Err(BodyError::Timeout(self.deadline)),
            Ok(Err(error)) => Err(error),
            Ok(Ok(())) => Ok((Bytes::from(buffer), held)),
        }
    }
}

async fn next_frame(body: &mut Body) -> Option<Result<hyper::body::Frame<Bytes>, axum::Error>> {
    std::future::poll_fn(|cx| std::pin::Pin::new(&mut *body).poll_frame(cx)).await
}
