//! An RFC 8693 token endpoint for the plugin's `token-exchange` backend,
//! written from RFC 8693 §2 and RFC 6749 §5 (plain HTTP on loopback, which
//! the plugin allows).
//!
//! ```text
//! let sts = TokenExchange::start(client, TokenExchangeConfig { .. }, Bind::Host)?;      // 127.0.0.1:PORT
//! let sts = TokenExchange::start(client, config, Bind::Netns { netns, port: 9443 })?;    // the node's 127.0.0.1:9443
//! sts.stop().await;   // new connections refused, open ones dropped
//! sts.start_again()?; // the same port
//! ```
//!
//! It accepts `POST <path>`, an `application/x-www-form-urlencoded` body of
//! at most 64 KiB, each field once: `grant_type` token-exchange,
//! `subject_token_type` jwt, `audience` [`TokenExchangeConfig::audience`], and
//! a `subject_token` that kube-apiserver's TokenReview authenticates for
//! [`TokenExchangeConfig::subject_audience`] as a service account. It then
//! issues what [`Issue`] says: a TokenRequest of that service account, or one
//! fixed access token. Anything else is a 400 OAuth error: `invalid_request`,
//! `unsupported_grant_type`, `invalid_target` (another audience),
//! `invalid_grant` (a subject token not valid for the subject audience, or not
//! a service account's), `server_error` (the API call failed). Bounded: 64 KiB
//! of body, 30 s per connection, 10 s per API call. Answers carry
//! `Cache-Control: no-store` (RFC 6749 §5.1).

use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};
use nix::sched::{CloneFlags, setns};
use serde_json::{Value, json};
use tokio::task::JoinSet;

pub const GRANT_TYPE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
pub const JWT_TYPE: &str = "urn:ietf:params:oauth:token-type:jwt";
const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";
const MAX_BODY: usize = 64 * 1024;
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(30);
const API_TIMEOUT: Duration = Duration::from_secs(10);
/// The issued tokens' lifetime (`expires_in`, the TokenRequest's expiration).
const EXPIRES_IN: i64 = 600;

/// What the endpoint hands out for an accepted subject token.
#[derive(Clone, Debug)]
pub enum Issue {
    /// A TokenRequest of the subject's service account for this audience
    /// (`issued_token_type` jwt, `token_type` N_A).
    ServiceAccountToken { audience: String },
    /// This access token, whoever the subject (`token_type` Bearer).
    Fixed(String),
}

#[derive(Clone, Debug)]
pub struct TokenExchangeConfig {
    /// The URL path of the endpoint (`/oauth2/token`, `/token`).
    pub path: String,
    /// The audience the subject token must be valid for (the plugin
    /// config's `serviceAccountTokenAudience`).
    pub subject_audience: String,
    /// The one `audience` parameter the endpoint issues tokens for.
    pub audience: String,
    pub issue: Issue,
}

/// Where the endpoint listens.
#[derive(Clone, Debug)]
pub enum Bind {
    /// The host's 127.0.0.1, a free port (kept by [`TokenExchange::start_again`]).
    Host,
    /// 127.0.0.1:`port` in the network namespace at `netns`
    /// (`/run/netns/NAME`): a socket stays in the netns it was made in, so a
    /// short-lived thread enters it to bind. Stopped, the node's connections
    /// are refused.
    Netns { netns: PathBuf, port: u16 },
}

/// One exchange the endpoint made.
#[derive(Clone, Debug)]
pub struct Exchange {
    /// The service account's username (`system:serviceaccount:NS:NAME`).
    pub subject: String,
    pub subject_token: String,
    pub access_token: String,
}

struct State {
    client: kube::Client,
    config: TokenExchangeConfig,
    exchanges: Mutex<Vec<Exchange>>,
    log: Mutex<Vec<String>>,
}

/// The endpoint of the module documentation; dropped, it stops.
pub struct TokenExchange {
    bind: Bind,
    port: u16,
    state: Arc<State>,
    server: Option<(tokio::sync::oneshot::Sender<()>, tokio::task::JoinHandle<()>)>,
}

