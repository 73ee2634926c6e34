//! OpenStack metadata: the metadata service, or a config drive mounted as
//! a directory (`openstack/latest/meta_data.json` and `network_data.json`,
//! plus EC2-style `local-ipv4`/`public-ipv4`).
//!
//! Addresses: the fixed addresses of `network_data.json` (or the EC2
//! `local-ipv4` when it lists none) as internal, the floating `public-ipv4`
//! as external, then the hostname. The OpenStack cloud controller manager
//! reads Nova's server addresses, which hold the same fixed and floating IPs.

use std::path::Path;

use serde::Deserialize;

use super::{AddressKind, Instance, MetadataClient, MetadataError, ProviderIdOptions};

const META_DATA: &str = "openstack/latest/meta_data.json";
const NETWORK_DATA: &str = "openstack/latest/network_data.json";
const EC2_LOCAL_IPV4: &str = "latest/meta-data/local-ipv4";
const EC2_PUBLIC_IPV4: &str = "latest/meta-data/public-ipv4";

#[derive(Deserialize)]
struct MetaData {
    uuid: String,
    #[serde(default)]
    hostname: Option<String>,
    #[serde(default)]
    name: Option<String>,
}

#[derive(Deserialize)]
struct NetworkData {
    #[serde(default)]
    networks: Vec<NetworkEntry>,
}

#[derive(Deserialize)]
struct NetworkEntry {
    #[serde(default)]
    ip_address: Option<String>,
}

/// The EC2-compatible document on a config drive.
#[derive(Deserialize)]
struct Ec2MetaData {
    #[serde(rename = "local-ipv4", default)]
    local_ipv4: Option<String>,
    #[serde(rename = "public-ipv4", default)]
    public_ipv4: Option<String>,
}

