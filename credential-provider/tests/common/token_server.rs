//! A real OAuth 2.0 token endpoint (RFC 8693 token exchange) on loopback,
//! served by axum in a background thread. It checks the request the way a
//! security token service does and records what it received.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Form, Json, Router};

pub type Received = Arc<Mutex<Vec<HashMap<String, String>>>>;

pub struct TokenServer {
    pub addr: SocketAddr,
    pub received: Received,
}

/// The access token `/jwt` hands out: a JWT valid for an hour.
pub fn issued_jwt() -> String {
    super::jwt(&serde_json::json!({"exp": super::now() + 3600, "sub": "robot"}))
}

pub const OPAQUE_TOKEN: &str = "opaque-registry-token-5f2b9c";

impl TokenServer {
    pub fn start() -> Self {
        Self::start_on("127.0.0.1:0")
    }

    /// A server on `bind` (such as `[::1]:0`).
    pub fn start_on(bind: &str) -> Self {
        let received: Received = Arc::default();
        let app = Router::new()
            .route("/jwt", post(jwt_token))
            .route("/opaque", post(opaque_token))
            .route("/no-expiry", post(no_expiry))
            .route("/denied", post(denied))
            .route("/slow", post(slow))
            .route("/garbage", post(garbage))
            .route("/no-token", post(no_token))
            .route("/huge-exp", post(huge_exp))
            .route("/expires-in-string", post(expires_in_string))
            .route("/hostile", post(hostile))
            .route("/huge-error", post(huge_error))
            .route("/huge-body", post(huge_body))
            .with_state(received.clone());
        let listener = std::net::TcpListener::bind(bind).expect("bind loopback");
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
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
        Self { addr, received }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn last_form(&self) -> HashMap<String, String> {
        self.received
            .lock()
            .unwrap()
            .last()
            .cloned()
            .expect("a request reached the server")
    }
}

/// Refuses anything that is not a well-formed token exchange.
/// `Some(rejection)` for a request that is not a token exchange.
fn check(received: &Received, form: &HashMap<String, String>) -> Option<Response> {
    received.lock().unwrap().push(form.clone());
    let grant = form.get("grant_type").map(String::as_str);
    let subject = form.get("subject_token").map(String::as_str).unwrap_or_default();
    if grant != Some("urn:ietf:params:oauth:grant-type:token-exchange") || subject.split('.').count() != 3 {
        let body = serde_json::json!({"error": "invalid_request", "error_description": "not a token exchange"});
        return Some((StatusCode::BAD_REQUEST, Json(body)).into_response());
    }
    None
}

async fn jwt_token(State(r): State<Received>, Form(form): Form<HashMap<String, String>>) -> Response {
    if let Some(e) = check(&r, &form) {
        return e;
    }
    Json(serde_json::json!({
        "access_token": issued_jwt(),
        "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
        "token_type": "Bearer",
        "expires_in": 7200,
    }))
    .into_response()
}

async fn opaque_token(State(r): State<Received>, Form(form): Form<HashMap<String, String>>) -> Response {
    if let Some(e) = check(&r, &form) {
        return e;
    }
    Json(serde_json::json!({"access_token": OPAQUE_TOKEN, "token_type": "Bearer", "expires_in": 600})).into_response()
}

async fn no_expiry(State(r): State<Received>, Form(form): Form<HashMap<String, String>>) -> Response {
    if let Some(e) = check(&r, &form) {
        return e;
    }
    Json(serde_json::json!({"access_token": OPAQUE_TOKEN, "token_type": "Bearer"})).into_response()
}

/// Echoes the subject token in its description, as careless servers do.
async fn denied(State(r): State<Received>, Form(form): Form<HashMap<String, String>>) -> Response {
    let _ = check(&r, &form);
    let subject = form.get("subject_token").cloned().unwrap_or_default();
    let body = serde_json::json!({
        "error": "invalid_grant",
        "error_description": format!("subject token {subject} is not trusted by this issuer"),
    });
    (StatusCode::BAD_REQUEST, Json(body)).into_response()
}

async fn slow(State(r): State<Received>, Form(form): Form<HashMap<String, String>>) -> Response {
    let _ = check(&r, &form);
    tokio::time::sleep(Duration::from_secs(10)).await;
    Json(serde_json::json!({"access_token": OPAQUE_TOKEN})).into_response()
}

async fn garbage(State(r): State<Received>, Form(form): Form<HashMap<String, String>>) -> Response {
    let _ = check(&r, &form);
    (StatusCode::OK, "<html>login page</html>").into_response()
}

async fn no_token(State(r): State<Received>, Form(form): Form<HashMap<String, String>>) -> Response {
    let _ = check(&r, &form);
    Json(serde_json::json!({"token_type": "Bearer", "expires_in": 60})).into_response()
}

/// An access token whose `exp` does not fit in a signed 64-bit count of seconds.
async fn huge_exp(State(r): State<Received>, Form(form): Form<HashMap<String, String>>) -> Response {
    let _ = check(&r, &form);
    let token = super::jwt(&serde_json::json!({"exp": 1u64 << 63, "sub": "robot"}));
    Json(serde_json::json!({"access_token": token, "expires_in": 600})).into_response()
}

/// `expires_in` as a string, as some servers send it.
async fn expires_in_string(State(r): State<Received>, Form(form): Form<HashMap<String, String>>) -> Response {
    if let Some(e) = check(&r, &form) {
        return e;
    }
    Json(serde_json::json!({"access_token": OPAQUE_TOKEN, "expires_in": "3600"})).into_response()
}

/// A refusal written to spoil a log: a code with a newline and ANSI escapes,
/// and a description that echoes the subject token cut short.
async fn hostile(State(r): State<Received>, Form(form): Form<HashMap<String, String>>) -> Response {
    let _ = check(&r, &form);
    let subject = form.get("subject_token").cloned().unwrap_or_default();
    let cut = &subject[..subject.len() - 3];
    let body = serde_json::json!({
        "error": "invalid_grant\nE1130 12:00:00 fake kubelet line \u{1b}[31mred",
        "error_description": format!("token {cut}... rejected"),
    });
    (StatusCode::BAD_REQUEST, Json(body)).into_response()
}

/// A 5 MB `error` code.
async fn huge_error(State(r): State<Received>, Form(form): Form<HashMap<String, String>>) -> Response {
    let _ = check(&r, &form);
    let body = serde_json::json!({"error": "x".repeat(5 << 20)});
    (StatusCode::BAD_REQUEST, Json(body)).into_response()
}

/// A token response of 64 MB: more than any token endpoint sends.
async fn huge_body(State(r): State<Received>, Form(form): Form<HashMap<String, String>>) -> Response {
    let _ = check(&r, &form);
    let body = format!(r#"{{"access_token":"{}"}}"#, "a".repeat(64 << 20));
    (StatusCode::OK, body).into_response()
}
