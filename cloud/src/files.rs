//! Reading and writing the files an operator names (configs, credentials,
//! certificates, the files handed to kubelet) safely: only regular files,
//! never blocking on a FIFO or reading a device without end, never half a file.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Why an operator's file could not be read or written. Each message names the
/// path and says what to give instead; callers add the flag or field.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FileError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: is {kind}, not a regular file; give the path of a regular file")]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error(
        "{path}: larger than {limit} bytes, the most this program reads from such a file; check that the path is right"
    )]
    TooLarge { path: PathBuf, limit: u64 },
    #[error("{path}: not UTF-8 text ({source})")]
    NotUtf8 {
        path: PathBuf,
        #[source]
        source: std::string::FromUtf8Error,
    },
    #[error("{path}: is a symbolic link to a missing file; point it at a regular file or remove it")]
    DanglingLink { path: PathBuf },
    #[error("{path}: has no parent directory to write it in")]
    NoParent { path: PathBuf },
}

impl FileError {
    /// The path at fault.
    pub fn path(&self) -> &Path {
        match self {
            Self::Io { path, .. }
            | Self::NotRegular { path, .. }
            | Self::TooLarge { path, .. }
            | Self::NotUtf8 { path, .. }
            | Self::DanglingLink { path }
            | Self::NoParent { path } => path,
        }
    }

    /// Whether the file does not exist (callers that treat a missing file as
    /// "nothing recorded yet" ask this).
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> FileError + '_ {
    move |source| FileError::Io {
        path: path.to_owned(),
        source,
    }
}

/// What a non-regular file is, for the message.
fn kind_of(file_type: std::fs::FileType) -> &'static str {
    if file_type.is_dir() {
        "a directory"
    } else if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else if file_type.is_socket() {
        "a socket"
    } else if file_type.is_symlink() {
        "a symbolic link"
    } else {
        "not a regular file"
    }
}

/// Reads the regular file at `path` (symbolic links followed, as Secret and
/// ConfigMap volumes need), at most `limit` bytes. A FIFO, device, socket or
/// directory is refused without blocking: the file is opened non-blocking and
/// its type checked on the open descriptor, so a swap between check and read
/// cannot slip one in.
pub fn read_regular(path: &Path, limit: u64) -> Result<Vec<u8>, FileError> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(io_error(path))?;
    let metadata = file.metadata().map_err(io_error(path))?;
    if !metadata.file_type().is_file() {
        return Err(FileError::NotRegular {
            path: path.to_owned(),
            kind: kind_of(metadata.file_type()),
        });
    }
    if metadata.len() > limit {
        return Err(FileError::TooLarge {
            path: path.to_owned(),
            limit,
        });
    }
    // The size can change under us (a file still being written): bound the read too.
    let mut bytes = Vec::with_capacity(usize::try_from(metadata.len()).unwrap_or(0));
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io_error(path))?;
    if bytes.len() as u64 > limit {
        return Err(FileError::TooLarge {
            path: path.to_owned(),
            limit,
        });
    }
    Ok(bytes)
}

/// [`read_regular`] as UTF-8 text.
pub fn read_regular_to_string(path: &Path, limit: u64) -> Result<String, FileError> {
    String::from_utf8(read_regular(path, limit)?).map_err(|source| FileError::NotUtf8 {
        path: path.to_owned(),
        source,
    })
}

/// Where a write to `path` lands: `path` itself when it is missing or a
/// regular file; the file a symbolic link points to (the link is kept) when
/// that is a regular file. Anything else is refused, so that a device, FIFO
/// or directory is never replaced or written into.
pub fn write_target(path: &Path) -> Result<PathBuf, FileError> {
    match std::fs::symlink_metadata(path) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(path.to_owned()),
        Err(source) => Err(FileError::Io {
            path: path.to_owned(),
            source,
        }),
        Ok(metadata) if metadata.file_type().is_file() => Ok(path.to_owned()),
        Ok(metadata) if metadata.file_type().is_symlink() => {
            let target = std::fs::canonicalize(path).map_err(|error| {
                if error.kind() == std::io::ErrorKind::NotFound {
                    FileError::DanglingLink { path: path.to_owned() }
                } else {
                    FileError::Io {
                        path: path.to_owned(),
                        source: error,
                    }
                }
            })?;
            let metadata = std::fs::metadata(&target).map_err(io_error(&target))?;
            if metadata.file_type().is_file() {
                Ok(target)
            } else {
                Err(FileError::NotRegular {
                    path: path.to_owned(),
                    kind: kind_of(metadata.file_type()),
                })
            }
        }
        Ok(metadata) => Err(FileError::NotRegular {
            path: path.to_owned(),
            kind: kind_of(metadata.file_type()),
        }),
    }
}

