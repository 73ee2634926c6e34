//! A real OAuth 2.0 token endpoint (RFC 8693 token exchange) on loopback,
//! served by axum in a background thread, written from RFC 8693 §2.1-2.3 and
//! RFC 6749 §5. It records what it received and checks every request the
//! way a security token service does, in EVERY mode, its failure modes
//! included: a request that is not a well-formed token exchange (or, with
//! [`TokenServer::expect_form`], not exactly the expected one) is refused with
//! `400 invalid_request` ("fake token endpoint: …") before the mode's own
//! answer, so a broken request cannot pass a test of an error, a bad answer
//! or a timeout by failing for another reason.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Form, Json, Router};

pub type Received = Arc<Mutex<Vec<HashMap<String, String>>>>;

pub const GRANT_TYPE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
pub const JWT_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:jwt";

/// The request parameters RFC 8693 §2.1 defines (`client_id` from RFC 6749
/// §2.3.1 / §3.2.1 for a public client). Anything else is refused.
const KNOWN_PARAMETERS: [&str; 10] = [
    "grant_type",
    "resource",
    "audience",
    "scope",
    "requested_token_type",
    "subject_token",
    "subject_token_type",
    "actor_token",
    "actor_token_type",
    "client_id",
];

/// RFC 8693 §2.1 lets `resource` and `audience` repeat; no other parameter may
/// (RFC 6749 §3.2).
const REPEATABLE: [&str; 2] = ["resource", "audience"];

#[derive(Default)]
struct Shared {
    received: Received,
    /// `METHOD /path` of every request, whatever its route, form or method.
    hits: Mutex<Vec<String>>,
    /// When set, the form must be exactly this (sorted `(name, value)` pairs).
    expected: Mutex<Option<Vec<(String, String)>>>,
    /// Where `/redirect-302` and `/redirect-307` send the client.
    redirect_to: Mutex<Option<String>>,
}

type St = Arc<Shared>;

pub struct TokenServer {
    pub addr: SocketAddr,
    pub received: Received,
    shared: St,
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
        let shared: St = Arc::default();
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
            .route("/server-error", post(server_error))
            .route("/redirect-302", post(redirect_302))
            .route("/redirect-307", post(redirect_307))
            .fallback(not_found)
            .layer(middleware::from_fn_with_state(shared.clone(), record_hit))
            .with_state(shared.clone());
        let listener = std::net::TcpListener::bind(bind).expect("bind loopback");
        listener.set_nonblocking(true).expect("non-blocking listener");
        let addr = listener.local_addr().expect("the listener's address");
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a tokio runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("a tokio listener");
                axum::serve(listener, app).await.expect("serve");
            });
        });
        Self {
            addr,
            received: shared.received.clone(),
            shared,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn last_form(&self) -> HashMap<String, String> {
        self.received
            .lock()
            .expect("the server's record")
            .last()
            .cloned()
            .expect("a request reached the server")
    }

    /// From now on every request must carry exactly these form parameters
    /// (and no other), in every mode; anything else is `400 invalid_request`
    /// naming the difference.
    pub fn expect_form(&self, form: &[(&str, &str)]) {
        let mut pairs: Vec<(String, String)> = form.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        pairs.sort();
        *self.shared.expected.lock().expect("expected form") = Some(pairs);
    }

    /// Where `/redirect-302` and `/redirect-307` point (`Location`).
    pub fn redirect_to(&self, url: &str) {
        *self.shared.redirect_to.lock().expect("redirect target") = Some(url.to_owned());
    }

    /// `METHOD /path` of every request this server saw, valid or not.
    pub fn hits(&self) -> Vec<String> {
        self.shared.hits.lock().expect("hits").clone()
    }
}

async fn record_hit(State(shared): State<St>, request: Request, next: Next) -> Response {
    let hit = format!("{} {}", request.method(), request.uri().path());
    shared.hits.lock().expect("hits").push(hit);
    next.run(request).await
}

