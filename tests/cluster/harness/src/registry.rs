//! Image registries that require authentication, for the real node to pull
//! from: Debian's `docker-registry` (the CNCF distribution registry 2.8.2)
//! over TLS on 127.0.0.1, with either an htpasswd file (`htpasswd -Bbn`,
//! bcrypt) or a token service ([`TokenRealm`], written here from
//! distribution's token authentication specification: `docs/spec/auth/token.md`,
//! `oauth.md`, `jwt.md`), and `skopeo` to copy images in and out.
//!
//! ```text
//! let registry = Registry::start_htpasswd("alice", "secret")?;
//! push(&archive, &registry, "team/app:1", "alice:secret")?;   // skopeo copy
//! // containerd's certs.d/127.0.0.1:PORT/hosts.toml names registry.ca_path()
//!
//! let realm = TokenRealm::start(Check::ServiceAccountToken { kubeconfig, audience, accounts: None })?;
//! let registry = Registry::start_token(&realm)?;
//! push(&archive, &registry, "team/app:1", &realm.push_credentials())?;
//! ```
//!
//! Passwords and tokens are never written to a log: the realm logs who was
//! granted what or why it refused, the registry logs requests without their
//! Authorization header.

use std::collections::BTreeSet;
use std::fs;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::token_review::Reviewed;
use anyhow::{Context, Result, anyhow, bail};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    SigningKey,
};
use serde_json::{Value, json};

use crate::pki::{Pem, admin_client};
use crate::process::{Proc, free_port, wait_tcp};
use crate::random_hex;

/// The registry's name in its token configuration (`auth.token.service`),
/// the audience of the tokens the realm issues.
pub const TOKEN_SERVICE: &str = "registry.test";
/// The realm's name for itself (`iss`; the registry's `auth.token.issuer`).
pub const TOKEN_ISSUER: &str = "harness-token";
/// Debian's package of the CNCF distribution registry 2.8.2.
const DOCKER_REGISTRY: &str = "/usr/bin/docker-registry";
/// The account the realm grants `push` to (besides `pull`); everyone else gets `pull` only.
const PUSH_USER: &str = "harness-push";
/// How long a token the realm issues is valid.
const TOKEN_LIFETIME: Duration = Duration::from_secs(300);
/// Bounds on a request to the realm: its body, the whole connection, the TokenReview.
const MAX_BODY: usize = 64 * 1024;
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(30);
const TOKEN_REVIEW_TIMEOUT: Duration = Duration::from_secs(10);

fn keep_dir() -> bool {
    std::env::var_os("CLUSTER_KEEP_DIR").is_some()
}

/// A CA of the registry's own: it signs the registry's and the realm's
/// serving certificates and the realm's token-signing certificate.
struct Ca {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Ca {
    fn generate() -> Result<Ca> {
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, "cluster-harness-registry-ca");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate()?;
        let pem = params.self_signed(&key)?.pem();
        Ok(Ca {
            pem,
            issuer: Issuer::new(params, key),
        })
    }

    /// A pair with the ServerAuth usage: a serving certificate for `names`
    /// (empty: the token signer, which distribution verifies with Go's default
    /// ServerAuth usage against `rootcertbundle`). The certificate in DER.
    fn leaf(&self, common_name: &str, names: &[&str]) -> Result<(Vec<u8>, KeyPair)> {
        let mut params = CertificateParams::new(names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>())?;
        params.distinguished_name.push(DnType::CommonName, common_name);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok((cert.der().to_vec(), key))
    }

    fn serving(&self, names: &[&str]) -> Result<Pem> {
        let (der, key) = self.leaf("cluster-harness-registry", names)?;
        Ok(Pem {
            cert: pem_certificate(&der),
            key: key.serialize_pem(),
        })
    }
}

fn pem_certificate(der: &[u8]) -> String {
    let body = STANDARD.encode(der);
    let lines: Vec<&str> = body
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).expect("base64 is ASCII"))
        .collect();
    format!(
        "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
        lines.join("\n")
    )
}

/// A running `docker-registry serve` over TLS on 127.0.0.1, filesystem
/// storage in its own directory. Stopped (and the directory removed, unless
/// CLUSTER_KEEP_DIR is set) when dropped; on a panic its log's tail is printed.
pub struct Registry {
    dir: Option<tempfile::TempDir>,
    proc: Proc,
    port: u16,
    ca: PathBuf,
    cert_dir: PathBuf,
}

