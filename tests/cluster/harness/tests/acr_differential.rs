//! `acr` against cloud-provider-azure's acr-credential-provider v1.36.5
//! (built by tests/cluster/build.sh from its own module, acr/go.mod): both
//! answer the same v1 requests against the same Azure fake, and their
//! `auth` maps agree except where we differ on purpose (each difference
//! below is in docs/credential-provider.md).
//!
//! Upstream's endpoints are hard-coded (IMDS at http://169.254.169.254/,
//! registries at https://REGISTRY/), so it runs with HTTP_PROXY and
//! HTTPS_PROXY naming tests/fakes/tls_proxy.py on loopback, which pipes
//! every request to the fake (terminating CONNECT tunnels with a
//! certificate for demo.azurecr.io from this test's own CA, given as
//! SSL_CERT_FILE). Ours reaches the registry the same way (through the
//! proxy, https, the same CA) and IMDS at the fake by --imds-endpoint (it
//! never sends IMDS traffic to a proxy). No connection leaves 127.0.0.1.
//!
//! Compared: service principal (offline), managed identity (system-assigned,
//! user-assigned by client ID and by resource ID), registry mirrors (one
//! with a port), and images that are not ACR's. Not compared: KEP-4412 workload identity.
//! Upstream's MSAL first calls Entra's instance discovery and OpenID
//! configuration at the hard-coded https://login.microsoftonline.com/ and
//! asks for `…/.default openid offline_access profile`, which the fake (as
//! Entra's client-credentials reference says) refuses; the fake serves
//! neither discovery document. Ours is tested in that mode against the fake
//! in credential-provider/tests/acr.rs.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use base64::Engine;
use cluster_harness::{TlsProxy, cluster_bin, provider_binary, workspace_root};
use serde_json::{Value, json};
use test_fakes::AzureFake;

const REGISTRY: &str = "demo.azurecr.io";

