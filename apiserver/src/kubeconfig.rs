//! The kubeconfig, loaded so that no file it leads to can hang the program or
//! fill its memory: the kubeconfig files
//! themselves (`--kubeconfig`, or `$KUBECONFIG`'s list, or `~/.kube/config`)
//! and every file they name (certificate authority, client certificate and
//! key, token file) are read as bounded regular files and inlined before kube
//! sees the config; kube would read them with no such checks.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use cloud_access::files::{FileError, read_regular, read_regular_to_string};
use kube::config::Kubeconfig;

/// Kubeconfigs with embedded certificates take a few kilobytes each.
const KUBECONFIG_LIMIT: u64 = 16 * 1024 * 1024;
/// A certificate bundle, key or token named by a kubeconfig.
const REFERENCED_FILE_LIMIT: u64 = 4 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KubeconfigError {
    /// The kubeconfig itself (the error names its path).
    #[error("cannot read the kubeconfig (--kubeconfig, else $KUBECONFIG or ~/.kube/config): {source}")]
    File {
        file: String,
        #[source]
        source: FileError,
    },
    #[error("kubeconfig {file}: {field} {source}")]
    Referenced {
        file: String,
        field: &'static str,
        #[source]
        source: FileError,
    },
    #[error("kubeconfig {file}: {reason}")]
    Parse { file: String, reason: String },
}

/// Where the kubeconfig comes from: `--kubeconfig`, else `$KUBECONFIG` (a
/// list merged as kubectl merges it), else `~/.kube/config` if it exists.
/// `None`: no file, use the in-cluster configuration.
pub fn files(flag: Option<&Path>) -> Vec<PathBuf> {
    if let Some(path) = flag {
        return vec![path.to_owned()];
    }
    if let Some(list) = std::env::var_os("KUBECONFIG") {
        let paths: Vec<PathBuf> = std::env::split_paths(&list)
            .filter(|p| !p.as_os_str().is_empty())
            .collect();
        if !paths.is_empty() {
            return paths;
        }
    }
    std::env::home_dir()
        .map(|home| home.join(".kube").join("config"))
        .filter(|path| path.exists())
        .into_iter()
        .collect()
}

/// Reads and merges `paths` with every referenced file inlined; `None` when
/// `paths` is empty.
pub fn load(paths: &[PathBuf]) -> Result<Option<Kubeconfig>, KubeconfigError> {
    let mut merged: Option<Kubeconfig> = None;
    for path in paths {
        let config = load_one(path)?;
        merged = Some(match merged {
            None => config,
            Some(so_far) => so_far.merge(config).map_err(|e| KubeconfigError::Parse {
                file: path.display().to_string(),
                reason: e.to_string(),
            })?,
        });
    }
    Ok(merged)
}

