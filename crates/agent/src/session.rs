//! Writing the session log, finding sessions, and opening one to resume.
//!
//! The record format lives in [`whittle_context::session::SessionRecord`], where the
//! replay importer reads it too. Every record is written and flushed as one
//! line, so a crash loses at most the line being written.

use crate::session_key::{SessionHeader, SessionKey};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};
use whittle_context::session::{
    SESSION_FORMAT, SessionError, SessionRecord, SessionState, read_session,
};
use whittle_protocol::Redactor;

/// An open session log, appended to as the agent works.
#[derive(Debug)]
pub struct SessionWriter {
    id: String,
    path: PathBuf,
    file: File,
    redactor: Redactor,
}

/// Refuses the log at `path` (read back as `state`) unless `key` sealed its
/// header, the header names `workspace` and its id is the file's name: see
/// [`SessionKey`]. A sealed header is readable by commands, so without the
/// last two a command could copy one into a sub-folder's `.whittle/` (only
/// the workspace's own is out of their reach) under forged messages.
pub fn check_sealed(
    path: &Path,
    state: &SessionState,
    key: &SessionKey,
    workspace: &Path,
) -> Result<(), SessionFileError> {
    if state.cwd != workspace.display().to_string()
        || path.file_stem().and_then(|s| s.to_str()) != Some(state.id.as_str())
    {
        return Err(SessionFileError::OtherFolder {
            path: path.to_path_buf(),
            cwd: state.cwd.clone(),
        });
    }
    let header = SessionHeader {
        id: &state.id,
        model: &state.model,
        cwd: &state.cwd,
        created_ms: state.created_ms,
    };
    match &state.seal {
        Some(seal) if key.is_seal_of(seal, header) => Ok(()),
        _ => Err(SessionFileError::NotSealed {
            path: path.to_path_buf(),
        }),
    }
}

/// A session found on disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionInfo {
    /// Its id.
    pub id: String,
    /// Its log.
    pub path: PathBuf,
    /// When it was last written.
    pub modified: SystemTime,
}

/// Why a session could not be opened or written.
#[derive(Debug, thiserror::Error)]
pub enum SessionFileError {
    /// File system trouble.
    #[error("session log {path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// The log could not be read back.
    #[error(transparent)]
    Read(#[from] SessionError),
    /// A log whose header the person's key did not seal: it came with the
    /// folder, or from another account or an older whittle.
    #[error(
        "session log {} was not started by whittle under your account (a folder can ship .whittle/sessions/), so it is not taken for yours; pass --trust-project to use it anyway",
        path.display()
    )]
    NotSealed {
        /// The log.
        path: PathBuf,
    },
    /// A log whose header names another folder or another file: copied
    /// here, or the folder moved.
    #[error(
        "session log {} was started in {cwd} (or under another name), not here, so it is not taken for this folder's; pass --trust-project to use it anyway",
        path.display()
    )]
    OtherFolder {
        /// The log.
        path: PathBuf,
        /// The folder its header names.
        cwd: String,
    },
    /// No session with that id (or none at all).
    #[error("no session {0} in .whittle/sessions (see /sessions)")]
    NotFound(String),
    /// An id prefix that several sessions share.
    #[error(
        "session id {prefix} matches {count} sessions ({ids}); give more of the id (see /sessions)"
    )]
    Ambiguous {
        /// The prefix given.
        prefix: String,
        /// How many sessions it matches.
        count: usize,
        /// The sessions it matches.
        ids: String,
    },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> SessionFileError + '_ {
    move |source| SessionFileError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl SessionWriter {
    /// Starts a new session log in `dir`, its header sealed with `key`
    /// when there is one.
    pub fn create(
        dir: &Path,
        model: &str,
        cwd: &Path,
        key: Option<&SessionKey>,
    ) -> Result<Self, SessionFileError> {
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        let ms = now_ms();
        // Time first, so names sort by age; the pid keeps parallel sessions apart.
        let id = format!("{ms:013}-{:05}", std::process::id() % 100_000);
        let path = dir.join(format!("{id}.jsonl"));
        let file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&path)
            .map_err(io_err(&path))?;
        let mut writer = SessionWriter {
            id: id.clone(),
            path,
            file,
            redactor: Redactor::default(),
        };
        let cwd = cwd.display().to_string();
        let seal = key.map(|key| {
            key.seal(SessionHeader {
                id: &id,
                model,
                cwd: &cwd,
                created_ms: ms,
            })
        });
        writer.append(&SessionRecord::Session {
            format: SESSION_FORMAT.into(),
            id,
            model: model.into(),
            cwd,
            created_ms: ms,
            seal,
        })?;
        Ok(writer)
    }

    /// Opens an existing log to append to it, reading its state. A last line
    /// cut by a crash is removed first, so new records start on a fresh line.
    pub fn resume(path: &Path) -> Result<(Self, SessionState), SessionFileError> {
        // Opened first, without following a link: then read through the path.
        let mut file = whittle_store::no_follow(OpenOptions::new().read(true).write(true))
            .open(path)
            .map_err(io_err(path))?;
        let state = read_session(path)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(io_err(path))?;
        let keep = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        if keep < bytes.len() {
            file.set_len(keep as u64).map_err(io_err(path))?;
        }
        file.seek(SeekFrom::End(0)).map_err(io_err(path))?;
        Ok((
            SessionWriter {
                id: state.id.clone(),
                path: path.to_path_buf(),
                file,
                redactor: Redactor::default(),
            },
            state,
        ))
    }

    /// Replaces the values `redactor` knows in every line written from now
    /// on (the session header holds none).
    pub fn redacting(mut self, redactor: Redactor) -> Self {
        self.redactor = redactor;
        self
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The log file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one record and flushes it.
    pub fn append(&mut self, record: &SessionRecord) -> Result<(), SessionFileError> {
        let line = serde_json::to_string(record).map_err(|e| io_err(&self.path)(e.into()))?;
        let mut line = self.redactor.redact(&line).into_owned();
        line.push('\n');
        self.file
            .write_all(line.as_bytes())
            .map_err(io_err(&self.path))?;
        self.file.flush().map_err(io_err(&self.path))
    }
}

