//! A full recursive listing of a tree (type, mode, content, link target),
//! to say "exactly the same" about two states.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};
use whittle_checkpoint::{Options, Store};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    Dir(u32),
    File(u32, Vec<u8>),
    Link(PathBuf),
    Other,
}

/// Everything under `root` but `.whittle` at the root and, unless
/// `with_git`, every `.git`.
pub fn listing(root: &Path, with_git: bool) -> BTreeMap<PathBuf, Node> {
    let mut out = BTreeMap::new();
    walk(root, Path::new(""), with_git, &mut out);
    out
}

fn walk(abs: &Path, rel: &Path, with_git: bool, out: &mut BTreeMap<PathBuf, Node>) {
    let mut entries: Vec<_> = fs::read_dir(abs).unwrap().map(|e| e.unwrap()).collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name();
        if (!with_git && name == ".git") || (rel.as_os_str().is_empty() && name == ".whittle") {
            continue;
        }
        let path = e.path();
        let r = rel.join(&name);
        let meta = fs::symlink_metadata(&path).unwrap();
        let mode = meta.permissions().mode() & 0o777;
        let ft = meta.file_type();
        if ft.is_symlink() {
            out.insert(r, Node::Link(fs::read_link(&path).unwrap()));
        } else if ft.is_dir() {
            out.insert(r.clone(), Node::Dir(mode));
            walk(&path, &r, with_git, out);
        } else if ft.is_file() {
            out.insert(r, Node::File(mode, fs::read(&path).unwrap()));
        } else {
            out.insert(r, Node::Other);
        }
    }
}

/// Every file under `.git` (and its kind and mode), to check it stays
/// byte-identical.
pub fn git_state(root: &Path) -> BTreeMap<PathBuf, Node> {
    listing(&root.join(".git"), true)
}

pub fn sh(dir: &Path, script: &str) {
    let out = Command::new("sh")
        .args(["-c", script])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Sets every file's mtime an hour back, as an old checkout's: the stat
/// cache trusts only entries older than its racy window.
pub fn age(root: &Path) {
    let old = SystemTime::now() - Duration::from_secs(3600);
    for (rel, node) in listing(root, false) {
        if let Node::File(..) = node {
            fs::File::open(root.join(rel))
                .unwrap()
                .set_modified(old)
                .unwrap();
        }
    }
}

pub fn write(root: &Path, rel: &str, content: &str) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, content).unwrap();
}

pub fn store(ws: &Path) -> Store {
    Store::open(ws, &ws.join(".whittle/checkpoints"), Options::default()).unwrap()
}
