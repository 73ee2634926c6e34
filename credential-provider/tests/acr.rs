//! `acr` end to end: the binary as kubelet runs it, against
//! tests/fakes/azure_server.py on loopback (IMDS, Entra ID and the registry
//! through --imds-endpoint, --authority-host and --registry-endpoint).
//! Nothing here reaches 169.254.169.254 or any other non-loopback address:
//! every run names the fake's IMDS, and service-principal runs make no call.

mod common;

use common::{Output, assert_no_piece_of, assert_one_line_failure, go_seconds, request, response, run};
use serde_json::{Value, json};
use test_fakes::AzureFake;
use test_fakes::azure::{azure_data, azure_federated_token};

const IMAGE: &str = "demo.azurecr.io/team/app";
const ACR_USERNAME: &str = "00000000-0000-0000-0000-000000000000";
const TENANT: &str = "11111111-2222-4333-8444-555555555555";
const WI_CLIENT: &str = "c2c2c2c2-0000-4000-8000-000000000002";
const SP_CLIENT: &str = "c1c1c1c1-0000-4000-8000-000000000001";
const SP_SECRET: &str = "Qx8Q~fake.client-secret_value-0001";
const IMDS_TOKEN: &str = "GET /metadata/identity/oauth2/token";
const EXCHANGE: &str = "exchange grant_type=access_token";
const CLIENT_ID: &str = "kubernetes.azure.com/acr-client-id";
const TENANT_ID: &str = "kubernetes.azure.com/acr-tenant-id";

/// `[global…] acr CONFIG --imds-endpoint F --authority-host F --registry-endpoint F [args…]`.
fn run_acr(fake: &AzureFake, global: &[&str], config: &str, args: &[&str], stdin: &[u8]) -> Output {
    let config = azure_data(config).display().to_string();
    let base = fake.base();
    let mut all: Vec<&str> = global.to_vec();
    all.extend([
        "acr",
        &config,
        "--imds-endpoint",
        &base,
        "--authority-host",
        &base,
        "--registry-endpoint",
        &base,
    ]);
    all.extend(args);
    run(&all, stdin)
}

fn success(what: &str, out: &Output) -> Value {
    assert_eq!(out.status, 0, "{what}: {}", out.stderr);
    response(&out.stdout)
}

fn keys(answer: &Value) -> Vec<String> {
    answer["auth"]
        .as_object()
        .map(|auth| auth.keys().cloned().collect())
        .unwrap_or_default()
}

/// The refresh token under `registries` (the same for each), with ACR's
/// username, and the empty anonymous entry beside them.
fn refresh_token(answer: &Value, registries: &[&str]) -> String {
    let mut want: Vec<String> = registries.iter().map(|r| (*r).to_owned()).collect();
    want.push("*.azurecr.*".into());
    want.sort();
    assert_eq!(keys(answer), want);
    assert_eq!(answer["auth"]["*.azurecr.*"], json!({"username": "", "password": ""}));
    let token = answer["auth"][registries[0]]["password"].as_str().unwrap().to_owned();
    for registry in registries {
        assert_eq!(answer["auth"][registry]["username"], ACR_USERNAME);
        assert_eq!(answer["auth"][registry]["password"], token.as_str());
    }
    assert_eq!(token.split('.').count(), 3, "a JWT: {token}");
    token
}

fn pod_request(token: &str, annotations: Value) -> Vec<u8> {
    let mut request: Value = serde_json::from_slice(&request("v1", IMAGE, None)).unwrap();
    request["serviceAccountToken"] = token.into();
    request["serviceAccountAnnotations"] = annotations;
    serde_json::to_vec(&request).unwrap()
}

