//! vSphere: where a disk's datastore is reachable from, for volume topology. A small
//! client of vCenter's SOAP API (vim25: the datastore, the hosts that mount it, their
//! ancestors; First Class Disks) and of the tagging REST API (the zone and region tags
//! on those hosts and ancestors), set up from the vSphere CSI driver's config.
//!
//! Layers: [`soap`] and [`tagging`] are the wire formats (pure), [`placement`] reads
//! zones and regions from tags (pure), [`client`] makes one vCenter's calls, and
//! [`Vsphere`] asks each configured vCenter in turn.

pub mod client;
pub mod config;
pub mod placement;
pub mod soap;
pub mod tagging;

use std::time::Duration;

use thiserror::Error;
use url::Url;

pub use self::client::{Trust, VcenterClient};
pub use self::config::{ConfigError, VcenterConfig, VsphereConfig};
pub use self::placement::HostLabels;
use crate::SecureEndpoint;
use crate::api::{CallError, CallErrorKind, CallFailure};

/// Why a vSphere call failed. Names the vCenter and carries vSphere's own text;
/// never the password or a session.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum VsphereError {
    #[error("vCenter {endpoint}: {reason}")]
    Setup { endpoint: String, reason: String },
    /// `insecure-flag` without the caller's consent; the caller's message says how to
    /// give it.
    #[error(
        "vCenter {endpoint}: the config sets insecure-flag (do not verify vCenter's certificate), which lets anyone on the path take the password: give ca-file instead"
    )]
    InsecureRefused { endpoint: String },
    /// The vim25 or tagging `call` failed: it did not get through
    /// ([`CallErrorKind::Transport`], a timeout when it ran out of the client's
    /// time), vCenter answered an HTTP error status ([`CallErrorKind::Api`],
    /// with its text) or an answer we cannot use ([`CallErrorKind::Garbage`]).
    /// The call error's URL is the vCenter.
    #[error("{}", ShownCall(.call, .error))]
    Call {
        call: &'static str,
        error: CallError<String>,
    },
    #[error("vCenter {endpoint}: logging in as {user:?} was refused: {text}")]
    LoginRefused {
        endpoint: String,
        user: String,
        text: String,
    },
    #[error("vCenter {endpoint}: {call}: {text} ({kind})")]
    Fault {
        endpoint: String,
        call: &'static str,
        kind: String,
        text: String,
    },
    #[error("vCenter {endpoint}: no datastore named {name:?}")]
    DatastoreNotFound { endpoint: String, name: String },
    #[error("vCenter {endpoint}: no First Class Disk {id:?} on any of its {datastores} datastores")]
    DiskNotFound {
        endpoint: String,
        id: String,
        datastores: usize,
    },
    /// None of several vCenters has the datastore or disk.
    #[error("none of the vCenters {endpoints} has it: {last}")]
    NotFoundAnywhere { endpoints: String, last: Box<VsphereError> },
    #[error("vCenter {endpoint}: datastore {datastore:?}: {reason}")]
    Inventory {
        endpoint: String,
        datastore: String,
        reason: String,
    },
}

impl VsphereError {
    /// The `call` to the vCenter at `endpoint` failed so.
    pub(crate) fn call(endpoint: &str, call: &'static str, kind: CallErrorKind<String>) -> Self {
        Self::Call {
            call,
            error: CallError::new("vCenter", endpoint, kind),
        }
    }

    /// The vCenter does not have the datastore or disk (another configured one
    /// may); vCenter's answers name no missing resource by HTTP status.
    pub fn is_not_found(&self) -> bool {
        matches!(
            self,
            Self::DatastoreNotFound { .. } | Self::DiskNotFound { .. } | Self::NotFoundAnywhere { .. }
        )
    }
}

impl CallFailure for VsphereError {
    type Detail = String;