/// Every session in `dir`, newest first.
pub fn list_sessions(dir: &Path) -> Vec<SessionInfo> {
    let mut found: Vec<SessionInfo> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let path = e.path();
            if path.extension()? != "jsonl" {
                return None;
            }
            let modified = e
                .metadata()
                .and_then(|m| m.modified())
                .unwrap_or(UNIX_EPOCH);
            Some(SessionInfo {
                id: path.file_stem()?.to_string_lossy().into_owned(),
                path,
                modified,
            })
        })
        .collect();
    found.sort_by(|a, b| b.modified.cmp(&a.modified).then(b.id.cmp(&a.id)));
    found
}

/// The log of session `id` in `dir`, or of the newest session when `id` is `None`.
pub fn find_session(dir: &Path, id: Option<&str>) -> Result<PathBuf, SessionFileError> {
    let sessions = list_sessions(dir);
    match id {
        None => sessions
            .into_iter()
            .next()
            .map(|s| s.path)
            .ok_or_else(|| SessionFileError::NotFound("to continue".into())),
        // Every id starts with the empty one: it names no session, not the
        // only one there is.
        Some("") => Err(SessionFileError::NotFound("\"\"".into())),
        Some(id) => {
            if let Some(exact) = sessions.iter().find(|s| s.id == id) {
                return Ok(exact.path.clone());
            }
            let matching: Vec<&SessionInfo> =
                sessions.iter().filter(|s| s.id.starts_with(id)).collect();
            match matching.as_slice() {
                [one] => Ok(one.path.clone()),
                [] => Err(SessionFileError::NotFound(id.into())),
                many => Err(SessionFileError::Ambiguous {
                    prefix: id.into(),
                    count: many.len(),
                    ids: many
                        .iter()
                        .map(|s| s.id.clone())
                        .collect::<Vec<_>>()
                        .join(", "),
                }),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use whittle_protocol::Message;

    #[test]
    fn resume_drops_a_cut_last_line_and_appends_cleanly() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = SessionWriter::create(dir.path(), "m", dir.path(), None).unwrap();
        w.append(&SessionRecord::Message {
            message: Message::user("hi"),
            refs: Vec::new(),
        })
        .unwrap();
        let path = w.path().to_path_buf();
        drop(w);
        fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"{\"type\":\"mess")
            .unwrap();
        let (mut w, state) = SessionWriter::resume(&path).unwrap();
        assert_eq!(state.history.len(), 1);
        w.append(&SessionRecord::Message {
            message: Message::assistant("hello"),
            refs: Vec::new(),
        })
        .unwrap();
        let state = read_session(&path).unwrap();
        assert_eq!(state.history.len(), 2);
        assert_eq!(find_session(dir.path(), None).unwrap(), path);
        assert_eq!(
            find_session(dir.path(), Some(&state.id[..8])).unwrap(),
            path
        );
        assert!(find_session(dir.path(), Some("nope")).is_err());
        assert!(matches!(
            find_session(dir.path(), Some("")),
            Err(SessionFileError::NotFound(_))
        ));
    }
}
