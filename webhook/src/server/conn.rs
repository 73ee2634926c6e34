//! One connection's life: the TLS handshake, HTTP/1 or HTTP/2 as ALPN chose, closing
//! when it asks nothing in time, when idle or when another needs its place, and
//! draining when the server stops.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulConnection;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;

use super::Limits;
use super::copying_writes::CopyingWrites;
use super::slots::{Slot, Slots};
use crate::metrics::Metrics;
/// The read buffer of an HTTP/1 connection, so also the largest request head (431
/// beyond). The apiserver's heads are well under 1 KiB; hyper's default is 400 KiB.
const H1_MAX_BUF: usize = 16 * 1024;
/// The largest HTTP/2 header list, as for HTTP/1.
const H2_MAX_HEADER_LIST: u32 = 16 * 1024;
/// How long a closing connection with nothing open may wait for the client to see the
/// GOAWAY (Go's `goAwayTimeout`).
const GOAWAY_GRACE: Duration = Duration::from_secs(1);

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
        .initial_stream_window_size(limits.h2_stream_window)
        .initial_connection_window_size(limits.h2_connection_window)
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
    /// From the connection's start: the TLS handshake done and a request begun, or the
    /// connection is closed (HTTP/1's head timeout, for HTTP/2 too).
    pub(super) first_request_timeout: Duration,
    pub(super) idle_timeout: Duration,
    pub(super) drain_timeout: Duration,
    /// Turns true when the server stops: connections finish what is open and close.
    pub(super) stopping: watch::Receiver<bool>,
}

impl Listener {
    /// Serves one connection once it has a place in `slots`, holding it until it closes.
    /// It waits for one at most the first-request timeout (it would have to begin a
    /// request by then anyway), and not once the server stops.
    pub(super) async fn serve(self: Arc<Self>, tcp: TcpStream, peer: SocketAddr, slots: Arc<Slots>) {
        let mut stopping = self.stopping.clone();
        let placed = tokio::select! {
            placed = tokio::time::timeout(self.first_request_timeout, slots.place(peer.ip())) => placed,
            _ = stopping.wait_for(|stop| *stop) => return,
        };
        let Ok(Some(slot)) = placed else {
            tracing::debug!(%peer, "closed while waiting for a connection place");
            return;
        };
        // Boxed: a connection waiting for a place (many may be accepted at once) holds
        // only this small future, not the connection's.
        Box::pin(self.serve_placed(tcp, peer, slot)).await;
    }

    async fn serve_placed(self: Arc<Self>, tcp: TcpStream, peer: SocketAddr, slot: Slot) {
        let first_request_by = Instant::now() + self.first_request_timeout;
        // Small requests and answers: don't let Nagle hold them back.
        let _ = tcp.set_nodelay(true);
        let ended = match &self.tls {
            None => self.serve_http(TokioIo::new(tcp), false, slot, first_request_by).await,
            Some((acceptor, metrics)) => {
                let mut stopping = self.stopping.clone();
                let handshake = tokio::time::timeout_at(first_request_by, acceptor.accept(tcp));
                let tls = tokio::select! {
                    done = handshake => match done {
                        Ok(Ok(tls)) => CopyingWrites(tls),
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
                    },
                    () = slot.evicted() => {
                        tracing::debug!(%peer, "closed during the TLS handshake: its place was needed");
                        return;
                    }
                    // Nothing to drain: the server stops without waiting for it.
                    _ = stopping.wait_for(|stop| *stop) => return,
                };
                // The protocol is the one ALPN chose, so that HTTP/1's head timeout runs
                // from the first moment (sniffing for the HTTP/2 preface would wait
                // without one); no ALPN is HTTP/1.1.
                let http2 = tls.get_ref().get_ref().1.alpn_protocol() == Some(b"h2");
                self.serve_http(TokioIo::new(tls), http2, slot, first_request_by).await
            }
        };
        if let Err(error) = ended {
            tracing::debug!(%peer, "connection ended with an error: {error}");
        }
    }

    async fn serve_http<I>(&self, io: I, http2: bool, slot: Slot, first_request_by: Instant) -> Result<(), hyper::Error>
    where
        I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    {
        let requests = slot.clone();
        let router = TowerToHyperService::new(self.router.clone());
        let service = hyper::service::service_fn(move |request| {
            let open = requests.start();
            let call = hyper::service::Service::call(&router, request);
            async move {
                let answered = call.await;
                drop(open);
                answered
            }
        });
        let life = Life {
            slot,
            first_request_by,
            idle_timeout: self.idle_timeout,
            stopping: self.stopping.clone(),
            drain_timeout: self.drain_timeout,
        };
        if http2 {
            life.run(self.http2.serve_connection(io, service)).await
        } else {
            life.run(self.http1.serve_connection(io, service)).await
        }
    }
}

/// What ends a connection besides the client.
struct Life {
    slot: Slot,
    first_request_by: Instant,
    idle_timeout: Duration,
    stopping: watch::Receiver<bool>,
    drain_timeout: Duration,
}

impl Life {
    /// Drives `connection` until it ends, goes idle, asks nothing by the first-request
    /// deadline, is evicted, or the server stops. A connection that never asked anything
    /// is dropped at once; otherwise its open requests may finish (HTTP/2: GOAWAY) for
    /// at most `drain_timeout`.
    async fn run<C>(self, connection: C) -> Result<(), C::Error>
    where
        C: GracefulConnection,
    {
        let Self {
            slot,
            first_request_by,
            idle_timeout,
            mut stopping,
            drain_timeout,
        } = self;
        tokio::pin!(connection);
        tokio::select! {
            ended = connection.as_mut() => return ended,
            () = slot.no_request_by(first_request_by) => {
                tracing::debug!("closing a connection that asked nothing in time");
                return Ok(());
            }
            () = slot.evicted() => {
                tracing::debug!("closing an idle connection: its place was needed");
                if !slot.requested() {
                    return Ok(());
                }
            }
            () = slot.idle_for(idle_timeout) => tracing::debug!("closing an idle connection"),
            _ = stopping.wait_for(|stop| *stop) => {}
        }
        connection.as_mut().graceful_shutdown();
        // HTTP/2's graceful close waits for the answer to a PING; a client that never
        // answers is given a second with nothing open, as Go's server does.
        let closed = async {
            tokio::select! {
                ended = connection => ended,
                () = slot.idle_for(GOAWAY_GRACE) => Ok(()),
            }
        };
        tokio::time::timeout(drain_timeout, closed).await.unwrap_or(Ok(()))
    }
}
