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
//! The harness is tests/hostile_clients_harness; slow bodies are in
//! tests/hostile_clients_slow_bodies.rs.

mod common;
mod hostile_clients_harness;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::net::*;
use common::*;
use hostile_clients_harness::*;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

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
