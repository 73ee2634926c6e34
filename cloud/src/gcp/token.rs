//! Google access tokens: what a source hands out, and a cache in front of
//! any source that refreshes before expiry and makes one fetch however many
//! callers ask at once.
//!
//! A long-running program (the webhook) asks for a token on every Compute
//! call; the metadata server limits how often it may be asked, and a token
//! that expires mid-call is a refused lookup. So tokens are kept until a
//! margin before `expires_in` runs out, and concurrent callers wait for the
//! one fetch in flight instead of each making their own.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use secrecy::SecretString;

use super::error::GcpError;

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

    /// A token that expires at `expires_at` (IAM Credentials' `expireTime`).
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

/// The future a [`TokenSource`] returns; boxed so sources can be held as
/// trait objects (`Arc<dyn TokenSource>`).
pub type TokenFuture<'a> = Pin<Box<dyn Future<Output = Result<AccessToken, GcpError>> + Send + 'a>>;

/// Where a client's bearer tokens come from: the metadata server
/// ([`super::GceMetadata`]), a [`CachedTokenSource`] in front of one, or a
/// token already obtained (an [`AccessToken`] is a source of itself, e.g.
/// the result of a workload-identity exchange).
pub trait TokenSource: Send + Sync {
    fn token(&self) -> TokenFuture<'_>;
}

impl TokenSource for AccessToken {
    fn token(&self) -> TokenFuture<'_> {
        let token = self.clone();
        Box::pin(async move { Ok(token) })
    }
}

impl<S: TokenSource + ?Sized> TokenSource for Arc<S> {
    fn token(&self) -> TokenFuture<'_> {
        (**self).token()
    }
}

/// Refresh this long before expiry by default: a Compute call started with
/// the token must finish with it, and the metadata server hands out a new
/// token once its cached one has less than about five minutes left (so a
/// margin below that does not fetch the same token again and again).
pub const DEFAULT_REFRESH_MARGIN: Duration = Duration::from_secs(3 * 60 + 45);

/// Tokens from `source`, kept until [`AccessToken::fresh`] says otherwise.
/// The lock is held across the fetch: callers arriving during a fetch wait
/// for it and share its token (single-flight). A failed fetch is not kept;
/// the next caller tries again.
pub struct CachedTokenSource<S> {
    source: S,
    margin: Duration,
    cached: tokio::sync::Mutex<Option<AccessToken>>,
}

impl<S: TokenSource> CachedTokenSource<S> {
    pub fn new(source: S) -> Self {
        Self {
            source,
            margin: DEFAULT_REFRESH_MARGIN,
            cached: tokio::sync::Mutex::new(None),
        }
    }

    /// Refresh `margin` before expiry instead of [`DEFAULT_REFRESH_MARGIN`].
    pub fn with_margin(mut self, margin: Duration) -> Self {
        self.margin = margin;
        self
    }

    pub fn source(&self) -> &S {
        &self.source
    }

    /// A token fresh for more than the margin: the cached one, or a new one.
    pub async fn get(&self) -> Result<AccessToken, GcpError> {
        let mut cached = self.cached.lock().await;
        if let Some(token) = cached.as_ref().filter(|t| t.fresh(self.margin)) {
            return Ok(token.clone());
        }
        *cached = None;
        let token = self.source.token().await?;
        *cached = Some(token.clone());
        Ok(token)
    }

    /// Forgets the cached token (after Google refused it, say).
    pub async fn invalidate(&self) {
        *self.cached.lock().await = None;
    }
}

impl<S: TokenSource> TokenSource for CachedTokenSource<S> {
    fn token(&self) -> TokenFuture<'_> {
        Box::pin(self.get())
    }
}

impl<S> fmt::Debug for CachedTokenSource<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CachedTokenSource")
            .field("margin", &self.margin)
            .finish_non_exhaustive()
    }
}

/// OAuth's `expires_in`: seconds, as a number (or a string of one, which
/// some servers send).
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

    struct Counting {
        calls: AtomicUsize,
        lifetime: Duration,
    }

    impl TokenSource for Counting {
        fn token(&self) -> TokenFuture<'_> {
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
    async fn concurrent_callers_share_one_fetch() {
        let cache = Arc::new(CachedTokenSource::new(Counting {
            calls: AtomicUsize::new(0),
            lifetime: Duration::from_secs(3600),
        }));
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let cache = cache.clone();
                tokio::spawn(async move { cache.get().await.unwrap() })
            })
            .collect();
        for task in tasks {
            assert_eq!(task.await.unwrap().secret().expose_secret(), "token-1");
        }
        assert_eq!(cache.source().calls.load(Ordering::SeqCst), 1);
        cache.invalidate().await;
        assert_eq!(cache.get().await.unwrap().secret().expose_secret(), "token-2");
    }
}
