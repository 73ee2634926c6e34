//! The HTTPS server: the `/mutate` Router, the plain-HTTP admin Router (`/healthz`,
//! `/readyz`, `/metrics`), the accept loops with their limits, and the shutdown sequence
//! (not-ready, keep serving for a delay, stop accepting, drain with a deadline).
//!
//! What a client can hold is bounded ([`Limits`]): connections per listener, time
//! (handshake, request head, body, idle), HTTP/2 streams and flow-control windows, and
//! the bytes of request bodies buffered at once across all connections.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes, HttpBody as _};
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use hyper::server::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulConnection;
use hyper_util::service::TowerToHyperService;
use thiserror::Error;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tracing::Instrument as _;
use tracing::field::Empty;

use crate::decision::OUTCOME_AUDIT_KEY;
use crate::metrics::Metrics;
use crate::review::{MAX_REVIEW_BYTES, ReviewError, Reviewer, encode_response, parse_review};
use crate::tls::{CertReloader, TlsError, TlsFiles, server_config};

/// A client has this long to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// The read buffer of an HTTP/1 connection, so also the largest request head (431
/// beyond). The apiserver's heads are well under 1 KiB; hyper's default is 400 KiB.
const H1_MAX_BUF: usize = 16 * 1024;
/// The largest HTTP/2 header list, as for HTTP/1.
const H2_MAX_HEADER_LIST: u32 = 16 * 1024;
/// HTTP/2 flow-control windows: how much a client may send ahead of the handler
/// reading it, per stream and per connection (hyper's default is 1 MiB each). Reviews
/// of PVs are a few KiB; a 4 MiB one needs a few window updates.
const H2_STREAM_WINDOW: u32 = 64 * 1024;
const H2_CONNECTION_WINDOW: u32 = 256 * 1024;
/// How long a closing connection with nothing open may wait for the client to see the
/// GOAWAY (Go's `goAwayTimeout`).
const GOAWAY_GRACE: Duration = Duration::from_secs(1);

/// Why the server could not start or stopped with an error.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ServeError {
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error("{flag} {addr}: cannot listen: {source}")]
    Bind {
        flag: &'static str,
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot install the signal handlers: {0}")]
    Signals(#[source] std::io::Error),
}

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

/// The webhook Router: `POST /mutate` (bodies up to [`MAX_REVIEW_BYTES`]), with the
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
        .route("/mutate", post(mutate))
        .with_state(MutateState { app: state, bodies })
}

#[derive(Debug, Clone)]
struct MutateState {
    app: AppState,
    bodies: BodyReader,
}

/// Reads request bodies within a deadline and a budget of bytes shared by all requests.
#[derive(Debug, Clone)]
struct BodyReader {
    budget: Arc<Semaphore>,
    deadline: Duration,
}