fn invalid_request(problem: String) -> Response {
    let body = serde_json::json!({
        "error": "invalid_request",
        "error_description": format!("fake token endpoint: {problem}"),
    });
    (StatusCode::BAD_REQUEST, Json(body)).into_response()
}

/// Records the form, then `Some(rejection)` for a request that is not a
/// well-formed token exchange, or not the one [`TokenServer::expect_form`]
/// named.
fn check(shared: &Shared, pairs: &[(String, String)]) -> Option<Response> {
    let form: HashMap<String, String> = pairs.iter().cloned().collect();
    shared.received.lock().expect("the server's record").push(form.clone());
    problem(shared, pairs, &form).map(invalid_request)
}

fn problem(shared: &Shared, pairs: &[(String, String)], form: &HashMap<String, String>) -> Option<String> {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for (name, _) in pairs {
        if !KNOWN_PARAMETERS.contains(&name.as_str()) {
            return Some(format!("unknown parameter {name:?}"));
        }
        *counts.entry(name).or_default() += 1;
    }
    if let Some((name, _)) = counts.iter().find(|(n, c)| **c > 1 && !REPEATABLE.contains(n)) {
        return Some(format!("parameter {name:?} given more than once"));
    }
    if form.get("grant_type").map(String::as_str) != Some(GRANT_TYPE) {
        return Some(format!(
            "grant_type is {:?}, not token exchange",
            form.get("grant_type")
        ));
    }
    let subject = form.get("subject_token").map(String::as_str).unwrap_or_default();
    if subject.is_empty() {
        return Some("no subject_token".into());
    }
    if form.get("subject_token_type").is_none_or(String::is_empty) {
        return Some("no subject_token_type".into());
    }
    if form.contains_key("actor_token") != form.contains_key("actor_token_type") {
        return Some("actor_token and actor_token_type go together".into());
    }
    for (name, value) in form {
        if value.is_empty() {
            return Some(format!("{name} is empty"));
        }
    }
    match &*shared.expected.lock().expect("expected form") {
        Some(expected) => {
            let mut got = pairs.to_vec();
            got.sort();
            if &got != expected {
                let names = |p: &[(String, String)]| p.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
                // Values are not echoed: the subject token is among them.
                return Some(format!(
                    "the form differs from the expected one (parameters {:?}, expected {:?})",
                    names(&got),
                    names(expected)
                ));
            }
        }
        None => {
            // Without an exact form: the JWT type and a JWT subject token.
            if form["subject_token_type"] != JWT_TOKEN_TYPE {
                return Some(format!("subject_token_type is {:?}", form["subject_token_type"]));
            }
            if subject.split('.').count() != 3 {
                return Some("subject_token is not a JWT".into());
            }
        }
    }
    None
}

type Pairs = Form<Vec<(String, String)>>;

/// Returns the fake's refusal from the handler if the request is not valid.
macro_rules! validated {
    ($shared:expr, $form:expr) => {
        if let Some(rejection) = check(&$shared, &$form.0) {
            return rejection;
        }
    };
}

fn subject_of(form: &Pairs) -> String {
    form.0
        .iter()
        .find(|(k, _)| k == "subject_token")
        .map(|(_, v)| v.clone())
        .unwrap_or_default()
}

async fn jwt_token(State(s): State<St>, form: Pairs) -> Response {
    validated!(s, form);
    Json(serde_json::json!({
        "access_token": issued_jwt(),
        "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
        "token_type": "Bearer",
        "expires_in": 7200,
    }))
    .into_response()
}

async fn opaque_token(State(s): State<St>, form: Pairs) -> Response {
    validated!(s, form);
    Json(serde_json::json!({"access_token": OPAQUE_TOKEN, "token_type": "Bearer", "expires_in": 600})).into_response()
}

async fn no_expiry(State(s): State<St>, form: Pairs) -> Response {
    validated!(s, form);
    Json(serde_json::json!({"access_token": OPAQUE_TOKEN, "token_type": "Bearer"})).into_response()
}

