//! What `token-exchange` sends, judged by the token endpoint fake
//! (common/token_server.rs, written from RFC 8693 and RFC 6749): every flag of
//! docs/credential-provider.md reaches the endpoint as set, under RFC 8693's
//! parameter name, and nothing else does; the fake checks the request in
//! every one of its modes, failures included; redirects are not followed.

mod common;

use common::token_server::{GRANT_TYPE, JWT_TOKEN_TYPE, OPAQUE_TOKEN, TokenServer};
use common::{assert_one_line_failure, request, response, run, run_with_env, service_account_token};

const IMAGE: &str = "registry.example.com/team/app";

fn exchange(url: &str, flags: &[&str], token: &str) -> common::Output {
    let mut args = vec!["token-exchange", "--token-endpoint", url];
    args.extend(flags);
    run(&args, &request("v1", IMAGE, Some(token)))
}

#[test]
fn without_optional_flags_only_the_three_required_parameters_are_sent() {
    let server = TokenServer::start();
    let token = service_account_token(600);
    server.expect_form(&[
        ("grant_type", GRANT_TYPE),
        ("subject_token", &token),
        ("subject_token_type", JWT_TOKEN_TYPE),
    ]);
    let out = exchange(&server.url("/opaque"), &[], &token);
    assert_eq!(out.status, 0, "{}", out.stderr);
    // docs/credential-provider.md: the access token is the password, with
    // --username's default, keyed by the image's registry.
    let answer = response(&out.stdout);
    assert_eq!(
        answer["auth"],
        serde_json::json!({"registry.example.com": {"username": "oauth2accesstoken", "password": OPAQUE_TOKEN}})
    );
    assert_eq!(answer["cacheKeyType"], "Registry");
    assert_eq!(server.received.lock().expect("record").len(), 1);

    // A variable of the provider's env that is set but empty (a template's
    // unset option) adds no parameter, and leaves subject_token_type its
    // default: endpoints refuse an empty parameter (RFC 8693 §2.1).
    let url = server.url("/opaque");
    let empty: Vec<(&str, &str)> = FLAGS.iter().map(|(_, var, ..)| (*var, "")).collect();
    let out = run_with_env(
        &["token-exchange", "--token-endpoint", &url],
        &request("v1", IMAGE, Some(&token)),
        &empty,
    );
    assert_eq!(out.status, 0, "empty variables: {}", out.stderr);
    // The same for an empty flag.
    let mut flags = Vec::new();
    for (flag, ..) in FLAGS {
        flags.extend([flag, ""]);
    }
    let out = exchange(&url, &flags, &token);
    assert_eq!(out.status, 0, "empty flags: {}", out.stderr);
    assert_eq!(server.received.lock().expect("record").len(), 3);
}

/// Each flag and its value, as RFC 8693 §2.1 names the parameter.
const FLAGS: [(&str, &str, &str, &str); 6] = [
    (
        "--subject-token-type",
        "CLOUD_CREDENTIAL_PROVIDER_SUBJECT_TOKEN_TYPE",
        "subject_token_type",
        "urn:ietf:params:oauth:token-type:id_token",
    ),
    (
        "--requested-token-type",
        "CLOUD_CREDENTIAL_PROVIDER_REQUESTED_TOKEN_TYPE",
        "requested_token_type",
        "urn:ietf:params:oauth:token-type:access_token",
    ),
    (
        "--audience",
        "CLOUD_CREDENTIAL_PROVIDER_AUDIENCE",
        "audience",
        "registry.example.com",
    ),
    (
        "--scope",
        "CLOUD_CREDENTIAL_PROVIDER_SCOPE",
        "scope",
        "repository:team/app:pull repository:team/base:pull",
    ),
    (
        "--resource",
        "CLOUD_CREDENTIAL_PROVIDER_RESOURCE",
        "resource",
        "https://registry.example.com/v2/",
    ),
    (
        "--client-id",
        "CLOUD_CREDENTIAL_PROVIDER_CLIENT_ID",
        "client_id",
        "registry-puller & co=1",
    ),
];

fn expected_form(token: &str) -> Vec<(&'static str, String)> {
    let mut form = vec![
        ("grant_type", GRANT_TYPE.to_owned()),
        ("subject_token", token.to_owned()),
    ];
    form.extend(FLAGS.iter().map(|(_, _, name, value)| (*name, value.to_string())));
    form
}

fn assert_exact(server: &TokenServer, token: &str, what: &str) {
    let want: std::collections::HashMap<String, String> = expected_form(token)
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
    assert_eq!(server.last_form(), want, "{what}");
}

#[test]
fn every_optional_flag_is_sent_as_set_under_its_rfc8693_name() {
    let server = TokenServer::start();
    let token = service_account_token(600);
    let form = expected_form(&token);
    let pairs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    server.expect_form(&pairs);

    // As flags (values with spaces, '&' and '=' travel form-encoded) …
    let mut flags = Vec::new();
    for (flag, _, _, value) in FLAGS {
        flags.extend([flag, value]);
    }
    let out = exchange(&server.url("/opaque"), &flags, &token);
    assert_eq!(out.status, 0, "flags: {}", out.stderr);
    assert_exact(&server, &token, "flags");

    // … and from the provider's env, as docs/credential-provider.md promises.
    let url = server.url("/opaque");
    let mut env: Vec<(&str, &str)> = FLAGS.iter().map(|(_, var, _, value)| (*var, *value)).collect();
    env.push(("CLOUD_CREDENTIAL_PROVIDER_TOKEN_ENDPOINT", &url));
    let out = run_with_env(&["token-exchange"], &request("v1", IMAGE, Some(&token)), &env);
    assert_eq!(out.status, 0, "env: {}", out.stderr);
    assert_exact(&server, &token, "env");
    assert_eq!(server.received.lock().expect("record").len(), 2);
}