impl Registry {
    /// The registry with `auth.htpasswd`: one user, its password bcrypt-hashed
    /// by `htpasswd -Bbn` (distribution accepts bcrypt only).
    pub fn start_htpasswd(user: &str, password: &str) -> Result<Registry> {
        let ca = Ca::generate()?;
        Self::start_with_retry(&ca, |dir| {
            let out = Command::new("htpasswd")
                .args(["-Bbn", user, password])
                .output()
                .context("running htpasswd (apache2-utils; make node-tools installs it)")?;
            if !out.status.success() {
                // Its stderr names the problem, never the password.
                bail!(
                    "htpasswd -Bbn {user} failed: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                );
            }
            let file = dir.join("htpasswd");
            fs::write(&file, &out.stdout)?;
            Ok(json!({"htpasswd": {"realm": "cluster-harness", "path": file}}))
        })
    }

    /// The registry with `auth.token`: it sends clients to `realm`'s token
    /// endpoint and accepts the tokens it signs (`rootcertbundle`: the realm's CA).
    pub fn start_token(realm: &TokenRealm) -> Result<Registry> {
        let url = realm.url();
        let bundle = realm.ca_path().to_path_buf();
        Self::start_with_retry(&realm.ca, |_| {
            Ok(json!({"token": {
                "realm": url,
                "service": TOKEN_SERVICE,
                "issuer": TOKEN_ISSUER,
                "rootcertbundle": bundle,
            }}))
        })
    }

    // A free port is probed, then handed over: retry once on a lost race.
    fn start_with_retry(ca: &Ca, auth: impl Fn(&Path) -> Result<Value>) -> Result<Registry> {
        match Self::try_start(ca, &auth) {
            Ok(registry) => Ok(registry),
            Err(e) => {
                eprintln!("cluster-harness: registry start failed, once more: {e:#}");
                Self::try_start(ca, &auth)
            }
        }
    }

    fn try_start(ca: &Ca, auth: &impl Fn(&Path) -> Result<Value>) -> Result<Registry> {
        if !Path::new(DOCKER_REGISTRY).is_file() {
            bail!("{DOCKER_REGISTRY} is missing: make tools installs it (apt-get install docker-registry)");
        }
        let dir = tempfile::Builder::new().prefix("cluster-harness-registry-").tempdir()?;
        let root = dir.path().to_path_buf();
        let serving = ca.serving(&["127.0.0.1"])?;
        let cert = root.join("registry.crt");
        let key = root.join("registry.key");
        fs::write(&cert, &serving.cert)?;
        fs::write(&key, &serving.key)?;
        let ca_path = root.join("ca.crt");
        fs::write(&ca_path, &ca.pem)?;
        // skopeo --cert-dir, buildah push --cert-dir: a directory with ca.crt.
        let cert_dir = root.join("certs");
        fs::create_dir(&cert_dir)?;
        fs::write(cert_dir.join("ca.crt"), &ca.pem)?;

        let (port, listener) = free_port()?;
        drop(listener);
        let config = json!({
            "version": "0.1",
            "log": {"level": "info", "formatter": "text", "fields": {"service": "registry"}},
            "storage": {"filesystem": {"rootdirectory": root.join("data")}},
            "http": {
                "addr": format!("127.0.0.1:{port}"),
                "secret": random_hex(16),
                "tls": {"certificate": cert, "key": key},
            },
            "auth": auth(&root)?,
        });
        let config_path = root.join("config.yml");
        fs::write(&config_path, serde_yaml_ng::to_string(&config)?)?;

        let args = vec!["serve".to_owned(), config_path.display().to_string()];
        let log = root.join("registry.log");
        let mut proc = Proc::spawn("docker-registry", Path::new(DOCKER_REGISTRY), &args, log, &root)?;
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse()?;
        if let Err(e) = wait_tcp(addr, &mut proc, Duration::from_secs(30)) {
            let tail = proc.tail(4000);
            proc.stop();
            bail!("{e:#}; its log:\n{tail}");
        }
        Ok(Registry {
            dir: Some(dir),
            proc,
            port,
            ca: ca_path,
            cert_dir,
        })
    }

    /// `127.0.0.1:PORT`: the registry part of image names.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The CA (PEM) that signed the registry's certificate (and the realm's):
    /// what containerd's `certs.d/HOST/hosts.toml` names as `ca`.
    pub fn ca_path(&self) -> &Path {
        &self.ca
    }

    /// A directory holding the CA as `ca.crt`: `skopeo --cert-dir`,
    /// `buildah push --cert-dir`.
    pub fn cert_dir(&self) -> &Path {
        &self.cert_dir
    }

    /// The registry's log file.
    pub fn log(&self) -> &Path {
        &self.proc.log
    }

    /// The registry's whole log.
    pub fn log_text(&self) -> String {
        fs::read_to_string(&self.proc.log).unwrap_or_default()
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "cluster-harness: --- registry {} log ({}) ---\n{}",
                self.host(),
                self.proc.log.display(),
                self.proc.tail(8000)
            );
        }
        self.proc.stop();
        if let Some(dir) = self.dir.take()
            && keep_dir()
        {
            eprintln!("cluster-harness: keeping {}", dir.keep().display());
        }
    }
}

