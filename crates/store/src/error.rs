//! What can go wrong in the store, in one place so that every file of the
//! crate reports the same way.

use std::io;
use std::path::{Path, PathBuf};

/// What went wrong writing to or reading from the store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// A file could not be written or read.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// A file whittle writes is a symbolic link: it is not followed
    /// (see [`no_follow`](crate::no_follow)).
    #[error("{path} is a symbolic link: whittle does not follow links where it writes")]
    Link {
        /// The link.
        path: PathBuf,
    },
    /// A transcript line was not a message.
    #[error("{path}:{line}: not a message: {reason}")]
    BadTranscript {
        /// The transcript file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The parse error.
        reason: String,
    },
    /// Too many different outputs claimed the same id.
    #[error("{dir}: too many different outputs for id {id:?}")]
    NameExhausted {
        /// The directory.
        dir: PathBuf,
        /// The id.
        id: String,
    },
}

pub(crate) fn io_err(path: &Path) -> impl FnOnce(io::Error) -> StoreError + '_ {
    move |source| {
        // What an open with `no_follow` says of a link at its name.
        if source.raw_os_error() == Some(libc::ELOOP) {
            return StoreError::Link {
                path: path.to_path_buf(),
            };
        }
        StoreError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}
