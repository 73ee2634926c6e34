//! Bearer tokens for every cloud: what a token source hands out
//! ([`AccessToken`]), where tokens come from ([`TokenSource`]), the one
//! cache that keeps a token until a margin before it expires and makes one
//! fetch however many callers ask at once ([`TokenCache`]), and a source
//! with that cache in front of another ([`CachedTokenSource`]).
//!
//! Sources are generic over their error type: each cloud names its own
//! (`TokenSource<GcpError>` in [`crate::gcp`], `TokenSource<AzureError>` in
//! [`crate::azure`]), so the freshness rule and the single-flight are the
//! same for both.
//!
//! A long-running program (the webhook) asks for a token on every API call;
//! the metadata services limit how often they may be asked, and a token
//! that expires mid-call is a refused lookup. So tokens are kept until a
//! margin before they run out, and concurrent callers wait for the one
//! fetch in flight instead of each making their own.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use secrecy::SecretString;

/// A bearer token and when it expires. Its `Debug` never shows the token.
#[derive(Clone)]
pub struct AccessToken {
    secret: SecretString,
    /// When it was received, on the monotonic clock (expiry checks).
    received: Instant,
    /// Its validity when received.
    lifetime: Duration,
    /// The same expiry on the wall clock (for callers that report it).
    expires_at: SystemTime,
}

impl AccessToken {
    /// A token valid for `expires_in` from now (OAuth's `expires_in`).
    pub fn new(secret: SecretString, expires_in: Duration) -> Self {
        Self {
            secret,
            received: Instant::now(),
            lifetime: expires_in,
            expires_at: SystemTime::now() + expires_in,
        }
    }

    /// A token that expires at `expires_at` (IAM Credentials' `expireTime`,
    /// Azure's `expires_on`).
    pub fn expiring_at(secret: SecretString, expires_at: SystemTime) -> Self {
        let lifetime = expires_at.duration_since(SystemTime::now()).unwrap_or_default();
        Self {
            secret,
            received: Instant::now(),
            lifetime,
            expires_at,
        }
    }

    pub fn secret(&self) -> &SecretString {
        &self.secret
    }

    pub fn expires_at(&self) -> SystemTime {
        self.expires_at
    }

    /// How long it is still valid (zero once expired).
    pub fn remaining(&self) -> Duration {
        self.lifetime.saturating_sub(self.received.elapsed())
    }

    /// Whether it is still good for more than `margin`, where the margin is
    /// at most half the token's lifetime: a token issued for less than twice
    /// the margin is still used for half its life instead of never.
    pub fn fresh(&self, margin: Duration) -> bool {
        self.remaining() > margin.min(self.lifetime / 2)
    }
}

impl fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AccessToken")
            .field("secret", &crate::logging::REDACTED)
            .field("remaining", &self.remaining())
            .finish()
    }
}

/// Refresh this long before expiry by default: a call started with the
/// token must finish with it, and the metadata services hand out a new
/// token only once their cached one has less than about five minutes left
/// (so a margin below that does not fetch the same token again and again).
pub const DEFAULT_REFRESH_MARGIN: Duration = Duration::from_secs(3 * 60 + 45);

/// One cached token, kept until [`AccessToken::fresh`] says otherwise. The
/// lock is held across the fetch: callers arriving during a fetch wait for
/// it and share its token (single-flight). A failed fetch is not kept; the
/// next caller tries again.
pub struct TokenCache {
    margin: Duration,
    cached: tokio::sync::Mutex<Option<AccessToken>>,
}

impl Default for TokenCache {
    fn default() -> Self {
        Self::new()
    }
}

impl TokenCache {
    /// An empty cache that refreshes [`DEFAULT_REFRESH_MARGIN`] before expiry.
    pub fn new() -> Self {
        Self {
            margin: DEFAULT_REFRESH_MARGIN,
            cached: tokio::sync::Mutex::new(None),
        }
    }

    /// Refresh `margin` before expiry instead.
    pub fn with_margin(mut self, margin: Duration) -> Self {
        self.margin = margin;
        self
    }

    pub fn margin(&self) -> Duration {
        self.margin
    }

    /// The cached token if it is fresh for more than the margin, else the
    /// token `fetch` gets (kept if it succeeds).
    pub async fn get_or_fetch<E, F, Fut>(&self, fetch: F) -> Result<AccessToken, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<AccessToken, E>>,
    {
        let mut cached = self.cached.lock().await;
        if let Some(token) = cached.as_ref().filter(|t| t.fresh(self.margin)) {
            return Ok(token.clone());
        }
        *cached = None;
        let token = fetch().await?;
        *cached = Some(token.clone());
        Ok(token)
    }

    /// Forgets the cached token (after the service refused it, say).
    pub async fn invalidate(&self) {
        *self.cached.lock().await = None;
    }
}