/// An `auth.json` (containers-auth.json(5)) in a private temporary
/// directory, removed when dropped: skopeo and buildah read credentials
/// from it (`--authfile`), so they are in no command line and no error message.
pub struct AuthFile {
    dir: tempfile::TempDir,
}

impl AuthFile {
    pub fn path(&self) -> PathBuf {
        self.dir.path().join("auth.json")
    }
}

impl Registry {
    /// An auth file with `creds` (`user:password`) for this registry;
    /// `None`: an empty one (anonymous, whatever the host's own files hold).
    pub fn auth_file(&self, creds: Option<&str>) -> Result<AuthFile> {
        // In the registry's directory, which the guard removes if the test process is killed.
        let dir = tempfile::Builder::new()
            .prefix("auth-")
            .tempdir_in(self.dir.as_ref().expect("the registry's directory").path())?;
        let auths = match creds {
            Some(creds) => json!({ self.host(): {"auth": STANDARD.encode(creds)} }),
            None => json!({}),
        };
        let mut file = {
            use std::os::unix::fs::OpenOptionsExt;
            fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(dir.path().join("auth.json"))?
        };
        file.write_all(json!({ "auths": auths }).to_string().as_bytes())?;
        Ok(AuthFile { dir })
    }

    /// `--cert-dir DIR --authfile FILE`: the `PUSH_FLAGS` of `make push`
    /// (`buildah push`) for this registry, TLS verified with its CA.
    pub fn push_flags(&self, auth: &AuthFile) -> String {
        format!(
            "--cert-dir {} --authfile {}",
            self.cert_dir.display(),
            auth.path().display()
        )
    }
}

