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

use super::error::GcpError;
pub(crate) use crate::token::expires_in;
pub use crate::token::{AccessToken, CachedTokenSource, DEFAULT_REFRESH_MARGIN, TokenSource};

/// The future a Google [`TokenSource`] returns; boxed so sources can be
/// held as trait objects (`Arc<dyn TokenSource<GcpError>>`).
pub type TokenFuture<'a> = crate::token::TokenFuture<'a, GcpError>;
