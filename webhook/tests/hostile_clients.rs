//! Clients that hold resources instead of asking questions (issue 9, items 1 and 3):
//! oversize and trickled bodies, bodies held open across connections, idle and
//! half-open connections on both listeners, peers that never answer a ping, more
//! connections than the bound, and shutdown with such connections open. Limits are
//! shortened through `ServeConfig::limits` so that nothing waits for minutes.

mod common;

use std::net::SocketAddr;
use std::pin::Pin;
use std::process::Command;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use common::net::*;
use common::*;
use hyper::body::{Body, Bytes, Frame, SizeHint};
use hyper_util::rt::{TokioExecutor, TokioIo};
use pv_topology_webhook::review::MAX_REVIEW_BYTES;
use pv_topology_webhook::server::ServeConfig;
use rustls::ClientConfig;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// Longest a test waits for the server to do what a limit promises; far above the
/// shortened limits, far below "never" (the behaviour before the limits existed).
const PATIENCE: Duration = Duration::from_secs(8);

struct Fixture {
    _dir: tempfile::TempDir,
    ca: TestCa,
    config: ServeConfig,
}

fn fixture_config() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("ca");
    let config = test_config(write_pair(dir.path(), &ca.server()));
    Fixture { _dir: dir, ca, config }
}

fn alpn_client(ca_pem: &str, alpn: &[u8]) -> Arc<ClientConfig> {
    client_config(ca_pem, &[&rustls::version::TLS13], &[alpn], None)
}

/// A TLS connection with the handshake done and nothing sent.
async fn tls(addr: SocketAddr, config: Arc<ClientConfig>) -> TlsStream<TcpStream> {
    let tcp = TcpStream::connect(addr).await.unwrap();
    TlsConnector::from(config)
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap()
}

/// Reads until the server closes the connection (EOF or reset), for at most `within`;
/// returns what was read, or `None` when the connection is still open.
async fn closed_within(stream: &mut (impl AsyncRead + Unpin), within: Duration) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let read = async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(within, read).await.ok()?;
    Some(out)
}

/// The status code of the first HTTP/1 response in `bytes`.
fn h1_status(bytes: &[u8]) -> Option<u16> {
    let text = String::from_utf8_lossy(bytes);
    text.strip_prefix("HTTP/1.1 ")?.get(..3)?.parse().ok()
}

fn h1_post_head(content_length: usize) -> String {
    format!(
        "POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {content_length}\r\n\r\n"
    )
}

/// A request body of `len` bytes (declared up front) that sends `first` bytes, then
/// `step` bytes every `every`, or nothing more when `every` is `None`.
struct Trickle {
    len: u64,
    sent: u64,
    first: usize,
    step: usize,
    every: Option<Duration>,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Trickle {
    fn stalled(len: usize, first: usize) -> Self {
        Self::new(len, first, 0, None)
    }

    fn new(len: usize, first: usize, step: usize, every: Option<Duration>) -> Self {
        Self {
            len: len as u64,
            sent: 0,
            first,
            step,
            every,
            sleep: None,
        }
    }

    fn chunk(&mut self, n: usize) -> Poll<Option<Result<Frame<Bytes>, std::convert::Infallible>>> {
        let n = (n as u64).min(self.len - self.sent);
        self.sent += n;
        Poll::Ready(Some(Ok(Frame::data(Bytes::from(vec![b' '; n as usize])))))
    }
}

impl Body for Trickle {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if self.sent == 0 && self.first > 0 {
            let first = self.first;
            return self.chunk(first);
        }
        if self.sent >= self.len {
            return Poll::Ready(None);
        }
        let Some(every) = self.every else {
            return Poll::Pending;
        };
        let sleep = self.sleep.get_or_insert_with(|| Box::pin(tokio::time::sleep(every)));
        if sleep.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        self.sleep = None;
        let step = self.step;
        self.chunk(step)
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.len)
    }
}