    /// A failed call, its URL the vCenter's.
    fn failed_call(&self) -> Option<&CallError<String>> {
        match self {
            Self::Call { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// A call's failure in vSphere's words: the vCenter, then the call.
struct ShownCall<'a>(&'a str, &'a CallError<String>);

impl std::fmt::Display for ShownCall<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ShownCall(call, CallError { url, kind, .. }) = self;
        write!(f, "vCenter {url}: {call}: ")?;
        match kind {
            CallErrorKind::Transport { reason, .. } => f.write_str(reason),
            CallErrorKind::Api { status, detail } => write!(f, "HTTP {status}: {detail}"),
            CallErrorKind::NotFound { detail } => write!(f, "HTTP 404: {detail}"),
            CallErrorKind::Garbage { problem } => write!(f, "an answer we cannot use: {problem}"),
            CallErrorKind::Deadline { after } => write!(f, "no answer within {}", crate::api::shown_wait(*after)),
            CallErrorKind::TooLarge { source } => write!(f, "{source}"),
        }
    }
}

/// What a volume handle names: a disk file on a datastore, or a First Class Disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiskRef {
    /// `[datastore] path/disk.vmdk` (in-tree `volumePath`, migrated CSI handles).
    Path { datastore: String, path: String },
    /// A First Class Disk's ID (the CSI driver's block volumes).
    Fcd(String),
}

impl DiskRef {
    /// Reads a handle: `[datastore] path` as govmomi's `DatastorePath.FromString`
    /// (the name up to the first `]`, the path after it trimmed), or a First Class
    /// Disk ID (a UUID). Anything else (e.g. a vSAN file share's `file:…`) is `None`.
    pub fn parse(handle: &str) -> Option<Self> {
        if let Some(rest) = handle.strip_prefix('[') {
            let (datastore, path) = rest.split_once(']')?;
            if datastore.is_empty() {
                return None;
            }
            return Some(Self::Path {
                datastore: datastore.to_owned(),
                path: path.trim().to_owned(),
            });
        }
        let uuid_shaped = handle.len() == 36
            && handle.char_indices().all(|(i, c)| {
                if matches!(i, 8 | 13 | 18 | 23) {
                    c == '-'
                } else {
                    c.is_ascii_hexdigit()
                }
            });
        uuid_shaped.then(|| Self::Fcd(handle.to_owned()))
    }
}

/// Where a disk's datastore is reachable from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The vCenter that has it.
    pub endpoint: String,
    pub datastore: String,
    /// The hosts mounting the datastore (mounted and accessible), with their labels.
    pub hosts: Vec<HostLabels>,
}

/// The configured vCenters, asked in the config's order.
#[derive(Debug)]
pub struct Vsphere {
    vcenters: Vec<VcenterClient>,
}

impl Vsphere {
    /// Clients of the config's vCenters; `server` replaces the (single) vCenter's
    /// address (tests, a proxy). `insecure-flag` is honoured only when
    /// `allow_insecure`; otherwise it is an error saying so. Each call must end within
    /// `timeout`.
    pub fn new(
        config: &VsphereConfig,
        server: Option<&SecureEndpoint>,
        allow_insecure: bool,
        timeout: Duration,
    ) -> Result<Self, VsphereError> {
        if server.is_some() && config.vcenters.len() > 1 {
            return Err(VsphereError::Setup {
                endpoint: server.map(ToString::to_string).unwrap_or_default(),
                reason: format!(
                    "the config names {} vCenters: a server override needs exactly one",
                    config.vcenters.len()
                ),
            });
        }
        let mut vcenters = Vec::with_capacity(config.vcenters.len());
        for vcenter in &config.vcenters {
            let base = match server {
                Some(server) => server.url().clone(),
                None => base_url(vcenter)?,
            };
            let trust = trust(vcenter, allow_insecure).ok_or_else(|| VsphereError::InsecureRefused {
                endpoint: base.to_string(),
            })?;
            vcenters.push(VcenterClient::new(
                base,
                vcenter.user.clone(),
                vcenter.password.clone(),
                &trust,
                timeout,
            )?);
        }
        Ok(Self { vcenters })
    }

    /// The vCenters, for messages.
    pub fn endpoints(&self) -> Vec<&str> {
        self.vcenters.iter().map(VcenterClient::endpoint).collect()
    }

