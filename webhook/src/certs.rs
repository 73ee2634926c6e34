//! `certs`: a CA and a serving certificate for the webhook's Service, for clusters
//! without cert-manager. The CA key is not kept: renewing means running `certs` again
//! and setting the new caBundle on both webhook configurations.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use base64::Engine as _;
use cloud_access::files::write_atomically;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use thiserror::Error;
use time::OffsetDateTime;

use crate::cli::CertsArgs;

/// CA certificate file name (the caBundle, PEM).
pub const CA_FILE: &str = "ca.crt";
/// Serving certificate file name (leaf then CA, PEM).
pub const CERT_FILE: &str = "tls.crt";
/// Serving key file name (PKCS#8 PEM, mode 0600).
pub const KEY_FILE: &str = "tls.key";
/// The kustomize component that sets the caBundle of both webhook configurations
/// (and drops cert-manager's objects), from a checkout's root.
pub const NO_CERT_MANAGER_COMPONENT: &str = "manifests/webhook/components/no-cert-manager";

/// Why `certs` failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum CertsError {
    #[error("--extra-san {0:?}: neither an IP address nor a DNS name")]
    BadSan(String),
    #[error("--service {0:?} / --namespace {1:?}: not usable as DNS labels")]
    BadName(String, String),
    #[error("--validity {0:?}: too long")]
    Validity(Duration),
    #[error("cannot make the certificates: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("--out-dir {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Through a temporary file and a rename, so that a reader sees the old file or
    /// the new one, never half of one; a FIFO, device or directory in the way is
    /// refused, never replaced.
    #[error("--out-dir: {0}")]
    WriteFile(#[from] cloud_access::files::FileError),
}

/// What `certs` wrote.
#[derive(Debug, Clone)]
pub struct Written {
    pub ca_pem: String,
    pub dns_names: Vec<String>,
}

impl Written {
    /// The caBundle field value: base64 of the CA's PEM.
    pub fn ca_bundle(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(&self.ca_pem)
    }
}

/// The DNS names a Service is reached by.
pub fn service_names(service: &str, namespace: &str) -> Vec<String> {
    vec![
        service.to_owned(),
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ]
}

/// Makes the CA and the serving certificate and writes them to `args.out_dir`.
pub fn generate(args: &CertsArgs) -> Result<Written, CertsError> {
    if !is_dns_label(&args.service) || !is_dns_label(&args.namespace) {
        return Err(CertsError::BadName(args.service.clone(), args.namespace.clone()));
    }
    let now = OffsetDateTime::now_utc();
    let validity = time::Duration::try_from(args.validity).map_err(|_| CertsError::Validity(args.validity))?;
    let not_after = now
        .checked_add(validity)
        .filter(|t| t.year() <= 9999)
        .ok_or(CertsError::Validity(args.validity))?;
    // A little slack for clocks behind ours.
    let not_before = now - time::Duration::minutes(5);

    let mut ca_params = CertificateParams::default();
    ca_params.distinguished_name = name(&format!("pv-topology-webhook CA {}.{}", args.service, args.namespace));
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    ca_params.not_before = not_before;
    ca_params.not_after = not_after;
    let ca_key = KeyPair::generate()?;
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca_params, ca_key);

    let dns_names = service_names(&args.service, &args.namespace);
    let mut sans: Vec<SanType> = Vec::new();
    for dns in &dns_names {
        sans.push(SanType::DnsName(dns.clone().try_into()?));
    }
    for extra in &args.extra_san {
        let extra = extra.trim();
        if let Ok(ip) = extra.parse::<IpAddr>() {
            sans.push(SanType::IpAddress(ip));
        } else if is_dns_name(extra) {
            sans.push(SanType::DnsName(
                extra
                    .to_owned()
                    .try_into()
                    .map_err(|_| CertsError::BadSan(extra.to_owned()))?,
            ));
        } else {
            return Err(CertsError::BadSan(extra.to_owned()));
        }
    }
    let mut params = CertificateParams::default();
    params.distinguished_name = name(&format!("{}.{}.svc", args.service, args.namespace));
    params.subject_alt_names = sans;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.not_before = not_before;
    params.not_after = not_after;
    params.use_authority_key_identifier_extension = true;
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &issuer)?;

    let dir = &args.out_dir;
    std::fs::create_dir_all(dir).map_err(|source| CertsError::Write {
        path: dir.clone(),
        source,
    })?;
    let ca_pem = ca_cert.pem();
    write_atomically(&dir.join(CA_FILE), ca_pem.as_bytes(), 0o644)?;
    // The key first: a reader that sees the new certificate finds its key already there.
    write_atomically(&dir.join(KEY_FILE), key.serialize_pem().as_bytes(), 0o600)?;
    write_atomically(
        &dir.join(CERT_FILE),
        format!("{}{}", cert.pem(), ca_pem).as_bytes(),
        0o644,
    )?;
    Ok(Written { ca_pem, dns_names })
}

fn name(common_name: &str) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, common_name);
    name
}

fn is_dns_label(label: &str) -> bool {
    !label.is_empty()
        && label.len() <= 63
        && label
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !label.starts_with('-')
        && !label.ends_with('-')
}

fn is_dns_name(name: &str) -> bool {
    let name = name.strip_prefix("*.").unwrap_or(name);
    name.len() <= 253 && name.split('.').all(|l| is_dns_label(&l.to_ascii_lowercase()))
}

/// What `certs` tells the user (on stderr; stdout gets the caBundle alone, so that
/// `CA_BUNDLE=$(pv-topology-webhook certs …)` works).
pub fn summary(args: &CertsArgs, written: &Written) -> String {
    format!(
        "wrote {dir}/{CA_FILE}, {dir}/{CERT_FILE} and {dir}/{KEY_FILE} for {names}\n\
         create the Secret with: kubectl -n {ns} create secret tls {svc}-tls --cert={dir}/{CERT_FILE} --key={dir}/{KEY_FILE}\n\
         the caBundle follows on stdout: set it on both the MutatingWebhookConfiguration and the \
         ValidatingWebhookConfiguration (kustomize: the component {NO_CERT_MANAGER_COMPONENT}; Helm: \
         --set certificates.caBundle=...), as docs/webhook.md \"Install without cert-manager\" shows\n",
        dir = args.out_dir.display(),
        names = written.dns_names.join(", "),
        ns = args.namespace,
        svc = args.service,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_names_both_configurations_and_the_component_that_sets_them() {
        let args = CertsArgs {
            service: "pv-topology-webhook".to_owned(),
            namespace: "pv-topology-webhook".to_owned(),
            out_dir: PathBuf::from("webhook-certs"),
            validity: Duration::from_secs(3600),
            extra_san: Vec::new(),
        };
        let written = Written {
            ca_pem: String::new(),
            dns_names: service_names(&args.service, &args.namespace),
        };
        let text = summary(&args, &written);
        assert!(
            text.contains("MutatingWebhookConfiguration") && text.contains("ValidatingWebhookConfiguration"),
            "{text}"
        );
        assert!(text.contains(NO_CERT_MANAGER_COMPONENT), "{text}");
        assert!(
            text.contains(
                "kubectl -n pv-topology-webhook create secret tls pv-topology-webhook-tls \
                 --cert=webhook-certs/tls.crt --key=webhook-certs/tls.key"
            ),
            "{text}"
        );
        let component = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(NO_CERT_MANAGER_COMPONENT)
            .join("kustomization.yaml");
        assert!(component.is_file(), "{}", component.display());
    }
}
