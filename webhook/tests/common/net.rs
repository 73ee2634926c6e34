//! Test-side TLS: a CA that issues certificates (rcgen), a client that speaks HTTP/1.1
//! or HTTP/2 over rustls and reports what was negotiated, an in-process server, and a
//! bare plain-HTTP GET for the admin endpoints; raw TLS connections and HTTP/2 frames for
//! clients that misbehave.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use hyper_util::rt::{TokioExecutor, TokioIo};
use pv_topology_webhook::cli;
use pv_topology_webhook::review::Reviewer;
use pv_topology_webhook::server::{AppState, ServeConfig, Server};
use pv_topology_webhook::tls::{NamedFile, TlsFiles};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore, SupportedProtocolVersion};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

pub fn install_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A test CA.
pub struct TestCa {
    pub pem: String,
    issuer: Issuer<'static, KeyPair>,
}

/// A certificate and its key, PEM.
#[derive(Clone)]
pub struct Issued {
    /// Leaf first, then any intermediates.
    pub chain_pem: String,
    pub key_pem: String,
    /// Serial as x509-parser prints it.
    pub serial: String,
}

impl TestCa {
    pub fn new(name: &str) -> Self {
        Self::with_params(name, None)
    }

    fn with_params(name: &str, parent: Option<&TestCa>) -> Self {
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
        let key = KeyPair::generate().unwrap();
        let cert = match parent {
            None => params.self_signed(&key).unwrap(),
            Some(parent) => params.signed_by(&key, &parent.issuer).unwrap(),
        };
        Self {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// An intermediate CA signed by this one.
    pub fn intermediate(&self, name: &str) -> Self {
        Self::with_params(name, Some(self))
    }

    /// A serving certificate for `localhost` and 127.0.0.1.
    pub fn server(&self) -> Issued {
        self.issue(&["localhost", "127.0.0.1"], ExtendedKeyUsagePurpose::ServerAuth)
    }

    /// A client certificate.
    pub fn client(&self, name: &str) -> Issued {
        self.issue(&[name], ExtendedKeyUsagePurpose::ClientAuth)
    }

    fn issue(&self, names: &[&str], usage: ExtendedKeyUsagePurpose) -> Issued {
        self.issue_with(names, usage, KeyPair::generate().unwrap(), None)
    }

    /// A serving certificate for `localhost` and 127.0.0.1 with `key` (its PEM is the
    /// key's PKCS#8) and, if given, this notAfter.
    pub fn server_with(&self, key: KeyPair, not_after: Option<time::OffsetDateTime>) -> Issued {
        self.issue_with(
            &["localhost", "127.0.0.1"],
            ExtendedKeyUsagePurpose::ServerAuth,
            key,
            not_after,
        )
    }

    fn issue_with(
        &self,
        names: &[&str],
        usage: ExtendedKeyUsagePurpose,
        key: KeyPair,
        not_after: Option<time::OffsetDateTime>,
    ) -> Issued {
        let mut params = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
        params.distinguished_name.push(DnType::CommonName, names[0]);
        params.extended_key_usages = vec![usage];
        if let Some(not_after) = not_after {
            params.not_after = not_after;
        }
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Issued {
            chain_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            serial: serial_of(cert.der()),
        }
    }
}

impl Issued {
    /// The same pair with `intermediate`'s certificate appended to the chain.
    pub fn with_chain(mut self, intermediate: &TestCa) -> Self {
        self.chain_pem.push_str(&intermediate.pem);
        self
    }
}

pub fn serial_of(der: &[u8]) -> String {
    let (_, cert) = x509_parser::parse_x509_certificate(der).unwrap();
    cert.raw_serial_as_string()
}

/// The serving pair at `cert` and `key`, each named by its flag as `serve_config` names
/// them.
pub fn tls_files(cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> TlsFiles {
    TlsFiles {
        cert: NamedFile::new(cli::TLS_CERT_FILE, cert),
        key: NamedFile::new(cli::TLS_KEY_FILE, key),
    }
}

/// The client CA file at `path`, named by its flag as `serve_config` names it.
pub fn client_ca_file(path: impl Into<PathBuf>) -> NamedFile {
    NamedFile::new(cli::CLIENT_CA_FILE, path)
}

/// Writes the pair as `dir/tls.crt` and `dir/tls.key`.
pub fn write_pair(dir: &Path, issued: &Issued) -> TlsFiles {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("tls.crt"), &issued.chain_pem).unwrap();
    std::fs::write(dir.join("tls.key"), &issued.key_pem).unwrap();
    tls_files(dir.join("tls.crt"), dir.join("tls.key"))
}

/// A client trusting `ca_pem`, limited to `versions`, offering `alpn`, with an optional
/// client certificate.
pub fn client_config(
    ca_pem: &str,
    versions: &[&'static SupportedProtocolVersion],
    alpn: &[&[u8]],
    client_cert: Option<&Issued>,
) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let builder = ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(roots);
    let mut config = match client_cert {
        None => builder.with_no_client_auth(),
        Some(issued) => {
            let chain = CertificateDer::pem_slice_iter(issued.chain_pem.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .unwrap();
            let key = PrivateKeyDer::from_pem_slice(issued.key_pem.as_bytes()).unwrap();
            builder.with_client_auth_cert(chain, key).unwrap()
        }
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}

pub fn default_client(ca_pem: &str) -> Arc<ClientConfig> {
    client_config(
        ca_pem,
        &[&rustls::version::TLS13, &rustls::version::TLS12],
        &[b"h2", b"http/1.1"],
        None,
    )
}

/// What a TLS connection negotiated.
#[derive(Debug, Clone)]
pub struct Negotiated {
    pub version: rustls::ProtocolVersion,
    pub alpn: Option<Vec<u8>>,
    pub serial: String,
    /// Whether the handshake resumed an earlier session (an abbreviated handshake).
    pub resumed: bool,
}

/// One HTTP connection over TLS, HTTP/2 when ALPN chose it.
pub enum Conn {
    H1(hyper::client::conn::http1::SendRequest<Full<Bytes>>),
    H2(hyper::client::conn::http2::SendRequest<Full<Bytes>>),
}

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Connects to `addr` as `localhost`.
pub async fn connect(addr: SocketAddr, config: Arc<ClientConfig>) -> Result<(Conn, Negotiated), BoxError> {
    let tcp = TcpStream::connect(addr).await?;
    let tls = TlsConnector::from(config)
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await?;
    let (_, session) = tls.get_ref();
    let negotiated = Negotiated {
        version: session.protocol_version().unwrap(),
        alpn: session.alpn_protocol().map(<[u8]>::to_vec),
        serial: serial_of(&session.peer_certificates().unwrap()[0]),
        resumed: session.handshake_kind() == Some(rustls::HandshakeKind::Resumed),
    };
    let io = TokioIo::new(tls);
    let conn = if negotiated.alpn.as_deref() == Some(b"h2") {
        let (send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io).await?;
        tokio::spawn(conn);
        Conn::H2(send)
    } else {
        let (send, conn) = hyper::client::conn::http1::handshake(io).await?;
        tokio::spawn(conn);
        Conn::H1(send)
    };
    Ok((conn, negotiated))
}

impl Conn {
    /// POSTs `body` to `/mutate`; returns the status and the body.
    pub async fn post(&mut self, body: &[u8]) -> Result<(u16, Vec<u8>), BoxError> {
        let request = hyper::Request::post("https://localhost/mutate")
            .header("content-type", "application/json")
            .body(Full::new(Bytes::copy_from_slice(body)))?;
        let response = match self {
            Conn::H1(send) => {
                send.ready().await?;
                send.send_request(request).await?
            }
            Conn::H2(send) => {
                send.ready().await?;
                send.send_request(request).await?
            }
        };
        let status = response.status().as_u16();
        let body = response.into_body().collect().await?.to_bytes().to_vec();
        Ok((status, body))
    }
}

/// Connects, POSTs once, returns the status, body and what was negotiated.
pub async fn post_once(
    addr: SocketAddr,
    config: Arc<ClientConfig>,
    body: &[u8],
) -> Result<(u16, Vec<u8>, Negotiated), BoxError> {
    let (mut conn, negotiated) = connect(addr, config).await?;
    let (status, body) = conn.post(body).await?;
    Ok((status, body, negotiated))
}

/// `GET path` over plain HTTP/1.0; returns the status code.
pub async fn get_status(addr: SocketAddr, path: &str) -> Result<u16, BoxError> {
    let mut tcp = TcpStream::connect(addr).await?;
    tcp.write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())
        .await?;
    let mut out = Vec::new();
    tcp.read_to_end(&mut out).await?;
    let text = String::from_utf8_lossy(&out);
    let code = text.split(' ').nth(1).ok_or("no status line")?.parse()?;
    Ok(code)
}

/// A loopback port that was free a moment ago (for a child process's listener).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A `pv-topology-webhook serve` process: HTTPS on `addr`, metrics on `metrics`.
pub struct ServeProcess {
    pub child: std::process::Child,
    pub addr: SocketAddr,
    pub metrics: SocketAddr,
}

/// Starts `pv-topology-webhook [global…] serve` with `files`, loopback ports and `args`
/// (stderr piped), and waits until `/readyz` answers 200; fails with the child's
/// output if it exits or is not ready within 20 s.
pub async fn spawn_serve(global: &[&str], files: &TlsFiles, args: &[&str]) -> ServeProcess {
    spawn_serve_env(global, files, args, &[]).await
}

/// [`spawn_serve`] with these environment variables set too.
pub async fn spawn_serve_env(global: &[&str], files: &TlsFiles, args: &[&str], env: &[(&str, &str)]) -> ServeProcess {
    use std::process::{Command, Stdio};
    let (port, metrics_port) = (free_port(), free_port());
    let mut child = Command::new(env!("CARGO_BIN_EXE_pv-topology-webhook"))
        .args(global)
        .arg("serve")
        .arg("--tls-cert-file")
        .arg(&files.cert.path)
        .arg("--tls-key-file")
        .arg(&files.key.path)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--metrics-listen", &format!("127.0.0.1:{metrics_port}")])
        .args(args)
        .envs(env.iter().copied())
        // serve writes nothing there; a child leaked by a failed test must not hold the
        // test harness's output open.
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let metrics: SocketAddr = format!("127.0.0.1:{metrics_port}").parse().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while get_status(metrics, "/readyz").await.ok() != Some(200) {
        if std::time::Instant::now() > deadline || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            panic!("never ready: {:?}", child.wait_with_output().unwrap());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    ServeProcess {
        child,
        addr: format!("127.0.0.1:{port}").parse().unwrap(),
        metrics,
    }
}

/// Server settings for tests: loopback, ephemeral ports, fast reload, short delays.
pub fn test_config(files: TlsFiles) -> ServeConfig {
    ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        metrics_listen: "127.0.0.1:0".parse().unwrap(),
        tls: files,
        client_ca: None,
        reload_interval: Duration::from_millis(50),
        shutdown_delay: Duration::from_millis(0),
        drain_timeout: Duration::from_secs(10),
        limits: Default::default(),
    }
}

/// A running in-process server.
pub struct Running {
    pub addr: SocketAddr,
    pub metrics_addr: SocketAddr,
    pub state: AppState,
    pub stop: Option<tokio::sync::oneshot::Sender<()>>,
    pub task: tokio::task::JoinHandle<Result<(), pv_topology_webhook::server::ServeError>>,
}

impl Running {
    pub async fn start(config: ServeConfig, reviewer: Reviewer) -> Self {
        install_provider();
        let state = AppState::new(reviewer);
        let server = Server::bind(config, state.clone()).await.unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let addr = server.local_addr();
        let metrics_addr = server.metrics_addr();
        let task = tokio::spawn(server.run(async {
            let _ = stopped.await;
        }));
        Self {
            addr,
            metrics_addr,
            state,
            stop: Some(stop),
            task,
        }
    }

    /// Triggers the shutdown sequence.
    pub fn shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }

    /// Shuts down and waits for the server to return.
    pub async fn stop(mut self) {
        self.shutdown();
        tokio::time::timeout(Duration::from_secs(20), self.task)
            .await
            .expect("server did not stop")
            .unwrap()
            .unwrap();
    }
}

pub fn temp_path(dir: &tempfile::TempDir, name: &str) -> PathBuf {
    dir.path().join(name)
}

/// Waits until `check` holds, for at most 10 s (tests run on busy 2-core machines).
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !check().await {
        assert!(std::time::Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// A server's certificate from a fresh CA, and test settings serving it.
pub struct Fixture {
    _dir: tempfile::TempDir,
    pub ca: TestCa,
    pub config: ServeConfig,
}

pub fn fixture_config() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("ca");
    let config = test_config(write_pair(dir.path(), &ca.server()));
    Fixture { _dir: dir, ca, config }
}

pub fn alpn_client(ca_pem: &str, alpn: &[u8]) -> Arc<ClientConfig> {
    client_config(ca_pem, &[&rustls::version::TLS13], &[alpn], None)
}

/// A TLS connection with the handshake done and nothing sent.
pub async fn tls(addr: SocketAddr, config: Arc<ClientConfig>) -> TlsStream<TcpStream> {
    let tcp = TcpStream::connect(addr).await.unwrap();
    TlsConnector::from(config)
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap()
}

/// Reads until the server closes the connection (EOF or reset), for at most `within`;
/// returns what was read, or `None` when the connection is still open.
pub async fn closed_within(stream: &mut (impl AsyncRead + Unpin), within: Duration) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let read = async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(within, read).await.ok()?;
    Some(out)
}

/// Raw HTTP/2 frames, for what a well-behaved client library will not do.
pub mod raw_h2 {
    use tokio::io::{AsyncRead, AsyncReadExt as _};

    pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    pub const HEADERS: u8 = 0x1;
    pub const SETTINGS: u8 = 0x4;
    pub const PING: u8 = 0x6;
    pub const GOAWAY: u8 = 0x7;
    pub const WINDOW_UPDATE: u8 = 0x8;
    pub const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 0x3;
    pub const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;

    pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let len = payload.len() as u32;
        let mut out = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
        out.extend_from_slice(&stream.to_be_bytes());
        out.extend_from_slice(payload);
        out
    }

    /// The client preface and an empty SETTINGS frame.
    pub fn hello() -> Vec<u8> {
        let mut out = PREFACE.to_vec();
        out.extend(frame(SETTINGS, 0, 0, &[]));
        out
    }

    /// A HEADERS frame (END_HEADERS, not END_STREAM) opening a POST of `content_length`
    /// bytes, HPACK literals without Huffman coding.
    pub fn post_headers(stream: u32, content_length: usize) -> Vec<u8> {
        let mut block = Vec::new();
        for (name, value) in [
            (":method", "POST".to_owned()),
            (":scheme", "https".to_owned()),
            (":path", "/mutate".to_owned()),
            (":authority", "localhost".to_owned()),
            ("content-type", "application/json".to_owned()),
            ("content-length", content_length.to_string()),
        ] {
            block.push(0x00);
            block.push(name.len() as u8);
            block.extend_from_slice(name.as_bytes());
            block.push(value.len() as u8);
            block.extend_from_slice(value.as_bytes());
        }
        frame(HEADERS, 0x4, stream, &block)
    }

    /// The next frame: type, flags, stream and payload; `None` at EOF.
    pub async fn read_frame(stream: &mut (impl AsyncRead + Unpin)) -> Option<(u8, u8, u32, Vec<u8>)> {
        let mut head = [0u8; 9];
        stream.read_exact(&mut head).await.ok()?;
        let len = (usize::from(head[0]) << 16) | (usize::from(head[1]) << 8) | usize::from(head[2]);
        let id = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        let mut payload = vec![0u8; len];
        stream.read_exact(&mut payload).await.ok()?;
        Some((head[3], head[4], id, payload))
    }

    /// The types of the frames read until EOF.
    pub async fn frame_kinds(stream: &mut (impl AsyncRead + Unpin)) -> Vec<u8> {
        let mut kinds = Vec::new();
        while let Some((kind, _, _, _)) = read_frame(stream).await {
            kinds.push(kind);
        }
        kinds
    }

    /// The value of `id` in a SETTINGS payload.
    pub fn setting(payload: &[u8], id: u16) -> Option<u32> {
        payload.chunks_exact(6).find_map(|p| {
            (u16::from_be_bytes([p[0], p[1]]) == id).then(|| u32::from_be_bytes([p[2], p[3], p[4], p[5]]))
        })
    }
}
