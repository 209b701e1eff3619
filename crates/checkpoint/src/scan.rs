//! One pass over the workspace: stat every file, read only those the stat
//! cache cannot vouch for, store new objects, and build one tree per
//! directory bottom-up.

use crate::cache::{CacheEntry, CacheMap, Stat};
use crate::capped::{Capped, read_capped};
use crate::error::CheckpointError;
use crate::hash::ObjectId;
use crate::ignore_file::add_ignore_file;
use crate::objects::Objects;
use crate::tree::{Entry, Kind, PERMISSION_BITS, Tree};
use crate::untracked::{Untracked, UntrackedReason};
use crate::watch::Watcher;
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use rayon::prelude::*;
use rustix::fd::OwnedFd;
use rustix::fs::{AtFlags, FileType as RawFileType, Mode, OFlags};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::fs::{self, File, FileType};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, LazyLock, Mutex};

/// What one snapshot's pass over the workspace cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScanStats {
    /// Files and symlinks held by the checkpoint.
    pub files: u64,
    /// Files whose content was read and hashed (the stat cache could not
    /// vouch for them): after a small change, about that many.
    pub files_hashed: u64,
    /// Bytes read to hash them.
    pub bytes_hashed: u64,
    /// New objects written to the store (files, links, trees).
    pub objects_written: u64,
    /// Bytes those objects take.
    pub bytes_written: u64,
    /// Directories listed and their files stat'ed; the others were
    /// reused as the watcher reported nothing in them.
    #[serde(default)]
    pub dirs_scanned: u64,
}

impl ScanStats {
    fn add(&mut self, other: &ScanStats) {
        self.files += other.files;
        self.files_hashed += other.files_hashed;
        self.bytes_hashed += other.bytes_hashed;
        self.objects_written += other.objects_written;
        self.bytes_written += other.bytes_written;
        self.dirs_scanned += other.dirs_scanned;
    }
}

/// The workspace as one snapshot saw it.
pub(crate) struct Scan {
    pub root: ObjectId,
    pub untracked: Vec<Untracked>,
    /// Stat cache entries: every file's when the scan was asked for all of
    /// them, else only those of the files read this time.
    pub cache: Vec<(Vec<u8>, CacheEntry)>,
    /// Files the stat cache vouched for.
    pub cache_hits: u64,
    pub stats: ScanStats,
    /// What each directory held, for the next scan to reuse while nothing
    /// happens in it (only directories the watcher watches).
    pub memos: Vec<(Vec<u8>, Arc<DirMemo>)>,
}

/// One directory as a full scan found it: reused as it is while the
/// watcher reports nothing in it (its subdirectories are still visited).
#[derive(Debug)]
pub(crate) struct DirMemo {
    /// Its inode: a directory replaced at the same path is not this one.
    ino: u64,
    id: ObjectId,
    tree: Tree,
    /// Its own entries that are not kept (not those of subdirectories).
    untracked: Vec<Untracked>,
    /// Its own files and symlinks.
    files: u64,
    /// Its own files the stat cache holds.
    cached_files: u64,
    /// The `.gitignore`s in force for its entries.
    ignores: Option<Arc<Ignores>>,
}

/// Directory (relative, as bytes) to what it held.
pub(crate) type Memo = HashMap<Vec<u8>, Arc<DirMemo>>;

static EMPTY_MEMO: LazyLock<Memo> = LazyLock::new(Memo::new);

#[derive(Clone, Copy)]
pub(crate) struct Scanner<'a> {
    pub root: &'a Path,
    pub objects: &'a Objects,
    pub cache: &'a CacheMap,
    /// Every object the cache names is known to be in the store (no
    /// collection ran since it was written): a hit needs no check.
    pub cached_objects_present: bool,
    pub max_file_size: u64,
    /// Return every file's cache entry (to rebuild the cache without the
    /// entries of files that are gone), not only the new ones.
    pub all_entries: bool,
    /// Directories as the last scan found them; empty when none may be
    /// reused.
    pub memo: &'a Memo,
    /// Directories something happened in since the last scan.
    pub dirty: &'a HashSet<Vec<u8>>,
    /// Watches each directory scanned in full, when there is a watcher.
    pub watcher: Option<&'a Mutex<Watcher>>,
    /// Ignore-file bytes this scan compiled, all folders together (see
    /// [`add_ignore_file`]).
    pub ignore_bytes: &'a AtomicU64,
}

