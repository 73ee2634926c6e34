//! `gcp` end to end: the binary as kubelet runs it, against
//! tests/fakes/gcp_server.py on loopback (the GCE metadata server through
//! GCE_METADATA_HOST, STS and IAM Credentials through the endpoint flags).
//! Nothing here reaches 169.254.169.254, metadata.google.internal or any
//! other non-loopback address.

mod common;

use common::{Output, assert_no_piece_of, assert_one_line_failure, go_seconds, request, response, run_with_env};
use serde_json::{Value, json};
use test_fakes::{GcpFake, gcp_subject_token as subject_token};

const IMAGE: &str = "us-docker.pkg.dev/demo-project/apps/web";
const IDP: &str = "https://container.googleapis.com/v1/projects/demo-project/locations/us-central1/clusters/demo";
const GSA: &str = "builder@demo-project.iam.gserviceaccount.com";
const OPT_IN: &str = "iam.gke.io/enable-wi-image-pull";
const GSA_KEY: &str = "iam.gke.io/gcp-service-account";
const METADATA_TOKEN: &str = "GET /computeMetadata/v1/instance/service-accounts/default/token";
const STS: &str = "POST /v1/token";
const GENERATE: &str =
    "POST /v1/projects/-/serviceAccounts/builder@demo-project.iam.gserviceaccount.com:generateAccessToken";
/// The fake's google-dockercfg holds user:pass for this key.
const DOCKERCFG_KEY: &str = "https://registry.example.com";
const DOCKERCFG_AUTH: &str = "dXNlcjpwYXNz";

/// Runs `[global…] gcp --sts-endpoint FAKE --iam-credentials-endpoint FAKE [args…]`
/// with GCE_METADATA_HOST pointing at the fake.
fn run_gcp(fake: &GcpFake, global: &[&str], args: &[&str], stdin: &[u8]) -> Output {
    run_gcp_at(&fake.host(), &fake.base(), global, args, stdin)
}

fn run_gcp_at(metadata_host: &str, endpoint: &str, global: &[&str], args: &[&str], stdin: &[u8]) -> Output {
    let mut all: Vec<&str> = global.to_vec();
    all.extend([
        "gcp",
        "--sts-endpoint",
        endpoint,
        "--iam-credentials-endpoint",
        endpoint,
    ]);
    all.extend(args);
    run_with_env(&all, stdin, &[("GCE_METADATA_HOST", metadata_host)])
}

/// The flags of a cluster whose workload identity pool is the fake's.
const WORKLOAD_IDENTITY: [&str; 4] = ["--identity-provider", IDP, "--project-id", "demo-project"];

/// A v1 request with the service-account token and annotations kubelet passes.
fn pod_request(token: Option<&str>, annotations: Value) -> Vec<u8> {
    let mut request: Value = serde_json::from_slice(&request("v1", IMAGE, None)).unwrap();
    if let Some(token) = token {
        request["serviceAccountToken"] = token.into();
    }
    request["serviceAccountAnnotations"] = annotations;
    serde_json::to_vec(&request).unwrap()
}

fn success(what: &str, out: &Output) -> Value {
    assert_eq!(out.status, 0, "{what}: {}", out.stderr);
    response(&out.stdout)
}

fn keys(answer: &Value) -> Vec<String> {
    answer["auth"].as_object().unwrap().keys().cloned().collect()
}

/// Every key carries `_token` and a password starting with `prefix`, and
/// the fake's registry lets that pull (the token has a pull scope); the
/// password is returned.
fn token_of(fake: &GcpFake, answer: &Value, prefix: &str) -> String {
    let auth = answer["auth"].as_object().unwrap();
    let first = auth.values().next().unwrap()["password"].as_str().unwrap().to_owned();
    for (key, entry) in auth {
        assert_eq!(entry["username"], "_token", "{key}");
        assert_eq!(entry["password"], first.as_str(), "{key}");
    }
    assert!(first.starts_with(prefix), "{first}");
    let (status, body) = pull(fake, "_token", &first);
    assert_eq!(status, 200, "the registry refused the pull: {body}");
    first
}