/// A request the fake refuses: the JWT subject token announced as something else.
const BROKEN: [&str; 2] = ["--subject-token-type", "urn:ietf:params:oauth:token-type:saml2"];

/// Every mode of the fake, its failure modes above all, refuses a broken
/// request with its own `invalid_request` before answering as the mode does:
/// a test of an error, a bad answer, a 5xx or a timeout cannot pass on a
/// request the endpoint would not have accepted.
#[test]
fn every_mode_of_the_fake_checks_the_request_first() {
    let server = TokenServer::start();
    let other = TokenServer::start();
    server.redirect_to(&other.url("/opaque"));
    let token = service_account_token(600);
    let modes = [
        "/jwt",
        "/opaque",
        "/no-expiry",
        "/denied",
        "/slow",
        "/garbage",
        "/no-token",
        "/huge-exp",
        "/expires-in-string",
        "/hostile",
        "/huge-error",
        "/huge-body",
        "/server-error",
        "/redirect-302",
        "/redirect-307",
        "/missing-route",
    ];
    for mode in modes {
        let out = exchange(&server.url(mode), &BROKEN, &token);
        assert_one_line_failure(
            mode,
            &out,
            "refused the exchange with HTTP 400: invalid_request (fake token endpoint: subject_token_type",
        );
    }
    assert_eq!(server.received.lock().expect("record").len(), modes.len());
    assert!(other.hits().is_empty(), "{:?}", other.hits());

    // The same with an exact form expected: a wrong audience is refused everywhere.
    server.expect_form(&[
        ("grant_type", GRANT_TYPE),
        ("subject_token", &token),
        ("subject_token_type", JWT_TOKEN_TYPE),
        ("audience", "registry.example.com"),
    ]);
    for mode in modes {
        let out = exchange(&server.url(mode), &["--audience", "elsewhere.example.com"], &token);
        assert_one_line_failure(
            mode,
            &out,
            "invalid_request (fake token endpoint: the form differs from the expected one",
        );
    }
}

/// The failure modes still answer as they should to a request that is right
/// in every parameter: their own error, never the fake's refusal.
#[test]
fn failure_modes_answer_an_exact_request_with_their_own_failure() {
    let server = TokenServer::start();
    let token = service_account_token(600);
    server.expect_form(&[
        ("grant_type", GRANT_TYPE),
        ("subject_token", &token),
        ("subject_token_type", JWT_TOKEN_TYPE),
        ("audience", "registry.example.com"),
        ("client_id", "puller"),
    ]);
    let flags = ["--audience", "registry.example.com", "--client-id", "puller"];
    let cases = [
        ("/denied", "refused the exchange with HTTP 400: invalid_grant"),
        ("/server-error", "refused the exchange with HTTP 503"),
        ("/garbage", "answered HTTP 200 without a token response"),
        ("/no-token", "\"access_token\" is missing or empty"),
        ("/missing-route", "refused the exchange with HTTP 404"),
        ("/huge-body", "larger than 8 MiB"),
    ];
    for (mode, want) in cases {
        let out = exchange(&server.url(mode), &flags, &token);
        assert_one_line_failure(mode, &out, want);
        assert!(!out.stderr.contains("fake token endpoint"), "{mode}: {}", out.stderr);
    }
    let mut slow = flags.to_vec();
    slow.extend(["--timeout", "1s"]);
    let out = exchange(&server.url("/slow"), &slow, &token);
    assert_one_line_failure("/slow", &out, "no answer within --timeout 1s from token endpoint");
}

/// docs/credential-provider.md: "Redirects are not followed." A token
/// endpoint that answers 302 or 307 pointing at another endpoint (one that
/// would hand out a token) fails the exchange in one line saying so, and the
/// other endpoint sees no request at all: neither the subject token (a 307
/// resends the form) nor a bare GET (a 302 becomes one).
#[test]
fn redirects_are_not_followed() {
    let token = service_account_token(600);
    for (mode, status) in [("/redirect-302", 302), ("/redirect-307", 307)] {
        let first = TokenServer::start();
        let second = TokenServer::start();
        first.redirect_to(&second.url("/opaque"));
        let out = exchange(&first.url(mode), &[], &token);
        assert_one_line_failure(
            mode,
            &out,
            &format!("answered HTTP {status}: a redirect, which is not followed"),
        );
        assert!(
            out.stderr.contains(&first.url(mode)),
            "names the endpoint: {}",
            out.stderr
        );
        assert!(!out.stderr.contains(&token), "{}", out.stderr);
        assert_eq!(first.hits(), [format!("POST {mode}")]);
        assert_eq!(
            first.last_form()["subject_token"],
            token,
            "the first endpoint was asked"
        );
        assert!(second.hits().is_empty(), "{mode}: followed to {:?}", second.hits());
    }
}
