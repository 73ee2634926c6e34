//! No secret on stderr from the cloud backends (`ecr`, `gcp`, `acr`), at
//! every log level in both log formats, with each case's exit status and
//! the records debug and trace must log asserted by the guard of
//! no_secrets.rs (common/leaks.rs). The secrets: the node's AWS keys, the
//! keys and session token an STS issues, the pods' service-account tokens,
//! every password answered (ECR, Google and ACR tokens, an ACR service
//! principal's secret), the Google and Azure tokens in between, a Docker
//! config's `auth` and a signed URL's signature.
//!
//! Peers: the ECR fake (common/aws_fake.rs, used through its public API: it
//! verifies each call's SigV4 signature and session token), an STS written
//! here from AWS's `AssumeRoleWithWebIdentity` reference, and the Python
//! fakes of tests/fakes/ for GCE, Google STS and IAM Credentials, Entra ID,
//! IMDS and an ACR registry. Nothing leaves loopback.

mod common;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Form;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use common::aws_fake::{Behaviour, FakeAws, Known};
use common::leaks::{Case, check_cases};
use common::{request, service_account_token};
use serde_json::{Value, json};
use test_fakes::azure::{azure_data, azure_federated_token};
use test_fakes::{AzureFake, GcpFake, gcp_subject_token};

const REGISTRY: &str = "123456789012.dkr.ecr.us-east-1.amazonaws.com";
const ROLE: &str = "arn:aws:iam::123456789012:role/ecr-puller";
const NODE_ROLE: &str = "arn:aws:iam::123456789012:role/node-puller";
/// What the STS below issues: a temporary key, its secret and session token.
const ISSUED_KEY: &str = "ASIAISSUEDBYFAKESTS01";
const ISSUED_SECRET: &str = "issued-secret-access-key/9f3Kq+Zt1wXa";
const ISSUED_SESSION: &str = "IQoJb3JpZ2luX2VjEIssuedSessionToken/fake+sts//0123456789abcdef==";
const NODE_KEY: &str = "AKIDNODE";
const NODE_SECRET: &str = "node-secret-key";
const NODE_SESSION_KEY: &str = "ASIANODESESSION0001";
const NODE_SESSION_SECRET: &str = "node-temporary-secret-7Qa2";
const NODE_SESSION_TOKEN: &str = "FwoGZXIvYXdzENodeSessionToken/abcdefghijklmnop==";

/// `AssumeRoleWithWebIdentity` (STS API reference, Query API, form-encoded
/// POST, XML answer). It refuses, as `AccessDenied` or
/// `InvalidIdentityToken`, any call but the action and version, a role of
/// [`ROLE`] or [`NODE_ROLE`], a session name, and exactly `token`; and
/// answers with [`ISSUED_KEY`], [`ISSUED_SECRET`] and [`ISSUED_SESSION`].
struct Sts {
    addr: SocketAddr,
    calls: Arc<Mutex<usize>>,
}

#[derive(Clone)]
struct StsState {
    token: String,
    calls: Arc<Mutex<usize>>,
}

fn sts_error(code: &str, message: &str) -> Response {
    let xml = format!(
        "<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><Error><Type>Sender</Type>\
         <Code>{code}</Code><Message>{message}</Message></Error><RequestId>fake</RequestId></ErrorResponse>"
    );
    (StatusCode::BAD_REQUEST, xml).into_response()
}

async fn assume_role(State(state): State<StsState>, Form(form): Form<Vec<(String, String)>>) -> Response {
    *state.calls.lock().expect("calls") += 1;
    let get = |name: &str| form.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    if get("Action") != Some("AssumeRoleWithWebIdentity") || get("Version") != Some("2011-06-15") {
        return sts_error("InvalidAction", "fake STS: not AssumeRoleWithWebIdentity 2011-06-15");
    }
    if !matches!(get("RoleArn"), Some(ROLE | NODE_ROLE)) || get("RoleSessionName").is_none_or(str::is_empty) {
        return sts_error(
            "AccessDenied",
            "fake STS: not a role of this account, or no session name",
        );
    }
    if get("WebIdentityToken") != Some(state.token.as_str()) {
        return sts_error("InvalidIdentityToken", "fake STS: not the expected token");
    }
    let xml = format!(
        "<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">\
         <AssumeRoleWithWebIdentityResult><Credentials><AccessKeyId>{ISSUED_KEY}</AccessKeyId>\
         <SecretAccessKey>{ISSUED_SECRET}</SecretAccessKey><SessionToken>{ISSUED_SESSION}</SessionToken>\
         <Expiration>2099-01-01T00:00:00Z</Expiration></Credentials>\
         <SubjectFromWebIdentityToken>system:serviceaccount:team:puller</SubjectFromWebIdentityToken>\
         </AssumeRoleWithWebIdentityResult><ResponseMetadata><RequestId>fake</RequestId></ResponseMetadata>\
         </AssumeRoleWithWebIdentityResponse>"
    );
    (StatusCode::OK, [("content-type", "text/xml")], xml).into_response()
}