/// A pull's token request at the fake's registry (`GET /v2/token`) with
/// Basic `username:password`, as `docker pull` sends kubelet's credentials:
/// its status and body.
fn pull(fake: &GcpFake, username: &str, password: &str) -> (u16, String) {
    use base64::Engine;
    use std::io::{Read, Write};
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("{username}:{password}"));
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", fake.port)).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "GET /v2/token?scope=repository:demo-project/apps/web:pull&service=us-docker.pkg.dev HTTP/1.0\r\n\
         Authorization: Basic {basic}\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap();
    (status, body.to_owned())
}

fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[test]
fn node_flow_answers_with_the_default_service_accounts_token() {
    let fake = GcpFake::start();
    for version in ["v1alpha1", "v1beta1", "v1"] {
        let out = run_gcp(&fake, &[], &[], &request(version, IMAGE, None));
        let answer = success(version, &out);
        assert_eq!(
            answer["apiVersion"],
            format!("credentialprovider.kubelet.k8s.io/{version}")
        );
        assert_eq!(answer["cacheKeyType"], "Registry");
        assert_eq!(
            keys(&answer),
            [
                "*.gcr.io",
                "*.pkg.dev",
                "container.cloud.google.com",
                "gcr.io",
                "us-docker.pkg.dev"
            ]
        );
        token_of(&fake, &answer, "ya29.metadata-");
        // The token's remaining validity (3599s) less the 1m margin.
        let cache = go_seconds(answer["cacheDuration"].as_str().unwrap());
        assert!((3599 - 60 - 10..3599).contains(&cache), "{cache}");
    }
    // An image on one of Google's own keys is not listed twice.
    let answer = success(
        "gcr.io",
        &run_gcp(&fake, &[], &[], &request("v1", "gcr.io/p/app", None)),
    );
    assert_eq!(
        keys(&answer),
        ["*.gcr.io", "*.pkg.dev", "container.cloud.google.com", "gcr.io"]
    );
    // --cache-duration caps it; --expiry-margin is kept in hand.
    let answer = success(
        "capped",
        &run_gcp(&fake, &[], &["--cache-duration", "10m"], &request("v1", IMAGE, None)),
    );
    assert_eq!(answer["cacheDuration"], "10m0s");
    let answer = success(
        "margin",
        &run_gcp(&fake, &[], &["--expiry-margin", "30m"], &request("v1", IMAGE, None)),
    );
    assert!(go_seconds(answer["cacheDuration"].as_str().unwrap()) < 3599 - 1800);
}

#[test]
fn a_service_account_without_a_pull_scope_is_an_error_naming_its_scopes() {
    let fake = GcpFake::with(|s| {
        s["metadata"]["tree"]["instance/service-accounts/default/scopes"] =
            "https://www.googleapis.com/auth/logging.write\nhttps://www.googleapis.com/auth/monitoring.write".into();
    });
    let out = run_gcp(&fake, &[], &[], &request("v1", IMAGE, None));
    assert_one_line_failure("no scope", &out, "has no scope that can pull images");
    for want in [
        "node@demo-project.iam.gserviceaccount.com",
        "logging.write, monitoring.write",
        "devstorage.read_only",
    ] {
        assert!(out.stderr.contains(want), "{want}: {}", out.stderr);
    }
    assert!(!out.stderr.contains("ya29."), "{}", out.stderr);

    let fake = GcpFake::with(|s| {
        s["metadata"]["tree"]["instance/service-accounts/default/scopes"] =
            "https://www.googleapis.com/auth/cloud-platform".into();
    });
    success("cloud-platform", &run_gcp(&fake, &[], &[], &request("v1", IMAGE, None)));
}