/// Runs skopeo; its stderr (never holding the credentials) as the error.
fn skopeo(args: &[&str]) -> Result<()> {
    let out = Command::new("skopeo")
        .args(["--command-timeout", "120s"])
        .args(args)
        .output()
        .context("running skopeo (make node-tools installs it)")?;
    if !out.status.success() {
        bail!(
            "skopeo {} failed ({}): {}",
            args.first().unwrap_or(&""),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Copies the oci-archive `archive` into `registry` as `repository_and_tag`
/// (`team/app:1`), logging in as `creds` (`user:password`); TLS verified with
/// the registry's CA.
pub fn push(archive: &Path, registry: &Registry, repository_and_tag: &str, creds: &str) -> Result<()> {
    let auth = registry.auth_file(Some(creds))?;
    let auth_path = auth.path();
    skopeo(&[
        "copy",
        "--quiet",
        "--dest-authfile",
        &auth_path.display().to_string(),
        "--dest-cert-dir",
        &registry.cert_dir().display().to_string(),
        &format!("oci-archive:{}", archive.display()),
        &format!("docker://{}/{repository_and_tag}", registry.host()),
    ])
}

/// Copies `repository_and_tag` out of `registry` (manifest, config and
/// layers, digests checked) into a temporary OCI layout, as `creds`
/// (`user:password`) or anonymously; the error is skopeo's message.
pub fn pull(registry: &Registry, repository_and_tag: &str, creds: Option<&str>) -> Result<()> {
    let auth = registry.auth_file(creds)?;
    let auth_path = auth.path();
    let layout = auth.dir.path().join("image");
    skopeo(&[
        "copy",
        "--quiet",
        "--src-authfile",
        &auth_path.display().to_string(),
        "--src-cert-dir",
        &registry.cert_dir().display().to_string(),
        &format!("docker://{}/{repository_and_tag}", registry.host()),
        &format!("oci:{}", layout.display()),
    ])
}

/// How the realm checks the password of a token request.
#[derive(Clone, Debug)]
pub enum Check {
    /// One user and its password.
    Password { user: String, password: String },
    /// KEP-4412: the password is a Kubernetes service-account token, checked
    /// by a TokenReview (`spec.audiences: [audience]`) against the cluster of
    /// `kubeconfig` (its user must be allowed to create TokenReviews). The
    /// token must be authenticated for `audience` as a service account
    /// (`system:serviceaccount:NS:NAME`), and one of `accounts` (`NS/NAME`)
    /// when given. The user name of the request is not looked at.
    ServiceAccountToken {
        kubeconfig: PathBuf,
        audience: String,
        accounts: Option<Vec<String>>,
    },
}

/// One token the realm issued.
#[derive(Clone, Debug)]
pub struct Grant {
    /// The identity: the user, or `system:serviceaccount:NS:NAME`.
    pub subject: String,
    /// The scopes asked for (space-separated, as in the request).
    pub requested: String,
    /// What the token grants: `repository:NAME:ACTIONS`, space-separated.
    pub granted: String,
    pub at: SystemTime,
}

/// What every run of the realm shares: the check, the signer, the grants, the log.
struct RealmState {
    check: Check,
    push_password: String,
    signer_der: Vec<u8>,
    signer: KeyPair,
    grants: Mutex<Vec<Grant>>,
    log: Mutex<fs::File>,
}

impl RealmState {
    fn log(&self, line: &str) {
        let stamp = humantime::format_rfc3339_millis(SystemTime::now());
        let mut file = self.log.lock().expect("the realm's log");
        let _ = writeln!(file, "{stamp} {line}");
    }
}

/// The token service of a registry with `auth.token`, on
/// `https://127.0.0.1:PORT/token` (its own thread and runtime, so a test
/// may block on skopeo while the realm answers). GET with Basic auth (skopeo,
/// docker) and POST with `grant_type=password` (containerd) both get
/// `{"token", "access_token", "expires_in", "issued_at"}`: an ES256 JWT whose
/// header's `x5c` holds the signing certificate (signed by the realm's CA),
/// granting `pull` of each repository asked for (`push` too for
/// [`TokenRealm::push_credentials`] only). A failed check is a 401 with a
/// JSON error. Stopped when dropped.
pub struct TokenRealm {
    dir: Option<tempfile::TempDir>,
    ca: Ca,
    ca_path: PathBuf,
    log: PathBuf,
    port: u16,
    state: Arc<RealmState>,
    server: Option<RealmServer>,
    /// While stopped: the port bound but not listening, so connections are
    /// refused and no other socket (an outgoing one's ephemeral port) takes it.
    reserved: Option<socket2::Socket>,
}

/// A socket bound to 127.0.0.1:`port`, not listening.
fn reserve(port: u16) -> std::io::Result<socket2::Socket> {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.bind(&SocketAddr::from(([127, 0, 0, 1], port)).into())?;
    Ok(socket)
}

struct RealmServer {
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RealmServer {
    fn stop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl TokenRealm {
    /// Starts the realm on a free port of 127.0.0.1.
    pub fn start(check: Check) -> Result<TokenRealm> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::Builder::new().prefix("cluster-harness-realm-").tempdir()?;
        let ca = Ca::generate()?;
        let ca_path = dir.path().join("ca.crt");
        fs::write(&ca_path, &ca.pem)?;
        let (signer_der, signer) = ca.leaf("cluster-harness-token-signer", &[])?;
        let log = dir.path().join("realm.log");
        let state = Arc::new(RealmState {
            check,
            push_password: random_hex(16),
            signer_der,
            signer,
            grants: Mutex::new(Vec::new()),
            log: Mutex::new(fs::File::create(&log)?),
        });
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let mut realm = TokenRealm {
            dir: Some(dir),
            ca,
            ca_path,
            log,
            port,
            state,
            server: None,
            reserved: None,
        };
        realm.serve(listener)?;
        Ok(realm)
    }

    fn serve(&mut self, listener: std::net::TcpListener) -> Result<()> {
        let (der, key) = self.ca.leaf("cluster-harness-token-realm", &["127.0.0.1"])?;
        let tls = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(
                vec![der.into()],
                rustls::pki_types::PrivatePkcs8KeyDer::from(key.serialize_der()).into(),
            )?;
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        listener.set_nonblocking(true)?;
        let (shutdown, stopped) = tokio::sync::oneshot::channel::<()>();
        let state = self.state.clone();
        let thread = std::thread::Builder::new().name("token-realm".into()).spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("the realm's runtime");
            runtime.block_on(accept_loop(listener, acceptor, state, stopped));
            // Dropping the runtime drops the open connections.
        })?;
        self.server = Some(RealmServer {
            shutdown: Some(shutdown),
            thread: Some(thread),
        });
        self.state.log(&format!("listening on 127.0.0.1:{}", self.port));
        Ok(())
    }

    /// `https://127.0.0.1:PORT/token`: the registry's `auth.token.realm`.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}/token", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The CA (PEM) of the realm's serving and signing certificates, and of
    /// the registries started with [`Registry::start_token`].
    pub fn ca_path(&self) -> &Path {
        &self.ca_path
    }

    /// `harness-push:PASSWORD`: the one account granted `push` too.
    pub fn push_credentials(&self) -> String {
        format!("{PUSH_USER}:{}", self.state.push_password)
    }

    /// Every token issued so far, oldest first.
    pub fn grants(&self) -> Vec<Grant> {
        self.state.grants.lock().expect("the grants").clone()
    }

    /// The realm's log file: one line per request (who got what, or why not).
    pub fn log(&self) -> &Path {
        &self.log
    }

    pub fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Stops serving: open connections are dropped, new ones refused; the
    /// port stays reserved for [`TokenRealm::start_again`].
    pub fn stop(&mut self) {
        if self.halt() {
            match reserve(self.port) {
                Ok(socket) => self.reserved = Some(socket),
                Err(e) => self.state.log(&format!("cannot reserve port {}: {e}", self.port)),
            }
            self.state.log("stopped");
        }
    }

    fn halt(&mut self) -> bool {
        let Some(mut server) = self.server.take() else {
            return false;
        };
        server.stop();
        true
    }

    /// Serves again on the same port (after [`TokenRealm::stop`]).
    pub fn start_again(&mut self) -> Result<()> {
        self.stop();
        let socket = match self.reserved.take() {
            Some(socket) => socket,
            None => reserve(self.port).with_context(|| format!("binding the realm's port {} again", self.port))?,
        };
        socket.listen(128)?;
        self.serve(socket.into())
    }
}

impl Drop for TokenRealm {
    fn drop(&mut self) {
        self.halt();
        if std::thread::panicking() {
            eprintln!(
                "cluster-harness: --- token realm log ({}) ---\n{}",
                self.log.display(),
                self.log_text()
            );
        }
        if let Some(dir) = self.dir.take()
            && keep_dir()
        {
            eprintln!("cluster-harness: keeping {}", dir.keep().display());
        }
    }
}

async fn accept_loop(
    listener: std::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    state: Arc<RealmState>,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            state.log(&format!("cannot listen: {e}"));
            return;
        }
    };
    // One client per run of the server: a kube::Client lives on the runtime that made it.
    let client = Arc::new(tokio::sync::OnceCell::new());
    loop {
        tokio::select! {
            _ = &mut stopped => return,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let (acceptor, state, client) = (acceptor.clone(), state.clone(), client.clone());
                tokio::spawn(async move {
                    let served = async {
                        let tls = acceptor.accept(stream).await?;
                        let service = hyper::service::service_fn(|request| {
                            let (state, client) = (state.clone(), client.clone());
                            async move { Ok::<_, std::convert::Infallible>(answer(request, &state, &client).await) }
                        });
                        hyper::server::conn::http1::Builder::new()
                            .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                            .await
                            .map_err(std::io::Error::other)
                    };
                    let _ = tokio::time::timeout(CONNECTION_TIMEOUT, served).await;
                });
            }
        }
    }
}

