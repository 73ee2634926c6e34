//! More hostile clients (issue 15), each against the `serve` binary so that the
//! server's own memory (VmRSS of its process) is what is measured: slow request heads
//! on many connections, thousands of idle connections, HTTP/2 rapid reset
//! (CVE-2023-44487) and stream floods, oversized headers and a CONTINUATION flood,
//! bodies shorter or longer than their Content-Length, and client certificates from the
//! wrong CA. During each attack a well-behaved client from 127.0.0.1 posts a review on a
//! fresh connection every 100 ms; every one must be answered 200 within
//! [`ANSWERED_WITHIN`], and the server's resident memory must not grow by more than
//! [`RSS_GROWTH_BOUND`]. The figures are printed (`--nocapture`; docs/testing.md).
//! Attacks come from 127.0.0.2 (an attacking pod's address is not the apiserver's).

mod common;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::net::*;
use common::*;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpSocket, TcpStream};
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// The longest a well-behaved review may take during an attack, TLS handshake
/// included: far below the apiserver's timeoutSeconds (10 s at most) on a busy 2-core
/// machine; unloaded it is a few milliseconds.
const ANSWERED_WITHIN: Duration = Duration::from_secs(3);
/// How much the server's resident memory may grow during an attack: well inside what
/// the limits allow (73 MiB, docs/webhook.md "Limits") and the pod's 128 MiB.
const RSS_GROWTH_BOUND: u64 = 64 << 20;
/// The attackers' source address.
const HOSTILE: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));

/// One attack at a time: they would compete for the same two cores.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The serve binary, killed when dropped.
struct Server {
    process: ServeProcess,
    ca: TestCa,
    _dir: tempfile::TempDir,
}

impl Server {
    async fn start(args: &[&str]) -> Self {
        Self::start_with(TestCa::new("ca"), tempfile::tempdir().unwrap(), args).await
    }

    async fn start_with(ca: TestCa, dir: tempfile::TempDir, args: &[&str]) -> Self {
        install_provider();
        let files = write_pair(dir.path(), &ca.server());
        let mut all = vec!["--shutdown-delay", "0s", "--log-level", "error"];
        all.extend(args);
        let process = spawn_serve(&[], &files, &all).await;
        Self { process, ca, _dir: dir }
    }