impl Sts {
    fn start(token: &str) -> Self {
        let calls: Arc<Mutex<usize>> = Arc::default();
        let state = StsState {
            token: token.to_owned(),
            calls: calls.clone(),
        };
        let app = axum::Router::new().route("/", post(assume_role)).with_state(state);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        listener.set_nonblocking(true).expect("non-blocking");
        let addr = listener.local_addr().expect("address");
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                axum::serve(listener, app).await.expect("serve");
            });
        });
        Self { addr, calls }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

/// An ECR fake that also knows the keys of this file.
fn ecr(behaviour: Behaviour) -> FakeAws {
    let fake = FakeAws::start(behaviour);
    fake.known.lock().expect("known keys").extend([
        Known::new(ISSUED_KEY, ISSUED_SECRET, Some(ISSUED_SESSION)),
        Known::new(NODE_SESSION_KEY, NODE_SESSION_SECRET, Some(NODE_SESSION_TOKEN)),
    ]);
    fake
}

/// No AWS set-up of the machine: only what each case adds.
fn aws_env(ecr: &str, sts: &str) -> Vec<(&'static str, String)> {
    vec![
        ("AWS_ENDPOINT_URL", ecr.to_owned()),
        ("AWS_ENDPOINT_URL_STS", sts.to_owned()),
        ("AWS_EC2_METADATA_DISABLED", "true".to_owned()),
        ("AWS_REGION", "us-east-1".to_owned()),
        ("AWS_CONFIG_FILE", "/nonexistent".to_owned()),
        ("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent".to_owned()),
    ]
}