#[test]
fn metadata_failures_exit_1_with_one_line_never_an_empty_answer() {
    let stdin = request("v1", IMAGE, None);
    let broken = GcpFake::with(|s| s["metadata"]["token"] = json!({"status": 500, "body": "internal error"}));
    let out = run_gcp(&broken, &[], &[], &stdin);
    assert_one_line_failure(
        "HTTP 500",
        &out,
        "reading the node's service-account token from the GCE metadata server",
    );
    assert!(out.stderr.contains("HTTP 500"), "{}", out.stderr);

    let no_account = GcpFake::with(|s| s["metadata"]["token"] = Value::Null);
    let out = run_gcp(&no_account, &[], &[], &stdin);
    assert_one_line_failure("no account", &out, "does the instance have a default service account?");

    let nobody = format!("127.0.0.1:{}", closed_port());
    let out = run_gcp_at(&nobody, "http://127.0.0.1:9/", &[], &[], &stdin);
    assert_one_line_failure("no server", &out, "cannot reach the gce metadata service");

    // GCE_METADATA_HOST is host[:port], as Google's libraries read it.
    let out = run_gcp_at("http://127.0.0.1:9", "http://127.0.0.1:9/", &[], &[], &stdin);
    assert_one_line_failure("a URL", &out, "--metadata-host");
}

#[test]
fn dockercfg_flow_reads_the_instance_attribute() {
    let fake = GcpFake::start();
    for flow in [
        &["--auth-flow", "dockercfg"][..],
        &["--authFlow=dockercfg"],
        &["-a", "dockercfg"],
    ] {
        let answer = success("dockercfg", &run_gcp(&fake, &[], flow, &request("v1", IMAGE, None)));
        assert_eq!(answer["cacheKeyType"], "Global");
        assert!(answer.get("cacheDuration").is_none(), "{answer}");
        assert_eq!(
            answer["auth"],
            json!({DOCKERCFG_KEY: {"username": "user", "password": "pass"}})
        );
    }
    let answer = success(
        "cache",
        &run_gcp(
            &fake,
            &[],
            &["-a", "dockercfg", "--cache-duration", "5m"],
            &request("v1beta1", IMAGE, None),
        ),
    );
    assert_eq!(answer["cacheDuration"], "5m0s");
    assert_eq!(answer["apiVersion"], "credentialprovider.kubelet.k8s.io/v1beta1");

    let absent = GcpFake::with(|s| {
        s["metadata"]["tree"]
            .as_object_mut()
            .unwrap()
            .remove("instance/attributes/google-dockercfg");
    });
    let out = run_gcp(&absent, &[], &["-a", "dockercfg"], &request("v1", IMAGE, None));
    assert_one_line_failure(
        "absent",
        &out,
        "instance metadata attribute google-dockercfg is not set",
    );

    let bad = GcpFake::with(|s| {
        s["metadata"]["tree"]["instance/attributes/google-dockercfg"] =
            r#"{"registry.example.com": {"auth": "c2VjcmV0LXdpdGhvdXQtY29sb24="}}"#.into();
    });
    let out = run_gcp(&bad, &[], &["-a", "dockercfg"], &request("v1", IMAGE, None));
    assert_one_line_failure(
        "bad entry",
        &out,
        "metadata attribute google-dockercfg: [\"registry.example.com\"].auth decodes to text without the ':'",
    );
    assert!(!out.stderr.contains("c2VjcmV0"), "{}", out.stderr);
}

/// A fake whose google-dockercfg-url names `url`.
fn with_url(url: &str) -> GcpFake {
    let url = url.to_owned();
    GcpFake::with(move |s| s["metadata"]["tree"]["instance/attributes/google-dockercfg-url"] = url.into())
}

