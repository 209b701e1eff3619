//! The record of one saved output, shared by the store, the streaming
//! writer and the transcript.

use crate::hash::ContentHash;
use serde::{Deserialize, Serialize};
use std::fs::OpenOptions;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

/// A tool output saved in the store: where it is, and its size and hash, so
/// that whoever reads a reference to it later can tell a missing or altered
/// file from the real one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedOutput {
    /// The file.
    pub path: PathBuf,
    /// Its size in bytes.
    pub bytes: u64,
    /// Its content hash.
    pub hash: ContentHash,
}

/// Why the file a [`SavedOutput`] names is no longer what was saved.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SavedMismatch {
    /// It could not be opened or read.
    #[error("is missing")]
    Missing,
    /// It is a FIFO, a device, a socket or a folder.
    #[error("is not a regular file")]
    NotRegular,
    /// Its size or hash differ.
    #[error("has changed")]
    Changed,
}

impl SavedOutput {
    /// The file's bytes when it is still what was saved. A reference names
    /// its file by path, read from a log that may not be the person's own:
    /// the path may lead to a FIFO (an open that blocks forever) or to
    /// `/dev/zero` (a read that never ends), so the file is opened without
    /// blocking, and its type and size are checked before it is read.
    pub fn read_back(&self) -> Result<Vec<u8>, SavedMismatch> {
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(&self.path)
            .map_err(|_| SavedMismatch::Missing)?;
        let meta = file.metadata().map_err(|_| SavedMismatch::Missing)?;
        if !meta.is_file() {
            return Err(SavedMismatch::NotRegular);
        }
        if meta.len() != self.bytes {
            return Err(SavedMismatch::Changed);
        }
        let mut bytes = Vec::new();
        file.take(self.bytes)
            .read_to_end(&mut bytes)
            .map_err(|_| SavedMismatch::Missing)?;
        if bytes.len() as u64 != self.bytes || ContentHash::of(&bytes) != self.hash {
            return Err(SavedMismatch::Changed);
        }
        Ok(bytes)
    }
}