/// An HTTP/2 client over TLS whose request bodies are [`Trickle`]s; the handle ends when
/// the connection does.
async fn h2_client(
    addr: SocketAddr,
    ca_pem: &str,
) -> (
    hyper::client::conn::http2::SendRequest<Trickle>,
    tokio::task::JoinHandle<()>,
) {
    let io = TokioIo::new(tls(addr, alpn_client(ca_pem, b"h2")).await);
    let (send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
        .await
        .unwrap();
    let driver = tokio::spawn(async move {
        let _ = conn.await;
    });
    (send, driver)
}

fn post(body: Trickle) -> hyper::Request<Trickle> {
    hyper::Request::post("https://localhost/mutate")
        .header("content-type", "application/json")
        .body(body)
        .unwrap()
}

/// Raw HTTP/2 frames, for what a well-behaved client library will not do.
mod raw_h2 {
    use super::*;

    pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    pub const HEADERS: u8 = 0x1;
    pub const SETTINGS: u8 = 0x4;
    pub const PING: u8 = 0x6;
    pub const GOAWAY: u8 = 0x7;
    pub const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 0x3;

    pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let len = payload.len() as u32;
        let mut out = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
        out.extend_from_slice(&stream.to_be_bytes());
        out.extend_from_slice(payload);
        out
    }

    /// The client preface and an empty SETTINGS frame.
    pub fn hello() -> Vec<u8> {
        let mut out = PREFACE.to_vec();
        out.extend(frame(SETTINGS, 0, 0, &[]));
        out
    }

    /// A HEADERS frame (END_HEADERS, not END_STREAM) opening a POST of `content_length`
    /// bytes, HPACK literals without Huffman coding.
    pub fn post_headers(stream: u32, content_length: usize) -> Vec<u8> {
        let mut block = Vec::new();
        for (name, value) in [
            (":method", "POST".to_owned()),
            (":scheme", "https".to_owned()),
            (":path", "/mutate".to_owned()),
            (":authority", "localhost".to_owned()),
            ("content-type", "application/json".to_owned()),
            ("content-length", content_length.to_string()),
        ] {
            block.push(0x00);
            block.push(name.len() as u8);
            block.extend_from_slice(name.as_bytes());
            block.push(value.len() as u8);
            block.extend_from_slice(value.as_bytes());
        }
        frame(HEADERS, 0x4, stream, &block)
    }

    /// The next frame: type, flags, stream and payload; `None` at EOF.
    pub async fn read_frame(stream: &mut (impl AsyncRead + Unpin)) -> Option<(u8, u8, u32, Vec<u8>)> {
        let mut head = [0u8; 9];
        stream.read_exact(&mut head).await.ok()?;
        let len = (usize::from(head[0]) << 16) | (usize::from(head[1]) << 8) | usize::from(head[2]);
        let id = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        let mut payload = vec![0u8; len];
        stream.read_exact(&mut payload).await.ok()?;
        Some((head[3], head[4], id, payload))
    }

    /// The types of the frames read until EOF.
    pub async fn frame_kinds(stream: &mut (impl AsyncRead + Unpin)) -> Vec<u8> {
        let mut kinds = Vec::new();
        while let Some((kind, _, _, _)) = read_frame(stream).await {
            kinds.push(kind);
        }
        kinds
    }

    /// The value of `id` in a SETTINGS payload.
    pub fn setting(payload: &[u8], id: u16) -> Option<u32> {
        payload.chunks_exact(6).find_map(|p| {
            (u16::from_be_bytes([p[0], p[1]]) == id).then(|| u32::from_be_bytes([p[2], p[3], p[4], p[5]]))
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_content_length_over_the_limit_is_refused_before_the_body() {
    let f = fixture_config();
    let server = Running::start(f.config, plain()).await;
    // HTTP/1.1: the head alone, then wait for the answer.
    let mut h1 = tls(server.addr, alpn_client(&f.ca.pem, b"http/1.1")).await;
    h1.write_all(h1_post_head(MAX_REVIEW_BYTES + 1).as_bytes())
        .await
        .unwrap();
    let answer = closed_within(&mut h1, PATIENCE)
        .await
        .expect("no answer without the body");
    assert_eq!(h1_status(&answer), Some(413), "{}", String::from_utf8_lossy(&answer));
    // HTTP/2: the same on a stream, and the connection stays usable.
    let (mut send, _driver) = h2_client(server.addr, &f.ca.pem).await;
    let response = tokio::time::timeout(
        PATIENCE,
        send.send_request(post(Trickle::stalled(MAX_REVIEW_BYTES + 1, 0))),
    )
    .await
    .expect("no answer without the body")
    .unwrap();
    assert_eq!(response.status(), 413);
    let body = fixture("nfs.json");
    let response = send
        .send_request(post(Trickle::new(body.len(), body.len(), 0, None)))
        .await
        .unwrap();
    assert_eq!(response.status(), 400, "a body of spaces is not a review");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_trickled_past_the_deadline_is_cut_off() {
    let mut f = fixture_config();
    f.config.limits.body_read_timeout = Duration::from_secs(1);
    let server = Running::start(f.config, plain()).await;
    // HTTP/1.1: one byte every 200 ms of a 1000-byte body.
    let h1 = tls(server.addr, alpn_client(&f.ca.pem, b"http/1.1")).await;
    let (mut read, mut write) = tokio::io::split(h1);
    write.write_all(h1_post_head(1000).as_bytes()).await.unwrap();
    let trickle = tokio::spawn(async move {
        for _ in 0..1000 {
            if write.write_all(b" ").await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    let answer = closed_within(&mut read, PATIENCE)
        .await
        .expect("still reading the trickle");
    assert!(
        matches!(h1_status(&answer), Some(408) | None),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    trickle.abort();
    // HTTP/2: a stream that sends half its body and stops.
    let (mut send, _driver) = h2_client(server.addr, &f.ca.pem).await;
    let response = tokio::time::timeout(
        PATIENCE,
        send.send_request(post(Trickle::new(1000, 10, 10, Some(Duration::from_millis(200))))),
    )
    .await
    .expect("still reading the trickle");
    if let Ok(response) = response {
        assert_eq!(response.status(), 408);
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_held_open_cannot_buffer_more_than_the_budget() {
    let mut f = fixture_config();
    f.config.limits.max_buffered_body_bytes = 256 * 1024;
    let server = Running::start(f.config, plain()).await;
    let (len, sent) = (200 * 1024, 150 * 1024);
    // The first connection holds 150 KiB of a 200 KiB body.
    let mut first = tls(server.addr, alpn_client(&f.ca.pem, b"http/1.1")).await;
    first.write_all(h1_post_head(len).as_bytes()).await.unwrap();
    first.write_all(&vec![b' '; sent]).await.unwrap();
    first.flush().await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    // The second, on HTTP/2, would take the total over the budget: refused at once.
    let (mut send, _driver) = h2_client(server.addr, &f.ca.pem).await;
    let response = tokio::time::timeout(PATIENCE, send.send_request(post(Trickle::stalled(len, sent))))
        .await
        .expect("a held body past the budget is still being buffered")
        .unwrap();
    assert_eq!(response.status(), 503);
    // Once the first lets go, the budget is back.
    drop(first);
    let body = fixture("nfs.json");
    eventually("a review is answered once the held body is gone", || async {
        matches!(
            post_once(server.addr, default_client(&f.ca.pem), &body).await,
            Ok((200, _, _))
        )
    })
    .await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_advertises_a_small_stream_limit() {
    let f = fixture_config();
    let expected = f.config.limits.max_concurrent_streams;
    assert!(expected <= 32, "{expected}");
    let server = Running::start(f.config, plain()).await;
    let mut h2 = tls(server.addr, alpn_client(&f.ca.pem, b"h2")).await;
    h2.write_all(&raw_h2::hello()).await.unwrap();
    let (kind, _, _, payload) = raw_h2::read_frame(&mut h2).await.unwrap();
    assert_eq!(kind, raw_h2::SETTINGS);
    assert_eq!(
        raw_h2::setting(&payload, raw_h2::SETTINGS_MAX_CONCURRENT_STREAMS),
        Some(expected)
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_and_half_open_connections_are_closed_on_both_listeners() {
    let mut f = fixture_config();
    f.config.limits.idle_timeout = Duration::from_secs(1);
    f.config.limits.header_read_timeout = Duration::from_secs(1);
    let server = Running::start(f.config, plain()).await;
    let started = Instant::now();
    // HTTP/2 after the preface.
    let mut h2 = tls(server.addr, alpn_client(&f.ca.pem, b"h2")).await;
    h2.write_all(&raw_h2::hello()).await.unwrap();
    // HTTP/1.1 after the handshake: no byte, and one byte.
    let mut h1_silent = tls(server.addr, alpn_client(&f.ca.pem, b"http/1.1")).await;
    let mut h1_one_byte = tls(server.addr, alpn_client(&f.ca.pem, b"http/1.1")).await;
    h1_one_byte.write_all(b"P").await.unwrap();
    // The admin listener: nothing, and a partial request head.
    let mut admin_silent = TcpStream::connect(server.metrics_addr).await.unwrap();
    let mut admin_partial = TcpStream::connect(server.metrics_addr).await.unwrap();
    admin_partial
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: local")
        .await
        .unwrap();
    let h2_frames = closed_within(&mut h2, PATIENCE).await;
    assert!(h2_frames.is_some(), "idle HTTP/2 connection still open");
    assert!(
        closed_within(&mut h1_silent, PATIENCE).await.is_some(),
        "silent HTTP/1.1 connection still open"
    );
    assert!(
        closed_within(&mut h1_one_byte, PATIENCE).await.is_some(),
        "HTTP/1.1 connection with one byte still open"
    );
    assert!(
        closed_within(&mut admin_silent, PATIENCE).await.is_some(),
        "silent admin connection still open"
    );
    assert!(
        closed_within(&mut admin_partial, PATIENCE).await.is_some(),
        "admin connection with a partial head still open"
    );
    assert!(started.elapsed() < PATIENCE, "{:?}", started.elapsed());

    // An HTTP/2 connection that has been used is closed once idle too.
    let (mut send, driver) = h2_client(server.addr, &f.ca.pem).await;
    let body = fixture("nfs.json");
    let response = send
        .send_request(post(Trickle::new(body.len(), body.len(), 0, None)))
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    tokio::time::timeout(PATIENCE, driver)
        .await
        .expect("used HTTP/2 connection still open after the idle timeout")
        .unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_peer_that_never_answers_pings_is_dropped() {
    let mut f = fixture_config();
    f.config.limits.keep_alive_interval = Duration::from_millis(300);
    f.config.limits.keep_alive_timeout = Duration::from_millis(300);
    let server = Running::start(f.config, plain()).await;
    let mut h2 = tls(server.addr, alpn_client(&f.ca.pem, b"h2")).await;
    h2.write_all(&raw_h2::hello()).await.unwrap();
    let kinds = tokio::time::timeout(PATIENCE, raw_h2::frame_kinds(&mut h2))
        .await
        .expect("a peer that does not answer pings is still connected");
    assert!(kinds.contains(&raw_h2::PING), "{kinds:?}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_bound_wait_for_a_free_slot() {
    let mut f = fixture_config();
    f.config.limits.max_connections = 2;
    f.config.limits.max_admin_connections = 1;
    let server = Running::start(f.config, plain()).await;
    let first = tls(server.addr, alpn_client(&f.ca.pem, b"h2")).await;
    let _second = tls(server.addr, alpn_client(&f.ca.pem, b"h2")).await;
    let addr = server.addr;
    let config = alpn_client(&f.ca.pem, b"h2");
    let mut third = tokio::spawn(async move { tls(addr, config).await });
    assert!(
        tokio::time::timeout(Duration::from_secs(1), &mut third).await.is_err(),
        "a third connection was served past the bound of 2"
    );
    drop(first);
    tokio::time::timeout(PATIENCE, third)
        .await
        .expect("the third connection never got the freed slot")
        .unwrap();

    let mut admin = TcpStream::connect(server.metrics_addr).await.unwrap();
    admin.write_all(b"GET /healthz HTTP/1.1\r\n").await.unwrap();
    let metrics_addr = server.metrics_addr;
    let mut probe = tokio::spawn(async move { get_status(metrics_addr, "/healthz").await.unwrap() });
    assert!(
        tokio::time::timeout(Duration::from_secs(1), &mut probe).await.is_err(),
        "a second admin connection was served past the bound of 1"
    );
    drop(admin);
    let status = tokio::time::timeout(PATIENCE, probe).await.unwrap().unwrap();
    assert_eq!(status, 200);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_cuts_stuck_connections_at_the_drain_timeout() {
    let mut f = fixture_config();
    f.config.drain_timeout = Duration::from_secs(1);
    f.config.limits.header_read_timeout = Duration::from_secs(60);
    f.config.limits.body_read_timeout = Duration::from_secs(60);
    let mut server = Running::start(f.config, plain()).await;
    let mut admin = TcpStream::connect(server.metrics_addr).await.unwrap();
    admin.write_all(b"GET /metrics HTTP/1.1\r\n").await.unwrap();
    let mut h1 = tls(server.addr, alpn_client(&f.ca.pem, b"http/1.1")).await;
    h1.write_all(b"POST /mutate HTTP/1.1\r\n").await.unwrap();
    let mut h2 = tls(server.addr, alpn_client(&f.ca.pem, b"h2")).await;
    h2.write_all(&raw_h2::hello()).await.unwrap();
    h2.write_all(&raw_h2::post_headers(1, 100)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    server.shutdown();
    tokio::time::timeout(PATIENCE, &mut server.task)
        .await
        .expect("shutdown waited past the drain timeout for stuck connections")
        .unwrap()
        .unwrap();
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_millis(900), "{elapsed:?}");
    assert!(closed_within(&mut admin, Duration::from_secs(2)).await.is_some());
    assert!(closed_within(&mut h1, Duration::from_secs(2)).await.is_some());
    // The HTTP/2 client was told to go away before being cut.
    let kinds = tokio::time::timeout(Duration::from_secs(2), raw_h2::frame_kinds(&mut h2))
        .await
        .unwrap();
    assert!(kinds.contains(&raw_h2::GOAWAY), "{kinds:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_with_a_half_open_admin_connection_exits_within_the_drain_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_pair(dir.path(), &TestCa::new("ca").server());
    let ServeProcess {
        mut child,
        metrics: metrics_addr,
        ..
    } = spawn_serve(&[], &files, &["--shutdown-delay", "0s", "--drain-timeout", "2s"]).await;
    let mut admin = TcpStream::connect(metrics_addr).await.unwrap();
    admin.write_all(b"GET /metrics HTTP/1.1\r\nHost: x").await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let signalled = Instant::now();
    let pid = child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let exited = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if signalled.elapsed() > Duration::from_secs(15) {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let Some(status) = exited else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("still running 15 s after SIGTERM with --drain-timeout 2s");
    };
    let elapsed = signalled.elapsed();
    assert!(status.success(), "{status}");
    assert!(elapsed < Duration::from_secs(6), "{elapsed:?}");
    drop(admin);
}
