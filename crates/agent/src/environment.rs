//! The environment block: where the agent runs (platform, today's date,
//! the git branch and a short status, the workspace's top-level listing),
//! so that even a small model starts from something true. It is computed
//! once per session and bounded: it sits in the cached prompt prefix.

use std::path::Path;
use whittle_protocol::quote_line;
use whittle_sandbox::QuietGit;

/// Most status lines shown.
const MAX_STATUS_LINES: usize = 15;
/// Most top-level entries listed.
const MAX_ENTRIES: usize = 60;
/// The block for `workspace`, dated `today` (`YYYY-MM-DD`). git runs
/// through `git`, which runs nothing the repository names.
pub fn environment_block(workspace: &Path, today: &str, git: &QuietGit) -> String {
    let mut out = String::from("<environment>\n");
    out.push_str(&format!(
        "Platform: {} {}\nToday's date: {today}\n",
        std::env::consts::OS,
        std::env::consts::ARCH
    ));
    out.push_str(&git_lines(workspace, git));
    out.push_str(&listing(workspace));
    out.push_str("</environment>\n");
    out
}

fn git_lines(workspace: &Path, git: &QuietGit) -> String {
    let Some(status) = git.run(
        workspace,
        &[
            "status",
            "--porcelain=v1",
            "--branch",
            "--untracked-files=normal",
            "--ignore-submodules=all",
        ],
    ) else {
        return "Git: not a git repository (or git is not available)\n".into();
    };
    let mut lines = status.lines();
    let branch = lines
        .next()
        .and_then(|l| l.strip_prefix("## "))
        .unwrap_or("unknown");
    let changes: Vec<&str> = lines.filter(|l| !l.trim().is_empty()).collect();
    let mut out = format!("Git branch: {}\n", quote_line(branch, 120));
    if changes.is_empty() {
        out.push_str("Git status: clean\n");
    } else {
        out.push_str(&format!("Git status: {} changed path(s)\n", changes.len()));
        for c in changes.iter().take(MAX_STATUS_LINES) {
            out.push_str(&format!("  {}\n", quote_line(c, 160)));
        }
        if changes.len() > MAX_STATUS_LINES {
            out.push_str(&format!(
                "  ... and {} more\n",
                changes.len() - MAX_STATUS_LINES
            ));
        }
    }
    out
}

fn listing(workspace: &Path) -> String {
    let Ok(entries) = std::fs::read_dir(workspace) else {
        return "Workspace: cannot be listed\n".into();
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            // git's folder and whittle's own are not the project's.
            if name == ".git" || name == ".whittle" {
                return None;
            }
            let dir = e.file_type().is_ok_and(|t| t.is_dir());
            Some(if dir { format!("{name}/") } else { name })
        })
        .collect();
    names.sort();
    let total = names.len();
    let shown: Vec<String> = names
        .into_iter()
        .take(MAX_ENTRIES)
        .map(|n| quote_line(&n, 80))
        .collect();
    let mut out = format!(
        "Workspace top level ({total} entries): {}",
        shown.join(", ")
    );
    if total > MAX_ENTRIES {
        out.push_str(&format!(", ... and {} more", total - MAX_ENTRIES));
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn the_block_names_platform_date_and_listing() {
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join("README.md"), "x").unwrap();
        std::fs::create_dir(ws.path().join("src")).unwrap();
        let block = environment_block(ws.path(), "2026-12-03", &QuietGit::new(None));
        assert!(block.starts_with("<environment>\nPlatform: "), "{block}");
        assert!(block.contains("Today's date: 2026-12-03\n"), "{block}");
        assert!(
            block.contains("Workspace top level (2 entries): README.md, src/\n"),
            "{block}"
        );
        assert!(block.ends_with("</environment>\n"));
    }

    #[test]
    fn git_branch_and_status_are_short() {
        let ws = tempfile::tempdir().unwrap();
        let git = |args: &[&str]| {
            Command::new("git")
                .arg("-C")
                .arg(ws.path())
                .args(args)
                .output()
                .map(|o| o.status.success())
                .unwrap_or(false)
        };
        if !git(&["init", "-q", "-b", "trunk"]) {
            println!("skipped git_branch_and_status_are_short: git is not available");
            return;
        }
        for i in 0..70 {
            std::fs::write(ws.path().join(format!("f{i:02}.txt")), "x").unwrap();
        }
        let block = environment_block(ws.path(), "2026-12-03", &QuietGit::new(None));
        assert!(
            block.contains("Git branch: No commits yet on trunk\n"),
            "{block}"
        );
        assert!(
            block.contains("Git status: 70 changed path(s)\n  ?? f00.txt\n"),
            "{block}"
        );
        assert!(block.contains("  ... and 55 more\n"), "{block}");
        assert!(
            block.contains(", ... and 10 more\n"),
            "70 entries, 60 shown: {block}"
        );
        assert!(block.chars().count() < 3_000, "{}", block.chars().count());
    }
}
