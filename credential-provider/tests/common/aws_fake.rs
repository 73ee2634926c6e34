//! A fake ECR / ECR Public JSON API on loopback, written from AWS's API
//! reference, for what moto does not serve (ECR Public) and for failure
//! modes moto cannot produce (throttling, expired credentials, 5xx).
//!
//! It verifies each call as AWS does, with its own SigV4 implementation
//! (hmac + sha2, written from AWS's "Signature Version 4" reference; the
//! product signs with the aws-sigv4 crate): it recomputes the signature from
//! the secret of the access key the request names, and requires the session
//! token of credentials that have one (`X-Amz-Security-Token`). An unknown
//! key or a wrong or missing session token is answered 403
//! `UnrecognizedClientException`, a wrong signature 403
//! `InvalidSignatureException`, a date more than 15 minutes off 403
//! `InvalidSignatureException` (Signature expired).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use base64::Engine;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Behaviour {
    /// ECR Public's GetAuthorizationToken, valid for 12 hours.
    Public,
    /// ThrottlingException for the first N calls, then a token.
    ThrottleThenSucceed(usize),
    /// ExpiredTokenException on every call.
    ExpiredCredentials,
    /// A token whose `expiresAt` is far beyond any representable time.
    HugeExpiry,
    /// An error whose code and message carry a newline, ANSI escapes and a megabyte.
    Hostile,
    /// STS refuses the web identity token, echoing it cut short in the message.
    StsEchoesToken,
    /// ECR refuses the call, echoing its session token (`X-Amz-Security-Token`).
    EchoesSessionToken,
    /// HTTP 500 `ServerException` for the first N calls, then a token.
    ServerErrorThenSucceed(usize),
}

/// Credentials the fake knows: AWS's account records.
#[derive(Clone, Debug)]
pub struct Known {
    pub access_key_id: String,
    pub secret: String,
    pub session_token: Option<String>,
}

impl Known {
    pub fn new(access_key_id: &str, secret: &str, session_token: Option<&str>) -> Self {
        Self {
            access_key_id: access_key_id.to_owned(),
            secret: secret.to_owned(),
            session_token: session_token.map(str::to_owned),
        }
    }
}

/// The keys the tests' environments use: the node's static key, and the
/// temporary credentials the container endpoint and IMDS fakes hand out.
pub fn default_known() -> Vec<Known> {
    vec![
        Known::new("AKIDNODE", "node-secret-key", None),
        Known::new("AKIDCONTAINER", "container-secret", Some("container-session")),
        Known::new("AKIDINSTANCE", "instance-secret", Some("instance-session")),
    ]
}

#[derive(Clone)]
struct FakeState {
    behaviour: Behaviour,
    calls: Arc<AtomicUsize>,
    seen: Arc<Mutex<Vec<(String, String)>>>,
    known: Arc<Mutex<Vec<Known>>>,
    refused: Arc<Mutex<Vec<String>>>,
}

pub struct FakeAws {
    pub port: u16,
    pub calls: Arc<AtomicUsize>,
    /// (X-Amz-Target, Authorization) of every call.
    pub seen: Arc<Mutex<Vec<(String, String)>>>,
    /// The keys it accepts ([`default_known`] unless changed).
    pub known: Arc<Mutex<Vec<Known>>>,
    /// The error code of every call refused for its signature or token.
    pub refused: Arc<Mutex<Vec<String>>>,
}

pub const PUBLIC_PASSWORD: &str = "ecr-public-password-5e1f";

