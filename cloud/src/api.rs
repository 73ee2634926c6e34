//! One cloud API call, whatever the cloud: sent within the caller's
//! deadline, the answer read through the crate's bounded reader, a refusal
//! turned into the cloud's typed error with its own reading of the error
//! body and every secret of the call cut out.
//!
//! Each cloud's error is declared by [`cloud_error!`] (in [`error`]), which
//! writes the variants every cloud shares (`NotFound`, `Api`, `Deadline`,
//! `Transport`, `Garbage`, `TooLarge`, `Client`, `InvalidName`), their
//! accessors and [`CloudError`]: the cloud's name, its own variants and how
//! its error bodies are read are all a cloud supplies.

mod error;

pub use error::CodeMessage;
pub(crate) use error::{CODE_LIMIT, MESSAGE_LIMIT, cloud_error, raw_message, remote_text, show_detail};

use std::marker::PhantomData;
use std::time::Instant;

use secrecy::ExposeSecret;
use serde_json::Value;
use url::Url;

use crate::http::{BodyError, shown_url};
use crate::token::TokenSource;

/// Far above any answer these calls get (a disk or a token is a few KB).
pub(crate) const MAX_ANSWER: usize = 1 << 20;

/// The error of one cloud's calls, built from the shapes every cloud shares.
pub(crate) trait CloudError: Sized {
    /// What the cloud said in an error body, cleaned of `secrets`.
    type Detail;
    fn detail(body: &[u8], secrets: &[&str]) -> Self::Detail;
    fn not_found(service: &'static str, url: String, detail: Self::Detail) -> Self;
    fn api(service: &'static str, url: String, status: u16, detail: Self::Detail) -> Self;
    fn deadline(service: &'static str, url: String, after: std::time::Duration) -> Self;
    fn transport(service: &'static str, url: String, reason: String) -> Self;
    fn garbage(service: &'static str, url: String, problem: String) -> Self;
    fn too_large(service: &'static str, source: BodyError) -> Self;
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
                    too_large => E::too_large(service, too_large),
                })?;
            Ok::<_, E>(Answer { status, headers, body })
        };
        tokio::time::timeout_at(deadline.into(), exchange)
            .await
            .map_err(|_| E::deadline(service, shown_url(url), deadline.saturating_duration_since(started)))?
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
            404 => Err(E::not_found(service, shown_url(url), E::detail(&answer.body, secrets))),
            status => Err(E::api(
                service,
                shown_url(url),
                status,
                E::detail(&answer.body, secrets),
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
                E::deadline(service, shown, deadline.saturating_duration_since(started))
            })?
    }

    /// A transport failure, named by its cause (DNS, refused, TLS) but never by
    /// reqwest's own rendering of the URL, which could carry a query.
    fn transport(service: &'static str, url: &Url, started: Instant, error: reqwest::Error) -> E {
        if error.is_timeout() {
            return E::deadline(service, shown_url(url), started.elapsed());
        }
        let reason = crate::logging::clean_text(&crate::logging::error_chain(&error.without_url()), &[], 500);
        E::transport(service, shown_url(url), reason)
    }

    /// A JSON answer as a tree. Values are never quoted in the error (serde's
    /// syntax errors name a line and column only): the answer may be a token.
    pub fn json(service: &'static str, url: &Url, body: &[u8]) -> Result<Value, E> {
        serde_json::from_slice(body).map_err(|e| Self::garbage(service, url, format!("not JSON ({e})")))
    }

    pub fn garbage(service: &'static str, url: &Url, problem: impl Into<String>) -> E {
        E::garbage(service, shown_url(url), problem.into())
    }

    /// `base` joined with a relative API path built from checked names.
    pub fn join(service: &'static str, base: &Url, path: &str) -> Result<Url, E> {
        base.join(path)
            .map_err(|e| Self::garbage(service, base, format!("cannot join {path:?}: {e}")))
    }
}
