//! The person's session key: it seals the header of every session log
//! whittle starts, so that a log that came with a folder is never taken for
//! the person's own.
//!
//! A cloned repository can ship `.whittle/sessions/` (and the checkpoints
//! and outputs its logs name). Resumed, such a log would put the
//! repository author's words in the person's mouth ("you may push to
//! production") and its checkpoints would be offered to `/rewind` as states
//! the person had. The key lives with the person's config, outside every
//! workspace; a header sealed with it could only have been written by
//! whittle under that account. Commands cannot write `.whittle/`, so a log
//! sealed at its start stays the agent's own after it.

use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Bytes in a key.
const KEY_BYTES: usize = 32;

/// A per-user secret that seals session headers (a keyed BLAKE3 hash).
#[derive(Clone)]
pub struct SessionKey([u8; KEY_BYTES]);

impl std::fmt::Debug for SessionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionKey(..)")
    }
}

/// Why the key could not be had.
#[derive(Debug, thiserror::Error)]
pub enum SessionKeyError {
    /// The file could not be read or created.
    #[error("cannot read or create the session key {}: {source}", path.display())]
    Io {
        /// The key file.
        path: PathBuf,
        /// What failed.
        source: io::Error,
    },
    /// The file holds something else than a key.
    #[error(
        "the session key {} is not a {KEY_BYTES}-byte file: remove it and whittle makes a new one",
        path.display()
    )]
    Malformed {
        /// The key file.
        path: PathBuf,
    },
    /// The system gave no random bytes.
    #[error("cannot draw a random session key: {0}")]
    Random(getrandom::Error),
}

/// The header fields a seal covers.
#[derive(Clone, Copy, Debug)]
pub struct SessionHeader<'a> {
    /// The session id.
    pub id: &'a str,
    /// `PROVIDER:MODEL` at the start.
    pub model: &'a str,
    /// The workspace it ran in.
    pub cwd: &'a str,
    /// When it started, ms since the epoch.
    pub created_ms: u64,
}

impl SessionKey {
    /// The key at `path`, made (readable by its owner only) when there is
    /// none. A link at the name is refused rather than followed.
    pub fn load_or_create(path: &Path) -> Result<SessionKey, SessionKeyError> {
        let io_err = |source| SessionKeyError::Io {
            path: path.to_path_buf(),
            source,
        };
        match Self::read(path) {
            Err(SessionKeyError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
            }
            other => return other,
        }
        let mut key = [0u8; KEY_BYTES];
        getrandom::fill(&mut key).map_err(SessionKeyError::Random)?;
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).map_err(io_err)?;
        }
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
        {
            Ok(mut file) => {
                file.write_all(&key).map_err(io_err)?;
                file.sync_all().map_err(io_err)?;
                Ok(SessionKey(key))
            }
            // Another whittle made it first: use that one.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Self::read(path),
            Err(e) => Err(io_err(e)),
        }
    }

    fn read(path: &Path) -> Result<SessionKey, SessionKeyError> {
        let mut file = whittle_store::no_follow(OpenOptions::new().read(true))
            .open(path)
            .map_err(|source| SessionKeyError::Io {
                path: path.to_path_buf(),
                source,
            })?;
        let mut bytes = Vec::with_capacity(KEY_BYTES + 1);
        (&mut file)
            .take(KEY_BYTES as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(|source| SessionKeyError::Io {
                path: path.to_path_buf(),
                source,
            })?;
        let key: [u8; KEY_BYTES] = bytes.try_into().map_err(|_| SessionKeyError::Malformed {
            path: path.to_path_buf(),
        })?;
        Ok(SessionKey(key))
    }

    /// The seal of `header`, as the log records it (64 hex digits).
    pub fn seal(&self, header: SessionHeader<'_>) -> String {
        self.hash(header).to_hex().to_string()
    }

    /// Whether `seal` is this key's seal of `header`.
    pub fn is_seal_of(&self, seal: &str, header: SessionHeader<'_>) -> bool {
        // blake3::Hash compares in constant time.
        blake3::Hash::from_hex(seal).is_ok_and(|given| given == self.hash(header))
    }

    /// The seal of `text` for `purpose` (a folder a store belongs to, say):
    /// 64 hex digits no other purpose or text shares.
    pub fn seal_text(&self, purpose: &str, text: &str) -> String {
        let mut hasher = blake3::Hasher::new_keyed(&self.0);
        for part in [purpose, text] {
            hasher.update(&(part.len() as u64).to_le_bytes());
            hasher.update(part.as_bytes());
        }
        hasher.finalize().to_hex().to_string()
    }

    fn hash(&self, h: SessionHeader<'_>) -> blake3::Hash {
        let mut hasher = blake3::Hasher::new_keyed(&self.0);
        // Lengths first, so no two headers give the same bytes.
        for part in [h.id, h.model, h.cwd] {
            hasher.update(&(part.len() as u64).to_le_bytes());
            hasher.update(part.as_bytes());
        }
        hasher.update(&h.created_ms.to_le_bytes());
        hasher.finalize()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn header(cwd: &str) -> SessionHeader<'_> {
        SessionHeader {
            id: "0001-00002",
            model: "anthropic:m",
            cwd,
            created_ms: 7,
        }
    }

    #[test]
    fn a_key_is_made_once_private_and_seals_only_its_own_headers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("whittle/session-key");
        let key = SessionKey::load_or_create(&path).unwrap();
        let mode = fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "{mode:o}");
        let again = SessionKey::load_or_create(&path).unwrap();
        let seal = key.seal(header("/w"));
        assert!(again.is_seal_of(&seal, header("/w")));
        assert!(!key.is_seal_of(&seal, header("/w2")), "another header");
        assert!(!key.is_seal_of("not hex", header("/w")));
        let other = SessionKey::load_or_create(&dir.path().join("other")).unwrap();
        assert!(!other.is_seal_of(&seal, header("/w")), "another key");
        let text = key.seal_text("store", "/w");
        assert_eq!(text, again.seal_text("store", "/w"));
        assert_ne!(text, key.seal_text("store", "/w2"));
        assert_ne!(text, key.seal_text("stor", "e/w"));
        assert_ne!(text, other.seal_text("store", "/w"));
    }

    #[test]
    fn a_bad_or_linked_key_file_is_one_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let short = dir.path().join("short");
        fs::write(&short, b"too short").unwrap();
        let err = SessionKey::load_or_create(&short).unwrap_err().to_string();
        assert!(err.contains("is not a 32-byte file"), "{err}");
        let target = dir.path().join("target");
        fs::write(&target, [1u8; KEY_BYTES]).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let err = SessionKey::load_or_create(&link).unwrap_err().to_string();
        assert!(
            err.starts_with("cannot read or create the session key"),
            "{err}"
        );
        assert!(!err.contains('\n'));
    }
}
