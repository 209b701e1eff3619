//! Repositories a command made. The kernel protects only the repositories
//! found when a command's policy was made (see the `islands` module); one
//! the command creates itself (`git init sub`, `git init --bare x.git`,
//! `--separate-git-dir`) is protected from the next command on, but the
//! command that made it could write anything into it first: a config
//! naming `core.fsmonitor` or `core.hooksPath`, a `hooks/pre-commit`. The
//! person's own git, outside the sandbox, would run them later.
//!
//! So when a command has ended, what in each new git folder can make git
//! run a program or read another folder is moved to the quarantine folder,
//! as what a command creates at a watched path is.

use crate::harmless_config::harmless_part;
use crate::policy::Policy;
use crate::quarantine::{Found, created_at, open_folder};
use nix::dir::Dir;
use nix::fcntl::{AtFlags, OFlag, openat};
use nix::sys::stat::{Mode, SFlag, fstatat};
use std::collections::HashSet;
use std::ffi::OsStr;
use std::fs::File;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The largest config read; a larger one is moved aside unread (git's own
/// are well under a kilobyte).
const MAX_CONFIG: u64 = 64 * 1024;

/// Most entries of a new `hooks/` or `worktrees/` folder looked at one by
/// one; past it the folder goes aside whole (`git init` writes a dozen).
/// Each one found is held open until it is moved.
const MAX_ENTRIES: usize = 64;

/// What `git worktree add` writes in `worktrees/NAME/commondir`: the
/// repository's own git folder. Any other names a folder whose config git
/// would read for that worktree.
const OWN_COMMONDIR: &[u8] = b"../..\n";

/// Files of a git folder that git never writes on `init` and that send it
/// to another folder's config or objects: moved aside whatever they hold.
const POINTERS: &[&str] = &["config.worktree", "commondir", "objects/info/alternates"];

/// What in the git folders of `now` that are not in `policy.git_dirs` (the
/// ones the command's policy protected) can make git run a program: a
/// config with a setting outside the harmless ones, every hook but git's
/// `.sample` files, files pointing git elsewhere. Nothing is followed
/// through a link; a link where a folder was is itself what goes aside.
pub(crate) fn risky_in_new_repos<'a>(
    policy: &'a Policy,
    now: &'a [PathBuf],
) -> impl Iterator<Item = Found> + 'a {
    let known: HashSet<&PathBuf> = policy.git_dirs.iter().collect();
    now.iter()
        .filter(move |dir| !known.contains(dir))
        .flat_map(|dir| risky_in_git_dir(policy, dir))
}

/// The `.git` files and links of `now` that are not in
/// `policy.git_pointers` with the folder they name now (a command made
/// them, or pointed them elsewhere: a known link retargeted, a link on a
/// known file's `gitdir:` path changed) and name anything but a git
/// folder the scan found and checked (`now.git_dirs`) or a linked worktree's
/// folder of one. git follows one from its folder to a git folder nothing
/// protects: the private temp folder, whose real path a command knows, or
/// a folder inside another's `.git` (`sub/.git/g`), where the scan never
/// looks for repositories, both hold whatever config the command wrote
/// there. One naming nothing that exists, or not of git's form, goes aside
/// too.
pub(crate) fn pointers_to_unchecked_folders<'a>(
    policy: &'a Policy,
    now: &'a Policy,
) -> impl Iterator<Item = Found> + 'a {
    let known: HashSet<&(PathBuf, Option<PathBuf>)> = policy.git_pointers.iter().collect();
    let checked: HashSet<PathBuf> = now
        .git_dirs
        .iter()
        .filter_map(|dir| std::fs::canonicalize(dir).ok())
        .collect();
    now.git_pointers
        .iter()
        .filter(move |pointer| !known.contains(pointer))
        .filter(move |(_, named)| {
            !named
                .as_deref()
                .is_some_and(|t| checked.contains(t) || is_own_worktree(&checked, t))
        })
        .filter_map(|(pointer, _)| created_at(policy, pointer))
}

