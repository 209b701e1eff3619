//! What changed between two trees, as counts (the session log's "3 files,
//! +10 -2") and as a unified diff the user can read before rewinding.

use crate::error::CheckpointError;
use crate::hash::ObjectId;
use crate::objects::Objects;
use crate::tree::{Entry, Kind, Tree};
use serde::{Deserialize, Serialize};
use similar::{ChangeTag, TextDiff};
use std::time::Duration;

/// Files changed and lines inserted and deleted, as `git diff --stat`
/// counts them: a binary file, a symlink's new target or a mode change
/// counts as a changed file with no lines.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiffStat {
    /// Files (and symlinks) added, removed or modified.
    pub files_changed: u64,
    /// Lines added in text files.
    pub insertions: u64,
    /// Lines removed from text files.
    pub deletions: u64,
}

/// One file or symlink that differs; `None` on a side where it is absent.
pub(crate) struct Change {
    pub path: Vec<u8>,
    pub old: Option<Entry>,
    pub new: Option<Entry>,
}

pub(crate) fn empty_tree_id() -> ObjectId {
    ObjectId::of(&Tree::default().encode())
}

pub(crate) fn load_tree(objects: &Objects, id: &ObjectId) -> Result<Tree, CheckpointError> {
    if *id == empty_tree_id() {
        return Ok(Tree::default());
    }
    Tree::decode(&objects.read(id)?, &objects.path(id))
}

fn join(prefix: &[u8], name: &[u8]) -> Vec<u8> {
    if prefix.is_empty() {
        name.to_vec()
    } else {
        [prefix, b"/", name].concat()
    }
}

/// The leaves (files, symlinks) that differ between two trees; equal
/// subtrees are skipped without being read.
pub(crate) fn changes(
    objects: &Objects,
    old: &ObjectId,
    new: &ObjectId,
) -> Result<Vec<Change>, CheckpointError> {
    let mut out = Vec::new();
    walk(objects, b"", Some(old), Some(new), &mut out)?;
    Ok(out)
}

fn walk(
    objects: &Objects,
    prefix: &[u8],
    old: Option<&ObjectId>,
    new: Option<&ObjectId>,
    out: &mut Vec<Change>,
) -> Result<(), CheckpointError> {
    if old == new {
        return Ok(());
    }
    let a = match old {
        Some(id) => load_tree(objects, id)?,
        None => Tree::default(),
    };
    let b = match new {
        Some(id) => load_tree(objects, id)?,
        None => Tree::default(),
    };
    let (mut i, mut j) = (0, 0);
    while i < a.entries.len() || j < b.entries.len() {
        let ea = a.entries.get(i);
        let eb = b.entries.get(j);
        let (ea, eb) = match (ea, eb) {
            (Some(x), Some(y)) if x.name < y.name => {
                i += 1;
                (Some(x), None)
            }
            (Some(x), Some(y)) if x.name > y.name => {
                j += 1;
                (None, Some(y))
            }
            (x, y) => {
                if x.is_some() {
                    i += 1;
                }
                if y.is_some() {
                    j += 1;
                }
                (x, y)
            }
        };
        let name = ea.or(eb).map(|e| e.name.as_slice()).unwrap_or_default();
        let path = join(prefix, name);
        let dir_a = ea.filter(|e| e.kind == Kind::Dir);
        let dir_b = eb.filter(|e| e.kind == Kind::Dir);
        let leaf_a = ea.filter(|e| e.kind != Kind::Dir);
        let leaf_b = eb.filter(|e| e.kind != Kind::Dir);
        if dir_a.is_some() || dir_b.is_some() {
            walk(
                objects,
                &path,
                dir_a.map(|e| &e.id),
                dir_b.map(|e| &e.id),
                out,
            )?;
        }
        let same = match (leaf_a, leaf_b) {
            (Some(x), Some(y)) => x.kind == y.kind && x.id == y.id && x.mode == y.mode,
            (None, None) => true,
            _ => false,
        };
        if !same {
            out.push(Change {
                path,
                old: leaf_a.cloned(),
                new: leaf_b.cloned(),
            });
        }
    }
    Ok(())
}

