//! The one HTTP client configuration used for every outbound call.

use std::time::Duration;

#[derive(Debug, thiserror::Error)]
#[error("cannot build the HTTP client: {0}")]
pub struct HttpClientError(#[source] reqwest::Error);

/// A client with rustls (ring) and the system's or webpki's roots, HTTP/2 by
/// ALPN, and `timeout` as the deadline of each whole request. The caller's
/// program must have installed the rustls crypto provider.
pub fn http_client(user_agent: &str, timeout: Duration) -> Result<reqwest::Client, HttpClientError> {
    reqwest::Client::builder()
        .user_agent(user_agent)
        .timeout(timeout)
        .connect_timeout(timeout.min(Duration::from_secs(5)))
        // A redirect could carry a credential to another host.
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(HttpClientError)
}

/// A client for link-local metadata services: never through a proxy, no
/// redirects, and `timeout` for each whole request.
pub fn metadata_client(user_agent: &str, timeout: Duration) -> Result<reqwest::Client, HttpClientError> {
    reqwest::Client::builder()
        .user_agent(user_agent)
        .timeout(timeout)
        .connect_timeout(timeout)
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(HttpClientError)
}