impl FakeAws {
    pub fn start(behaviour: Behaviour) -> Self {
        let state = FakeState {
            behaviour,
            calls: Arc::default(),
            seen: Arc::default(),
            known: Arc::new(Mutex::new(default_known())),
            refused: Arc::default(),
        };
        let (calls, seen, known, refused) = (
            state.calls.clone(),
            state.seen.clone(),
            state.known.clone(),
            state.refused.clone(),
        );
        let app = Router::new().route("/", post(handle)).with_state(state);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                axum::serve(listener, app).await.unwrap();
            });
        });
        Self {
            port,
            calls,
            seen,
            known,
            refused,
        }
    }

    /// The codes of the calls refused for their signature or token.
    pub fn refused(&self) -> Vec<String> {
        self.refused.lock().expect("refused lock").clone()
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

fn error(status: StatusCode, code: &str, message: &str) -> Response {
    (status, Json(serde_json::json!({"__type": code, "message": message}))).into_response()
}

async fn handle(
    State(state): State<FakeState>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: String,
) -> Response {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let target = header("x-amz-target");
    let authorization = header("authorization");
    state.seen.lock().unwrap().push((target.clone(), authorization.clone()));
    let call = state.calls.fetch_add(1, Ordering::SeqCst);
    if state.behaviour == Behaviour::StsEchoesToken {
        let token = url::form_urlencoded::parse(body.as_bytes())
            .find(|(k, _)| k == "WebIdentityToken")
            .map(|(_, v)| v.into_owned())
            .unwrap_or_default();
        let cut = &token[..token.len().saturating_sub(3)];
        let xml = format!(
            "<ErrorResponse><Error><Code>InvalidIdentityToken</Code><Message>Token {cut} is not valid</Message></Error></ErrorResponse>"
        );
        return (StatusCode::BAD_REQUEST, xml).into_response();
    }
    if state.behaviour == Behaviour::EchoesSessionToken {
        let message = format!("The security token {} is invalid", header("x-amz-security-token"));
        return error(StatusCode::FORBIDDEN, "UnrecognizedClientException", &message);
    }
    if !authorization.starts_with("AWS4-HMAC-SHA256 Credential=") {
        return error(
            StatusCode::FORBIDDEN,
            "MissingAuthenticationTokenException",
            "unsigned request",
        );
    }
    let known = state.known.lock().expect("known lock").clone();
    if let Err((code, message)) = sigv4::verify(&method, &uri, &headers, body.as_bytes(), &known) {
        state.refused.lock().expect("refused lock").push(code.to_owned());
        return error(StatusCode::FORBIDDEN, code, &message);
    }
    let expires = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 12 * 3600) as f64;
    match state.behaviour {
        Behaviour::Public => {
            if target != "SpencerFrontendService.GetAuthorizationToken"
                || !authorization.contains("/us-east-1/ecr-public/aws4_request")
            {
                return error(
                    StatusCode::BAD_REQUEST,
                    "UnknownOperationException",
                    "wrong target or scope",
                );
            }
            let token = base64::engine::general_purpose::STANDARD.encode(format!("AWS:{PUBLIC_PASSWORD}"));
            Json(serde_json::json!({"authorizationData": {"authorizationToken": token, "expiresAt": expires}}))
                .into_response()
        }
        Behaviour::ThrottleThenSucceed(n) if call < n => error(
            StatusCode::BAD_REQUEST,
            "com.amazonaws.ecr#ThrottlingException",
            "Rate exceeded",
        ),
        Behaviour::ServerErrorThenSucceed(n) if call < n => {
            error(StatusCode::INTERNAL_SERVER_ERROR, "ServerException", "internal failure")
        }
        Behaviour::ThrottleThenSucceed(_) | Behaviour::ServerErrorThenSucceed(_) => {
            let token = base64::engine::general_purpose::STANDARD.encode("AWS:after-throttling");
            Json(serde_json::json!({"authorizationData": [{"authorizationToken": token, "expiresAt": expires, "proxyEndpoint": "https://x"}]}))
                .into_response()
        }
        Behaviour::HugeExpiry => {
            let token = base64::engine::general_purpose::STANDARD.encode("AWS:huge-expiry");
            Json(serde_json::json!({"authorizationData": [{"authorizationToken": token, "expiresAt": 1e300}]}))
                .into_response()
        }
        Behaviour::Hostile => error(
            StatusCode::BAD_REQUEST,
            "AccessDenied\nE1130 forged \u{1b}[31m",
            &format!("denied\n{}", "y".repeat(1 << 20)),
        ),
        Behaviour::StsEchoesToken | Behaviour::EchoesSessionToken => unreachable!("answered above"),
        Behaviour::ExpiredCredentials => error(
            StatusCode::BAD_REQUEST,
            "ExpiredTokenException",
            "The security token included in the request is expired",
        ),
    }
}

