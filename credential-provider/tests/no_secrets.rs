//! No token, password or `auth` value reaches stderr on any path, at any log
//! level, in either log format; on failure nothing reaches stdout at all.
//! The `static`, `passthrough` and `token-exchange` backends; the cloud
//! backends are in no_secrets_clouds.rs. The guard (common/leaks.rs) also
//! asserts each case's exit status and that debug and trace do log records.

mod common;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use common::leaks::{Case, check_cases};
use common::token_server::{OPAQUE_TOKEN, TokenServer};
use common::{data, request, run};

/// Every secret in the fixtures, plus the forms they travel in.
fn fixture_secrets() -> Vec<String> {
    let mut secrets = Vec::new();
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(data("docker-config.json")).unwrap()).unwrap();
    for entry in config["auths"].as_object().unwrap().values() {
        if let Some(auth) = entry["auth"].as_str() {
            secrets.push(auth.to_owned());
            let decoded = String::from_utf8(STANDARD.decode(auth).unwrap()).unwrap();
            secrets.push(decoded.split_once(':').unwrap().1.to_owned());
            secrets.push(decoded);
        }
        if let Some(password) = entry["password"].as_str() {
            secrets.push(password.to_owned());
        }
    }
    for file in ["docker-config-bad-auth.json", "docker-config-no-colon.json"] {
        let config: serde_json::Value = serde_json::from_slice(&std::fs::read(data(file)).unwrap()).unwrap();
        let auth = config["auths"]["registry.example.com"]["auth"]
            .as_str()
            .unwrap()
            .to_owned();
        if let Ok(decoded) = STANDARD.decode(&auth) {
            secrets.push(String::from_utf8(decoded).unwrap());
        }
        secrets.push(auth);
    }
    secrets.push(OPAQUE_TOKEN.to_owned());
    secrets
}

#[test]
fn no_secret_on_stderr_on_any_path_at_any_level() {
    let server = TokenServer::start();
    let sa_token = common::service_account_token(3600);
    let expired_token = common::jwt(&serde_json::json!({"exp": common::now() - 60, "sub": "x"}));
    let mut secrets = fixture_secrets();
    secrets.extend([
        sa_token.clone(),
        expired_token.clone(),
        "opaque-sa-token-value".to_owned(),
        "endpoint-password-91ac".to_owned(),
    ]);

    let config = data("docker-config.json").display().to_string();
    let bad_auth = data("docker-config-bad-auth.json").display().to_string();
    let no_colon = data("docker-config-no-colon.json").display().to_string();
    let url = |path: &str| server.url(path);
    let huge_exp_token = common::jwt(&serde_json::json!({"exp": 1u64 << 63, "sub": "huge-exp-subject"}));
    secrets.push(huge_exp_token.clone());

    let wrong_kind = serde_json::json!({
        "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
        "kind": "Something",
        "image": "registry.example.com/app",
        "serviceAccountToken": sa_token,
    });
    let wrong_type = serde_json::json!({
        "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
        "kind": "CredentialProviderRequest",
        "image": "registry.example.com/app",
        "serviceAccountToken": {"value": sa_token},
        "serviceAccountAnnotations": sa_token,
    });
    let registry = request("v1", "registry.example.com/app", None);
    let harbor = |token: &str| request("v1", "harbor.example.com/app", Some(token));
    let exchange = request("v1", "r.example.com/app", Some(&sa_token));
    let exchange_case = |what: &str, path: &str, status: i32| {
        Case::new(
            what,
            &["token-exchange", "--token-endpoint", &url(path)],
            exchange.clone(),
            status,
        )
    };
    let cases = vec![
        Case::new(
            "static hit",
            &["static", "--docker-config", &config],
            registry.clone(),
            0,
        ),
        Case::new(
            "static hub",
            &["static", "--docker-config", &config],
            request("v1", "docker.io/library/nginx", None),
            0,
        ),
        Case::new(
            "static bad auth",
            &["static", "--docker-config", &bad_auth],
            registry.clone(),
            1,
        ),
        Case::new(
            "static no colon",
            &["static", "--docker-config", &no_colon],
            registry.clone(),
            1,
        ),
        Case::new("passthrough ok", &["passthrough"], harbor(&sa_token), 0),
        Case::new("passthrough expired", &["passthrough"], harbor(&expired_token), 1),
        Case::new(
            "passthrough opaque",
            &["passthrough"],
            harbor("opaque-sa-token-value"),
            1,
        ),
        Case::new("passthrough exp 2^63", &["passthrough"], harbor(&huge_exp_token), 1),
        // The exchanged tokens (the JWT and the opaque one) are passwords on
        // stdout: the guard adds each run's passwords to the secrets.
        exchange_case("exchange jwt", "/jwt", 0),
        exchange_case("exchange opaque", "/opaque", 0),
        exchange_case("exchange denied (echoes the subject token)", "/denied", 1),
        exchange_case("exchange garbage", "/garbage", 1),
        exchange_case("exchange 5xx", "/server-error", 1),
        exchange_case("exchange echoes the token cut short", "/hostile", 1),
        exchange_case("exchange access token exp 2^63", "/huge-exp", 1),
        exchange_case("exchange redirect", "/redirect-307", 1),
        Case::new(
            "exchange with every optional flag",
            &[
                "token-exchange",
                "--token-endpoint",
                &url("/opaque"),
                "--audience",
                "registry.example.com",
                "--scope",
                "pull",
                "--resource",
                "https://registry.example.com/",
                "--client-id",
                "puller",
                "--requested-token-type",
                "urn:ietf:params:oauth:token-type:access_token",
            ],
            exchange.clone(),
            0,
        ),
        Case::new(
            "password in the endpoint flag",
            &[
                "token-exchange",
                "--token-endpoint",
                "https://robot:endpoint-password-91ac@sts.example.com/",
            ],
            exchange.clone(),
            1,
        )
        .error_line_only(),
        Case::new(
            "wrong kind",
            &["passthrough"],
            serde_json::to_vec(&wrong_kind).expect("json"),
            1,
        )
        .error_line_only(),
        Case::new(
            "wrong types",
            &["passthrough"],
            serde_json::to_vec(&wrong_type).expect("json"),
            1,
        )
        .error_line_only(),
    ];
    server.redirect_to(&url("/opaque"));
    check_cases(&cases, &secrets);
}

#[test]
fn trace_logs_do_say_what_happened() {
    // The guard above must not pass just because nothing is logged.
    let config = data("docker-config.json").display().to_string();
    let out = run(
        &["--log-level", "debug", "static", "--docker-config", &config],
        &request("v1", "registry.example.com/app", None),
    );
    assert_eq!(out.status, 0);
    assert!(out.stderr.contains("registry.example.com"), "{}", out.stderr);
    assert!(out.stderr.contains("credential response"), "{}", out.stderr);
}
