//! The vCenter connection settings operators already have: the vSphere CSI driver's
//! `csi-vsphere.conf` (gcfg), usually mounted from a Secret. `[Global]` holds defaults;
//! each `[VirtualCenter "host"]` section names a vCenter and may override them. Keys
//! read: `user`, `password`, `port` (443), `insecure-flag` (false), `ca-file`.

use std::path::{Path, PathBuf};

use secrecy::SecretString;
use thiserror::Error;

use crate::files::FileError;
use crate::gcfg::{Gcfg, GcfgError, Section};

/// Far above any real config.
const MAX_CONFIG: u64 = 1 << 20;

/// Why the config cannot be used. Never holds the password.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ConfigError {
    #[error("the vSphere config: {0}")]
    File(#[from] FileError),
    #[error("the vSphere config {path}: {source}")]
    Syntax { path: String, source: GcfgError },
    #[error("the vSphere config {path}: {section} has no {key} (nor has [Global])")]
    Missing {
        path: String,
        section: String,
        key: &'static str,
    },
    #[error("the vSphere config {path}: {section} {key}: {reason}")]
    Invalid {
        path: String,
        section: String,
        key: &'static str,
        reason: String,
    },
    #[error(
        "the vSphere config {path} names no vCenter: add a [VirtualCenter \"host\"] section (or give the server explicitly)"
    )]
    NoVcenter { path: String },
}

/// One vCenter and how to reach it.
#[derive(Debug, Clone)]
pub struct VcenterConfig {
    /// The section's host (`[VirtualCenter "host"]`); empty when only `[Global]` was given.
    pub host: String,
    pub port: u16,
    pub user: String,
    pub password: SecretString,
    /// `insecure-flag`: the operator asked not to verify vCenter's certificate.
    pub insecure: bool,
    /// `ca-file`: the CA bundle vCenter's certificate is verified against.
    pub ca_file: Option<PathBuf>,
}

/// The vCenters of a `csi-vsphere.conf`, in the order the file gives them.
#[derive(Debug, Clone)]
pub struct VsphereConfig {
    pub vcenters: Vec<VcenterConfig>,
}

impl VsphereConfig {
    /// Reads the config at `path` (a bounded regular file).
    pub fn read(path: &Path) -> Result<Self, ConfigError> {
        let text = crate::files::read_regular_to_string(path, MAX_CONFIG)?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Reads a config's text; `path` names it in errors. With no `[VirtualCenter]`
    /// section, `[Global]` alone is one vCenter of empty host (for a server given
    /// another way); [`VsphereConfig::vcenters`] is then that one.
    pub fn parse(text: &str, path: &str) -> Result<Self, ConfigError> {
        let gcfg = Gcfg::parse(text).map_err(|source| ConfigError::Syntax {
            path: path.to_owned(),
            source,
        })?;
        let global = gcfg.section("Global");
        let mut vcenters = Vec::new();
        for section in gcfg.sections("VirtualCenter") {
            let host = section.subsection.clone().unwrap_or_default();
            let shown = format!("[VirtualCenter {host:?}]");
            if host.trim().is_empty() {
                return Err(ConfigError::Invalid {
                    path: path.to_owned(),
                    section: shown,
                    key: "host",
                    reason: "the section needs the vCenter's host as its subsection".to_owned(),
                });
            }
            vcenters.push(vcenter(path, &shown, host, Some(section), global.as_ref())?);
        }
        if vcenters.is_empty() {
            let Some(global) = &global else {
                return Err(ConfigError::NoVcenter { path: path.to_owned() });
            };
            vcenters.push(vcenter(path, "[Global]", String::new(), None, Some(global))?);
        }
        Ok(Self { vcenters })
    }
}

/// A vCenter's settings: its section's values, else `[Global]`'s.
fn vcenter(
    path: &str,
    shown: &str,
    host: String,
    section: Option<&Section>,
    global: Option<&Section>,
) -> Result<VcenterConfig, ConfigError> {
    let get = |key: &str| {
        section
            .and_then(|s| s.get(key))
            .or_else(|| global.and_then(|g| g.get(key)))
    };
    let invalid = |key: &'static str, reason: String| ConfigError::Invalid {
        path: path.to_owned(),
        section: shown.to_owned(),
        key,
        reason,
    };
    let required = |key: &'static str| {
        get(key).filter(|v| !v.is_empty()).ok_or_else(|| ConfigError::Missing {
            path: path.to_owned(),
            section: shown.to_owned(),
            key,
        })
    };
    let user = required("user")?.to_owned();
    let password = SecretString::from(required("password")?.to_owned());
    let port = match get("port").filter(|p| !p.is_empty()) {
        None => 443,
        Some(port) => port
            .trim()
            .parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| invalid("port", format!("{port:?} is not a port number")))?,
    };
    let flag = |key: &'static str| -> Result<Option<bool>, ConfigError> {
        let found = section.map(|s| s.get_bool(key)).transpose();
        let found = match found {
            Ok(Some(Some(value))) => Some(value),
            Ok(_) => None,
            Err(e) => return Err(invalid(key, e.to_string())),
        };
        match found {
            Some(value) => Ok(Some(value)),
            None => global
                .map(|g| g.get_bool(key))
                .transpose()
                .map(Option::flatten)
                .map_err(|e| invalid(key, e.to_string())),
        }
    };
    let insecure = flag("insecure-flag")?.unwrap_or(false);
    let ca_file = get("ca-file").filter(|f| !f.trim().is_empty()).map(PathBuf::from);
    Ok(VcenterConfig {
        host,
        port,
        user,
        password,
        insecure,
        ca_file,
    })
}

