//! The registries the real node pulls from (harness `registry.rs`), without
//! a node: Debian's docker-registry (distribution 2.8.2) over TLS with
//! htpasswd, and with token auth through the harness's token realm, whose
//! passwords are Kubernetes service-account tokens checked by a TokenReview
//! against the tier's kube-apiserver (KEP-4412). skopeo is the client: GET
//! with Basic auth at the realm; containerd's POST (`grant_type=password`)
//! is sent by hand. No password or token may reach a log.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use cluster_harness::registry::{Check, jwt_es256, pull, push};
use cluster_harness::{Registry, TestCluster, TokenRealm, run_ok, workspace_root};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

const REPOSITORY: &str = "team/app:1";
/// The audience kubelet asks tokens for (the credential provider's `tokenAttributes.serviceAccountTokenAudience`).
const AUDIENCE: &str = "registry.test/pull";
const NAMESPACE: &str = "team";
const PULLER: &str = "puller";
/// A service account the realm does not accept.
const OTHER: &str = "other";

/// distribution 2.8's answer to a request without (valid) credentials, as skopeo words it.
const UNAUTHORIZED: &str = "unauthorized: authentication required";

/// skopeo's words when the realm answers 401 (the realm's own message follows).
const REALM_REFUSED: &str = "unable to retrieve auth token: invalid username/password: unauthorized: ";