pub(super) async fn instance(client: &MetadataClient) -> Result<Instance, MetadataError> {
    let body = client.get_required(META_DATA, &[]).await?;
    let meta: MetaData = serde_json::from_str(&body).map_err(|e| client.garbage(META_DATA, e.to_string()))?;
    let network = match client.get(NETWORK_DATA, &[]).await? {
        Some(body) => serde_json::from_str(&body).map_err(|e| client.garbage(NETWORK_DATA, e.to_string()))?,
        None => NetworkData { networks: Vec::new() },
    };
    let local = client.get(EC2_LOCAL_IPV4, &[]).await?;
    let public = client.get(EC2_PUBLIC_IPV4, &[]).await?;
    assemble(meta, network, local, public, |path, text| {
        super::ip(client, path, text).map(|ip| ip.to_string())
    })
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigDriveError {
    #[error("config drive {path}: {reason}")]
    Bad { path: String, reason: String },
    #[error("config drive {0}")]
    File(#[from] crate::files::FileError),
}

/// The drive's documents are a few kilobytes; more is not a config drive.
const CONFIG_DRIVE_FILE_LIMIT: u64 = 1024 * 1024;

/// Reads a config drive (label `config-2`) mounted at `root`.
pub fn from_config_drive(root: &Path) -> Result<Instance, ConfigDriveError> {
    let read = |relative: &str| -> Result<Option<String>, ConfigDriveError> {
        match crate::files::read_regular_to_string(&root.join(relative), CONFIG_DRIVE_FILE_LIMIT) {
            Ok(text) => Ok(Some(text)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e.into()),
        }
    };
    let bad = |relative: &str, reason: String| ConfigDriveError::Bad {
        path: root.join(relative).display().to_string(),
        reason,
    };
    let meta_text =
        read(META_DATA)?.ok_or_else(|| bad(META_DATA, "missing: is this an OpenStack config drive?".into()))?;
    let meta: MetaData = serde_json::from_str(&meta_text).map_err(|e| bad(META_DATA, e.to_string()))?;
    let network = match read(NETWORK_DATA)? {
        Some(text) => serde_json::from_str(&text).map_err(|e| bad(NETWORK_DATA, e.to_string()))?,
        None => NetworkData { networks: Vec::new() },
    };
    const EC2: &str = "ec2/latest/meta-data.json";
    let ec2: Option<Ec2MetaData> = match read(EC2)? {
        Some(text) => Some(serde_json::from_str(&text).map_err(|e| bad(EC2, e.to_string()))?),
        None => None,
    };
    let (local, public) = ec2.map_or((None, None), |e| (e.local_ipv4, e.public_ipv4));
    assemble(meta, network, local, public, |path, text| {
        text.trim()
            .parse::<std::net::IpAddr>()
            .map(|ip| ip.to_string())
            .map_err(|_| bad(path, format!("{text:?} is not an IP address")))
    })
}

fn assemble<E>(
    meta: MetaData,
    network: NetworkData,
    local: Option<String>,
    public: Option<String>,
    ip: impl Fn(&str, &str) -> Result<String, E>,
) -> Result<Instance, E> {
    let mut instance = Instance {
        instance_id: Some(meta.uuid),
        hostname: meta.hostname.clone().or(meta.name.clone()),
        name: meta.name.clone(),
        ..Instance::default()
    };
    for address in network.networks.iter().filter_map(|n| n.ip_address.as_deref()) {
        instance.push(AddressKind::InternalIP, ip(NETWORK_DATA, address)?);
    }
    if let Some(local) = local.filter(|l| !l.trim().is_empty()) {
        instance.push(AddressKind::InternalIP, ip(EC2_LOCAL_IPV4, &local)?);
    }
    if let Some(public) = public.filter(|p| !p.trim().is_empty()) {
        instance.push(AddressKind::ExternalIP, ip(EC2_PUBLIC_IPV4, &public)?);
    }
    if let Some(hostname) = &instance.hostname {
        let hostname = hostname.clone();
        instance.push(AddressKind::Hostname, hostname);
    }
    Ok(instance)
}

/// The OpenStack cloud controller manager (kubernetes/cloud-provider-openstack,
/// `pkg/openstack/instances.go`): it writes `openstack:///UUID`, or
/// `openstack://REGION/UUID` with `OS_CCM_REGIONAL=true`; parses a provider
/// ID with `^openstack://([^/]*)/([^/]+)$` (the server's UUID, in the
/// given region or its own); and finds a Node without one by the server's
/// name, exactly (`mapNodeNameToServerName`).
pub(super) struct Ccm;

impl super::CcmRules for Ccm {
    fn provider_id(&self, instance: &Instance, options: &ProviderIdOptions) -> Result<String, String> {
        let uuid = super::provider_id_part("server UUID", instance.instance_id.as_deref())?;
        let region = match options.openstack_region.as_deref() {
            Some(region) => super::provider_id_part("region", Some(region))?,
            None => "",
        };
        Ok(format!("openstack://{region}/{uuid}"))
    }

    fn key(&self, provider_id: &str) -> Result<String, String> {
        let parts = provider_id
            .strip_prefix("openstack://")
            .and_then(|rest| rest.split_once('/'));
        match parts {
            Some((_region, uuid)) if !uuid.is_empty() && !uuid.contains('/') => Ok(uuid.to_owned()),
            _ => Err("not openstack:///UUID or openstack://REGION/UUID (the CCM's providerIDRegexp refuses it)".into()),
        }
    }

    fn finds_by_name(&self, node: &str, instance: &Instance) -> bool {
        instance.name.as_deref() == Some(node)
    }

    fn names(&self, instance: &Instance) -> Vec<String> {
        instance.name.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `f` on another thread: a FIFO must be refused, not block forever.
    fn without_blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (send, receive) = std::sync::mpsc::channel();
        std::thread::spawn(move || send.send(f()));
        receive
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("blocked on a FIFO")
    }

    fn drive() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("openstack/latest")).unwrap();
        std::fs::write(
            dir.path().join(META_DATA),
            r#"{"uuid": "83679162-1378-4288-a2d4-70e13ec132aa", "name": "node-a"}"#,
        )
        .unwrap();
        dir
    }

    #[test]
    fn config_drive_files_must_be_regular_files() {
        // A FIFO in place of network_data.json blocked for ever, a device was
        // read (/dev/zero without end; /dev/null here, harmless if a
        // regression reads it).
        let fifo = drive();
        let made = std::process::Command::new("mkfifo")
            .arg(fifo.path().join(NETWORK_DATA))
            .status()
            .unwrap();
        assert!(made.success());
        let root = fifo.path().to_owned();
        let error = without_blocking(move || from_config_drive(&root)).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("network_data.json: is a FIFO, not a regular file"),
            "{error}"
        );
        let device = drive();
        std::fs::remove_file(device.path().join(META_DATA)).unwrap();
        std::os::unix::fs::symlink("/dev/null", device.path().join(META_DATA)).unwrap();
        let root = device.path().to_owned();
        let error = without_blocking(move || from_config_drive(&root)).unwrap_err();
        assert!(
            error.to_string().contains("meta_data.json: is a character device"),
            "{error}"
        );
        // A regular drive still reads.
        assert_eq!(
            from_config_drive(drive().path()).unwrap().instance_id.as_deref(),
            Some("83679162-1378-4288-a2d4-70e13ec132aa")
        );
    }
}