impl TokenExchange {
    /// Binds and serves (within a tokio runtime).
    pub fn start(client: kube::Client, config: TokenExchangeConfig, bind: Bind) -> Result<TokenExchange> {
        let mut endpoint = TokenExchange {
            port: match &bind {
                Bind::Host => 0,
                Bind::Netns { port, .. } => *port,
            },
            bind,
            state: Arc::new(State {
                client,
                config,
                exchanges: Mutex::new(Vec::new()),
                log: Mutex::new(Vec::new()),
            }),
            server: None,
        };
        endpoint.start_again()?;
        Ok(endpoint)
    }

    /// Binds the same port again and serves.
    pub fn start_again(&mut self) -> Result<()> {
        anyhow::ensure!(self.server.is_none(), "the token endpoint runs already");
        let listener = match &self.bind {
            Bind::Host => std::net::TcpListener::bind(("127.0.0.1", self.port))?,
            Bind::Netns { netns, port } => {
                let ns = std::fs::File::open(netns).with_context(|| format!("opening {}", netns.display()))?;
                let port = *port;
                std::thread::spawn(move || -> Result<std::net::TcpListener> {
                    setns(&ns, CloneFlags::CLONE_NEWNET).context("setns into the node's netns")?;
                    Ok(std::net::TcpListener::bind(("127.0.0.1", port))?)
                })
                .join()
                .map_err(|_| anyhow::anyhow!("the bind thread panicked"))??
            }
        };
        self.port = listener.local_addr()?.port();
        listener.set_nonblocking(true)?;
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(serve(listener, self.state.clone(), stopped));
        self.server = Some((stop, task));
        Ok(())
    }