#[test]
fn dockercfg_url_flow_fetches_the_named_document_within_the_endpoint_policy() {
    // The document server is a second fake: the first's port is not known
    // when its scenario is written.
    let documents = GcpFake::with(|s| {
        s["documents"] = json!({
            "/config/dockercfg.json": r#"{"https://registry.example.com": {"auth": "dXNlcjpwYXNz"}}"#,
            "/config/gone.json": {"status": 404, "body": "no such object"},
            "/config/huge.json": {"body": "x", "repeat": 5 << 20},
            "/config/moved.json": {"status": 302, "body": ""},
        });
    });
    let url = |path: &str| format!("{}config/{path}", documents.base());
    let stdin = request("v1", IMAGE, None);

    let fake = with_url(&format!(
        "{}?X-Goog-Signature=sig-0123456789abcdef",
        url("dockercfg.json")
    ));
    let answer = success("url", &run_gcp(&fake, &[], &["-a", "dockercfg-url"], &stdin));
    assert_eq!(answer["cacheKeyType"], "Global");
    assert_eq!(
        answer["auth"],
        json!({DOCKERCFG_KEY: {"username": "user", "password": "pass"}})
    );
    assert_eq!(documents.requests("GET /config/dockercfg.json"), 1);

    for (path, want) in [
        ("gone.json", "HTTP 404"),
        ("huge.json", "larger than 4 MiB"),
        ("moved.json", "HTTP 302 (redirects are not followed)"),
    ] {
        let fake = with_url(&url(path));
        let out = run_gcp(&fake, &[], &["-a", "dockercfg-url"], &stdin);
        assert_one_line_failure(path, &out, want);
        assert!(out.stderr.contains(&url(path)), "{}", out.stderr);
    }

    // Refused before anything is fetched: plain http off loopback, a user in
    // the URL; the query (a signed URL's signature) is never shown.
    for (raw, want) in [
        (
            "http://registry-config.example.com/dockercfg.json?sig=s3cr3t-signature",
            "http://registry-config.example.com/dockercfg.json, which is neither https nor http on a loopback address",
        ),
        (
            "https://user:s3cr3t-signature@registry-config.example.com/c.json",
            "carries a username or password",
        ),
        ("not a URL", "which is not a URL"),
    ] {
        let fake = with_url(raw);
        let out = run_gcp(&fake, &[], &["-a", "dockercfg-url"], &stdin);
        assert_one_line_failure(raw, &out, want);
        assert!(!out.stderr.contains("s3cr3t"), "{}", out.stderr);
    }

    let out = run_gcp(&GcpFake::start(), &[], &["-a", "dockercfg-url"], &stdin);
    assert_one_line_failure(
        "absent",
        &out,
        "instance metadata attribute google-dockercfg-url is not set",
    );
}

#[test]
fn workload_identity_exchanges_the_pods_token_at_sts() {
    let fake = GcpFake::start();
    let token = subject_token(true);
    let out = run_gcp(
        &fake,
        &[],
        &WORKLOAD_IDENTITY,
        &pod_request(Some(&token), json!({OPT_IN: "true"})),
    );
    let answer = success("federated", &out);
    assert_eq!(answer["cacheKeyType"], "Registry");
    assert_eq!(keys(&answer).len(), 5);
    token_of(&fake, &answer, "ya29.federated-");
    let cache = go_seconds(answer["cacheDuration"].as_str().unwrap());
    assert!((3600 - 60 - 10..3600).contains(&cache), "{cache}");
    assert_eq!(fake.requests(STS), 1);
    // The pod's pull never used the node's account.
    assert_eq!(fake.requests(METADATA_TOKEN), 0);

    // --sts-audience gives the audience as is (a federation pool).
    let audience = format!("identitynamespace:demo-project.svc.id.goog:{IDP}");
    let out = run_gcp(
        &fake,
        &[],
        &["--sts-audience", &audience],
        &pod_request(Some(&token), json!({OPT_IN: "true"})),
    );
    token_of(&fake, &success("audience", &out), "ya29.federated-");
}

#[test]
fn workload_identity_impersonates_the_annotated_google_service_account() {
    let fake = GcpFake::start();
    let token = subject_token(true);
    let stdin = pod_request(Some(&token), json!({OPT_IN: "true", GSA_KEY: GSA}));
    for allowed in [
        &[][..],
        &["--allowed-service-account", "*@demo-project.iam.gserviceaccount.com"],
        &["--allowed-service-account", GSA],
    ] {
        let mut args = WORKLOAD_IDENTITY.to_vec();
        args.extend(allowed);
        let answer = success("impersonated", &run_gcp(&fake, &[], &args, &stdin));
        token_of(&fake, &answer, "ya29.impersonated-");
        let cache = go_seconds(answer["cacheDuration"].as_str().unwrap());
        assert!((3600 - 60 - 10..3600).contains(&cache), "{cache}");
    }
    assert_eq!(fake.requests(GENERATE), 3);
    assert_eq!(fake.requests(METADATA_TOKEN), 0);
}