type ClientCell = tokio::sync::OnceCell<kube::Client>;

/// A token request as the spec's GET and the OAuth2 POST both carry it.
#[derive(Debug, Default, PartialEq)]
struct TokenRequest {
    user: Option<String>,
    password: Option<String>,
    service: Option<String>,
    scopes: Vec<String>,
}

fn json_response(status: StatusCode, body: &Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

fn refusal(status: StatusCode, code: &str, message: &str) -> Response<Full<Bytes>> {
    let mut response = json_response(status, &json!({"errors": [{"code": code, "message": message}]}));
    if status == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(
            http::header::WWW_AUTHENTICATE,
            http::HeaderValue::from_static("Basic realm=\"cluster-harness-token\""),
        );
    }
    response
}

async fn answer(request: Request<Incoming>, state: &RealmState, client: &ClientCell) -> Response<Full<Bytes>> {
    let method = request.method().clone();
    if request.uri().path() != "/token" {
        state.log(&format!("{method} {}: not found", request.uri().path()));
        return refusal(StatusCode::NOT_FOUND, "NOT_FOUND", "the token endpoint is /token");
    }
    let parsed = match method {
        Method::GET => parse_get(request.uri().query().unwrap_or(""), request.headers()),
        Method::POST => match Limited::new(request.into_body(), MAX_BODY).collect().await {
            Ok(body) => parse_post(&body.to_bytes()),
            Err(_) => Err(format!("the body is unreadable or over {MAX_BODY} bytes")),
        },
        _ => Err("only GET and POST".to_owned()),
    };
    let request = match parsed {
        Ok(r) => r,
        Err(why) => {
            state.log(&format!("{method} /token: bad request: {why}"));
            return refusal(StatusCode::BAD_REQUEST, "INVALID_REQUEST", &why);
        }
    };
    if request.service.as_deref() != Some(TOKEN_SERVICE) {
        let why = format!("service must be {TOKEN_SERVICE}");
        state.log(&format!("{method} /token: bad request: {why}"));
        return refusal(StatusCode::BAD_REQUEST, "INVALID_REQUEST", &why);
    }
    let requested = request.scopes.join(" ");
    let (subject, may_push) = match identify(&request, state, client).await {
        Ok(who) => who,
        Err(why) => {
            state.log(&format!("{method} /token: refused ({requested}): {why}"));
            return refusal(StatusCode::UNAUTHORIZED, "UNAUTHORIZED", &why);
        }
    };
    let access = granted_access(&request.scopes, may_push);
    let granted = access
        .iter()
        .map(|a| format!("repository:{}:{}", a.0, a.1.join(",")))
        .collect::<Vec<_>>()
        .join(" ");
    let now = SystemTime::now();
    let token = match sign_token(state, &subject, &access, now) {
        Ok(t) => t,
        Err(e) => {
            state.log(&format!("{method} /token: cannot sign: {e:#}"));
            return refusal(StatusCode::INTERNAL_SERVER_ERROR, "UNKNOWN", "cannot sign a token");
        }
    };
    state.log(&format!(
        "{method} /token: granted {subject} [{granted}] (asked [{requested}])"
    ));
    state.grants.lock().expect("the grants").push(Grant {
        subject,
        requested,
        granted,
        at: now,
    });
    json_response(
        StatusCode::OK,
        &json!({
            "token": token,
            "access_token": token,
            "expires_in": TOKEN_LIFETIME.as_secs(),
            "issued_at": humantime::format_rfc3339_seconds(now).to_string(),
        }),
    )
}