    /// Closes the listener and every connection: new ones are refused.
    pub async fn stop(&mut self) {
        if let Some((stop, task)) = self.server.take() {
            let _ = stop.send(());
            let _ = task.await;
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:PORT<path>`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}{}", self.port, self.state.config.path)
    }

    /// The exchanges made, in order.
    pub fn exchanges(&self) -> Vec<Exchange> {
        self.state.exchanges.lock().expect("exchanges").clone()
    }

    /// How many exchanges `subject` got.
    pub fn accepted(&self, subject: &str) -> usize {
        self.exchanges().iter().filter(|e| e.subject == subject).count()
    }

    /// One line per answer: `exchanged a token of SUBJECT` or
    /// `refused: CODE: WHY` (no token in it).
    pub fn log(&self) -> String {
        self.state.log.lock().expect("log").join("\n")
    }
}

impl Drop for TokenExchange {
    fn drop(&mut self) {
        if let Some((_, task)) = self.server.take() {
            task.abort();
        }
    }
}

async fn serve(listener: tokio::net::TcpListener, state: Arc<State>, mut stopped: tokio::sync::oneshot::Receiver<()>) {
    // Dropped on return: every open connection is aborted with the listener.
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut stopped => return,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let state = state.clone();
                connections.spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        let state = state.clone();
                        async move { Ok::<_, Infallible>(answer(request, &state).await) }
                    });
                    let connection = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
                    let _ = tokio::time::timeout(CONNECTION_TIMEOUT, connection).await;
                });
            }
        }
    }
}

fn oauth_json(status: StatusCode, body: &Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    headers.insert(http::header::CACHE_CONTROL, http::HeaderValue::from_static("no-store"));
    response
}

async fn answer(request: Request<Incoming>, state: &State) -> Response<Full<Bytes>> {
    let answer = exchange(request, state).await;
    let mut log = state.log.lock().expect("log");
    match answer {
        Ok(exchange) => {
            log.push(format!("exchanged a token of {}", exchange.subject));
            let (issued_token_type, token_type) = match state.config.issue {
                Issue::ServiceAccountToken { .. } => (JWT_TYPE, "N_A"),
                Issue::Fixed(_) => (ACCESS_TOKEN_TYPE, "Bearer"),
            };
            let body = json!({
                "access_token": exchange.access_token,
                "issued_token_type": issued_token_type,
                "token_type": token_type,
                "expires_in": EXPIRES_IN,
            });
            state.exchanges.lock().expect("exchanges").push(exchange);
            oauth_json(StatusCode::OK, &body)
        }
        Err((code, description)) => {
            log.push(format!("refused: {code}: {description}"));
            oauth_json(
                StatusCode::BAD_REQUEST,
                &json!({"error": code, "error_description": description}),
            )
        }
    }
}

type Refusal = (&'static str, String);

async fn exchange(request: Request<Incoming>, state: &State) -> Result<Exchange, Refusal> {
    let config = &state.config;
    if request.method() != http::Method::POST || request.uri().path() != config.path {
        return Err(("invalid_request", format!("POST {} only", config.path)));
    }
    let form = request
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    if !form {
        return Err((
            "invalid_request",
            "the body must be application/x-www-form-urlencoded".into(),
        ));
    }
    let body = Limited::new(request.into_body(), MAX_BODY)
        .collect()
        .await
        .map_err(|_| {
            (
                "invalid_request",
                format!("the body is unreadable or over {MAX_BODY} bytes"),
            )
        })?
        .to_bytes();
    let fields: Vec<(String, String)> = url::form_urlencoded::parse(&body).into_owned().collect();
    let one = |name: &str| -> Result<String, Refusal> {
        let values: Vec<&String> = fields.iter().filter(|(k, _)| k == name).map(|(_, v)| v).collect();
        match values.as_slice() {
            [value] if !value.is_empty() => Ok((*value).clone()),
            [] => Err(("invalid_request", format!("{name} is missing"))),
            _ => Err(("invalid_request", format!("{name} must be given once, not empty"))),
        }
    };
    if one("grant_type")? != GRANT_TYPE {
        return Err(("unsupported_grant_type", format!("grant_type must be {GRANT_TYPE}")));
    }
    if one("subject_token_type")? != JWT_TYPE {
        return Err(("invalid_request", format!("subject_token_type must be {JWT_TYPE}")));
    }
    if one("audience")? != config.audience {
        return Err(("invalid_target", format!("audience must be {}", config.audience)));
    }
    let subject_token = one("subject_token")?;
    let reviewed = crate::token_review::review(&state.client, &subject_token, &config.subject_audience, API_TIMEOUT)
        .await
        .map_err(|e| ("server_error", e))?;
    if !reviewed.valid_for(&config.subject_audience) {
        return Err((
            "invalid_grant",
            format!(
                "the subject token is not valid for {}: {}",
                config.subject_audience,
                reviewed.error.as_deref().unwrap_or_default()
            ),
        ));
    }
    let username = reviewed.username.clone();
    let (namespace, account) = reviewed
        .service_account()
        .ok_or(("invalid_grant", format!("{username} is not a service account")))?;
    let access_token = match &config.issue {
        Issue::Fixed(token) => token.clone(),
        Issue::ServiceAccountToken { audience } => {
            let token_request = TokenRequest {
                spec: TokenRequestSpec {
                    audiences: vec![audience.clone()],
                    expiration_seconds: Some(EXPIRES_IN),
                    ..TokenRequestSpec::default()
                },
                ..TokenRequest::default()
            };
            let issued = tokio::time::timeout(
                API_TIMEOUT,
                Api::<ServiceAccount>::namespaced(state.client.clone(), namespace).create_token_request(
                    account,
                    &PostParams::default(),
                    &token_request,
                ),
            )
            .await
            .map_err(|_| ("server_error", format!("the TokenRequest took over {API_TIMEOUT:?}")))?
            .map_err(|e| ("server_error", format!("the TokenRequest failed: {e}")))?;
            issued.status.map(|s| s.token).unwrap_or_default()
        }
    };
    Ok(Exchange {
        subject: username.clone(),
        subject_token,
        access_token,
    })
}