/// (case, config, an extra argument, image, the differences we mean).
type Case<'a> = (&'a str, &'a str, Option<&'a String>, &'a str, &'a [&'a str]);

/// Runs `program args` with `env` only (and PATH), `request` on stdin: exit
/// status and stdout as JSON (or the stderr).
fn answer(program: &Path, args: &[String], env: &[(&str, String)], request: &Value) -> Result<Value, String> {
    let mut child = Command::new(program)
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(request.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

/// The `auth` map, a refresh token from the fake shown by what it says
/// (audience, tenant, grant, issuer) rather than its serial and times.
fn auth(answer: &Value) -> BTreeMap<String, (String, String)> {
    let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let shown = |password: &str| {
        let claims = password
            .split('.')
            .nth(1)
            .and_then(|p| engine.decode(p).ok())
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok());
        match claims {
            Some(c) if c["iss"] == "Azure Container Registry" => format!(
                "<ACR refresh token aud={} tenant={} grant={}>",
                c["aud"], c["tenant"], c["grant_type"]
            ),
            _ => password.to_owned(),
        }
    };
    answer["auth"]
        .as_object()
        .map(|auth| {
            auth.iter()
                .map(|(key, entry)| {
                    let user = entry["username"].as_str().unwrap_or_default().to_owned();
                    (
                        key.clone(),
                        (user, shown(entry["password"].as_str().unwrap_or_default())),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// How two `auth` maps differ, one line per key.
fn differences(ours: &BTreeMap<String, (String, String)>, theirs: &BTreeMap<String, (String, String)>) -> Vec<String> {
    let keys: std::collections::BTreeSet<&String> = ours.keys().chain(theirs.keys()).collect();
    keys.into_iter()
        .filter(|k| ours.get(*k) != theirs.get(*k))
        .map(|k| match (ours.get(k), theirs.get(k)) {
            (None, Some(_)) => format!("{k} only upstream's"),
            (Some(_), None) => format!("{k} only ours"),
            _ => format!("{k} differs"),
        })
        .collect()
}

#[test]
fn acr_agrees_with_acr_credential_provider() {
    let upstream = cluster_bin("acr-credential-provider");
    let ours = provider_binary();
    let fake = AzureFake::with(|s| s["acr"]["realm_scheme"] = "https".into());
    let dir = tempfile::tempdir().unwrap();
    let proxy = TlsProxy::start(fake.port, &[REGISTRY], dir.path());
    let (ca, proxy_url) = (proxy.ca.clone(), proxy.url());
    let upstream_env = [
        ("HTTP_PROXY", proxy_url.clone()),
        ("HTTPS_PROXY", proxy_url.clone()),
        ("SSL_CERT_FILE", ca.display().to_string()),
    ];
    let ours_env = [
        ("HTTPS_PROXY", proxy_url.clone()),
        ("SSL_CERT_FILE", ca.display().to_string()),
    ];
    let data = |name: &str| {
        workspace_root()
            .join("tests/data/azure")
            .join(name)
            .display()
            .to_string()
    };
    let mirror = "--registry-mirror=mcr.microsoft.com:demo.azurecr.io".to_owned();
    let mirror_port = "--registry-mirror=registry.local:5000:demo.azurecr.io".to_owned();
    let cases: [Case; 10] = [
        // The closed German cloud's suffix is not given the secret.
        (
            "service principal",
            "service-principal.json",
            None,
            "demo.azurecr.io/team/app",
            &["*.azurecr.de only upstream's"],
        ),
        (
            "service principal, China (YAML)",
            "azure-china.yaml",
            None,
            "demo.azurecr.cn/app",
            &["*.azurecr.de only upstream's"],
        ),
        (
            "service principal, not ACR",
            "service-principal.json",
            None,
            "quay.io/team/app",
            &[],
        ),
        (
            "managed identity",
            "managed-identity.json",
            None,
            "demo.azurecr.io/team/app",
            &[],
        ),
        (
            "managed identity, user-assigned client ID",
            "managed-identity-user.json",
            None,
            "demo.azurecr.io/app",
            &[],
        ),
        (
            "managed identity, user-assigned resource ID",
            "managed-identity-resource-id.json",
            None,
            "demo.azurecr.io/app",
            &[],
        ),
        (
            "registry mirror",
            "managed-identity.json",
            Some(&mirror),
            "mcr.microsoft.com/oss/nginx",
            &[],
        ),
        // Upstream splits on every ':', drops the mapping and answers nothing.
        (
            "registry mirror with a port",
            "managed-identity.json",
            Some(&mirror_port),
            "registry.local:5000/team/app",
            &[
                "*.azurecr.* only ours",
                "demo.azurecr.io only ours",
                "registry.local:5000 only ours",
            ],
        ),
        (
            "managed identity, not ACR",
            "managed-identity.json",
            Some(&mirror),
            "quay.io/team/app",
            &[],
        ),
        // Upstream's suffix search takes demo.azurecr.io out of this host.
        (
            "a host that only contains an ACR name",
            "managed-identity.json",
            None,
            "demo.azurecr.io.example.com/app",
            &["*.azurecr.* only upstream's", "demo.azurecr.io only upstream's"],
        ),
    ];
    let mut report = Vec::new();
    for (case, config, extra, image, meant) in cases {
        let request = json!({
            "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
            "kind": "CredentialProviderRequest",
            "image": image,
        });
        let mut upstream_args = vec![data(config)];
        let mut ours_args = vec!["acr".to_owned(), data(config), "--imds-endpoint".into(), fake.base()];
        if let Some(extra) = extra {
            upstream_args.push(extra.clone());
            ours_args.push(extra.clone());
        }
        let theirs = answer(&upstream, &upstream_args, &upstream_env, &request)
            .unwrap_or_else(|e| panic!("{case}: acr-credential-provider failed: {e}"));
        let mine =
            answer(&ours, &ours_args, &ours_env, &request).unwrap_or_else(|e| panic!("{case}: ours failed: {e}"));
        let found = differences(&auth(&mine), &auth(&theirs));
        eprintln!(
            "{case}: {image}: keys {:?}; cacheDuration ours {} upstream {}; differences {found:?}",
            auth(&mine).keys().collect::<Vec<_>>(),
            mine["cacheDuration"],
            theirs["cacheDuration"]
        );
        if found != meant {
            report.push(format!(
                "{case} ({image}): differences {found:?}, expected {meant:?}\n  ours:     {:?}\n  upstream: {:?}",
                auth(&mine),
                auth(&theirs)
            ));
        }
        assert_eq!(mine["cacheKeyType"], theirs["cacheKeyType"], "{case}");
    }
    assert!(
        report.is_empty(),
        "acr and acr-credential-provider disagree:\n{}",
        report.join("\n")
    );
    // Both exchanged at the registry: upstream with the deprecated grant,
    // ours with the documented one.
    assert_eq!(fake.requests("exchange grant_type=access_token_refresh_token"), 5);
    assert_eq!(fake.requests("exchange grant_type=access_token"), 5);
    drop(proxy);
}
