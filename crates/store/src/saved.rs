//! The record of one saved output, shared by the store, the streaming
//! writer and the transcript.

use crate::hash::ContentHash;
use serde::{Deserialize, Serialize};
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