#[test]
fn impersonation_is_limited_to_allowed_keys_and_accounts() {
    let fake = GcpFake::start();
    let token = subject_token(true);
    let mut args = WORKLOAD_IDENTITY.to_vec();
    args.extend(["--allowed-service-account", "ci@other-project.iam.gserviceaccount.com"]);

    // Not in the allow-list: refused before any exchange.
    let stdin = pod_request(Some(&token), json!({OPT_IN: "true", GSA_KEY: GSA}));
    let out = run_gcp(&fake, &[], &args, &stdin);
    assert_one_line_failure(
        "not allowed",
        &out,
        &format!("names {GSA}, which --allowed-service-account does not list"),
    );
    assert_eq!(fake.requests(STS), 0);

    // Not an account at all.
    let stdin = pod_request(Some(&token), json!({OPT_IN: "true", GSA_KEY: "root@evil.example.com"}));
    let out = run_gcp(&fake, &[], &WORKLOAD_IDENTITY, &stdin);
    assert_one_line_failure("not an account", &out, "is not a Google service account");

    // Allowed here, refused by IAM (the pod may not impersonate it).
    let other = "other@demo-project.iam.gserviceaccount.com";
    let stdin = pod_request(Some(&token), json!({OPT_IN: "true", GSA_KEY: other}));
    let out = run_gcp(&fake, &[], &WORKLOAD_IDENTITY, &stdin);
    assert_one_line_failure("IAM refusal", &out, &format!("impersonating {other}"));
    assert!(out.stderr.contains("IAM_PERMISSION_DENIED"), "{}", out.stderr);
    assert_no_piece_of(&token, &out.stderr);

    // A key --service-account-annotation does not allow is not read: the
    // pod pulls as itself.
    let stdin = pod_request(
        Some(&token),
        json!({OPT_IN: "true", "example.com/gcp-service-account": GSA}),
    );
    token_of(
        &fake,
        &success("other key", &run_gcp(&fake, &[], &WORKLOAD_IDENTITY, &stdin)),
        "ya29.federated-",
    );
    let mut custom = WORKLOAD_IDENTITY.to_vec();
    custom.extend(["--service-account-annotation", "example.com/gcp-service-account"]);
    token_of(
        &fake,
        &success("custom key", &run_gcp(&fake, &[], &custom, &stdin)),
        "ya29.impersonated-",
    );

    // Without the opt-in, a named account is not used: the node pulls.
    let stdin = pod_request(Some(&token), json!({GSA_KEY: GSA}));
    token_of(
        &fake,
        &success("no opt-in", &run_gcp(&fake, &[], &WORKLOAD_IDENTITY, &stdin)),
        "ya29.metadata-",
    );
    assert_eq!(fake.requests(GENERATE), 1);
}

#[test]
fn an_sts_refusal_exits_1_without_the_service_account_token() {
    // The fake quotes the refused token in its error_description.
    let fake = GcpFake::start();
    let token = subject_token(false);
    let stdin = pod_request(Some(&token), json!({OPT_IN: "true", GSA_KEY: GSA}));
    let out = run_gcp(&fake, &[], &WORKLOAD_IDENTITY, &stdin);
    assert_one_line_failure(
        "refused",
        &out,
        "exchanging the pod's service-account token at Google STS",
    );
    assert!(out.stderr.contains("invalid_grant"), "{}", out.stderr);
    assert!(
        out.stderr.contains("<redacted>"),
        "the fake echoes the token: {}",
        out.stderr
    );
    assert_no_piece_of(&token, &out.stderr);
    assert_eq!(fake.requests(GENERATE), 0);
    for level in ["debug", "trace"] {
        let out = run_gcp(&fake, &["--log-level", level], &WORKLOAD_IDENTITY, &stdin);
        assert_eq!(out.status, 1, "{}", out.stderr);
        assert!(out.stdout.is_empty());
        assert_no_piece_of(&token, &out.stderr);
    }
}

