//! Connections that take places instead of asking questions (issue 9, hostile re-test):
//! half-open connections held and reopened on the admin port must not fail the probes,
//! idle HTTP/2 connections filling the bound must not keep a review out, a connection
//! that asks nothing is closed at the first-request deadline, and what the connection
//! bound and the advertised HTTP/2 windows allow fits the pod's memory.
//!
//! The hostile connections come from 127.0.0.2 and the legitimate ones from 127.0.0.1,
//! as an attacking pod and the apiserver or the kubelet have different addresses.

mod common;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::net::*;
use common::*;
use pv_topology_webhook::server::Limits;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpSocket, TcpStream};
use tokio::task::JoinSet;
use tokio_rustls::TlsConnector;

/// The hostile clients' source address.
const HOSTILE: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));

/// How long a legitimate request may take while the bound is filled: well below the
/// apiserver's timeoutSeconds and the probes' 1 s… on a busy 2-core machine, 3 s.
const ANSWERED_WITHIN: Duration = Duration::from_secs(3);

/// A TCP connection from [`HOSTILE`].
async fn hostile_tcp(addr: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(HOSTILE, 0))?;
    socket.connect(addr).await
}

/// `count` clients that each hold one connection made by `open`, reopen it as soon as
/// the server closes it, and count the connections they made.
fn holders<F, Fut>(count: usize, open: F) -> (JoinSet<()>, Arc<AtomicUsize>)
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Option<Box<dyn tokio::io::AsyncRead + Unpin + Send>>> + Send,
{
    let opened = Arc::new(AtomicUsize::new(0));
    let open = Arc::new(open);
    let mut set = JoinSet::new();
    for _ in 0..count {
        let (open, opened) = (open.clone(), opened.clone());
        set.spawn(async move {
            loop {
                let Some(mut held) = open().await else {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                };
                opened.fetch_add(1, Ordering::Relaxed);
                let mut buf = [0u8; 4096];
                while matches!(held.read(&mut buf).await, Ok(n) if n > 0) {}
            }
        });
    }
    (set, opened)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_port_answers_probes_while_half_open_connections_are_held() {
    let mut f = fixture_config();
    f.config.limits.max_admin_connections = 4;
    let server = Running::start(f.config, plain()).await;
    let metrics = server.metrics_addr;
    // Twice the bound, each with half a request head, reopened when closed.
    let (_holders, opened) = holders(8, move || async move {
        let mut tcp = hostile_tcp(metrics).await.ok()?;
        tcp.write_all(b"GET /metrics HTTP/1.1\r\nHost: x").await.ok()?;
        Some(Box::new(tcp) as Box<dyn tokio::io::AsyncRead + Unpin + Send>)
    });
    eventually("the holders fill the bound", || async {
        opened.load(Ordering::Relaxed) >= 4
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    for probe in 0..5 {
        let status = tokio::time::timeout(ANSWERED_WITHIN, get_status(metrics, "/readyz"))
            .await
            .unwrap_or_else(|_| panic!("probe {probe}: no answer within {ANSWERED_WITHIN:?}"))
            .unwrap();
        assert_eq!(status, 200, "probe {probe}");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tls_port_serves_a_review_while_idle_http2_connections_fill_the_bound() {
    let mut f = fixture_config();
    // Above the legitimate client's own few connections (each request below opens one,
    // and the previous one may linger a moment): the peer holding most places gives way.
    f.config.limits.max_connections = 8;
    let server = Running::start(f.config, plain()).await;
    let (addr, h2) = (server.addr, alpn_client(&f.ca.pem, b"h2"));
    // Twice the bound, each idle after the HTTP/2 preface, reopened when closed.
    let (_holders, opened) = holders(16, move || {
        let h2 = h2.clone();
        async move {
            let tcp = hostile_tcp(addr).await.ok()?;
            let mut tls = TlsConnector::from(h2)
                .connect(ServerName::try_from("localhost").unwrap(), tcp)
                .await
                .ok()?;
            tls.write_all(&raw_h2::hello()).await.ok()?;
            Some(Box::new(tls) as Box<dyn tokio::io::AsyncRead + Unpin + Send>)
        }
    });
    eventually("the holders fill the bound", || async {
        opened.load(Ordering::Relaxed) >= 8
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let body = fixture("nfs.json");
    for request in 0..3 {
        let answer = tokio::time::timeout(ANSWERED_WITHIN, post_once(addr, default_client(&f.ca.pem), &body))
            .await
            .unwrap_or_else(|_| panic!("request {request}: no answer within {ANSWERED_WITHIN:?}"))
            .unwrap();
        assert_eq!(answer.0, 200, "request {request}");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_asks_nothing_is_closed_at_the_first_request_deadline() {
    let mut f = fixture_config();
    f.config.limits.header_read_timeout = Duration::from_secs(1);
    // Far past the test: only the first-request deadline may close these.
    f.config.limits.idle_timeout = Duration::from_secs(60);
    let server = Running::start(f.config, plain()).await;
    let started = Instant::now();
    // Nothing at all on the TLS port: not even a ClientHello.
    let mut silent = TcpStream::connect(server.addr).await.unwrap();
    // A TLS handshake and the HTTP/2 preface, then nothing; PINGs are not answered
    // either way (the keep-alive interval is 20 s).
    let mut preface_only = tls(server.addr, alpn_client(&f.ca.pem, b"h2")).await;
    preface_only.write_all(&raw_h2::hello()).await.unwrap();
    // Nothing on the admin port.
    let mut admin_silent = TcpStream::connect(server.metrics_addr).await.unwrap();
    let within = Duration::from_secs(4);
    assert!(
        closed_within(&mut silent, within).await.is_some(),
        "a silent TCP connection to the TLS port is still open"
    );
    assert!(
        closed_within(&mut preface_only, within).await.is_some(),
        "an HTTP/2 connection with only the preface is still open"
    );
    assert!(
        closed_within(&mut admin_silent, within).await.is_some(),
        "a silent admin connection is still open"
    );
    assert!(started.elapsed() < within, "{:?}", started.elapsed());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_advertised_http2_windows_are_the_configured_ones() {
    let mut f = fixture_config();
    f.config.limits.h2_stream_window = 48 * 1024;
    f.config.limits.h2_connection_window = 96 * 1024;
    let server = Running::start(f.config, plain()).await;
    let mut h2 = tls(server.addr, alpn_client(&f.ca.pem, b"h2")).await;
    h2.write_all(&raw_h2::hello()).await.unwrap();
    let (mut stream_window, mut connection_increment) = (None, None);
    while stream_window.is_none() || connection_increment.is_none() {
        let (kind, _, id, payload) = tokio::time::timeout(ANSWERED_WITHIN, raw_h2::read_frame(&mut h2))
            .await
            .expect("no SETTINGS and WINDOW_UPDATE")
            .expect("closed before SETTINGS and WINDOW_UPDATE");
        match kind {
            raw_h2::SETTINGS if payload.len() >= 6 => {
                stream_window = raw_h2::setting(&payload, raw_h2::SETTINGS_INITIAL_WINDOW_SIZE);
            }
            raw_h2::WINDOW_UPDATE if id == 0 => {
                connection_increment = Some(u32::from_be_bytes(payload[..4].try_into().unwrap()) & 0x7fff_ffff);
            }
            _ => {}
        }
    }
    assert_eq!(stream_window, Some(48 * 1024));
    // The connection window starts at 65,535 and is raised by the update.
    assert_eq!(connection_increment.map(|n| n + 65_535), Some(96 * 1024));
    server.stop().await;
}

/// The resident set of an idle server (6.5 MiB measured, docs/benchmarks.md), rounded up.
const BASELINE_BYTES: u64 = 10 << 20;
/// The pod's memory limit (deploy/): 128Mi.
const POD_LIMIT_BYTES: u64 = 128 << 20;

#[test]
fn what_the_default_limits_allow_fits_the_pod_limit_with_room_to_spare() {
    let limits = Limits::default();
    let worst = limits.worst_case_bytes();
    assert!(
        BASELINE_BYTES + worst <= POD_LIMIT_BYTES * 3 / 4,
        "{} MiB baseline + {} MiB worst case over 3/4 of the {} MiB pod limit",
        BASELINE_BYTES >> 20,
        worst >> 20,
        POD_LIMIT_BYTES >> 20
    );
    // The windows are counted: more connections or wider windows cost more.
    let wider = Limits {
        h2_connection_window: limits.h2_connection_window * 2,
        ..limits.clone()
    };
    assert!(wider.worst_case_bytes() > worst);
    let more = Limits {
        max_connections: limits.max_connections * 2,
        ..limits.clone()
    };
    assert!(more.worst_case_bytes() > worst);
    // The bound at which --max-connections would break the pod limit is far above what
    // the apiserver uses (a few connections per endpoint) and far below the old 512.
    let per_connection = (more.worst_case_bytes() - worst) / limits.max_connections as u64;
    let at_most =
        (POD_LIMIT_BYTES - BASELINE_BYTES - (worst - per_connection * limits.max_connections as u64)) / per_connection;
    assert!((64..512).contains(&at_most), "{at_most} connections fit");
    // A stream's window is no wider than the connection's.
    assert!(limits.h2_stream_window <= limits.h2_connection_window);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_does_not_wait_for_a_connection_still_in_its_tls_handshake() {
    let mut f = fixture_config();
    f.config.limits.header_read_timeout = Duration::from_secs(60);
    let mut server = Running::start(f.config, plain()).await;
    // Connected, no ClientHello: accepted and in its handshake.
    let _silent = TcpStream::connect(server.addr).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.shutdown();
    tokio::time::timeout(ANSWERED_WITHIN, &mut server.task)
        .await
        .expect("shutdown waited for a connection in its TLS handshake")
        .unwrap()
        .unwrap();
}
