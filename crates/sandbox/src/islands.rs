//! The parts of a writable folder whose change would run code outside the
//! sandbox later: git's metadata of every repository at any depth, editors'
//! task folders, whittle's own settings.
//!
//! Only what the person and the config name widens the sandbox; the
//! workspace's content never does. A `.git` file (`gitdir: ...`), a
//! `commondir` or a symlink is never followed out of the folders already
//! granted: it only tells where more protection is needed inside them.
//!
//! The kernel can only protect paths that exist, so the policy also lists
//! the ones that do not ([`Policy::absent`]): what a command creates there
//! is moved aside when it ends (see [`crate::quarantine_new_paths`]).

use crate::policy::Policy;
use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Folders in the workspace whose content runs code outside the sandbox
/// later (editors' task files) or configures whittle; read-only to
/// commands, and moved aside when a command creates them.
pub(crate) const WORKSPACE_ISLANDS: &[&str] = &[".whittle", ".vscode", ".idea"];

/// What in a git folder makes git run a program or read another folder.
/// Folders among them are created when missing, so that they can be made
/// read-only; files cannot be, and are watched instead.
const GIT_DIR_ISLANDS: &[(&str, bool)] = &[
    ("config", false),
    ("hooks", true),
    ("info", true),
    ("commondir", false),
    ("config.worktree", false),
    // Objects of another folder, read as this repository's own.
    ("objects/info/alternates", false),
];

/// What in a linked worktree's folder (`.git/worktrees/NAME`) says where
/// its repository and its config are.
const WORKTREE_ISLANDS: &[&str] = &["commondir", "gitdir", "config.worktree"];

/// A folder changed less than this long before it was read is read again.
const RACY_SECONDS: i64 = 2;

/// Most folders looked at when searching a tree for repositories: a bound
/// on the time spent before each command in a huge tree.
const MAX_DIRS: usize = 200_000;

/// Makes `.whittle`, `.vscode` and `.idea` of `workspace` read-only, or
/// watched when they do not exist (`.whittle` is created beforehand).
pub(crate) fn add_workspace_islands(p: &mut Policy, workspace: &Path) {
    for name in WORKSPACE_ISLANDS {
        let path = workspace.join(name);
        if std::fs::symlink_metadata(&path).is_ok() {
            p.read_only.extend(real(&path));
        } else {
            p.absent.push(path);
        }
    }
}

/// Protects the git metadata of every repository under `root`, at any
/// depth: each `.git` folder is pinned (it cannot be renamed, removed or
/// replaced) with its `config`, `hooks/`, `info/`, `commondir` and
/// `config.worktree` read-only, its linked worktrees' pointers and its
/// submodules' git folders likewise; a `.git` file is read-only itself.
/// Objects, refs, the index, logs and `HEAD` stay writable, so ordinary
/// git work goes on.
pub(crate) fn add_git_islands(p: &mut Policy, root: &Path) {
    add_git_islands_cached(p, root, &mut RepoScan::default());
}

/// What a folder held when it was last read: its subfolders and what its
/// `.git` entry is. Valid while the folder's change time and inode are the
/// same (adding, removing or renaming an entry changes them), so a scan
/// before each command stats every folder but reads only the changed ones.
#[derive(Debug, Default)]
pub(crate) struct RepoScan {
    /// By the folder's path as bytes: a path's own hash and equality go
    /// component by component, and were most of a cached pass's time
    /// outside the kernel (the paths here are all made by joining names,
    /// so equal folders have equal bytes).
    folders: HashMap<Vec<u8>, Listing>,
}

#[derive(Debug)]
struct Listing {
    stamp: (i64, i64, u64),
    /// Changed so shortly before it was read that a change right after
    /// could keep the same (coarse) change time: read again next time, as
    /// git does with a racily clean index.
    racy: bool,
    subfolders: Vec<PathBuf>,
    git: Option<GitEntry>,
    /// The folder is itself a git folder (`git init --bare`): it holds a
    /// `HEAD` naming a commit or a branch, `objects/` and `refs/`, as git
    /// checks before taking a folder for one.
    bare: bool,
}

