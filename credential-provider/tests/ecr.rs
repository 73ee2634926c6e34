//! `ecr` end to end: against moto's server (PyPI `moto[server]`, started by
//! the test-support crate `cluster-harness`) in its authenticated mode for
//! private ECR (moto verifies every signature and session token; a fake STS
//! answers `AssumeRoleWithWebIdentity` with moto's temporary credentials),
//! and a fake written from AWS's API reference, which verifies SigV4 itself,
//! for ECR Public and failure modes moto cannot produce.

mod common;

use cluster_harness::{Moto, tampered};
use common::aws_fake::{Behaviour, FakeAws, MOTO_PASSWORD, PUBLIC_PASSWORD, isolated_env, key_env};
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

/// moto verifying signatures, and the environment of a node with its IAM
/// user's static key.
fn moto_node_env(moto: &Moto) -> Vec<(&'static str, String)> {
    let mut env = isolated_env(&moto.url);
    env.extend(key_env(&moto.auth().user));
    env
}

#[test]
fn logs_in_with_the_nodes_credentials() {
    let moto = Moto::start_authenticated();
    for version in ["v1alpha1", "v1beta1", "v1"] {
        let out = run_ecr(
            &[],
            &request(version, &format!("{REGISTRY}/team/app"), None),
            &moto_node_env(&moto),
        );
        assert_eq!(out.status, 0, "{version}: {}", out.stderr);
        let response = response(&out.stdout);
        assert_eq!(
            response["apiVersion"],
            format!("credentialprovider.kubelet.k8s.io/{version}")
        );
        assert_eq!(response["cacheKeyType"], "Registry");
        assert_eq!(response["auth"][REGISTRY]["username"], "AWS");
        assert_eq!(response["auth"][REGISTRY]["password"], MOTO_PASSWORD);
        // moto's token expired in 2015: kubelet must not cache it.
        assert_eq!(response["cacheDuration"], "0s");
    }
    // Negative twin: the same key with a wrong secret is refused by moto.
    let mut env = moto_node_env(&moto);
    env.push(("AWS_SECRET_ACCESS_KEY", "wrong-secret-key".to_owned()));
    let out = run_ecr(&[], &request("v1", &format!("{REGISTRY}/app"), None), &env);
    common::assert_one_line_failure("wrong secret", &out, "HTTP 403");
    assert!(!out.stderr.contains("wrong-secret-key"), "{}", out.stderr);
}

#[test]
fn a_session_token_in_the_environment_is_sent_and_required() {
    // Temporary credentials (AWS_SESSION_TOKEN) from moto's STS: accepted
    // with their token, refused without it or with it changed.
    let moto = Moto::start_authenticated();
    let keys = moto.assume_role("node-session");
    let token = keys.session_token.clone().expect("a session token");
    let stdin = request("v1", &format!("{REGISTRY}/app"), None);
    let mut env = isolated_env(&moto.url);
    env.extend(key_env(&keys));
    let out = run_ecr(&[], &stdin, &env);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(response(&out.stdout)["auth"][REGISTRY]["password"], MOTO_PASSWORD);

    let dropped: Vec<_> = env.iter().filter(|(k, _)| *k != "AWS_SESSION_TOKEN").cloned().collect();
    let out = run_ecr(&[], &stdin, &dropped);
    common::assert_one_line_failure("no session token", &out, "HTTP 403");
    let mut changed = env.clone();
    changed.push(("AWS_SESSION_TOKEN", tampered(&token)));
    let out = run_ecr(&[], &stdin, &changed);
    common::assert_one_line_failure("changed session token", &out, "HTTP 403");
}