/// Whether `folder` is `G/worktrees/NAME` of a git folder G among
/// `checked`, with the `commondir` git writes there (`../..`, G itself):
/// git then reads G's config and hooks. Without it git would take the
/// folder for a git folder of its own, whose config nothing checked.
fn is_own_worktree(checked: &HashSet<PathBuf>, folder: &Path) -> bool {
    folder
        .parent()
        .filter(|p| p.file_name() == Some(OsStr::new("worktrees")))
        .and_then(Path::parent)
        .is_some_and(|git_dir| checked.contains(git_dir))
        && crate::read_regular_file(&folder.join("commondir"), 64)
            .is_ok_and(|text| text == OWN_COMMONDIR)
}

/// [`risky_in_new_repos`] for one git folder.
fn risky_in_git_dir(policy: &Policy, git_dir: &Path) -> Vec<Found> {
    let mut risky = Vec::new();
    if let Some(mut found) = created_at(policy, &git_dir.join("config")) {
        // A link above it or in its place, another kind of file: aside as
        // it is. A config with a setting that runs something: aside, and
        // what in it runs nothing written back, so a clone keeps its
        // remotes and branches and the next command finds a config.
        let part = (found.path == git_dir.join("config"))
            .then(|| read_bounded(&found, MAX_CONFIG))
            .flatten()
            .and_then(|text| harmless_part(&text));
        match part {
            Some(part) if !part.dropped => {}
            Some(part) => {
                found.replacement = Some(part.text);
                risky.push(found);
            }
            None => risky.push(found),
        }
    }
    // Pointers to other folders: aside whatever they hold.
    risky.extend(
        POINTERS
            .iter()
            .filter_map(|name| created_at(policy, &git_dir.join(name))),
    );
    risky.extend(hooks_in(policy, &git_dir.join("hooks")));
    risky.extend(worktree_pointers_in(policy, &git_dir.join("worktrees")));
    risky
}

/// Of each linked worktree's folder (`worktrees/NAME`): a `commondir`
/// naming another folder than the repository's own, and any
/// `config.worktree`.
fn worktree_pointers_in(policy: &Policy, worktrees: &Path) -> Vec<Found> {
    let Some(names) = entries_of(policy, worktrees) else {
        return created_at(policy, worktrees).into_iter().collect();
    };
    let mut risky = Vec::new();
    for name in names {
        let wt = worktrees.join(OsStr::from_bytes(&name));
        let commondir = wt.join("commondir");
        if let Some(found) = created_at(policy, &commondir) {
            let own = found.path == commondir
                && read_bounded(&found, 64).is_some_and(|t| t == OWN_COMMONDIR);
            if !own {
                risky.push(found);
            }
        }
        risky.extend(created_at(policy, &wt.join("config.worktree")));
    }
    risky
}

/// The names in the folder at `path`, reached without following a link;
/// `None` when it is not a folder (a link, a file) or holds more than
/// [`MAX_ENTRIES`]; empty when nothing is there.
fn entries_of(policy: &Policy, path: &Path) -> Option<Vec<Vec<u8>>> {
    let Some(found) = created_at(policy, path) else {
        return Some(Vec::new());
    };
    if found.path != path || kind_of(&found) != Some(SFlag::S_IFDIR) {
        return None;
    }
    let folder = open_folder(Some(&found.folder), Path::new(&found.name))?;
    let mut listing = Dir::from_fd(folder).ok()?;
    let mut names = Vec::new();
    for entry in listing.iter().flatten() {
        let name = entry.file_name().to_bytes();
        if matches!(name, b"." | b"..") {
            continue;
        }
        if names.len() == MAX_ENTRIES {
            return None;
        }
        names.push(name.to_vec());
    }
    Some(names)
}

/// The bytes of `found` when it is a regular file of at most `limit`
/// bytes, opened from the folder the walk held without following a link
/// or blocking on a FIFO.
fn read_bounded(found: &Found, limit: u64) -> Option<Vec<u8>> {
    let flags = OFlag::O_RDONLY
        | OFlag::O_NOFOLLOW
        | OFlag::O_NONBLOCK
        | OFlag::O_NOCTTY
        | OFlag::O_CLOEXEC;
    let fd = openat(&found.folder, found.name.as_os_str(), flags, Mode::empty()).ok()?;
    let file = File::from(fd);
    if !file
        .metadata()
        .is_ok_and(|m| m.is_file() && m.len() <= limit)
    {
        return None;
    }
    let mut text = Vec::new();
    file.take(limit + 1).read_to_end(&mut text).ok()?;
    (text.len() as u64 <= limit).then_some(text)
}

