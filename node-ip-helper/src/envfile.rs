//! Handing the choice to kubelet: an environment file written atomically
//! and only when its content changes, and an optional sticky record of the
//! first choice. Only a regular file (or a missing path) is ever replaced;
//! a symbolic link to a regular file is followed (the file is replaced, the
//! link kept), and a device, FIFO, directory or dangling link is refused
//! without blocking.

use std::net::IpAddr;
use std::path::Path;

use cloud_access::files::{self, FileError};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    Written,
    Unchanged,
}

/// Both files are small; anything larger is not ours and is replaced.
const LIMIT: u64 = 64 * 1024;

/// Root reads them (systemd, kubelet); nobody else needs to.
const MODE: u32 = 0o600;

/// Refuses, before anything is written, a path that [`write_if_changed`]
/// would refuse.
pub fn check_writable(path: &Path) -> Result<(), FileError> {
    files::write_target(path).map(drop)
}

/// Replaces `path` with `content` through a temporary file in the same
/// directory and a rename, so a reader (or a crash) never sees half a file.
/// Leaves the file alone (and its mtime) when the content is the same.
pub fn write_if_changed(path: &Path, content: &[u8]) -> Result<WriteOutcome, FileError> {
    if files::read_regular(path, LIMIT).is_ok_and(|existing| existing == content) {
        return Ok(WriteOutcome::Unchanged);
    }
    files::write_atomically(path, content, MODE)?;
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
    let bytes = files::read_regular(path, LIMIT).ok()?;
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
    fn a_device_or_dangling_link_is_never_replaced() {
        use std::os::unix::fs::{FileTypeExt, symlink};
        let dir = tempfile::tempdir().unwrap();
        // A private node for the null device: a regression replaces this, not /dev/null.
        let null = dir.path().join("null");
        let made = std::process::Command::new("mknod")
            .arg(&null)
            .args(["c", "1", "3"])
            .status()
            .unwrap();
        assert!(made.success(), "mknod needs root");
        let to_null = dir.path().join("to-null.env");
        symlink(&null, &to_null).unwrap();
        let dangling = dir.path().join("dangling.env");
        symlink(dir.path().join("missing"), &dangling).unwrap();
        for path in [&null, &to_null, &dangling] {
            let error = write_if_changed(path, b"A=1\n").unwrap_err();
            assert!(error.to_string().contains(&*path.to_string_lossy()), "{error}");
        }
        assert!(std::fs::symlink_metadata(&null).unwrap().file_type().is_char_device());
        assert!(std::fs::symlink_metadata(&to_null).unwrap().file_type().is_symlink());
        assert!(std::fs::symlink_metadata(&dangling).unwrap().file_type().is_symlink());
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
