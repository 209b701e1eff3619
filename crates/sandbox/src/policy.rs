//! The policy the helper enforces: which paths exist inside the sandbox,
//! which of them may change, and whether the network is there.
//!
//! Every path is absolute and resolved (no symlinks, no `..`) by the time a
//! policy is built, so the helper only reads it: it never consults the
//! environment of the command it is about to confine.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// What a confined command may see and change.
///
/// Nothing outside `read`, `write`, `tmp` and a few device files exists
/// inside the sandbox: the helper builds a fresh root holding only these
/// paths (bind mounts), then Landlock enforces the same lists a second time.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Policy {
    /// Files and folders the command may read and execute, never change.
    pub read: Vec<PathBuf>,
    /// Folders (or files) the command may read and change.
    pub write: Vec<PathBuf>,
    /// Paths inside `write` that stay read-only (settings and hooks whose
    /// change would run code outside the sandbox later).
    pub read_only: Vec<PathBuf>,
    /// Paths inside `write` bound onto themselves, still writable: a mount
    /// point cannot be renamed, removed or replaced, so a repository's
    /// `.git` stays the one whose hooks and config are protected.
    pub pinned: Vec<PathBuf>,
    /// Paths inside `read` or `write` that are replaced by an empty folder
    /// or file: secrets that happen to lie in a visible folder.
    pub hidden: Vec<PathBuf>,
    /// Package caches seen copy-on-write: commands read what is there and
    /// write to a layer of their own under `layers`, so nothing they write
    /// there is run later by a build outside the sandbox.
    pub copy_on_write: Vec<PathBuf>,
    /// Where the private upper layers of `copy_on_write` live (outside every
    /// folder the command sees); without it those caches are read-only.
    pub layers: Option<PathBuf>,
    /// Paths that did not exist when the policy was made and must not exist
    /// after a command (a new `.git/commondir`, `.vscode`): the kernel can
    /// only protect what exists, so what a command creates there is moved
    /// to the quarantine folder when it ends.
    pub absent: Vec<PathBuf>,
    /// Symbolic links recreated as they are outside (`/bin -> usr/bin`), so
    /// paths through them keep working: (link, what it points to).
    pub links: Vec<(PathBuf, PathBuf)>,
    /// The private temp folder: writable, seen at its own path and at `/tmp`.
    pub tmp: Option<PathBuf>,
    /// Whether the command shares the machine's network. When false it gets
    /// a network namespace of its own with nothing in it.
    pub network: bool,
    /// Folders whose git repositories are looked for again before each
    /// command (the workspace and configured writable roots), so that one a
    /// command created with `git init` is protected from the next command on.
    pub repo_roots: Vec<PathBuf>,
    /// Where [`Policy::absent`] paths a command created are moved.
    pub quarantine: Option<PathBuf>,
    /// Every git folder protected when the policy was made. One found after
    /// a command that is not among them was made by that command, which
    /// could write its config and hooks freely: whittle looks at them then.
    /// Whittle's own bookkeeping: the helper never needs it.
    #[serde(skip)]
    pub git_dirs: Vec<PathBuf>,
    /// Every `.git` file or link found when the policy was made, with the
    /// folder it named then (its real path). One that a command made, or
    /// pointed elsewhere (a link retargeted, a link on the file's `gitdir:`
    /// path), can name a git folder nothing protects.
    #[serde(skip)]
    pub git_pointers: Vec<(PathBuf, Option<PathBuf>)>,
}

