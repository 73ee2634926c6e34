//! Slow request bodies (slowloris on bodies, issue 15) in the attack harness of
//! tests/hostile_clients_harness: many requests from 127.0.0.2, each with a valid head
//! declaring the largest body allowed and then trickling that body one byte at a time,
//! on HTTP/1.1 (a request per connection) and HTTP/2 (32 streams per connection).
//! Meanwhile the well-behaved client must get 200 within `ANSWERED_WITHIN` and the
//! server's RSS must grow by at most `RSS_GROWTH_BOUND`; the trickled requests must be
//! cut off by `--body-read-timeout` (408). The figures are printed (`--nocapture`;
//! docs/testing.md "Hostile clients").
//!
//! The attack holds fewer connections than `--max-connections` (64): a connection with
//! a request open keeps its place until its body deadline (docs/webhook.md "Limits"),
//! so an attacker holding every place makes other clients wait up to
//! `--body-read-timeout`, which no latency bound below that can hide.

mod common;
mod hostile_clients_harness;

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::net::*;
use hostile_clients_harness::*;
use pv_topology_webhook::review::MAX_REVIEW_BYTES;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// HTTP/1.1 connections trickling a body each.
const H1_CONNECTIONS: usize = 40;
/// HTTP/2 connections trickling a body on each of 32 streams.
const H2_CONNECTIONS: usize = 8;
const H2_STREAMS: usize = 32;
/// A byte per request this often.
const TRICKLE: Duration = Duration::from_millis(200);
/// How long each round of the attack trickles: past the server's body deadline.
const ROUND: Duration = Duration::from_secs(8);
const BODY_READ_TIMEOUT: &str = "5s";

/// What the attackers did and were answered, over a round.
#[derive(Default)]
struct Tally {
    /// Requests begun (heads sent).
    requests: AtomicUsize,
    /// Body bytes sent, all requests together.
    bytes: AtomicUsize,
    /// Requests answered 408 (HTTP/1.1), or answered (HTTP/2: 408 has no HPACK index).
    cut: AtomicUsize,
    /// Connections opened.
    connections: AtomicUsize,
}

fn add(counter: &AtomicUsize, n: usize) {
    counter.fetch_add(n, Ordering::Relaxed);
}

/// One HTTP/1.1 attacker: a head declaring `MAX_REVIEW_BYTES`, then a byte every
/// [`TRICKLE`] until the server answers or closes; again on a new connection, until
/// `until`.
async fn h1_trickler(addr: std::net::SocketAddr, ca_pem: String, tally: Arc<Tally>, until: Instant) {
    let head = format!(
        "POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
         Content-Length: {MAX_REVIEW_BYTES}\r\n\r\n"
    );
    while Instant::now() < until {
        let Ok(tls) = hostile_tls(addr, &ca_pem, b"http/1.1").await else {
            tokio::time::sleep(TRICKLE).await;
            continue;
        };
        add(&tally.connections, 1);
        let (mut read, mut write) = tokio::io::split(tls);
        let answer = tokio::spawn(async move {
            let mut bytes = Vec::new();
            let _ = read.read_to_end(&mut bytes).await;
            bytes
        });
        if write.write_all(head.as_bytes()).await.is_err() {
            continue;
        }
        add(&tally.requests, 1);
        while Instant::now() < until && !answer.is_finished() {
            if write.write_all(b" ").await.is_err() {
                break;
            }
            add(&tally.bytes, 1);
            tokio::time::sleep(TRICKLE).await;
        }
        if !answer.is_finished() && Instant::now() >= until {
            answer.abort();
            break;
        }
        if let Ok(bytes) = answer.await
            && bytes.starts_with(b"HTTP/1.1 408")
        {
            add(&tally.cut, 1);
        }
    }
}

