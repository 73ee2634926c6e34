//! A fake ECR / ECR Public JSON API on loopback, written from AWS's API
//! reference, for what moto does not serve (ECR Public) and for failure
//! modes moto cannot produce (throttling, expired credentials). It checks
//! that each call is SigV4-signed for the right service and region.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
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
}

#[derive(Clone)]
struct FakeState {
    behaviour: Behaviour,
    calls: Arc<AtomicUsize>,
    seen: Arc<Mutex<Vec<(String, String)>>>,
}

pub struct FakeAws {
    pub port: u16,
    pub calls: Arc<AtomicUsize>,
    /// (X-Amz-Target, Authorization) of every call.
    pub seen: Arc<Mutex<Vec<(String, String)>>>,
}

pub const PUBLIC_PASSWORD: &str = "ecr-public-password-5e1f";

impl FakeAws {
    pub fn start(behaviour: Behaviour) -> Self {
        let state = FakeState {
            behaviour,
            calls: Arc::default(),
            seen: Arc::default(),
        };
        let (calls, seen) = (state.calls.clone(), state.seen.clone());
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
        Self { port, calls, seen }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

fn error(status: StatusCode, code: &str, message: &str) -> Response {
    (status, Json(serde_json::json!({"__type": code, "message": message}))).into_response()
}

async fn handle(State(state): State<FakeState>, headers: HeaderMap, body: String) -> Response {
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
        Behaviour::ThrottleThenSucceed(_) => {
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
