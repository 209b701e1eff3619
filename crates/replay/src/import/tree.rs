//! Finding trace files in a folder tree, in a deterministic order.

use super::{Conversation, ImportError, import_path};
use std::fs;
use std::path::{Path, PathBuf};

/// The outcome of importing one file of a tree.
#[derive(Debug)]
pub struct ImportedFile {
    /// The file (or a folder that could not be read).
    pub path: PathBuf,
    /// Its conversations, or why there are none.
    pub result: Result<Vec<Conversation>, ImportError>,
}

/// Imports every trace file under `root` (or `root` itself, if it is a file);
/// see [`trace_files`] for which files and in what order. One bad file does
/// not stop the others.
pub fn import_tree(root: &Path) -> Vec<ImportedFile> {
    trace_files(root)
        .into_iter()
        .map(|found| match found {
            Ok(path) => ImportedFile {
                result: import_path(&path),
                path,
            },
            Err(e) => ImportedFile {
                path: e.path().to_path_buf(),
                result: Err(e),
            },
        })
        .collect()
}

/// The files under `root` that may hold traces: names ending in `.jsonl` or
/// `.json` (any case), found recursively, including Claude Code's
/// `<session>/subagents/agent-*.jsonl`. Within a folder, files come first,
/// then subfolders, each sorted by name, so that a session precedes its
/// subagents and the order never depends on the file system. Symbolic links
/// to folders are not followed (no cycles). `root` itself is returned when it
/// is a file, whatever its name. Unreadable folders are reported in place.
pub fn trace_files(root: &Path) -> Vec<Result<PathBuf, ImportError>> {
    let mut found = Vec::new();
    match fs::metadata(root) {
        Ok(meta) if meta.is_dir() => walk(root, &mut found),
        Ok(_) => found.push(Ok(root.to_path_buf())),
        Err(source) => found.push(Err(ImportError::Io {
            path: root.to_path_buf(),
            source,
        })),
    }
    found
}

fn walk(dir: &Path, found: &mut Vec<Result<PathBuf, ImportError>>) {
    let io_error = |source| ImportError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(source) => {
            found.push(Err(io_error(source)));
            return;
        }
    };
    let mut files = Vec::new();
    let mut dirs = Vec::new();
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            Err(source) => {
                found.push(Err(io_error(source)));
                continue;
            }
        };
        let path = entry.path();
        match entry.file_type() {
            Ok(kind) if kind.is_dir() => dirs.push(path),
            Ok(kind) if has_trace_extension(&path) && (kind.is_file() || path.is_file()) => {
                files.push(path);
            }
            Ok(_) => {}
            Err(source) => found.push(Err(ImportError::Io { path, source })),
        }
    }
    files.sort();
    dirs.sort();
    found.extend(files.into_iter().map(Ok));
    for sub in dirs {
        walk(&sub, found);
    }
}

fn has_trace_extension(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("jsonl") || e.eq_ignore_ascii_case("json"))
}