/// SigV4 as AWS's "Signature Version 4 signing process" reference describes
/// it, written here independently of the product's signer.
pub mod sigv4 {
    use axum::http::{HeaderMap, Method, Uri};
    use hmac::{Hmac, KeyInit, Mac};
    use sha2::{Digest, Sha256};

    use super::Known;

    fn hmac(key: &[u8], data: &str) -> Vec<u8> {
        let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key");
        mac.update(data.as_bytes());
        mac.finalize().into_bytes().to_vec()
    }

    fn sha256_hex(data: &[u8]) -> String {
        hex::encode(Sha256::digest(data))
    }

    /// The signature of `string_to_sign` with the key derived from `secret`.
    pub fn signature(secret: &str, date: &str, region: &str, service: &str, string_to_sign: &str) -> String {
        let k_date = hmac(format!("AWS4{secret}").as_bytes(), date);
        let k_region = hmac(&k_date, region);
        let k_service = hmac(&k_region, service);
        let k_signing = hmac(&k_service, "aws4_request");
        hex::encode(hmac(&k_signing, string_to_sign))
    }

    /// `Ok` when the request is signed by a known key, with its session
    /// token if it has one; else AWS's error code and message.
    pub fn verify(
        method: &Method,
        uri: &Uri,
        headers: &HeaderMap,
        body: &[u8],
        known: &[Known],
    ) -> Result<(), (&'static str, String)> {
        let invalid = |message: &str| ("InvalidSignatureException", message.to_owned());
        let header = |name: &str| {
            let values: Vec<String> = headers
                .get_all(name)
                .iter()
                .map(|v| {
                    let text = String::from_utf8_lossy(v.as_bytes());
                    text.split_whitespace().collect::<Vec<_>>().join(" ")
                })
                .collect();
            (!values.is_empty()).then(|| values.join(","))
        };
        let authorization = header("authorization").unwrap_or_default();
        let fields = authorization
            .strip_prefix("AWS4-HMAC-SHA256 ")
            .ok_or_else(|| invalid("not AWS4-HMAC-SHA256"))?;
        let field = |name: &str| {
            fields
                .split(',')
                .map(str::trim)
                .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
                .map(str::to_owned)
                .ok_or_else(|| invalid(&format!("no {name} in Authorization")))
        };
        let (credential, signed_headers, given) = (field("Credential")?, field("SignedHeaders")?, field("Signature")?);
        let scope: Vec<&str> = credential.split('/').collect();
        let [access_key_id, date, region, service, "aws4_request"] = scope.as_slice() else {
            return Err(invalid("malformed credential scope"));
        };
        let Some(key) = known.iter().find(|k| k.access_key_id == *access_key_id) else {
            return Err((
                "UnrecognizedClientException",
                "The security token included in the request is invalid.".into(),
            ));
        };
        if header("x-amz-security-token") != key.session_token {
            return Err((
                "UnrecognizedClientException",
                "The security token included in the request is invalid.".into(),
            ));
        }
        let amz_date = header("x-amz-date").ok_or_else(|| invalid("no X-Amz-Date"))?;
        if !amz_date.starts_with(date) {
            return Err(invalid("X-Amz-Date is not the scope's date"));
        }
        let names: Vec<&str> = signed_headers.split(';').collect();
        if !names.contains(&"host") || !names.contains(&"x-amz-date") {
            return Err(invalid("host and x-amz-date must be signed"));
        }
        if names.windows(2).any(|w| w[0] >= w[1]) {
            return Err(invalid("SignedHeaders are not sorted"));
        }
        let mut canonical_headers = String::new();
        for name in &names {
            let value = header(name).ok_or_else(|| invalid(&format!("signed header {name} is missing")))?;
            canonical_headers.push_str(&format!("{name}:{value}\n"));
        }
        let payload_hash = sha256_hex(body);
        if let Some(claimed) = header("x-amz-content-sha256")
            && claimed != payload_hash
        {
            return Err(invalid("X-Amz-Content-Sha256 is not the body's hash"));
        }
        let mut query: Vec<&str> = uri
            .query()
            .unwrap_or_default()
            .split('&')
            .filter(|p| !p.is_empty())
            .collect();
        query.sort_unstable();
        let canonical_request = format!(
            "{method}\n{}\n{}\n{canonical_headers}\n{signed_headers}\n{payload_hash}",
            uri.path(),
            query.join("&")
        );
        let string_to_sign = format!(
            "AWS4-HMAC-SHA256\n{amz_date}\n{date}/{region}/{service}/aws4_request\n{}",
            sha256_hex(canonical_request.as_bytes())
        );
        if signature(&key.secret, date, region, service, &string_to_sign) != given {
            return Err(invalid(
                "The request signature we calculated does not match the signature you provided.",
            ));
        }
        let signed_at = parse_amz_date(&amz_date).ok_or_else(|| invalid("X-Amz-Date is not a date"))?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_secs() as i64;
        if (now - signed_at).abs() > 15 * 60 {
            return Err(invalid("Signature expired"));
        }
        Ok(())
    }