/// The `.gitignore` files that apply to a directory, nearest first.
#[derive(Debug)]
pub(crate) struct Ignores {
    matcher: Gitignore,
    parent: Option<Arc<Ignores>>,
}

fn is_ignored(ignores: &Option<Arc<Ignores>>, path: &Path, is_dir: bool) -> bool {
    let mut node = ignores.as_deref();
    while let Some(n) = node {
        let m = n.matcher.matched(path, is_dir);
        if m.is_ignore() {
            return true;
        }
        if m.is_whitelist() {
            return false;
        }
        node = n.parent.as_deref();
    }
    false
}

#[derive(Default)]
struct DirOut {
    id: Option<ObjectId>,
    untracked: Vec<Untracked>,
    cache: Vec<(Vec<u8>, CacheEntry)>,
    cache_hits: u64,
    stats: ScanStats,
    memos: Vec<(Vec<u8>, Arc<DirMemo>)>,
}

impl DirOut {
    /// Takes in what a subdirectory's scan found.
    fn absorb(&mut self, sub: DirOut) {
        self.untracked.extend(sub.untracked);
        self.cache.extend(sub.cache);
        self.cache_hits += sub.cache_hits;
        self.stats.add(&sub.stats);
        self.memos.extend(sub.memos);
    }
}

enum Outcome {
    Skip,
    Tracked(Entry),
    Untracked(Untracked),
}

fn join_rel(rel: &[u8], name: &[u8]) -> Vec<u8> {
    if rel.is_empty() {
        return name.to_vec();
    }
    let mut out = Vec::with_capacity(rel.len() + 1 + name.len());
    out.extend_from_slice(rel);
    out.push(b'/');
    out.extend_from_slice(name);
    out
}

pub(crate) fn rel_path(rel: &[u8]) -> PathBuf {
    PathBuf::from(OsStr::from_bytes(rel))
}

pub(crate) fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

