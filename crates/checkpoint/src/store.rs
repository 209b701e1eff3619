use crate::cache::{Stat, StatCache, write_atomic};
use crate::checkpoint::{Checkpoint, CheckpointId, Record};
use crate::diff::{self, DiffStat, empty_tree_id, load_tree};
use crate::error::CheckpointError;
use crate::gc::{GcLimits, GcReport};
use crate::hash::ObjectId;
use crate::lock::StoreLock;
use crate::objects::Objects;
use crate::options::Options;
use crate::restore::{self, Folder, RestoreReport, Restorer};
use crate::scan::{Memo, Scan, Scanner};
use crate::tree::Kind;
use crate::untracked::{self, Untracked};
use crate::watch::{Changes, Watcher};
use std::collections::HashSet;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Checkpoints of one workspace, kept in a store folder (the agent uses
/// `<workspace>/.whittle/checkpoints`). Several `Store`s, in one process or
/// several, may share a store folder: each operation takes the store's
/// lock.
pub struct Store {
    workspace: PathBuf,
    dir: PathBuf,
    options: Options,
    objects: Objects,
    cache: StatCache,
    /// The collection generation the in-memory state was last checked
    /// against.
    generation: u64,
    /// This store's newest checkpoint: the next one's diff stat is
    /// against it.
    last: Option<CheckpointId>,
    /// Tells which directories changed since the last snapshot; `None`
    /// when the kernel gives no watcher (every snapshot stats every file).
    watcher: Option<Mutex<Watcher>>,
    /// The directories as the last snapshot found them.
    memo: Memo,
    /// `.git/info/exclude` as the last snapshot saw it (not watched).
    exclude_seen: Option<Stat>,
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl Store {
    /// Opens (creating it if needed) the store folder for `workspace`.
    /// Fails with [`CheckpointError::StoreUnusable`] when the folder cannot
    /// be written, so the caller can say so once and go on without.
    pub fn open(
        workspace: &Path,
        store_dir: &Path,
        options: Options,
    ) -> Result<Store, CheckpointError> {
        let meta = fs::metadata(workspace).map_err(CheckpointError::workspace(workspace))?;
        if !meta.is_dir() {
            return Err(CheckpointError::Workspace {
                path: workspace.to_path_buf(),
                source: io::Error::new(io::ErrorKind::NotADirectory, "not a directory"),
            });
        }
        let checkpoints = store_dir.join("checkpoints");
        fs::create_dir_all(&checkpoints).map_err(CheckpointError::store(&checkpoints))?;
        // Fail now, not at the first snapshot, when the folder is read-only.
        write_atomic(&store_dir.join("probe"), b"")?;
        let objects = Objects::open(store_dir.join("objects"))?;
        let _lock = StoreLock::shared(store_dir)?;
        let generation = read_generation(store_dir);
        let cache = StatCache::load(&store_dir.join("index"));
        if cache.generation == generation {
            // No collection since it was written: its objects are there.
            objects.mark_present(cache.entries.values().map(|e| e.id));
        }
        let watcher = options
            .watch_changes
            .then(Watcher::new)
            .flatten()
            .map(Mutex::new);
        Ok(Store {
            workspace: workspace.to_path_buf(),
            dir: store_dir.to_path_buf(),
            options,
            objects,
            cache,
            generation,
            last: None,
            watcher,
            memo: Memo::new(),
            exclude_seen: None,
        })
    }

    /// Saves the workspace as it is now. The returned checkpoint carries
    /// the diff stat against this store's previous checkpoint (or the
    /// store's newest, for the first snapshot of a process).
    pub fn snapshot(&mut self, label: Option<&str>) -> Result<Checkpoint, CheckpointError> {
        let _lock = StoreLock::exclusive(&self.dir)?;
        self.snapshot_locked(label)
    }

    fn check_generation(&mut self) {
        let now = read_generation(&self.dir);
        if now != self.generation {
            self.objects.forget_present();
            self.generation = now;
        }
    }

    fn scan(&mut self) -> Result<Scan, CheckpointError> {
        self.check_generation();
        let all_entries = self.cache.generation != self.generation || self.cache.rebuild_due();
        // Without a word from the watcher, nothing is vouched for.
        let changes = self
            .watcher
            .as_ref()
            .and_then(|w| w.lock().ok().map(|mut w| w.changes()))
            .unwrap_or_else(Changes::everything);
        let exclude = fs::symlink_metadata(self.workspace.join(".git/info/exclude"))
            .ok()
            .map(|m| Stat::of(&m));
        if changes.all || all_entries || exclude != self.exclude_seen {
            self.memo.clear();
        }
        self.exclude_seen = exclude;
        let ignore_bytes = AtomicU64::new(0);
        let mut scan = Scanner {
            root: &self.workspace,
            objects: &self.objects,
            cache: &self.cache.entries,
            cached_objects_present: self.cache.generation == self.generation,
            max_file_size: self.options.max_file_size,
            all_entries,
            memo: &self.memo,
            dirty: &changes.dirs,
            watcher: self.watcher.as_ref(),
            ignore_bytes: &ignore_bytes,
        }
        .run()?;
        self.memo = std::mem::take(&mut scan.memos).into_iter().collect();
        let index = self.dir.join("index");
        let entries = std::mem::take(&mut scan.cache);
        if all_entries {
            self.cache.replace(&index, entries, self.generation)?;
        } else {
            self.cache.record(&index, entries, scan.cache_hits)?;
        }
        Ok(scan)
    }

    fn snapshot_locked(&mut self, label: Option<&str>) -> Result<Checkpoint, CheckpointError> {
        let scan = self.scan()?;
        let parent = match &self.last {
            Some(id) if self.record_path(id).exists() => Some(id.clone()),
            _ => self.ids()?.into_iter().next_back(),
        };
        let parent_root = match &parent {
            Some(id) => self.read_record(id)?.root()?,
            None => empty_tree_id(),
        };
        let changes = diff::changes(&self.objects, &parent_root, &scan.root)?;
        let stat = diff::stat(&self.objects, &changes)?;
        let (untracked_id, _) = self.objects.write(&untracked::encode(&scan.untracked))?;
        let unix_ms = unix_ms();
        let mut id = CheckpointId::new(unix_ms);
        while self.record_path(&id).exists() {
            id = CheckpointId::new(unix_ms);
        }
        let record = Record {
            id: id.clone(),
            unix_ms,
            label: label.map(str::to_string),
            parent,
            root: scan.root.to_hex(),
            untracked: untracked_id.to_hex(),
            stat,
            scan: scan.stats,
        };
        let json = serde_json::to_vec_pretty(&record)
            .map_err(|e| CheckpointError::Corrupt(format!("a record does not serialize: {e}")))?;
        write_atomic(&self.record_path(&id), &json)?;
        self.last = Some(id.clone());
        Ok(Checkpoint {
            id,
            unix_ms,
            label: record.label,
            parent: record.parent,
            root: scan.root,
            untracked: scan.untracked,
            stat,
            scan: scan.stats,
        })
    }

    /// Makes the workspace's tracked files exactly as they were at `id`,
    /// after saving the current state (the report's `before`) so the
    /// restore can itself be undone. Ignored, oversized and special paths,
    /// `.git` and `.whittle` are left alone.
    pub fn restore(&mut self, id: &CheckpointId) -> Result<RestoreReport, CheckpointError> {
        let _lock = StoreLock::exclusive(&self.dir)?;
        let target = self.read_record(id)?;
        let target_untracked = untracked::decode(&self.objects.read(&target.untracked()?)?)?;
        let before = self.snapshot_locked(Some(&format!("before restoring {id}")))?;
        let target_root = target.root()?;
        restore::check(&self.objects, &before.root, &target_root)?;
        let current = load_tree(&self.objects, &before.root)?;
        let wanted = load_tree(&self.objects, &target_root)?;
        let mut restorer = Restorer {
            objects: &self.objects,
            protected: target_untracked
                .iter()
                .map(|u| u.path.as_os_str().as_bytes().to_vec())
                .collect(),
            written: Vec::new(),
            removed: Vec::new(),
            failed: Vec::new(),
        };
        restorer.dir(
            &self.workspace,
            b"",
            Folder {
                id: &before.root,
                tree: &current,
            },
            Folder {
                id: &target_root,
                tree: &wanted,
            },
        )?;
        let mut left_alone: Vec<Untracked> = target_untracked
            .into_iter()
            .chain(before.untracked.iter().cloned())
            .collect();
        left_alone.sort();
        left_alone.dedup();
        let report = RestoreReport {
            before,
            written: restorer.written,
            removed: restorer.removed,
            left_alone,
            failed: restorer.failed,
        };
        self.last = Some(id.clone());
        Ok(report)
    }

    /// Every checkpoint in the store (of every session), oldest first.
    pub fn list(&self) -> Result<Vec<Checkpoint>, CheckpointError> {
        let _lock = StoreLock::shared(&self.dir)?;
        let mut out = Vec::new();
        for id in self.ids()? {
            match self.read_record(&id) {
                Ok(record) => out.push(self.checkpoint(record)?),
                // Pruned by another process since the listing.
                Err(CheckpointError::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// One checkpoint's metadata.
    pub fn get(&self, id: &CheckpointId) -> Result<Checkpoint, CheckpointError> {
        let _lock = StoreLock::shared(&self.dir)?;
        self.checkpoint(self.read_record(id)?)
    }

    /// Files changed and lines inserted and deleted from `from` to `to`
    /// (`None`: the workspace now).
    pub fn diff_stat(
        &mut self,
        from: &CheckpointId,
        to: Option<&CheckpointId>,
    ) -> Result<DiffStat, CheckpointError> {
        let (changes, _lock) = self.changes(from, to)?;
        diff::stat(&self.objects, &changes)
    }

    /// A unified diff from `from` to `to` (`None`: the workspace now);
    /// binary files say "Binary files … differ".
    pub fn unified_diff(
        &mut self,
        from: &CheckpointId,
        to: Option<&CheckpointId>,
    ) -> Result<String, CheckpointError> {
        let (changes, _lock) = self.changes(from, to)?;
        diff::unified(&self.objects, &changes)
    }

    fn changes(
        &mut self,
        from: &CheckpointId,
        to: Option<&CheckpointId>,
    ) -> Result<(Vec<diff::Change>, StoreLock), CheckpointError> {
        // Reading the workspace stores its new files' objects: exclusive.
        let lock = match to {
            Some(_) => StoreLock::shared(&self.dir)?,
            None => StoreLock::exclusive(&self.dir)?,
        };
        let old = self.read_record(from)?.root()?;
        let new = match to {
            Some(id) => self.read_record(id)?.root()?,
            None => self.scan()?.root,
        };
        Ok((diff::changes(&self.objects, &old, &new)?, lock))
    }

    /// Prunes checkpoints past the limits (oldest first, never the
    /// newest) and every object no remaining checkpoint needs.
    pub fn gc(&mut self, limits: GcLimits) -> Result<GcReport, CheckpointError> {
        let _lock = StoreLock::exclusive(&self.dir)?;
        let mut report = GcReport::default();
        let now = unix_ms();
        let mut reachable: HashSet<ObjectId> = HashSet::new();
        let mut over = false;
        let ids = self.ids()?;
        for (i, id) in ids.iter().rev().enumerate() {
            let record = self.read_record(id)?;
            let too_old = limits
                .max_age
                .is_some_and(|age| Duration::from_millis(now.saturating_sub(record.unix_ms)) > age);
            if i > 0 && (over || too_old) {
                self.prune(id)?;
                report.checkpoints_removed += 1;
                continue;
            }
            let mut mine = HashSet::new();
            self.reach(&record.root()?, &reachable, &mut mine)?;
            mine.insert(record.untracked()?);
            let added: u64 = mine
                .iter()
                .filter(|o| !reachable.contains(*o))
                .map(|o| self.object_size(o))
                .sum();
            if i > 0
                && limits
                    .max_bytes
                    .is_some_and(|max| report.bytes_kept + added > max)
            {
                over = true;
                self.prune(id)?;
                report.checkpoints_removed += 1;
                continue;
            }
            report.bytes_kept += added;
            report.checkpoints_kept += 1;
            reachable.extend(mine);
        }
        // A collection may remove objects other stores' caches name.
        let generation = read_generation(&self.dir) + 1;
        write_atomic(
            &self.dir.join("generation"),
            generation.to_string().as_bytes(),
        )?;
        self.objects.forget_present();
        self.generation = generation;
        let dir = self.objects.dir().to_path_buf();
        for sub in fs::read_dir(&dir).map_err(CheckpointError::store(&dir))? {
            let sub = sub.map_err(CheckpointError::store(&dir))?.path();
            let Ok(files) = fs::read_dir(&sub) else {
                continue;
            };
            let prefix = sub.file_name().map(|n| n.to_string_lossy().into_owned());
            for f in files.flatten() {
                let name = f.file_name().to_string_lossy().into_owned();
                let meta = f.metadata().ok();
                let keep = if name.starts_with('.') {
                    // A writer that died left it; a live one holds the lock.
                    false
                } else {
                    prefix
                        .as_deref()
                        .and_then(|p| ObjectId::from_hex(&format!("{p}{name}")))
                        .is_some_and(|id| reachable.contains(&id))
                };
                if !keep && fs::remove_file(f.path()).is_ok() {
                    report.objects_removed += 1;
                    report.bytes_removed += meta.map(|m| m.len()).unwrap_or(0);
                }
            }
        }
        self.objects.mark_present(reachable);
        if let Some(last) = &self.last
            && !self.record_path(last).exists()
        {
            self.last = None;
        }
        Ok(report)
    }

    fn prune(&self, id: &CheckpointId) -> Result<(), CheckpointError> {
        let path = self.record_path(id);
        match fs::remove_file(&path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(CheckpointError::store(path)(e)),
            _ => Ok(()),
        }
    }

    fn object_size(&self, id: &ObjectId) -> u64 {
        fs::metadata(self.objects.path(id))
            .map(|m| m.len())
            .unwrap_or(0)
    }

    /// Adds the objects under `tree` not already in `known` to `out`.
    fn reach(
        &self,
        tree: &ObjectId,
        known: &HashSet<ObjectId>,
        out: &mut HashSet<ObjectId>,
    ) -> Result<(), CheckpointError> {
        if known.contains(tree) || !out.insert(*tree) {
            return Ok(());
        }
        for e in load_tree(&self.objects, tree)?.entries {
            match e.kind {
                Kind::Dir => self.reach(&e.id, known, out)?,
                _ => {
                    out.insert(e.id);
                }
            }
        }
        Ok(())
    }

    fn record_path(&self, id: &CheckpointId) -> PathBuf {
        self.dir.join("checkpoints").join(format!("{id}.json"))
    }

    /// The ids in the store, oldest first.
    fn ids(&self) -> Result<Vec<CheckpointId>, CheckpointError> {
        let dir = self.dir.join("checkpoints");
        let mut ids: Vec<CheckpointId> = fs::read_dir(&dir)
            .map_err(CheckpointError::store(&dir))?
            .flatten()
            .filter_map(|e| {
                let name = e.file_name();
                let name = name.to_str()?;
                name.strip_suffix(".json")?.parse().ok()
            })
            .collect();
        ids.sort();
        Ok(ids)
    }

    fn read_record(&self, id: &CheckpointId) -> Result<Record, CheckpointError> {
        let path = self.record_path(id);
        let bytes = fs::read(&path).map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                CheckpointError::NotFound(id.to_string())
            } else {
                CheckpointError::store(&path)(e)
            }
        })?;
        serde_json::from_slice(&bytes)
            .map_err(|e| CheckpointError::Corrupt(format!("checkpoint {id}: {e}")))
    }

    fn checkpoint(&self, record: Record) -> Result<Checkpoint, CheckpointError> {
        let untracked = untracked::decode(&self.objects.read(&record.untracked()?)?)?;
        Ok(Checkpoint {
            root: record.root()?,
            id: record.id,
            unix_ms: record.unix_ms,
            label: record.label,
            parent: record.parent,
            untracked,
            stat: record.stat,
            scan: record.scan,
        })
    }
}

fn read_generation(store: &Path) -> u64 {
    fs::read_to_string(store.join("generation"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}