#[derive(Clone, Copy, Debug)]
enum GitEntry {
    Folder,
    File,
    Link,
}

impl RepoScan {
    /// The listing of `dir`, read again only when it changed.
    fn listing(&mut self, dir: &Path) -> Option<&Listing> {
        let meta = std::fs::symlink_metadata(dir).ok()?;
        let stamp = (meta.ctime(), meta.ctime_nsec(), meta.ino());
        let key = dir.as_os_str().as_bytes();
        let fresh = self
            .folders
            .get(key)
            .is_some_and(|l| l.stamp == stamp && !l.racy);
        if !fresh {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64);
            let mut listing = Listing {
                stamp,
                racy: now - meta.ctime() < RACY_SECONDS,
                subfolders: Vec::new(),
                git: None,
                bare: false,
            };
            let mut bare_parts = 0;
            for entry in std::fs::read_dir(dir).ok()?.flatten() {
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                let name = entry.file_name();
                if name == ".git" {
                    listing.git = if kind.is_dir() {
                        Some(GitEntry::Folder)
                    } else if kind.is_file() {
                        Some(GitEntry::File)
                    } else if kind.is_symlink() {
                        Some(GitEntry::Link)
                    } else {
                        None
                    };
                } else if kind.is_dir() {
                    if name == "objects" || name == "refs" {
                        bare_parts += 1;
                    }
                    listing.subfolders.push(entry.path());
                } else if kind.is_file() && name == "HEAD" {
                    bare_parts += 1;
                }
            }
            listing.bare = bare_parts == 3 && names_a_commit(&dir.join("HEAD"));
            self.folders.insert(key.to_vec(), listing);
        }
        self.folders.get(key)
    }
}

