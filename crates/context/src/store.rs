//! The on-disk store: persisted tool outputs and transcripts, so that what
//! compaction takes out of the context can always be read back.
//!
//! Every file name derived from an id is sanitized, every write is atomic, and
//! a path read back out of a marker is trusted only if it resolves inside the
//! store: a tool output that merely *looks* like a marker cannot make us skip
//! saving it, nor point us at a file elsewhere.

use crate::message::Message;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Longest file stem derived from an id.
pub const MAX_STEM_CHARS: usize = 120;

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

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Persisted outputs under `ROOT/tool-results/`, transcripts under `ROOT/transcripts/`.
#[derive(Clone, Debug)]
pub struct Store {
    root: PathBuf,
}

static SEQUENCE: AtomicU64 = AtomicU64::new(0);

impl Store {
    /// A store rooted at `root`; nothing is created until the first write.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Store { root: root.into() }
    }

    /// The directory everything is saved under, so a harness can say where
    /// a session's outputs went.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where persisted tool outputs go.
    pub fn tool_results_dir(&self) -> PathBuf {
        self.root.join("tool-results")
    }

    /// Where transcripts go.
    pub fn transcripts_dir(&self) -> PathBuf {
        self.root.join("transcripts")
    }

    /// Writes a tool output in full and returns its path.
    ///
    /// The same id with the same text maps to the same file (so saving twice
    /// is harmless); a different text under a colliding name gets a suffix.
    pub fn persist_tool_result(
        &self,
        tool_use_id: &str,
        text: &str,
    ) -> Result<PathBuf, StoreError> {
        let dir = self.tool_results_dir();
        fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        let stem = sanitize_file_stem(tool_use_id);
        for n in 0..1000u32 {
            let name = if n == 0 {
                format!("{stem}.txt")
            } else {
                format!("{stem}-{n}.txt")
            };
            let path = dir.join(name);
            match fs::read(&path) {
                Ok(existing) if existing == text.as_bytes() => return Ok(path),
                Ok(_) => continue,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    write_atomic(&path, text.as_bytes()).map_err(io_err(&path))?;
                    return Ok(path);
                }
                Err(e) => return Err(io_err(&path)(e)),
            }
        }
        Err(StoreError::NameExhausted {
            dir,
            id: tool_use_id.to_string(),
        })
    }

    /// Writes `messages` as JSONL (one message per line) to a new transcript file.
    pub fn write_transcript(&self, messages: &[Message]) -> Result<PathBuf, StoreError> {
        let dir = self.transcripts_dir();
        fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        let millis = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        let seq = SEQUENCE.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!(
            "transcript-{millis}-{}-{seq}.jsonl",
            std::process::id()
        ));
        let mut body = Vec::with_capacity(messages.iter().map(|m| m.chars() + 1).sum());
        for m in messages {
            serde_json::to_writer(&mut body, m).map_err(|e| io_err(&path)(e.into()))?;
            body.push(b'\n');
        }
        write_atomic(&path, &body).map_err(io_err(&path))?;
        Ok(path)
    }

    /// Reads a transcript back.
    pub fn read_transcript(path: &Path) -> Result<Vec<Message>, StoreError> {
        let text = fs::read_to_string(path).map_err(io_err(path))?;
        text.lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| {
                serde_json::from_str(l).map_err(|e| StoreError::BadTranscript {
                    path: path.to_path_buf(),
                    line: i + 1,
                    reason: e.to_string(),
                })
            })
            .collect()
    }

    /// Reads back an output persisted by [`Store::persist_tool_result`]
    /// (found through a marker, so a preview can be made of the file rather
    /// than of the marker).
    pub fn read_persisted(path: &Path) -> Result<String, StoreError> {
        fs::read_to_string(path).map_err(io_err(path))
    }

    /// The canonical form of `candidate` if it names an existing file inside
    /// this store; `None` for anything else, including paths that escape
    /// through `..` or symlinks.
    pub fn trusted_path(&self, candidate: &str) -> Option<PathBuf> {
        let root = fs::canonicalize(&self.root).ok()?;
        let path = fs::canonicalize(candidate).ok()?;
        (path.starts_with(&root) && path.is_file()).then_some(path)
    }
}

