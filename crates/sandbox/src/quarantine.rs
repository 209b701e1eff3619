//! What a command created where the kernel could not stop it: paths that
//! did not exist when its policy was made ([`Policy::absent`]: a new
//! `.git/commondir` that would move git's config elsewhere, a `.vscode`
//! folder whose tasks an editor runs). When the command has ended, and with
//! it every process of its sandbox, they are moved to the workspace's
//! `.whittle/quarantine/`, which commands cannot write: nothing is deleted,
//! and nothing there is run by anyone.

use crate::policy::Policy;
use nix::fcntl::{AtFlags, OFlag, open, openat, renameat};
use nix::sys::stat::{Mode, SFlag, fstatat};
use std::collections::HashSet;
use std::ffi::OsString;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// One path moved aside.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Quarantined {
    /// Where the command created it.
    pub from: PathBuf,
    /// Where it is now; `None` when it could not be moved (then it is
    /// still where it was, and the reason is in `error`).
    pub to: Option<PathBuf>,
    /// Why it could not be moved.
    pub error: Option<String>,
    /// Whether whittle wrote back, in its place, the part of it that runs
    /// nothing (a new repository's config: its remotes and branches).
    pub rewritten: bool,
}

impl Quarantined {
    /// One line for the model and the person.
    pub fn describe(&self, workspace: &Path) -> String {
        let workspace = workspace
            .canonicalize()
            .unwrap_or_else(|_| workspace.to_path_buf());
        let shown = |p: &Path| {
            p.strip_prefix(&workspace)
                .map(|r| r.display().to_string())
                .unwrap_or_else(|_| p.display().to_string())
        };
        match (&self.to, &self.error) {
            (Some(to), _) if self.rewritten => format!(
                "[whittle moved {} to {}: settings in it would make git run code outside the sandbox; whittle wrote back the ones that run nothing]",
                shown(&self.from),
                shown(to)
            ),
            (Some(to), _) => format!(
                "[whittle moved {} to {}: a command may not create it, since it would make git or an editor run code outside the sandbox; write it with write_file or edit_file, which ask]",
                shown(&self.from),
                shown(to)
            ),
            (None, error) => format!(
                "[whittle could not move {} aside ({}): it would make git or an editor run code outside the sandbox; remove it before running git here]",
                shown(&self.from),
                error.as_deref().unwrap_or("unknown error")
            ),
        }
    }
}

/// What a command made at the watched `path`, found without following a
/// link: the path itself, or the highest part of it that is now a link;
/// `None` when nothing is there.
///
/// whittle moves it as itself, outside the sandbox, so a link a command put
/// in the middle of the path (`sub/.git` → `~/.kube` for a watched
/// `sub/.git/config`) must not be followed: the existence check and the move
/// would reach through it and carry off a file outside the workspace. Every
/// part of a watched path below its writable folder was a real folder when
/// the policy was made (links are never walked into), so a link there now is
/// the command's, and it is what goes aside.
///
/// The walk holds each folder open (no link followed) and the move is made
/// from the last one's handle: a process of the command still alive after
/// a timeout (its sandbox is torn down just after) cannot swap a part of the
/// path between the look and the move.
pub(crate) fn created_at(policy: &Policy, path: &Path) -> Option<Found> {
    let root = policy
        .write
        .iter()
        .filter(|root| path.starts_with(root))
        .max_by_key(|root| root.as_os_str().len())?;
    let below = path.strip_prefix(root).ok()?;
    let mut at = root.clone();
    let mut folder = open_folder(None, root)?;
    let mut parts = below.components().peekable();
    while let Some(part) = parts.next() {
        let Component::Normal(name) = part else {
            return None;
        };
        at.push(name);
        let stat = fstatat(&folder, name, AtFlags::AT_SYMLINK_NOFOLLOW).ok()?;
        let kind = SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT;
        if parts.peek().is_none() || kind == SFlag::S_IFLNK {
            return Some(Found {
                folder,
                name: name.to_os_string(),
                path: at,
                replacement: None,
            });
        }
        if kind != SFlag::S_IFDIR {
            return None;
        }
        folder = open_folder(Some(&folder), Path::new(name))?;
    }
    None
}

