use crate::error::CheckpointError;
use crate::hash::ObjectId;
use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Content-addressed objects under `objects/ab/cdef…`, as git's loose
/// objects: each written once to a temporary name and renamed into place,
/// so a reader (or a second process) never sees half an object and
/// writing the same object twice is harmless.
///
/// A file at an object's name is not trusted to hold that object: the
/// store may have been shipped by the repository, with other bytes under
/// the names of its own files' contents, which would make every snapshot
/// that meets them fail. Before a write is skipped, what is on disk is
/// compared with the bytes once per process; a wrong object is replaced.
pub(crate) struct Objects {
    dir: PathBuf,
    /// Objects known to be on disk, so an unchanged file costs no `stat`
    /// in the store, and those known to hold the right bytes, so a write
    /// of one is skipped without reading it. Cleared when a collection
    /// may have removed some.
    known: Mutex<HashMap<ObjectId, Known>>,
}

/// What this process knows of an object on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Known {
    /// A file is at its name (the stat cache or a listing says so); what
    /// it holds is unchecked.
    Present,
    /// It holds the bytes that hash to its name: this process wrote it,
    /// compared it with those bytes or hashed it.
    Checked,
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A name no other writer (thread or process) uses at the same time.
pub(crate) fn temp_name(prefix: &str) -> String {
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{prefix}{}-{n}-{nanos:x}.tmp", std::process::id())
}

impl Objects {
    pub(crate) fn open(dir: PathBuf) -> Result<Objects, CheckpointError> {
        // The 256 fan-out folders are made as objects first need them:
        // opening a store for a short session costs no mkdir storm.
        fs::create_dir_all(&dir).map_err(CheckpointError::store(&dir))?;
        Ok(Objects {
            dir,
            known: Mutex::new(HashMap::new()),
        })
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    pub(crate) fn path(&self, id: &ObjectId) -> PathBuf {
        let hex = id.to_hex();
        self.dir.join(&hex[..2]).join(&hex[2..])
    }

    fn known(&self, id: &ObjectId) -> Option<Known> {
        self.known.lock().ok().and_then(|k| k.get(id).copied())
    }

    /// Notes objects as on disk, their content unchecked.
    pub(crate) fn mark_present(&self, ids: impl IntoIterator<Item = ObjectId>) {
        if let Ok(mut k) = self.known.lock() {
            for id in ids {
                k.entry(id).or_insert(Known::Present);
            }
        }
    }

    fn mark_checked(&self, id: ObjectId) {
        if let Ok(mut k) = self.known.lock() {
            k.insert(id, Known::Checked);
        }
    }

    fn forget(&self, id: &ObjectId) {
        if let Ok(mut k) = self.known.lock() {
            k.remove(id);
        }
    }

    pub(crate) fn forget_present(&self) {
        if let Ok(mut k) = self.known.lock() {
            k.clear();
        }
    }

    /// Whether the object is on disk (checked once, then remembered).
    pub(crate) fn contains(&self, id: &ObjectId) -> bool {
        if self.known(id).is_some() {
            return true;
        }
        let on_disk = fs::symlink_metadata(self.path(id)).is_ok();
        if on_disk {
            self.mark_present([*id]);
        }
        on_disk
    }

    /// Stores `bytes` under their hash; returns the bytes written (0 when
    /// the object was already there). An object on disk this process has
    /// not checked yet is compared with `bytes` first (its size, then its
    /// content), and replaced when it differs.
    pub(crate) fn write(&self, bytes: &[u8]) -> Result<(ObjectId, u64), CheckpointError> {
        let id = ObjectId::of(bytes);
        if self.known(&id) == Some(Known::Checked) {
            return Ok((id, 0));
        }
        let path = self.path(&id);
        if holds(&path, bytes) {
            self.mark_checked(id);
            return Ok((id, 0));
        }
        let parent = path.parent().unwrap_or(&self.dir).to_path_buf();
        let temp = parent.join(temp_name(".obj-"));
        let written = (|| {
            let create = || {
                fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&temp)
            };
            let mut f = match create() {
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    match fs::create_dir(&parent) {
                        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
                        _ => {}
                    }
                    create()?
                }
                other => other?,
            };
            f.write_all(bytes)?;
            drop(f);
            fs::rename(&temp, &path)
        })();
        if let Err(e) = written {
            let _ = fs::remove_file(&temp);
            return Err(CheckpointError::store(path)(e));
        }
        self.mark_checked(id);
        Ok((id, bytes.len() as u64))
    }

    /// Reads an object back, checking it still hashes to its name.
    pub(crate) fn read(&self, id: &ObjectId) -> Result<Vec<u8>, CheckpointError> {
        let path = self.path(id);
        let bytes = fs::read(&path).map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                CheckpointError::Corrupt(format!("object {id} is missing"))
            } else {
                CheckpointError::store(&path)(e)
            }
        })?;
        if ObjectId::of(&bytes) != *id {
            // The next write of these bytes replaces it.
            self.forget(id);
            return Err(CheckpointError::Corrupt(format!(
                "object {id} does not match its hash ({})",
                path.display()
            )));
        }
        self.mark_checked(*id);
        Ok(bytes)
    }
}