/// A file stem made from an id: only `[A-Za-z0-9._-]`, no leading dot, at
/// most [`MAX_STEM_CHARS`] characters. When the id had to change, a hash of
/// the original is appended so that distinct ids keep distinct names.
pub fn sanitize_file_stem(id: &str) -> String {
    let mut stem: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if stem.starts_with('.') {
        stem.replace_range(0..1, "_");
    }
    let changed = stem != id || stem.is_empty() || stem.len() > MAX_STEM_CHARS;
    if changed {
        let hash = format!("-{:016x}", fnv1a(id.as_bytes()));
        stem.truncate(MAX_STEM_CHARS - hash.len());
        stem.push_str(&hash);
    }
    stem
}

/// 64-bit FNV-1a: a stable, dependency-free hash for file names.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Writes `bytes` to `path` so that readers see the old file or the new one,
/// never a partial write: a temporary file in the same directory, then rename.
///
/// This is the workspace's one atomic-write routine; tools and sessions use it too.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"))?;
    let seq = SEQUENCE.fetch_add(1, Ordering::Relaxed);
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".tmp-{}-{seq}", std::process::id()));
    let tmp = dir.join(tmp_name);
    let result = (|| {
        let mut file = fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.flush()?;
        drop(file);
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_ids_stay_inside_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().join("store"));
        let long = "a".repeat(10_000);
        let ids = [
            "../../etc/passwd",
            "",
            long.as_str(),
            "nul\0byte",
            "ünïcödé/名前",
            "..",
            ".",
            "/abs/path",
            "C:\\windows",
            "toolu_01ABC",
        ];
        let root = fs::canonicalize(dir.path()).unwrap().join("store");
        let mut paths = Vec::new();
        for id in ids {
            let p = store.persist_tool_result(id, id).unwrap();
            let canon = fs::canonicalize(&p).unwrap();
            assert!(
                canon.starts_with(root.join("tool-results")),
                "{id:?} -> {canon:?}"
            );
            let stem = p.file_stem().unwrap().to_str().unwrap();
            assert!(stem.len() <= MAX_STEM_CHARS);
            assert!(
                stem.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
            );
            assert!(!stem.starts_with('.'));
            assert_eq!(fs::read_to_string(&p).unwrap(), id);
            paths.push(p);
        }
        paths.sort();
        paths.dedup();
        assert_eq!(paths.len(), ids.len(), "distinct ids keep distinct files");
        assert_eq!(
            store.trusted_path(paths[0].to_str().unwrap()),
            Some(fs::canonicalize(&paths[0]).unwrap())
        );
    }

    #[test]
    fn same_id_other_text_gets_a_new_name_same_text_reuses() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        let a = store.persist_tool_result("t", "one").unwrap();
        let b = store.persist_tool_result("t", "two").unwrap();
        let c = store.persist_tool_result("t", "one").unwrap();
        assert_ne!(a, b);
        assert_eq!(a, c);
        assert_eq!(fs::read_to_string(b).unwrap(), "two");
    }

    #[test]
    fn paths_outside_are_not_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().join("s"));
        let outside = dir.path().join("secret.txt");
        fs::write(&outside, "x").unwrap();
        let inside = store.persist_tool_result("t", "x").unwrap();
        let sneaky = format!("{}/../../secret.txt", inside.parent().unwrap().display());
        assert_eq!(store.trusted_path(outside.to_str().unwrap()), None);
        assert_eq!(store.trusted_path(&sneaky), None);
        assert_eq!(store.trusted_path("/etc/passwd"), None);
        assert!(store.trusted_path(inside.to_str().unwrap()).is_some());
    }

    #[test]
    fn transcripts_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        let msgs = vec![Message::user("a\nb"), Message::assistant("ü")];
        let p = store.write_transcript(&msgs).unwrap();
        assert_eq!(Store::read_transcript(&p).unwrap(), msgs);
        let q = store.write_transcript(&msgs).unwrap();
        assert_ne!(p, q);
    }
}
