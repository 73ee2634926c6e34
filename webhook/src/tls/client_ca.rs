//! The client check: a WebPKI verifier of client certificates against the CAs of a PEM
//! file, swapped on reload like the serving certificate, and the file being watched.

use std::fmt;
use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme};

use super::{NamedFile, TlsError, hash_pair, provider, read_certs, read_file};

/// A verifier of client certificates against the CAs in `file`, whose PEM is `pem`.
fn webpki_client_verifier(file: &NamedFile, pem: &[u8]) -> Result<Arc<dyn ClientCertVerifier>, TlsError> {
    let invalid = |reason: String| file.invalid(reason);
    let mut roots = RootCertStore::empty();
    for cert in read_certs(file, pem)? {
        roots.add(cert).map_err(|e| invalid(e.to_string()))?;
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
        .build()
        .map_err(|e| invalid(e.to_string()))
}

/// The WebPKI client verifier for the current client CA file, swapped on reload like the
/// serving certificate. Client certificates are required.
pub struct ClientCaVerifier {
    current: ArcSwap<Arc<dyn ClientCertVerifier>>,
}

impl fmt::Debug for ClientCaVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientCaVerifier").finish_non_exhaustive()
    }
}

impl ClientCaVerifier {
    /// Reads the CA file `file`.
    pub fn load(file: &NamedFile) -> Result<Self, TlsError> {
        let pem = read_file(file)?;
        Self::from_pem(file, &pem)
    }

    fn from_pem(file: &NamedFile, pem: &[u8]) -> Result<Self, TlsError> {
        Ok(Self {
            current: ArcSwap::from_pointee(webpki_client_verifier(file, pem)?),
        })
    }

    fn verifier(&self) -> Arc<Arc<dyn ClientCertVerifier>> {
        self.current.load_full()
    }
}

impl ClientCertVerifier for ClientCaVerifier {
    fn client_auth_mandatory(&self) -> bool {
        true
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        // The hints would borrow from a verifier a reload may drop; an empty list lets
        // the client send the certificate it has, which is what the apiserver does.
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.verifier().verify_client_cert(end_entity, intermediates, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verifier().verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verifier().verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.verifier().supported_verify_schemes()
    }
}

/// The client CA file being watched.
pub(super) struct WatchedClientCa {
    file: NamedFile,
    verifier: Arc<ClientCaVerifier>,
    last_seen: u64,
}

impl WatchedClientCa {
    /// Reads `file`; unusable, it is an error.
    pub(super) fn load(file: NamedFile) -> Result<Self, TlsError> {
        let pem = read_file(&file)?;
        let verifier = Arc::new(ClientCaVerifier::from_pem(&file, &pem)?);
        Ok(Self {
            last_seen: hash_pair(&pem, &[]),
            file,
            verifier,
        })
    }

    /// The verifier to give rustls; it serves whatever CAs the latest good file holds.
    pub(super) fn verifier(&self) -> Arc<ClientCaVerifier> {
        self.verifier.clone()
    }

    /// Reads the file once and swaps in the new CAs if it changed and loads; `Ok(true)`
    /// when it did.
    pub(super) fn poll(&mut self) -> Result<bool, TlsError> {
        let pem = read_file(&self.file)?;
        let hash = hash_pair(&pem, &[]);
        if hash == self.last_seen {
            return Ok(false);
        }
        self.last_seen = hash;
        let verifier = webpki_client_verifier(&self.file, &pem)?;
        self.verifier.current.store(Arc::new(verifier));
        Ok(true)
    }
}