/// A small `FROM scratch` image with one text file, as an oci-archive
/// (buildah with a store of its own in `dir`, so the host's store is untouched).
fn image(dir: &Path) -> PathBuf {
    let file = dir.join("hello.txt");
    std::fs::write(&file, "hello from the registry test\n").expect("the image's file");
    let buildah = |args: &[&str]| {
        let out = run_ok(
            Command::new("buildah")
                .arg("--root")
                .arg(dir.join("store"))
                .arg("--runroot")
                .arg(dir.join("run"))
                .args(["--storage-driver", "vfs"])
                .args(args),
        )
        .expect("buildah");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    let container = buildah(&["from", "--quiet", "scratch"]);
    buildah(&["copy", &container, &file.display().to_string(), "/hello.txt"]);
    let archive = dir.join("image.tar");
    buildah(&[
        "commit",
        "--quiet",
        &container,
        &format!("oci-archive:{}", archive.display()),
    ]);
    buildah(&["rm", &container]);
    archive
}

fn refused(result: anyhow::Result<()>, what: &str) -> String {
    match result {
        Ok(()) => panic!("{what}: the pull succeeded"),
        Err(e) => format!("{e:#}"),
    }
}

/// No secret in any encoding we can think of: raw, Basic's base64 of `user:secret`, URL-encoded;
/// and no token the realm issued to skopeo (every JWT starts with `eyJ`, the base64url of `{"`).
fn assert_not_logged(log: &str, secrets: &[(&str, &str)], which: &str) {
    assert!(!log.contains("eyJ"), "the {which} log holds a JWT");
    for (user, secret) in secrets {
        let basic = STANDARD.encode(format!("{user}:{secret}"));
        let encoded: String = url::form_urlencoded::byte_serialize(secret.as_bytes()).collect();
        for form in [*secret, &basic, &encoded] {
            assert!(!log.contains(form), "the {which} log holds a secret of {user}");
        }
    }
}

#[test]
fn htpasswd_registry_serves_its_user_only() {
    let work = tempfile::tempdir().expect("a work dir");
    let t0 = Instant::now();
    let archive = image(work.path());
    eprintln!("registry test: image built in {:.1?}", t0.elapsed());
    let password = format!("pw-{}", std::process::id());
    let creds = format!("alice:{password}");
    let t0 = Instant::now();
    let registry = Registry::start_htpasswd("alice", &password).expect("the htpasswd registry");
    eprintln!("registry test: htpasswd registry up in {:.1?}", t0.elapsed());

    let t0 = Instant::now();
    push(&archive, &registry, REPOSITORY, &creds).expect("push with the right credentials");
    eprintln!("registry test: push in {:.1?}", t0.elapsed());
    let t0 = Instant::now();
    pull(&registry, REPOSITORY, Some(&creds)).expect("pull with the right credentials");
    eprintln!("registry test: pull in {:.1?}", t0.elapsed());

    // The documented push (`make push`, buildah) with the registry's CA and an auth file.
    let auth = registry.auth_file(Some(&creds)).expect("an auth file");
    let t0 = Instant::now();
    run_ok(
        Command::new("make")
            .current_dir(workspace_root())
            .args(["-s", "push"])
            .arg(format!("REGISTRY={}", registry.host()))
            .arg(format!("IMAGE_ARCHIVE={}", archive.display()))
            .arg("IMAGE_TAG=registry-test")
            .arg(format!("PUSH_FLAGS={}", registry.push_flags(&auth))),
    )
    .expect("make push");
    eprintln!("registry test: make push in {:.1?}", t0.elapsed());
    pull(&registry, "pv-topology-webhook:registry-test", Some(&creds)).expect("pull what make push pushed");

    let anonymous = refused(pull(&registry, REPOSITORY, None), "anonymous");
    eprintln!("registry test: anonymous pull: {anonymous}");
    assert!(anonymous.contains(UNAUTHORIZED), "{anonymous}");
    let wrong = refused(pull(&registry, REPOSITORY, Some("alice:wrong")), "wrong password");
    eprintln!("registry test: wrong password: {wrong}");
    assert!(wrong.contains(UNAUTHORIZED), "{wrong}");
    let push_wrong = refused(
        push(&archive, &registry, "team/app:2", "alice:wrong"),
        "push with a wrong password",
    );
    assert!(push_wrong.contains(UNAUTHORIZED), "{push_wrong}");

    let log = registry.log_text();
    assert!(
        log.contains("authentication failure"),
        "the registry logged no refusal:\n{log}"
    );
    assert_not_logged(&log, &[("alice", &password)], "registry");

    // The same user and password at a token realm (Check::Password) instead.
    let mut realm = TokenRealm::start(Check::Password {
        user: "alice".to_owned(),
        password: password.clone(),
    })
    .expect("the token realm");
    let registry = Registry::start_token(&realm).expect("the token registry");
    push(&archive, &registry, REPOSITORY, &realm.push_credentials()).expect("push as the realm's push account");
    pull(&registry, REPOSITORY, Some(&creds)).expect("pull with the right password");
    let wrong = refused(
        pull(&registry, REPOSITORY, Some("alice:wrong")),
        "wrong password at the realm",
    );
    assert!(
        wrong.contains(&format!("{REALM_REFUSED}wrong user or password")),
        "{wrong}"
    );
    let subjects: Vec<String> = realm.grants().into_iter().map(|g| g.subject).collect();
    assert_eq!(subjects, ["harness-push", "alice"]);
    realm.stop();
    let push_creds = realm.push_credentials();
    let (push_user, push_password) = push_creds.split_once(':').expect("user:password");
    for (log, which) in [(registry.log_text(), "registry"), (realm.log_text(), "realm")] {
        assert_not_logged(&log, &[("alice", &password), (push_user, push_password)], which);
    }
}

/// A token of `account` for `audiences` from the TokenRequest API, as kubelet asks for one.
async fn token(client: &kube::Client, account: &str, audiences: &[&str]) -> String {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), NAMESPACE);
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: audiences.iter().map(|a| (*a).to_owned()).collect(),
            expiration_seconds: Some(600),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    accounts
        .create_token_request(account, &PostParams::default(), &request)
        .await
        .unwrap_or_else(|e| panic!("a token for {NAMESPACE}/{account}: {e}"))
        .status
        .expect("a token")
        .token
}

fn jwt_part(token: &str, index: usize) -> Value {
    let part = token.split('.').nth(index).expect("a JWT part");
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).expect("base64url")).expect("JSON")
}

