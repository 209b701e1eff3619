//! `.whittle`, where whittle writes sessions, saved outputs, transcripts,
//! checkpoints and logs, is whittle's own: it writes there as itself,
//! outside the sandbox, so a link in it would carry those writes anywhere.
//! A cloned repository can ship `.whittle` as a link, or links inside it
//! (git keeps symbolic links), and commands cannot make one (`.whittle` is
//! read-only to them). In a folder the person has not trusted, such a link
//! stops whittle at start-up.

use anyhow::bail;
use std::fs::FileType;
use std::path::Path;

/// What whittle writes in `.whittle`: folders and the files it appends to.
const WRITTEN: &[&str] = &[
    "sessions",
    "tool-results",
    "transcripts",
    "checkpoints",
    "quarantine",
    "mcp",
    "reports",
    "repl-history",
];

/// Of [`WRITTEN`], the folders whittle moves things into but never writes
/// through: what a command made where it may not (a link included) is
/// moved into `quarantine/` as it is, so only the folder itself is looked
/// at.
const MOVED_INTO: &[&str] = &["quarantine"];

/// Entries looked at in all, at most: a bound on the start-up time. A
/// folder with more is refused rather than passed unchecked (padding must
/// not hide a link).
const MAX_ENTRIES: usize = 500_000;

/// Fails, naming it, if `.whittle` in `workspace` is a link, or holds a
/// link or anything but plain files and folders where whittle writes (a
/// FIFO there would hang the start or the first write).
pub fn refuse_links(workspace: &Path) -> anyhow::Result<()> {
    refuse_links_within(workspace, MAX_ENTRIES)
}

/// [`refuse_links`], looking at `max_entries` inside the places at most.
fn refuse_links_within(workspace: &Path, max_entries: usize) -> anyhow::Result<()> {
    let root = workspace.join(".whittle");
    let Ok(meta) = std::fs::symlink_metadata(&root) else {
        return Ok(());
    };
    let kind = meta.file_type();
    refuse_unless_plain(workspace, &root, kind)?;
    if !kind.is_dir() {
        bail!(".whittle is not a folder: whittle keeps its sessions and saved outputs there");
    }
    // The places themselves first: nothing put beside them can hide them.
    let mut stack = Vec::new();
    for name in WRITTEN {
        let path = root.join(name);
        if let Ok(meta) = std::fs::symlink_metadata(&path) {
            refuse_unless_plain(workspace, &path, meta.file_type())?;
            if meta.is_dir() && !MOVED_INTO.contains(name) {
                stack.push(path);
            }
        }
    }
    let mut seen = 0usize;
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > max_entries {
                bail!(
                    ".whittle holds more than {max_entries} files, too many to check for links \
                     before whittle writes there; remove old sessions or outputs"
                );
            }
            // The listing's type, without a system call per entry.
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            refuse_unless_plain(workspace, &entry.path(), kind)?;
            if kind.is_dir() {
                stack.push(entry.path());
            }
        }
    }
    Ok(())
}

fn refuse_unless_plain(workspace: &Path, path: &Path, kind: FileType) -> anyhow::Result<()> {
    let shown = path.strip_prefix(workspace).unwrap_or(path).display();
    if kind.is_symlink() {
        bail!(
            "{shown} is a symbolic link: whittle writes its sessions and saved outputs in \
             .whittle as itself, outside the sandbox, and will not follow a link a repository \
             could have shipped; remove it"
        );
    }
    if !kind.is_dir() && !kind.is_file() {
        bail!(
            "{shown} is neither a file nor a folder (a pipe or a device): whittle writes there; \
             remove it"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn a_plain_state_folder_and_a_missing_one_pass() {
        let ws = tempfile::tempdir().unwrap();
        refuse_links(ws.path()).unwrap();
        let sessions = ws.path().join(".whittle/sessions");
        std::fs::create_dir_all(&sessions).unwrap();
        std::fs::write(sessions.join("s.jsonl"), "{}\n").unwrap();
        std::fs::create_dir_all(ws.path().join(".whittle/checkpoints/objects/ab")).unwrap();
        refuse_links(ws.path()).unwrap();
    }

    #[test]
    fn links_where_whittle_writes_are_refused_by_name() {
        let outside = tempfile::tempdir().unwrap();
        let cases = [
            ".whittle",
            ".whittle/tool-results",
            ".whittle/repl-history",
            ".whittle/transcripts/s1.jsonl",
            ".whittle/checkpoints/objects/ab",
        ];
        for case in cases {
            let ws = tempfile::tempdir().unwrap();
            let link = ws.path().join(case);
            std::fs::create_dir_all(link.parent().unwrap()).unwrap();
            symlink(outside.path(), &link).unwrap();
            let err = refuse_links(ws.path()).unwrap_err().to_string();
            assert!(
                err.starts_with(&format!("{case} is a symbolic link")),
                "{err}"
            );
            assert!(!err.contains('\n'), "{err}");
        }
    }

    #[test]
    fn a_pipe_where_whittle_writes_is_refused() {
        let ws = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(ws.path().join(".whittle")).unwrap();
        let fifo = ws.path().join(".whittle/repl-history");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let err = refuse_links(ws.path()).unwrap_err().to_string();
        assert!(err.starts_with(".whittle/repl-history is neither"), "{err}");
    }

    #[test]
    fn files_put_before_a_link_do_not_hide_it() {
        let outside = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let reports = ws.path().join(".whittle/reports");
        std::fs::create_dir_all(&reports).unwrap();
        for i in 0..100 {
            std::fs::write(reports.join(format!("r{i}.html")), "").unwrap();
        }
        // Past the bound, the folder is refused, not passed.
        symlink(outside.path(), reports.join("zz")).unwrap();
        let err = refuse_links_within(ws.path(), 50).unwrap_err().to_string();
        assert!(err.contains("more than 50 files"), "{err}");
        // The places themselves are checked before any walk.
        symlink(outside.path(), ws.path().join(".whittle/sessions")).unwrap();
        let err = refuse_links_within(ws.path(), 50).unwrap_err().to_string();
        assert!(
            err.starts_with(".whittle/sessions is a symbolic link"),
            "{err}"
        );
    }

    #[test]
    fn a_link_a_command_left_in_quarantine_does_not_stop_the_next_start() {
        let outside = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let quarantine = ws.path().join(".whittle/quarantine/1");
        std::fs::create_dir_all(&quarantine).unwrap();
        symlink(outside.path(), quarantine.join(".vscode")).unwrap();
        refuse_links(ws.path()).unwrap();
        // The folder itself is still checked: renames into it must stay inside.
        std::fs::remove_dir_all(ws.path().join(".whittle/quarantine")).unwrap();
        symlink(outside.path(), ws.path().join(".whittle/quarantine")).unwrap();
        assert!(refuse_links(ws.path()).is_err());
    }

    #[test]
    fn links_in_what_whittle_only_reads_are_left_alone() {
        // A project may link its skills or its config from elsewhere.
        let outside = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(ws.path().join(".whittle")).unwrap();
        symlink(outside.path(), ws.path().join(".whittle/skills")).unwrap();
        refuse_links(ws.path()).unwrap();
    }
}