/// Whether `head` reads as git's `HEAD` does: a branch (`ref: refs/...`)
/// or a commit's name. Read only for a folder that holds `objects/` and
/// `refs/` too, so that a project's own folder of those names is not taken
/// for a repository (and given a `hooks/` folder).
fn names_a_commit(head: &Path) -> bool {
    let Ok(text) = crate::read_regular_file(head, 256) else {
        return false;
    };
    let text = String::from_utf8_lossy(&text);
    let line = text.trim_end();
    line.starts_with("ref: refs/")
        || (matches!(line.len(), 40 | 64) && line.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// `policy` with the repositories of its `repo_roots` as they are now
/// protected (one a command created with `git init` included), reading only
/// the folders that changed since `scan` last looked.
pub(crate) fn with_current_repos(policy: &Policy, scan: &mut RepoScan) -> Policy {
    let mut p = policy.clone();
    // Found again: one removed since and made again by a command is new.
    p.git_dirs.clear();
    p.git_pointers.clear();
    for root in &policy.repo_roots {
        add_git_islands_cached(&mut p, root, scan);
    }
    p.tidy();
    p
}

/// [`add_git_islands`], reading only the folders that changed since
/// `scan` last saw them.
pub(crate) fn add_git_islands_cached(p: &mut Policy, root: &Path, scan: &mut RepoScan) {
    // whittle's own folder holds no repository and may hold many files.
    let own = root.join(".whittle");
    let mut stack = vec![root.to_path_buf()];
    let mut seen = 0usize;
    while let Some(dir) = stack.pop() {
        seen += 1;
        if seen > MAX_DIRS {
            break;
        }
        let Some(listing) = scan.listing(&dir) else {
            continue;
        };
        // Its folders are git's own: no work tree, no repository in them.
        // The root is the person's folder, a mount already: left as it is.
        if listing.bare && dir != root {
            if let Some(parent) = dir.parent() {
                pin_folders_down_to(p, root, parent);
            }
            protect_git_dir(p, &dir);
            continue;
        }
        stack.extend(
            listing
                .subfolders
                .iter()
                .filter(|d| d.as_os_str() != own.as_os_str())
                .cloned(),
        );
        let git = listing.git;
        let path = dir.join(".git");
        if git.is_some() {
            pin_folders_down_to(p, root, &dir);
        }
        if matches!(git, Some(GitEntry::File | GitEntry::Link)) {
            let named = pointer_target(&path);
            p.git_pointers.push((path.clone(), named));
        }
        match git {
            Some(GitEntry::Folder) => protect_git_dir(p, &path),
            Some(GitEntry::File) => {
                p.read_only.push(path.clone());
                if let Some(target) = separate_git_dir(&path, root) {
                    if let Some(parent) = target.parent() {
                        pin_folders_down_to(p, root, parent);
                    }
                    protect_git_dir(p, &target);
                }
            }
            // Followed only when it stays inside this folder: whittle
            // makes `hooks/` in what it protects, and never outside.
            Some(GitEntry::Link) => {
                if let Some(target) = real(&path).filter(|t| t.is_dir() && t.starts_with(root)) {
                    // Its folders too: renamed, another git folder would
                    // take the place the link names.
                    if let Some(parent) = target.parent() {
                        pin_folders_down_to(p, root, parent);
                    }
                    protect_git_dir(p, &target);
                }
            }
            None => {}
        }
    }
}

/// The git folder a `.git` file names (`gitdir: PATH`, as `git init
/// --separate-git-dir` writes it) when it lies inside `root` and outside
/// every `.git` folder: a command could otherwise write its config or hooks,
/// which the person's git in the file's folder then reads. One inside a
/// `.git` (a submodule's, a linked worktree's) is protected with that
/// repository; one outside `root` is never followed.
fn separate_git_dir(file: &Path, root: &Path) -> Option<PathBuf> {
    real(&named_git_dir(file)?).filter(|t| {
        t.is_dir() && t.starts_with(root) && !t.components().any(|c| c.as_os_str() == ".git")
    })
}

/// The folder a `.git` file names (`gitdir: PATH`, relative to the
/// file's folder), as written: not resolved, not checked to exist. `None`
/// when the file is not a small regular file of that form.
pub(crate) fn named_git_dir(file: &Path) -> Option<PathBuf> {
    let text = crate::read_regular_file(file, 4096).ok()?;
    let text = String::from_utf8(text).ok()?;
    let named = text.lines().next()?.strip_prefix("gitdir:")?.trim();
    Some(file.parent()?.join(named))
}

/// The real path of the folder a `.git` file or link at `pointer` names,
/// as git would reach it now; `None` when it names nothing that exists.
pub(crate) fn pointer_target(pointer: &Path) -> Option<PathBuf> {
    let meta = std::fs::symlink_metadata(pointer).ok()?;
    let named = if meta.file_type().is_symlink() {
        pointer.to_path_buf()
    } else {
        named_git_dir(pointer)?
    };
    std::fs::canonicalize(named).ok()
}

/// Pins every folder from below `root` down to `dir`, a folder holding a
/// `.git`: pinning the `.git` alone keeps it in its folder, but a command
/// could rename a folder above it and put another repository, with a
/// config that runs a program, where the person's `git` will look. Nothing
/// the folders hold is made read-only by this.
fn pin_folders_down_to(p: &mut Policy, root: &Path, dir: &Path) {
    let Ok(below) = dir.strip_prefix(root) else {
        return;
    };
    let mut at = root.to_path_buf();
    for part in below.components() {
        at.push(part);
        p.pinned.push(at.clone());
    }
}

/// Pins one git folder and protects what makes git run a program or read
/// another folder; recurses into its submodules' git folders.
fn protect_git_dir(p: &mut Policy, git_dir: &Path) {
    p.pinned.push(git_dir.to_path_buf());
    p.git_dirs.push(git_dir.to_path_buf());
    for (name, is_dir) in GIT_DIR_ISLANDS {
        let path = git_dir.join(name);
        if *is_dir && std::fs::symlink_metadata(&path).is_err() {
            let _ = std::fs::create_dir(&path);
        }
        watch_or_protect(p, &path);
    }
    if let Ok(worktrees) = std::fs::read_dir(git_dir.join("worktrees")) {
        for wt in worktrees.flatten() {
            if wt.file_type().is_ok_and(|t| t.is_dir()) {
                for name in WORKTREE_ISLANDS {
                    watch_or_protect(p, &wt.path().join(name));
                }
            }
        }
    }
    submodule_git_dirs(p, &git_dir.join("modules"), 0);
}

/// Submodules keep their git folders under `.git/modules/NAME` (nested
/// ones under `.../modules/NAME/modules/...`): any folder there holding a
/// `HEAD` is one.
fn submodule_git_dirs(p: &mut Policy, dir: &Path, depth: usize) {
    if depth > 16 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let path = entry.path();
        if path.join("HEAD").is_file() {
            protect_git_dir(p, &path);
        } else {
            submodule_git_dirs(p, &path, depth + 1);
        }
    }
}

/// Read-only when it exists (the link itself, never where a link leads),
/// watched when it does not.
fn watch_or_protect(p: &mut Policy, path: &Path) {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => {
            // A link cannot be a mount point: protect what it leads to when
            // that lies in a granted folder (tidy drops it otherwise).
            p.read_only.extend(real(path));
        }
        Ok(_) => p.read_only.push(path.to_path_buf()),
        Err(_) => p.absent.push(path.to_path_buf()),
    }
}