    fn addr(&self) -> SocketAddr {
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
fn rss_of(pid: u32) -> u64 {
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
async fn under_attack<F, Fut>(name: &str, server: &Server, client: Arc<rustls::ClientConfig>, mut attack: F)
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
async fn hostile_tcp(addr: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(HOSTILE, 0))?;
    socket.connect(addr).await
}

/// A TLS connection from [`HOSTILE`] offering `alpn`.
async fn hostile_tls(addr: SocketAddr, ca_pem: &str, alpn: &[u8]) -> std::io::Result<TlsStream<TcpStream>> {
    let tcp = hostile_tcp(addr).await?;
    TlsConnector::from(alpn_client(ca_pem, alpn))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
}

/// What the server sent on a raw HTTP/2 connection.
#[derive(Debug, Default)]
struct H2Seen {
    goaway: bool,
    resets: usize,
    /// The status of each answer: `200`, `400`… when sent as an HPACK static-table index,
    /// 0 otherwise (431 has no index).
    answers: Vec<u16>,
}

/// Reads frames until EOF, or until stream `watch` is answered or reset.
fn h2_reader(read: tokio::io::ReadHalf<TlsStream<TcpStream>>, watch: Option<u32>) -> tokio::task::JoinHandle<H2Seen> {
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

const RST_STREAM: u8 = 0x3;
const DATA: u8 = 0x0;
const CONTINUATION: u8 = 0x9;
const CANCEL: u32 = 0x8;

/// An HPACK literal header field (no indexing, no Huffman) with lengths of any size.
fn hpack_literal(name: &[u8], value: &[u8]) -> Vec<u8> {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_request_heads_on_many_connections() {
    let server = Server::start(&["--header-read-timeout", "5s"]).await;
    let (addr, ca_pem) = (server.addr(), server.ca.pem.clone());
    let client = default_client(&ca_pem);
    under_attack("slowloris heads", &server, client, || async {
        // 300 HTTP/1.1 connections (the bound is 64), each sending its head one byte
        // every 200 ms for 8 s, reconnecting 200 ms after the server closes it.
        let (opened, bytes) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let until = Instant::now() + Duration::from_secs(8);
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..300 {
            let (opened, bytes, ca_pem) = (opened.clone(), bytes.clone(), ca_pem.clone());
            tasks.spawn(async move {
                let head = b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
                while Instant::now() < until {
                    tokio::time::sleep(Duration::from_millis(200)).await; // slow in everything
                    let Ok(mut tls) = hostile_tls(addr, &ca_pem, b"http/1.1").await else { continue };
                    opened.fetch_add(1, Ordering::Relaxed);
                    for byte in head.iter().cycle() {
                        if Instant::now() >= until || tls.write_all(&[*byte]).await.is_err() {
                            break;
                        }
                        bytes.fetch_add(1, Ordering::Relaxed);
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                }
            });
        }
        while tasks.join_next().await.is_some() {}
        format!(
            "300 trickling connections, {} opened in all, {} head bytes sent",
            opened.load(Ordering::Relaxed),
            bytes.load(Ordering::Relaxed)
        )
    })
    .await;
}

/// Open files this process may have (the soft limit); the tests run within it.
fn open_files_limit() -> usize {
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|n| n.parse().ok())
        .unwrap_or(1024)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_idle_connections() {
    let server = Server::start(&[]).await;
    let (addr, ca_pem) = (server.addr(), server.ca.pem.clone());
    // 2,000 TCP and 200 TLS connections held by this process, within its open-files
    // limit (not raised: no rlimit crate among the dependencies).
    let limit = open_files_limit();
    let tcp_count = 2000.min(limit.saturating_sub(400));
    let client = default_client(&ca_pem);
    under_attack("idle connections", &server, client, || async {
        let started = Instant::now();
        let mut connects = tokio::task::JoinSet::new();
        for _ in 0..tcp_count {
            connects.spawn(async move {
                tokio::time::timeout(Duration::from_secs(5), hostile_tcp(addr))
                    .await
                    .ok()?
                    .ok()
            });
        }
        let mut tls_connects = tokio::task::JoinSet::new();
        for i in 0..200 {
            let ca_pem = ca_pem.clone();
            tls_connects.spawn(async move {
                let alpn: &[u8] = if i % 2 == 0 { b"h2" } else { b"http/1.1" };
                let mut tls = hostile_tls(addr, &ca_pem, alpn).await.ok()?;
                if i % 2 == 0 {
                    tls.write_all(&raw_h2::hello()).await.ok()?;
                }
                Some(tls)
            });
        }
        let tcp: Vec<TcpStream> = connects.join_all().await.into_iter().flatten().collect();
        let tls: Vec<_> = tls_connects.join_all().await.into_iter().flatten().collect();
        let (tcp_ok, tls_ok) = (tcp.len(), tls.len());
        let connected_in = started.elapsed();
        tokio::time::sleep(Duration::from_secs(5)).await; // held, the good client posting
        format!(
            "{tcp_ok} of {tcp_count} TCP connects and {tls_ok} of 200 TLS handshakes done in {:.1} s \
             (open-files limit {limit})",
            connected_in.as_secs_f64()
        )
    })
    .await;
}

/// A raw HTTP/2 connection from [`HOSTILE`], the preface sent: its write half and a
/// [`h2_reader`] on its read half.
async fn hostile_h2(
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
fn post_block() -> Vec<u8> {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_rapid_reset_and_stream_floods() {
    let server = Server::start(&[]).await;
    let (addr, ca) = (server.addr(), &server.ca);
    let client = default_client(&ca.pem);
    under_attack("HTTP/2 rapid reset", &server, client.clone(), || async {
        // CVE-2023-44487: HEADERS then RST_STREAM(CANCEL), 100 streams a write, for 6 s,
        // on a new connection whenever the server closes one.
        let (mut sent, mut connections, mut goaways) = (0usize, 0, 0);
        let until = Instant::now() + Duration::from_secs(6);
        while Instant::now() < until {
            let Ok((mut write, reader)) = hostile_h2(addr, ca, None).await else {
                continue;
            };
            connections += 1;
            let mut stream = 1u32;
            while Instant::now() < until && !reader.is_finished() {
                let mut batch = Vec::new();
                for _ in 0..100 {
                    batch.extend(raw_h2::post_headers(stream, 100));
                    batch.extend(raw_h2::frame(RST_STREAM, 0, stream, &CANCEL.to_be_bytes()));
                    stream += 2;
                }
                if write.write_all(&batch).await.is_err() {
                    break;
                }
                sent += 100;
                tokio::task::yield_now().await;
            }
            if let Ok(Ok(seen)) = tokio::time::timeout(Duration::from_secs(2), reader).await {
                goaways += usize::from(seen.goaway);
            }
        }
        format!("{sent} streams opened and reset on {connections} connections, closed with GOAWAY {goaways} times")
    })
    .await;
    under_attack("HTTP/2 stream flood", &server, client, || async {
        // 2,000 streams opened at once, past the advertised 32, bodies never sent.
        let (mut write, reader) = hostile_h2(addr, ca, None).await.unwrap();
        let frames: Vec<u8> = (0..2000u32)
            .flat_map(|i| raw_h2::post_headers(2 * i + 1, 100))
            .collect();
        let wrote = write.write_all(&frames).await.is_ok();
        let seen = tokio::time::timeout(Duration::from_secs(15), reader)
            .await
            .expect("a connection opening 2,000 streams at once is still open")
            .unwrap();
        assert!(seen.goaway || seen.resets > 0, "{seen:?}");
        format!(
            "2,000 streams opened at once (all written: {wrote}): {} refused (RST_STREAM), {} answered, \
             then GOAWAY {}",
            seen.resets,
            seen.answers.len(),
            seen.goaway
        )
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_headers_and_a_continuation_flood() {
    let server = Server::start(&[]).await;
    let (addr, ca) = (server.addr(), &server.ca);
    let client = default_client(&ca.pem);
    under_attack("oversized headers", &server, client, || async {
        // HTTP/1.1: a 64 KiB header: 431 or closed.
        let mut h1 = hostile_tls(addr, &ca.pem, b"http/1.1").await.unwrap();
        let big = "a".repeat(64 * 1024);
        let _ = h1
            .write_all(format!("POST /mutate HTTP/1.1\r\nHost: localhost\r\nX-Big: {big}\r\n\r\n").as_bytes())
            .await;
        let answer = closed_within(&mut h1, Duration::from_secs(8))
            .await
            .expect("HTTP/1.1 connection with a 64 KiB head still open");
        let h1 = h1_status(&answer);
        assert!(matches!(h1, Some(431) | None), "{h1:?}");
        // HTTP/2: a 32 KiB header list in HEADERS and CONTINUATION: refused (431 or reset).
        let (mut write, reader) = hostile_h2(addr, ca, Some(1)).await.unwrap();
        let mut block = post_block();
        block.extend(hpack_literal(b"x-big", &vec![b'a'; 32 * 1024]));
        let (first, rest) = block.split_at(16 * 1024);
        let mut frames = raw_h2::frame(raw_h2::HEADERS, 0x1, 1, first); // END_STREAM
        let parts: Vec<&[u8]> = rest.chunks(16 * 1024).collect();
        for (i, part) in parts.iter().enumerate() {
            let end_headers = if i + 1 == parts.len() { 0x4 } else { 0 };
            frames.extend(raw_h2::frame(CONTINUATION, end_headers, 1, part));
        }
        let _ = write.write_all(&frames).await;
        let list = tokio::time::timeout(Duration::from_secs(8), reader)
            .await
            .expect("a 32 KiB HTTP/2 header list neither answered nor refused")
            .unwrap();
        assert!(list.goaway || list.resets > 0 || !list.answers.is_empty(), "{list:?}");
        assert!(!list.answers.contains(&200), "{list:?}");
        // A CONTINUATION flood (CVE-2024-27316): HEADERS without END_HEADERS, then
        // 16 KiB CONTINUATIONs that never end, 64 MiB offered.
        let (mut write, reader) = hostile_h2(addr, ca, None).await.unwrap();
        write
            .write_all(&raw_h2::frame(raw_h2::HEADERS, 0, 1, &post_block()))
            .await
            .unwrap();
        let continuation = raw_h2::frame(
            CONTINUATION,
            0,
            1,
            &hpack_literal(b"x-flood", &vec![b'a'; 16 * 1024 - 16]),
        );
        let mut offered = 0usize;
        for _ in 0..4096 {
            match tokio::time::timeout(Duration::from_secs(2), write.write_all(&continuation)).await {
                Ok(Ok(())) => offered += continuation.len(),
                _ => break,
            }
        }
        let flood = tokio::time::timeout(Duration::from_secs(15), reader)
            .await
            .expect("HTTP/2 connection in a CONTINUATION flood still open")
            .unwrap();
        format!(
            "64 KiB HTTP/1.1 head: {}; 32 KiB HTTP/2 header list: {list:?}; CONTINUATION flood: \
             {:.1} MiB taken before the server closed, GOAWAY {}",
            h1.map_or("closed".to_owned(), |s| s.to_string()),
            offered as f64 / f64::from(1 << 20),
            flood.goaway
        )
    })
    .await;
}

/// The status of the first HTTP/1.1 answer in `bytes`, if any.
fn h1_status(bytes: &[u8]) -> Option<u16> {
    String::from_utf8_lossy(bytes)
        .strip_prefix("HTTP/1.1 ")?
        .get(..3)?
        .parse()
        .ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_shorter_or_longer_than_their_content_length() {
    // A body deadline far past the test: only the server noticing the mismatch answers.
    let server = Server::start(&["--body-read-timeout", "60s"]).await;
    let (addr, ca) = (server.addr(), &server.ca);
    let client = default_client(&ca.pem);
    let review = fixture("nfs.json");
    under_attack("Content-Length mismatch", &server, client, || async {
        let within = Duration::from_secs(8);
        let head = |len: usize| {
            format!(
                "POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
                 Content-Length: {len}\r\n\r\n"
            )
        };
        // HTTP/1.1, shorter then EOF (write side shut).
        let mut h1 = hostile_tls(addr, &ca.pem, b"http/1.1").await.unwrap();
        h1.write_all(head(review.len() + 1000).as_bytes()).await.unwrap();
        h1.write_all(&review).await.unwrap();
        h1.shutdown().await.unwrap();
        let short = closed_within(&mut h1, within)
            .await
            .expect("a short body then EOF: still open");
        let short = h1_status(&short);
        assert!(matches!(short, Some(400) | None), "{short:?}");
        // HTTP/1.1, longer: the declared bytes are a review's first half, the rest is
        // not a request head.
        let mut h1 = hostile_tls(addr, &ca.pem, b"http/1.1").await.unwrap();
        h1.write_all(head(review.len() / 2).as_bytes()).await.unwrap();
        h1.write_all(&review).await.unwrap();
        let long = closed_within(&mut h1, within).await.expect("a longer body: still open");
        let long = String::from_utf8_lossy(&long).into_owned();
        let statuses: Vec<&str> = long
            .match_indices("HTTP/1.1 ")
            .map(|(i, _)| &long[i + 9..i + 12])
            .collect();
        assert_eq!(statuses.first(), Some(&"400"), "{long}");
        assert!(!statuses.contains(&"200"), "{long}");
        // HTTP/2, DATA with END_STREAM short of content-length, and past it.
        let mut h2 = Vec::new();
        for (declared, sent) in [(review.len(), review.len() / 2), (review.len() / 2, review.len())] {
            let (mut write, reader) = hostile_h2(addr, ca, Some(1)).await.unwrap();
            write.write_all(&raw_h2::post_headers(1, declared)).await.unwrap();
            write
                .write_all(&raw_h2::frame(DATA, 0x1, 1, &review[..sent]))
                .await
                .unwrap();
            let seen = tokio::time::timeout(within, reader)
                .await
                .expect("no answer or reset")
                .unwrap();
            assert!(seen.goaway || seen.resets > 0 || !seen.answers.is_empty(), "{seen:?}");
            assert!(!seen.answers.contains(&200), "{seen:?}");
            h2.push(seen);
        }
        format!(
            "HTTP/1.1 short then EOF: {}; HTTP/1.1 longer: {statuses:?}; HTTP/2 short: {:?}; HTTP/2 longer: {:?}",
            short.map_or("closed".to_owned(), |s| s.to_string()),
            h2[0],
            h2[1]
        )
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_certificate_from_the_wrong_ca_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, clients, wrong) = (TestCa::new("ca"), TestCa::new("clients"), TestCa::new("wrong"));
    std::fs::write(dir.path().join("client-ca.crt"), &clients.pem).unwrap();
    let client_ca = dir.path().join("client-ca.crt").to_string_lossy().into_owned();
    let server = Server::start_with(ca, dir, &["--client-ca-file", &client_ca]).await;
    let (addr, ca_pem) = (server.addr(), server.ca.pem.clone());
    let versions = [&rustls::version::TLS13, &rustls::version::TLS12];
    let good = client_config(
        &ca_pem,
        &versions,
        &[b"h2", b"http/1.1"],
        Some(&clients.client("apiserver")),
    );
    let body = fixture("nfs.json");
    under_attack("wrong client CA", &server, good, || async {
        let (until, mut tries, mut stalled) = (Instant::now() + Duration::from_secs(5), 0usize, 0usize);
        while Instant::now() < until {
            tries += 1;
            // Alternately a certificate from another CA, and none, on TLS 1.3 and 1.2.
            let cert = tries.is_multiple_of(2).then(|| wrong.client("intruder"));
            let version = [&rustls::version::TLS13, &rustls::version::TLS12][tries / 2 % 2];
            let config = client_config(&ca_pem, &[version], &[b"h2", b"http/1.1"], cert.as_ref());
            match tokio::time::timeout(Duration::from_secs(5), post_once(addr, config, &body)).await {
                Ok(Ok((status, _, _))) => panic!("a client without a good certificate was answered {status}"),
                Ok(Err(_)) => {}
                // No answer either (a late refusal on a loaded machine).
                Err(_) => stalled += 1,
            }
        }
        let mut metrics = TcpStream::connect(server.process.metrics).await.unwrap();
        metrics
            .write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
            .await
            .unwrap();
        let mut text = String::new();
        metrics.read_to_string(&mut text).await.unwrap();
        let errors = text
            .lines()
            .find(|l| l.starts_with("pv_topology_webhook_tls_handshake_errors_total"))
            .unwrap_or("")
            .to_owned();
        format!("{tries} of {tries} clients without a good certificate got no answer ({stalled} still waiting at 5 s) ({errors})")
    })
    .await;
}