impl Scanner<'_> {
    pub(crate) fn run(&self) -> Result<Scan, CheckpointError> {
        let mut root_ignores = GitignoreBuilder::new(self.root);
        let exclude = self.root.join(".git/info/exclude");
        let mut have_exclude = false;
        if fs::symlink_metadata(self.root.join(".git")).is_ok_and(|m| m.is_dir())
            && fs::symlink_metadata(&exclude).is_ok_and(|m| m.is_file())
        {
            // A malformed line is skipped; the others still apply.
            have_exclude = add_ignore_file(&mut root_ignores, &exclude, self.ignore_bytes);
        }
        let ignores = if have_exclude {
            root_ignores.build().ok().map(|matcher| {
                Arc::new(Ignores {
                    matcher,
                    parent: None,
                })
            })
        } else {
            None
        };
        let root_ino = fs::symlink_metadata(self.root).ok().map(|m| m.ino());
        let out =
            self.dir(self.root, &[], root_ino, &ignores)?
                .ok_or_else(|| match fs::read_dir(self.root) {
                    Err(e) => CheckpointError::workspace(self.root)(e),
                    Ok(_) => CheckpointError::Workspace {
                        path: self.root.to_path_buf(),
                        source: io::Error::other("could not be read"),
                    },
                })?;
        let mut untracked = out.untracked;
        untracked.sort();
        Ok(Scan {
            root: out
                .id
                .ok_or_else(|| CheckpointError::Corrupt("no root tree".into()))?,
            untracked,
            cache: out.cache,
            cache_hits: out.cache_hits,
            stats: out.stats,
            memos: out.memos,
        })
    }

    /// Scans one directory; `None` when it cannot be read (the parent lists
    /// it as unreadable). Only store failures are errors.
    fn dir(
        &self,
        abs: &Path,
        rel: &[u8],
        ino: Option<u64>,
        parent_ignores: &Option<Arc<Ignores>>,
    ) -> Result<Option<DirOut>, CheckpointError> {
        if let Some(memo) = self.memo.get(rel)
            && ino == Some(memo.ino)
            && !self.dirty.contains(rel)
        {
            return self.dir_from_memo(abs, rel, memo);
        }
        let watched = self
            .watcher
            .and_then(|w| w.lock().ok())
            .is_some_and(|mut w| w.watch(abs, rel));
        let Ok(read) = fs::read_dir(abs) else {
            return Ok(None);
        };
        // Files are stat'ed relative to their directory: one path
        // component for the kernel to walk per file, not the whole path.
        let Ok(dir_fd) = rustix::fs::open(
            abs,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::empty(),
        ) else {
            return Ok(None);
        };
        let mut children: Vec<(Vec<u8>, FileType)> = Vec::new();
        for entry in read {
            let Ok(entry) = entry else { return Ok(None) };
            let Ok(ft) = entry.file_type() else {
                continue;
            };
            children.push((entry.file_name().as_bytes().to_vec(), ft));
        }
        children.sort_by(|a, b| a.0.cmp(&b.0));

        let mut ignores = parent_ignores.clone();
        if children
            .iter()
            .any(|(n, ft)| n == b".gitignore" && ft.is_file())
        {
            let mut builder = GitignoreBuilder::new(abs);
            if add_ignore_file(&mut builder, &abs.join(".gitignore"), self.ignore_bytes)
                && let Ok(matcher) = builder.build()
            {
                ignores = Some(Arc::new(Ignores {
                    matcher,
                    parent: parent_ignores.clone(),
                }));
            }
        }

        let results: Vec<Result<(Outcome, DirOut), CheckpointError>> = children
            .par_iter()
            .map(|(name, ft)| self.child(abs, &dir_fd, rel, name, *ft, &ignores))
            .collect();
        let mut out = DirOut::default();
        out.stats.dirs_scanned = 1;
        let mut tree = Tree::default();
        let (mut own_untracked, mut own_files, mut own_cached) = (Vec::new(), 0, 0);
        for r in results {
            let (outcome, sub) = r?;
            match &outcome {
                Outcome::Tracked(e) if e.kind == Kind::Dir => {}
                _ => {
                    own_files += sub.stats.files;
                    own_cached += sub.cache_hits + sub.stats.files_hashed;
                }
            }
            out.absorb(sub);
            match outcome {
                Outcome::Skip => {}
                Outcome::Tracked(e) => tree.entries.push(e),
                Outcome::Untracked(u) => {
                    own_untracked.push(u.clone());
                    out.untracked.push(u);
                }
            }
        }
        let (id, written) = self.objects.write(&tree.encode())?;
        if written > 0 {
            out.stats.objects_written += 1;
            out.stats.bytes_written += written;
        }
        out.id = Some(id);
        if let (true, Some(ino)) = (watched, ino) {
            let memo = DirMemo {
                ino,
                id,
                tree,
                untracked: own_untracked,
                files: own_files,
                cached_files: own_cached,
                ignores,
            };
            out.memos.push((rel.to_vec(), Arc::new(memo)));
        }
        Ok(Some(out))
    }

    /// A directory nothing happened in: its own entries as they were, its
    /// subdirectories visited (something may have happened in them).
    fn dir_from_memo(
        &self,
        abs: &Path,
        rel: &[u8],
        memo: &Arc<DirMemo>,
    ) -> Result<Option<DirOut>, CheckpointError> {
        let mut out = DirOut::default();
        out.stats.files += memo.files;
        out.cache_hits += memo.cached_files;
        out.untracked.extend(memo.untracked.iter().cloned());
        let mut changed: Option<Tree> = None;
        for (i, entry) in memo.tree.entries.iter().enumerate() {
            if entry.kind != Kind::Dir {
                continue;
            }
            let sub_abs = abs.join(OsStr::from_bytes(&entry.name));
            let sub_rel = join_rel(rel, &entry.name);
            let sub_ino = self.memo.get(&sub_rel).map(|m| m.ino);
            let Some(sub) = self.dir(&sub_abs, &sub_rel, sub_ino, &memo.ignores)? else {
                // Its parent would have heard of a change; scan in full.
                return self.dir_unmemoized(abs, rel);
            };
            let id = sub.id;
            out.absorb(sub);
            if id != Some(entry.id) {
                let tree = changed.get_or_insert_with(|| memo.tree.clone());
                if let (Some(slot), Some(id)) = (tree.entries.get_mut(i), id) {
                    slot.id = id;
                }
            }
        }
        let Some(tree) = changed else {
            out.id = Some(memo.id);
            out.memos.push((rel.to_vec(), memo.clone()));
            return Ok(Some(out));
        };
        let (id, written) = self.objects.write(&tree.encode())?;
        if written > 0 {
            out.stats.objects_written += 1;
            out.stats.bytes_written += written;
        }
        out.id = Some(id);
        let updated = DirMemo {
            ino: memo.ino,
            id,
            tree,
            untracked: memo.untracked.clone(),
            files: memo.files,
            cached_files: memo.cached_files,
            ignores: memo.ignores.clone(),
        };
        out.memos.push((rel.to_vec(), Arc::new(updated)));
        Ok(Some(out))
    }

    /// Scans `rel` in full, whatever the memo says.
    fn dir_unmemoized(&self, abs: &Path, rel: &[u8]) -> Result<Option<DirOut>, CheckpointError> {
        let Some(memo) = self.memo.get(rel) else {
            return self.dir(abs, rel, None, &None);
        };
        let scanner = Scanner {
            memo: &EMPTY_MEMO,
            ..*self
        };
        scanner.dir(abs, rel, Some(memo.ino), &memo.ignores)
    }

    fn child(
        &self,
        dir_abs: &Path,
        dir_fd: &OwnedFd,
        dir_rel: &[u8],
        name: &[u8],
        ft: FileType,
        ignores: &Option<Arc<Ignores>>,
    ) -> Result<(Outcome, DirOut), CheckpointError> {
        let mut sub = DirOut::default();
        if name == b".git" || (dir_rel.is_empty() && name == b".whittle") {
            return Ok((Outcome::Skip, sub));
        }
        let abs = dir_abs.join(OsStr::from_bytes(name));
        let rel = join_rel(dir_rel, name);
        let untracked = |reason| {
            Outcome::Untracked(Untracked {
                path: rel_path(&rel),
                reason,
            })
        };
        if is_ignored(ignores, &abs, ft.is_dir()) {
            return Ok((untracked(UntrackedReason::Ignored), sub));
        }
        if ft.is_dir() {
            let Ok(meta) = fs::symlink_metadata(&abs) else {
                return Ok((untracked(UntrackedReason::Unreadable), sub));
            };
            return Ok(match self.dir(&abs, &rel, Some(meta.ino()), ignores)? {
                None => (untracked(UntrackedReason::Unreadable), sub),
                Some(d) => {
                    let entry = Entry {
                        name: name.to_vec(),
                        kind: Kind::Dir,
                        mode: std::os::unix::fs::PermissionsExt::mode(&meta.permissions())
                            & PERMISSION_BITS,
                        id: d.id.unwrap_or(ObjectId([0; 32])),
                    };
                    (Outcome::Tracked(entry), d)
                }
            });
        }
        if ft.is_symlink() {
            let Ok(target) = fs::read_link(&abs) else {
                return Ok((untracked(UntrackedReason::Unreadable), sub));
            };
            let (id, written) = self.objects.write(target.as_os_str().as_bytes())?;
            sub.stats.files += 1;
            if written > 0 {
                sub.stats.objects_written += 1;
                sub.stats.bytes_written += written;
            }
            let entry = Entry {
                name: name.to_vec(),
                kind: Kind::Symlink,
                mode: 0,
                id,
            };
            return Ok((Outcome::Tracked(entry), sub));
        }
        if ft.is_fifo() || ft.is_socket() || ft.is_block_device() || ft.is_char_device() {
            return Ok((untracked(UntrackedReason::Special), sub));
        }
        let Ok(raw) = rustix::fs::statat(dir_fd, name, AtFlags::SYMLINK_NOFOLLOW) else {
            return Ok((untracked(UntrackedReason::Unreadable), sub));
        };
        if RawFileType::from_raw_mode(raw.st_mode) != RawFileType::RegularFile {
            return Ok((untracked(UntrackedReason::Special), sub));
        }
        let stat = Stat::of_raw(&raw);
        if stat.size > self.max_file_size {
            return Ok((untracked(UntrackedReason::TooLarge), sub));
        }
        if let Some(hit) = self.cache.get(&rel)
            && hit.still_valid(&stat)
            && (self.cached_objects_present || self.objects.contains(&hit.id))
        {
            sub.stats.files += 1;
            sub.cache_hits += 1;
            if self.all_entries {
                sub.cache.push((rel, *hit));
            }
            let entry = Entry {
                name: name.to_vec(),
                kind: Kind::File,
                mode: stat.mode & PERMISSION_BITS,
                id: hit.id,
            };
            return Ok((Outcome::Tracked(entry), sub));
        }
        let read = match read_stable(&abs, self.max_file_size) {
            Ok(Read_::Content(r)) => r,
            Ok(Read_::TooLarge) => return Ok((untracked(UntrackedReason::TooLarge), sub)),
            Ok(Read_::NotRegular) => return Ok((untracked(UntrackedReason::Special), sub)),
            Err(_) => return Ok((untracked(UntrackedReason::Unreadable), sub)),
        };
        let (id, written) = self.objects.write(&read.bytes)?;
        sub.stats.files += 1;
        sub.stats.files_hashed += 1;
        sub.stats.bytes_hashed += read.bytes.len() as u64;
        if written > 0 {
            sub.stats.objects_written += 1;
            sub.stats.bytes_written += written;
        }
        if read.stable {
            sub.cache.push((
                rel,
                CacheEntry {
                    stat: read.stat,
                    checked_ns: read.checked_ns,
                    id,
                },
            ));
        }
        let entry = Entry {
            name: name.to_vec(),
            kind: Kind::File,
            mode: read.stat.mode & PERMISSION_BITS,
            id,
        };
        Ok((Outcome::Tracked(entry), sub))
    }
}