/// GET /token?service=…&scope=…: credentials in the Authorization header (Basic).
fn parse_get(query: &str, headers: &http::HeaderMap) -> Result<TokenRequest, String> {
    let mut request = TokenRequest::default();
    for (key, value) in url::form_urlencoded::parse(query.as_bytes()) {
        match &*key {
            "service" => request.service = Some(value.into_owned()),
            "scope" => request.scopes.extend(value.split_whitespace().map(str::to_owned)),
            _ => {}
        }
    }
    if let Some(value) = headers.get(http::header::AUTHORIZATION) {
        let basic = value
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Basic "))
            .and_then(|b| STANDARD.decode(b.trim()).ok())
            .and_then(|b| String::from_utf8(b).ok())
            .ok_or("the Authorization header is not Basic user:password")?;
        let (user, password) = basic
            .split_once(':')
            .ok_or("the Authorization header is not Basic user:password")?;
        request.user = Some(user.to_owned());
        request.password = Some(password.to_owned());
    }
    Ok(request)
}

/// POST /token, form `grant_type=password&username&password&service&scope`
/// (scopes space-separated), as containerd sends it.
fn parse_post(body: &[u8]) -> Result<TokenRequest, String> {
    let mut request = TokenRequest::default();
    let mut grant_type = None;
    for (key, value) in url::form_urlencoded::parse(body) {
        match &*key {
            "grant_type" => grant_type = Some(value.into_owned()),
            "username" => request.user = Some(value.into_owned()),
            "password" => request.password = Some(value.into_owned()),
            "service" => request.service = Some(value.into_owned()),
            "scope" => request.scopes.extend(value.split_whitespace().map(str::to_owned)),
            _ => {}
        }
    }
    match grant_type.as_deref() {
        Some("password") => Ok(request),
        Some(other) => Err(format!("grant_type {other:?} is not supported (only password)")),
        None => Err("grant_type is missing".to_owned()),
    }
}

/// Who asks: (subject, whether it may push); the error says why not, never
/// repeating the password.
async fn identify(request: &TokenRequest, state: &RealmState, client: &ClientCell) -> Result<(String, bool), String> {
    let (Some(user), Some(password)) = (&request.user, &request.password) else {
        return Err("authentication required".to_owned());
    };
    if user == PUSH_USER {
        return match *password == state.push_password {
            true => Ok((user.clone(), true)),
            false => Err(format!("wrong password for {PUSH_USER}")),
        };
    }
    match &state.check {
        Check::Password {
            user: expected,
            password: secret,
        } => match user == expected && password == secret {
            true => Ok((user.clone(), false)),
            false => Err("wrong user or password".to_owned()),
        },
        Check::ServiceAccountToken {
            kubeconfig,
            audience,
            accounts,
        } => {
            let client = client
                .get_or_try_init(|| admin_client(kubeconfig))
                .await
                .map_err(|e| format!("no client for the TokenReview: {e:#}"))?;
            let reviewed = crate::token_review::review(client, password, audience, TOKEN_REVIEW_TIMEOUT).await?;
            service_account_verdict(&reviewed, audience, accounts.as_deref()).map(|subject| (subject, false))
        }
    }
}

