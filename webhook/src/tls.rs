//! The serving certificate: loaded from PEM files, handed to rustls through a
//! [`ResolvesServerCert`] over an [`ArcSwap`], and reloaded by polling the files'
//! contents. Reading through the paths on every poll sees a Kubernetes Secret volume's
//! `..data` symlink swap, which a watch on the file itself can miss; a pair that does not
//! load keeps the last good one in service.
//!
//! The module does not know the command line: each file comes as a [`NamedFile`], with
//! the name the operator knows it by (the CLI layer gives the flag), and every error or
//! warning about a file begins with that name and the path.

mod client_ca;

use std::fmt;
use std::hash::{DefaultHasher, Hash as _, Hasher as _};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;
use cloud_access::files::{FileError, read_regular};
use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use thiserror::Error;

pub use self::client_ca::ClientCaVerifier;
use self::client_ca::WatchedClientCa;
use crate::metrics::Metrics;

/// ALPN protocols offered, in preference order; kube-apiserver asks for HTTP/2.
pub const ALPN_PROTOCOLS: [&[u8]; 2] = [b"h2", b"http/1.1"];
/// Largest certificate, key or CA file read: a chain or a CA bundle is a few KiB (the
/// whole Mozilla bundle is about 220 KiB).
pub const MAX_PEM_FILE_BYTES: u64 = 1024 * 1024;
/// The serving certificate is warned about when less than this is left of it, or less
/// than a third of its lifetime if that is shorter (cert-manager renews with a third
/// left, so a certificate inside the window was not renewed when it should have been).
pub const EXPIRY_WARNING: Duration = Duration::from_secs(7 * 86_400);

/// Why a certificate, key or CA file could not be used.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum TlsError {
    /// `name` is the file's [`NamedFile::name`]; `source` gives the path.
    #[error("{name} {source}")]
    Read {
        name: &'static str,
        #[source]
        source: FileError,
    },
    #[error("{file}: {reason}")]
    Invalid { file: NamedFile, reason: String },
    #[error("{key} does not fit {cert}: {reason}")]
    Mismatch {
        cert: NamedFile,
        key: NamedFile,
        reason: String,
    },
    #[error("cannot build the TLS configuration: {0}")]
    Config(String),
}

/// A file the operator gave, and the name they know it by (the CLI layer gives the
/// command-line flag that named it): messages about the file begin with `name path`
/// (its [`Display`](fmt::Display)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedFile {
    pub name: &'static str,
    pub path: PathBuf,
}

impl NamedFile {
    /// The file at `path`, known as `name`.
    pub fn new(name: &'static str, path: impl Into<PathBuf>) -> Self {
        Self {
            name,
            path: path.into(),
        }
    }

    fn invalid(&self, reason: String) -> TlsError {
        TlsError::Invalid {
            file: self.clone(),
            reason,
        }
    }
}

impl fmt::Display for NamedFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.name, self.path.display())
    }
}

/// Where the serving certificate and key are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: NamedFile,
    pub key: NamedFile,
}

/// What we report about a loaded serving certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertInfo {
    /// The leaf's serial number, hex with `:` separators.
    pub serial: String,
    /// The leaf's notBefore, in Unix seconds.
    pub not_before: i64,
    /// The leaf's notAfter, in Unix seconds.
    pub not_after: i64,
    /// Certificates in the chain, leaf included.
    pub chain_len: usize,
}

/// The crypto provider the server uses; the same one whatever the process default is.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Parses a PEM chain and key into a [`CertifiedKey`], checking that the key is the
/// leaf's.
pub fn certified_key(files: &TlsFiles, cert_pem: &[u8], key_pem: &[u8]) -> Result<(CertifiedKey, CertInfo), TlsError> {
    let chain = read_certs(&files.cert, cert_pem)?;
    let key = PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|e| files.key.invalid(format!("no usable PEM private key: {e}")))?;
    let info = cert_info(&files.cert, &chain)?;
    let certified = CertifiedKey::from_der(chain, key, &provider()).map_err(|e| TlsError::Mismatch {
        cert: files.cert.clone(),
        key: files.key.clone(),
        reason: e.to_string(),
    })?;
    Ok((certified, info))
}

fn read_certs(file: &NamedFile, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let invalid = |reason: String| file.invalid(reason);
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(format!("bad PEM: {e}")))?;
    if certs.is_empty() {
        return Err(invalid("no PEM CERTIFICATE block".to_owned()));
    }
    Ok(certs)
}

