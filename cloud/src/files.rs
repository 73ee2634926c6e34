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
/// `contents` so that a reader, or a crash or power loss at any point, sees
/// the old file or the new one, never half of one: the bytes go to a
/// temporary file in the same directory, which is `fsync`ed, renamed over the
/// target, and then the directory is `fsync`ed so that the rename itself is
/// on disk. The new file gets `mode` exactly (not masked by the umask).
/// Creates missing parent directories.
///
/// The temporary file has one fixed name per target, `.<name>.tmp`, taken
/// under an exclusive lock: a write killed half-way leaves at most that one
/// file behind, which the next write reuses, and two writers of the same
/// target take turns instead of writing into each other's file.
pub fn write_atomically(path: &Path, contents: &[u8], mode: u32) -> Result<(), FileError> {
    let target = write_target(path)?;
    let (dir, name) = match (target.parent(), target.file_name()) {
        (Some(dir), Some(name)) if dir.as_os_str().is_empty() => (Path::new("."), name),
        (Some(dir), Some(name)) => (dir, name),
        _ => return Err(FileError::NoParent { path: path.to_owned() }),
    };
    std::fs::create_dir_all(dir).map_err(io_error(dir))?;
    let mut temp_name = std::ffi::OsString::from(".");
    temp_name.push(name);
    temp_name.push(".tmp");
    let temp_path = dir.join(temp_name);
    let mut temp = locked_temp(&temp_path, mode).map_err(io_error(&temp_path))?;
    temp.set_len(0).map_err(io_error(&temp_path))?;
    // `mode` is masked by the umask on creation, and a file left by a killed
    // write may have been created with another mode.
    temp.set_permissions(std::fs::Permissions::from_mode(mode))
        .map_err(io_error(&temp_path))?;
    temp.write_all(contents).map_err(io_error(&temp_path))?;
    temp.sync_all().map_err(io_error(&temp_path))?;
    std::fs::rename(&temp_path, &target).map_err(io_error(&target))?;
    // The rename is an entry in the directory: without this a power loss can
    // bring back the old entry, or none at all on a new file.
    File::open(dir)
        .and_then(|directory| directory.sync_all())
        .map_err(io_error(dir))?;
    drop(temp);
    Ok(())
}

/// Opens (creating it if needed) the temporary file at `temp` and takes an
/// exclusive lock on it, waiting for another writer of the same target to
/// finish. A waiter whose file was meanwhile renamed over the target by the
/// writer before it opens the new temporary file instead. Never follows a
/// symbolic link and never blocks on a FIFO there.
fn locked_temp(temp: &Path, mode: u32) -> std::io::Result<File> {
    use std::os::unix::fs::MetadataExt;
    loop {
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .mode(mode)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(temp)?;
        let opened = file.metadata()?;
        if !opened.file_type().is_file() {
            return Err(std::io::Error::other(format!(
                "is {}, not a regular file; remove it (this program writes its temporary file there)",
                kind_of(opened.file_type())
            )));
        }
        file.lock()?;
        match std::fs::symlink_metadata(temp) {
            Ok(now) if now.dev() == opened.dev() && now.ino() == opened.ino() => return Ok(file),
            Ok(_) => continue,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => continue,
            Err(error) => return Err(error),
        }
    }
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
    fn a_temporary_file_left_by_a_killed_write_is_reused() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("out.env");
        write_atomically(&path, b"A=1\n", 0o600).expect("the atomic write");
        // What a write killed before its rename leaves: half the new content.
        let left = dir.path().join(".out.env.tmp");
        std::fs::write(&left, b"A=").expect("the file written");
        std::fs::set_permissions(&left, std::fs::Permissions::from_mode(0o666)).expect("permissions set");
        assert_eq!(std::fs::read(&path).expect("the file read"), b"A=1\n");
        write_atomically(&path, b"A=2\n", 0o600).expect("the atomic write");
        assert_eq!(std::fs::read(&path).expect("the file read"), b"A=2\n");
        let mode = std::fs::metadata(&path)
            .expect("the file's metadata")
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600);
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .expect("listed")
            .map(|entry| entry.expect("a directory entry").file_name())
            .collect();
        assert_eq!(names, ["out.env"]);
    }

    #[test]
    fn a_symlink_or_fifo_in_the_temporary_files_place_is_refused() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("out.env");
        let elsewhere = dir.path().join("elsewhere");
        std::fs::write(&elsewhere, b"keep").expect("the file written");
        symlink(&elsewhere, dir.path().join(".out.env.tmp")).expect("the symlink made");
        let error = write_atomically(&path, b"x", 0o600).unwrap_err();
        assert!(error.to_string().contains(".out.env.tmp"), "{error}");
        assert_eq!(std::fs::read(&elsewhere).expect("the file read"), b"keep");
        std::fs::remove_file(dir.path().join(".out.env.tmp")).expect("the file removed");
        mkfifo(&dir.path().join(".out.env.tmp"));
        let error = write_atomically(&path, b"x", 0o600).unwrap_err();
        assert!(error.to_string().contains(".out.env.tmp"), "{error}");
        assert!(!path.exists());
    }

    #[test]
    fn concurrent_writers_of_one_target_take_turns() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("out.env");
        let contents: Vec<Vec<u8>> = (0..8).map(|i| vec![b'a' + i; 64 * 1024]).collect();
        let (path, contents) = (&path, &contents);
        std::thread::scope(|scope| {
            for content in contents {
                scope.spawn(move || {
                    for _ in 0..25 {
                        write_atomically(path, content, 0o600).expect("the atomic write");
                        let now = std::fs::read(path).expect("the file read");
                        assert!(contents.contains(&now), "a mixed or partial file");
                    }
                });
            }
        });
        assert!(contents.contains(&std::fs::read(path).expect("the file read")));
        assert_eq!(
            std::fs::read_dir(dir.path()).expect("the directory listed").count(),
            1,
            "no temporary file is left behind"
        );
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