/// Text the diff can show by lines; anything else is "binary".
fn as_text(bytes: &[u8]) -> Option<&str> {
    if bytes[..bytes.len().min(8000)].contains(&0) {
        return None;
    }
    std::str::from_utf8(bytes).ok()
}

fn content(objects: &Objects, e: &Option<Entry>) -> Result<Vec<u8>, CheckpointError> {
    match e {
        Some(e) => objects.read(&e.id),
        None => Ok(Vec::new()),
    }
}

fn line_diff<'a>(old: &'a str, new: &'a str) -> TextDiff<'a, 'a, 'a, str> {
    TextDiff::configure()
        .timeout(Duration::from_secs(2))
        .diff_lines(old, new)
}

pub(crate) fn stat(objects: &Objects, changes: &[Change]) -> Result<DiffStat, CheckpointError> {
    let mut stat = DiffStat::default();
    for c in changes {
        stat.files_changed += 1;
        let kinds_text = [&c.old, &c.new]
            .iter()
            .all(|e| e.as_ref().is_none_or(|e| e.kind == Kind::File));
        if !kinds_text || c.old.as_ref().map(|e| e.id) == c.new.as_ref().map(|e| e.id) {
            continue;
        }
        let (a, b) = (content(objects, &c.old)?, content(objects, &c.new)?);
        let (Some(a), Some(b)) = (as_text(&a), as_text(&b)) else {
            continue;
        };
        for change in line_diff(a, b).iter_all_changes() {
            match change.tag() {
                ChangeTag::Insert => stat.insertions += 1,
                ChangeTag::Delete => stat.deletions += 1,
                ChangeTag::Equal => {}
            }
        }
    }
    Ok(stat)
}

fn mode_text(e: &Entry) -> String {
    match e.kind {
        Kind::Symlink => "120000".into(),
        _ => format!("100{:03o}", e.mode),
    }
}

pub(crate) fn unified(objects: &Objects, changes: &[Change]) -> Result<String, CheckpointError> {
    let mut out = String::new();
    for c in changes {
        let path = String::from_utf8_lossy(&c.path);
        out.push_str(&format!("diff a/{path} b/{path}\n"));
        match (&c.old, &c.new) {
            (None, Some(n)) => out.push_str(&format!("new file mode {}\n", mode_text(n))),
            (Some(o), None) => out.push_str(&format!("deleted file mode {}\n", mode_text(o))),
            (Some(o), Some(n)) if mode_text(o) != mode_text(n) => {
                out.push_str(&format!(
                    "old mode {}\nnew mode {}\n",
                    mode_text(o),
                    mode_text(n)
                ));
            }
            _ => {}
        }
        if c.old.as_ref().map(|e| e.id) == c.new.as_ref().map(|e| e.id) {
            continue;
        }
        let (a, b) = (content(objects, &c.old)?, content(objects, &c.new)?);
        let (Some(ta), Some(tb)) = (as_text(&a), as_text(&b)) else {
            out.push_str(&format!("Binary files a/{path} and b/{path} differ\n"));
            continue;
        };
        let from = if c.old.is_some() {
            format!("a/{path}")
        } else {
            "/dev/null".into()
        };
        let to = if c.new.is_some() {
            format!("b/{path}")
        } else {
            "/dev/null".into()
        };
        out.push_str(&format!("--- {from}\n+++ {to}\n"));
        let diff = line_diff(ta, tb);
        let hunks = diff.unified_diff().context_radius(3).to_string();
        out.push_str(&hunks);
        if !hunks.is_empty() && !hunks.ends_with('\n') {
            out.push('\n');
        }
    }
    Ok(out)
}