/// A folder opened without following a link at its name, relative to
/// `parent` when given.
pub(crate) fn open_folder(parent: Option<&OwnedFd>, path: &Path) -> Option<OwnedFd> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    match parent {
        Some(parent) => openat(parent, path, flags, Mode::empty()).ok(),
        None => open(path, flags, Mode::empty()).ok(),
    }
}

/// Moves `found` to `to` (in a folder made if needed), from the folder
/// handle the walk held.
fn move_aside(found: &Found, to: &Path) -> std::io::Result<()> {
    let (Some(dir), Some(to_name)) = (to.parent(), to.file_name()) else {
        return Err(std::io::Error::other("no quarantine name"));
    };
    std::fs::create_dir_all(dir)?;
    let into = open_folder(None, dir)
        .ok_or_else(|| std::io::Error::other("cannot open the quarantine folder"))?;
    renameat(&found.folder, found.name.as_os_str(), &into, to_name).map_err(std::io::Error::from)
}

/// What a command made at a watched path: `name` in the open `folder`,
/// at `path`.
pub(crate) struct Found {
    pub(crate) folder: OwnedFd,
    pub(crate) name: OsString,
    pub(crate) path: PathBuf,
    /// What to write in its place once it is moved, if anything.
    pub(crate) replacement: Option<String>,
}

/// Moves what a command created at `policy.absent` paths to
/// `policy.quarantine`. Call it after the command and its sandbox ended.
pub fn quarantine_new_paths(policy: &Policy) -> Vec<Quarantined> {
    move_to_quarantine(policy, created_at_absent_paths(policy))
}

/// What a command created at `policy.absent` paths.
pub(crate) fn created_at_absent_paths(policy: &Policy) -> impl Iterator<Item = Found> + '_ {
    policy.absent.iter().filter_map(|p| created_at(policy, p))
}

/// Moves each of `created` to `policy.quarantine`, and says where. Each is
/// moved as it comes, so only its folder is held open (a command could
/// make thousands). One met twice (two watched paths under one link name
/// the link twice) goes aside once.
pub(crate) fn move_to_quarantine(
    policy: &Policy,
    created: impl IntoIterator<Item = Found>,
) -> Vec<Quarantined> {
    let stamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let batch = format!("{stamp}-{}", std::process::id());
    let mut seen: HashSet<PathBuf> = HashSet::new();
    let mut moved = Vec::new();
    for found in created {
        if seen.insert(found.path.clone()) {
            let to = policy
                .quarantine
                .as_deref()
                .map(|base| quarantine_name(base, &batch, moved.len(), &found.path));
            moved.push(move_one(found, to));
        }
    }
    moved
}

/// Where the `index`th path of a batch goes: the workspace-relative path
/// in one name, under `base/batch`.
fn quarantine_name(base: &Path, batch: &str, index: usize, from: &Path) -> PathBuf {
    // The quarantine folder is WORKSPACE/.whittle/quarantine.
    let workspace = base.parent().and_then(Path::parent);
    let rel = workspace
        .and_then(|w| from.strip_prefix(w).ok())
        .unwrap_or(from);
    let name = rel.to_string_lossy().replace('/', "__");
    base.join(batch).join(format!("{index}-{name}"))
}

/// Moves `found` to `to`, and says how it went; without a quarantine
/// folder it stays.
fn move_one(found: Found, to: Option<PathBuf>) -> Quarantined {
    let Some(to) = to else {
        return Quarantined {
            from: found.path,
            to: None,
            error: Some("no quarantine folder".into()),
            rewritten: false,
        };
    };
    match move_aside(&found, &to) {
        Ok(()) => Quarantined {
            rewritten: found
                .replacement
                .as_deref()
                .is_some_and(|text| write_new(&found, text).is_ok()),
            from: found.path,
            to: Some(to),
            error: None,
        },
        Err(e) => Quarantined {
            from: found.path,
            to: None,
            error: Some(e.to_string()),
            rewritten: false,
        },
    }
}