fn cert_info(file: &NamedFile, chain: &[CertificateDer<'_>]) -> Result<CertInfo, TlsError> {
    let leaf = chain.first().ok_or_else(|| file.invalid("no certificate".to_owned()))?;
    let (_, parsed) = x509_parser::parse_x509_certificate(leaf)
        .map_err(|e| file.invalid(format!("the first certificate is not X.509: {e}")))?;
    Ok(CertInfo {
        serial: parsed.raw_serial_as_string(),
        not_before: parsed.validity().not_before.timestamp(),
        not_after: parsed.validity().not_after.timestamp(),
        chain_len: chain.len(),
    })
}

/// Reads a PEM file: a regular file (a FIFO or device is refused, not waited on or read
/// without end) of at most [`MAX_PEM_FILE_BYTES`].
fn read_file(file: &NamedFile) -> Result<Vec<u8>, TlsError> {
    read_regular(&file.path, MAX_PEM_FILE_BYTES).map_err(|source| TlsError::Read {
        name: file.name,
        source,
    })
}

/// Where the serving certificate stands in its validity period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Validity {
    /// Before notBefore: clients refuse it (a clock is wrong, or it was issued early).
    NotYetValid,
    Valid,
    /// Inside the warning window before notAfter (see [`EXPIRY_WARNING`]).
    ExpiringSoon,
    /// After notAfter: clients refuse it.
    Expired,
}

impl CertInfo {
    /// How long before notAfter the certificate is [`Validity::ExpiringSoon`], in seconds.
    pub fn warning_window(&self) -> i64 {
        let lifetime = self.not_after.saturating_sub(self.not_before).max(0);
        (lifetime / 3).min(EXPIRY_WARNING.as_secs() as i64)
    }

    /// The certificate's validity at `now` (Unix seconds); notBefore and notAfter are
    /// both inside the validity period, as in X.509.
    pub fn validity_at(&self, now: i64) -> Validity {
        if now < self.not_before {
            Validity::NotYetValid
        } else if now > self.not_after {
            Validity::Expired
        } else if self.not_after - now <= self.warning_window() {
            Validity::ExpiringSoon
        } else {
            Validity::Valid
        }
    }
}

/// Says what is wrong with the serving certificate's validity once per change, not on
/// every check: the reload loop checks at every tick.
#[derive(Debug, Clone, Default)]
pub struct ExpiryWatch {
    last: Option<Validity>,
}

impl ExpiryWatch {
    /// The warning to give about `info` at `now` (Unix seconds), if its validity is not
    /// [`Validity::Valid`] and has changed since the last call.
    pub fn observe(&mut self, info: &CertInfo, now: i64) -> Option<String> {
        let validity = info.validity_at(now);
        if self.last.replace(validity) == Some(validity) {
            return None;
        }
        let serial = &info.serial;
        match validity {
            Validity::Valid => None,
            Validity::NotYetValid => Some(format!(
                "the serving certificate (serial {serial}) is not valid before {}; clients refuse it until then: check the clocks or the issuer",
                rfc3339(info.not_before)
            )),
            Validity::ExpiringSoon => Some(format!(
                "the serving certificate (serial {serial}) expires in {}, at {}; renew it (or check that its issuer renews it)",
                remaining(info.not_after - now),
                rfc3339(info.not_after)
            )),
            Validity::Expired => Some(format!(
                "the serving certificate (serial {serial}) has expired: its notAfter was {}; clients refuse it until a renewed one is loaded",
                rfc3339(info.not_after)
            )),
        }
    }
}

fn rfc3339(unix: i64) -> String {
    match time::OffsetDateTime::from_unix_timestamp(unix) {
        Ok(t) => format!("{}T{:02}:{:02}:{:02}Z", t.date(), t.hour(), t.minute(), t.second()),
        Err(_) => format!("{unix} (Unix seconds)"),
    }
}

fn remaining(seconds: i64) -> String {
    let plural = |n: i64, unit: &str| format!("{n} {unit}{}", if n == 1 { "" } else { "s" });
    match seconds {
        s if s >= 86_400 => plural(s / 86_400, "day"),
        s if s >= 3_600 => plural(s / 3_600, "hour"),
        s => plural(s / 60, "minute"),
    }
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Hands rustls the current certificate; swapped atomically on reload, so a handshake
/// sees either the old pair or the new one, never a mix.
pub struct CertResolver {
    current: ArcSwap<CertifiedKey>,
}

impl CertResolver {
    /// A resolver serving `key`.
    pub fn new(key: CertifiedKey) -> Self {
        Self {
            current: ArcSwap::from_pointee(key),
        }
    }

    /// Serves `key` from the next handshake on.
    pub fn replace(&self, key: CertifiedKey) {
        self.current.store(Arc::new(key));
    }

    /// The certificate being served.
    pub fn current(&self) -> Arc<CertifiedKey> {
        self.current.load_full()
    }
}

impl fmt::Debug for CertResolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertResolver")
            .field("chain_len", &self.current.load().cert.len())
            .finish()
    }
}

