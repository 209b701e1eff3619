//! Why a command could not be confined.

use std::path::PathBuf;

/// What went wrong preparing or starting a confined command.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The kernel cannot confine commands here (found by the probe at start),
    /// and commands are refused rather than run unconfined.
    #[error(
        "commands are refused: the kernel cannot sandbox them here ({reason}); pass --sandbox off to run them unconfined"
    )]
    Unavailable {
        /// What the probe found, in one line.
        reason: String,
    },
    /// A configured root is not an absolute path (or `~/...`).
    #[error("sandbox root {0:?} must be an absolute path or start with ~/")]
    RelativeRoot(String),
    /// A folder the sandbox needs could not be made.
    #[error("cannot create {path}: {source}")]
    Create {
        /// The folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The policy could not be written for the helper.
    #[error("cannot encode the sandbox policy: {0}")]
    Encode(#[from] serde_json::Error),
}