#[cfg(test)]
mod tests {
    use secrecy::ExposeSecret;

    use super::*;

    #[test]
    fn sections_override_global() {
        let text = r#"
[Global]
cluster-id = "k8s"
user = "global@vsphere.local"
password = "g-secret"
port = "8443"
insecure-flag = "true"

[VirtualCenter "vc1.example.com"]
user = "admin@vsphere.local"
password = "p;#s"
insecure-flag = "false"
ca-file = /etc/vsphere/ca.pem

[VirtualCenter "vc2.example.com"]
"#;
        let config = VsphereConfig::parse(text, "csi-vsphere.conf").expect("read");
        let [vc1, vc2] = config.vcenters.as_slice() else {
            panic!("two vCenters")
        };
        assert_eq!(vc1.host, "vc1.example.com");
        assert_eq!(vc1.user, "admin@vsphere.local");
        assert_eq!(vc1.password.expose_secret(), "p;#s");
        assert_eq!((vc1.port, vc1.insecure), (8443, false));
        assert_eq!(vc1.ca_file.as_deref(), Some(Path::new("/etc/vsphere/ca.pem")));
        assert_eq!(
            (vc2.user.as_str(), vc2.insecure, vc2.ca_file.as_deref()),
            ("global@vsphere.local", true, None)
        );
    }

    #[test]
    fn global_alone_and_errors() {
        let config = VsphereConfig::parse("[Global]\nuser = u\npassword = p\n", "f").expect("read");
        assert_eq!((config.vcenters[0].host.as_str(), config.vcenters[0].port), ("", 443));
        let err = VsphereConfig::parse("[Global]\nuser = u\n", "f").expect_err("no password");
        assert_eq!(
            err.to_string(),
            "the vSphere config f: [Global] has no password (nor has [Global])"
        );
        let err = VsphereConfig::parse("[Global]\nuser = u\npassword = secret\nport = x\n", "f").expect_err("port");
        assert!(err.to_string().contains("\"x\" is not a port number"), "{err}");
        let err = VsphereConfig::parse("[Global]\nuser = u\npassword = secret\ninsecure-flag = maybe\n", "f")
            .expect_err("flag");
        assert!(err.to_string().contains("insecure-flag"), "{err}");
        assert!(!format!("{err} {err:?}").contains("secret"));
        let err = VsphereConfig::parse("[Labels]\nzone = z\n", "f").expect_err("no vCenter");
        assert!(matches!(err, ConfigError::NoVcenter { .. }));
        let err = VsphereConfig::parse("[Global\n", "f").expect_err("syntax");
        assert!(err.to_string().starts_with("the vSphere config f: line 1"), "{err}");
    }
}