/// The TokenReview's answer judged: the subject, or why not.
fn service_account_verdict(reviewed: &Reviewed, audience: &str, accounts: Option<&[String]>) -> Result<String, String> {
    if !reviewed.authenticated {
        return Err(format!(
            "the TokenReview did not authenticate the token for audience {audience}: {}",
            reviewed.error.as_deref().unwrap_or("no error given")
        ));
    }
    if !reviewed.valid_for(audience) {
        return Err(format!(
            "the token's audiences {:?} do not include {audience}",
            reviewed.audiences
        ));
    }
    let username = &reviewed.username;
    let account = reviewed
        .service_account()
        .map(|(namespace, name)| format!("{namespace}/{name}"))
        .ok_or_else(|| format!("{username} is not a service account"))?;
    if let Some(accounts) = accounts
        && !accounts.contains(&account)
    {
        return Err(format!("the service account {account} may not pull here"));
    }
    Ok(username.clone())
}

/// Per repository asked for: the actions granted, in the order asked for
/// (`pull`, and `push` only for the push account); other resource types get nothing.
fn granted_access(scopes: &[String], may_push: bool) -> Vec<(String, Vec<String>)> {
    let mut access: Vec<(String, Vec<String>)> = Vec::new();
    for scope in scopes {
        let Some(("repository", rest)) = scope.split_once(':') else {
            continue;
        };
        let Some((name, actions)) = rest.rsplit_once(':') else {
            continue;
        };
        let allowed: BTreeSet<&str> = actions
            .split(',')
            .filter(|a| *a == "pull" || (may_push && *a == "push"))
            .collect();
        if name.is_empty() || allowed.is_empty() {
            continue;
        }
        match access.iter_mut().find(|(n, _)| n == name) {
            Some((_, have)) => {
                for action in allowed {
                    if !have.iter().any(|h| h == action) {
                        have.push(action.to_owned());
                    }
                }
            }
            None => access.push((name.to_owned(), allowed.into_iter().map(str::to_owned).collect())),
        }
    }
    access
}

fn sign_token(state: &RealmState, subject: &str, access: &[(String, Vec<String>)], now: SystemTime) -> Result<String> {
    let now_s = now.duration_since(UNIX_EPOCH)?.as_secs();
    let claims = json!({
        "iss": TOKEN_ISSUER,
        "sub": subject,
        // distribution 2.8's ClaimSet.Audience is one string.
        "aud": TOKEN_SERVICE,
        "exp": now_s + TOKEN_LIFETIME.as_secs(),
        "nbf": now_s,
        "iat": now_s,
        "jti": random_hex(16),
        "access": access
            .iter()
            .map(|(name, actions)| json!({"type": "repository", "name": name, "actions": actions}))
            .collect::<Vec<_>>(),
    });
    jwt_es256(
        &json!({"x5c": [STANDARD.encode(&state.signer_der)]}),
        &claims,
        &state.signer,
    )
}

/// A compact JWS (RFC 7515) of `claims`, signed ES256 with `key` (an ECDSA
/// P-256 key); `header` adds fields (`x5c`, `kid`) to `{"typ": "JWT", "alg": "ES256"}`.
pub fn jwt_es256(header: &Value, claims: &Value, key: &KeyPair) -> Result<String> {
    if key.algorithm() != &rcgen::PKCS_ECDSA_P256_SHA256 {
        bail!("ES256 needs an ECDSA P-256 key");
    }
    let mut fields = json!({"typ": "JWT", "alg": "ES256"});
    if let (Some(fields), Some(extra)) = (fields.as_object_mut(), header.as_object()) {
        fields.extend(extra.clone());
    }
    let input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(fields.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let der = key.sign(input.as_bytes())?;
    let signature = jose_signature(&der)?;
    Ok(format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature)))
}