fn with(mut env: Vec<(&'static str, String)>, more: &[(&'static str, &str)]) -> Vec<(String, String)> {
    env.extend(more.iter().map(|(k, v)| (*k, v.to_string())));
    env.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

fn case(what: &str, args: &[&str], stdin: Vec<u8>, env: Vec<(String, String)>, status: i32) -> Case {
    let mut case = Case::new(what, args, stdin, status);
    case.env = env;
    case
}

fn with_role(image: &str, token: &str) -> Vec<u8> {
    let mut request: Value = serde_json::from_slice(&request("v1", image, Some(token))).expect("request");
    request["serviceAccountAnnotations"] = json!({"eks.amazonaws.com/ecr-role-arn": ROLE});
    serde_json::to_vec(&request).expect("json")
}

#[test]
fn ecr_no_key_session_token_or_password_on_stderr() {
    let token = service_account_token(3600);
    let sts = Sts::start(&token);
    let refusing_sts = FakeAws::start(Behaviour::StsEchoesToken);
    let ok = ecr(Behaviour::ThrottleThenSucceed(0));
    let public = ecr(Behaviour::Public);
    let echoes = ecr(Behaviour::EchoesSessionToken);
    let expired = ecr(Behaviour::ExpiredCredentials);
    let dir = tempfile::tempdir().expect("tempdir");
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, &token).expect("write the token file");
    let token_file = token_file.display().to_string();

    let image = format!("{REGISTRY}/team/app");
    let plain = request("v1", &image, None);
    let node_keys = [("AWS_ACCESS_KEY_ID", NODE_KEY), ("AWS_SECRET_ACCESS_KEY", NODE_SECRET)];
    let node_session = [
        ("AWS_ACCESS_KEY_ID", NODE_SESSION_KEY),
        ("AWS_SECRET_ACCESS_KEY", NODE_SESSION_SECRET),
        ("AWS_SESSION_TOKEN", NODE_SESSION_TOKEN),
    ];
    let irsa = [
        ("AWS_WEB_IDENTITY_TOKEN_FILE", token_file.as_str()),
        ("AWS_ROLE_ARN", NODE_ROLE),
    ];
    let cases = vec![
        case(
            "ecr node keys",
            &["ecr"],
            plain.clone(),
            with(aws_env(&ok.url(), &sts.url()), &node_keys),
            0,
        ),
        case(
            "ecr node temporary keys",
            &["ecr"],
            plain.clone(),
            with(aws_env(&ok.url(), &sts.url()), &node_session),
            0,
        ),
        case(
            "ecr public",
            &["ecr"],
            request("v1", "public.ecr.aws/team/app", None),
            with(aws_env(&public.url(), &sts.url()), &node_keys),
            0,
        ),
        case(
            "ecr as the annotated role (STS-issued keys)",
            &["ecr"],
            with_role(&image, &token),
            with(aws_env(&ok.url(), &sts.url()), &[]),
            0,
        ),
        case(
            "ecr IRSA token file (STS-issued keys)",
            &["ecr"],
            plain.clone(),
            with(aws_env(&ok.url(), &sts.url()), &irsa),
            0,
        ),
        case(
            "ecr echoes the STS-issued session token",
            &["ecr"],
            with_role(&image, &token),
            with(aws_env(&echoes.url(), &sts.url()), &[]),
            1,
        ),
        case(
            "ecr echoes the node's session token",
            &["ecr"],
            plain.clone(),
            with(aws_env(&echoes.url(), &sts.url()), &node_session),
            1,
        ),
        case(
            "ecr STS echoes the pod's token",
            &["ecr"],
            with_role(&image, &token),
            with(aws_env(&ok.url(), &refusing_sts.url()), &[]),
            1,
        ),
        case(
            "ecr STS echoes the IRSA token",
            &["ecr"],
            plain.clone(),
            with(aws_env(&ok.url(), &refusing_sts.url()), &irsa),
            1,
        ),
        case(
            "ecr expired credentials",
            &["ecr"],
            plain.clone(),
            with(aws_env(&expired.url(), &sts.url()), &node_keys),
            1,
        ),
    ];
    let secrets: Vec<String> = [
        token.as_str(),
        ISSUED_SECRET,
        ISSUED_SESSION,
        NODE_SECRET,
        NODE_SESSION_SECRET,
        NODE_SESSION_TOKEN,
        // base64 of AWS:<password>, ECR's authorizationToken, as the fake sends it.
        "QVdTOmFmdGVyLXRocm90dGxpbmc=",
        "QVdTOmVjci1wdWJsaWMtcGFzc3dvcmQtNWUxZg==",
    ]
    .map(str::to_owned)
    .to_vec();
    check_cases(&cases, &secrets);
    // The STS-issued keys were used: the role and IRSA cases each called
    // STS at every level and format, and ECR accepted their signatures.
    assert_eq!(*sts.calls.lock().expect("calls"), 3 * 6, "role, IRSA and echo cases");
    assert!(
        ok.seen
            .lock()
            .expect("seen")
            .iter()
            .any(|(_, auth)| auth.contains(ISSUED_KEY))
    );
}

/// `gcp` with GCE_METADATA_HOST and the Google endpoints at the fake.
fn gcp(fake: &GcpFake, what: &str, args: &[&str], stdin: Vec<u8>, status: i32) -> Case {
    let base = fake.base();
    let mut all = vec!["gcp", "--sts-endpoint", &base, "--iam-credentials-endpoint", &base];
    all.extend(args);
    Case::new(what, &all, stdin, status).env(&[("GCE_METADATA_HOST", &fake.host())])
}

const GCP_IMAGE: &str = "us-docker.pkg.dev/demo-project/apps/web";
const IDP: &str = "https://container.googleapis.com/v1/projects/demo-project/locations/us-central1/clusters/demo";
const WORKLOAD_IDENTITY: [&str; 4] = ["--identity-provider", IDP, "--project-id", "demo-project"];

fn gcp_pod(token: &str, annotations: Value) -> Vec<u8> {
    let mut request: Value = serde_json::from_slice(&request("v1", GCP_IMAGE, Some(token))).expect("request");
    request["serviceAccountAnnotations"] = annotations;
    serde_json::to_vec(&request).expect("json")
}

