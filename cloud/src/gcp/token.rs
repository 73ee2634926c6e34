//! Google access tokens: what a source hands out, and a cache in front of
//! any source that refreshes before expiry and makes one fetch however many
//! callers ask at once. The token and the cache's mechanism are the crate's
//! one for every cloud ([`crate::token`]); this module binds them to
//! Google's errors and keeps their `gcp::` paths.
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
use std::time::Duration;

use super::error::GcpError;
use crate::token::TokenCache;
pub(crate) use crate::token::expires_in;
pub use crate::token::{AccessToken, DEFAULT_REFRESH_MARGIN};

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

/// Tokens from `source`, kept until [`AccessToken::fresh`] says otherwise,
/// in a [`TokenCache`]: callers arriving during a fetch wait for it and
/// share its token (single-flight). A failed fetch is not kept; the next
/// caller tries again.
pub struct CachedTokenSource<S> {
    source: S,
    cache: TokenCache,
}

impl<S: TokenSource> CachedTokenSource<S> {
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
    pub async fn get(&self) -> Result<AccessToken, GcpError> {
        self.cache.get_or_fetch(|| self.source.token()).await
    }

    /// Forgets the cached token (after Google refused it, say).
    pub async fn invalidate(&self) {
        self.cache.invalidate().await;
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
            .field("margin", &self.cache.margin())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::{ExposeSecret, SecretString};
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