#[test]
fn managed_identity_system_assigned_in_every_version() {
    let fake = AzureFake::start();
    for version in ["v1alpha1", "v1beta1", "v1"] {
        let out = run_acr(&fake, &[], "managed-identity.json", &[], &request(version, IMAGE, None));
        let answer = success(version, &out);
        assert_eq!(
            answer["apiVersion"],
            format!("credentialprovider.kubelet.k8s.io/{version}")
        );
        assert_eq!(answer["cacheKeyType"], "Registry");
        refresh_token(&answer, &["demo.azurecr.io"]);
        // The refresh token's 3h less the 1m margin.
        let cache = go_seconds(answer["cacheDuration"].as_str().unwrap());
        assert!((10800 - 60 - 10..=10800 - 60).contains(&cache), "{cache}");
    }
    assert_eq!(fake.requests(IMDS_TOKEN), 3);
    // The documented grant, never the deprecated one.
    assert_eq!(fake.requests(EXCHANGE), 3);
    assert_eq!(fake.requests("exchange grant_type=access_token_refresh_token"), 0);
    let capped = run_acr(
        &fake,
        &[],
        "managed-identity.json",
        &["--cache-duration", "1h"],
        &request("v1", IMAGE, None),
    );
    assert_eq!(success("capped", &capped)["cacheDuration"], "1h0m0s");
}

#[test]
fn managed_identity_user_assigned_by_client_or_resource_id() {
    let fake = AzureFake::start();
    for config in ["managed-identity-user.json", "managed-identity-resource-id.json"] {
        let out = run_acr(&fake, &[], config, &[], &request("v1", IMAGE, None));
        refresh_token(&success(config, &out), &["demo.azurecr.io"]);
    }
    // An identity IMDS does not know: Azure's words, one line.
    let fake = AzureFake::with(|s| s["imds"]["identity"]["user_assigned"] = json!([]));
    let out = run_acr(
        &fake,
        &[],
        "managed-identity-user.json",
        &[],
        &request("v1", IMAGE, None),
    );
    assert_one_line_failure(
        "unknown identity",
        &out,
        "as the node's user-assigned managed identity c3c3c3c3",
    );
    assert!(out.stderr.contains("Identity not found"), "{}", out.stderr);
}

#[test]
fn service_principal_answers_without_a_call() {
    let fake = AzureFake::start();
    let out = run_acr(&fake, &[], "service-principal.json", &[], &request("v1", IMAGE, None));
    let answer = success("sp", &out);
    assert_eq!(
        keys(&answer),
        ["*.azurecr.*", "*.azurecr.cn", "*.azurecr.io", "*.azurecr.us"]
    );
    for key in ["*.azurecr.cn", "*.azurecr.io", "*.azurecr.us"] {
        assert_eq!(
            answer["auth"][key],
            json!({"username": SP_CLIENT, "password": SP_SECRET})
        );
    }
    assert!(answer.get("cacheDuration").is_none(), "{answer}");
    assert_eq!(fake.all_requests(), 0);
    // The YAML config of the China cloud, the same way.
    let out = run_acr(
        &fake,
        &[],
        "azure-china.yaml",
        &["--cache-duration", "1h"],
        &request("v1", "demo.azurecr.cn/app", None),
    );
    assert_eq!(success("china", &out)["cacheDuration"], "1h0m0s");
    assert_eq!(fake.all_requests(), 0);
}

#[test]
fn custom_clouds_add_their_registry_suffix() {
    // The fake's ARM /metadata/endpoints names AzureStackDemo, whose
    // registries are under azurecr.demo.example.
    let fake = AzureFake::start();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("azure.json");
    let mut text: Value =
        serde_json::from_slice(&std::fs::read(azure_data("service-principal.json")).unwrap()).unwrap();
    text["cloud"] = "AzureStackDemo".into();
    text["resourceManagerEndpoint"] = "https://management.demo.example/".into();
    std::fs::write(&config, text.to_string()).unwrap();
    let config = config.display().to_string();
    let base = fake.base();
    let out = run(
        &["acr", &config, "--arm-endpoint", &base],
        &request("v1", "demo.azurecr.demo.example/app", None),
    );
    let answer = success("custom", &out);
    assert_eq!(
        keys(&answer),
        [
            "*.azurecr.*",
            "*.azurecr.cn",
            "*.azurecr.demo.example",
            "*.azurecr.io",
            "*.azurecr.us"
        ]
    );
    assert_eq!(fake.requests("GET /metadata/endpoints"), 1);
}