impl fmt::Debug for TokenCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenCache")
            .field("margin", &self.margin)
            .finish_non_exhaustive()
    }
}

/// The future a [`TokenSource`] returns; boxed so sources can be held as
/// trait objects (`Arc<dyn TokenSource<E>>`).
pub type TokenFuture<'a, E> = Pin<Box<dyn Future<Output = Result<AccessToken, E>> + Send + 'a>>;

/// Where a client's bearer tokens come from, failing with `E` (the cloud's
/// error): a metadata server or credential, a [`CachedTokenSource`] in
/// front of one, or a token already obtained (an [`AccessToken`] is a
/// source of itself, e.g. the result of a workload-identity exchange).
pub trait TokenSource<E>: Send + Sync {
    fn token(&self) -> TokenFuture<'_, E>;

    /// The service and URL (shown: no query) tokens are fetched from, when
    /// there is one: what a timeout waiting for a token names.
    fn origin(&self) -> Option<(&'static str, String)> {
        None
    }
}

impl<E: Send + 'static> TokenSource<E> for AccessToken {
    fn token(&self) -> TokenFuture<'_, E> {
        let token = self.clone();
        Box::pin(async move { Ok(token) })
    }
}

impl<E, S: TokenSource<E> + ?Sized> TokenSource<E> for Arc<S> {
    fn token(&self) -> TokenFuture<'_, E> {
        (**self).token()
    }

    fn origin(&self) -> Option<(&'static str, String)> {
        (**self).origin()
    }
}

impl<E, S: TokenSource<E> + ?Sized> TokenSource<E> for Box<S> {
    fn token(&self) -> TokenFuture<'_, E> {
        (**self).token()
    }

    fn origin(&self) -> Option<(&'static str, String)> {
        (**self).origin()
    }
}

/// Tokens from `source`, kept until [`AccessToken::fresh`] says otherwise,
/// in a [`TokenCache`]: callers arriving during a fetch wait for it and
/// share its token (single-flight). A failed fetch is not kept; the next
/// caller tries again.
pub struct CachedTokenSource<S> {
    source: S,
    cache: TokenCache,
}

impl<S> CachedTokenSource<S> {
    pub fn new(source: S) -> Self {
        Self {
            source,
            cache: TokenCache::new(),
        }
    }

    /// Refresh `margin` before expiry instead of [`DEFAULT_REFRESH_MARGIN`].
    pub fn with_margin(mut self, margin: Duration) -> Self {
        self.cache = self.cache.with_margin(margin);
        self
    }

    pub fn source(&self) -> &S {
        &self.source
    }

    /// A token fresh for more than the margin: the cached one, or a new one.
    pub async fn get<E>(&self) -> Result<AccessToken, E>
    where
        S: TokenSource<E>,
    {
        self.cache.get_or_fetch(|| self.source.token()).await
    }

    /// Forgets the cached token (after the cloud refused it, say).
    pub async fn invalidate(&self) {
        self.cache.invalidate().await;
    }
}

impl<E: Send + 'static, S: TokenSource<E>> TokenSource<E> for CachedTokenSource<S> {
    fn token(&self) -> TokenFuture<'_, E> {
        Box::pin(self.get())
    }

    fn origin(&self) -> Option<(&'static str, String)> {
        self.source.origin()
    }
}

impl<S> fmt::Debug for CachedTokenSource<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CachedTokenSource")
            .field("margin", &self.cache.margin())
            .finish_non_exhaustive()
    }
}

/// The bearer token of an OAuth 2.0 token answer (RFC 6749 section 5.1): a
/// non-empty `access_token`, and `token_type` Bearer (any case) when the
/// answer names one. Problems never quote the answer: it holds the token.
pub(crate) fn bearer_access_token(json: &serde_json::Value) -> Result<SecretString, &'static str> {
    let token = json["access_token"]
        .as_str()
        .filter(|t| !t.is_empty())
        .ok_or("the answer has no access_token")?;
    if let Some(kind) = json.get("token_type")
        && !kind.as_str().is_some_and(|k| k.eq_ignore_ascii_case("bearer"))
    {
        return Err("the answer's token_type is not Bearer");
    }
    Ok(SecretString::from(token.to_owned()))
}

