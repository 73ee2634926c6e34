//! Handing the choice to kubelet: an environment file written atomically
//! and only when its content changes, and an optional sticky record of the
//! first choice.

use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    Written,
    Unchanged,
}

#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} has no parent directory to write it in")]
    NoParent { path: PathBuf },
}

/// Replaces `path` with `content` through a temporary file in the same
/// directory and a rename, so a reader (or a crash) never sees half a file.
/// Leaves the file alone (and its mtime) when the content is the same.
pub fn write_if_changed(path: &Path, content: &[u8]) -> Result<WriteOutcome, FileError> {
    if std::fs::read(path).is_ok_and(|existing| existing == content) {
        return Ok(WriteOutcome::Unchanged);
    }
    let error = |source| FileError::Write {
        path: path.to_owned(),
        source,
    };
    let dir = match path.parent() {
        Some(dir) if dir.as_os_str().is_empty() => Path::new("."),
        Some(dir) => dir,
        None => return Err(FileError::NoParent { path: path.to_owned() }),
    };
    std::fs::create_dir_all(dir).map_err(error)?;
    let mut temp = tempfile::Builder::new()
        .prefix(".node-ip-helper-")
        .tempfile_in(dir)
        .map_err(error)?;
    temp.write_all(content).map_err(error)?;
    temp.as_file().sync_all().map_err(error)?;
    temp.persist(path).map_err(|e| error(e.error))?;
    Ok(WriteOutcome::Written)
}

/// The first choice, kept across reboots by `--sticky`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StickyChoice {
    #[serde(rename = "nodeIPs")]
    pub node_ips: Vec<IpAddr>,
}

/// The recorded choice, or `None` when there is none or it cannot be read
/// (then a new choice is made and recorded).
pub fn read_sticky(path: &Path) -> Option<StickyChoice> {
    let bytes = std::fs::read(path).ok()?;
    serde_json::from_slice(&bytes).ok()
}

pub fn write_sticky(path: &Path, choice: &StickyChoice) -> Result<WriteOutcome, FileError> {
    // Serializing addresses cannot fail.
    let bytes = serde_json::to_vec_pretty(choice).unwrap_or_default();
    write_if_changed(path, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_atomically_and_only_on_change() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/kubelet.env");
        assert_eq!(write_if_changed(&path, b"A=1\n").unwrap(), WriteOutcome::Written);
        let before = std::fs::metadata(&path).unwrap().modified().unwrap();
        assert_eq!(write_if_changed(&path, b"A=1\n").unwrap(), WriteOutcome::Unchanged);
        assert_eq!(std::fs::metadata(&path).unwrap().modified().unwrap(), before);
        assert_eq!(write_if_changed(&path, b"A=2\n").unwrap(), WriteOutcome::Written);
        assert_eq!(std::fs::read(&path).unwrap(), b"A=2\n");
        let leftovers: Vec<_> = std::fs::read_dir(path.parent().unwrap()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temporary file is left behind");
    }

    #[test]
    fn an_unwritable_place_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("file");
        std::fs::write(&blocker, b"x").unwrap();
        let err = write_if_changed(&blocker.join("kubelet.env"), b"A=1").unwrap_err();
        assert!(err.to_string().contains("kubelet.env"), "{err}");
    }

    #[test]
    fn sticky_round_trip_and_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sticky.json");
        assert_eq!(read_sticky(&path), None);
        let choice = StickyChoice {
            node_ips: vec!["10.0.0.5".parse().unwrap()],
        };
        write_sticky(&path, &choice).unwrap();
        assert_eq!(read_sticky(&path), Some(choice));
        std::fs::write(&path, b"{garbage").unwrap();
        assert_eq!(read_sticky(&path), None);
    }
}