/// The service-principal config of `custom_clouds_add_their_registry_suffix`
/// (cloud AzureStackDemo, ARM at the fake), written to `dir`.
fn custom_cloud_config(dir: &std::path::Path) -> String {
    let config = dir.join("azure.json");
    let mut text: Value =
        serde_json::from_slice(&std::fs::read(azure_data("service-principal.json")).unwrap()).unwrap();
    text["cloud"] = "AzureStackDemo".into();
    text["resourceManagerEndpoint"] = "https://management.demo.example/".into();
    std::fs::write(&config, text.to_string()).unwrap();
    config.display().to_string()
}

#[test]
fn a_custom_cloud_suffix_that_is_no_registry_domain_is_refused() {
    // ARM's acrLoginServer must name a registry domain: with "com" the
    // service principal's ID and secret went to evil.com under *.com.
    let dir = tempfile::tempdir().unwrap();
    let config = custom_cloud_config(dir.path());
    for (suffix, image) in [
        (json!("com"), "evil.com/app"),
        (json!(".com"), "evil.com/app"),
        (json!("co.uk"), "evil.co.uk/app"),
        (json!("github.io"), "evil.github.io/app"),
        (json!("."), "evil.com/app"),
        (json!(""), "evil.com/app"),
        (json!("127.0.0.1"), "evil.127.0.0.1/app"),
        (json!("*.example.com"), "evil.example.com/app"),
        (json!("example.com:443"), "evil.example.com:443/app"),
        (json!("exa mple.com"), "evil.com/app"),
        (json!(7), "evil.com/app"),
    ] {
        let fake =
            AzureFake::with(|s| s["arm"]["metadata_endpoints"][0]["suffixes"]["acrLoginServer"] = suffix.clone());
        let base = fake.base();
        let out = run(&["acr", &config, "--arm-endpoint", &base], &request("v1", image, None));
        let what = format!("suffix {suffix}");
        assert_one_line_failure(&what, &out, "suffixes.acrLoginServer");
        for named in [
            "environment AzureStackDemo's suffixes.acrLoginServer",
            &format!("{base}metadata/endpoints"),
            "a registry domain",
        ] {
            assert!(out.stderr.contains(named), "{what}: {named:?} not in {}", out.stderr);
        }
        assert!(
            !out.stderr.contains(SP_SECRET) && !out.stdout.contains(SP_SECRET),
            "{what}"
        );
    }
    // A sovereign cloud's own domain is a registry domain.
    let fake = AzureFake::with(|s| {
        s["arm"]["metadata_endpoints"][0]["suffixes"]["acrLoginServer"] = "azurecr.example.internal".into()
    });
    let out = run(
        &["acr", &config, "--arm-endpoint", &fake.base()],
        &request("v1", "demo.azurecr.example.internal/app", None),
    );
    let answer = success("sovereign", &out);
    assert_eq!(
        answer["auth"]["*.azurecr.example.internal"],
        json!({"username": SP_CLIENT, "password": SP_SECRET})
    );
}

#[test]
fn mirrors_with_ports_answer_under_both_hosts() {
    let fake = AzureFake::start();
    let mirrors = "mcr.microsoft.com:demo.azurecr.io,registry.local:5000:demo.azurecr.io";
    for image in ["registry.local:5000/team/app", "mcr.microsoft.com/oss/nginx"] {
        let source = image.split('/').next().unwrap();
        let out = run_acr(
            &fake,
            &[],
            "managed-identity.json",
            &["--registry-mirror", mirrors],
            &request("v1", image, None),
        );
        refresh_token(&success(image, &out), &[source, "demo.azurecr.io"]);
    }
    // Upstream's short flag, repeated; a service principal exchanges its
    // secret for the target's token (upstream has no answer for the source).
    let out = run_acr(
        &fake,
        &[],
        "service-principal.json",
        &["-r", "mcr.microsoft.com:demo.azurecr.io", "-r", "x.io:y.azurecr.io"],
        &request("v1", "mcr.microsoft.com/oss/nginx", None),
    );
    refresh_token(&success("sp mirror", &out), &["mcr.microsoft.com", "demo.azurecr.io"]);
    assert_eq!(fake.requests(&format!("POST /{TENANT}/oauth2/v2.0/token")), 1);
    // A mirror whose target is no ACR is an error naming the flag.
    let out = run_acr(
        &fake,
        &[],
        "managed-identity.json",
        &["--registry-mirror", "mcr.microsoft.com:quay.io"],
        &request("v1", "mcr.microsoft.com/oss/nginx", None),
    );
    assert_one_line_failure("bad target", &out, "--registry-mirror mcr.microsoft.com:quay.io");
}