#[test]
fn workload_identity_misconfigurations_are_one_line_errors() {
    let fake = GcpFake::start();
    let token = subject_token(true);
    let cases: [(&[&str], Option<&str>, Value, &str); 5] = [
        (
            &[],
            Some(&token),
            json!({OPT_IN: "true"}),
            "this provider has no workload identity pool",
        ),
        (
            &WORKLOAD_IDENTITY,
            Some(&token),
            json!({OPT_IN: "yes"}),
            "is neither \"true\" nor \"false\"",
        ),
        (
            &WORKLOAD_IDENTITY,
            None,
            json!({OPT_IN: "true"}),
            "kubelet sent no serviceAccountToken",
        ),
        (
            &[
                "--identity-provider",
                IDP,
                "--project-id",
                "demo-project",
                "--require-workload-identity",
            ],
            Some(&token),
            json!({}),
            "does not opt in to workload identity",
        ),
        (
            &["-a", "dockercfg"],
            Some(&token),
            json!({OPT_IN: "true"}),
            "--auth-flow=dockercfg has none",
        ),
    ];
    for (args, token, annotations, want) in cases {
        let out = run_gcp(&fake, &[], args, &pod_request(token, annotations));
        assert_one_line_failure(want, &out, want);
    }
    assert_eq!(fake.requests(STS), 0);
    // --identity-provider without --project-id is a usage error.
    let out = run_gcp(&fake, &[], &["--identity-provider", IDP], &request("v1", IMAGE, None));
    assert_one_line_failure("usage", &out, "--project-id");
}

#[test]
fn no_token_or_password_reaches_the_logs_at_debug() {
    let documents = GcpFake::with(|s| {
        s["documents"] = json!({"/dockercfg.json": r#"{"https://registry.example.com": {"auth": "dXNlcjpwYXNz"}}"#});
    });
    let fake = with_url(&format!("{}dockercfg.json?sig=s3cr3t-signature", documents.base()));
    let token = subject_token(true);
    let runs: [(&[&str], Vec<u8>); 5] = [
        (&[], request("v1", IMAGE, None)),
        (&["-a", "dockercfg"], request("v1", IMAGE, None)),
        (&["-a", "dockercfg-url"], request("v1", IMAGE, None)),
        (&WORKLOAD_IDENTITY, pod_request(Some(&token), json!({OPT_IN: "true"}))),
        (
            &WORKLOAD_IDENTITY,
            pod_request(Some(&token), json!({OPT_IN: "true", GSA_KEY: GSA})),
        ),
    ];
    for (args, stdin) in &runs {
        for global in [
            &["--log-level", "debug"][..],
            &["--log-level", "trace", "--log-format", "json"],
        ] {
            let out = run_gcp(&fake, global, args, stdin);
            let what = format!("{global:?} {args:?}");
            assert_eq!(out.status, 0, "{what}: {}", out.stderr);
            assert!(
                out.stderr.contains("gcp"),
                "{what}: debug logs expected: {}",
                out.stderr
            );
            // The answer holds a secret; the logs none.
            let password = response(&out.stdout)["auth"]
                .as_object()
                .unwrap()
                .values()
                .next()
                .unwrap()["password"]
                .as_str()
                .unwrap()
                .to_owned();
            for secret in [password.as_str(), "ya29.", DOCKERCFG_AUTH, "user:pass", "s3cr3t"] {
                assert!(!out.stderr.contains(secret), "{what}: {secret} in {}", out.stderr);
            }
            assert_no_piece_of(&token, &out.stderr);
        }
    }
}

#[test]
fn help_lists_the_flags_and_their_variables() {
    let out = common::run(&["gcp", "--help"], b"");
    assert_eq!(out.status, 0, "{}", out.stderr);
    for want in [
        "--auth-flow",
        "dockercfg-url",
        "GCE_METADATA_HOST",
        "--identity-provider",
        "--project-id",
        "--sts-audience",
        "--service-account-annotation",
        "--allowed-service-account",
        "--require-workload-identity",
        "--sts-endpoint",
        "--iam-credentials-endpoint",
        "--cache-duration",
        "--expiry-margin",
        "CLOUD_CREDENTIAL_PROVIDER_IDENTITY_PROVIDER",
    ] {
        assert!(out.stdout.contains(want), "{want}: {}", out.stdout);
    }
}
