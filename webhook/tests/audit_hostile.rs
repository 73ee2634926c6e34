//! `audit` against a hostile apiserver (issue 24, D5–D7, D9), the fake of
//! `audit_support`: every answer is bounded in time (per request and overall), bytes,
//! items and pages; rows are written as they are judged; each failure is one clean
//! line on stderr naming the server, with the bearer token cut from what the server
//! echoes. The runs are killed at [`LIMIT`], far past any bound they set.

mod audit_support;

use std::io::Write as _;
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use audit_support::*;
use serde_json::Value;

/// Where a run is killed: a test that reaches it has hung.
const LIMIT: Duration = Duration::from_secs(20);

fn hold(stream: &mut TcpStream) {
    // Accepted and read; never answered (the test process ends the thread).
    let _ = stream;
    std::thread::sleep(Duration::from_secs(600));
}

fn setup(behaviour: Behaviour) -> (FakeApiserver, tempfile::TempDir, std::path::PathBuf) {
    let fake = FakeApiserver::start(behaviour);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let kubeconfig = kubeconfig(dir.path(), &fake.url());
    (fake, dir, kubeconfig)
}

/// The run failed with exit status 1 and exactly one line on stderr, the program's
/// error line naming the fake's server; that line.
fn one_error_line(run: &Run, fake: &FakeApiserver) -> String {
    assert_eq!(
        run.code,
        Some(1),
        "exit status 1 (None: hung, killed at {LIMIT:?}): {run:?}"
    );
    let lines = run.lines();
    assert_eq!(lines.len(), 1, "one line on stderr: {:?}", run.stderr);
    let line = lines[0];
    assert!(
        line.starts_with("pv-topology-webhook: ") && !line.starts_with("pv-topology-webhook: error: "),
        "{line}"
    );
    assert!(
        line.contains(&format!("127.0.0.1:{}", fake.port)),
        "names the server: {line}"
    );
    line.to_owned()
}

// D5: time.

#[test]
fn a_list_never_answered_ends_at_the_request_timeout() {
    let (fake, _dir, kubeconfig) = setup(Arc::new(|_, stream| hold(stream)));
    let run = audit(
        &kubeconfig,
        &[],
        &[("PV_TOPOLOGY_WEBHOOK_REQUEST_TIMEOUT", "1s")],
        LIMIT,
    );
    let line = one_error_line(&run, &fake);
    assert!(
        line.contains("cannot list PersistentVolumes")
            && line.contains("no complete answer within --request-timeout 1s"),
        "{line}"
    );
    assert!(run.elapsed < Duration::from_secs(8), "{:?}", run.elapsed);
}