    /// Where `disk` is: the first vCenter that has it, its hosts and their labels.
    pub async fn placement(
        &self,
        disk: &DiskRef,
        zone_category: &str,
        region_category: &str,
    ) -> Result<Placement, VsphereError> {
        let mut not_found = None;
        for vcenter in &self.vcenters {
            let found = match disk {
                DiskRef::Path { datastore, .. } => vcenter.datastore(datastore).await,
                DiskRef::Fcd(id) => vcenter.disk_datastore(id).await,
            };
            let datastore = match found {
                Ok(datastore) => datastore,
                Err(error) if error.is_not_found() => {
                    not_found = Some(error);
                    continue;
                }
                Err(error) => return Err(error),
            };
            let hosts = vcenter.host_labels(&datastore, zone_category, region_category).await?;
            return Ok(Placement {
                endpoint: vcenter.endpoint().to_owned(),
                datastore: datastore.name,
                hosts,
            });
        }
        match not_found {
            Some(last) if self.vcenters.len() > 1 => Err(VsphereError::NotFoundAnywhere {
                endpoints: self.endpoints().join(", "),
                last: Box::new(last),
            }),
            Some(last) => Err(last),
            None => Err(VsphereError::Setup {
                endpoint: String::new(),
                reason: "no vCenter is configured".to_owned(),
            }),
        }
    }
}

/// `https://host:port/` of a configured vCenter.
fn base_url(vcenter: &VcenterConfig) -> Result<Url, VsphereError> {
    let host = vcenter.host.trim();
    let setup = |reason: String| VsphereError::Setup {
        endpoint: host.to_owned(),
        reason,
    };
    if host.is_empty() {
        return Err(setup(
            "the config names no vCenter host ([VirtualCenter \"host\"])".to_owned(),
        ));
    }
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_owned()
    };
    Url::parse(&format!("https://{host}:{}/", vcenter.port)).map_err(|e| setup(format!("not a host: {e}")))
}

/// How a vCenter's certificate is checked: its `ca-file`, else the system's roots;
/// `insecure-flag` only when the caller allows it (`None`: refused).
pub fn trust(vcenter: &VcenterConfig, allow_insecure: bool) -> Option<Trust> {
    match (&vcenter.ca_file, vcenter.insecure) {
        (Some(ca), _) => Some(Trust::CaFile(ca.clone())),
        (None, true) if allow_insecure => Some(Trust::Insecure),
        (None, true) => None,
        (None, false) => Some(Trust::System),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volume_paths_and_fcd_ids() {
        assert_eq!(
            DiskRef::parse("[vsanDatastore] kubevols/pv-1.vmdk"),
            Some(DiskRef::Path {
                datastore: "vsanDatastore".into(),
                path: "kubevols/pv-1.vmdk".into()
            })
        );
        assert_eq!(
            DiskRef::parse("[my ds (1)]  a/b.vmdk"),
            Some(DiskRef::Path {
                datastore: "my ds (1)".into(),
                path: "a/b.vmdk".into()
            })
        );
        assert_eq!(
            DiskRef::parse("[ds]"),
            Some(DiskRef::Path {
                datastore: "ds".into(),
                path: String::new()
            })
        );
        assert_eq!(
            DiskRef::parse("14ac54dc-ce36-465b-b5da-ec3d9e531424"),
            Some(DiskRef::Fcd("14ac54dc-ce36-465b-b5da-ec3d9e531424".into()))
        );
        for bad in [
            "",
            "[] x.vmdk",
            "[ds x.vmdk",
            "ds/x.vmdk",
            "file:1234",
            "14ac54dc-ce36-465b-b5da-ec3d9e53142z",
        ] {
            assert_eq!(DiskRef::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn insecure_only_when_allowed() {
        let mut vc = VsphereConfig::parse(
            "[VirtualCenter \"vc\"]\nuser = u\npassword = p\ninsecure-flag = 1\n",
            "f",
        )
        .expect("config")
        .vcenters
        .remove(0);
        assert_eq!(trust(&vc, true), Some(Trust::Insecure));
        assert_eq!(trust(&vc, false), None);
        vc.ca_file = Some("/ca.pem".into());
        assert_eq!(trust(&vc, false), Some(Trust::CaFile("/ca.pem".into())));
        vc.insecure = false;
        vc.ca_file = None;
        assert_eq!(trust(&vc, false), Some(Trust::System));
        assert_eq!(
            base_url(&vc).map(|u| u.to_string()).ok(),
            Some("https://vc/".to_owned())
        );
        vc.host = "fd00::1".into();
        vc.port = 8443;
        assert_eq!(
            base_url(&vc).map(|u| u.to_string()).ok(),
            Some("https://[fd00::1]:8443/".to_owned())
        );
    }
}