fn load_one(path: &Path) -> Result<Kubeconfig, KubeconfigError> {
    let file = path.display().to_string();
    let text = read_regular_to_string(path, KUBECONFIG_LIMIT).map_err(|source| KubeconfigError::File {
        file: file.clone(),
        source,
    })?;
    let mut config = Kubeconfig::from_yaml(&text).map_err(|e| KubeconfigError::Parse {
        file: file.clone(),
        reason: e.to_string(),
    })?;
    // Relative paths are relative to the kubeconfig's directory, as for kubectl.
    let dir = path.parent().unwrap_or(Path::new("."));
    let read = |field: &'static str, name: &str| {
        read_regular(&dir.join(name), REFERENCED_FILE_LIMIT).map_err(|source| KubeconfigError::Referenced {
            file: file.clone(),
            field,
            source,
        })
    };
    let base64 = |bytes: Vec<u8>| base64::engine::general_purpose::STANDARD.encode(bytes);
    for cluster in config.clusters.iter_mut().filter_map(|named| named.cluster.as_mut()) {
        if let Some(name) = cluster.certificate_authority.take()
            && cluster.certificate_authority_data.is_none()
        {
            cluster.certificate_authority_data = Some(base64(read("certificate-authority", &name)?));
        }
    }
    for auth in config
        .auth_infos
        .iter_mut()
        .filter_map(|named| named.auth_info.as_mut())
    {
        if let Some(name) = auth.client_certificate.take()
            && auth.client_certificate_data.is_none()
        {
            auth.client_certificate_data = Some(base64(read("client-certificate", &name)?));
        }
        if let Some(name) = auth.client_key.take()
            && auth.client_key_data.is_none()
        {
            auth.client_key_data = Some(base64(read("client-key", &name)?).into());
        }
        if let Some(name) = auth.token_file.take()
            && auth.token.is_none()
        {
            let token = String::from_utf8_lossy(&read("tokenFile", &name)?).trim().to_owned();
            auth.token = Some(token.into());
        }
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret as _;

    fn mkfifo(path: &Path) {
        assert!(
            std::process::Command::new("mkfifo")
                .arg(path)
                .status()
                .unwrap()
                .success()
        );
    }

    fn kubeconfig(ca: &str, cert: &str, key: &str, token_file: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
             clusters:\n- name: k\n  cluster:\n    server: https://127.0.0.1:6443\n    certificate-authority: {ca}\n\
             users:\n- name: u\n  user:\n    client-certificate: {cert}\n    client-key: {key}\n    tokenFile: {token_file}\n\
             contexts:\n- name: c\n  context:\n    cluster: k\n    user: u\n"
        )
    }

    #[test]
    fn referenced_files_are_inlined_relative_to_the_kubeconfig() {
        let dir = tempfile::tempdir().unwrap();
        for (name, content) in [
            ("ca.crt", "CA"),
            ("node.crt", "CERT"),
            ("node.key", "KEY"),
            ("token", "tok\n"),
        ] {
            std::fs::write(dir.path().join(name), content).unwrap();
        }
        let path = dir.path().join("kubelet.conf");
        std::fs::write(&path, kubeconfig("ca.crt", "node.crt", "node.key", "token")).unwrap();
        let config = load(&[path]).unwrap().unwrap();
        let cluster = config.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(cluster.certificate_authority, None);
        assert_eq!(cluster.certificate_authority_data.as_deref(), Some("Q0E="));
        let auth = config.auth_infos[0].auth_info.as_ref().unwrap();
        assert_eq!(auth.client_certificate_data.as_deref(), Some("Q0VSVA=="));
        assert_eq!(auth.client_key_data.as_ref().unwrap().expose_secret(), "S0VZ");
        assert_eq!(auth.token.as_ref().unwrap().expose_secret(), "tok");
        assert_eq!(auth.token_file, None);
    }

    #[test]
    fn a_fifo_or_device_anywhere_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        mkfifo(&fifo);
        for name in ["ca.crt", "node.crt", "node.key", "token"] {
            std::fs::write(dir.path().join(name), "x").unwrap();
        }
        let cases = [
            (
                "certificate-authority",
                kubeconfig("fifo", "node.crt", "node.key", "token"),
            ),
            (
                "client-certificate",
                kubeconfig("ca.crt", "/dev/zero", "node.key", "token"),
            ),
            ("client-key", kubeconfig("ca.crt", "node.crt", "fifo", "token")),
            ("tokenFile", kubeconfig("ca.crt", "node.crt", "node.key", "/dev/zero")),
        ];
        for (field, text) in cases {
            let path = dir.path().join("kubelet.conf");
            std::fs::write(&path, text).unwrap();
            let message = load(&[path]).unwrap_err().to_string();
            assert!(message.contains(field), "{message}");
            assert!(message.contains("not a regular file"), "{message}");
        }
        let message = load(&[fifo]).unwrap_err().to_string();
        assert!(message.contains("a FIFO"), "{message}");
    }

    #[test]
    fn the_flag_wins_over_the_environment() {
        assert_eq!(
            files(Some(Path::new("/x/kubeconfig"))),
            vec![PathBuf::from("/x/kubeconfig")]
        );
    }
}