#[test]
fn kep_4412_assumes_the_service_accounts_role() {
    let moto = Moto::start_authenticated();
    assert_eq!(moto.auth().role_arn, ROLE);
    let sts = moto.web_identity_sts();
    // No node credentials at all: only the role path can succeed.
    let mut env = isolated_env(&moto.url);
    env.push(("AWS_ENDPOINT_URL_STS", sts.url.clone()));
    let token = service_account_token(3600);
    let out = run_ecr(&[], &with_role(&token, ROLE), &env);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(response(&out.stdout)["auth"][REGISTRY]["password"], MOTO_PASSWORD);
    let calls = sts.calls();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].role_arn, ROLE);
    assert!(calls[0].web_identity_token == token, "STS got the request's token");

    // Negative twin: the role's credentials with a changed session token.
    sts.tamper_session_token(true);
    let out = run_ecr(&[], &with_role(&token, ROLE), &env);
    common::assert_one_line_failure("changed session token", &out, "HTTP 403");
    common::assert_no_piece_of(&token, &out.stderr);

    // Without the annotation the node's credentials are needed, and missing.
    let out = run_ecr(&[], &request("v1", &format!("{REGISTRY}/app"), Some(&token)), &env);
    assert_eq!(out.status, 1);
    assert!(out.stderr.contains("no AWS credentials found"), "{}", out.stderr);
    assert_eq!(sts.calls().len(), 2, "STS not called without a role");
}

#[test]
fn a_custom_role_annotation_names_the_role() {
    // --role-annotation: the role comes from the operator's annotation name;
    // the default annotation is then not read.
    let moto = Moto::start_authenticated();
    let sts = moto.web_identity_sts();
    let mut env = isolated_env(&moto.url);
    env.push(("AWS_ENDPOINT_URL_STS", sts.url.clone()));
    let token = service_account_token(3600);
    let mut stdin: serde_json::Value =
        serde_json::from_slice(&request("v1", &format!("{REGISTRY}/app"), Some(&token))).expect("request");
    stdin["serviceAccountAnnotations"] = serde_json::json!({
        "example.com/role": ROLE,
        "eks.amazonaws.com/ecr-role-arn": "arn:aws:iam::123456789012:role/not-this-one",
    });
    let stdin = serde_json::to_vec(&stdin).expect("json");
    let out = run_ecr(&["--role-annotation", "example.com/role"], &stdin, &env);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(response(&out.stdout)["auth"][REGISTRY]["password"], MOTO_PASSWORD);
    let calls = sts.calls();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].role_arn, ROLE);
    assert!(calls[0].web_identity_token == token);
}

#[test]
fn role_policy_flags() {
    let moto = Moto::start_authenticated();
    let sts = moto.web_identity_sts();
    let mut env = moto_node_env(&moto);
    env.push(("AWS_ENDPOINT_URL_STS", sts.url.clone()));
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
            "names role arn:aws:iam::123456789012:role/x, but kubelet sent no serviceAccountToken",
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
    assert_eq!(sts.calls().len(), 1, "only the admitted role was assumed");
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
    let moto = Moto::start_authenticated();
    let sts = moto.web_identity_sts();
    let mut env = moto_node_env(&moto);
    env.push(("AWS_ENDPOINT_URL_STS", sts.url.clone()));
    let token = service_account_token(3600);
    for stdin in [with_role(&token, ROLE), request("v1", &format!("{REGISTRY}/app"), None)] {
        let out = run_ecr(&["--log-level", "trace"], &stdin, &env);
        assert_eq!(out.status, 0, "{}", out.stderr);
        for secret in [
            token.as_str(),
            "123456789012-auth-token",
            moto.auth().user.secret_access_key.as_str(),
            "QVdTOjEyMzQ1Njc4OTAxMi1hdXRoLXRva2Vu",
        ] {
            assert!(!out.stderr.contains(secret), "stderr holds a secret");
        }
        assert!(out.stderr.contains("ECR login"), "the trace does log: {}", out.stderr);
    }
}

/// The ECR fake's recorded signatures all use an access key starting so.
fn signed_with(fake: &FakeAws, access_key_prefix: &str) -> bool {
    let seen = fake.seen.lock().unwrap();
    !seen.is_empty()
        && seen
            .iter()
            .all(|(_, auth)| auth.contains(&format!("Credential={access_key_prefix}")))
}

fn no_static_credentials(ecr: &FakeAws) -> Vec<(&'static str, String)> {
    vec![
        ("AWS_ENDPOINT_URL_ECR", ecr.url()),
        ("AWS_EC2_METADATA_DISABLED", "true".to_owned()),
        ("AWS_REGION", "us-east-1".to_owned()),
    ]
}

