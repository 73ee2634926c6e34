//! The HTTPS server: the `/mutate` Router and the plain-HTTP admin Router (`/healthz`,
//! `/readyz`, `/metrics`) in [`routes`], request bodies within their limits in `body`,
//! one connection's life (TLS, HTTP/1 or HTTP/2, idle and drain) in `conn`, sockets and
//! signals in `listen`; here, the configuration and the server's own life: bind, serve,
//! and the shutdown sequence (not-ready, keep serving for a delay, stop accepting, drain
//! with a deadline).
//!
//! What a client can hold is bounded ([`Limits`]): connections per listener, time
//! (handshake, request head, body, idle), HTTP/2 streams and flow-control windows, and
//! the bytes of request bodies buffered at once across all connections.

mod body;
mod conn;
mod listen;
pub mod routes;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use self::conn::{Listener, accept, http1_builder, http2_builder};
pub use self::listen::Signals;
use self::listen::listen;
pub use self::routes::{AppState, Health, admin_router, router, router_with_limits};
use crate::review::MAX_REVIEW_BYTES;
use crate::tls::{CertReloader, TlsError, TlsFiles, server_config};

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
