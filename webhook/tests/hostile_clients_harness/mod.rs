//! The attack harness of the hostile-client tests (issue 15), shared by
//! tests/hostile_clients_more.rs and tests/hostile_clients_slow_bodies.rs: the `serve`
//! binary whose own memory (VmRSS of its process) is measured, [`under_attack`] (a
//! well-behaved client from 127.0.0.1 posting a review on a fresh connection every
//! 100 ms, each of which must be answered 200 within [`ANSWERED_WITHIN`], and the
//! server's resident memory growing by at most [`RSS_GROWTH_BOUND`]), and connections
//! from the attackers' address [`HOSTILE`].
#![allow(dead_code)] // each test file uses a different subset

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::common::net::*;
use super::common::*;
use rustls::pki_types::ServerName;
use tokio::io::AsyncWriteExt as _;
use tokio::net::{TcpSocket, TcpStream};
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// The longest a well-behaved review may take during an attack, TLS handshake
/// included: far below the apiserver's timeoutSeconds (10 s at most) on a busy 2-core
/// machine; unloaded it is a few milliseconds.
pub const ANSWERED_WITHIN: Duration = Duration::from_secs(3);
/// How much the server's resident memory may grow during an attack: well inside what
/// the limits allow (73 MiB, docs/webhook.md "Limits") and the pod's 128 MiB.
pub const RSS_GROWTH_BOUND: u64 = 64 << 20;
/// The attackers' source address.
pub const HOSTILE: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));

/// One attack at a time: they would compete for the same two cores.
pub static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The serve binary, killed when dropped.
pub struct Server {
    pub process: ServeProcess,
    pub ca: TestCa,
    _dir: tempfile::TempDir,
}

impl Server {
    pub async fn start(args: &[&str]) -> Self {
        Self::start_with(TestCa::new("ca"), tempfile::tempdir().unwrap(), args).await
    }

    pub async fn start_with(ca: TestCa, dir: tempfile::TempDir, args: &[&str]) -> Self {
        install_provider();
        let files = write_pair(dir.path(), &ca.server());
        let mut all = vec!["--shutdown-delay", "0s", "--log-level", "error"];
        all.extend(args);
        let process = spawn_serve(&[], &files, &all).await;
        Self { process, ca, _dir: dir }
    }

    pub fn addr(&self) -> SocketAddr {
        self.process.addr
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.process.child.kill();
        let _ = self.process.child.wait();
    }
}

