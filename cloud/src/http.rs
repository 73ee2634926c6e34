//! The one HTTP client configuration used for every outbound call.

use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum HttpClientError {
    #[error("cannot build the HTTP client: {0}")]
    Build(#[source] reqwest::Error),
    /// `SSL_CERT_FILE` or `SSL_CERT_DIR` names something that is not a
    /// readable bundle or directory of them.
    #[error("cannot build the HTTP client: {variable} {reason}")]
    Roots { variable: &'static str, reason: String },
}

/// Why an answer's body could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error(transparent)]
    Transport(reqwest::Error),
    #[error("the answer from {url} is larger than {}", size(*.limit))]
    TooLarge {
        /// Without user, query and fragment, which may hold secrets.
        url: String,
        limit: usize,
    },
}

/// The body of `response`, at most `limit` bytes: a server that sends
/// without end, or declares more than `limit`, is refused once the cap is
/// reached instead of buffered until memory runs out. Every answer from
/// outside the process is read through this.
pub async fn read_body(mut response: reqwest::Response, limit: usize) -> Result<Vec<u8>, BodyError> {
    let too_large = |response: &reqwest::Response| BodyError::TooLarge {
        url: shown_url(response.url()),
        limit,
    };
    if response.content_length().is_some_and(|length| length > limit as u64) {
        return Err(too_large(&response));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(BodyError::Transport)? {
        if body.len() + chunk.len() > limit {
            return Err(too_large(&response));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// `url` fit for a message: no user, password, query or fragment.
pub fn shown_url(url: &url::Url) -> String {
    let mut shown = url.clone();
    // Both setters only fail for URLs that cannot have credentials at all.
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.set_query(None);
    shown.set_fragment(None);
    shown.to_string()
}

/// The kind of the first I/O error in `error`'s chain: a transport error
/// (hyper's, reqwest's, kube's) names a refused or timed-out connection only
/// deep in its chain, under `client error (Connect)`.
pub fn io_error_kind(error: &(dyn std::error::Error + 'static)) -> Option<std::io::ErrorKind> {
    let mut cause = Some(error);
    while let Some(error) = cause {
        if let Some(io) = error.downcast_ref::<std::io::Error>() {
            return Some(io.kind());
        }
        cause = error.source();
    }
    None
}

/// A size as people write caps: `8 MiB`, `64 KiB`, `100 bytes`.
fn size(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

/// CA bundles, in the order Go's crypto/x509 looks for them on Linux.
const SYSTEM_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/pki/tls/cacert.pem",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

/// Far above any real bundle (Debian's is about 220 KB).
const MAX_CA_BUNDLE: u64 = 16 << 20;

/// At most this much is read from the directories of `SSL_CERT_DIR` in all
/// (Debian's /etc/ssl/certs holds about 1 MB).
const MAX_CA_DIRECTORIES: u64 = 64 << 20;

/// The system's trusted roots, read as Go programs read them: the file
/// named by `SSL_CERT_FILE` and the regular files of the directories of
/// `SSL_CERT_DIR` (`:`-separated; FIFOs, devices and files that hold no
/// certificate skipped, as OpenSSL does), else the first bundle that exists.
/// `None` leaves the choice to the platform verifier (which scans
/// `/etc/ssl/certs/`, file by file: several milliseconds per exec). `env`
/// reads a variable.
///
/// What the operator names is read here, bounded, and never left to the
/// platform verifier, which read the same paths without bound (a FIFO as
/// `SSL_CERT_FILE` hung it, a device filled memory): a file that is not
/// regular, larger than [`MAX_CA_BUNDLE`] or without a certificate, a
/// directory that cannot be listed, more than [`MAX_CA_DIRECTORIES`] in
/// all, or no certificate at all, is an error naming the variable.
fn system_roots(env: impl Fn(&str) -> Option<String>) -> Result<Option<Vec<reqwest::Certificate>>, HttpClientError> {
    let pem_roots = |pem: &[u8]| reqwest::Certificate::from_pem_bundle(pem).unwrap_or_default();
    let read = |path: &str| -> Result<Vec<reqwest::Certificate>, String> {
        let pem = crate::files::read_regular(std::path::Path::new(path), MAX_CA_BUNDLE).map_err(|e| e.to_string())?;
        Some(pem_roots(&pem))
            .filter(|roots| !roots.is_empty())
            .ok_or_else(|| format!("{path}: no certificate in it (a PEM bundle of CA certificates is needed)"))
    };
    let file = env("SSL_CERT_FILE").filter(|f| !f.is_empty());
    let dirs = env("SSL_CERT_DIR").filter(|d| !d.is_empty());
    if file.is_none() && dirs.is_none() {
        return Ok(SYSTEM_BUNDLES.iter().find_map(|path| read(path).ok()));
    }
    let refused = |variable, reason: String| HttpClientError::Roots {
        variable,
        reason: crate::logging::clean_text(&reason, &[], 500),
    };
    let mut roots = Vec::new();
    if let Some(file) = file {
        roots.extend(read(&file).map_err(|reason| refused("SSL_CERT_FILE", reason))?);
    }
    if let Some(dirs) = dirs {
        let found = directory_roots(&dirs, pem_roots).map_err(|reason| refused("SSL_CERT_DIR", reason))?;
        if found.is_empty() && roots.is_empty() {
            return Err(refused(
                "SSL_CERT_DIR",
                format!("{dirs}: no certificate in its directories (PEM files of CA certificates are needed)"),
            ));
        }
        roots.extend(found);
    }
    Ok(Some(roots))
}

/// The certificates of the regular files of `dirs` (`:`-separated), each
/// file read once however many links name it, at most [`MAX_CA_BUNDLE`]
/// each and [`MAX_CA_DIRECTORIES`] in all.
fn directory_roots(
    dirs: &str,
    pem_roots: impl Fn(&[u8]) -> Vec<reqwest::Certificate>,
) -> Result<Vec<reqwest::Certificate>, String> {
    use std::os::unix::fs::MetadataExt;
    let mut seen = std::collections::HashSet::new();
    let (mut roots, mut total) = (Vec::new(), 0u64);
    for dir in dirs.split(':').filter(|d| !d.is_empty()) {
        let entries = std::fs::read_dir(dir).map_err(|e| format!("{dir}: {e}"))?;
        let mut paths: Vec<_> = entries.flatten().map(|entry| entry.path()).collect();
        paths.sort();
        for path in paths {
            // Symbolic links followed; dangling ones, FIFOs and devices skipped.
            let Ok(metadata) = std::fs::metadata(&path) else {
                continue;
            };
            if !metadata.is_file() || !seen.insert((metadata.dev(), metadata.ino())) {
                continue;
            }
            let pem = crate::files::read_regular(&path, MAX_CA_BUNDLE).map_err(|e| e.to_string())?;
            total += pem.len() as u64;
            if total > MAX_CA_DIRECTORIES {
                return Err(format!(
                    "{dir}: more than {} of files",
                    size(MAX_CA_DIRECTORIES as usize)
                ));
            }
            roots.extend(pem_roots(&pem));
        }
    }
    Ok(roots)
}

/// A client with rustls (ring), the system's roots, and `timeout` as the
/// deadline of each whole request. The caller's program must have installed
/// the rustls crypto provider.
pub fn http_client(user_agent: &str, timeout: Duration) -> Result<reqwest::Client, HttpClientError> {
    http_client_with_tls(user_agent, timeout, true)
}

/// [`http_client`] for a caller that knows every endpoint it will call:
/// trusted roots are loaded only when one of them is not plain http. Loading
/// them costs milliseconds per exec, wasted when every endpoint is plain
/// HTTP on loopback (a local proxy or emulator, which the endpoint policy
/// alone lets through unencrypted).
pub fn http_client_for<'a>(
    user_agent: &str,
    timeout: Duration,
    endpoints: impl IntoIterator<Item = &'a url::Url>,
) -> Result<reqwest::Client, HttpClientError> {
    http_client_with_tls(user_agent, timeout, needs_roots(endpoints))
}

/// Whether some of `endpoints` is reached over TLS (anything but plain http).
fn needs_roots<'a>(endpoints: impl IntoIterator<Item = &'a url::Url>) -> bool {
    endpoints.into_iter().any(|url| url.scheme() != "http")
}

/// [`http_client`], but without loading trusted roots when `tls` is false.
/// Callers that know their endpoints use [`http_client_for`], which decides.
pub fn http_client_with_tls(
    user_agent: &str,
    timeout: Duration,
    tls: bool,
) -> Result<reqwest::Client, HttpClientError> {
    let trust = if tls { Trust::System } else { Trust::Roots(Vec::new()) };
    http_client_trusting(user_agent, timeout, trust)
}

/// Which servers' certificates a client accepts: an operator's config names a CA
/// file, or (with the operator's explicit consent, checked by the caller) none.
#[derive(Clone)]
pub enum Trust {
    /// The system's roots, read as Go reads them.
    System,
    /// Only these (a CA file's certificates, [`read_ca_file`]).
    Roots(Vec<reqwest::Certificate>),
    /// Any certificate: the operator turned checking off.
    Insecure,
}

/// [`http_client`] trusting what `trust` says.
pub fn http_client_trusting(
    user_agent: &str,
    timeout: Duration,
    trust: Trust,
) -> Result<reqwest::Client, HttpClientError> {
    let mut builder = reqwest::Client::builder()
        .user_agent(user_agent)
        .timeout(timeout)
        .connect_timeout(timeout.min(Duration::from_secs(5)))
        // A redirect could carry a credential to another host.
        .redirect(reqwest::redirect::Policy::none());
    builder = with_env_proxies(builder, |name| std::env::var(name).ok());
    builder = match trust {
        Trust::System => match system_roots(|name| std::env::var(name).ok())? {
            Some(roots) => builder.tls_certs_only(roots),
            None => builder,
        },
        Trust::Roots(roots) => builder.tls_certs_only(roots),
        Trust::Insecure => builder.tls_danger_accept_invalid_certs(true),
    };
    builder.build().map_err(HttpClientError::Build)
}

/// The largest CA file read.
const MAX_CA_FILE: u64 = 16 << 20;

/// The CA certificates of an operator's PEM file (`ca-file`, `cacert`): a
/// message saying what is wrong when it cannot be read or holds none.
pub fn read_ca_file(path: &std::path::Path) -> Result<Vec<reqwest::Certificate>, String> {
    let pem = crate::files::read_regular(path, MAX_CA_FILE).map_err(|e| e.to_string())?;
    let roots = reqwest::Certificate::from_pem_bundle(&pem).unwrap_or_default();
    if roots.is_empty() {
        return Err(format!(
            "{}: no certificate in it (a PEM bundle of CA certificates is needed)",
            path.display()
        ));
    }
    Ok(roots)
}

/// Destinations that never go through a proxy, whatever the environment
/// says: loopback (node-local token endpoints and proxies, emulators) and
/// link-local (metadata services, container credential agents, including
/// AWS's IPv6 agents at fd00:ec2::23 and fd00:ec2::254). A credential sent
/// there in clear text must not cross the network to a proxy; `localhost`
/// also covers its subdomains (RFC 6761), and `localhost.` (the same name,
/// fully qualified) its own; loopback and link-local IPv4 written as
/// IPv4-mapped IPv6 addresses (`[::ffff:127.0.0.1]`) are the same hosts.
pub const NEVER_PROXIED: &str = "localhost,localhost.,127.0.0.0/8,::1,::ffff:127.0.0.0/104,169.254.0.0/16,::ffff:169.254.0.0/112,fe80::/10,fd00:ec2::23,fd00:ec2::254";

/// The proxies of the environment, as reqwest reads them by default
/// (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`, upper case first, and
/// `NO_PROXY`), except that [`NEVER_PROXIED`] destinations always go direct.
/// `env` reads a variable (injectable for tests).
fn with_env_proxies(builder: reqwest::ClientBuilder, env: impl Fn(&str) -> Option<String>) -> reqwest::ClientBuilder {
    let first = |names: [&str; 2]| names.into_iter().find_map(&env).filter(|v| !v.is_empty());
    // As reqwest: a CGI program's HTTP_PROXY may come from a request header.
    if env("REQUEST_METHOD").is_some() {
        return builder.no_proxy();
    }
    let no_proxy = match first(["NO_PROXY", "no_proxy"]) {
        Some(list) => format!("{list},{NEVER_PROXIED}"),
        None => NEVER_PROXIED.to_owned(),
    };
    // Tried in order, first match wins: the scheme's own variable before ALL_PROXY.
    type MakeProxy = fn(&str) -> reqwest::Result<reqwest::Proxy>;
    let proxies: [(Option<String>, MakeProxy); 3] = [
        (first(["HTTP_PROXY", "http_proxy"]), |url| reqwest::Proxy::http(url)),
        (first(["HTTPS_PROXY", "https_proxy"]), |url| reqwest::Proxy::https(url)),
        (first(["ALL_PROXY", "all_proxy"]), |url| reqwest::Proxy::all(url)),
    ];
    // Adding a proxy turns reqwest's own reading of the environment off.
    let mut builder = builder.no_proxy();
    for (value, make) in proxies {
        let Some(value) = value else { continue };
        match make(&value) {
            Ok(proxy) => builder = builder.proxy(proxy.no_proxy(reqwest::NoProxy::from_string(&no_proxy))),
            // The value may hold the proxy's password: never shown.
            Err(_) => tracing::warn!("ignoring a proxy variable that is not a URL"),
        }
    }
    builder
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
        .map_err(HttpClientError::Build)
}

/// A fake server for tests of bounded reads: every answer is a body far
/// larger than any cap, sent in one of the ways a server can send one.
#[cfg(test)]
pub(crate) mod oversize {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// How the body is framed.
    #[derive(Debug, Clone, Copy)]
    pub enum Framing {
        /// `Transfer-Encoding: chunked`, no length.
        Chunked,
        /// No length: the body runs until the connection closes.
        UntilClose,
        /// `Content-Length` of 1 TiB, far more than is then sent.
        LyingLength,
    }

    pub const FRAMINGS: [Framing; 3] = [Framing::Chunked, Framing::UntilClose, Framing::LyingLength];

    /// What each answer sends at most: a client that reads to the end
    /// buffers all of it; one that stops at its cap leaves most unsent.
    pub const BODY: u64 = 64 << 20;

    /// A server on 127.0.0.1 answering every request 200 with [`BODY`]
    /// bytes framed as `framing`: its base URL, and the bytes it has sent.
    pub async fn serve(framing: Framing) -> (String, Arc<AtomicU64>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let sent = Arc::new(AtomicU64::default());
        let counter = sent.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(answer(stream, framing, counter.clone()));
            }
        });
        (url, sent)
    }

    async fn answer(mut stream: tokio::net::TcpStream, framing: Framing, sent: Arc<AtomicU64>) {
        // The request's head; a body, if any, is left unread.
        let mut head = Vec::new();
        let mut buffer = [0u8; 4096];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(n) => head.extend_from_slice(&buffer[..n]),
            }
        }
        let framing_header = match framing {
            Framing::Chunked => "transfer-encoding: chunked",
            Framing::UntilClose => "connection: close",
            Framing::LyingLength => "content-length: 1099511627776",
        };
        let head = format!("HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n{framing_header}\r\n\r\n");
        if stream.write_all(head.as_bytes()).await.is_err() {
            return;
        }
        let block = vec![b'x'; 64 << 10];
        let mut chunk = format!("{:x}\r\n", block.len()).into_bytes();
        chunk.extend_from_slice(&block);
        chunk.extend_from_slice(b"\r\n");
        while sent.load(Ordering::SeqCst) < BODY {
            let bytes = match framing {
                Framing::Chunked => &chunk,
                _ => &block,
            };
            if stream.write_all(bytes).await.is_err() {
                return;
            }
            sent.fetch_add(block.len() as u64, Ordering::SeqCst);
        }
        if let Framing::Chunked = framing {
            let _ = stream.write_all(b"0\r\n\r\n").await;
        }
    }

    /// Checks that `error` (from a read of an answer of `server`, capped at
    /// `cap`) says so, and that the client stopped reading near the cap: the
    /// rest of the body stayed unsent (at most a few MiB of socket buffers
    /// beyond the cap).
    pub fn assert_refused(error: &str, server: &str, cap: &str, sent: &AtomicU64) {
        assert!(error.contains(&format!("larger than {cap}")), "{error}");
        assert!(error.contains(server.trim_end_matches('/')), "{error}");
        let sent = sent.load(Ordering::SeqCst);
        assert!(sent < BODY / 2, "the client read {sent} bytes before refusing: {error}");
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::io::{BufRead, BufReader, Write};
    use std::net::TcpListener;
    use std::sync::{Arc, Mutex};

    use super::*;

    #[test]
    fn roots_are_loaded_when_some_endpoint_is_not_plain_http() {
        let url = |text: &str| url::Url::parse(text).unwrap();
        let (local, remote) = (url("http://127.0.0.1:8080/"), url("https://sts.amazonaws.com/"));
        assert!(!needs_roots([&local, &url("http://[::1]:9/token")]));
        assert!(needs_roots([&local, &remote]));
        assert!(needs_roots([&remote]));
        let _ = rustls::crypto::ring::default_provider().install_default();
        assert!(http_client_for("test", Duration::from_secs(1), [&local]).is_ok());
    }

    /// A listener that records the first line of each request and answers
    /// 200 with `body`: as a proxy it sees absolute URLs, as a server paths.
    fn recorder(bind: &str, body: &'static str) -> (String, Arc<Mutex<Vec<String>>>) {
        let listener = TcpListener::bind(bind).unwrap();
        let addr = listener.local_addr().unwrap();
        let seen: Arc<Mutex<Vec<String>>> = Arc::default();
        let record = seen.clone();
        std::thread::spawn(move || {
            for mut stream in listener.incoming().flatten() {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut first = String::new();
                let _ = reader.read_line(&mut first);
                // Read the headers to their end before answering.
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                    line.clear();
                }
                record.lock().unwrap().push(first.trim_end().to_owned());
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        (format!("http://{addr}"), seen)
    }

    async fn get(client: &reqwest::Client, url: impl reqwest::IntoUrl) -> String {
        client.get(url).send().await.unwrap().text().await.unwrap()
    }

    fn client(env: HashMap<&'static str, String>, internal: std::net::SocketAddr) -> reqwest::Client {
        let _ = rustls::crypto::ring::default_provider().install_default();
        // internal.example (and localhost., which not every resolver
        // knows) resolve to a loopback server: no DNS in tests.
        let builder = reqwest::Client::builder()
            .tls_certs_only(Vec::new())
            .resolve("internal.example", internal)
            .resolve("localhost.", internal);
        with_env_proxies(builder, |name| env.get(name).cloned())
            .build()
            .unwrap()
    }

    #[tokio::test]
    async fn bodies_larger_than_the_cap_are_refused_without_reading_them() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder().no_proxy().build().unwrap();
        for framing in oversize::FRAMINGS {
            let (server, sent) = oversize::serve(framing).await;
            // The query may hold a secret (a presigned URL): never shown.
            let response = client
                .get(format!("{server}doc?X-Amz-Signature=s3cr3t"))
                .send()
                .await
                .unwrap();
            let error = read_body(response, 1 << 20).await.unwrap_err().to_string();
            oversize::assert_refused(&error, &format!("{server}doc"), "1 MiB", &sent);
            assert!(!error.contains("s3cr3t"), "{framing:?}: {error}");
        }
    }

    #[tokio::test]
    async fn loopback_and_link_local_go_direct_others_through_the_proxy() {
        let (proxy, via_proxy) = recorder("127.0.0.1:0", "proxy");
        let (server, direct) = recorder("127.0.0.1:0", "direct");
        let (server6, direct6) = recorder("[::1]:0", "direct");
        let port = server.rsplit(':').next().unwrap().to_owned();
        let env: HashMap<_, _> = ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"]
            .into_iter()
            .map(|name| (name, proxy.clone()))
            .chain([("NO_PROXY", "internal.example".to_owned())])
            .collect();
        let client = client(env, format!("127.0.0.1:{port}").parse().unwrap());
        for url in [
            format!("{server}/a"),
            format!("http://localhost:{port}/b"),
            format!("{server6}/c"),
            // Issue 9's re-test: the fully qualified name, and loopback as
            // an IPv4-mapped IPv6 address, are loopback too.
            format!("http://localhost.:{port}/e"),
            format!("http://[::ffff:127.0.0.1]:{port}/f"),
        ] {
            let body = get(&client, &url).await;
            assert_eq!(body, "direct", "{url}");
        }
        assert_eq!(direct.lock().unwrap().len(), 4);
        assert_eq!(direct6.lock().unwrap().len(), 1);
        // Elsewhere the proxy is used, unless NO_PROXY lists the host.
        let body = get(&client, "http://registry.example.com/v2/").await;
        assert_eq!(body, "proxy");
        assert_eq!(
            *via_proxy.lock().unwrap(),
            ["GET http://registry.example.com/v2/ HTTP/1.1"]
        );
        // NO_PROXY still applies.
        let body = get(&client, format!("http://internal.example:{port}/d")).await;
        assert_eq!(body, "direct");
        assert_eq!(via_proxy.lock().unwrap().len(), 1);
    }

    /// A refused connection is found under reqwest's `error sending request`
    /// and hyper's `client error (Connect)`; an error without an I/O cause has
    /// no kind.
    #[tokio::test]
    async fn the_io_error_deep_in_a_transport_error_is_found() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let port = TcpListener::bind("127.0.0.1:0")
            .expect("a free loopback port")
            .local_addr()
            .expect("its address")
            .port();
        let client = metadata_client("test", Duration::from_secs(5)).expect("a metadata client");
        let error = client
            .get(format!("http://127.0.0.1:{port}/"))
            .send()
            .await
            .unwrap_err();
        assert_eq!(io_error_kind(&error), Some(std::io::ErrorKind::ConnectionRefused));
        let plain = HttpClientError::Roots {
            variable: "SSL_CERT_FILE",
            reason: "x".into(),
        };
        assert_eq!(io_error_kind(&plain), None);
    }
}
