//! Why a trace could not be imported, always naming the file and where in it.

use super::Format;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use whittle_protocol::ValidationError;

/// What went wrong importing one trace file.
///
/// Every variant names the file; errors inside a file also name the 1-based
/// line (JSONL, and JSON syntax errors) or the JSON path (shape errors in a
/// JSON document), so that a person can open the file at the fault. The
/// message is always one line, even for hostile paths.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The file (or a folder while walking a tree) could not be read.
    #[error("{}: {source}", Shown(path))]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// The file holds nothing but whitespace.
    #[error("{}: the file is empty", Shown(path))]
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// The bytes are not JSON (or a JSONL line is not), e.g. a truncated or corrupted file.
    #[error("{}:{line}:{column}: invalid JSON: {reason}", Shown(path))]
    Syntax {
        /// The file.
        path: PathBuf,
        /// 1-based line in the file.
        line: usize,
        /// 1-based column in that line (0 when unknown).
        column: usize,
        /// The parser's message.
        reason: String,
    },
    /// A JSONL line is valid JSON but not the event this format needs.
    #[error("{}:{line}: {reason}", Shown(path))]
    BadLine {
        /// The file.
        path: PathBuf,
        /// 1-based line in the file.
        line: usize,
        /// What is wrong, naming the field.
        reason: String,
    },
    /// A JSON document is valid JSON but a value has the wrong shape.
    #[error("{}: at {at}: {reason}", Shown(path))]
    BadValue {
        /// The file.
        path: PathBuf,
        /// JSON path of the value, such as `messages[3].content`.
        at: String,
        /// What is wrong.
        reason: String,
    },
    /// The content matches none of the formats this module reads.
    #[error("{}: not a recognized trace format: {reason}", Shown(path))]
    UnknownFormat {
        /// The file.
        path: PathBuf,
        /// What the file looked like instead.
        reason: String,
    },
    /// The format was recognized but cannot be imported yet.
    #[error("{}: importing {format} files is not supported yet", Shown(path))]
    Unsupported {
        /// The file.
        path: PathBuf,
        /// The detected format.
        format: Format,
    },
    /// The file is in a known format but holds no user or assistant message.
    #[error("{}: conversation {id:?} has no messages", Shown(path))]
    NoMessages {
        /// The file.
        path: PathBuf,
        /// The conversation's id.
        id: String,
    },
    /// Repairs did not yield a valid request: a bug in the importer, reported
    /// rather than handing replay a history the API would reject.
    #[error(
        "{}: conversation {id:?} is invalid after repair: {source}",
        Shown(path)
    )]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The conversation's id.
        id: String,
        /// The first rule still broken.
        source: ValidationError,
    },
}

impl ImportError {
    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            ImportError::Io { path, .. }
            | ImportError::Empty { path }
            | ImportError::Syntax { path, .. }
            | ImportError::BadLine { path, .. }
            | ImportError::BadValue { path, .. }
            | ImportError::UnknownFormat { path, .. }
            | ImportError::Unsupported { path, .. }
            | ImportError::NoMessages { path, .. }
            | ImportError::Invalid { path, .. } => path,
        }
    }

    /// The 1-based line at fault, when the error has one.
    pub fn line(&self) -> Option<usize> {
        match self {
            ImportError::Syntax { line, .. } | ImportError::BadLine { line, .. } => Some(*line),
            _ => None,
        }
    }
}

/// A path for a one-line message: control characters escaped.
struct Shown<'a>(&'a Path);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in self.0.to_string_lossy().chars() {
            if c.is_control() {
                write!(f, "{}", c.escape_default())?;
            } else {
                write!(f, "{c}")?;
            }
        }
        Ok(())
    }
}
