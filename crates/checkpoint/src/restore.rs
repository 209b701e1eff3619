//! Makes the workspace's tracked files exactly a checkpoint's, touching
//! only what differs from the state scanned just before, and never writing
//! through a symlink: every directory is checked with `lstat` before
//! anything is written in it, and files land by rename, which replaces a
//! link instead of following it. The store may have been shipped by the
//! repository: every tree the restore follows is read, and its names
//! checked, before anything is written ([`check`]), and each name is
//! checked again where it is joined to a path.

use crate::checkpoint::Checkpoint;
use crate::diff::{self, empty_tree_id, load_tree};
use crate::error::CheckpointError;
use crate::hash::ObjectId;
use crate::name;
use crate::objects::{Objects, temp_name};
use crate::scan::rel_path;
use crate::tree::{Entry, Kind, PERMISSION_BITS, Tree, unsafe_name};
use crate::untracked::Untracked;
use std::collections::HashSet;
use std::ffi::OsStr;
use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// What a restore did, and what it did not touch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestoreReport {
    /// The workspace as it was just before, saved so the restore itself
    /// can be undone.
    pub before: Checkpoint,
    /// Files, symlinks and directories written or created (relative).
    pub written: Vec<PathBuf>,
    /// Files, symlinks and directories removed (relative).
    pub removed: Vec<PathBuf>,
    /// Paths neither checkpoint holds (ignored, too large, special): left
    /// as they are.
    pub left_alone: Vec<Untracked>,
    /// Paths that could not be made as the checkpoint has them (e.g. a file
    /// where an ignored directory now stands), with why.
    pub failed: Vec<(PathBuf, String)>,
}

pub(crate) struct Restorer<'a> {
    pub objects: &'a Objects,
    /// Paths the target does not hold: never removed.
    pub protected: HashSet<Vec<u8>>,
    pub written: Vec<PathBuf>,
    pub removed: Vec<PathBuf>,
    pub failed: Vec<(PathBuf, String)>,
}

fn join(prefix: &[u8], name: &[u8]) -> Vec<u8> {
    if prefix.is_empty() {
        name.to_vec()
    } else {
        [prefix, b"/", name].concat()
    }
}

/// Reads every tree a restore from `current` to `target` (root trees)
/// follows, so a forged name anywhere in them ([`Tree::decode`] refuses
/// it) fails the restore before anything is written; and checks the
/// target's root, where `.whittle` is refused too.
pub(crate) fn check(
    objects: &Objects,
    current: &ObjectId,
    target: &ObjectId,
) -> Result<(), CheckpointError> {
    // The trees that differ are the ones a restore reads.
    diff::changes(objects, current, target)?;
    let root = load_tree(objects, target)?;
    match root
        .entries
        .iter()
        .find(|e| !name::is_allowed(b"", &e.name))
    {
        Some(e) => Err(unsafe_name(&objects.path(target), &e.name)),
        None => Ok(()),
    }
}

/// A folder's tree and the object it was read from, to name in an error.
#[derive(Clone, Copy)]
pub(crate) struct Folder<'t> {
    pub id: &'t ObjectId,
    pub tree: &'t Tree,
}

/// Opens a directory for `fchmod` without following a symlink.
fn open_dir(path: &Path) -> io::Result<File> {
    fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_DIRECTORY)
        .open(path)
}

/// A file entry's mode, only its [`PERMISSION_BITS`] (a forged tree may
/// hold more).
fn permissions(entry: &Entry) -> fs::Permissions {
    fs::Permissions::from_mode(entry.mode & PERMISSION_BITS)
}

/// Whether `path` is a real directory (not a symlink to one).
fn is_real_dir(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_dir())
}

/// Makes sure the owner can add and remove entries while we work.
fn make_writable(path: &Path) -> io::Result<()> {
    let dir = open_dir(path)?;
    let mode = dir.metadata()?.permissions().mode() & 0o7777;
    if mode & 0o700 != 0o700 {
        dir.set_permissions(fs::Permissions::from_mode(mode | 0o700))?;
    }
    Ok(())
}

