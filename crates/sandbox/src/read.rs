//! Reading a file whittle opens on its own (project instructions, skills,
//! config) from a folder a command or a cloned repository may have filled:
//! a FIFO would block the open forever, `/dev/zero` would never end, a
//! huge file would eat memory. Regular files only, bounded, never blocking.

use nix::fcntl::OFlag;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Why a file was not read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// It could not be opened or read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// It is a FIFO, a device, a socket or a folder.
    #[error("{path} is a {kind}, not a regular file: skipped")]
    NotRegular {
        /// The file.
        path: PathBuf,
        /// What it is.
        kind: &'static str,
    },
    /// It is larger than the limit.
    #[error("{path} is larger than {limit} bytes: skipped")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The limit.
        limit: u64,
    },
}

impl ReadError {
    /// True when the file does not exist (callers usually say nothing then).
    pub fn is_not_found(&self) -> bool {
        matches!(self, ReadError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }
}

/// Whether an open follows a link at the file's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtName {
    /// A link there is followed (the caller checked where it leads).
    FollowLink,
    /// A link there is refused (`ELOOP`).
    RefuseLink,
}

/// `path` opened for reading when it is a regular file. The open never
/// blocks (`O_NONBLOCK`, `O_NOCTTY`), and what was opened is checked, not
/// what the name showed a moment before.
pub fn open_regular_file(path: &Path, at_name: AtName) -> Result<File, ReadError> {
    let io = |source| ReadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut flags = OFlag::O_NONBLOCK | OFlag::O_NOCTTY;
    if at_name == AtName::RefuseLink {
        flags |= OFlag::O_NOFOLLOW;
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags.bits())
        .open(path)
        .map_err(io)?;
    let kind = file.metadata().map_err(io)?.file_type();
    if !kind.is_file() {
        let kind = if kind.is_fifo() {
            "FIFO"
        } else if kind.is_char_device() || kind.is_block_device() {
            "device"
        } else if kind.is_socket() {
            "socket"
        } else if kind.is_dir() {
            "folder"
        } else {
            "special file"
        };
        return Err(ReadError::NotRegular {
            path: path.to_path_buf(),
            kind,
        });
    }
    Ok(file)
}

/// The bytes of `path` when it is a regular file of at most `limit` bytes,
/// opened as [`open_regular_file`] opens it (a link at the name followed).
pub fn read_regular_file(path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    let io = |source| ReadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = open_regular_file(path, AtName::FollowLink)?;
    let meta = file.metadata().map_err(io)?;
    if meta.len() > limit {
        return Err(ReadError::TooLarge {
            path: path.to_path_buf(),
            limit,
        });
    }
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > limit {
        return Err(ReadError::TooLarge {
            path: path.to_path_buf(),
            limit,
        });
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regular_files_are_read_and_the_rest_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("AGENTS.md");
        std::fs::write(&file, "be brief").unwrap();
        assert_eq!(read_regular_file(&file, 100).unwrap(), b"be brief");
        let err = read_regular_file(&file, 3).unwrap_err();
        assert!(matches!(err, ReadError::TooLarge { .. }), "{err}");
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let err = read_regular_file(&fifo, 100).unwrap_err();
        assert!(err.to_string().contains("FIFO"), "{err}");
        let link = dir.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        let err = read_regular_file(&link, 100).unwrap_err();
        assert!(err.to_string().contains("device"), "{err}");
        assert!(
            read_regular_file(dir.path(), 100)
                .unwrap_err()
                .to_string()
                .contains("folder")
        );
        assert!(
            read_regular_file(&dir.path().join("none"), 100)
                .unwrap_err()
                .is_not_found()
        );
        assert!(
            !read_regular_file(&fifo, 1)
                .unwrap_err()
                .to_string()
                .contains('\n')
        );
    }
}
