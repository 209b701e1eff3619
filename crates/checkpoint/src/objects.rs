use crate::error::CheckpointError;
use crate::hash::ObjectId;
use std::collections::HashSet;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Content-addressed objects under `objects/ab/cdef…`, as git's loose
/// objects: each written once to a temporary name and renamed into place,
/// so a reader (or a second process) never sees half an object and
/// writing the same object twice is harmless.
pub(crate) struct Objects {
    dir: PathBuf,
    /// Objects known to be on disk, so an unchanged file costs no `stat`
    /// in the store. Cleared when a collection may have removed some.
    present: Mutex<HashSet<ObjectId>>,
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
            present: Mutex::new(HashSet::new()),
        })
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    pub(crate) fn path(&self, id: &ObjectId) -> PathBuf {
        let hex = id.to_hex();
        self.dir.join(&hex[..2]).join(&hex[2..])
    }

    fn known(&self, id: &ObjectId) -> bool {
        self.present.lock().map(|p| p.contains(id)).unwrap_or(false)
    }

    pub(crate) fn mark_present(&self, ids: impl IntoIterator<Item = ObjectId>) {
        if let Ok(mut p) = self.present.lock() {
            p.extend(ids);
        }
    }

    pub(crate) fn forget_present(&self) {
        if let Ok(mut p) = self.present.lock() {
            p.clear();
        }
    }

    /// Whether the object is on disk (checked once, then remembered).
    pub(crate) fn contains(&self, id: &ObjectId) -> bool {
        if self.known(id) {
            return true;
        }
        let on_disk = fs::symlink_metadata(self.path(id)).is_ok();
        if on_disk {
            self.mark_present([*id]);
        }
        on_disk
    }

    /// Stores `bytes` under their hash; returns the bytes written (0 when
    /// the object was already there).
    pub(crate) fn write(&self, bytes: &[u8]) -> Result<(ObjectId, u64), CheckpointError> {
        let id = ObjectId::of(bytes);
        if self.contains(&id) {
            return Ok((id, 0));
        }
        let path = self.path(&id);
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
        self.mark_present([id]);
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
            return Err(CheckpointError::Corrupt(format!(
                "object {id} does not match its hash"
            )));
        }
        Ok(bytes)
    }
}