#[test]
fn non_acr_images_get_no_credentials() {
    let fake = AzureFake::start();
    for config in ["managed-identity.json", "service-principal.json"] {
        for image in [
            "quay.io/team/app",
            "demo.azurecr.io.example.com/app",
            "demo.azurecr.de/app",
            "nginx",
        ] {
            let out = run_acr(&fake, &[], config, &[], &request("v1", image, None));
            let answer = success(image, &out);
            assert!(answer.get("auth").is_none(), "{answer}");
            assert_eq!(answer["cacheDuration"], "0s");
        }
    }
    assert_eq!(fake.all_requests(), 0);
}

#[test]
fn workload_identity_with_allow_lists() {
    let fake = AzureFake::start();
    let token = azure_federated_token(true);
    let annotations = json!({CLIENT_ID: WI_CLIENT, TENANT_ID: TENANT});
    let allow = ["--allowed-tenant-id", TENANT, "--allowed-client-id", WI_CLIENT];
    let out = run_acr(
        &fake,
        &[],
        "managed-identity.json",
        &allow,
        &pod_request(&token, annotations.clone()),
    );
    refresh_token(&success("wi", &out), &["demo.azurecr.io"]);
    assert_eq!(fake.requests(&format!("POST /{TENANT}/oauth2/v2.0/token")), 1);
    assert_eq!(fake.requests(IMDS_TOKEN), 0, "the pod's identity, not the node's");

    let other = ["--allowed-client-id", "c9c9c9c9-0000-4000-8000-000000000009"];
    let out = run_acr(
        &fake,
        &[],
        "managed-identity.json",
        &other,
        &pod_request(&token, annotations.clone()),
    );
    assert_one_line_failure("client not allowed", &out, "which --allowed-client-id does not list");
    let other = ["--allowed-tenant-id", "contoso.onmicrosoft.com"];
    let out = run_acr(
        &fake,
        &[],
        "managed-identity.json",
        &other,
        &pod_request(&token, annotations.clone()),
    );
    assert_one_line_failure("tenant not allowed", &out, "which --allowed-tenant-id does not list");

    let out = run_acr(
        &fake,
        &[],
        "service-principal.json",
        &[],
        &pod_request(&token, json!({CLIENT_ID: WI_CLIENT})),
    );
    assert_one_line_failure(
        "missing annotation",
        &out,
        "has no annotation kubernetes.azure.com/acr-tenant-id",
    );

    // A token Entra ID refuses: its error, never a piece of the token.
    let refused = azure_federated_token(false);
    let fake = AzureFake::with(|s| s["entra"]["echo_credentials"] = true.into());
    let out = run_acr(
        &fake,
        &[],
        "managed-identity.json",
        &[],
        &pod_request(&refused, annotations),
    );
    assert_one_line_failure("refused", &out, "AADSTS");
    assert!(out.stderr.contains("workload identity"), "{}", out.stderr);
    assert_no_piece_of(&refused, &out.stderr);
}

