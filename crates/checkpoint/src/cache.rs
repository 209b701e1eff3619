use crate::error::CheckpointError;
use crate::hash::ObjectId;
use crate::objects::temp_name;
use std::collections::HashMap;
use std::fs::{self, Metadata};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// A file's stat, as git's index keeps it: when all of it is unchanged the
/// content is taken to be unchanged and the file is not read again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stat {
    pub size: u64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub ino: u64,
    pub mode: u32,
}

impl Stat {
    pub(crate) fn of(meta: &Metadata) -> Stat {
        Stat {
            size: meta.size(),
            mtime_ns: meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
            ctime_ns: meta.ctime() * 1_000_000_000 + meta.ctime_nsec(),
            ino: meta.ino(),
            mode: meta.mode(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CacheEntry {
    pub stat: Stat,
    /// Wall clock when the file was stat'ed before its content was read.
    pub checked_ns: i64,
    pub id: ObjectId,
}

/// A file changed again within the same timestamp tick as the mtime
/// recorded keeps that mtime, so an entry is trusted only when its mtime
/// is older than the moment it was read by more than a tick, as git
/// trusts only entries older than its index. The kernel stamps files from
/// a coarse clock (a jiffy, at most 10 ms); a filesystem with whole-second
/// stamps (FAT, HFS+, some network mounts) shows a nanosecond field of 0
/// and gets two seconds.
const FINE_TICK_NS: i64 = 50_000_000;
const COARSE_TICK_NS: i64 = 2_000_000_000;

impl CacheEntry {
    pub(crate) fn still_valid(&self, now: &Stat) -> bool {
        // Only the mtime can be racy: a change of content moves it, and a
        // tool resetting it (touch -d) moves the ctime, which must match.
        let tick = if self.stat.mtime_ns % 1_000_000_000 == 0 {
            COARSE_TICK_NS
        } else {
            FINE_TICK_NS
        };
        self.stat == *now && self.stat.mtime_ns + tick < self.checked_ns
    }
}

/// Path (relative, as bytes) to what the file held when last read.
#[derive(Default)]
pub(crate) struct StatCache {
    pub entries: HashMap<Vec<u8>, CacheEntry>,
    /// The store's collection generation when this cache was written: if
    /// none ran since, every object it names is still on disk.
    pub generation: u64,
}

const MAGIC: &[u8] = b"whittle-stat-cache-1\n";
const ENTRY_LEN: usize = 8 * 6 + 32 + 4;

impl StatCache {
    pub(crate) fn load(path: &Path) -> StatCache {
        // A missing or damaged cache only costs reading every file again.
        fs::read(path)
            .ok()
            .and_then(|bytes| Self::decode(&bytes))
            .unwrap_or_default()
    }

    fn decode(bytes: &[u8]) -> Option<StatCache> {
        let mut rest = bytes.strip_prefix(MAGIC)?;
        let generation = u64::from_le_bytes(*rest.first_chunk::<8>()?);
        rest = &rest[8..];
        let mut entries = HashMap::new();
        while !rest.is_empty() {
            if rest.len() < ENTRY_LEN {
                return None;
            }
            let u64_at = |i: usize| {
                rest.get(i..i + 8)
                    .and_then(|s| s.first_chunk::<8>())
                    .map(|b| u64::from_le_bytes(*b))
                    .unwrap_or(0)
            };
            let stat = Stat {
                size: u64_at(0),
                mtime_ns: u64_at(8) as i64,
                ctime_ns: u64_at(16) as i64,
                ino: u64_at(24),
                mode: u64_at(32) as u32,
            };
            let checked_ns = u64_at(40) as i64;
            let mut id = [0u8; 32];
            id.copy_from_slice(&rest[48..80]);
            let len = u32::from_le_bytes(*rest[80..84].first_chunk::<4>()?) as usize;
            let name = rest.get(ENTRY_LEN..ENTRY_LEN + len)?.to_vec();
            rest = &rest[ENTRY_LEN + len..];
            entries.insert(
                name,
                CacheEntry {
                    stat,
                    checked_ns,
                    id: ObjectId(id),
                },
            );
        }
        Some(StatCache {
            entries,
            generation,
        })
    }

    pub(crate) fn save(&self, path: &Path) -> Result<(), CheckpointError> {
        let mut out = Vec::with_capacity(MAGIC.len() + 8 + self.entries.len() * 120);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&self.generation.to_le_bytes());
        for (name, e) in &self.entries {
            for v in [
                e.stat.size,
                e.stat.mtime_ns as u64,
                e.stat.ctime_ns as u64,
                e.stat.ino,
                u64::from(e.stat.mode),
                e.checked_ns as u64,
            ] {
                out.extend_from_slice(&v.to_le_bytes());
            }
            out.extend_from_slice(&e.id.0);
            out.extend_from_slice(&(name.len() as u32).to_le_bytes());
            out.extend_from_slice(name);
        }
        write_atomic(path, &out)
    }
}

/// Writes a store file by temp + rename, so readers see the old or the new
/// file, never half of one.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), CheckpointError> {
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let temp: PathBuf = dir.join(temp_name(".write-"));
    let result = (|| {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)?;
        f.write_all(bytes)?;
        drop(f);
        fs::rename(&temp, path)
    })();
    result.map_err(|e| {
        let _ = fs::remove_file(&temp);
        CheckpointError::store(path)(e)
    })
}
