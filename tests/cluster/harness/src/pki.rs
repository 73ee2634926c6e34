//! The cluster's PKI (rcgen): a CA, the apiserver's serving pair, client
//! certificates for any identity, the service-account signing key; and the
//! kubeconfigs and clients built from them.

use std::path::Path;

use anyhow::Result;
use kube::config::{KubeConfigOptions, Kubeconfig};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};

/// PEM certificate and key.
pub struct Pem {
    pub cert: String,
    pub key: String,
}

/// The cluster's PKI: a CA, the apiserver's serving pair, an admin client
/// pair (O=system:masters), and the service-account signing key.
pub struct Pki {
    pub ca: Pem,
    pub serving: Pem,
    pub admin: Pem,
    pub service_account_key: String,
    pub service_account_public_key: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Pki {
    pub fn generate() -> Result<Self> {
        let mut ca_params = CertificateParams::default();
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "cluster-harness-ca");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_key = KeyPair::generate()?;
        let ca_cert = ca_params.self_signed(&ca_key)?;
        let ca = Pem {
            cert: ca_cert.pem(),
            key: ca_key.serialize_pem(),
        };
        let issuer = Issuer::new(ca_params, ca_key);

        let names = [
            "localhost",
            "127.0.0.1",
            "10.0.0.1",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ];
        let mut params = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())?;
        params.distinguished_name.push(DnType::CommonName, "kube-apiserver");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate()?;
        let serving = Pem {
            cert: params.signed_by(&key, &issuer)?.pem(),
            key: key.serialize_pem(),
        };

        let admin = client_pair(&issuer, "cluster-harness-admin", &["system:masters"])?;

        let sa = KeyPair::generate()?;
        Ok(Self {
            ca,
            serving,
            admin,
            service_account_key: sa.serialize_pem(),
            service_account_public_key: sa.public_key_pem(),
            issuer,
        })
    }

    /// A client certificate for `user` in `groups`, signed by the cluster CA.
    pub fn client(&self, user: &str, groups: &[&str]) -> Result<Pem> {
        client_pair(&self.issuer, user, groups)
    }
}

fn client_pair(issuer: &Issuer<'static, KeyPair>, user: &str, groups: &[&str]) -> Result<Pem> {
    let mut params = CertificateParams::default();
    params.distinguished_name.push(DnType::CommonName, user);
    for group in groups {
        params.distinguished_name.push(DnType::OrganizationName, *group);
    }
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let key = KeyPair::generate()?;
    Ok(Pem {
        cert: params.signed_by(&key, issuer)?.pem(),
        key: key.serialize_pem(),
    })
}

pub(crate) fn admin_kubeconfig(server: &str, pki: &Pki) -> String {
    kubeconfig(server, &pki.ca, &pki.admin)
}

pub(crate) fn kubeconfig(server: &str, ca: &Pem, user: &Pem) -> String {
    use base64::Engine;
    let encode = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    serde_yaml_ng::to_string(&serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "harness", "cluster": {
            "server": server,
            "certificate-authority-data": encode(ca.cert.as_bytes()),
        }}],
        "users": [{"name": "admin", "user": {
            "client-certificate-data": encode(user.cert.as_bytes()),
            "client-key-data": encode(user.key.as_bytes()),
        }}],
        "contexts": [{"name": "harness", "context": {"cluster": "harness", "user": "admin"}}],
        "current-context": "harness",
    }))
    .expect("kubeconfig YAML")
}

pub(crate) async fn admin_client(path: &Path) -> Result<kube::Client> {
    let kubeconfig = Kubeconfig::read_from(path)?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    Ok(kube::Client::try_from(config)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pki_is_generated() {
        let pki = Pki::generate().unwrap();
        assert!(pki.ca.cert.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(pki.admin.key.contains("PRIVATE KEY"));
        assert!(pki.service_account_public_key.contains("PUBLIC KEY"));
        assert!(admin_kubeconfig("https://127.0.0.1:1", &pki).contains("client-certificate-data"));
    }
}