/// One HTTP/2 attacker: [`H2_STREAMS`] streams each declaring `MAX_REVIEW_BYTES`, a
/// DATA frame of one byte on each every [`TRICKLE`]; a stream the server answers or
/// resets is cancelled and replaced by a new one; again on a new connection, until
/// `until`.
async fn h2_trickler(addr: std::net::SocketAddr, ca_pem: String, tally: Arc<Tally>, until: Instant) {
    while Instant::now() < until {
        let Ok(tls) = hostile_tls(addr, &ca_pem, b"h2").await else {
            tokio::time::sleep(TRICKLE).await;
            continue;
        };
        add(&tally.connections, 1);
        let (mut read, mut write) = tokio::io::split(tls);
        // Streams the server answered (HEADERS) or reset, seen by the reader.
        let ended: Arc<Mutex<HashSet<u32>>> = Arc::default();
        let reader = tokio::spawn({
            let (ended, tally) = (ended.clone(), tally.clone());
            async move {
                while let Some((kind, _, id, _)) = raw_h2::read_frame(&mut read).await {
                    if kind == raw_h2::HEADERS {
                        add(&tally.cut, 1);
                    }
                    if (kind == raw_h2::HEADERS || kind == RST_STREAM) && id != 0 {
                        ended.lock().expect("ended streams").insert(id);
                    }
                }
            }
        });
        let mut next = 1u32;
        let mut open: Vec<u32> = Vec::new();
        let mut frames = raw_h2::hello();
        while Instant::now() < until && !reader.is_finished() {
            let gone: HashSet<u32> = std::mem::take(&mut *ended.lock().expect("ended streams"));
            for id in &gone {
                if open.contains(id) {
                    frames.extend(raw_h2::frame(RST_STREAM, 0, *id, &CANCEL.to_be_bytes()));
                }
            }
            open.retain(|id| !gone.contains(id));
            while open.len() < H2_STREAMS {
                frames.extend(raw_h2::post_headers(next, MAX_REVIEW_BYTES));
                open.push(next);
                next += 2;
                add(&tally.requests, 1);
            }
            for id in &open {
                frames.extend(raw_h2::frame(DATA, 0, *id, b" "));
            }
            if write.write_all(&std::mem::take(&mut frames)).await.is_err() {
                break;
            }
            add(&tally.bytes, open.len());
            tokio::time::sleep(TRICKLE).await;
        }
        reader.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_bodies_on_http1_and_http2() {
    let server = Server::start(&["--body-read-timeout", BODY_READ_TIMEOUT]).await;
    let (addr, ca_pem) = (server.addr(), server.ca.pem.clone());
    let client = default_client(&ca_pem);
    under_attack("slowloris bodies", &server, client, || async {
        let (h1, h2) = (Arc::new(Tally::default()), Arc::new(Tally::default()));
        let until = Instant::now() + ROUND;
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..H1_CONNECTIONS {
            tasks.spawn(h1_trickler(addr, ca_pem.clone(), h1.clone(), until));
        }
        for _ in 0..H2_CONNECTIONS {
            tasks.spawn(h2_trickler(addr, ca_pem.clone(), h2.clone(), until));
        }
        while tasks.join_next().await.is_some() {}
        let get = |c: &AtomicUsize| c.load(Ordering::Relaxed);
        // Every request begun in the round's first 3 s has passed the 5 s deadline.
        assert!(get(&h1.cut) > 0, "no trickled HTTP/1.1 body was cut off with 408");
        assert!(get(&h2.cut) > 0, "no trickled HTTP/2 body was answered (408)");
        format!(
            "{} HTTP/1.1 connections trickling a body each: {} requests in all, {} body bytes sent, {} cut off \
             with 408; {} HTTP/2 connections x {H2_STREAMS} streams: {} connections, {} requests, {} body bytes, \
             {} answered (408); each declaring {MAX_REVIEW_BYTES} bytes, a byte per {} ms, body deadline \
             {BODY_READ_TIMEOUT}",
            H1_CONNECTIONS,
            get(&h1.requests),
            get(&h1.bytes),
            get(&h1.cut),
            H2_CONNECTIONS,
            get(&h2.connections),
            get(&h2.requests),
            get(&h2.bytes),
            get(&h2.cut),
            TRICKLE.as_millis()
        )
    })
    .await;
}