impl ResolvesServerCert for CertResolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        // One certificate whatever the SNI: the apiserver dials the Service name or a URL.
        Some(self.current.load_full())
    }
}

/// The rustls configuration: TLS 1.2 and 1.3, HTTP/2 and HTTP/1.1 by ALPN, the
/// certificate from `resolver`, and a client-certificate check when `client_ca` is set.
pub fn server_config(
    resolver: Arc<CertResolver>,
    client_ca: Option<Arc<ClientCaVerifier>>,
) -> Result<ServerConfig, TlsError> {
    let builder = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let checks_clients = client_ca.is_some();
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(verifier) => builder.with_client_cert_verifier(verifier),
    };
    let mut config = builder.with_cert_resolver(resolver);
    config.alpn_protocols = ALPN_PROTOCOLS.iter().map(|p| p.to_vec()).collect();
    if checks_clients {
        // A resumed session skips the client-certificate check: without resumption,
        // every new connection is checked against the client CAs in force now, so a
        // CA removed from the client CA file stops being accepted. The apiserver keeps
        // its connections open, so full handshakes are rare.
        config.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
        config.send_tls13_tickets = 0;
    }
    Ok(config)
}

/// What one poll of the files did.
#[derive(Debug)]
pub enum Reload {
    /// The files are as last seen.
    Unchanged,
    /// A new pair is being served.
    Reloaded(CertInfo),
    /// The files changed but do not load; the previous pair is still served.
    Failed(TlsError),
}

/// Loads the pair at start-up and reloads it when the files' contents change.
pub struct CertReloader {
    files: TlsFiles,
    resolver: Arc<CertResolver>,
    metrics: Arc<Metrics>,
    /// Hash of the contents last tried, good or bad: a broken pair is reported once, not
    /// on every poll, and retried as soon as either file changes again.
    last_seen: u64,
    client_ca: Option<WatchedClientCa>,
    /// The certificate being served, and what was last said about its validity.
    info: CertInfo,
    expiry: ExpiryWatch,
}

impl fmt::Debug for CertReloader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertReloader").field("files", &self.files).finish()
    }
}

impl CertReloader {
    /// Loads the pair, and the client CA file if given; anything unusable at start-up is
    /// an error.
    pub fn load(
        files: TlsFiles,
        client_ca: Option<NamedFile>,
        metrics: Arc<Metrics>,
    ) -> Result<(Self, CertInfo), TlsError> {
        let (cert, key) = read_pair(&files)?;
        let (certified, info) = certified_key(&files, &cert, &key)?;
        let client_ca = client_ca.map(WatchedClientCa::load).transpose()?;
        metrics.certificate_loaded(info.not_after);
        let mut reloader = Self {
            resolver: Arc::new(CertResolver::new(certified)),
            last_seen: hash_pair(&cert, &key),
            files,
            metrics,
            client_ca,
            info: info.clone(),
            expiry: ExpiryWatch::default(),
        };
        // Served anyway: refusing to start would not make clients accept it either, and
        // a renewed pair is picked up by the reload loop.
        reloader.check_expiry(unix_now());
        Ok((reloader, info))
    }

    /// The client verifier to give rustls, when a client CA file was given.
    pub fn client_verifier(&self) -> Option<Arc<ClientCaVerifier>> {
        self.client_ca.as_ref().map(WatchedClientCa::verifier)
    }

    /// Reads the client CA file once and swaps in the new CAs if it changed and loads;
    /// `Ok(true)` when it did.
    pub fn poll_client_ca(&mut self) -> Result<bool, TlsError> {
        let Some(ca) = &mut self.client_ca else {
            return Ok(false);
        };
        let polled = ca.poll();
        match &polled {
            Ok(true) => self.metrics.client_ca_reload(true),
            // Unreadable (mid-swap, deleted) is not counted, as for the serving pair.
            Err(TlsError::Read { .. }) | Ok(false) => {}
            Err(_) => self.metrics.client_ca_reload(false),
        }
        polled
    }