#[test]
fn credential_chain_container_endpoint() {
    // EKS Pod Identity: the agent's endpoint, with the pod's authorization token.
    use axum::http::HeaderMap;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}/v1/credentials", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let app = axum::Router::new().route(
            "/v1/credentials",
            axum::routing::get(|headers: HeaderMap| async move {
                if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some("pod-identity-token") {
                    return (axum::http::StatusCode::UNAUTHORIZED, "no token".to_owned());
                }
                let body = serde_json::json!({
                    "AccessKeyId": "AKIDCONTAINER", "SecretAccessKey": "container-secret",
                    "Token": "container-session", "Expiration": "2099-01-01T00:00:00Z"
                });
                (axum::http::StatusCode::OK, body.to_string())
            }),
        );
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async move {
                axum::serve(tokio::net::TcpListener::from_std(listener).unwrap(), app)
                    .await
                    .unwrap();
            });
    });
    let ecr = FakeAws::start(Behaviour::ThrottleThenSucceed(0));
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("eks-pod-identity-token");
    std::fs::write(&token_file, "pod-identity-token\n").unwrap();
    let mut env = no_static_credentials(&ecr);
    env.push(("AWS_CONTAINER_CREDENTIALS_FULL_URI", url));
    env.push((
        "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
        token_file.display().to_string(),
    ));
    let out = run_ecr(&[], &request("v1", &format!("{REGISTRY}/app"), None), &env);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(signed_with(&ecr, "AKIDCONTAINER/"), "{:?}", ecr.seen.lock().unwrap());
    assert!(!out.stderr.contains("container-secret") && !out.stderr.contains("pod-identity-token"));
}