struct FileRead {
    bytes: Vec<u8>,
    stat: Stat,
    checked_ns: i64,
    /// The file did not change while it was read: its stat may vouch for
    /// this content next time.
    stable: bool,
}

enum Read_ {
    Content(FileRead),
    TooLarge,
    NotRegular,
}

/// Reads a regular file without following a symlink or blocking on a FIFO
/// swapped in after the directory was listed; a file that changes while
/// read is read again (a few times), then taken as read but not cached.
/// One that holds more than `cap` once read is too large, whatever its
/// size said ([`read_capped`]).
fn read_stable(path: &Path, cap: u64) -> io::Result<Read_> {
    let mut last = None;
    for _ in 0..3 {
        let checked_ns = now_ns();
        let mut file = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(path)?;
        let before = file.metadata()?;
        if !before.is_file() {
            return Ok(Read_::NotRegular);
        }
        if before.len() > cap {
            return Ok(Read_::TooLarge);
        }
        let bytes = match read_capped(&mut file, before.len(), cap)? {
            Capped::Content(bytes) => bytes,
            Capped::TooLarge => return Ok(Read_::TooLarge),
        };
        let stat = Stat::of(&before);
        let after = Stat::of(&file.metadata()?);
        let stable = stat == after && bytes.len() as u64 == stat.size && same_path(&file, path);
        let read = FileRead {
            bytes,
            stat,
            checked_ns,
            stable,
        };
        if stable {
            return Ok(Read_::Content(read));
        }
        last = Some(read);
    }
    last.map(Read_::Content)
        .ok_or_else(|| io::Error::other("file changed while read"))
}

/// The path still names the file that was read (not replaced by rename).
fn same_path(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), fs::symlink_metadata(path)) {
        (Ok(a), Ok(b)) => a.ino() == b.ino() && a.dev() == b.dev(),
        _ => false,
    }
}