/// Writes `text` as a new file where `found` was, from the folder handle
/// the walk held, following no link and replacing nothing: anything there
/// now is the command's, and stays.
fn write_new(found: &Found, text: &str) -> std::io::Result<()> {
    let flags =
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let fd = openat(
        &found.folder,
        found.name.as_os_str(),
        flags,
        Mode::from_bits_truncate(0o644),
    )?;
    std::fs::File::from(fd).write_all(text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_paths_are_moved_and_absent_ones_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        std::fs::create_dir_all(ws.join(".git")).unwrap();
        std::fs::create_dir_all(ws.join(".vscode")).unwrap();
        std::fs::write(ws.join(".vscode/tasks.json"), "{}").unwrap();
        std::fs::write(ws.join(".git/commondir"), "../evil").unwrap();
        let policy = Policy {
            absent: vec![
                ws.join(".vscode"),
                ws.join(".git/commondir"),
                ws.join(".idea"),
            ],
            quarantine: Some(ws.join(".whittle/quarantine")),
            write: vec![ws.to_path_buf()],
            ..Policy::default()
        };
        let moved = quarantine_new_paths(&policy);
        assert_eq!(moved.len(), 2, "{moved:?}");
        assert!(!ws.join(".vscode").exists() && !ws.join(".git/commondir").exists());
        for m in &moved {
            let to = m.to.as_ref().unwrap();
            assert!(to.starts_with(ws.join(".whittle/quarantine")), "{to:?}");
            assert!(to.exists());
            assert!(
                m.describe(ws).starts_with("[whittle moved "),
                "{}",
                m.describe(ws)
            );
        }
        assert!(quarantine_new_paths(&policy).is_empty(), "nothing new");
    }

    #[test]
    fn a_link_swapped_into_a_watched_path_is_moved_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        let outside = dir.path().join("kube");
        std::fs::create_dir_all(ws.join("sub/.git")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("config"), "token").unwrap();
        let policy = Policy {
            absent: vec![ws.join("sub/.git/config"), ws.join("sub/.git/commondir")],
            quarantine: Some(ws.join(".whittle/quarantine")),
            write: vec![ws.clone()],
            ..Policy::default()
        };
        // What a command can do: move the folder away, put a link to a
        // folder outside in its place.
        std::fs::rename(ws.join("sub"), ws.join("sub2")).unwrap();
        std::fs::create_dir(ws.join("sub")).unwrap();
        std::os::unix::fs::symlink(&outside, ws.join("sub/.git")).unwrap();
        let moved = quarantine_new_paths(&policy);
        assert_eq!(
            std::fs::read_to_string(outside.join("config")).unwrap(),
            "token",
            "{moved:?}"
        );
        // The link goes aside (once), as a link.
        assert_eq!(moved.len(), 1, "{moved:?}");
        assert_eq!(moved[0].from, ws.join("sub/.git"));
        let to = moved[0].to.as_ref().unwrap();
        assert!(
            std::fs::symlink_metadata(to)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert!(std::fs::symlink_metadata(ws.join("sub/.git")).is_err());
        // A folder swapped for a link between the look and the move: the
        // move is made from the folder the look held, never through the link.
        std::fs::create_dir(ws.join("sub/.git")).unwrap();
        std::fs::write(ws.join("sub/.git/config"), "the command's").unwrap();
        let found = created_at(&policy, &ws.join("sub/.git/config")).unwrap();
        std::fs::rename(ws.join("sub"), ws.join("sub3")).unwrap();
        std::fs::create_dir(ws.join("sub")).unwrap();
        std::os::unix::fs::symlink(&outside, ws.join("sub/.git")).unwrap();
        let to = ws.join(".whittle/quarantine/raced/config");
        move_aside(&found, &to).unwrap();
        assert_eq!(std::fs::read_to_string(&to).unwrap(), "the command's");
        assert_eq!(
            std::fs::read_to_string(outside.join("config")).unwrap(),
            "token"
        );
        std::fs::remove_file(ws.join("sub/.git")).unwrap();
        // A file where a folder was watched: nothing to move under it.
        std::fs::write(ws.join("sub/.git"), "gitdir: /elsewhere").unwrap();
        let moved = quarantine_new_paths(&policy);
        assert!(moved.is_empty(), "{moved:?}");
    }
}