impl Restorer<'_> {
    fn fail(&mut self, rel: &[u8], e: impl ToString) {
        self.failed.push((rel_path(rel), e.to_string()));
    }

    /// The path and relative name of the entry `name` of the folder `abs`
    /// (`rel`), which the tree object `tree` holds. [`Tree::decode`]
    /// refused the bad names already; checked again here, where a name
    /// becomes a path, so a tree that came by another way cannot make
    /// `abs.join(name)` leave the folder.
    fn child(
        &self,
        abs: &Path,
        rel: &[u8],
        tree: &ObjectId,
        name: &[u8],
    ) -> Result<(PathBuf, Vec<u8>), CheckpointError> {
        if !name::is_allowed(rel, name) {
            return Err(unsafe_name(&self.objects.path(tree), name));
        }
        Ok((abs.join(OsStr::from_bytes(name)), join(rel, name)))
    }

    /// Restores the directory `abs` (a real directory) from `current` (as
    /// scanned) to `target`.
    pub(crate) fn dir(
        &mut self,
        abs: &Path,
        rel: &[u8],
        current: Folder<'_>,
        target: Folder<'_>,
    ) -> Result<(), CheckpointError> {
        let (current_id, current) = (current.id, current.tree);
        let (target_id, target) = (target.id, target.tree);
        // Removals first, so a name can change kind (file <-> directory).
        for ce in &current.entries {
            let (child, child_rel) = self.child(abs, rel, current_id, &ce.name)?;
            let keep = match target.get(&ce.name) {
                Some(te) => te.kind == ce.kind,
                None => false,
            };
            if keep || self.protected.contains(&child_rel) {
                continue;
            }
            self.remove(&child, &child_rel, ce)?;
        }
        for te in &target.entries {
            let (child, child_rel) = self.child(abs, rel, target_id, &te.name)?;
            let ce = current.get(&te.name).filter(|ce| ce.kind == te.kind);
            if ce == Some(te) {
                continue;
            }
            match te.kind {
                Kind::Dir => self.restore_dir(&child, &child_rel, ce, te)?,
                Kind::File | Kind::Symlink => self.restore_leaf(&child, &child_rel, ce, te)?,
            }
        }
        Ok(())
    }

    fn restore_dir(
        &mut self,
        abs: &Path,
        rel: &[u8],
        current: Option<&Entry>,
        target: &Entry,
    ) -> Result<(), CheckpointError> {
        let meta = fs::symlink_metadata(abs);
        let existed = match &meta {
            Ok(m) if m.file_type().is_dir() => true,
            Ok(_) => {
                // Something untracked (special file, ignored file) stands
                // where the checkpoint has a directory.
                self.fail(rel, "an untracked file is in the way of a directory");
                return Ok(());
            }
            Err(_) => false,
        };
        if !existed {
            if let Err(e) = fs::create_dir(abs) {
                self.fail(rel, e);
                return Ok(());
            }
            self.written.push(rel_path(rel));
        }
        if let Err(e) = make_writable(abs) {
            self.fail(rel, e);
            return Ok(());
        }
        let (cur_id, cur_tree) = match current {
            Some(ce) if ce.id != target.id => (ce.id, load_tree(self.objects, &ce.id)?),
            Some(_) => {
                // Same content, only the mode differs.
                self.set_dir_mode(abs, rel, target.mode);
                return Ok(());
            }
            None => (empty_tree_id(), Tree::default()),
        };
        let target_tree = load_tree(self.objects, &target.id)?;
        let current = Folder {
            id: &cur_id,
            tree: &cur_tree,
        };
        let wanted = Folder {
            id: &target.id,
            tree: &target_tree,
        };
        self.dir(abs, rel, current, wanted)?;
        self.set_dir_mode(abs, rel, target.mode);
        Ok(())
    }

    fn set_dir_mode(&mut self, abs: &Path, rel: &[u8], mode: u32) {
        let mode = mode & PERMISSION_BITS;
        let result = open_dir(abs).and_then(|d| {
            let now = d.metadata()?.permissions().mode() & PERMISSION_BITS;
            if now != mode {
                d.set_permissions(fs::Permissions::from_mode(mode))?;
            }
            Ok(())
        });
        if let Err(e) = result {
            self.fail(rel, e);
        }
    }

    fn restore_leaf(
        &mut self,
        abs: &Path,
        rel: &[u8],
        current: Option<&Entry>,
        target: &Entry,
    ) -> Result<(), CheckpointError> {
        if let Ok(m) = fs::symlink_metadata(abs)
            && !(m.file_type().is_file() || m.file_type().is_symlink())
        {
            self.fail(rel, "an untracked directory or special file is in the way");
            return Ok(());
        }
        if let Some(ce) = current
            && ce.id == target.id
            && ce.kind == Kind::File
        {
            // Only the mode changed.
            let result = fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
                .open(abs)
                .and_then(|f| f.set_permissions(permissions(target)));
            match result {
                Ok(()) => self.written.push(rel_path(rel)),
                Err(e) => self.fail(rel, e),
            }
            return Ok(());
        }
        let content = self.objects.read(&target.id)?;
        let dir = abs.parent().unwrap_or(Path::new("."));
        let temp = dir.join(temp_name(".whittle-restore-"));
        let result = match target.kind {
            Kind::Symlink => std::os::unix::fs::symlink(OsStr::from_bytes(&content), &temp),
            _ => (|| {
                let mut f = fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(&temp)?;
                f.write_all(&content)?;
                f.set_permissions(permissions(target))
            })(),
        }
        .and_then(|()| fs::rename(&temp, abs));
        match result {
            Ok(()) => self.written.push(rel_path(rel)),
            Err(e) => {
                let _ = fs::remove_file(&temp);
                self.fail(rel, e);
            }
        }
        Ok(())
    }

    /// Removes what the scan tracked at `abs`; what it did not track (an
    /// ignored file inside a directory, a nested `.git`) stays, and so
    /// does the directory holding it.
    fn remove(&mut self, abs: &Path, rel: &[u8], entry: &Entry) -> Result<(), CheckpointError> {
        if self.protected.contains(rel) {
            return Ok(());
        }
        match entry.kind {
            Kind::File | Kind::Symlink => match fs::remove_file(abs) {
                Ok(()) => self.removed.push(rel_path(rel)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => self.fail(rel, e),
            },
            Kind::Dir => {
                if !is_real_dir(abs) {
                    return Ok(());
                }
                if let Err(e) = make_writable(abs) {
                    self.fail(rel, e);
                    return Ok(());
                }
                let tree = load_tree(self.objects, &entry.id)?;
                for child in &tree.entries {
                    let (child_abs, child_rel) = self.child(abs, rel, &entry.id, &child.name)?;
                    self.remove(&child_abs, &child_rel, child)?;
                }
                match fs::remove_dir(abs) {
                    Ok(()) => self.removed.push(rel_path(rel)),
                    // Untracked files inside keep it.
                    Err(_) => self.set_dir_mode(abs, rel, entry.mode),
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tree that never went through [`Tree::decode`] (built in memory)
    /// still cannot make a restore leave its folder.
    #[test]
    fn a_bad_name_is_refused_where_it_would_become_a_path() {
        let base = tempfile::tempdir().unwrap();
        let ws = base.path().join("ws");
        fs::create_dir(&ws).unwrap();
        let objects = Objects::open(base.path().join("objects")).unwrap();
        let (blob, _) = objects.write(b"forged\n").unwrap();
        let outside = base.path().join("escaped");
        for (name, kind) in [
            (b"..".to_vec(), Kind::Dir),
            (b"../escaped".to_vec(), Kind::File),
            (outside.as_os_str().as_bytes().to_vec(), Kind::File),
            (b"".to_vec(), Kind::File),
            (b".git".to_vec(), Kind::Dir),
            (b".whittle".to_vec(), Kind::Dir),
        ] {
            let entry = Entry {
                name: name.clone(),
                kind,
                mode: 0o755,
                id: if kind == Kind::Dir {
                    empty_tree_id()
                } else {
                    blob
                },
            };
            let target = Tree {
                entries: vec![entry],
            };
            let mut restorer = Restorer {
                objects: &objects,
                protected: HashSet::new(),
                written: Vec::new(),
                removed: Vec::new(),
                failed: Vec::new(),
            };
            let target_id = ObjectId([9; 32]);
            let empty = Tree::default();
            let result = restorer.dir(
                &ws,
                b"",
                Folder {
                    id: &empty_tree_id(),
                    tree: &empty,
                },
                Folder {
                    id: &target_id,
                    tree: &target,
                },
            );
            assert!(
                matches!(&result, Err(CheckpointError::UnsafeName { path, .. }) if *path == objects.path(&target_id)),
                "{name:?}: {result:?}"
            );
            assert!(restorer.written.is_empty(), "{name:?}");
            assert_eq!(fs::read_dir(&ws).unwrap().count(), 0, "{name:?}");
            assert!(!outside.exists());
        }
    }
}
