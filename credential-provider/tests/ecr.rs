//! `ecr` end to end: against moto's server (PyPI `moto[server]`, started by
//! the test-support crate `cluster-harness`) for private
//! ECR and STS, and a fake written from AWS's API reference for ECR Public
//! and failure modes moto cannot produce.

mod common;

use cluster_harness::Moto;
use common::aws_fake::{Behaviour, FakeAws, PUBLIC_PASSWORD};
use common::{request, response, run_with_env, service_account_token};

const REGISTRY: &str = "123456789012.dkr.ecr.us-east-1.amazonaws.com";
const ROLE: &str = "arn:aws:iam::123456789012:role/ecr-puller";

/// The environment of a node with static credentials, pointed at `url`.
fn node_env(url: &str) -> Vec<(&'static str, String)> {
    vec![
        ("AWS_ENDPOINT_URL", url.to_owned()),
        ("AWS_ACCESS_KEY_ID", "AKIDNODE".to_owned()),
        ("AWS_SECRET_ACCESS_KEY", "node-secret-key".to_owned()),
        ("AWS_EC2_METADATA_DISABLED", "true".to_owned()),
    ]
}

fn run_ecr(args: &[&str], stdin: &[u8], env: &[(&'static str, String)]) -> common::Output {
    let mut all = vec!["ecr"];
    all.extend(args);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    run_with_env(&all, stdin, &env)
}

fn with_role(token: &str, role: &str) -> Vec<u8> {
    let mut request: serde_json::Value =
        serde_json::from_slice(&request("v1", &format!("{REGISTRY}/app"), Some(token))).unwrap();
    request["serviceAccountAnnotations"] = serde_json::json!({"eks.amazonaws.com/ecr-role-arn": role});
    serde_json::to_vec(&request).unwrap()
}

#[test]
fn logs_in_with_the_nodes_credentials() {
    let moto = Moto::start();
    for version in ["v1alpha1", "v1beta1", "v1"] {
        let out = run_ecr(
            &[],
            &request(version, &format!("{REGISTRY}/team/app"), None),
            &node_env(&moto.url.clone()),
        );
        assert_eq!(out.status, 0, "{version}: {}", out.stderr);
        let response = response(&out.stdout);
        assert_eq!(
            response["apiVersion"],
            format!("credentialprovider.kubelet.k8s.io/{version}")
        );
        assert_eq!(response["cacheKeyType"], "Registry");
        assert_eq!(response["auth"][REGISTRY]["username"], "AWS");
        assert_eq!(response["auth"][REGISTRY]["password"], "123456789012-auth-token");
        // moto's token expired in 2015: kubelet must not cache it.
        assert_eq!(response["cacheDuration"], "0s");
    }
}

#[test]
fn kep_4412_assumes_the_service_accounts_role() {
    let moto = Moto::start();
    // No node credentials at all: only the role path can succeed.
    let env = vec![
        ("AWS_ENDPOINT_URL", moto.url.clone()),
        ("AWS_EC2_METADATA_DISABLED", "true".to_owned()),
    ];
    let token = service_account_token(3600);
    let out = run_ecr(&[], &with_role(&token, ROLE), &env);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(response(&out.stdout)["auth"][REGISTRY]["username"], "AWS");

    // Without the annotation the node's credentials are needed, and missing.
    let out = run_ecr(&[], &request("v1", &format!("{REGISTRY}/app"), Some(&token)), &env);
    assert_eq!(out.status, 1);
    assert!(out.stderr.contains("no AWS credentials found"), "{}", out.stderr);
}

#[test]
fn role_policy_flags() {
    let moto = Moto::start();
    let env = node_env(&moto.url.clone());
    let token = service_account_token(3600);
    let cases: Vec<(Vec<&str>, Vec<u8>, &str)> = vec![
        (
            vec!["--allowed-account-id", "210987654321"],
            with_role(&token, ROLE),
            "role arn:aws:iam::123456789012:role/ecr-puller is in account 123456789012, which --allowed-account-id does not list",
        ),
        (
            vec!["--require-role-annotation"],
            request("v1", &format!("{REGISTRY}/app"), Some(&token)),
            "names no role (eks.amazonaws.com/ecr-role-arn), and --require-role-annotation is set",
        ),
        (vec![], with_role(&token, "puller"), "is not an IAM role ARN"),
        (
            vec!["--role-annotation", "example.com/role"],
            {
                let mut r: serde_json::Value = serde_json::from_slice(&with_role(&token, ROLE)).unwrap();
                r["serviceAccountAnnotations"] =
                    serde_json::json!({"example.com/role": "arn:aws:iam::123456789012:role/x"});
                r["serviceAccountToken"] = serde_json::Value::Null;
                serde_json::to_vec(&r).unwrap()
            },
            "names role arn:aws:iam::123456789012:role/x, but kubelet sent no service-account token",
        ),
        (
            vec![],
            request("v1", "quay.io/org/app", None),
            "quay.io is not an Amazon ECR registry host",
        ),
    ];
    for (args, stdin, want) in cases {
        let out = run_ecr(&args, &stdin, &env);
        assert_eq!(out.status, 1, "{args:?}");
        assert!(out.stdout.is_empty());
        assert!(
            out.stderr.contains(want),
            "{args:?}: {:?} should contain {want:?}",
            out.stderr
        );
        assert!(!out.stderr.contains(&token), "token leaked");
    }
    // The allow-list admits the right account.
    let out = run_ecr(
        &["--allowed-account-id", "123456789012"],
        &with_role(&token, ROLE),
        &env,
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
}

#[test]
fn ecr_public_logs_in_at_us_east_1() {
    let fake = FakeAws::start(Behaviour::Public);
    let mut env = node_env("http://127.0.0.1:9");
    env.push(("AWS_ENDPOINT_URL_ECR_PUBLIC", fake.url()));
    let out = run_ecr(&[], &request("v1", "public.ecr.aws/team/app", None), &env);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let response = response(&out.stdout);
    assert_eq!(response["auth"]["public.ecr.aws"]["password"], PUBLIC_PASSWORD);
    let cached = common::go_seconds(response["cacheDuration"].as_str().unwrap());
    assert!(
        (6 * 3600 - 60..=6 * 3600).contains(&cached),
        "half of 12h, got {cached}"
    );
    let seen = fake.seen.lock().unwrap();
    assert!(
        seen[0].1.contains("Credential=AKIDNODE/"),
        "signed with the node's key: {}",
        seen[0].1
    );
}

#[test]
fn throttling_is_retried_within_the_deadline() {
    let fake = FakeAws::start(Behaviour::ThrottleThenSucceed(2));
    let out = run_ecr(
        &[],
        &request("v1", &format!("{REGISTRY}/app"), None),
        &node_env(&fake.url()),
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(response(&out.stdout)["auth"][REGISTRY]["password"], "after-throttling");
    assert_eq!(fake.calls.load(std::sync::atomic::Ordering::SeqCst), 3);

    let always = FakeAws::start(Behaviour::ThrottleThenSucceed(usize::MAX));
    let out = run_ecr(
        &["--timeout", "2s"],
        &request("v1", &format!("{REGISTRY}/app"), None),
        &node_env(&always.url()),
    );
    assert_eq!(out.status, 1);
    assert!(
        out.stderr.contains(&format!(
            "ECR login for {REGISTRY}: ecr GetAuthorizationToken: ThrottlingException"
        )),
        "{}",
        out.stderr
    );
}

#[test]
fn expired_credentials_name_the_aws_error_code() {
    let fake = FakeAws::start(Behaviour::ExpiredCredentials);
    let out = run_ecr(
        &[],
        &request("v1", &format!("{REGISTRY}/app"), None),
        &node_env(&fake.url()),
    );
    assert_eq!(out.status, 1);
    assert!(
        out.stderr
            .contains("ExpiredTokenException (HTTP 400): The security token included in the request is expired"),
        "{}",
        out.stderr
    );
    assert_eq!(fake.calls.load(std::sync::atomic::Ordering::SeqCst), 1, "not retried");
}

#[test]
fn no_secret_reaches_stderr_at_trace_level() {
    let moto = Moto::start();
    let token = service_account_token(3600);
    for stdin in [with_role(&token, ROLE), request("v1", &format!("{REGISTRY}/app"), None)] {
        let out = run_ecr(&["--log-level", "trace"], &stdin, &node_env(&moto.url.clone()));
        assert_eq!(out.status, 0, "{}", out.stderr);
        for secret in [
            token.as_str(),
            "123456789012-auth-token",
            "node-secret-key",
            "QVdTOjEyMzQ1Njc4OTAxMi1hdXRoLXRva2Vu",
        ] {
            assert!(!out.stderr.contains(secret), "stderr holds a secret");
        }
        assert!(out.stderr.contains("ECR login"), "the trace does log: {}", out.stderr);
    }
}