/// Echoes the subject token in its description, as careless servers do.
async fn denied(State(s): State<St>, form: Pairs) -> Response {
    validated!(s, form);
    let body = serde_json::json!({
        "error": "invalid_grant",
        "error_description": format!("subject token {} is not trusted by this issuer", subject_of(&form)),
    });
    (StatusCode::BAD_REQUEST, Json(body)).into_response()
}

async fn slow(State(s): State<St>, form: Pairs) -> Response {
    validated!(s, form);
    tokio::time::sleep(Duration::from_secs(10)).await;
    Json(serde_json::json!({"access_token": OPAQUE_TOKEN})).into_response()
}

async fn garbage(State(s): State<St>, form: Pairs) -> Response {
    validated!(s, form);
    (StatusCode::OK, "<html>login page</html>").into_response()
}

async fn no_token(State(s): State<St>, form: Pairs) -> Response {
    validated!(s, form);
    Json(serde_json::json!({"token_type": "Bearer", "expires_in": 60})).into_response()
}

/// An access token whose `exp` does not fit in a signed 64-bit count of seconds.
async fn huge_exp(State(s): State<St>, form: Pairs) -> Response {
    validated!(s, form);
    let token = super::jwt(&serde_json::json!({"exp": 1u64 << 63, "sub": "robot"}));
    Json(serde_json::json!({"access_token": token, "expires_in": 600})).into_response()
}

/// `expires_in` as a string, as some servers send it.
async fn expires_in_string(State(s): State<St>, form: Pairs) -> Response {
    validated!(s, form);
    Json(serde_json::json!({"access_token": OPAQUE_TOKEN, "expires_in": "3600"})).into_response()
}

/// A refusal written to spoil a log: a code with a newline and ANSI escapes,
/// and a description that echoes the subject token cut short.
async fn hostile(State(s): State<St>, form: Pairs) -> Response {
    validated!(s, form);
    let subject = subject_of(&form);
    let cut = &subject[..subject.len().saturating_sub(3)];
    let body = serde_json::json!({
        "error": "invalid_grant\nE1130 12:00:00 fake kubelet line \u{1b}[31mred",
        "error_description": format!("token {cut}... rejected"),
    });
    (StatusCode::BAD_REQUEST, Json(body)).into_response()
}

/// A 5 MB `error` code.
async fn huge_error(State(s): State<St>, form: Pairs) -> Response {
    validated!(s, form);
    let body = serde_json::json!({"error": "x".repeat(5 << 20)});
    (StatusCode::BAD_REQUEST, Json(body)).into_response()
}

/// A token response of 64 MB: more than any token endpoint sends.
async fn huge_body(State(s): State<St>, form: Pairs) -> Response {
    validated!(s, form);
    let body = format!(r#"{{"access_token":"{}"}}"#, "a".repeat(64 << 20));
    (StatusCode::OK, body).into_response()
}

/// A 503 with a non-OAuth body, as a load balancer in front of the STS sends.
async fn server_error(State(s): State<St>, form: Pairs) -> Response {
    validated!(s, form);
    (StatusCode::SERVICE_UNAVAILABLE, "upstream connect error").into_response()
}

fn redirect(shared: &Shared, status: StatusCode) -> Response {
    let target = shared.redirect_to.lock().expect("redirect target").clone();
    let target = target.expect("TokenServer::redirect_to set before a redirect");
    (status, [(header::LOCATION, target)]).into_response()
}

async fn redirect_302(State(s): State<St>, form: Pairs) -> Response {
    validated!(s, form);
    redirect(&s, StatusCode::FOUND)
}

async fn redirect_307(State(s): State<St>, form: Pairs) -> Response {
    validated!(s, form);
    redirect(&s, StatusCode::TEMPORARY_REDIRECT)
}

/// Any other path: a token exchange still has to be well formed to get the 404.
async fn not_found(State(s): State<St>, form: Pairs) -> Response {
    validated!(s, form);
    (StatusCode::NOT_FOUND, "no such endpoint").into_response()
}
