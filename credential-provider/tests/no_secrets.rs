//! No token, password or `auth` value reaches stderr on any path, at any log
//! level, in either log format; on failure nothing reaches stdout at all.

mod common;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
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

fn assert_clean(what: &str, out: &common::Output, secrets: &[String]) {
    for secret in secrets {
        assert!(
            !out.stderr.contains(secret.as_str()),
            "{what}: stderr holds a secret: {}",
            out.stderr
        );
        if out.status != 0 {
            assert!(out.stdout.is_empty(), "{what}: stdout on failure: {}", out.stdout);
        }
    }
    // Any long piece of a secret is a leak too (a server may echo a token
    // cut short): no 16 characters in a row of one may appear.
    for secret in secrets {
        let bytes = secret.as_bytes();
        for window in bytes.windows(16.min(bytes.len())) {
            let piece = std::str::from_utf8(window).unwrap_or_default();
            assert!(
                piece.is_empty() || !out.stderr.contains(piece),
                "{what}: stderr holds part of a secret: {}",
                out.stderr
            );
        }
    }
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
    let jwt_url = server.url("/jwt");
    let opaque_url = server.url("/opaque");
    let denied_url = server.url("/denied");
    let garbage_url = server.url("/garbage");
    let hostile_url = server.url("/hostile");
    let huge_exp_url = server.url("/huge-exp");
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

    let cases: Vec<(&str, Vec<&str>, Vec<u8>)> = vec![
        (
            "static hit",
            vec!["static", "--docker-config", &config],
            request("v1", "registry.example.com/app", None),
        ),
        (
            "static hub",
            vec!["static", "--docker-config", &config],
            request("v1", "docker.io/library/nginx", None),
        ),
        (
            "static bad auth",
            vec!["static", "--docker-config", &bad_auth],
            request("v1", "registry.example.com/app", None),
        ),
        (
            "static no colon",
            vec!["static", "--docker-config", &no_colon],
            request("v1", "registry.example.com/app", None),
        ),
        (
            "passthrough ok",
            vec!["passthrough"],
            request("v1", "harbor.example.com/app", Some(&sa_token)),
        ),
        (
            "passthrough expired",
            vec!["passthrough"],
            request("v1", "harbor.example.com/app", Some(&expired_token)),
        ),
        (
            "passthrough opaque",
            vec!["passthrough"],
            request("v1", "harbor.example.com/app", Some("opaque-sa-token-value")),
        ),
        (
            "exchange jwt",
            vec!["token-exchange", "--token-endpoint", &jwt_url],
            request("v1", "r.example.com/app", Some(&sa_token)),
        ),
        (
            "exchange opaque",
            vec!["token-exchange", "--token-endpoint", &opaque_url],
            request("v1", "r.example.com/app", Some(&sa_token)),
        ),
        (
            "exchange denied",
            vec!["token-exchange", "--token-endpoint", &denied_url],
            request("v1", "r.example.com/app", Some(&sa_token)),
        ),
        (
            "exchange garbage",
            vec!["token-exchange", "--token-endpoint", &garbage_url],
            request("v1", "r.example.com/app", Some(&sa_token)),
        ),
        (
            "exchange echoes the token cut short",
            vec!["token-exchange", "--token-endpoint", &hostile_url],
            request("v1", "r.example.com/app", Some(&sa_token)),
        ),
        (
            "exchange access token exp 2^63",
            vec!["token-exchange", "--token-endpoint", &huge_exp_url],
            request("v1", "r.example.com/app", Some(&sa_token)),
        ),
        (
            "passthrough exp 2^63",
            vec!["passthrough"],
            request("v1", "harbor.example.com/app", Some(&huge_exp_token)),
        ),
        (
            "password in the endpoint flag",
            vec![
                "token-exchange",
                "--token-endpoint",
                "https://robot:endpoint-password-91ac@sts.example.com/",
            ],
            request("v1", "r.example.com/app", Some(&sa_token)),
        ),
        (
            "wrong kind",
            vec!["passthrough"],
            serde_json::to_vec(&wrong_kind).unwrap(),
        ),
        (
            "wrong types",
            vec!["passthrough"],
            serde_json::to_vec(&wrong_type).unwrap(),
        ),
    ];
    for level in ["trace", "debug", "error"] {
        for format in ["text", "json"] {
            for (what, args, stdin) in &cases {
                let mut full = vec!["--log-level", level, "--log-format", format];
                full.extend(args.iter().copied());
                let out = run(&full, stdin);
                assert_clean(&format!("{what} ({level}, {format})"), &out, &secrets);
            }
        }
    }
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