/// Why a request body was not read.
#[derive(Debug, Error)]
enum BodyError {
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
    fn outcome(&self) -> (&'static str, StatusCode) {
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
    async fn read(&self, request: Request) -> Result<(Bytes, Option<OwnedSemaphorePermit>), BodyError> {
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

async fn mutate(State(state): State<MutateState>, request: Request) -> Response {
    let started = Instant::now();
    let span = tracing::info_span!(
        "admission",
        uid = Empty,
        kind = Empty,
        name = Empty,
        operation = Empty,
        outcome = Empty
    );
    let (outcome, allowed, response) = async {
        match state.bodies.read(request).await {
            Ok((body, budget)) => {
                let answered = answer(&state.app, &body, &span).await;
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
    state.app.metrics.request(outcome, allowed, elapsed);
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
async fn answer(state: &AppState, body: &[u8], span: &tracing::Span) -> (&'static str, bool, Response) {
    let request = match parse_review(body) {
        Ok(request) => request,
        Err(error) => {
            let (outcome, status) = match error {
                ReviewError::TooLarge => ("too-large", StatusCode::PAYLOAD_TOO_LARGE),
                _ => ("bad-request", StatusCode::BAD_REQUEST),
            };
            tracing::info!("not an AdmissionReview: {error}");
            return (outcome, false, (status, format!("{error}\n")).into_response());
        }
    };
    span.record("uid", request.uid.as_str());
    span.record("kind", request.kind.kind.as_str());
    span.record("name", request.name.as_str());
    span.record("operation", tracing::field::debug(&request.operation));
    let (response, resolution) = state.reviewer.respond_with_resolution(&request).await;
    state.metrics.resolution(&resolution);
    let outcome = response
        .audit_annotations
        .get(OUTCOME_AUDIT_KEY)
        .map(|o| outcome_label(o))
        .unwrap_or("unknown");
    let allowed = response.allowed;
    match encode_response(response) {
        Ok(bytes) => (
            outcome,
            allowed,
            ([(header::CONTENT_TYPE, "application/json")], bytes).into_response(),
        ),
        Err(error) => {
            tracing::error!("{error}");
            (
                "error",
                false,
                (StatusCode::INTERNAL_SERVER_ERROR, format!("{error}\n")).into_response(),
            )
        }
    }
}

/// The `outcome` audit annotation as a `'static` label (the set is fixed).
fn outcome_label(value: &str) -> &'static str {
    crate::decision::Outcome::ALL
        .into_iter()
        .map(|o| o.as_str())
        .find(|o| *o == value)
        .unwrap_or("unknown")
}

/// How to serve.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub listen: SocketAddr,
    pub metrics_listen: SocketAddr,
    pub tls: TlsFiles,
    pub client_ca: Option<PathBuf>,
    pub reload_interval: Duration,
    pub shutdown_delay: Duration,
    pub drain_timeout: Duration,
    pub limits: Limits,
}

/// What clients may hold of the server. The defaults keep the webhook within its
/// 128 MiB pod limit under the attacks of `bench/webhook-attacks.py` (figures in
/// docs/benchmarks.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// HTTP/1: time to send a request head, counted from the TLS handshake (so before
    /// the first byte too) and again after each answer (so it is also the keep-alive
    /// idle time). Both listeners.
    pub header_read_timeout: Duration,
    /// A connection with no request open for this long is closed (HTTP/2: GOAWAY).
    pub idle_timeout: Duration,
    /// Time to receive a whole request body, from the handler's start; 408 after.
    pub body_read_timeout: Duration,
    /// Connections served at once on `--listen`; more wait in the kernel's backlog.
    pub max_connections: usize,
    /// Connections served at once on `--metrics-listen`.
    pub max_admin_connections: usize,
    /// HTTP/2 streams open at once on one connection.
    pub max_concurrent_streams: u32,
    /// Request-body bytes buffered at once across all connections; a request whose
    /// body would go over it gets 503.
    pub max_buffered_body_bytes: usize,
    /// HTTP/2: a PING after this long without a frame from the client...
    pub keep_alive_interval: Duration,
    /// ...and the connection is closed if its ACK takes longer than this.
    pub keep_alive_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            body_read_timeout: Duration::from_secs(10),
            max_connections: 512,
            max_admin_connections: 64,
            max_concurrent_streams: 32,
            // Four reviews of the largest size: a burst of large PVs is still served,
            // and with their parsing they stay well within the pod limit.
            max_buffered_body_bytes: 4 * MAX_REVIEW_BYTES,
            keep_alive_interval: Duration::from_secs(20),
            keep_alive_timeout: Duration::from_secs(10),
        }
    }
}

/// A server with its certificate loaded and its listeners bound; [`Server::run`] serves.
#[derive(Debug)]
pub struct Server {
    config: ServeConfig,
    state: AppState,
    listener: TcpListener,
    metrics_listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    reloader: CertReloader,
}

impl Server {
    /// Loads the certificate and binds both listeners; any failure names the flag at fault.
    pub async fn bind(config: ServeConfig, state: AppState) -> Result<Self, ServeError> {
        let (reloader, info) =
            CertReloader::load(config.tls.clone(), config.client_ca.as_deref(), state.metrics.clone())?;
        tracing::info!(serial = %info.serial, not_after = info.not_after, chain = info.chain_len, "serving certificate loaded");
        let tls = server_config(reloader.resolver(), reloader.client_verifier())?;
        let listener = listen("--listen", config.listen)?;
        let metrics_listener = listen("--metrics-listen", config.metrics_listen)?;
        Ok(Self {
            tls: Arc::new(tls),
            config,
            state,
            listener,
            metrics_listener,
            reloader,
        })
    }

    /// The HTTPS address (useful when `--listen` has port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr().unwrap_or(self.config.listen)
    }

    /// The metrics address.
    pub fn metrics_addr(&self) -> SocketAddr {
        self.metrics_listener.local_addr().unwrap_or(self.config.metrics_listen)
    }

    /// Serves until `shutdown` completes, then runs the shutdown sequence and returns.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<(), ServeError> {
        let Self {
            config,
            state,
            listener,
            metrics_listener,
            tls,
            reloader,
        } = self;
        let limits = &config.limits;
        let health = state.health.clone();
        let reload = tokio::spawn(reloader.run(config.reload_interval));
        let (stop, stopping) = watch::channel(false);
        let https = Arc::new(Listener {
            tls: Some((TlsAcceptor::from(tls), state.metrics.clone())),
            router: router_with_limits(state.clone(), limits),
            http1: http1_builder(limits),
            http2: http2_builder(limits),
            idle_timeout: limits.idle_timeout,
            drain_timeout: config.drain_timeout,
            stopping: stopping.clone(),
        });
        let admin = Arc::new(Listener {
            tls: None,
            router: admin_router(state),
            http1: http1_builder(limits),
            http2: http2_builder(limits),
            idle_timeout: limits.idle_timeout,
            drain_timeout: config.drain_timeout,
            stopping,
        });
        let https_slots = Arc::new(Semaphore::new(limits.max_connections.min(Semaphore::MAX_PERMITS)));
        let admin_slots = Arc::new(Semaphore::new(limits.max_admin_connections.min(Semaphore::MAX_PERMITS)));
        let mut connections = JoinSet::new();

        health.set_serving();
        tracing::info!(listen = %config.listen, metrics = %config.metrics_listen, "serving");

        let delay = config.shutdown_delay;
        let stop_accepting = async {
            shutdown.await;
            health.set_shutting_down();
            tracing::info!(
                "shutting down: not ready, serving {} more before closing the listeners",
                cloud_access::go_duration::format(delay)
            );
            tokio::time::sleep(delay).await;
        };
        tokio::pin!(stop_accepting);
        loop {
            tokio::select! {
                () = &mut stop_accepting => break,
                (slot, tcp, peer) = accept(&listener, &https_slots) => {
                    connections.spawn(https.clone().serve(tcp, peer, slot));
                }
                (slot, tcp, peer) = accept(&metrics_listener, &admin_slots) => {
                    connections.spawn(admin.clone().serve(tcp, peer, slot));
                }
                Some(ended) = connections.join_next(), if !connections.is_empty() => {
                    if let Err(error) = ended {
                        tracing::error!("connection task failed: {error}");
                    }
                }
            }
        }
        drop(listener);
        drop(metrics_listener);

        tracing::info!(connections = connections.len(), "listeners closed, draining");
        let _ = stop.send(true);
        let drained = async { while connections.join_next().await.is_some() {} };
        if tokio::time::timeout(config.drain_timeout, drained).await.is_err() {
            tracing::warn!(
                connections = connections.len(),
                "drain timeout ({}) passed; closing the remaining connections",
                cloud_access::go_duration::format(config.drain_timeout)
            );
            connections.shutdown().await;
        }
        reload.abort();
        tracing::info!("stopped");
        Ok(())
    }
}