/// What in the `hooks` folder git could run: every entry but a file named
/// `*.sample` (what `git init` copies there, which git never runs); `hooks`
/// itself when it is a link, not a folder, or holds too much to list.
fn hooks_in(policy: &Policy, hooks: &Path) -> Vec<Found> {
    let Some(names) = entries_of(policy, hooks) else {
        return created_at(policy, hooks).into_iter().collect();
    };
    names
        .into_iter()
        .filter_map(|name| created_at(policy, &hooks.join(OsStr::from_bytes(&name))))
        .filter(|found| !is_sample(found))
        .collect()
}

/// Whether `found` is a regular file named `*.sample`.
fn is_sample(found: &Found) -> bool {
    found.name.as_bytes().ends_with(b".sample") && kind_of(found) == Some(SFlag::S_IFREG)
}

/// What `found` is (folder, file, link...), looked at without following
/// a link.
fn kind_of(found: &Found) -> Option<SFlag> {
    let stat = fstatat(
        &found.folder,
        found.name.as_os_str(),
        AtFlags::AT_SYMLINK_NOFOLLOW,
    )
    .ok()?;
    Some(SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn git_init(dir: &Path, config: &str) {
        std::fs::create_dir_all(dir.join("hooks")).unwrap();
        std::fs::create_dir_all(dir.join("objects")).unwrap();
        std::fs::write(dir.join("config"), config).unwrap();
        std::fs::write(dir.join("hooks/pre-commit.sample"), "#!/bin/sh\n").unwrap();
    }

    #[test]
    fn what_runs_a_program_in_a_new_repository_is_found_and_the_rest_kept() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        let plain = "[core]\n\tbare = false\n";
        let known = ws.join(".git");
        git_init(&known, "[core]\n\tfsmonitor = person's own\n");
        let policy = Policy {
            write: vec![ws.clone()],
            git_dirs: vec![known.clone()],
            ..Policy::default()
        };
        // What the command made.
        let hostile = ws.join("sub/.git");
        git_init(&hostile, "[core]\n\tfsmonitor = /tmp/evil.sh\n");
        let hook = hostile.join("hooks/pre-commit");
        std::fs::write(&hook, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink("/bin/sh", hostile.join("hooks/post-checkout.sample")).unwrap();
        std::fs::write(hostile.join("commondir"), "/elsewhere\n").unwrap();
        for (wt, commondir) in [("own", "../..\n"), ("other", "../../../../x\n")] {
            std::fs::create_dir_all(hostile.join("worktrees").join(wt)).unwrap();
            std::fs::write(
                hostile.join("worktrees").join(wt).join("commondir"),
                commondir,
            )
            .unwrap();
        }
        let quiet = ws.join("quiet.git");
        git_init(&quiet, plain);
        let fifo = ws.join("fifo/.git");
        git_init(&fifo, plain);
        std::fs::remove_file(fifo.join("config")).unwrap();
        nix::unistd::mkfifo(&fifo.join("config"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let now = [known, hostile.clone(), quiet, fifo.clone()];
        let mut found: Vec<PathBuf> = risky_in_new_repos(&policy, &now).map(|f| f.path).collect();
        found.sort();
        let mut expected = vec![
            fifo.join("config"),
            hostile.join("commondir"),
            hostile.join("config"),
            hostile.join("hooks/post-checkout.sample"),
            hostile.join("worktrees/other/commondir"),
            hook,
        ];
        expected.sort();
        assert_eq!(found, expected);
    }

    #[test]
    fn a_link_in_place_of_a_new_repositorys_folder_is_found_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        let outside = dir.path().join("outside");
        git_init(&outside, "[core]\n\tfsmonitor = x\n");
        std::fs::create_dir_all(&ws).unwrap();
        std::os::unix::fs::symlink(&outside, ws.join("hooks-link")).unwrap();
        git_init(&ws.join("r.git"), "");
        std::fs::remove_dir_all(ws.join("r.git/hooks")).unwrap();
        std::os::unix::fs::symlink(outside.join("hooks"), ws.join("r.git/hooks")).unwrap();
        let policy = Policy {
            write: vec![ws.clone()],
            ..Policy::default()
        };
        let found: Vec<PathBuf> = risky_in_new_repos(&policy, &[ws.join("r.git")])
            .map(|f| f.path)
            .collect();
        assert_eq!(found, vec![ws.join("r.git/hooks")]);
    }

    #[test]
    fn a_new_git_pointer_to_anything_but_a_checked_git_folder_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let ws = base.join("ws");
        // The private temp folder: writable by commands, no repository root.
        let tmp = base.join("tmp");
        git_init(&tmp.join("g"), "[core]\n\tfsmonitor = /tmp/evil.sh\n");
        git_init(&ws.join("store"), "");
        // A git folder inside another's `.git`, where the scan never looks.
        git_init(
            &ws.join("store/hidden"),
            "[core]\n\tfsmonitor = /tmp/evil.sh\n",
        );
        for (wt, commondir) in [("own", Some("../..\n")), ("whole", None)] {
            let folder = ws.join("store/worktrees").join(wt);
            git_init(&folder, "[core]\n\tfsmonitor = /tmp/evil.sh\n");
            if let Some(text) = commondir {
                std::fs::write(folder.join("commondir"), text).unwrap();
            }
        }
        let write = |rel: &str, text: String| {
            let path = ws.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, text).unwrap();
            path
        };
        // Known before the command, though it names the temp folder.
        let known = write("old/.git", format!("gitdir: {}\n", tmp.join("g").display()));
        let into_tmp = write("a/.git", format!("gitdir: {}\n", tmp.join("g").display()));
        let inside = write("b/.git", "gitdir: ../store\n".into());
        let nowhere = write("c/.git", "gitdir: ../missing\n".into());
        let garbage = write("d/.git", "not a pointer\n".into());
        let unscanned = write("f/.git", "gitdir: ../store/hidden\n".into());
        let worktree = write("g/.git", "gitdir: ../store/worktrees/own\n".into());
        let whole = write("h/.git", "gitdir: ../store/worktrees/whole\n".into());
        std::fs::create_dir_all(ws.join("e")).unwrap();
        let link = ws.join("e/.git");
        std::os::unix::fs::symlink(tmp.join("g"), &link).unwrap();
        // A link known before the command, to the checked folder; the
        // command pointed it at the temp folder.
        std::fs::create_dir_all(ws.join("k")).unwrap();
        let retargeted = ws.join("k/.git");
        std::os::unix::fs::symlink(ws.join("store"), &retargeted).unwrap();
        let as_it_was = crate::islands::pointer_target(&retargeted);
        std::fs::remove_file(&retargeted).unwrap();
        std::os::unix::fs::symlink(tmp.join("g"), &retargeted).unwrap();
        let scanned = |paths: &[&PathBuf]| -> Vec<(PathBuf, Option<PathBuf>)> {
            paths
                .iter()
                .map(|p| ((*p).clone(), crate::islands::pointer_target(p)))
                .collect()
        };
        let policy = Policy {
            write: vec![ws.clone(), tmp.clone()],
            repo_roots: vec![ws.clone()],
            git_pointers: [scanned(&[&known]), vec![(retargeted.clone(), as_it_was)]].concat(),
            ..Policy::default()
        };
        let now = Policy {
            git_dirs: vec![ws.join("store")],
            git_pointers: scanned(&[
                &known,
                &into_tmp,
                &inside,
                &nowhere,
                &garbage,
                &link,
                &unscanned,
                &worktree,
                &whole,
                &retargeted,
            ]),
            ..Policy::default()
        };
        let mut found: Vec<PathBuf> = pointers_to_unchecked_folders(&policy, &now)
            .map(|f| f.path)
            .collect();
        found.sort();
        let mut expected = vec![
            into_tmp, nowhere, garbage, link, unscanned, whole, retargeted,
        ];
        expected.sort();
        assert_eq!(found, expected);
    }

    #[test]
    fn a_hooks_folder_too_full_to_list_goes_aside_whole() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        let repo = ws.join("r/.git");
        git_init(&repo, "");
        for i in 0..=MAX_ENTRIES {
            std::fs::write(repo.join(format!("hooks/{i}.sample")), "").unwrap();
        }
        let policy = Policy {
            write: vec![ws.clone()],
            ..Policy::default()
        };
        let found: Vec<PathBuf> = risky_in_new_repos(&policy, std::slice::from_ref(&repo))
            .map(|f| f.path)
            .collect();
        assert_eq!(found, vec![repo.join("hooks")]);
    }
}
