//! `.whittle`, where whittle writes sessions, saved outputs, transcripts,
//! checkpoints and logs, is whittle's own: it writes there as itself,
//! outside the sandbox, so a link in it would carry those writes anywhere.
//! A cloned repository can ship `.whittle` as a link, or links inside it
//! (git keeps symbolic links), and commands cannot make one (`.whittle` is
//! read-only to them). In a folder the person has not trusted, such a link
//! stops whittle at start-up.

use anyhow::bail;
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

/// Entries looked at in all, at most: a bound on the start-up time in a
/// folder with a long history. A link past it is not found.
const MAX_ENTRIES: usize = 200_000;

/// Fails, naming the link, if `.whittle` in `workspace` is a link or holds
/// one where whittle writes.
pub fn refuse_links(workspace: &Path) -> anyhow::Result<()> {
    let root = workspace.join(".whittle");
    let Ok(meta) = std::fs::symlink_metadata(&root) else {
        return Ok(());
    };
    let mut stack = Vec::new();
    if meta.file_type().is_symlink() {
        return refuse(workspace, &root);
    }
    if meta.is_dir() {
        stack.extend(WRITTEN.iter().map(|name| root.join(name)));
    }
    let mut seen = 0usize;
    while let Some(path) = stack.pop() {
        seen += 1;
        if seen > MAX_ENTRIES {
            break;
        }
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.file_type().is_symlink() {
            return refuse(workspace, &path);
        }
        if meta.is_dir()
            && let Ok(entries) = std::fs::read_dir(&path)
        {
            for entry in entries.flatten() {
                // The listing's type, without a system call per entry.
                match entry.file_type() {
                    Ok(t) if t.is_symlink() => return refuse(workspace, &entry.path()),
                    Ok(t) if t.is_dir() => stack.push(entry.path()),
                    _ => seen += 1,
                }
            }
        }
    }
    Ok(())
}

fn refuse(workspace: &Path, link: &Path) -> anyhow::Result<()> {
    let shown = link.strip_prefix(workspace).unwrap_or(link);
    bail!(
        "{} is a symbolic link: whittle writes its sessions and saved outputs in .whittle, \
         outside the sandbox, and will not follow a link a repository could have shipped \
         (remove it, or trust this folder with --trust-project)",
        shown.display()
    )
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
    fn links_in_what_whittle_only_reads_are_left_alone() {
        // A project may link its skills or its config from elsewhere.
        let outside = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(ws.path().join(".whittle")).unwrap();
        symlink(outside.path(), ws.path().join(".whittle/skills")).unwrap();
        refuse_links(ws.path()).unwrap();
    }
}