/// Waits for a free slot, then accepts: past the bound, connections wait in the kernel's
/// backlog rather than costing memory here.
async fn accept(listener: &TcpListener, slots: &Arc<Semaphore>) -> (OwnedSemaphorePermit, TcpStream, SocketAddr) {
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            // Never closed; if it were, accept nothing more.
            return std::future::pending().await;
        };
        match listener.accept().await {
            Ok((tcp, peer)) => return (slot, tcp, peer),
            Err(error) => {
                // Out of file descriptors and the like: back off, don't spin.
                tracing::warn!("accept failed: {error}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

fn http1_builder(limits: &Limits) -> http1::Builder {
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(H1_MAX_BUF);
    builder
}

fn http2_builder(limits: &Limits) -> http2::Builder<TokioExecutor> {
    let mut builder = http2::Builder::new(TokioExecutor::new());
    builder
        .timer(TokioTimer::new())
        .max_concurrent_streams(limits.max_concurrent_streams)
        .initial_stream_window_size(H2_STREAM_WINDOW)
        .initial_connection_window_size(H2_CONNECTION_WINDOW)
        .max_header_list_size(H2_MAX_HEADER_LIST)
        .keep_alive_interval(limits.keep_alive_interval)
        .keep_alive_timeout(limits.keep_alive_timeout);
    builder
}

/// How one listener serves its connections.
struct Listener {
    /// The TLS acceptor and the metrics counting failed handshakes; `None` is plain
    /// HTTP/1.1 (the admin listener).
    tls: Option<(TlsAcceptor, Arc<Metrics>)>,
    router: Router,
    http1: http1::Builder,
    http2: http2::Builder<TokioExecutor>,
    idle_timeout: Duration,
    drain_timeout: Duration,
    /// Turns true when the server stops: connections finish what is open and close.
    stopping: watch::Receiver<bool>,
}

impl Listener {
    /// Serves one connection, holding its slot until it closes.
    async fn serve(self: Arc<Self>, tcp: TcpStream, peer: SocketAddr, _slot: OwnedSemaphorePermit) {
        // Small requests and answers: don't let Nagle hold them back.
        let _ = tcp.set_nodelay(true);
        let ended = match &self.tls {
            None => self.serve_http(TokioIo::new(tcp), false).await,
            Some((acceptor, metrics)) => {
                let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                    Ok(Ok(tls)) => tls,
                    Ok(Err(error)) => {
                        metrics.handshake_error();
                        tracing::debug!(%peer, "TLS handshake failed: {error}");
                        return;
                    }
                    Err(_) => {
                        metrics.handshake_error();
                        tracing::debug!(%peer, "TLS handshake timed out");
                        return;
                    }
                };
                // The protocol is the one ALPN chose, so that HTTP/1's head timeout runs
                // from the first moment (sniffing for the HTTP/2 preface would wait
                // without one); no ALPN is HTTP/1.1.
                let http2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
                self.serve_http(TokioIo::new(tls), http2).await
            }
        };
        if let Err(error) = ended {
            tracing::debug!(%peer, "connection ended with an error: {error}");
        }
    }

    async fn serve_http<I>(&self, io: I, http2: bool) -> Result<(), hyper::Error>
    where
        I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    {
        let open = OpenRequests::new();
        let requests = open.clone();
        let router = TowerToHyperService::new(self.router.clone());
        let service = hyper::service::service_fn(move |request| {
            let open = requests.clone().start();
            let call = hyper::service::Service::call(&router, request);
            async move {
                let answered = call.await;
                drop(open);
                answered
            }
        });
        let stopping = self.stopping.clone();
        if http2 {
            let connection = self.http2.serve_connection(io, service);
            until_idle_or_stopped(connection, open, self.idle_timeout, stopping, self.drain_timeout).await
        } else {
            let connection = self.http1.serve_connection(io, service);
            until_idle_or_stopped(connection, open, self.idle_timeout, stopping, self.drain_timeout).await
        }
    }
}

/// Counts a connection's open requests.
#[derive(Debug, Clone)]
struct OpenRequests(Arc<watch::Sender<usize>>);

/// One open request; closes when dropped.
struct OpenRequest(Arc<watch::Sender<usize>>);

impl OpenRequests {
    fn new() -> Self {
        Self(Arc::new(watch::channel(0).0))
    }

    fn start(self) -> OpenRequest {
        self.0.send_modify(|n| *n += 1);
        OpenRequest(self.0)
    }

    /// Completes once no request has been open for `period`.
    fn idle_for(&self, period: Duration) -> impl Future<Output = ()> + Send + 'static {
        let mut count = self.0.subscribe();
        async move {
            loop {
                if count.wait_for(|open| *open == 0).await.is_err() {
                    return std::future::pending().await;
                }
                match tokio::time::timeout(period, count.changed()).await {
                    Err(_) => return,
                    Ok(Ok(())) => {}
                    Ok(Err(_)) => return std::future::pending().await,
                }
            }
        }
    }
}

impl Drop for OpenRequest {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// Drives `connection` until it ends, goes idle, or the server stops; then lets its open
/// requests finish (HTTP/2: GOAWAY) for at most `drain_timeout` and drops it.
async fn until_idle_or_stopped<C>(
    connection: C,
    open: OpenRequests,
    idle_timeout: Duration,
    mut stopping: watch::Receiver<bool>,
    drain_timeout: Duration,
) -> Result<(), C::Error>
where
    C: GracefulConnection,
{
    tokio::pin!(connection);
    tokio::select! {
        ended = connection.as_mut() => return ended,
        () = open.idle_for(idle_timeout) => tracing::debug!("closing an idle connection"),
        _ = stopping.wait_for(|stop| *stop) => {}
    }
    connection.as_mut().graceful_shutdown();
    // HTTP/2's graceful close waits for the answer to a PING; a client that never
    // answers is given a second with nothing open, as Go's server does.
    let closed = async {
        tokio::select! {
            ended = connection => ended,
            () = open.idle_for(GOAWAY_GRACE) => Ok(()),
        }
    };
    tokio::time::timeout(drain_timeout, closed).await.unwrap_or(Ok(()))
}

/// A listener on `addr`; an IPv6 wildcard also takes IPv4, whatever the host's
/// `net.ipv6.bindv6only`, so that `[::]` is dual-stack. On a host without IPv6
/// (`ipv6.disable=1`), `[::]` falls back to `0.0.0.0` with a warning.
fn listen(flag: &'static str, addr: SocketAddr) -> Result<TcpListener, ServeError> {
    match bind(addr) {
        Err(error) if addr.ip() == std::net::Ipv6Addr::UNSPECIFIED && no_ipv6(&error) => {
            let v4 = SocketAddr::from((std::net::Ipv4Addr::UNSPECIFIED, addr.port()));
            tracing::warn!("{flag} {addr}: no IPv6 on this host ({error}); listening on {v4}");
            bind(v4).map_err(|source| ServeError::Bind { flag, addr: v4, source })
        }
        result => result.map_err(|source| ServeError::Bind { flag, addr, source }),
    }
}

fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if addr.is_ipv6() {
        socket.set_only_v6(false)?;
    }
    // A restarted process can bind while old connections sit in TIME_WAIT.
    socket.set_reuse_address(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    TcpListener::from_std(socket.into())
}

/// EAFNOSUPPORT (no IPv6 in the kernel) or EADDRNOTAVAIL (IPv6 disabled by sysctl).
fn no_ipv6(error: &std::io::Error) -> bool {
    const EAFNOSUPPORT: i32 = 97;
    const EADDRNOTAVAIL: i32 = 99;
    matches!(error.raw_os_error(), Some(EAFNOSUPPORT | EADDRNOTAVAIL))
}

/// SIGTERM and SIGINT, installed at once so that a signal during start-up is not fatal.
#[derive(Debug)]
pub struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Signals {
    /// Installs the handlers.
    pub fn install() -> Result<Self, ServeError> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Self {
            term: signal(SignalKind::terminate()).map_err(ServeError::Signals)?,
            int: signal(SignalKind::interrupt()).map_err(ServeError::Signals)?,
        })
    }

    /// The name of the next signal received.
    pub async fn recv(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
        }
    }
}