    /// `20261130T210338Z` as seconds since the epoch.
    pub fn parse_amz_date(text: &str) -> Option<i64> {
        let digits = |range: std::ops::Range<usize>| text.get(range)?.parse::<i64>().ok();
        if text.len() != 16 || &text[8..9] != "T" || !text.ends_with('Z') {
            return None;
        }
        let (y, m, d) = (digits(0..4)?, digits(4..6)?, digits(6..8)?);
        let (hh, mm, ss) = (digits(9..11)?, digits(11..13)?, digits(13..15)?);
        // Days from civil (Howard Hinnant's algorithm).
        let y = if m <= 2 { y - 1 } else { y };
        let era = y.div_euclid(400);
        let yoe = y - era * 400;
        let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        let days = era * 146_097 + doe - 719_468;
        Some(days * 86_400 + hh * 3600 + mm * 60 + ss)
    }
}

/// An environment that reaches AWS only at `url` (ECR and, unless the test
/// adds `AWS_ENDPOINT_URL_STS`, STS), never the machine's own AWS set-up.
pub fn isolated_env(url: &str) -> Vec<(&'static str, String)> {
    vec![
        ("AWS_ENDPOINT_URL", url.to_owned()),
        ("AWS_EC2_METADATA_DISABLED", "true".to_owned()),
        ("AWS_REGION", "us-east-1".to_owned()),
        ("AWS_CONFIG_FILE", "/nonexistent".to_owned()),
        ("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent".to_owned()),
    ]
}

/// `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and, for temporary
/// credentials, `AWS_SESSION_TOKEN`.
pub fn key_env(keys: &cluster_harness::AwsKeys) -> Vec<(&'static str, String)> {
    let mut env = vec![
        ("AWS_ACCESS_KEY_ID", keys.access_key_id.clone()),
        ("AWS_SECRET_ACCESS_KEY", keys.secret_access_key.clone()),
    ];
    if let Some(token) = &keys.session_token {
        env.push(("AWS_SESSION_TOKEN", token.clone()));
    }
    env
}

/// moto's ECR token for its account, as the plugin hands it to kubelet.
pub const MOTO_PASSWORD: &str = "123456789012-auth-token";