#[test]
fn errors_are_one_line_naming_the_cause() {
    let fake = AzureFake::with(|s| s["acr"]["tenant"] = "another-tenant".into());
    let out = run_acr(&fake, &[], "managed-identity.json", &[], &request("v1", IMAGE, None));
    assert_one_line_failure(
        "wrong tenant",
        &out,
        "ACR login for demo.azurecr.io as the node's system-assigned managed identity",
    );
    assert!(out.stderr.contains("UNAUTHORIZED"), "{}", out.stderr);

    let out = run(&["acr", "/nonexistent/azure.json"], &request("v1", IMAGE, None));
    assert_one_line_failure("no config", &out, "/nonexistent/azure.json");
    let out = run(&["acr"], b"");
    assert_one_line_failure("no config arg", &out, "AZURE_JSON");
    let out = run(&["acr", "x.json", "--imds-endpoint", "http://10.0.0.1/"], b"");
    assert_one_line_failure("remote imds", &out, "--imds-endpoint");
    let out = run(&["acr", "x.json", "--authority-host", "http://login.example.com/"], b"");
    assert_one_line_failure("plain authority", &out, "--authority-host");
    let out = run(&["acr", "x.json", "--registry-endpoint", "http://10.0.0.1:80"], b"");
    assert_one_line_failure("remote registry", &out, "--registry-endpoint");

    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("azure.json");
    std::fs::write(&empty, r#"{"aadClientId": "c1"}"#).unwrap();
    let out = run(&["acr", &empty.display().to_string()], &request("v1", IMAGE, None));
    assert_one_line_failure("no credentials", &out, "names no credentials");
}

#[test]
fn a_slow_imds_is_what_the_timeout_names() {
    // IMDS stalls past --timeout: the line names IMDS's URL, not the
    // registry's token realm (the same fake's {base}oauth2/token).
    let fake = AzureFake::with(|s| s["imds"]["identity"]["delay_seconds"] = 4.into());
    let started = std::time::Instant::now();
    let out = run_acr(
        &fake,
        &[],
        "managed-identity.json",
        &["--timeout", "1s"],
        &request("v1", IMAGE, None),
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let imds = format!(
        "IMDS did not answer {}metadata/identity/oauth2/token within",
        fake.base()
    );
    assert_one_line_failure("slow IMDS", &out, &imds);
    assert!(
        !out.stderr.contains(&format!("{}oauth2/token", fake.base())),
        "the registry is blamed: {}",
        out.stderr
    );
    assert_eq!(fake.requests(EXCHANGE), 0);
    // The wait in whole milliseconds ("885ms", "1s"), not Debug's "885.084244ms".
    let after = out.stderr.trim_end().rsplit("within ").next().unwrap();
    let number = after.trim_end_matches("ms").trim_end_matches('s');
    let decimals = number.split_once('.').map_or(0, |(_, d)| d.len());
    assert!(
        number.parse::<f64>().is_ok()
            && (decimals == 0 || (after.ends_with('s') && !after.ends_with("ms") && decimals <= 3)),
        "{after:?}"
    );
}

#[test]
fn no_secret_or_token_on_stdout_or_stderr_at_trace() {
    let fake = AzureFake::with(|s| s["acr"]["echo_access_token"] = true.into());
    let token = azure_federated_token(true);
    let annotations = json!({CLIENT_ID: WI_CLIENT, TENANT_ID: TENANT});
    for level in ["debug", "trace"] {
        let global = ["--log-level", level];
        let mi = run_acr(
            &fake,
            &global,
            "managed-identity.json",
            &[],
            &request("v1", IMAGE, None),
        );
        let refresh = refresh_token(&success("mi", &mi), &["demo.azurecr.io"]);
        let wi = run_acr(
            &fake,
            &global,
            "service-principal.json",
            &[],
            &pod_request(&token, annotations.clone()),
        );
        let wi_refresh = refresh_token(&success("wi", &wi), &["demo.azurecr.io"]);
        let sp = run_acr(
            &fake,
            &global,
            "service-principal.json",
            &[],
            &request("v1", IMAGE, None),
        );
        success("sp", &sp);
        for out in [&mi, &wi, &sp] {
            assert!(!out.stderr.contains("imds-token-"), "{}", out.stderr);
            assert!(!out.stderr.contains("assertion-token-"), "{}", out.stderr);
            assert!(!out.stderr.contains("fake.client-secret"), "{}", out.stderr);
            assert_no_piece_of(&refresh, &out.stderr);
            assert_no_piece_of(&wi_refresh, &out.stderr);
            assert_no_piece_of(&token, &out.stderr);
        }
        // The pod's token never reaches stdout either.
        assert_no_piece_of(&token, &wi.stdout);
    }
    // A registry that echoes the Entra token in its refusal: cut out.
    let fake = AzureFake::with(|s| {
        s["acr"]["echo_access_token"] = true.into();
        s["acr"]["tenant"] = "another-tenant".into();
    });
    let out = run_acr(
        &fake,
        &["--log-level", "trace"],
        "managed-identity.json",
        &[],
        &request("v1", IMAGE, None),
    );
    assert_eq!(out.status, 1);
    assert!(!out.stderr.contains("imds-token-"), "{}", out.stderr);
}