impl Policy {
    /// Removes duplicates and what another root already grants: a read root
    /// inside a writable folder would otherwise become a read-only island, and
    /// hidden paths outside every visible root need no hiding.
    pub(crate) fn tidy(&mut self) {
        let p = self;
        let writable: Vec<PathBuf> = p.writable().map(Path::to_path_buf).collect();
        let inside = |path: &Path, roots: &[PathBuf]| roots.iter().any(|r| path.starts_with(r));
        p.write.sort();
        p.write.dedup();
        let write = p.write.clone();
        p.write = write
            .iter()
            .filter(|w| {
                !write.iter().any(|o| o != *w && w.starts_with(o))
                    && !p.tmp.as_deref().is_some_and(|t| w.starts_with(t))
            })
            .cloned()
            .collect();
        p.read.sort();
        p.read.dedup();
        let read = p.read.clone();
        p.read = read
            .iter()
            .filter(|r| !inside(r, &writable) && !read.iter().any(|o| o != *r && r.starts_with(o)))
            .cloned()
            .collect();
        p.read_only.sort();
        p.read_only.dedup();
        p.read_only.retain(|r| inside(r, &writable));
        p.git_pointers.sort();
        p.git_pointers.dedup();
        p.git_pointers.retain(|(r, _)| inside(r, &writable));
        for list in [&mut p.pinned, &mut p.absent, &mut p.git_dirs] {
            list.sort();
            list.dedup();
            list.retain(|r| inside(r, &writable));
        }
        p.copy_on_write.sort();
        p.copy_on_write.dedup();
        let visible: Vec<PathBuf> = writable
            .iter()
            .chain(&p.read)
            .chain(&p.copy_on_write)
            .cloned()
            .collect();
        p.hidden.sort();
        p.hidden.dedup();
        p.hidden.retain(|h| inside(h, &visible));
    }
}

impl Policy {
    /// Every path the command can write: `write` and the temp folder.
    pub fn writable(&self) -> impl Iterator<Item = &Path> {
        self.write
            .iter()
            .map(PathBuf::as_path)
            .chain(self.tmp.as_deref())
    }

    /// True when `path` (absolute, resolved) lies in a writable folder and
    /// not in one of its read-only islands.
    pub fn allows_write(&self, path: &Path) -> bool {
        self.writable().any(|root| path.starts_with(root))
            && !self.read_only.iter().any(|ro| path.starts_with(ro))
            && !self.hidden.iter().any(|h| path.starts_with(h))
    }

    /// True when `path` (absolute, resolved) can be read inside.
    pub fn allows_read(&self, path: &Path) -> bool {
        (self.allows_write(path)
            || self.read.iter().any(|root| path.starts_with(root))
            || self.read_only.iter().any(|ro| path.starts_with(ro)))
            && !self.hidden.iter().any(|h| path.starts_with(h))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn islands_and_hidden_paths_win_over_their_roots() {
        let p = Policy {
            read: vec!["/usr".into(), "/etc".into()],
            write: vec!["/ws".into()],
            read_only: vec!["/ws/.git/hooks".into()],
            hidden: vec!["/ws/.ssh".into(), "/etc/shadow".into()],
            tmp: Some("/tmp/whittle-1".into()),
            ..Policy::default()
        };
        assert!(p.allows_write(Path::new("/ws/src/main.rs")));
        assert!(p.allows_write(Path::new("/tmp/whittle-1/x")));
        assert!(!p.allows_write(Path::new("/ws/.git/hooks/pre-commit")));
        assert!(p.allows_read(Path::new("/ws/.git/hooks/pre-commit")));
        assert!(!p.allows_read(Path::new("/ws/.ssh/id_ed25519")));
        assert!(!p.allows_read(Path::new("/etc/shadow")));
        assert!(p.allows_read(Path::new("/etc/passwd")));
        assert!(!p.allows_write(Path::new("/usr/bin/ls")));
        assert!(!p.allows_read(Path::new("/root/.bashrc")));
        assert!(!p.allows_read(Path::new("/tmp/other")));
        assert!(
            !p.allows_read(Path::new("/wsx")),
            "a prefix is not a parent"
        );
    }

    #[test]
    fn a_policy_survives_its_json_form() {
        let p = Policy {
            read: vec!["/usr".into()],
            links: vec![("/bin".into(), "usr/bin".into())],
            network: true,
            ..Policy::default()
        };
        let text = serde_json::to_string(&p).unwrap();
        assert_eq!(serde_json::from_str::<Policy>(&text).unwrap(), p);
    }
}