#[test]
fn credential_chain_instance_role_through_imdsv2() {
    // The node's instance role, from a fake IMDS written from the EC2 docs.
    let role = serde_json::json!({
        "Code": "Success", "Type": "AWS-HMAC", "AccessKeyId": "AKIDINSTANCE",
        "SecretAccessKey": "instance-secret", "Token": "instance-session",
        "Expiration": "2099-01-01T00:00:00Z", "LastUpdated": "2026-11-30T00:00:00Z"
    });
    let tree = serde_json::json!({
        "latest/meta-data/iam/security-credentials/": "node-role",
        "latest/meta-data/iam/security-credentials/node-role": role,
    });
    let imds = test_fakes::MetadataFake::from_json(&serde_json::json!({"provider": "aws", "tree": tree}));

    let ecr = FakeAws::start(Behaviour::ThrottleThenSucceed(0));
    let env = vec![
        ("AWS_ENDPOINT_URL_ECR", ecr.url()),
        ("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.base()),
    ];
    let out = run_ecr(&[], &request("v1", &format!("{REGISTRY}/app"), None), &env);
    drop(imds);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(signed_with(&ecr, "AKIDINSTANCE/"), "{:?}", ecr.seen.lock().unwrap());
}

#[test]
fn a_role_annotation_that_is_not_a_role_arn_is_refused_in_one_line() {
    let ecr = FakeAws::start(Behaviour::ThrottleThenSucceed(0));
    let token = service_account_token(3600);
    for role in [
        "arn:aws:iam::123456789012:role/puller\nE1130 forged log line",
        "arn:aws:iam::123456789012:role/pull er",
        "arn:aws:iam::123456789012:role/path//puller",
        "arn:aws:iam::123456789012:role/\u{1b}[31mred",
        "arn:aws:iam::123456789012:role/puller:extra",
        "arn:evil:iam::123456789012:role/puller",
    ] {
        let out = run_ecr(&[], &with_role(&token, role), &node_env(&ecr.url()));
        common::assert_one_line_failure(role, &out, "eks.amazonaws.com/ecr-role-arn");
        assert!(out.stderr.contains("is not an IAM role ARN"), "{}", out.stderr);
    }
    assert_eq!(
        ecr.calls.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "nothing was called"
    );
}

#[test]
fn an_expiry_beyond_any_time_is_not_a_panic() {
    let ecr = FakeAws::start(Behaviour::HugeExpiry);
    let out = run_ecr(
        &[],
        &request("v1", &format!("{REGISTRY}/app"), None),
        &node_env(&ecr.url()),
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(
        response(&out.stdout)["cacheDuration"],
        "0s",
        "an unknown expiry is not cached"
    );
}

#[test]
fn aws_error_text_is_escaped_and_capped() {
    let ecr = FakeAws::start(Behaviour::Hostile);
    let out = run_ecr(
        &[],
        &request("v1", &format!("{REGISTRY}/app"), None),
        &node_env(&ecr.url()),
    );
    common::assert_one_line_failure("hostile", &out, "AccessDenied\\nE1130");
    assert!(!out.stderr.contains('\u{1b}'), "{:?}", out.stderr);
    assert!(out.stderr.len() < 2048, "capped: {} bytes", out.stderr.len());
}

#[test]
fn a_web_identity_token_echoed_cut_short_is_redacted() {
    let sts = FakeAws::start(Behaviour::StsEchoesToken);
    let token = service_account_token(3600);
    let mut env = node_env(&sts.url());
    env.push(("AWS_ENDPOINT_URL_STS", sts.url()));
    let out = run_ecr(&[], &with_role(&token, ROLE), &env);
    common::assert_one_line_failure("sts echo", &out, "InvalidIdentityToken");
    common::assert_no_piece_of(&token, &out.stderr);
}

/// Issue 9's re-test: the node's own IRSA token (from
/// AWS_WEB_IDENTITY_TOKEN_FILE), not only the request's, is cut out of an
/// STS error that echoes it.
#[test]
fn the_nodes_web_identity_token_echoed_by_sts_is_redacted() {
    let sts = FakeAws::start(Behaviour::StsEchoesToken);
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    let token = service_account_token(3600);
    std::fs::write(&token_file, &token).unwrap();
    let mut env = no_static_credentials(&sts);
    env.push(("AWS_ENDPOINT_URL_STS", sts.url()));
    env.push(("AWS_WEB_IDENTITY_TOKEN_FILE", token_file.display().to_string()));
    env.push(("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/node-puller".to_owned()));
    let out = run_ecr(&[], &request("v1", &format!("{REGISTRY}/app"), None), &env);
    common::assert_one_line_failure("node irsa sts echo", &out, "InvalidIdentityToken");
    common::assert_no_piece_of(&token, &out.stderr);
}

/// The node's AWS session token, echoed in an API error, is cut out too.
#[test]
fn a_session_token_echoed_by_aws_is_redacted() {
    let ecr = FakeAws::start(Behaviour::EchoesSessionToken);
    let session_token = "FwoGZXIvYXdzEBYaDNodeSessionToken0123456789abcdef";
    let mut env = node_env(&ecr.url());
    env.push(("AWS_SESSION_TOKEN", session_token.to_owned()));
    let out = run_ecr(&[], &request("v1", &format!("{REGISTRY}/app"), None), &env);
    common::assert_one_line_failure("session token echo", &out, "UnrecognizedClientException");
    for start in 0..session_token.len() - 12 {
        let piece = &session_token[start..start + 12];
        assert!(!out.stderr.contains(piece), "{piece} leaked: {}", out.stderr);
    }
}

#[test]
fn web_identity_token_files_are_read_as_regular_files_only() {
    let ecr = FakeAws::start(Behaviour::ThrottleThenSucceed(0));
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("token");
    common::mkfifo(&fifo);
    for (file, want) in [
        ("/dev/zero".to_owned(), "is a character device"),
        (fifo.display().to_string(), "is a FIFO"),
    ] {
        let mut env = no_static_credentials(&ecr);
        env.push(("AWS_WEB_IDENTITY_TOKEN_FILE", file.clone()));
        env.push(("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/node-puller".to_owned()));
        let out = run_ecr(&[], &request("v1", &format!("{REGISTRY}/app"), None), &env);
        common::assert_one_line_failure(&file, &out, want);
        assert!(out.stderr.contains("AWS_WEB_IDENTITY_TOKEN_FILE"), "{}", out.stderr);
    }
}
