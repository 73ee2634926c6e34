//! `audit --kubeconfig kc` when the apiserver cannot be reached or refuses the
//! credentials (issue 25, item 6): the one error line names the server's URL and what
//! went wrong ("connection refused", "timed out"), and gives the RBAC hint only when the
//! apiserver refused the client (401, 403), never for a network failure.

mod audit_support;

use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use audit_support::*;

/// Where a run is killed: a test that reaches it has hung.
const LIMIT: Duration = Duration::from_secs(20);

const RBAC_HINT: &str = "the audit needs `list` on persistentvolumes";

/// The run failed with exit status 1 and one line on stderr naming `server`; that line.
fn error_line(run: &Run, server: &str) -> String {
    assert_eq!(run.code, Some(1), "exit status 1 (None: killed at {LIMIT:?}): {run:?}");
    let lines = run.lines();
    assert_eq!(lines.len(), 1, "one line on stderr: {:?}", run.stderr);
    assert!(lines[0].contains(server), "names the server {server}: {}", lines[0]);
    assert!(
        !run.stderr.contains(&TOKEN[..12]),
        "the token is never shown: {}",
        run.stderr
    );
    lines[0].to_owned()
}

/// A loopback port nothing listens on (bound, then let go).
fn dead_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    listener.local_addr().expect("an address").port()
}

#[test]
fn a_dead_server_is_named_with_connection_refused_and_no_rbac_hint() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let server = format!("https://127.0.0.1:{}", dead_port());
    let kubeconfig = kubeconfig(dir.path(), &server);
    let run = audit(&kubeconfig, &[], &[], LIMIT);
    let line = error_line(&run, &server);
    assert!(line.contains("connection refused"), "{line}");
    assert!(!line.contains(RBAC_HINT), "a network failure is no RBAC matter: {line}");
    // What the user can do about it, not the client library's layers.
    assert!(line.contains("--kubeconfig") && line.contains("server"), "{line}");
    assert!(!line.contains("ServiceError") && !line.contains("(Connect)"), "{line}");
}

#[test]
fn a_server_that_never_answers_is_named_with_timed_out_and_no_rbac_hint() {
    // Accepts the connection and never speaks: neither TLS nor HTTP ever completes.
    let fake = FakeApiserver::start(Arc::new(|_, _: &mut TcpStream| {
        std::thread::sleep(Duration::from_secs(600));
    }));
    let dir = tempfile::tempdir().expect("a temporary directory");
    let kubeconfig = kubeconfig(dir.path(), &fake.url());
    let run = audit(
        &kubeconfig,
        &[],
        &[("PV_TOPOLOGY_WEBHOOK_REQUEST_TIMEOUT", "1s")],
        LIMIT,
    );
    let line = error_line(&run, &fake.url());
    assert!(line.contains("timed out"), "{line}");
    assert!(line.contains("--request-timeout 1s"), "{line}");
    assert!(!line.contains(RBAC_HINT), "{line}");
}

#[test]
fn the_rbac_hint_comes_with_401_and_403_only() {
    for (status_line, code, reason, hint) in [
        ("401 Unauthorized", 401, "Unauthorized", true),
        ("403 Forbidden", 403, "Forbidden", true),
        ("404 Not Found", 404, "NotFound", false),
        ("500 Internal Server Error", 500, "InternalError", false),
    ] {
        let fake = FakeApiserver::start(Arc::new(move |_, stream: &mut TcpStream| {
            respond(stream, status_line, &status(code, reason, "refused by the fake"));
        }));
        let dir = tempfile::tempdir().expect("a temporary directory");
        let kubeconfig = kubeconfig(dir.path(), &fake.url());
        let run = audit(&kubeconfig, &[], &[], LIMIT);
        let line = error_line(&run, &fake.url());
        assert!(line.contains(&format!("({code} {reason})")), "{line}");
        assert_eq!(line.contains(RBAC_HINT), hint, "{status_line}: {line}");
        if code == 401 {
            assert!(line.contains("credentials"), "401 is about who the client is: {line}");
        }
    }
}
