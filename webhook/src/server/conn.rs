//! One connection's life: the TLS handshake, HTTP/1 or HTTP/2 as ALPN chose, closing
//! when idle, and draining when the server stops; and the accept loop's slots.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulConnection;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio_rustls::TlsAcceptor;

use super::Limits;
use crate::metrics::Metrics;

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

/// Waits for a free slot, then accepts: past the bound, connections wait in the kernel's
/// backlog rather than costing memory here.
pub(super) async fn accept(
    listener: &TcpListener,
    slots: &Arc<Semaphore>,
) -> (OwnedSemaphorePermit, TcpStream, SocketAddr) {
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

pub(super) fn http1_builder(limits: &Limits) -> http1::Builder {
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(H1_MAX_BUF);
    builder
}

pub(super) fn http2_builder(limits: &Limits) -> http2::Builder<TokioExecutor> {
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
pub(super) struct Listener {
    /// The TLS acceptor and the metrics counting failed handshakes; `None` is plain
    /// HTTP/1.1 (the admin listener).
    pub(super) tls: Option<(TlsAcceptor, Arc<Metrics>)>,
    pub(super) router: Router,
    pub(super) http1: http1::Builder,
    pub(super) http2: http2::Builder<TokioExecutor>,
    pub(super) idle_timeout: Duration,
    pub(super) drain_timeout: Duration,
    /// Turns true when the server stops: connections finish what is open and close.
    pub(super) stopping: watch::Receiver<bool>,
}

impl Listener {
    /// Serves one connection, holding its slot until it closes.
    pub(super) async fn serve(self: Arc<Self>, tcp: TcpStream, peer: SocketAddr, _slot: OwnedSemaphorePermit) {
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
