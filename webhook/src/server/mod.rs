//! The HTTPS server: the `/mutate` Router and the plain-HTTP admin Router (`/healthz`,
//! `/readyz`, `/metrics`) in [`routes`], request bodies within their limits in `body`,
//! one connection's life (TLS, HTTP/1 or HTTP/2, idle and drain) in `conn`, sockets and
//! signals in `listen`; here, the configuration and the server's own life: bind, serve,
//! and the shutdown sequence (not-ready, keep serving for a delay, stop accepting, drain
//! with a deadline).
//!
//! What a client can hold is bounded ([`Limits`]): connections per listener (at the
//! bound, an idle one gives way: `slots`), time (first request, request head, body,
//! idle), HTTP/2 streams and flow-control windows, and the bytes of request bodies
//! buffered at once across all connections; [`Limits::worst_case_bytes`] adds them up.

mod body;
mod conn;
mod copying_writes;
mod listen;
pub mod routes;
mod slots;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use self::conn::{Listener, http1_builder, http2_builder};
pub use self::listen::Signals;
use self::listen::listen;
pub use self::routes::{AppState, Health, admin_router, router, router_with_limits};
use self::slots::Slots;
use crate::review::MAX_REVIEW_BYTES;
use crate::tls::{CertReloader, NamedFile, TlsError, TlsFiles, server_config};

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

/// How to serve.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub listen: SocketAddr,
    pub metrics_listen: SocketAddr,
    pub tls: TlsFiles,
    /// CA certificates clients must present a certificate from; none, no client check.
    pub client_ca: Option<NamedFile>,
    pub reload_interval: Duration,
    pub shutdown_delay: Duration,
    pub drain_timeout: Duration,
    pub limits: Limits,
}

/// What clients may hold of the server. The defaults keep the webhook well within its
/// 128 MiB pod limit whatever the clients do: [`Limits::worst_case_bytes`] adds up what
/// they allow, and `bench/webhook-attacks.py` measures it (docs/benchmarks.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// HTTP/1: time to send a request head, counted from the connection's start and
    /// again after each answer (so it is also the keep-alive idle time). Both
    /// listeners and both protocols: a connection must finish its TLS handshake and
    /// begin a request within this time of its start, or it is closed.
    pub header_read_timeout: Duration,
    /// A connection with no request open for this long is closed (HTTP/2: GOAWAY).
    pub idle_timeout: Duration,
    /// Time to receive a whole request body, from the handler's start; 408 after.
    pub body_read_timeout: Duration,
    /// Connections served at once on `--listen`. At the bound, a new connection takes
    /// the place of an idle one (no request open); it waits only while every one has a
    /// request open.
    pub max_connections: usize,
    /// Connections served at once on `--metrics-listen`, likewise.
    pub max_admin_connections: usize,
    /// HTTP/2 streams open at once on one connection.
    pub max_concurrent_streams: u32,
    /// HTTP/2 flow-control windows: how much a client may send ahead of the handler
    /// reading it, per stream and per connection (hyper's default is 1 MiB each).
    /// Reviews of PVs are a few KiB; a 4 MiB one needs a few dozen window updates.
    pub h2_stream_window: u32,
    pub h2_connection_window: u32,
    /// Request-body bytes buffered at once across all connections; a request whose
    /// body would go over it gets 503.
    pub max_buffered_body_bytes: usize,
    /// HTTP/2: a PING after this long without a frame from the client...
    pub keep_alive_interval: Duration,
    /// ...and the connection is closed if its ACK takes longer than this.
    pub keep_alive_timeout: Duration,
}

/// What one connection on `--listen` may hold besides the data in its HTTP/2
/// connection window, every buffer full: rustls's record and plaintext buffers, the
/// HTTP/1 read buffer or the HTTP/2 frame buffers and header tables, 32 streams with
/// their tasks, and the allocator's slack around them. Measured with 250 and 500
/// HTTP/2 connections of 32 streams each sending as fast as the windows allow (64
/// served at once): 0.6 MiB per connection with its 128 KiB window, over the baseline
/// and the body budget (docs/benchmarks.md); rounded up.
pub const CONNECTION_OVERHEAD_BYTES: u64 = 512 * 1024;
/// What one admin connection may hold: a 16 KiB request head and a `/metrics` answer.
pub const ADMIN_CONNECTION_BYTES: u64 = 64 * 1024;

impl Limits {
    /// The most memory that clients can make the server hold at once under these
    /// limits, beyond its idle baseline: every connection on both listeners with its
    /// buffers and HTTP/2 window full, and the budget of bodies buffered, twice (a
    /// body being parsed costs about its size again, docs/webhook.md).
    pub fn worst_case_bytes(&self) -> u64 {
        let connection = u64::from(self.h2_connection_window) + CONNECTION_OVERHEAD_BYTES;
        self.max_connections as u64 * connection
            + self.max_admin_connections as u64 * ADMIN_CONNECTION_BYTES
            + 2 * self.max_buffered_body_bytes as u64
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            body_read_timeout: Duration::from_secs(10),
            // The apiserver uses a few HTTP/2 connections per endpoint; idle ones give
            // way at the bound, so this counts connections with requests open.
            max_connections: 64,
            max_admin_connections: 16,
            max_concurrent_streams: 32,
            h2_stream_window: 64 * 1024,
            h2_connection_window: 128 * 1024,
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
        let (reloader, info) = CertReloader::load(config.tls.clone(), config.client_ca.clone(), state.metrics.clone())?;
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
            first_request_timeout: limits.header_read_timeout,
            idle_timeout: limits.idle_timeout,
            drain_timeout: config.drain_timeout,
            stopping: stopping.clone(),
        });
        let admin = Arc::new(Listener {
            tls: None,
            router: admin_router(state),
            http1: http1_builder(limits),
            http2: http2_builder(limits),
            first_request_timeout: limits.header_read_timeout,
            idle_timeout: limits.idle_timeout,
            drain_timeout: config.drain_timeout,
            stopping,
        });
        let https_slots = Slots::new(limits.max_connections);
        let admin_slots = Slots::new(limits.max_admin_connections);
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
        // Accepting goes on while connections wait for a place (in their own tasks), so
        // that one peer's waiting connections cannot queue another's in the backlog.
        loop {
            tokio::select! {
                () = &mut stop_accepting => break,
                (tcp, peer) = Slots::accept(&listener) => {
                    connections.spawn(https.clone().serve(tcp, peer, https_slots.clone()));
                }
                (tcp, peer) = Slots::accept(&metrics_listener) => {
                    connections.spawn(admin.clone().serve(tcp, peer, admin_slots.clone()));
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
