//! Path resolution shared by the file tools and the permission policy:
//! where a model-given path points, and whether that is inside the workspace.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fs;
use std::path::{Component, Path, PathBuf};

/// How many symlinks one resolution may follow before it gives up (as Linux does).
const MAX_SYMLINK_HOPS: usize = 40;

/// Joins a model-given path onto the workspace unless it is absolute;
/// `~` and `~/...` mean the home directory. The result is lexically tidied
/// (`.` removed) but symlinks and `..` are left for [`real_path`].
pub fn resolve_input(workspace: &Path, path: &str) -> PathBuf {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let expanded = match (path, &home) {
        ("~", Some(h)) => h.clone(),
        (p, Some(h)) if p.starts_with("~/") => h.join(&p[2..]),
        (p, _) => PathBuf::from(p),
    };
    let joined = if expanded.is_absolute() {
        expanded
    } else {
        workspace.join(expanded)
    };
    joined
        .components()
        .filter(|c| *c != Component::CurDir)
        .collect()
}

/// Where `path` really leads: `..` and every symlink resolved, including
/// dangling ones, and the part that does not exist yet judged by its
/// nearest existing ancestor. `None` for a symlink loop.
///
/// Unlike `fs::canonicalize` this works for files that are about to be
/// created, which is what a permission check needs.
pub fn real_path(path: &Path) -> Option<PathBuf> {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().ok()?.join(path)
    };
    let mut pending: VecDeque<OsString> = VecDeque::new();
    push_components(&mut pending, &absolute, false);
    let mut resolved = PathBuf::from("/");
    let mut hops = 0usize;
    while let Some(part) = pending.pop_front() {
        if part == "." {
            continue;
        }
        if part == ".." {
            resolved.pop();
            continue;
        }
        let candidate = resolved.join(&part);
        match fs::symlink_metadata(&candidate) {
            Ok(meta) if meta.file_type().is_symlink() => {
                hops += 1;
                if hops > MAX_SYMLINK_HOPS {
                    return None;
                }
                let target = fs::read_link(&candidate).ok()?;
                if target.is_absolute() {
                    resolved = PathBuf::from("/");
                }
                push_components(&mut pending, &target, true);
            }
            _ => resolved = candidate,
        }
    }
    Some(resolved)
}

/// Queues the components of `path` (at the front when `front`, keeping order).
fn push_components(pending: &mut VecDeque<OsString>, path: &Path, front: bool) {
    let parts: Vec<OsString> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => None,
        })
        .collect();
    if front {
        for p in parts.into_iter().rev() {
            pending.push_front(p);
        }
    } else {
        pending.extend(parts);
    }
}

/// True when `path` (already joined onto the workspace if relative) really
/// lies inside `workspace`, after resolving `..` and symlinks on both.
pub fn is_inside(workspace: &Path, path: &Path) -> bool {
    match (real_path(workspace), real_path(path)) {
        (Some(ws), Some(p)) => p.starts_with(ws),
        _ => false,
    }
}

/// Shows a path relative to the workspace when it lies (lexically) inside.
pub fn display_path(workspace: &Path, path: &Path) -> String {
    match path.strip_prefix(workspace) {
        Ok(rel) if rel.as_os_str().is_empty() => ".".to_owned(),
        Ok(rel) => rel.display().to_string(),
        Err(_) => path.display().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn dotdot_and_symlinks_are_resolved() {
        let dir = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(dir.path()).unwrap();
        let ws = root.join("ws");
        fs::create_dir_all(ws.join("src")).unwrap();
        fs::create_dir_all(root.join("outside")).unwrap();
        symlink(root.join("outside"), ws.join("escape")).unwrap();
        symlink("/definitely/not/here", ws.join("dangling")).unwrap();
        symlink("src", ws.join("rel")).unwrap();
        symlink(ws.join("loop"), ws.join("loop")).unwrap();

        assert!(is_inside(&ws, &ws.join("src/new/file.rs")));
        assert!(is_inside(&ws, &ws.join("rel/x")));
        assert!(is_inside(&ws, &ws));
        assert!(!is_inside(&ws, &ws.join("../outside/x")));
        assert!(!is_inside(&ws, &ws.join("src/../../outside")));
        assert!(!is_inside(&ws, &ws.join("escape/new.txt")));
        assert!(!is_inside(&ws, &ws.join("dangling")));
        assert!(!is_inside(&ws, &ws.join("loop/x")));
        assert!(!is_inside(&ws, Path::new("/etc/passwd")));
        assert_eq!(
            real_path(&ws.join("rel/../src/a")).unwrap(),
            ws.join("src/a")
        );
    }

    #[test]
    fn input_paths_join_the_workspace() {
        let ws = Path::new("/w");
        assert_eq!(resolve_input(ws, "a/./b"), PathBuf::from("/w/a/b"));
        assert_eq!(resolve_input(ws, "/etc/x"), PathBuf::from("/etc/x"));
        assert_eq!(display_path(ws, Path::new("/w/a/b")), "a/b");
        assert_eq!(display_path(ws, Path::new("/x")), "/x");
    }
}
