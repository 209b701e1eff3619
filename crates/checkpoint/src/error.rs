use std::io;
use std::path::PathBuf;

/// Why a checkpoint operation failed, in one line the caller can print
/// before going on without checkpoints.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// The store folder cannot be used: read-only, full disk, no
    /// permission. Checkpoints are off until the cause is fixed.
    #[error("checkpoint store {path} is unusable: {source}")]
    StoreUnusable {
        /// The file or folder in the store that failed.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// The workspace itself could not be read or written.
    #[error("workspace path {path}: {source}")]
    Workspace {
        /// The workspace path that failed.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// No checkpoint with this id in the store (pruned, or never made).
    #[error("no checkpoint {0} in the store")]
    NotFound(String),
    /// An id that cannot be a checkpoint id (ids are 16 hex digits).
    #[error("{0:?} is not a checkpoint id")]
    InvalidId(String),
    /// An object or record in the store does not read back as written.
    #[error("checkpoint store is corrupt: {0}")]
    Corrupt(String),
    /// A tree in the store names an entry that is no plain name of one
    /// entry of its folder (`..`, `a/b`, an absolute path, `.git`, or
    /// `.whittle` at the root). The scan never records one, so the store
    /// was forged (a repository can ship one); a restore following it
    /// would write outside the workspace or into `.git`.
    #[error(
        "checkpoint store file {path} names an entry {name:?} that would reach outside its \
         folder or into .git or .whittle (a forged store?); refusing to restore from it"
    )]
    UnsafeName {
        /// The tree object holding the name.
        path: PathBuf,
        /// The name, lossily as text.
        name: String,
    },
}

impl CheckpointError {
    pub(crate) fn store(path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> CheckpointError {
        let path = path.into();
        move |source| CheckpointError::StoreUnusable { path, source }
    }

    pub(crate) fn workspace(path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> CheckpointError {
        let path = path.into();
        move |source| CheckpointError::Workspace { path, source }
    }
}
