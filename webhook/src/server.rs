//! The HTTPS server: the `/mutate` Router, the plain-HTTP admin Router (`/healthz`,
//! `/readyz`, `/metrics`), the TLS accept loop and the shutdown sequence (not-ready, keep
//! serving for a delay, stop accepting, drain with a deadline).

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use thiserror::Error;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tracing::Instrument as _;
use tracing::field::Empty;

use crate::decision::OUTCOME_AUDIT_KEY;
use crate::metrics::Metrics;
use crate::review::{MAX_REVIEW_BYTES, ReviewError, Reviewer, encode_response, parse_review};
use crate::tls::{CertReloader, TlsError, TlsFiles, server_config};

/// A client has this long to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// An HTTP/1 client has this long to send a request's headers; hyper also counts idle
/// keep-alive time against it, so it is the idle timeout too (HTTP/2, which the
/// apiserver uses, is not affected).
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

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

/// The webhook Router: `POST /mutate` (bodies up to [`MAX_REVIEW_BYTES`]).
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/mutate", post(mutate))
        .layer(DefaultBodyLimit::max(MAX_REVIEW_BYTES))
        .with_state(state)
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

async fn mutate(State(state): State<AppState>, body: Result<Bytes, BytesRejection>) -> Response {
    let started = Instant::now();
    let span = tracing::info_span!(
        "admission",
        uid = Empty,
        kind = Empty,
        name = Empty,
        operation = Empty,
        outcome = Empty
    );
    let (outcome, allowed, response) = answer(&state, body, &span).instrument(span.clone()).await;
    span.record("outcome", outcome);
    let elapsed = started.elapsed();
    state.metrics.request(outcome, allowed, elapsed);
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
async fn answer(
    state: &AppState,
    body: Result<Bytes, BytesRejection>,
    span: &tracing::Span,
) -> (&'static str, bool, Response) {
    let body = match body {
        Ok(body) => body,
        Err(rejection) => {
            let status = rejection.status();
            let outcome = if status == StatusCode::PAYLOAD_TOO_LARGE {
                "too-large"
            } else {
                "bad-request"
            };
            tracing::info!("cannot read the body: {}", rejection.body_text());
            return (outcome, false, (status, rejection.body_text()).into_response());
        }
    };
    let request = match parse_review(&body) {
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
        let acceptor = TlsAcceptor::from(tls);
        let health = state.health.clone();
        let metrics = state.metrics.clone();

        let (admin_stop, admin_stopped) = tokio::sync::oneshot::channel::<()>();
        let admin = axum::serve(metrics_listener, admin_router(state.clone())).with_graceful_shutdown(async {
            let _ = admin_stopped.await;
        });
        let admin = tokio::spawn(async move {
            if let Err(error) = admin.await {
                tracing::error!("metrics listener failed: {error}");
            }
        });
        let reload = tokio::spawn(reloader.run(config.reload_interval));

        let service = TowerToHyperService::new(router(state));
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(HEADER_READ_TIMEOUT);
        builder.http2().timer(TokioTimer::new());
        let graceful = GracefulShutdown::new();

        health.set_serving();
        tracing::info!(listen = %config.listen, metrics = %config.metrics_listen, "serving");

        let delay = config.shutdown_delay;
        let stop_accepting = async {
            shutdown.await;
            health.set_shutting_down();
            tracing::info!(
                "shutting down: not ready, serving {} more before closing the listener",
                cloud_access::go_duration::format(delay)
            );
            tokio::time::sleep(delay).await;
        };
        tokio::pin!(stop_accepting);
        loop {
            let (tcp, peer) = tokio::select! {
                () = &mut stop_accepting => break,
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        // Out of file descriptors and the like: back off, don't spin.
                        tracing::warn!("accept failed: {error}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
            };
            // Small requests and answers: don't let Nagle hold them back.
            let _ = tcp.set_nodelay(true);
            let watcher = graceful.watcher();
            let acceptor = acceptor.clone();
            let service = service.clone();
            let builder = builder.clone();
            let metrics = metrics.clone();
            tokio::spawn(async move {
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
                let connection = builder.serve_connection(TokioIo::new(tls), service).into_owned();
                if let Err(error) = watcher.watch(connection).await {
                    tracing::debug!(%peer, "connection ended with an error: {error}");
                }
            });
        }
        drop(listener);

        let open = graceful.count();
        tracing::info!(connections = open, "listener closed, draining");
        if tokio::time::timeout(config.drain_timeout, graceful.shutdown())
            .await
            .is_err()
        {
            tracing::warn!(
                "drain timeout ({}) passed; closing the remaining connections",
                cloud_access::go_duration::format(config.drain_timeout)
            );
        }
        reload.abort();
        let _ = admin_stop.send(());
        let _ = admin.await;
        tracing::info!("stopped");
        Ok(())
    }
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
