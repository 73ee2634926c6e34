//! `ecr` against the ECR fake (common/aws_fake.rs, written from AWS's API
//! reference, verifying SigV4 with its own implementation): a signature made
//! with a wrong secret or without the session token is refused as AWS
//! refuses it; 5xx answers are retried; and the hosts the FIPS and
//! dual-stack variables select, seen by a recording proxy on loopback.

mod common;

use std::sync::atomic::Ordering;

use common::aws_fake::sigv4::{parse_amz_date, signature};
use common::aws_fake::{Behaviour, FakeAws};
use common::proxy::RecordingProxy;
use common::{request, response, run_with_env};

const REGISTRY: &str = "123456789012.dkr.ecr.us-east-1.amazonaws.com";

fn run_ecr(args: &[&str], env: &[(&'static str, String)]) -> common::Output {
    let mut all = vec!["ecr"];
    all.extend(args);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    run_with_env(&all, &request("v1", &format!("{REGISTRY}/app"), None), &env)
}

fn env_with(fake: &FakeAws, keys: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
    let mut env = vec![
        ("AWS_ENDPOINT_URL", fake.url()),
        ("AWS_EC2_METADATA_DISABLED", "true".to_owned()),
        ("AWS_CONFIG_FILE", "/nonexistent".to_owned()),
        ("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent".to_owned()),
    ];
    env.extend(keys.iter().map(|(k, v)| (*k, v.to_string())));
    env
}

#[test]
fn the_fakes_sigv4_gives_the_aws_documented_signature() {
    // The worked example of AWS's SigV4 documentation (IAM ListUsers).
    let string_to_sign = "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/iam/aws4_request\nf536975d06c0309214f805bb90ccff089219ecd68b2577efef23edd43b7e1a59";
    assert_eq!(
        signature(
            "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            "20150830",
            "us-east-1",
            "iam",
            string_to_sign
        ),
        "5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7"
    );
    assert_eq!(parse_amz_date("19700102T000001Z"), Some(86_401));
    assert_eq!(parse_amz_date("20150830T123600Z"), Some(1_440_938_160));
}

#[test]
fn signatures_and_session_tokens_are_verified() {
    let fake = FakeAws::start(Behaviour::ThrottleThenSucceed(0));
    let good = |fake: &FakeAws, keys: &[(&'static str, &str)]| {
        let out = run_ecr(&[], &env_with(fake, keys));
        assert_eq!(out.status, 0, "{keys:?}: {}", out.stderr);
        assert_eq!(response(&out.stdout)["auth"][REGISTRY]["password"], "after-throttling");
    };
    let refused = |fake: &FakeAws, keys: &[(&'static str, &str)], code: &str| {
        let out = run_ecr(&[], &env_with(fake, keys));
        common::assert_one_line_failure(code, &out, &format!("{code} (HTTP 403)"));
    };
    let static_key = [
        ("AWS_ACCESS_KEY_ID", "AKIDNODE"),
        ("AWS_SECRET_ACCESS_KEY", "node-secret-key"),
    ];
    good(&fake, &static_key);
    refused(
        &fake,
        &[
            ("AWS_ACCESS_KEY_ID", "AKIDNODE"),
            ("AWS_SECRET_ACCESS_KEY", "wrong-secret"),
        ],
        "InvalidSignatureException",
    );
    refused(
        &fake,
        &[
            ("AWS_ACCESS_KEY_ID", "AKIDUNKNOWN"),
            ("AWS_SECRET_ACCESS_KEY", "node-secret-key"),
        ],
        "UnrecognizedClientException",
    );
    let temporary = [
        ("AWS_ACCESS_KEY_ID", "AKIDCONTAINER"),
        ("AWS_SECRET_ACCESS_KEY", "container-secret"),
        ("AWS_SESSION_TOKEN", "container-session"),
    ];
    good(&fake, &temporary);
    refused(&fake, &temporary[..2], "UnrecognizedClientException");
    let mut changed = temporary;
    changed[2].1 = "container-sessioN";
    refused(&fake, &changed, "UnrecognizedClientException");
    assert_eq!(
        fake.refused(),
        [
            "InvalidSignatureException",
            "UnrecognizedClientException",
            "UnrecognizedClientException",
            "UnrecognizedClientException"
        ],
        "refused for the signature or token, and not retried"
    );
}

#[test]
fn server_errors_are_retried_end_to_end() {
    let fake = FakeAws::start(Behaviour::ServerErrorThenSucceed(1));
    let keys = [
        ("AWS_ACCESS_KEY_ID", "AKIDNODE"),
        ("AWS_SECRET_ACCESS_KEY", "node-secret-key"),
    ];
    let out = run_ecr(&[], &env_with(&fake, &keys));
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(response(&out.stdout)["auth"][REGISTRY]["password"], "after-throttling");
    assert_eq!(fake.calls.load(Ordering::SeqCst), 2, "one 500, then the token");
    assert!(fake.refused().is_empty(), "{:?}", fake.refused());

    // Always 500: the deadline ends it, with the last error.
    let always = FakeAws::start(Behaviour::ServerErrorThenSucceed(usize::MAX));
    let out = run_ecr(&["--timeout", "2s"], &env_with(&always, &keys));
    common::assert_one_line_failure("always 500", &out, "ServerException");
    assert!(always.calls.load(Ordering::SeqCst) >= 2, "retried");
}

#[test]
fn fips_and_dual_stack_variables_choose_the_endpoint_host() {
    // No endpoint override: the program would call AWS itself. HTTPS_PROXY
    // names a proxy on loopback that records the CONNECT and hangs up, so
    // the host is seen and nothing leaves the machine.
    let proxy = RecordingProxy::start();
    let cases = [
        (None, None, "api.ecr.us-east-1.amazonaws.com:443"),
        (Some("true"), None, "ecr-fips.us-east-1.amazonaws.com:443"),
        (None, Some("true"), "ecr.us-east-1.api.aws:443"),
        (Some("true"), Some("true"), "ecr-fips.us-east-1.api.aws:443"),
    ];
    for (fips, dual_stack, host) in cases {
        let mut env = vec![
            ("HTTPS_PROXY", proxy.url.clone()),
            ("NO_PROXY", String::new()),
            ("AWS_ACCESS_KEY_ID", "AKIDNODE".to_owned()),
            ("AWS_SECRET_ACCESS_KEY", "node-secret-key".to_owned()),
            ("AWS_EC2_METADATA_DISABLED", "true".to_owned()),
            ("AWS_CONFIG_FILE", "/nonexistent".to_owned()),
            ("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent".to_owned()),
        ];
        if let Some(v) = fips {
            env.push(("AWS_USE_FIPS_ENDPOINT", v.to_owned()));
        }
        if let Some(v) = dual_stack {
            env.push(("AWS_USE_DUALSTACK_ENDPOINT", v.to_owned()));
        }
        let before = proxy.requests().len();
        let out = run_ecr(&["--timeout", "1s"], &env);
        assert_eq!(out.status, 1, "{host}: the proxy hangs up");
        let requests = proxy.requests();
        assert!(requests.len() > before, "{host}: the proxy was asked");
        for request in &requests[before..] {
            assert_eq!(request, &format!("CONNECT {host} HTTP/1.1"), "{fips:?} {dual_stack:?}");
        }
    }
}
