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
    /// The stat `fstatat` gave, as `of` reads it from std's metadata.
    pub(crate) fn of_raw(raw: &rustix::fs::Stat) -> Stat {
        Stat {
            size: u64::try_from(raw.st_size).unwrap_or(0),
            mtime_ns: raw.st_mtime * 1_000_000_000 + raw.st_mtime_nsec as i64,
            ctime_ns: raw.st_ctime * 1_000_000_000 + raw.st_ctime_nsec as i64,
            ino: raw.st_ino,
            mode: raw.st_mode,
        }
    }

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

/// The stat cache's map: looked up once per file per snapshot, so hashed
/// with a fast non-cryptographic hash (the keys are the workspace's own
/// paths, not chosen by a remote attacker to collide).
pub(crate) type CacheMap = HashMap<Vec<u8>, CacheEntry, foldhash::fast::FixedState>;

/// Path (relative, as bytes) to what the file held when last read.
///
/// Kept as a full file (`index`) and a journal beside it (`index.log`) of
/// the entries learned since: a snapshot after a small change appends a
/// few entries instead of rewriting one per file of the workspace. The
/// journal is folded into the index once it grows, or when entries of
/// files that are gone pile up.
#[derive(Default)]
pub(crate) struct StatCache {
    pub entries: CacheMap,
    /// The store's collection generation when this cache was written: if
    /// none ran since, every object it names is still on disk.
    pub generation: u64,
    /// Entries in the journal.
    logged: usize,
    /// Entries whose file the last scan did not see (deleted, or now
    /// ignored): kept until the next rebuild.
    stale: usize,
    /// The index file exists (read or written), so a journal can follow it.
    on_disk: bool,
}

const MAGIC: &[u8] = b"whittle-stat-cache-1\n";
const LOG_MAGIC: &[u8] = b"whittle-stat-log-1\n";
const ENTRY_LEN: usize = 8 * 6 + 32 + 4;

fn log_path(index: &Path) -> PathBuf {
    let mut name = index.as_os_str().to_os_string();
    name.push(".log");
    PathBuf::from(name)
}

fn encode_entry(out: &mut Vec<u8>, name: &[u8], e: &CacheEntry) {
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

/// One entry off the front of `rest`: its name, the entry, what follows.
fn decode_entry(rest: &[u8]) -> Option<(Vec<u8>, CacheEntry, &[u8])> {
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
    let id: [u8; 32] = *rest.get(48..80)?.first_chunk::<32>()?;
    let len = u32::from_le_bytes(*rest.get(80..84)?.first_chunk::<4>()?) as usize;
    let name = rest.get(ENTRY_LEN..ENTRY_LEN + len)?.to_vec();
    let entry = CacheEntry {
        stat,
        checked_ns,
        id: ObjectId(id),
    };
    Some((name, entry, &rest[ENTRY_LEN + len..]))
}

impl StatCache {
    pub(crate) fn load(path: &Path) -> StatCache {
        // A missing or damaged cache only costs reading every file again.
        let Some(mut cache) = fs::read(path).ok().and_then(|bytes| Self::decode(&bytes)) else {
            return StatCache::default();
        };
        if let Ok(log) = fs::read(log_path(path)) {
            cache.apply_log(&log);
        }
        cache
    }

    fn decode(bytes: &[u8]) -> Option<StatCache> {
        let mut rest = bytes.strip_prefix(MAGIC)?;
        let generation = u64::from_le_bytes(*rest.first_chunk::<8>()?);
        rest = &rest[8..];
        let mut entries = CacheMap::default();
        while !rest.is_empty() {
            let (name, entry, next) = decode_entry(rest)?;
            entries.insert(name, entry);
            rest = next;
        }
        Some(StatCache {
            entries,
            generation,
            logged: 0,
            stale: 0,
            on_disk: true,
        })
    }

    /// Applies the journal's batches written in this cache's generation,
    /// up to a torn tail (a crash mid-append).
    fn apply_log(&mut self, mut rest: &[u8]) {
        while let Some(batch) = rest.strip_prefix(LOG_MAGIC) {
            let Some(generation) = batch.first_chunk::<8>().map(|b| u64::from_le_bytes(*b)) else {
                return;
            };
            let Some(count) = batch
                .get(8..12)
                .and_then(|b| b.first_chunk::<4>())
                .map(|b| u32::from_le_bytes(*b))
            else {
                return;
            };
            let mut entries_rest = &batch[12..];
            let mut batch_entries = Vec::with_capacity(count as usize);
            for _ in 0..count {
                let Some((name, entry, next)) = decode_entry(entries_rest) else {
                    return;
                };
                batch_entries.push((name, entry));
                entries_rest = next;
            }
            if generation == self.generation {
                self.logged += batch_entries.len();
                self.entries.extend(batch_entries);
            }
            rest = entries_rest;
        }
    }

    /// Writes the whole cache and empties the journal.
    pub(crate) fn save(&mut self, path: &Path) -> Result<(), CheckpointError> {
        let mut out = Vec::with_capacity(MAGIC.len() + 8 + self.entries.len() * 120);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&self.generation.to_le_bytes());
        for (name, e) in &self.entries {
            encode_entry(&mut out, name, e);
        }
        write_atomic(path, &out)?;
        let log = log_path(path);
        match fs::remove_file(&log) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(CheckpointError::store(&log)(e));
            }
            _ => {}
        }
        self.logged = 0;
        self.stale = 0;
        self.on_disk = true;
        Ok(())
    }

    /// A scan that returned every file's entry: they become the cache,
    /// written whole when anything differs.
    pub(crate) fn replace(
        &mut self,
        path: &Path,
        entries: Vec<(Vec<u8>, CacheEntry)>,
        generation: u64,
    ) -> Result<(), CheckpointError> {
        let entries: CacheMap = entries.into_iter().collect();
        if entries == self.entries && generation == self.generation && self.logged == 0 {
            self.stale = 0;
            return Ok(());
        }
        self.entries = entries;
        self.generation = generation;
        self.save(path)
    }

    /// A scan that returned only the entries of the files it read (`fresh`)
    /// and found `hits` files the cache vouched for: the new entries go to
    /// the journal, or the whole cache is written when the journal is big.
    pub(crate) fn record(
        &mut self,
        path: &Path,
        fresh: Vec<(Vec<u8>, CacheEntry)>,
        hits: u64,
    ) -> Result<(), CheckpointError> {
        let mut batch = Vec::new();
        if !fresh.is_empty() {
            batch.extend_from_slice(LOG_MAGIC);
            batch.extend_from_slice(&self.generation.to_le_bytes());
            batch.extend_from_slice(&(fresh.len() as u32).to_le_bytes());
            for (name, e) in &fresh {
                encode_entry(&mut batch, name, e);
            }
        }
        let learned = fresh.len();
        self.entries.extend(fresh);
        let seen = usize::try_from(hits)
            .unwrap_or(usize::MAX)
            .saturating_add(learned);
        self.stale = self.entries.len().saturating_sub(seen);
        if learned == 0 {
            return Ok(());
        }
        if !self.on_disk || self.logged + learned > (self.entries.len() / 2).max(4096) {
            return self.save(path);
        }
        let log = log_path(path);
        let appended = (|| {
            let mut f = fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(&log)?;
            f.write_all(&batch)
        })();
        appended.map_err(CheckpointError::store(&log))?;
        self.logged += learned;
        Ok(())
    }

    /// Whether the next scan should return every entry, so the ones of
    /// files that are gone can be dropped.
    pub(crate) fn rebuild_due(&self) -> bool {
        self.stale > 1024 && self.stale > self.entries.len() / 8
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
