//! `ecr` with credentials from the node's credential chain (IRSA web
//! identity, the container credentials endpoint, the EC2 instance role),
//! against moto's server in its authenticated mode (cluster_harness::Moto:
//! every SigV4 signature and session token is verified by moto, bootstrapped
//! by boto3). Each source hands out temporary credentials that moto issued;
//! each test's negative twin hands them out with the session token changed,
//! and moto must refuse the ECR call made with them.

mod common;

use cluster_harness::{AwsKeys, Moto, tampered};
use common::aws_fake::{MOTO_PASSWORD, isolated_env};
use common::{request, response, run_with_env, service_account_token};

const REGISTRY: &str = "123456789012.dkr.ecr.us-east-1.amazonaws.com";

fn run_ecr(env: &[(&'static str, String)]) -> common::Output {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    run_with_env(&["ecr"], &request("v1", &format!("{REGISTRY}/app"), None), &env)
}

fn assert_logged_in(out: &common::Output) {
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(response(&out.stdout)["auth"][REGISTRY]["password"], MOTO_PASSWORD);
}

/// moto refused the ECR call: its 403 for an unknown or changed token.
fn assert_refused_by_moto(what: &str, out: &common::Output) {
    common::assert_one_line_failure(what, out, "ecr GetAuthorizationToken");
    assert!(out.stderr.contains("HTTP 403"), "{what}: {}", out.stderr);
}

fn with_tampered_token(keys: &AwsKeys) -> AwsKeys {
    AwsKeys {
        session_token: keys.session_token.as_deref().map(tampered),
        ..keys.clone()
    }
}

#[test]
fn web_identity_token_file_credentials_are_verified_by_moto() {
    // IRSA: the fake STS checks the role ARN and the projected token it
    // receives and answers with moto's temporary credentials.
    let moto = Moto::start_authenticated();
    let sts = moto.web_identity_sts();
    let dir = tempfile::tempdir().expect("tempdir");
    let token_file = dir.path().join("token");
    let token = service_account_token(3600);
    std::fs::write(&token_file, format!("{token}\n")).expect("write the token");
    let mut env = isolated_env(&moto.url);
    env.push(("AWS_ENDPOINT_URL_STS", sts.url.clone()));
    env.push(("AWS_WEB_IDENTITY_TOKEN_FILE", token_file.display().to_string()));
    env.push(("AWS_ROLE_ARN", moto.auth().role_arn.clone()));
    assert_logged_in(&run_ecr(&env));
    let calls = sts.calls();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].role_arn, moto.auth().role_arn);
    assert!(
        calls[0].web_identity_token == token,
        "STS got the file's token, trimmed"
    );
    assert!(!calls[0].signed, "AssumeRoleWithWebIdentity is not signed");

    sts.tamper_session_token(true);
    assert_refused_by_moto("changed session token", &run_ecr(&env));
}

/// A container credentials endpoint (EKS Pod Identity agent / ECS) on
/// loopback, written from the SDKs' documented protocol: `GET` with the
/// pod's authorization token, JSON credentials back; its URL.
fn container_endpoint(keys: AwsKeys) -> String {
    use axum::http::{HeaderMap, StatusCode};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    listener.set_nonblocking(true).expect("nonblocking");
    let url = format!("http://{}/v1/credentials", listener.local_addr().expect("address"));
    std::thread::spawn(move || {
        let app = axum::Router::new().route(
            "/v1/credentials",
            axum::routing::get(move |headers: HeaderMap| async move {
                if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some("pod-identity-token") {
                    return (StatusCode::UNAUTHORIZED, "no token".to_owned());
                }
                let body = serde_json::json!({
                    "AccessKeyId": keys.access_key_id, "SecretAccessKey": keys.secret_access_key,
                    "Token": keys.session_token, "Expiration": keys.expiration,
                });
                (StatusCode::OK, body.to_string())
            }),
        );
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                axum::serve(listener, app).await.expect("serve");
            });
    });
    url
}

#[test]
fn container_endpoint_credentials_are_verified_by_moto() {
    // AWS_CONTAINER_CREDENTIALS_FULL_URI. (_RELATIVE_URI is always
    // http://169.254.170.2 in the product: not reachable on loopback.)
    let moto = Moto::start_authenticated();
    let keys = moto.assume_role("pod-identity");
    let dir = tempfile::tempdir().expect("tempdir");
    let token_file = dir.path().join("eks-pod-identity-token");
    std::fs::write(&token_file, "pod-identity-token\n").expect("write the token");
    let env_for = |url: String| {
        let mut env = isolated_env(&moto.url);
        env.push(("AWS_CONTAINER_CREDENTIALS_FULL_URI", url));
        env.push((
            "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
            token_file.display().to_string(),
        ));
        env
    };
    let out = run_ecr(&env_for(container_endpoint(keys.clone())));
    assert_logged_in(&out);
    let session_token = keys.session_token.as_deref().expect("a session token");
    assert!(!out.stderr.contains(&keys.secret_access_key) && !out.stderr.contains(session_token));

    let out = run_ecr(&env_for(container_endpoint(with_tampered_token(&keys))));
    assert_refused_by_moto("changed session token", &out);
}

#[test]
fn instance_role_credentials_are_verified_by_moto() {
    // IMDSv2 (a fake IMDS written from the EC2 docs) serving moto's
    // temporary credentials as the instance role's.
    let moto = Moto::start_authenticated();
    let keys = moto.assume_role("instance");
    let imds_with = |keys: &AwsKeys| {
        let role = serde_json::json!({
            "Code": "Success", "Type": "AWS-HMAC", "AccessKeyId": keys.access_key_id,
            "SecretAccessKey": keys.secret_access_key, "Token": keys.session_token,
            "Expiration": keys.expiration, "LastUpdated": "2026-11-30T00:00:00Z"
        });
        let tree = serde_json::json!({
            "latest/meta-data/iam/security-credentials/": "node-role",
            "latest/meta-data/iam/security-credentials/node-role": role,
        });
        test_fakes::MetadataFake::from_json(&serde_json::json!({"provider": "aws", "tree": tree}))
    };
    let env_for = |imds: &test_fakes::MetadataFake| {
        let mut env: Vec<_> = isolated_env(&moto.url)
            .into_iter()
            .filter(|(k, _)| *k != "AWS_EC2_METADATA_DISABLED")
            .collect();
        env.push(("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.base()));
        env
    };
    let imds = imds_with(&keys);
    assert_logged_in(&run_ecr(&env_for(&imds)));
    drop(imds);

    let imds = imds_with(&with_tampered_token(&keys));
    assert_refused_by_moto("changed session token", &run_ecr(&env_for(&imds)));
}