/// OAuth's `expires_in`: seconds, as a number (or a string of one, which
/// some servers send: Azure's IMDS always does).
pub(crate) fn expires_in(value: &serde_json::Value) -> Option<Duration> {
    let seconds = match value {
        serde_json::Value::Number(n) => n.as_f64(),
        serde_json::Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    }?;
    (seconds.is_finite() && seconds > 0.0 && seconds < 1e9).then(|| Duration::from_secs_f64(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn debug_never_shows_the_token() {
        let token = AccessToken::new(SecretString::from("ya29.secret-value"), Duration::from_secs(60));
        let shown = format!("{token:?}");
        assert!(!shown.contains("ya29"), "{shown}");
        assert!(shown.contains("<redacted>"), "{shown}");
    }

    #[test]
    fn freshness_uses_the_margin_or_half_the_lifetime() {
        let hour = AccessToken::new(SecretString::from("t"), Duration::from_secs(3600));
        assert!(hour.fresh(DEFAULT_REFRESH_MARGIN));
        // A margin as long as the token is capped at half its life.
        assert!(hour.fresh(Duration::from_secs(3600)));
        let short = AccessToken::new(SecretString::from("t"), Duration::from_secs(60));
        assert!(short.fresh(DEFAULT_REFRESH_MARGIN), "used for half its life");
        let expired = AccessToken::expiring_at(SecretString::from("t"), SystemTime::now() - Duration::from_secs(1));
        assert_eq!(expired.remaining(), Duration::ZERO);
        assert!(!expired.fresh(Duration::ZERO));
    }

    #[tokio::test]
    async fn concurrent_callers_share_one_fetch_and_failures_are_not_kept() {
        let cache = Arc::new(TokenCache::new());
        let calls = Arc::new(AtomicUsize::new(0));
        let fetch = |calls: Arc<AtomicUsize>| async move {
            let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
            tokio::time::sleep(Duration::from_millis(50)).await;
            Ok::<_, String>(AccessToken::new(
                SecretString::from(format!("token-{n}")),
                Duration::from_secs(3600),
            ))
        };
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let (cache, calls) = (cache.clone(), calls.clone());
                tokio::spawn(async move { cache.get_or_fetch(|| fetch(calls)).await.unwrap() })
            })
            .collect();
        for task in tasks {
            assert_eq!(task.await.unwrap().secret().expose_secret(), "token-1");
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        cache.invalidate().await;
        let failed = cache.get_or_fetch(|| async { Err::<AccessToken, _>("refused") }).await;
        assert_eq!(failed.unwrap_err(), "refused");
        let token = cache.get_or_fetch(|| fetch(calls.clone())).await.unwrap();
        assert_eq!(token.secret().expose_secret(), "token-2");
    }

    struct Counting {
        calls: AtomicUsize,
        lifetime: Duration,
    }

    impl TokenSource<String> for Counting {
        fn token(&self) -> TokenFuture<'_, String> {
            Box::pin(async move {
                let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
                Ok(AccessToken::new(
                    SecretString::from(format!("token-{n}")),
                    self.lifetime,
                ))
            })
        }
    }

    #[tokio::test]
    async fn cached_source_callers_share_one_fetch() {
        let cache = Arc::new(CachedTokenSource::new(Counting {
            calls: AtomicUsize::new(0),
            lifetime: Duration::from_secs(3600),
        }));
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let cache = cache.clone();
                tokio::spawn(async move { cache.get().await.expect("a token") })
            })
            .collect();
        for task in tasks {
            assert_eq!(task.await.expect("the task joined").secret().expose_secret(), "token-1");
        }
        assert_eq!(cache.source().calls.load(Ordering::SeqCst), 1);
        cache.invalidate().await;
        assert_eq!(cache.get().await.expect("a token").secret().expose_secret(), "token-2");
    }

    #[test]
    fn bearer_access_token_wants_a_token_and_no_other_type() {
        let ok = |json| bearer_access_token(&json).map(|t| t.expose_secret().to_owned());
        assert_eq!(ok(serde_json::json!({"access_token": "t1"})).as_deref(), Ok("t1"));
        assert_eq!(
            ok(serde_json::json!({"access_token": "t2", "token_type": "bearer"})).as_deref(),
            Ok("t2")
        );
        assert_eq!(
            ok(serde_json::json!({"access_token": "", "token_type": "Bearer"})),
            Err("the answer has no access_token")
        );
        assert_eq!(
            ok(serde_json::json!({"token": "t3"})),
            Err("the answer has no access_token")
        );
        assert_eq!(
            ok(serde_json::json!({"access_token": "t4", "token_type": "mac"})),
            Err("the answer's token_type is not Bearer")
        );
        assert_eq!(
            ok(serde_json::json!({"access_token": "t5", "token_type": null})),
            Err("the answer's token_type is not Bearer")
        );
    }

    #[test]
    fn expires_in_as_number_or_string() {
        assert_eq!(expires_in(&serde_json::json!(60)), Some(Duration::from_secs(60)));
        assert_eq!(
            expires_in(&serde_json::json!("86399")),
            Some(Duration::from_secs(86399))
        );
        for bad in [
            serde_json::json!(-5),
            serde_json::json!("soon"),
            serde_json::json!(null),
        ] {
            assert_eq!(expires_in(&bad), None, "{bad}");
        }
    }
}
