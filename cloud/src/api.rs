//! One cloud API call, whatever the cloud: sent within the caller's
//! deadline, the answer read through the crate's bounded reader, a refusal
//! turned into a [`CallError`] with the cloud's own reading of the error
//! body and every secret of the call cut out.
//!
//! Each cloud's error enum is written by hand in its `error.rs`: a `Call`
//! variant wrapping [`CallError`] with the cloud's detail, then the cloud's
//! own variants; each answers [`CallFailure`] (timeout? which URL?).

mod detail;
mod error;

pub use detail::CodeMessage;
pub(crate) use detail::{CODE_LIMIT, MESSAGE_LIMIT, raw_message, remote_text, show_detail};
pub(crate) use error::shown_wait;
pub use error::{CallError, CallErrorKind, CallFailure, InvalidName};

use std::marker::PhantomData;
use std::time::Instant;

use secrecy::ExposeSecret;
use serde_json::Value;
use url::Url;

use crate::http::{BodyError, shown_url};
use crate::token::TokenSource;

/// Far above any answer these calls get (a disk or a token is a few KB).
pub(crate) const MAX_ANSWER: usize = 1 << 20;

/// The error of one cloud's calls: a [`CallError`] with the cloud's detail
/// becomes it, and the cloud says how its error bodies are read.
pub(crate) trait CloudError: CallFailure + From<CallError<Self::Detail>> {
    /// What the cloud said in an error body, cleaned of `secrets`.
    fn read_detail(body: &[u8], secrets: &[&str]) -> Self::Detail;
}

/// An answer, whatever its status.
pub(crate) struct Answer {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Vec<u8>,
}

/// The calls of one cloud, failing with its error `E`: each cloud names
/// `Calls<ItsError>` as its `Call`.
pub(crate) struct Calls<E>(PhantomData<E>);

impl<E: CloudError> Calls<E> {
    /// Sends `request` (to `url`, for messages) and reads the answer, whatever
    /// its status, before `deadline`.
    pub async fn exchange(
        service: &'static str,
        url: &Url,
        request: reqwest::RequestBuilder,
        deadline: Instant,
    ) -> Result<Answer, E> {
        let started = Instant::now();
        let exchange = async {
            let response = request
                .send()
                .await
                .map_err(|e| Self::transport(service, url, started, e))?;
            let status = response.status().as_u16();
            let headers = response.headers().clone();
            let body = crate::http::read_body(response, MAX_ANSWER)
                .await
                .map_err(|e| match e {
                    BodyError::Transport(e) => Self::transport(service, url, started, e),
                    too_large => Self::failed(service, shown_url(url), CallErrorKind::TooLarge { source: too_large }),
                })?;
            Ok::<_, E>(Answer { status, headers, body })
        };
        tokio::time::timeout_at(deadline.into(), exchange)
            .await
            .map_err(|_| Self::deadline(service, shown_url(url), started, deadline))?
    }

    /// [`Self::exchange`], then [`Self::check`].
    pub async fn send(
        service: &'static str,
        url: &Url,
        request: reqwest::RequestBuilder,
        deadline: Instant,
        secrets: &[&str],
    ) -> Result<Vec<u8>, E> {
        let answer = Self::exchange(service, url, request, deadline).await?;
        Self::check(service, url, answer, secrets)
    }

    /// The body of a 2xx answer; 404 is the cloud's `NotFound`; any other
    /// status its `Api` error. `secrets` (what the request carried) are cut out
    /// of anything the server sent back.
    pub fn check(service: &'static str, url: &Url, answer: Answer, secrets: &[&str]) -> Result<Vec<u8>, E> {
        match answer.status {
            200..=299 => Ok(answer.body),
            404 => Err(Self::failed(
                service,
                shown_url(url),
                CallErrorKind::NotFound {
                    detail: E::read_detail(&answer.body, secrets),
                },
            )),
            status => Err(Self::failed(
                service,
                shown_url(url),
                CallErrorKind::Api {
                    status,
                    detail: E::read_detail(&answer.body, secrets),
                },
            )),
        }
    }

    /// GET `url` with a bearer token from `tokens` (named `token_service` in a
    /// deadline error), all before `deadline`; the answer as JSON.
    pub async fn bearer_get(
        service: &'static str,
        token_service: &'static str,
        http: &reqwest::Client,
        tokens: &dyn TokenSource<E>,
        url: &Url,
        deadline: Instant,
    ) -> Result<Value, E> {
        let token = Self::token_within(tokens, deadline, token_service, url).await?;
        let secret = token.secret().expose_secret();
        let request = http.get(url.clone()).bearer_auth(secret);
        let body = Self::send(service, url, request, deadline, &[secret]).await?;
        Self::json(service, url, &body)
    }

    /// A token from `tokens` before `deadline`; past it, the error names the
    /// source's own service and URL ([`TokenSource::origin`]: IMDS, Entra
    /// ID), else `token_service` and `url`, the call the token was for.
    pub async fn token_within(
        tokens: &dyn TokenSource<E>,
        deadline: Instant,
        token_service: &'static str,
        url: &Url,
    ) -> Result<crate::token::AccessToken, E> {
        let started = Instant::now();
        tokio::time::timeout_at(deadline.into(), tokens.token())
            .await
            .map_err(|_| {
                let (service, shown) = tokens.origin().unwrap_or_else(|| (token_service, shown_url(url)));
                Self::deadline(service, shown, started, deadline)
            })?
    }

    /// A transport failure, named by its cause (DNS, refused, TLS) but never by
    /// reqwest's own rendering of the URL, which could carry a query.
    fn transport(service: &'static str, url: &Url, started: Instant, error: reqwest::Error) -> E {
        if error.is_timeout() {
            let after = started.elapsed();
            return Self::failed(service, shown_url(url), CallErrorKind::Deadline { after });
        }
        let reason = crate::logging::clean_text(&crate::logging::error_chain(&error.without_url()), &[], 500);
        let timeout = false;
        Self::failed(service, shown_url(url), CallErrorKind::Transport { reason, timeout })
    }

    /// The deadline met: the wait is from `started` to `deadline`.
    fn deadline(service: &'static str, url: String, started: Instant, deadline: Instant) -> E {
        let after = deadline.saturating_duration_since(started);
        Self::failed(service, url, CallErrorKind::Deadline { after })
    }

    /// The call's failure as the cloud's error.
    fn failed(service: &'static str, url: String, kind: CallErrorKind<E::Detail>) -> E {
        E::from(CallError::new(service, url, kind))
    }

    /// A JSON answer as a tree. Values are never quoted in the error (serde's
    /// syntax errors name a line and column only): the answer may be a token.
    pub fn json(service: &'static str, url: &Url, body: &[u8]) -> Result<Value, E> {
        serde_json::from_slice(body).map_err(|e| Self::garbage(service, url, format!("not JSON ({e})")))
    }

    pub fn garbage(service: &'static str, url: &Url, problem: impl Into<String>) -> E {
        let problem = problem.into();
        Self::failed(service, shown_url(url), CallErrorKind::Garbage { problem })
    }

    /// `base` joined with a relative API path built from checked names.
    pub fn join(service: &'static str, base: &Url, path: &str) -> Result<Url, E> {
        base.join(path)
            .map_err(|e| Self::garbage(service, base, format!("cannot join {path:?}: {e}")))
    }
}
