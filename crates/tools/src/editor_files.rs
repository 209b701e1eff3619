//! Files as an editor holds them. A front end embedded in an editor (an ACP
//! client) may keep unsaved buffers that differ from the disk; when it
//! offers to, `read_file` reads through it and `write_file`/`edit_file`
//! write through it, so the agent sees what the person sees and the editor
//! shows the change in the open buffer. Paths are checked by the permission
//! layer before a tool runs, as for the disk.

use futures::future::BoxFuture;
use std::fmt::Debug;
use std::path::{Path, PathBuf};

/// Why the editor could not read or write a file; the tool then says so in
/// one line (a read falls back to the disk).
#[derive(Debug, thiserror::Error)]
#[error("the editor could not {action} {}: {reason}", path.display())]
pub struct EditorFileError {
    /// `read` or `write`.
    pub action: &'static str,
    /// The file.
    pub path: PathBuf,
    /// What the editor answered.
    pub reason: String,
}

/// What the editor offers to do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EditorFileCapabilities {
    /// Reads go to the editor (its buffer, saved or not).
    pub read: bool,
    /// Writes go to the editor.
    pub write: bool,
}

/// An editor's access to the workspace's text files.
pub trait EditorFiles: Send + Sync + Debug {
    /// Which of the two the editor does; the other goes to the disk.
    fn capabilities(&self) -> EditorFileCapabilities;

    /// The whole text of `path` (absolute) as the editor has it.
    fn read_text<'a>(&'a self, path: &'a Path) -> BoxFuture<'a, Result<String, EditorFileError>>;

    /// Replaces the whole text of `path` (absolute), creating the file.
    fn write_text<'a>(
        &'a self,
        path: &'a Path,
        text: &'a str,
    ) -> BoxFuture<'a, Result<(), EditorFileError>>;
}