fn real(path: &Path) -> Option<PathBuf> {
    path.canonicalize().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mkdirs(root: &Path, dirs: &[&str]) {
        for d in dirs {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
    }

    #[test]
    fn repositories_at_any_depth_are_protected_and_pinned() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        let deep = "a/b/c/d/e";
        mkdirs(
            &ws,
            &[
                ".git/objects",
                ".git/modules/lib/hooks",
                &format!("{deep}/.git/refs"),
                ".git/worktrees/wt",
            ],
        );
        std::fs::write(ws.join(".git/config"), "").unwrap();
        std::fs::write(ws.join(".git/modules/lib/HEAD"), "ref: x").unwrap();
        std::fs::write(ws.join(".git/worktrees/wt/commondir"), "../..").unwrap();
        std::fs::create_dir_all(ws.join("wt")).unwrap();
        std::fs::write(ws.join("wt/.git"), "gitdir: /elsewhere").unwrap();
        let mut p = Policy::default();
        add_git_islands(&mut p, &ws);
        for pinned in [".git", &format!("{deep}/.git"), ".git/modules/lib"] {
            assert!(p.pinned.contains(&ws.join(pinned)), "{pinned}: {p:?}");
        }
        // The folders above a nested repository stay where they are too.
        for above in ["a", "a/b", "a/b/c", "a/b/c/d", deep, "wt"] {
            assert!(p.pinned.contains(&ws.join(above)), "{above}: {p:?}");
        }
        assert!(!p.pinned.contains(&ws), "the root is a mount already");
        for ro in [
            ".git/config",
            ".git/hooks",
            ".git/info",
            &format!("{deep}/.git/hooks"),
            ".git/modules/lib/hooks",
            ".git/worktrees/wt/commondir",
            "wt/.git",
        ] {
            assert!(p.read_only.contains(&ws.join(ro)), "{ro}: {p:?}");
        }
        for absent in [
            ".git/commondir",
            ".git/config.worktree",
            &format!("{deep}/.git/config"),
            ".git/worktrees/wt/gitdir",
        ] {
            assert!(p.absent.contains(&ws.join(absent)), "{absent}: {p:?}");
        }
        assert!(
            !p.read_only
                .iter()
                .chain(&p.pinned)
                .any(|x| x.starts_with("/elsewhere")),
            "a .git file is never followed: {p:?}"
        );
        assert!(p.write.is_empty() && p.read.is_empty(), "nothing widened");
    }

    #[test]
    fn a_scan_that_remembers_folders_still_sees_a_new_repository() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        mkdirs(&ws, &["a/b/c"]);
        let mut scan = RepoScan::default();
        let mut p = Policy::default();
        add_git_islands_cached(&mut p, &ws, &mut scan);
        assert!(p.pinned.is_empty());
        // Right after the scan, as a command would: the change must be seen.
        mkdirs(&ws, &["a/b/c/.git"]);
        let mut p = Policy::default();
        add_git_islands_cached(&mut p, &ws, &mut scan);
        assert!(p.pinned.contains(&ws.join("a/b/c/.git")), "{p:?}");
    }

    #[test]
    fn a_git_link_pins_the_folders_of_what_it_names() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        mkdirs(&ws, &["x/y/real.git/objects", "sub"]);
        std::fs::write(ws.join("x/y/real.git/HEAD"), "ref: x").unwrap();
        std::os::unix::fs::symlink("../x/y/real.git", ws.join("sub/.git")).unwrap();
        let mut p = Policy::default();
        add_git_islands(&mut p, &ws);
        for pinned in ["sub", "x", "x/y", "x/y/real.git"] {
            assert!(p.pinned.contains(&ws.join(pinned)), "{pinned}: {p:?}");
        }
    }

    #[test]
    fn a_separate_git_dir_inside_the_workspace_is_protected() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        mkdirs(&ws, &["x/store/objects", "x/store/refs", "sub", "sm"]);
        std::fs::write(ws.join("x/store/HEAD"), "ref: x").unwrap();
        std::fs::write(ws.join("x/store/config"), "").unwrap();
        std::fs::write(ws.join("sub/.git"), "gitdir: ../x/store\n").unwrap();
        // A submodule's pointer into the repository's own .git: protected
        // with it, not again.
        mkdirs(&ws, &[".git/modules/sm/objects"]);
        std::fs::write(ws.join("sm/.git"), "gitdir: ../.git/modules/sm\n").unwrap();
        let mut p = Policy::default();
        add_git_islands(&mut p, &ws);
        for pinned in ["sub", "x", "x/store"] {
            assert!(p.pinned.contains(&ws.join(pinned)), "{pinned}: {p:?}");
        }
        for ro in [
            "sub/.git",
            "x/store/config",
            "x/store/hooks",
            "x/store/info",
        ] {
            assert!(p.read_only.contains(&ws.join(ro)), "{ro}: {p:?}");
        }
        assert!(!p.pinned.contains(&ws.join(".git/modules/sm/hooks")));
    }

    #[test]
    fn a_bare_repository_is_protected_and_a_look_alike_folder_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        mkdirs(&ws, &["x/r.git/objects", "x/r.git/refs", "x/r.git/hooks"]);
        std::fs::write(ws.join("x/r.git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(ws.join("x/r.git/config"), "[core]\n\tbare = true\n").unwrap();
        mkdirs(&ws, &["data/objects", "data/refs"]);
        std::fs::write(ws.join("data/HEAD"), "a project's own file").unwrap();
        let mut p = Policy::default();
        add_git_islands(&mut p, &ws);
        assert_eq!(p.git_dirs, vec![ws.join("x/r.git")]);
        for pinned in ["x", "x/r.git"] {
            assert!(p.pinned.contains(&ws.join(pinned)), "{pinned}: {p:?}");
        }
        for ro in ["x/r.git/config", "x/r.git/hooks"] {
            assert!(p.read_only.contains(&ws.join(ro)), "{ro}: {p:?}");
        }
        assert!(!ws.join("data/hooks").exists(), "{p:?}");
    }

    #[test]
    fn a_fifo_named_git_is_neither_read_nor_followed() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        std::fs::create_dir(ws.join("sub")).unwrap();
        nix::unistd::mkfifo(&ws.join("sub/.git"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let mut p = Policy::default();
        add_git_islands(&mut p, &ws);
        assert!(p.pinned.is_empty() && p.read_only.is_empty(), "{p:?}");
    }
}