#[test]
fn gcp_no_token_or_password_on_stderr() {
    let documents = GcpFake::with(|s| {
        s["documents"] = json!({"/dockercfg.json": r#"{"https://registry.example.com": {"auth": "dXNlcjpwYXNz"}}"#});
    });
    let url = format!("{}dockercfg.json?sig=s3cr3t-signature-0123", documents.base());
    let fake = GcpFake::with(move |s| s["metadata"]["tree"]["instance/attributes/google-dockercfg-url"] = url.into());
    let broken = GcpFake::with(|s| s["metadata"]["token"] = json!({"status": 500, "body": "internal error"}));
    let token = gcp_subject_token(true);
    let refused = gcp_subject_token(false);
    let opt_in = json!({"iam.gke.io/enable-wi-image-pull": "true"});
    let impersonate = json!({
        "iam.gke.io/enable-wi-image-pull": "true",
        "iam.gke.io/gcp-service-account": "builder@demo-project.iam.gserviceaccount.com",
    });
    let plain = request("v1", GCP_IMAGE, None);
    let cases = vec![
        gcp(&fake, "gcp node token", &[], plain.clone(), 0),
        gcp(&fake, "gcp dockercfg", &["-a", "dockercfg"], plain.clone(), 0),
        gcp(&fake, "gcp dockercfg-url", &["-a", "dockercfg-url"], plain.clone(), 0),
        gcp(
            &fake,
            "gcp workload identity",
            &WORKLOAD_IDENTITY,
            gcp_pod(&token, opt_in.clone()),
            0,
        ),
        gcp(
            &fake,
            "gcp impersonation",
            &WORKLOAD_IDENTITY,
            gcp_pod(&token, impersonate),
            0,
        ),
        gcp(
            &fake,
            "gcp STS refuses",
            &WORKLOAD_IDENTITY,
            gcp_pod(&refused, opt_in),
            1,
        ),
        gcp(&broken, "gcp metadata 500", &[], plain, 1),
    ];
    let secrets: Vec<String> = [
        token.as_str(),
        refused.as_str(),
        // Every Google token the fake issues (metadata, STS, IAM Credentials).
        "ya29.",
        "dXNlcjpwYXNz",
        "user:pass",
        "s3cr3t-signature-0123",
    ]
    .map(str::to_owned)
    .to_vec();
    check_cases(&cases, &secrets);
}

fn acr(fake: &AzureFake, what: &str, config: &str, stdin: Vec<u8>, status: i32) -> Case {
    let config = azure_data(config).display().to_string();
    let base = fake.base();
    let args = [
        "acr",
        &config,
        "--imds-endpoint",
        &base,
        "--authority-host",
        &base,
        "--registry-endpoint",
        &base,
    ];
    Case::new(what, &args, stdin, status)
}

#[test]
fn acr_no_secret_or_token_on_stderr() {
    let image = "demo.azurecr.io/team/app";
    let fake = AzureFake::with(|s| s["acr"]["echo_access_token"] = true.into());
    let refusing = AzureFake::with(|s| {
        s["acr"]["echo_access_token"] = true.into();
        s["acr"]["tenant"] = "another-tenant".into();
    });
    let token = azure_federated_token(true);
    let refused = azure_federated_token(false);
    let pod = |token: &str| {
        let mut request: Value = serde_json::from_slice(&request("v1", image, Some(token))).expect("request");
        request["serviceAccountAnnotations"] = json!({
            "kubernetes.azure.com/acr-client-id": "c2c2c2c2-0000-4000-8000-000000000002",
            "kubernetes.azure.com/acr-tenant-id": "11111111-2222-4333-8444-555555555555",
        });
        serde_json::to_vec(&request).expect("json")
    };
    let plain = request("v1", image, None);
    let cases = vec![
        acr(&fake, "acr managed identity", "managed-identity.json", plain.clone(), 0),
        acr(
            &fake,
            "acr service principal",
            "service-principal.json",
            plain.clone(),
            0,
        ),
        acr(&fake, "acr workload identity", "service-principal.json", pod(&token), 0),
        acr(
            &fake,
            "acr Entra refuses the pod's token",
            "service-principal.json",
            pod(&refused),
            1,
        ),
        acr(
            &refusing,
            "acr registry echoes the Entra token",
            "managed-identity.json",
            plain,
            1,
        ),
    ];
    let secrets: Vec<String> = [
        token.as_str(),
        refused.as_str(),
        "Qx8Q~fake.client-secret_value-0001",
        // The fake's IMDS, Entra ID (secret and assertion flows) tokens.
        "imds-token-",
        "secret-token-",
        "assertion-token-",
    ]
    .map(str::to_owned)
    .to_vec();
    check_cases(&cases, &secrets);
}