/// Replaces the file at `path` (see [`write_target`] for what that is) with
/// `contents`, through a temporary file in the same directory, `fsync` and a
/// rename: a reader, or a crash, sees the old file or the new one, never half
/// of one. The new file gets `mode` exactly (not masked by the umask).
/// Creates missing parent directories.
pub fn write_atomically(path: &Path, contents: &[u8], mode: u32) -> Result<(), FileError> {
    let target = write_target(path)?;
    let dir = match target.parent() {
        Some(dir) if dir.as_os_str().is_empty() => Path::new("."),
        Some(dir) => dir,
        None => return Err(FileError::NoParent { path: path.to_owned() }),
    };
    std::fs::create_dir_all(dir).map_err(io_error(dir))?;
    let mut temp = tempfile::Builder::new()
        .prefix(".tmp-")
        .permissions(std::fs::Permissions::from_mode(mode))
        .tempfile_in(dir)
        .map_err(io_error(&target))?;
    let file: &File = temp.as_file();
    // `permissions` is masked by the umask on creation.
    file.set_permissions(std::fs::Permissions::from_mode(mode))
        .map_err(io_error(&target))?;
    temp.write_all(contents).map_err(io_error(&target))?;
    temp.as_file().sync_all().map_err(io_error(&target))?;
    temp.persist(&target).map_err(|e| FileError::Io {
        path: target.clone(),
        source: e.error,
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn mkfifo(path: &Path) {
        let status = std::process::Command::new("mkfifo").arg(path).status().unwrap();
        assert!(status.success());
    }

    #[test]
    fn reads_a_regular_file_and_through_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config");
        std::fs::write(&file, b"hello").unwrap();
        let link = dir.path().join("link");
        symlink(&file, &link).unwrap();
        assert_eq!(read_regular(&file, 5).unwrap(), b"hello");
        assert_eq!(read_regular_to_string(&link, 100).unwrap(), "hello");
    }

    #[test]
    fn refuses_a_file_over_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("big");
        std::fs::write(&file, b"123456").unwrap();
        let error = read_regular(&file, 5).unwrap_err();
        assert!(matches!(error, FileError::TooLarge { limit: 5, .. }), "{error}");
        assert!(error.to_string().contains("big"), "{error}");
    }

    #[test]
    fn refuses_devices_fifos_and_directories_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        mkfifo(&fifo);
        let link_to_zero = dir.path().join("zero");
        symlink("/dev/zero", &link_to_zero).unwrap();
        for (path, kind) in [
            (fifo.as_path(), "a FIFO"),
            (Path::new("/dev/zero"), "a character device"),
            (link_to_zero.as_path(), "a character device"),
            (dir.path(), "a directory"),
        ] {
            let error = read_regular(path, 1 << 20).unwrap_err();
            let message = error.to_string();
            assert!(message.contains(kind), "{message}");
            assert!(message.contains("give the path of a regular file"), "{message}");
        }
    }

    #[test]
    fn writes_atomically_with_the_mode_asked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/out.env");
        write_atomically(&path, b"A=1\n", 0o644).unwrap();
        write_atomically(&path, b"A=2\n", 0o600).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"A=2\n");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let entries = std::fs::read_dir(path.parent().unwrap()).unwrap().count();
        assert_eq!(entries, 1, "no temporary file is left behind");
    }

    #[test]
    fn a_symlink_is_followed_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.env");
        std::fs::write(&real, b"old").unwrap();
        let link = dir.path().join("link.env");
        symlink(&real, &link).unwrap();
        write_atomically(&link, b"new", 0o644).unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read(&real).unwrap(), b"new");
    }

    #[test]
    fn never_replaces_a_device_fifo_directory_or_dangling_link() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        mkfifo(&fifo);
        // A link to a FIFO, not to /dev/null: a regression must not replace a real device.
        let to_fifo = dir.path().join("fifo-link");
        symlink(&fifo, &to_fifo).unwrap();
        let dangling = dir.path().join("dangling");
        symlink(dir.path().join("missing"), &dangling).unwrap();
        let subdir = dir.path().join("subdir");
        std::fs::create_dir(&subdir).unwrap();
        for path in [&fifo, &to_fifo, &dangling, &subdir] {
            let error = write_atomically(path, b"x", 0o600).unwrap_err();
            assert!(error.to_string().contains(&*path.to_string_lossy()), "{error}");
        }
        assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
        assert!(std::fs::symlink_metadata(&to_fifo).unwrap().file_type().is_symlink());
        assert!(std::fs::symlink_metadata(&dangling).unwrap().file_type().is_symlink());
    }
}