/// Whether the file at `path` is a regular file holding exactly `bytes`:
/// its size is looked at first, so a wrong object of another size costs
/// one `stat`, and a right one a read and a comparison (cheaper than
/// hashing it). Anything else (missing, a folder, a link, other bytes,
/// unreadable) is `false`, and the write that follows replaces it; a
/// folder in the way is removed first, or the rename would fail.
fn holds(path: &Path, bytes: &[u8]) -> bool {
    let Ok(meta) = fs::symlink_metadata(path) else {
        return false;
    };
    if meta.is_dir() {
        let _ = fs::remove_dir_all(path);
        return false;
    }
    if !meta.is_file() || meta.len() != bytes.len() as u64 {
        return false;
    }
    // No link followed, no FIFO swapped in waited on.
    let Ok(file) = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    else {
        return false;
    };
    same_content(file, bytes).unwrap_or(false)
}

/// Whether `file` holds `expected`, read in blocks and compared as it
/// comes, so checking a large object allocates no copy of it.
fn same_content(file: File, expected: &[u8]) -> io::Result<bool> {
    let mut block = vec![0u8; expected.len().clamp(1, 64 * 1024)];
    let mut rest = expected;
    // One byte more than expected, to tell a file that grew.
    let mut reader = file.take(expected.len() as u64 + 1);
    loop {
        let n = match reader.read(&mut block) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            return Ok(rest.is_empty());
        }
        let Some((head, tail)) = rest.split_at_checked(n) else {
            return Ok(false);
        };
        if head != &block[..n] {
            return Ok(false);
        }
        rest = tail;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_on_disk_is_compared_whole_across_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("object");
        let bytes: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        fs::write(&path, &bytes).unwrap();
        assert!(holds(&path, &bytes));
        let mut spoiled = bytes.clone();
        if let Some(last) = spoiled.last_mut() {
            *last ^= 1;
        }
        fs::write(&path, &spoiled).unwrap();
        assert!(!holds(&path, &bytes));
        fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
        assert!(!holds(&path, &bytes));
        fs::write(&path, b"").unwrap();
        assert!(holds(&path, b""));
    }

    #[test]
    fn a_wrong_object_is_replaced_and_then_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let objects = Objects::open(dir.path().join("objects")).unwrap();
        let id = ObjectId::of(b"right");
        let path = objects.path(&id);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, b"wrong").unwrap();
        objects.mark_present([id]);
        assert_eq!(objects.write(b"right").unwrap(), (id, 5));
        assert_eq!(fs::read(&path).unwrap(), b"right");
        // Checked once: the next write of it reads nothing.
        assert_eq!(objects.write(b"right").unwrap(), (id, 0));
        assert_eq!(objects.read(&id).unwrap(), b"right");
    }
}
