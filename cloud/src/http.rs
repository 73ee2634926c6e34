//! The one HTTP client configuration used for every outbound call.

use std::time::Duration;

#[derive(Debug, thiserror::Error)]
#[error("cannot build the HTTP client: {0}")]
pub struct HttpClientError(#[source] reqwest::Error);

/// CA bundles, in the order Go's crypto/x509 looks for them on Linux.
const SYSTEM_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/pki/tls/cacert.pem",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

/// The system's trusted roots, read as Go programs read them: the file
/// named by `SSL_CERT_FILE`, else the first bundle that exists. `None`
/// leaves the choice to the platform verifier (which also scans
/// `/etc/ssl/certs/`, file by file: several milliseconds per exec).
fn system_roots() -> Option<Vec<reqwest::Certificate>> {
    if std::env::var_os("SSL_CERT_DIR").is_some() && std::env::var_os("SSL_CERT_FILE").is_none() {
        return None;
    }
    let candidates = std::env::var("SSL_CERT_FILE")
        .map(|f| vec![f])
        .unwrap_or_else(|_| SYSTEM_BUNDLES.iter().map(|s| (*s).to_owned()).collect());
    candidates.iter().find_map(|path| {
        let pem = std::fs::read(path).ok()?;
        reqwest::Certificate::from_pem_bundle(&pem)
            .ok()
            .filter(|roots| !roots.is_empty())
    })
}

/// A client with rustls (ring), the system's roots, and `timeout` as the
/// deadline of each whole request. The caller's program must have installed
/// the rustls crypto provider.
pub fn http_client(user_agent: &str, timeout: Duration) -> Result<reqwest::Client, HttpClientError> {
    http_client_with_tls(user_agent, timeout, true)
}

/// [`http_client`], but without loading trusted roots when `tls` is false:
/// for callers that know every endpoint they will reach is plain HTTP on
/// loopback (a local proxy or emulator), where loading roots is wasted time.
pub fn http_client_with_tls(
    user_agent: &str,
    timeout: Duration,
    tls: bool,
) -> Result<reqwest::Client, HttpClientError> {
    let mut builder = reqwest::Client::builder()
        .user_agent(user_agent)
        .timeout(timeout)
        .connect_timeout(timeout.min(Duration::from_secs(5)))
        // A redirect could carry a credential to another host.
        .redirect(reqwest::redirect::Policy::none());
    if !tls {
        builder = builder.tls_certs_only(Vec::new());
    } else if let Some(roots) = system_roots() {
        builder = builder.tls_certs_only(roots);
    }
    builder.build().map_err(HttpClientError)
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
        // Metadata services speak plain HTTP: no roots to load.
        .tls_certs_only(Vec::new())
        .build()
        .map_err(HttpClientError)
}