/// VmRSS of process `pid`, in bytes.
pub fn rss_of(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

/// Runs `attack` over and over for at least 4 s (once when it lasts longer) while a
/// well-behaved client posts a review every 100 ms on a fresh connection and the
/// server's RSS is sampled; each round returns a line of its own figures. Then prints
/// everything and checks the bounds.
pub async fn under_attack<F, Fut>(name: &str, server: &Server, client: Arc<rustls::ClientConfig>, mut attack: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = String>,
{
    let _one = ONE_AT_A_TIME.lock().await;
    let (addr, pid) = (server.addr(), server.process.child.id());
    let rss_before = rss_of(pid);
    let done = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(AtomicUsize::new(rss_before as usize));
    let (sampler_done, sampler_peak) = (done.clone(), peak.clone());
    let sampler = tokio::spawn(async move {
        while !sampler_done.load(Ordering::Relaxed) {
            sampler_peak.fetch_max(rss_of(pid) as usize, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let prober_done = done.clone();
    let prober = tokio::spawn(async move {
        let body = fixture("nfs.json");
        let (mut answered, mut failures, mut slowest) = (0, Vec::new(), Duration::ZERO);
        tokio::time::sleep(Duration::from_millis(100)).await; // the attack first
        while !prober_done.load(Ordering::Relaxed) {
            let started = Instant::now();
            match tokio::time::timeout(ANSWERED_WITHIN * 2, post_once(addr, client.clone(), &body)).await {
                Ok(Ok((200, _, _))) => answered += 1,
                Ok(Ok((status, _, _))) => failures.push(format!("status {status}")),
                Ok(Err(error)) => failures.push(error.to_string()),
                Err(_) => failures.push(format!("no answer within {:?}", ANSWERED_WITHIN * 2)),
            }
            slowest = slowest.max(started.elapsed());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        (answered, failures, slowest)
    });
    let (started, mut rounds) = (Instant::now(), 0);
    let mut figures = String::new();
    while rounds == 0 || started.elapsed() < Duration::from_secs(4) {
        figures = attack().await;
        rounds += 1;
    }
    done.store(true, Ordering::Relaxed);
    let (answered, failures, slowest) = prober.await.unwrap();
    sampler.await.unwrap();
    let (peak, after) = (peak.load(Ordering::Relaxed) as u64, rss_of(pid));
    let mib = |b: u64| b as f64 / f64::from(1 << 20);
    println!(
        "{name}: {rounds} round(s) in {:.1} s, the last: {figures}; good client: {answered} answered 200, {} failed, \
         slowest {:.0} ms; server RSS {:.1} MiB before, {:.1} MiB peak, {:.1} MiB after",
        started.elapsed().as_secs_f64(),
        failures.len(),
        slowest.as_secs_f64() * 1000.0,
        mib(rss_before),
        mib(peak),
        mib(after)
    );
    assert!(failures.is_empty(), "{name}: the good client failed: {failures:?}");
    assert!(answered > 0, "{name}: the good client asked nothing");
    assert!(slowest <= ANSWERED_WITHIN, "{name}: a good review took {slowest:?}");
    let growth = peak.saturating_sub(rss_before);
    assert!(growth <= RSS_GROWTH_BOUND, "{name}: RSS grew by {:.1} MiB", mib(growth));
}

/// A TCP connection from [`HOSTILE`].
pub async fn hostile_tcp(addr: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(HOSTILE, 0))?;
    socket.connect(addr).await
}

/// A TLS connection from [`HOSTILE`] offering `alpn`.
pub async fn hostile_tls(addr: SocketAddr, ca_pem: &str, alpn: &[u8]) -> std::io::Result<TlsStream<TcpStream>> {
    let tcp = hostile_tcp(addr).await?;
    TlsConnector::from(alpn_client(ca_pem, alpn))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
}

/// What the server sent on a raw HTTP/2 connection.
#[derive(Debug, Default)]
pub struct H2Seen {
    pub goaway: bool,
    pub resets: usize,
    /// The status of each answer: `200`, `400`… when sent as an HPACK static-table index,
    /// 0 otherwise (431 has no index).
    pub answers: Vec<u16>,
}

/// Reads frames until EOF, or until stream `watch` is answered or reset.
pub fn h2_reader(
    read: tokio::io::ReadHalf<TlsStream<TcpStream>>,
    watch: Option<u32>,
) -> tokio::task::JoinHandle<H2Seen> {
    tokio::spawn(async move {
        let mut read = read;
        let mut seen = H2Seen::default();
        while let Some((kind, _, id, payload)) = raw_h2::read_frame(&mut read).await {
            match kind {
                raw_h2::GOAWAY => seen.goaway = true,
                RST_STREAM => seen.resets += 1,
                // Indexes 8, 12, 13 and 14 of the static table (RFC 7541 A).
                raw_h2::HEADERS => seen.answers.push(match payload.first() {
                    Some(&i @ 0x88..=0x8e) => [200, 204, 206, 304, 400, 404, 500][usize::from(i - 0x88)],
                    _ => 0,
                }),
                _ => continue,
            }
            if watch == Some(id) {
                break;
            }
        }
        seen
    })
}

pub const RST_STREAM: u8 = 0x3;
pub const DATA: u8 = 0x0;
pub const CONTINUATION: u8 = 0x9;
pub const CANCEL: u32 = 0x8;

/// An HPACK literal header field (no indexing, no Huffman) with lengths of any size.
pub fn hpack_literal(name: &[u8], value: &[u8]) -> Vec<u8> {
    fn string(out: &mut Vec<u8>, s: &[u8]) {
        // The length as a 7-bit prefix integer (RFC 7541 5.1).
        out.push(s.len().min(127) as u8);
        let mut n = s.len().saturating_sub(127);
        while s.len() >= 127 && n >= 128 {
            out.push((n % 128 + 128) as u8);
            n /= 128;
        }
        if s.len() >= 127 {
            out.push(n as u8);
        }
        out.extend_from_slice(s);
    }
    let mut out = vec![0x00];
    string(&mut out, name);
    string(&mut out, value);
    out
}

/// A raw HTTP/2 connection from [`HOSTILE`], the preface sent: its write half and a
/// [`h2_reader`] on its read half.
pub async fn hostile_h2(
    addr: SocketAddr,
    ca: &TestCa,
    watch: Option<u32>,
) -> std::io::Result<(
    tokio::io::WriteHalf<TlsStream<TcpStream>>,
    tokio::task::JoinHandle<H2Seen>,
)> {
    let (read, mut write) = tokio::io::split(hostile_tls(addr, &ca.pem, b"h2").await?);
    let reader = h2_reader(read, watch);
    write.write_all(&raw_h2::hello()).await?;
    Ok((write, reader))
}

/// The HPACK block of a POST's pseudo-headers.
pub fn post_block() -> Vec<u8> {
    let pseudo = [
        (":method", "POST"),
        (":scheme", "https"),
        (":path", "/mutate"),
        (":authority", "localhost"),
    ];
    pseudo
        .iter()
        .flat_map(|(n, v)| hpack_literal(n.as_bytes(), v.as_bytes()))
        .collect()
}
