//! `passthrough` and `token-exchange` end to end, the latter against a real
//! token endpoint on loopback.

mod common;

use common::proxy::RecordingProxy;
use common::token_server::{OPAQUE_TOKEN, TokenServer};
use common::{assert_one_line_failure, go_seconds, request, response, run, run_with_env, service_account_token};

#[test]
fn passthrough_returns_the_token_until_shortly_before_it_expires() {
    let token = service_account_token(3600);
    let out = run(
        &["passthrough", "--username", "jwt", "--expiry-margin", "5m"],
        &request("v1", "harbor.example.com/team/app", Some(&token)),
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    let response = response(&out.stdout);
    assert_eq!(response["auth"]["harbor.example.com"]["username"], "jwt");
    assert_eq!(response["auth"]["harbor.example.com"]["password"], token);
    let cached = go_seconds(response["cacheDuration"].as_str().unwrap());
    assert!((3290..=3300).contains(&cached), "3600s less 5m margin, got {cached}");
}

#[test]
fn passthrough_refuses_an_expired_token() {
    let token = common::jwt(&serde_json::json!({"exp": common::now() - 120}));
    let out = run(&["passthrough"], &request("v1", "harbor.example.com/app", Some(&token)));
    assert_eq!(out.status, 1);
    assert!(out.stdout.is_empty());
    assert!(out.stderr.contains("serviceAccountToken expired"), "{}", out.stderr);
}

#[test]
fn exchange_sends_rfc8693_parameters_and_returns_the_access_token() {
    let server = TokenServer::start();
    let token = service_account_token(3600);
    let url = server.url("/opaque");
    let out = run(
        &[
            "token-exchange",
            "--token-endpoint",
            &url,
            "--audience",
            "registry.example.com",
            "--scope",
            "repository:team/app:pull",
            "--username",
            "robot",
            "--expiry-margin",
            "1m",
        ],
        &request("v1", "registry.example.com/team/app", Some(&token)),
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    let response = response(&out.stdout);
    assert_eq!(response["auth"]["registry.example.com"]["username"], "robot");
    assert_eq!(response["auth"]["registry.example.com"]["password"], OPAQUE_TOKEN);
    assert_eq!(response["cacheKeyType"], "Registry");
    assert_eq!(response["cacheDuration"], "9m0s", "expires_in 600s less 1m");

    let form = server.last_form();
    assert_eq!(form["grant_type"], "urn:ietf:params:oauth:grant-type:token-exchange");
    assert_eq!(form["subject_token"], token);
    assert_eq!(form["subject_token_type"], "urn:ietf:params:oauth:token-type:jwt");
    assert_eq!(form["audience"], "registry.example.com");
    assert_eq!(form["scope"], "repository:team/app:pull");
    assert!(!form.contains_key("resource") && !form.contains_key("client_id"));
}

#[test]
fn exchange_caches_for_the_shorter_of_expires_in_and_the_jwt_expiry() {
    let server = TokenServer::start();
    let url = server.url("/jwt");
    let out = run(
        &["token-exchange", "--token-endpoint", &url, "--expiry-margin", "0s"],
        &request("v1", "registry.example.com/app", Some(&service_account_token(600))),
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    // expires_in says 2h, the JWT itself 1h: the JWT wins.
    let cached = go_seconds(response(&out.stdout)["cacheDuration"].as_str().unwrap());
    assert!((3590..=3600).contains(&cached), "got {cached}");
}

#[test]
fn exchange_without_expiry_leaves_caching_to_kubelets_default() {
    let server = TokenServer::start();
    let url = server.url("/no-expiry");
    let out = run(
        &["token-exchange", "--token-endpoint", &url],
        &request("v1", "registry.example.com/app", Some(&service_account_token(600))),
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(response(&out.stdout).get("cacheDuration").is_none());
}

#[test]
fn exchange_failures_are_one_clear_line() {
    let server = TokenServer::start();
    let token = service_account_token(600);
    let cases = [
        (
            "/denied",
            vec![],
            "refused the exchange with HTTP 400: invalid_grant (subject token <redacted> is not trusted",
        ),
        (
            "/garbage",
            vec![],
            "answered HTTP 200 without a token response: the body is not a JSON token response",
        ),
        ("/no-token", vec![], "\"access_token\" is missing or empty"),
        ("/missing-route", vec![], "refused the exchange with HTTP 404"),
        ("/server-error", vec![], "refused the exchange with HTTP 503"),
        (
            "/slow",
            vec!["--timeout", "1s"],
            "no answer within --timeout 1s from token endpoint",
        ),
    ];
    for (path, extra, want) in cases {
        let url = server.url(path);
        let mut args = vec!["token-exchange", "--token-endpoint", url.as_str()];
        args.extend(extra);
        let out = run(&args, &request("v1", "registry.example.com/app", Some(&token)));
        assert_eq!(out.status, 1, "{path}");
        assert!(out.stdout.is_empty(), "{path}");
        assert_eq!(out.stderr.lines().count(), 1, "{path}: {}", out.stderr);
        assert!(
            out.stderr.contains(want),
            "{path}: {:?} should contain {want:?}",
            out.stderr
        );
        assert!(out.stderr.contains(&url), "{path}: names the endpoint: {}", out.stderr);
        assert!(!out.stderr.contains(&token), "{path}: token leaked: {}", out.stderr);
    }
}

#[test]
fn exchange_reports_an_unreachable_endpoint() {
    // Bind and drop to get a loopback port with nothing listening.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/token");
    let out = run(
        &["token-exchange", "--token-endpoint", &url],
        &request("v1", "registry.example.com/app", Some(&service_account_token(600))),
    );
    assert_eq!(out.status, 1);
    assert!(out.stderr.contains("cannot reach token endpoint"), "{}", out.stderr);
}

#[test]
fn exchange_requires_a_service_account_token() {
    let server = TokenServer::start();
    let url = server.url("/opaque");
    let out = run(
        &["token-exchange", "--token-endpoint", &url],
        &request("v1", "registry.example.com/app", None),
    );
    assert_eq!(out.status, 1);
    assert!(out.stderr.contains("no serviceAccountToken"), "{}", out.stderr);
    assert!(
        server.received.lock().unwrap().is_empty(),
        "nothing is sent without a token"
    );
}

#[test]
fn exchange_refuses_plain_http_off_loopback() {
    let out = run(
        &["token-exchange", "--token-endpoint", "http://sts.example.com/token"],
        &request("v1", "registry.example.com/app", Some(&service_account_token(600))),
    );
    assert_eq!(out.status, 1);
    assert!(out.stderr.contains("use an https:// URL"), "{}", out.stderr);
}

/// Every variable a proxy can come from, all pointing at `proxy`.
fn proxy_env(proxy: &str) -> Vec<(&'static str, &str)> {
    [
        "HTTP_PROXY",
        "http_proxy",
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
    ]
    .into_iter()
    .map(|name| (name, proxy))
    .collect()
}

#[test]
fn loopback_token_endpoints_never_go_through_a_proxy() {
    let proxy = RecordingProxy::start();
    let v4 = TokenServer::start();
    let v6 = TokenServer::start_on("[::1]:0");
    let token = service_account_token(600);
    let endpoints = [
        v4.url("/opaque"),
        format!("http://localhost:{}/opaque", v4.addr.port()),
        v6.url("/opaque"),
    ];
    for url in &endpoints {
        let out = run_with_env(
            &["token-exchange", "--token-endpoint", url],
            &request("v1", "registry.example.com/app", Some(&token)),
            &proxy_env(&proxy.url),
        );
        assert_eq!(out.status, 0, "{url}: {}", out.stderr);
        assert_eq!(
            response(&out.stdout)["auth"]["registry.example.com"]["password"],
            OPAQUE_TOKEN
        );
    }
    assert_eq!(
        v4.received.lock().unwrap().len(),
        2,
        "127.0.0.1 and localhost reached directly"
    );
    assert_eq!(v6.received.lock().unwrap().len(), 1, "[::1] reached directly");
    assert!(
        proxy.requests().is_empty(),
        "the subject token went to the proxy: {:?}",
        proxy.requests()
    );
}

#[test]
fn other_token_endpoints_still_honour_the_proxy() {
    // A node behind a corporate proxy: the TLS tunnel goes through it. The
    // proxy hangs up, so the exchange fails, and nothing leaves loopback.
    let proxy = RecordingProxy::start();
    let out = run_with_env(
        &[
            "token-exchange",
            "--token-endpoint",
            "https://sts.example.com/token",
            "--timeout",
            "5s",
        ],
        &request("v1", "registry.example.com/app", Some(&service_account_token(600))),
        &[("HTTPS_PROXY", proxy.url.as_str())],
    );
    assert_eq!(out.status, 1, "{}", out.stderr);
    assert_eq!(proxy.requests(), ["CONNECT sts.example.com:443 HTTP/1.1"]);
}

#[test]
fn out_of_range_expiry_claims_fail_in_one_line_without_a_panic() {
    let huge = [
        serde_json::json!(1u64 << 63),
        serde_json::json!(u64::MAX),
        serde_json::json!(1e300),
    ];
    for exp in huge {
        let token = common::jwt(&serde_json::json!({"exp": exp}));
        let out = run(&["passthrough"], &request("v1", "harbor.example.com/app", Some(&token)));
        assert_one_line_failure(&format!("exp {exp}"), &out, "serviceAccountToken");
        assert!(out.stderr.contains("\"exp\""), "{}", out.stderr);
    }
    // Before 1970 is expired; a fractional NumericDate (RFC 7519) is a time.
    let old = common::jwt(&serde_json::json!({"exp": -5}));
    let out = run(&["passthrough"], &request("v1", "harbor.example.com/app", Some(&old)));
    assert_one_line_failure("exp -5", &out, "serviceAccountToken expired");
    let fractional = common::jwt(&serde_json::json!({"exp": common::now() as f64 + 600.5}));
    let out = run(
        &["passthrough"],
        &request("v1", "harbor.example.com/app", Some(&fractional)),
    );
    assert_eq!(out.status, 0, "{}", out.stderr);

    // The same from a token endpoint's access token.
    let server = TokenServer::start();
    let url = server.url("/huge-exp");
    let out = run(
        &["token-exchange", "--token-endpoint", &url],
        &request("v1", "registry.example.com/app", Some(&service_account_token(600))),
    );
    assert_one_line_failure("access_token exp 2^63", &out, "access_token");
}

#[test]
fn expires_in_may_be_a_string() {
    let server = TokenServer::start();
    let url = server.url("/expires-in-string");
    let out = run(
        &["token-exchange", "--token-endpoint", &url, "--expiry-margin", "0s"],
        &request("v1", "registry.example.com/app", Some(&service_account_token(600))),
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(response(&out.stdout)["cacheDuration"], "1h0m0s");
}

#[test]
fn a_token_endpoints_text_is_escaped_capped_and_redacted() {
    let server = TokenServer::start();
    let token = service_account_token(600);
    let url = server.url("/hostile");
    let out = run(
        &["token-exchange", "--token-endpoint", &url],
        &request("v1", "registry.example.com/app", Some(&token)),
    );
    assert_one_line_failure(
        "hostile",
        &out,
        "refused the exchange with HTTP 400: invalid_grant\\nE1130",
    );
    assert!(!out.stderr.contains('\u{1b}'), "{:?}", out.stderr);
    // Any long piece of the token is a secret: its payload and signature.
    common::assert_no_piece_of(&token, &out.stderr);
    assert!(out.stderr.contains("<redacted>"), "{}", out.stderr);

    let url = server.url("/huge-error");
    let out = run(
        &["token-exchange", "--token-endpoint", &url],
        &request("v1", "registry.example.com/app", Some(&token)),
    );
    assert_one_line_failure("huge error", &out, "refused the exchange with HTTP 400: xxxx");
    assert!(
        out.stderr.len() < 2048,
        "remote text is capped: {} bytes",
        out.stderr.len()
    );
}

#[test]
fn an_endless_answer_is_refused_not_buffered() {
    let server = TokenServer::start();
    let url = server.url("/huge-body");
    let out = run(
        &["token-exchange", "--token-endpoint", &url],
        &request("v1", "registry.example.com/app", Some(&service_account_token(600))),
    );
    assert_one_line_failure(
        "huge body",
        &out,
        "answered HTTP 200 without a token response: the answer is larger than 8 MiB",
    );
}

/// A token exchange with an https endpoint (nothing listens there) in `env`:
/// the HTTP client and its trusted roots are built before any connection.
fn exchange_with_roots(env: &[(&str, &str)]) -> common::Output {
    run_with_env(
        &[
            "token-exchange",
            "--token-endpoint",
            "https://127.0.0.1:1/token",
            "--timeout",
            "2s",
        ],
        &request("v1", "registry.example.com/app", Some(&service_account_token(600))),
        env,
    )
}

/// Issue 9's re-test: an `SSL_CERT_FILE` that is a FIFO or device, or holds
/// no certificate, is refused at once naming the variable; it is never
/// handed on to the platform verifier, which read a FIFO without end.
#[test]
fn a_ca_bundle_that_is_not_a_regular_file_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("bundle.pem");
    common::mkfifo(&fifo);
    let empty = dir.path().join("empty.pem");
    std::fs::write(&empty, "not a certificate\n").unwrap();
    let fifo = fifo.display().to_string();
    let empty = empty.display().to_string();
    for (bundle, want) in [
        (fifo.as_str(), "is a FIFO"),
        ("/dev/zero", "is a character device"),
        (empty.as_str(), "no certificate"),
        ("/nonexistent/bundle.pem", "No such file"),
    ] {
        let out = exchange_with_roots(&[("SSL_CERT_FILE", bundle)]);
        assert_one_line_failure(bundle, &out, want);
        assert!(
            out.stderr.contains(&format!("SSL_CERT_FILE {bundle}")),
            "{}",
            out.stderr
        );
    }
}

/// The directories of `SSL_CERT_DIR` are read by us too, bounded: a file
/// far larger than any CA bundle there is refused naming it, not read whole
/// by the platform verifier; FIFOs and devices there are skipped, as OpenSSL
/// does; no certificate at all is an error naming the variable.
#[test]
fn ca_directories_are_read_bounded() {
    let dir = tempfile::tempdir().unwrap();
    common::mkfifo(&dir.path().join("fifo.pem"));
    // An empty SSL_CERT_FILE is unset (the test's may name a bundle).
    let run_with_dir = |dir: &str| exchange_with_roots(&[("SSL_CERT_DIR", dir), ("SSL_CERT_FILE", "")]);
    let shown = dir.path().display().to_string();
    let out = run_with_dir(&shown);
    assert_one_line_failure("no certificate", &out, &format!("SSL_CERT_DIR {shown}: no certificate"));
    let huge = dir.path().join("huge.pem");
    std::fs::File::create(&huge).unwrap().set_len(64 << 20).unwrap();
    let out = run_with_dir(&shown);
    assert_one_line_failure("huge", &out, "larger than");
    assert!(
        out.stderr.contains(&format!("SSL_CERT_DIR {}", huge.display())),
        "{}",
        out.stderr
    );
}