    /// The resolver to give rustls.
    pub fn resolver(&self) -> Arc<CertResolver> {
        self.resolver.clone()
    }

    /// Reads the files once and swaps in the new pair if they changed and load.
    pub fn poll(&mut self) -> Reload {
        let (cert, key) = match read_pair(&self.files) {
            Ok(pair) => pair,
            // Mid-swap or deleted: keep serving; the next poll will see the outcome.
            Err(error) => return Reload::Failed(error),
        };
        let hash = hash_pair(&cert, &key);
        if hash == self.last_seen {
            return Reload::Unchanged;
        }
        self.last_seen = hash;
        match certified_key(&self.files, &cert, &key) {
            Ok((certified, info)) => {
                self.resolver.replace(certified);
                self.metrics.certificate_loaded(info.not_after);
                self.info = info.clone();
                self.metrics.certificate_reload(true);
                Reload::Reloaded(info)
            }
            Err(error) => {
                self.metrics.certificate_reload(false);
                Reload::Failed(error)
            }
        }
    }

    /// Warns about the served certificate's validity when it has changed (expired, not
    /// yet valid, near its end; see [`ExpiryWatch`]).
    fn check_expiry(&mut self, now: i64) {
        if let Some(warning) = self.expiry.observe(&self.info, now) {
            tracing::warn!(
                serial = %self.info.serial,
                not_after = self.info.not_after,
                "{}: {warning}",
                self.files.cert
            );
        }
    }

    /// Polls every `interval`, logging what changed, until the task is dropped.
    pub async fn run(mut self, interval: Duration) {
        let mut ticks = tokio::time::interval(interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks.tick().await; // the first tick is immediate, and the pair was just loaded
        let (mut unreadable, mut ca_unreadable) = (false, false);
        loop {
            ticks.tick().await;
            match self.poll() {
                Reload::Unchanged => unreadable = false,
                Reload::Reloaded(info) => {
                    unreadable = false;
                    tracing::info!(
                        serial = %info.serial,
                        not_after = info.not_after,
                        chain = info.chain_len,
                        "serving certificate reloaded"
                    );
                }
                Reload::Failed(error @ TlsError::Read { .. }) => {
                    // A read error repeats on every poll: say it once until it clears.
                    if !unreadable {
                        tracing::warn!("keeping the current serving certificate: {error}");
                    }
                    unreadable = true;
                }
                Reload::Failed(error) => {
                    unreadable = false;
                    tracing::warn!("keeping the current serving certificate: {error}");
                }
            }
            self.check_expiry(unix_now());
            match self.poll_client_ca() {
                Ok(false) => ca_unreadable = false,
                Ok(true) => {
                    ca_unreadable = false;
                    tracing::info!("client CA certificates reloaded");
                }
                Err(error @ TlsError::Read { .. }) => {
                    if !ca_unreadable {
                        tracing::warn!("keeping the current client CA certificates: {error}");
                    }
                    ca_unreadable = true;
                }
                Err(error) => {
                    ca_unreadable = false;
                    tracing::warn!("keeping the current client CA certificates: {error}");
                }
            }
        }
    }
}

fn read_pair(files: &TlsFiles) -> Result<(Vec<u8>, Vec<u8>), TlsError> {
    Ok((read_file(&files.cert)?, read_file(&files.key)?))
}

fn hash_pair(cert: &[u8], key: &[u8]) -> u64 {
    let mut hasher = DefaultHasher::new();
    cert.hash(&mut hasher);
    key.hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_each_file_as_its_label_says() {
        let files = TlsFiles {
            cert: NamedFile::new("the certificate", "/c.pem"),
            key: NamedFile::new("the key", "/k.pem"),
        };
        let error = certified_key(&files, b"not PEM", b"").map(|_| ()).unwrap_err();
        assert_eq!(error.to_string(), "the certificate /c.pem: no PEM CERTIFICATE block");
        let mismatch = TlsError::Mismatch {
            cert: files.cert.clone(),
            key: files.key.clone(),
            reason: "why".to_owned(),
        };
        assert_eq!(
            mismatch.to_string(),
            "the key /k.pem does not fit the certificate /c.pem: why"
        );
        let error = read_file(&NamedFile::new("the CA", "/nonexistent/ca.pem")).unwrap_err();
        assert!(error.to_string().starts_with("the CA /nonexistent/ca.pem: "), "{error}");
    }
}
