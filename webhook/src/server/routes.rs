//! The Routers: `POST /mutate` and `POST /validate` answer AdmissionReviews through the
//! one [`Reviewer::answer`](crate::review::Reviewer::answer) and count them from its
//! typed outcome; the admin Router serves `/healthz`, `/readyz` and `/metrics`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tokio::sync::Semaphore;
use tracing::Instrument as _;
use tracing::field::Empty;

use super::Limits;
use super::body::BodyReader;
use crate::metrics::Metrics;
use crate::review::{Check, ReviewError, Reviewer};

/// What `/readyz` reports: ready once the certificate is loaded and the listener bound,
/// and no longer once shutdown starts.
#[derive(Debug, Default)]
pub struct Health {
    serving: AtomicBool,
    shutting_down: AtomicBool,
}

impl Health {
    /// Whether the server takes traffic.
    pub fn is_ready(&self) -> bool {
        self.serving.load(Ordering::SeqCst) && !self.shutting_down.load(Ordering::SeqCst)
    }

    /// The certificate is loaded and the listener is bound.
    pub fn set_serving(&self) {
        self.serving.store(true, Ordering::SeqCst);
    }

    /// Shutdown has started.
    pub fn set_shutting_down(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
    }
}

/// What the handlers share.
#[derive(Debug, Clone)]
pub struct AppState {
    pub reviewer: Arc<Reviewer>,
    pub metrics: Arc<Metrics>,
    pub health: Arc<Health>,
}

impl AppState {
    /// State for `reviewer`, with fresh metrics and a not-yet-ready health.
    pub fn new(reviewer: Reviewer) -> Self {
        Self::with_metrics(reviewer, Arc::new(Metrics::new()))
    }

    /// State for `reviewer` reporting to `metrics` (which its lookups may share).
    pub fn with_metrics(reviewer: Reviewer, metrics: Arc<Metrics>) -> Self {
        Self {
            reviewer: Arc::new(reviewer),
            metrics,
            health: Arc::new(Health::default()),
        }
    }
}

/// The webhook Router: `POST /mutate` and `POST /validate` (bodies up to [`MAX_REVIEW_BYTES`](crate::review::MAX_REVIEW_BYTES)), with the
/// default body limits.
pub fn router(state: AppState) -> Router {
    router_with_limits(state, &Limits::default())
}

/// The webhook Router with `limits`' body deadline and budget of buffered body bytes.
pub fn router_with_limits(state: AppState, limits: &Limits) -> Router {
    let bodies = BodyReader {
        budget: Arc::new(Semaphore::new(
            limits.max_buffered_body_bytes.min(Semaphore::MAX_PERMITS),
        )),
        deadline: limits.body_read_timeout,
    };
    Router::new()
        .route(
            "/mutate",
            post(|state, request| admission(state, request, Check::Mutate)),
        )
        .route(
            "/validate",
            post(|state, request| admission(state, request, Check::Validate)),
        )
        .with_state(MutateState { app: state, bodies })
}

#[derive(Debug, Clone)]
struct MutateState {
    app: AppState,
    bodies: BodyReader,
}

/// The admin Router: `/healthz`, `/readyz` and `/metrics`.
pub fn admin_router(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(state)
}

async fn readyz(State(state): State<AppState>) -> Response {
    if state.health.is_ready() {
        (StatusCode::OK, "ok\n").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready\n").into_response()
    }
}

async fn metrics(State(state): State<AppState>) -> Response {
    match state.metrics.encode() {
        Ok(text) => (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

async fn admission(State(state): State<MutateState>, request: Request, check: Check) -> Response {
    let started = Instant::now();
    let span = tracing::info_span!(
        "admission",
        uid = Empty,
        check = check.as_str(),
        kind = Empty,
        // Not `name`: JSON logs give the span's own name ("admission") under that key.
        object_name = Empty,
        operation = Empty,
        outcome = Empty
    );
    let (outcome, allowed, response) = async {
        match state.bodies.read(request).await {
            Ok((body, budget)) => {
                let answered = answer(&state.app, &body, check).await;
                drop(budget);
                answered
            }
            Err(error) => {
                tracing::info!("{error}");
                let (outcome, status) = error.outcome();
                (outcome, false, (status, format!("{error}\n")).into_response())
            }
        }
    }
    .instrument(span.clone())
    .await;
    span.record("outcome", outcome);
    let elapsed = started.elapsed();
    state.app.metrics.request(check.as_str(), outcome, allowed, elapsed);
    span.in_scope(|| {
        tracing::info!(
            allowed,
            status = response.status().as_u16(),
            micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX),
            "admission answered"
        );
    });
    response
}

/// The outcome label, whether the request was allowed, and the HTTP response.
async fn answer(state: &AppState, body: &[u8], check: Check) -> (&'static str, bool, Response) {
    match state.reviewer.answer(body, check).await {
        Ok(answer) => {
            if let Some((lookup, result)) = &answer.lookup {
                state.metrics.lookup(lookup, *result);
            }
            (
                answer.outcome.as_str(),
                answer.allowed,
                ([(header::CONTENT_TYPE, "application/json")], answer.body).into_response(),
            )
        }
        Err(error @ ReviewError::Encode(_)) => {
            tracing::error!("{error}");
            (
                "error",
                false,
                (StatusCode::INTERNAL_SERVER_ERROR, format!("{error}\n")).into_response(),
            )
        }
        Err(error) => {
            let (outcome, status) = match error {
                ReviewError::TooLarge => ("too-large", StatusCode::PAYLOAD_TOO_LARGE),
                _ => ("bad-request", StatusCode::BAD_REQUEST),
            };
            tracing::info!("not an AdmissionReview: {error}");
            (outcome, false, (status, format!("{error}\n")).into_response())
        }
    }
}