#[test]
fn a_dripping_body_ends_at_the_request_timeout() {
    // The head at once, then one byte every 100 ms: each read is quick, the answer never
    // complete.
    let (fake, _dir, kubeconfig) = setup(Arc::new(|_, stream| {
        let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n";
        let _ = stream.write_all(head.as_bytes());
        for _ in 0..100_000 {
            if stream.write_all(b" ").is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }));
    let run = audit(&kubeconfig, &["--request-timeout", "2s"], &[], LIMIT);
    let line = one_error_line(&run, &fake);
    assert!(
        line.contains("no complete answer within --request-timeout 2s"),
        "{line}"
    );
    assert!(run.elapsed < Duration::from_secs(9), "{:?}", run.elapsed);
}

#[test]
fn a_patch_never_answered_ends_at_the_request_timeout() {
    let honest = cluster(vec![pd("unlabelled", false)]);
    let (fake, _dir, kubeconfig) = setup(Arc::new(move |request, stream| {
        if request.method == "PATCH" {
            return hold(stream);
        }
        honest(request, stream)
    }));
    let run = audit(
        &kubeconfig,
        &["--fix-labels", "--output", "json"],
        &[("PV_TOPOLOGY_WEBHOOK_REQUEST_TIMEOUT", "1s")],
        LIMIT,
    );
    let line = one_error_line(&run, &fake);
    assert!(
        line.contains("--fix-labels") && line.contains("unlabelled") && line.contains("--request-timeout 1s"),
        "{line}"
    );
    let rows: Value = serde_json::from_str(&run.stdout).expect("the report is still written");
    assert_eq!(rows[0]["status"], "missing-labels", "not patched: {rows}");
}

#[test]
fn slow_pages_end_at_the_deadline_with_the_rows_so_far() {
    // Each page takes 300 ms and promises another.
    let (fake, _dir, kubeconfig) = setup(Arc::new(|request, stream| {
        std::thread::sleep(Duration::from_millis(300));
        let n: usize = request
            .query("continue")
            .and_then(|t| t.strip_prefix("page-"))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        let body = page(&[pd(&format!("pv-{n}"), true)], Some(&format!("page-{}", n + 1)));
        respond(stream, "200 OK", &body);
    }));
    let run = audit(
        &kubeconfig,
        &["--page-size", "1"],
        &[("PV_TOPOLOGY_WEBHOOK_DEADLINE", "2s")],
        LIMIT,
    );
    let line = one_error_line(&run, &fake);
    assert!(line.contains("--deadline 2s"), "{line}");
    assert!(run.elapsed < Duration::from_secs(6), "{:?}", run.elapsed);
    // The rows judged before the deadline were written as they were judged.
    assert!(run.stdout.starts_with("NAME"), "{}", run.stdout);
    assert!(run.stdout.lines().any(|l| l.starts_with("pv-0 ")), "{}", run.stdout);
}

// D6: bytes and items; rows streamed.

#[test]
fn an_endless_list_body_is_refused_at_the_page_cap() {
    // 200 OK without a length: items until 96 MiB are sent (a bound for the test's sake).
    let sent = Arc::new(AtomicUsize::new(0));
    let counter = sent.clone();
    let (fake, _dir, kubeconfig) = setup(Arc::new(move |_, stream| {
        let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n";
        let _ = stream.write_all(head.as_bytes());
        let _ = stream.write_all(br#"{"kind":"PersistentVolumeList","apiVersion":"v1","metadata":{},"items":["#);
        let item = br#"{"metadata":{"name":"x"}},"#.repeat(4096);
        while counter.load(Ordering::Relaxed) < 96 << 20 {
            if stream.write_all(&item).is_err() {
                return;
            }
            counter.fetch_add(item.len(), Ordering::Relaxed);
        }
    }));
    let run = audit(&kubeconfig, &[], &[], LIMIT);
    let line = one_error_line(&run, &fake);
    assert!(line.contains("larger than 32 MiB"), "{line}");
    assert!(sent.load(Ordering::Relaxed) < 96 << 20, "refused before the end");

    // A declared length over the cap is refused before the body is read.
    let (fake, _dir, kubeconfig) = setup(Arc::new(|_, stream| {
        let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1073741824\r\n\r\n";
        let _ = stream.write_all(head.as_bytes());
        hold(stream);
    }));
    let run = audit(&kubeconfig, &[], &[], LIMIT);
    let line = one_error_line(&run, &fake);
    assert!(line.contains("larger than 32 MiB"), "{line}");
    assert!(run.elapsed < Duration::from_secs(5), "{:?}", run.elapsed);
}

#[test]
fn a_page_with_more_items_than_asked_for_is_refused() {
    let (fake, _dir, kubeconfig) = setup(Arc::new(|_, stream| {
        let items: Vec<Value> = (0..3).map(|n| pd(&format!("pv-{n}"), true)).collect();
        respond(stream, "200 OK", &page(&items, None));
    }));
    let run = audit(&kubeconfig, &["--page-size", "2"], &[], LIMIT);
    let line = one_error_line(&run, &fake);
    assert!(line.contains("more than the 2 items asked for"), "{line}");
}

#[test]
fn rows_are_written_as_each_page_is_judged() {
    // Page one answers; page two never does.
    let (fake, _dir, kubeconfig) = setup(Arc::new(|request, stream| {
        if request.query("continue").is_some() {
            return hold(stream);
        }
        respond(
            stream,
            "200 OK",
            &page(&[pd("first", true), pd("second", false)], Some("more")),
        );
    }));
    let run = audit(
        &kubeconfig,
        &["--page-size", "2", "--output", "json", "--request-timeout", "1s"],
        &[],
        LIMIT,
    );
    one_error_line(&run, &fake);
    // The array is closed on the error, so the rows so far still parse.
    let rows: Value = serde_json::from_str(&run.stdout).expect("a JSON array");
    let names: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["first", "second"]);
}

#[test]
fn an_honest_cluster_is_paged_judged_and_fixed() {
    let pvs: Vec<Value> = (0..5).map(|n| pd(&format!("pv-{n}"), n != 3)).collect();
    let (fake, _dir, kubeconfig) = setup(cluster(pvs));
    let run = audit(&kubeconfig, &["--page-size", "2", "--output", "json"], &[], LIMIT);
    assert_eq!(run.code, Some(2), "pv-3 lacks labels: {run:?}");
    let rows: Value = serde_json::from_str(&run.stdout).expect("a JSON array");
    assert_eq!(rows.as_array().unwrap().len(), 5, "{rows}");
    assert_eq!(rows[3]["status"], "missing-labels");
    assert_eq!(
        run.lines(),
        ["audit: 5 PVs judged in 3 pages: 4 fine, 1 missing-labels"],
        "the summary on stderr"
    );
    assert_eq!(fake.count("PATCH"), 0, "read-only without --fix-labels");

    let run = audit(&kubeconfig, &["--page-size", "2", "--fix-labels"], &[], LIMIT);
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(fake.count("PATCH"), 1);
    assert!(
        run.stdout
            .lines()
            .any(|l| l.starts_with("pv-3 ") && l.contains(" labels-fixed ")),
        "{}",
        run.stdout
    );
    // The table's columns line up with its header.
    let lines: Vec<&str> = run.stdout.lines().collect();
    let at = lines[0].find("STATUS").unwrap();
    assert!(
        lines[1..]
            .iter()
            .all(|l| l[at..].starts_with("fine") || l[at..].starts_with("labels-fixed")),
        "{}",
        run.stdout
    );
}

// D7: pages.

#[test]
fn a_repeated_continue_token_is_an_error() {
    let (fake, _dir, kubeconfig) = setup(Arc::new(|_, stream| {
        respond(stream, "200 OK", &page(&[pd("again", true)], Some("the-same-token")));
    }));
    let run = audit(&kubeconfig, &["--page-size", "1"], &[], LIMIT);
    let line = one_error_line(&run, &fake);
    assert!(
        line.contains("the continue token of page 2 repeats an earlier page's"),
        "{line}"
    );
    assert_eq!(fake.count("GET"), 2);
}

#[test]
fn pages_past_max_pages_are_an_error() {
    let served = Arc::new(AtomicUsize::new(0));
    let counter = served.clone();
    let (fake, _dir, kubeconfig) = setup(Arc::new(move |_, stream| {
        let n = counter.fetch_add(1, Ordering::Relaxed);
        respond(
            stream,
            "200 OK",
            &page(&[pd(&format!("pv-{n}"), true)], Some(&format!("token-{n}"))),
        );
    }));
    let run = audit(
        &kubeconfig,
        &["--page-size", "1"],
        &[("PV_TOPOLOGY_WEBHOOK_MAX_PAGES", "5")],
        LIMIT,
    );
    let line = one_error_line(&run, &fake);
    assert!(line.contains("more than --max-pages 5 pages"), "{line}");
    assert_eq!(served.load(Ordering::Relaxed), 5, "no sixth page is asked for");
    assert_eq!(
        run.stdout.lines().count(),
        6,
        "the header and five rows: {}",
        run.stdout
    );
}

// D9: one clean line.

#[test]
fn an_echoed_token_is_cut_from_the_status_message() {
    let (fake, _dir, kubeconfig) = setup(Arc::new(|request, stream| {
        let echoed = format!(
            "persistentvolumes is forbidden: request with Authorization: {}\ncannot list",
            request.header("authorization").unwrap_or_default()
        );
        respond(stream, "403 Forbidden", &status(403, "Forbidden", &echoed));
    }));
    let run = audit(&kubeconfig, &[], &[], LIMIT);
    let line = one_error_line(&run, &fake);
    assert!(!run.stderr.contains(&TOKEN[..12]), "the token is cut: {line}");
    assert!(!run.stdout.contains(&TOKEN[..12]));
    assert!(
        line.contains(
            "persistentvolumes is forbidden: request with Authorization: <redacted>\\ncannot list (403 Forbidden)"
        ),
        "{line}"
    );

    // The same for a patch's refusal.
    let honest = cluster(vec![pd("unlabelled", false)]);
    let (fake, _dir, kubeconfig) = setup(Arc::new(move |request, stream| {
        if request.method == "PATCH" {
            let echoed = format!(
                "token {} may not patch",
                request.header("authorization").unwrap_or_default()
            );
            return respond(stream, "403 Forbidden", &status(403, "Forbidden", &echoed));
        }
        honest(request, stream)
    }));
    let run = audit(&kubeconfig, &["--fix-labels"], &[], LIMIT);
    let line = one_error_line(&run, &fake);
    assert!(!run.stderr.contains(&TOKEN[..12]), "the token is cut: {line}");
    assert!(line.contains("pv-topology-webhook-audit-fix-labels"), "{line}");
}

#[test]
fn a_broken_connection_is_one_line() {
    let (fake, _dir, kubeconfig) = setup(Arc::new(|_, stream| {
        let _ = stream.shutdown(std::net::Shutdown::Both);
    }));
    let run = audit(&kubeconfig, &[], &[], LIMIT);
    let line = one_error_line(&run, &fake);
    assert!(line.contains("cannot list PersistentVolumes"), "{line}");
}

#[test]
fn a_redirect_is_one_line_naming_it() {
    let (fake, _dir, kubeconfig) = setup(Arc::new(|_, stream| {
        respond_raw(stream, "302 Found", &[("Location", "http://127.0.0.1:9/login")], b"");
    }));
    let run = audit(&kubeconfig, &[], &[], LIMIT);
    let line = one_error_line(&run, &fake);
    assert!(line.contains("302 Found"), "{line}");
    assert!(!line.contains("deserializing") && !line.contains("EOF"), "{line}");
}

#[test]
fn a_server_error_is_one_line() {
    let (fake, _dir, kubeconfig) = setup(Arc::new(|_, stream| {
        respond(
            stream,
            "500 Internal Server Error",
            &status(500, "InternalError", "etcdserver: request timed out"),
        );
    }));
    let run = audit(&kubeconfig, &[], &[], LIMIT);
    let line = one_error_line(&run, &fake);
    assert!(
        line.contains("etcdserver: request timed out (500 InternalError)"),
        "{line}"
    );
    // A body that is no Status: its start, cleaned.
    let (fake, _dir, kubeconfig) = setup(Arc::new(|_, stream| {
        respond_raw(
            stream,
            "502 Bad Gateway",
            &[("Content-Type", "text/html")],
            b"<html>\x1b[31mbad gateway</html>",
        );
    }));
    let run = audit(&kubeconfig, &[], &[], LIMIT);
    let line = one_error_line(&run, &fake);
    assert!(line.contains("502 Bad Gateway") && line.contains("\\u{1b}"), "{line}");
}

#[test]
fn a_busy_apiserver_is_asked_again_three_times_in_all() {
    // Busy once (with Retry-After), then honest.
    let honest = cluster(vec![pd("pv-0", true)]);
    let answered = Arc::new(AtomicUsize::new(0));
    let counter = answered.clone();
    let (fake, _dir, kubeconfig) = setup(Arc::new(move |request, stream| {
        if counter.fetch_add(1, Ordering::Relaxed) == 0 {
            let body = status(429, "TooManyRequests", "too many requests, please try again later").to_string();
            return respond_raw(
                stream,
                "429 Too Many Requests",
                &[("Content-Type", "application/json"), ("Retry-After", "1")],
                body.as_bytes(),
            );
        }
        honest(request, stream)
    }));
    let run = audit(&kubeconfig, &[], &[], LIMIT);
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(fake.count("GET"), 2);

    // Always unavailable: three attempts, then its message.
    let (fake, _dir, kubeconfig) = setup(Arc::new(|_, stream| {
        respond(
            stream,
            "503 Service Unavailable",
            &status(503, "ServiceUnavailable", "apiserver is shutting down"),
        );
    }));
    let run = audit(&kubeconfig, &[], &[], LIMIT);
    let line = one_error_line(&run, &fake);
    assert!(
        line.contains("apiserver is shutting down (503 ServiceUnavailable)"),
        "{line}"
    );
    assert_eq!(fake.count("GET"), 3);
    assert!(
        run.elapsed >= Duration::from_secs(3),
        "waited 1 s, then 2 s: {:?}",
        run.elapsed
    );
}

#[test]
fn a_proxy_in_the_kubeconfig_is_refused_without_showing_it() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("kubeconfig");
    let config = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9", "proxy-url": "http://user:proxy-secret-pw@127.0.0.1:3128"}}],
        "users": [{"name": "u", "user": {"token": TOKEN}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    });
    std::fs::write(&path, config.to_string()).expect("write the kubeconfig");
    let run = audit(&path, &[], &[], LIMIT);
    assert_eq!(run.code, Some(1), "{run:?}");
    assert_eq!(run.lines().len(), 1, "{}", run.stderr);
    assert!(run.stderr.contains("proxy-url"), "{}", run.stderr);
    assert!(!run.stderr.contains("proxy-secret-pw"), "{}", run.stderr);
}