/// `token` with its times an hour in the past, signed again with the
/// cluster's own service-account key: expired, but signed by the issuer.
fn expired(token: &str, cluster: &TestCluster) -> String {
    let mut claims = jwt_part(token, 1);
    let header = jwt_part(token, 0);
    let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("now").as_secs();
    claims["iat"] = json!(now - 3600);
    claims["nbf"] = json!(now - 3600);
    claims["exp"] = json!(now - 3000);
    let key = std::fs::read_to_string(cluster.dir().join("pki/sa.key")).expect("the service-account key");
    let key = rcgen::KeyPair::from_pem(&key).expect("an ECDSA key");
    jwt_es256(&json!({"kid": header["kid"]}), &claims, &key).expect("a signed JWT")
}

/// `token`'s claims with `alg: none` and no signature.
fn unsigned(token: &str) -> String {
    let claims = token.split('.').nth(1).expect("claims");
    format!("{}.{claims}.", URL_SAFE_NO_PAD.encode(r#"{"alg":"none","typ":"JWT"}"#))
}

fn grants_of(realm: &TokenRealm, subject: &str) -> Vec<String> {
    realm
        .grants()
        .into_iter()
        .filter(|g| g.subject == subject)
        .map(|g| g.granted)
        .collect()
}

#[tokio::test]
async fn token_registry_takes_service_account_tokens_through_the_realm() {
    let cluster = TestCluster::start().await;
    let client = cluster.client();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NAMESPACE}})).expect("a Namespace"),
        )
        .await
        .expect("the namespace");
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), NAMESPACE);
    for name in [PULLER, OTHER] {
        accounts
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": name}})).expect("a ServiceAccount"),
            )
            .await
            .expect("the service account");
    }

    let t0 = Instant::now();
    let mut realm = TokenRealm::start(Check::ServiceAccountToken {
        kubeconfig: cluster.kubeconfig.clone(),
        audience: AUDIENCE.to_owned(),
        accounts: Some(vec![format!("{NAMESPACE}/{PULLER}")]),
    })
    .expect("the token realm");
    let registry = Registry::start_token(&realm).expect("the token registry");
    eprintln!("registry test: realm and token registry up in {:.1?}", t0.elapsed());

    let work = tempfile::tempdir().expect("a work dir");
    let archive = image(work.path());
    let t0 = Instant::now();
    push(&archive, &registry, REPOSITORY, &realm.push_credentials()).expect("push as the realm's push account");
    eprintln!("registry test: push through the realm in {:.1?}", t0.elapsed());

    // The service account's token for the audience: pull only.
    let good = token(&client, PULLER, &[AUDIENCE]).await;
    let creds = format!("{PULLER}:{good}");
    let t0 = Instant::now();
    pull(&registry, REPOSITORY, Some(&creds)).expect("pull with the service account's token");
    eprintln!(
        "registry test: pull through the realm (TokenReview) in {:.1?}",
        t0.elapsed()
    );
    let subject = format!("system:serviceaccount:{NAMESPACE}:{PULLER}");
    assert_eq!(grants_of(&realm, &subject), ["repository:team/app:pull"]);
    let pushed = refused(
        push(&archive, &registry, "team/app:2", &creds),
        "push with a pull token",
    );
    eprintln!("registry test: push with a pull-only token: {pushed}");
    assert!(
        grants_of(&realm, &subject).iter().all(|g| !g.contains("push")),
        "{:?}",
        realm.grants()
    );

    // Refused by the realm, and so by the registry.
    let other_audience = token(&client, PULLER, &["another-audience"]).await;
    let other_account = token(&client, OTHER, &[AUDIENCE]).await;
    let garbage = format!("not-a-token-{}", std::process::id());
    let expired = expired(&good, &cluster);
    let unsigned = unsigned(&good);
    let cases = [
        ("a token for another audience", &other_audience, "did not authenticate"),
        (
            "another service account",
            &other_account,
            "team/other may not pull here",
        ),
        ("a garbage password", &garbage, "did not authenticate"),
        ("an expired token", &expired, "did not authenticate"),
        ("an unsigned token", &unsigned, "did not authenticate"),
    ];
    let issued = realm.grants().len();
    for (what, secret, reason) in &cases {
        let before = realm.log_text().len();
        let error = refused(pull(&registry, REPOSITORY, Some(&format!("{PULLER}:{secret}"))), what);
        eprintln!("registry test: {what}: {error}");
        assert!(
            error.contains(REALM_REFUSED) && error.contains(reason),
            "{what}: {error}"
        );
        let said = realm.log_text()[before..].to_owned();
        assert!(
            said.contains("refused") && said.contains(reason),
            "{what}: the realm said {said}"
        );
    }
    let anonymous = refused(pull(&registry, REPOSITORY, None), "anonymous");
    eprintln!("registry test: anonymous pull: {anonymous}");
    // The realm's message is "authentication required", distribution's default for
    // UNAUTHORIZED, which skopeo leaves out.
    assert!(anonymous.contains(REALM_REFUSED.trim_end_matches(": ")), "{anonymous}");
    assert!(
        realm
            .log_text()
            .contains("refused (repository:team/app:pull): authentication required")
    );
    assert_eq!(
        realm.grants().len(),
        issued,
        "a refused request got a token: {:?}",
        realm.grants()
    );

    // containerd's way: POST grant_type=password, then the token as Bearer.
    let ca = reqwest::Certificate::from_pem(&std::fs::read(realm.ca_path()).expect("the CA")).expect("a CA");
    let http = reqwest::Client::builder()
        .tls_certs_only([ca])
        .timeout(Duration::from_secs(30))
        .build()
        .expect("an HTTPS client");
    let scope = "repository:team/app:pull";
    let form = |password: &str| {
        [
            ("grant_type", "password".to_owned()),
            ("username", PULLER.to_owned()),
            ("password", password.to_owned()),
            ("service", "registry.test".to_owned()),
            ("scope", scope.to_owned()),
            ("client_id", "containerd-client".to_owned()),
        ]
    };
    let answer = http
        .post(realm.url())
        .form(&form(&good))
        .send()
        .await
        .expect("POST /token");
    assert_eq!(answer.status(), 200);
    let body: Value = answer.json().await.expect("JSON");
    let access = body["access_token"].as_str().expect("access_token").to_owned();
    assert_eq!(body["token"], body["access_token"]);
    assert!(
        body["expires_in"].as_u64().is_some() && body["issued_at"].is_string(),
        "{body}"
    );
    let manifest = http
        .get(format!("https://{}/v2/team/app/manifests/1", registry.host()))
        .header("Accept", "application/vnd.oci.image.manifest.v1+json")
        .bearer_auth(&access)
        .send()
        .await
        .expect("GET the manifest");
    assert_eq!(manifest.status(), 200, "the registry refused the realm's POSTed token");
    let answer = http
        .post(realm.url())
        .form(&form(&garbage))
        .send()
        .await
        .expect("POST /token");
    assert_eq!(answer.status(), 401);
    let body: Value = answer.json().await.expect("a JSON error");
    assert_eq!(body["errors"][0]["code"], "UNAUTHORIZED", "{body}");

    // The realm down: no token, no pull; up again on its port: pulls again.
    realm.stop();
    let down = refused(pull(&registry, REPOSITORY, Some(&creds)), "the realm stopped");
    eprintln!("registry test: realm stopped: {down}");
    assert!(down.contains("connection refused"), "{down}");
    realm.start_again().expect("the realm again");
    let issued = realm.grants().len();
    pull(&registry, REPOSITORY, Some(&creds)).expect("pull once the realm is back");
    let again = realm.grants();
    assert_eq!(again.len(), issued + 1, "{again:?}");
    assert_eq!(again[issued].subject, subject);
    assert_eq!(again[issued].granted, "repository:team/app:pull");

    let secrets = [
        ("puller", good.as_str()),
        ("puller", other_audience.as_str()),
        ("other", other_account.as_str()),
        ("puller", garbage.as_str()),
        ("puller", expired.as_str()),
        ("puller", unsigned.as_str()),
        ("token", access.as_str()),
    ];
    let push_creds = realm.push_credentials();
    let (push_user, push_password) = push_creds.split_once(':').expect("user:password");
    for (log, which) in [(registry.log_text(), "registry"), (realm.log_text(), "realm")] {
        assert_not_logged(&log, &secrets, which);
        assert_not_logged(&log, &[(push_user, push_password)], which);
    }
}
