//! `tests/fakes/tls_proxy.py` for programs that reach a registry at
//! `https://REGISTRY/` (an ACR name, not the fake's address): HTTPS_PROXY
//! names the proxy on 127.0.0.1, which terminates each CONNECT tunnel with a
//! certificate for the registry names from a CA of the test's own (the
//! program's SSL_CERT_FILE) and pipes the requests to the fake.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};

use crate::workspace_root;

/// `tls_proxy.py` in front of one fake, killed when dropped.
pub struct TlsProxy {
    child: Child,
    /// The port it listens on, on 127.0.0.1.
    pub port: u16,
    /// The CA that issued its certificate (PEM): the client's SSL_CERT_FILE.
    pub ca: PathBuf,
}

impl TlsProxy {
    /// The proxy for the fake on 127.0.0.1:`fake_port`, presenting a
    /// certificate for `hosts`; the CA and the pair are written to `dir`.
    pub fn start(fake_port: u16, hosts: &[&str], dir: &Path) -> TlsProxy {
        let (ca, cert, key) = certificates(dir, hosts);
        let mut child = Command::new("python3")
            .arg(workspace_root().join("tests/fakes/tls_proxy.py"))
            .arg(fake_port.to_string())
            .args([&cert, &key])
            .stdout(Stdio::piped())
            .spawn()
            .expect("start tls_proxy.py");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("tls_proxy.py's port");
        let port = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("tls_proxy.py said {line:?}"));
        TlsProxy { child, port, ca }
    }

    /// `http://127.0.0.1:PORT`: HTTPS_PROXY (and HTTP_PROXY) for a client.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for TlsProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A CA (`dir/ca.pem`) and a serving pair for `hosts` (`dir/leaf.pem`,
/// `dir/leaf.key`): (CA, certificate, key).
pub fn certificates(dir: &Path, hosts: &[&str]) -> (PathBuf, PathBuf, PathBuf) {
    let mut ca_params = CertificateParams::default();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().expect("a CA key");
    let ca = ca_params.self_signed(&ca_key).expect("a self-signed CA");
    let issuer = Issuer::new(ca_params, ca_key);
    let params = CertificateParams::new(hosts.iter().map(|h| (*h).to_owned()).collect::<Vec<_>>())
        .expect("the registry names are certificate names");
    let key = KeyPair::generate().expect("a serving key");
    let leaf = params.signed_by(&key, &issuer).expect("a certificate signed by the CA");
    let write = |name: &str, text: String| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        path
    };
    (
        write("ca.pem", ca.pem()),
        write("leaf.pem", leaf.pem()),
        write("leaf.key", key.serialize_pem()),
    )
}