/// ECDSA's DER `SEQUENCE { INTEGER r, INTEGER s }` (what ring signs for
/// X.509) as JOSE's fixed-width `r || s`, 32 bytes each for P-256 (RFC 7518 §3.4).
fn jose_signature(der: &[u8]) -> Result<[u8; 64]> {
    fn integer(bytes: &[u8]) -> Result<(&[u8], &[u8])> {
        match bytes {
            [0x02, len, rest @ ..] if (*len as usize) <= rest.len() => Ok(rest.split_at(*len as usize)),
            _ => bail!("not a DER INTEGER"),
        }
    }
    fn place(int: &[u8], out: &mut [u8]) -> Result<()> {
        let start = int.iter().position(|b| *b != 0).unwrap_or(int.len());
        let int = &int[start..];
        if int.len() > out.len() {
            bail!("an ECDSA integer of {} bytes for P-256", int.len());
        }
        let offset = out.len() - int.len();
        out[offset..].copy_from_slice(int);
        Ok(())
    }
    let body = match der {
        [0x30, len, rest @ ..] if *len as usize == rest.len() => rest,
        _ => bail!("not a DER ECDSA signature"),
    };
    let (r, rest) = integer(body)?;
    let (s, rest) = integer(rest)?;
    if !rest.is_empty() {
        return Err(anyhow!("trailing bytes after an ECDSA signature"));
    }
    let mut out = [0u8; 64];
    place(r, &mut out[..32])?;
    place(s, &mut out[32..])?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn der_signatures_become_fixed_width() {
        // r with a leading zero (high bit set), s short.
        let mut der = vec![0x30, 0x00, 0x02, 33, 0x00];
        der.extend([0x80; 32]);
        der.extend([0x02, 2, 0x01, 0x02]);
        der[1] = (der.len() - 2) as u8;
        let fixed = jose_signature(&der).expect("a signature");
        assert_eq!(&fixed[..32], &[0x80; 32]);
        assert_eq!(&fixed[32..62], &[0; 30]);
        assert_eq!(&fixed[62..], &[1, 2]);
        assert!(jose_signature(&der[..der.len() - 1]).is_err());
        assert!(jose_signature(&[0x30, 0]).is_err());
    }

    #[test]
    fn only_pull_is_granted_but_to_the_push_account() {
        let scopes = vec![
            "repository:team/app:pull,push".to_owned(),
            "repository:team/app:delete".to_owned(),
            "registry:catalog:*".to_owned(),
            "repository:other:push".to_owned(),
        ];
        assert_eq!(
            granted_access(&scopes, false),
            vec![("team/app".to_owned(), vec!["pull".to_owned()])]
        );
        assert_eq!(
            granted_access(&scopes, true),
            vec![
                ("team/app".to_owned(), vec!["pull".to_owned(), "push".to_owned()]),
                ("other".to_owned(), vec!["push".to_owned()]),
            ]
        );
    }

    #[test]
    fn requests_are_read_as_get_and_post_send_them() {
        let mut headers = http::HeaderMap::new();
        headers.insert(
            http::header::AUTHORIZATION,
            format!("Basic {}", STANDARD.encode("u:p:w")).parse().expect("a header"),
        );
        let get = parse_get(
            "service=registry.test&scope=repository%3Aa%3Apull&scope=repository:b:pull",
            &headers,
        )
        .expect("a GET");
        assert_eq!(get.user.as_deref(), Some("u"));
        assert_eq!(get.password.as_deref(), Some("p:w"));
        assert_eq!(get.scopes, ["repository:a:pull", "repository:b:pull"]);
        let post = parse_post(b"grant_type=password&username=u&password=p%2Bq&service=s&scope=repository:a:pull+repository:b:pull&client_id=containerd-client")
            .expect("a POST");
        assert_eq!(post.password.as_deref(), Some("p+q"));
        assert_eq!(post.scopes, ["repository:a:pull", "repository:b:pull"]);
        assert!(parse_post(b"grant_type=refresh_token&refresh_token=x").is_err());
    }

    #[test]
    fn the_token_review_is_judged() {
        let aud = "registry.test/pull";
        let sa = "system:serviceaccount:team:puller";
        let reviewed = |authenticated: bool, audiences: &[&str], username: &str, error: Option<&str>| Reviewed {
            authenticated,
            audiences: audiences.iter().map(|a| a.to_string()).collect(),
            username: username.to_owned(),
            error: error.map(str::to_owned),
        };
        let ok =
            |accounts: Option<&[String]>| service_account_verdict(&reviewed(true, &[aud], sa, None), aud, accounts);
        assert_eq!(ok(None).as_deref(), Ok(sa));
        assert_eq!(ok(Some(&["team/puller".to_owned()])).as_deref(), Ok(sa));
        assert!(ok(Some(&["team/other".to_owned()])).is_err());
        let expired = reviewed(false, &[], "", Some("token has expired"));
        assert!(service_account_verdict(&expired, aud, None).is_err());
        assert!(service_account_verdict(&reviewed(true, &["other"], sa, None), aud, None).is_err());
        assert!(service_account_verdict(&reviewed(true, &[aud], "alice", None), aud, None).is_err());
    }
}
