//! The environment block: where the agent runs (platform, today's date,
//! the git branch and a short status, the workspace's top-level listing),
//! so that even a small model starts from something true. It is computed
//! once per session and bounded: it sits in the cached prompt prefix.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use whittle_context::quote_line;

/// Most status lines shown.
const MAX_STATUS_LINES: usize = 15;
/// Most top-level entries listed.
const MAX_ENTRIES: usize = 60;
/// How long git may take before it is left out.
const GIT_TIMEOUT: Duration = Duration::from_secs(2);

/// The block for `workspace`, dated `today` (`YYYY-MM-DD`).
pub fn environment_block(workspace: &Path, today: &str) -> String {
    let mut out = String::from("<environment>\n");
    out.push_str(&format!(
        "Platform: {} {}\nToday's date: {today}\n",
        std::env::consts::OS,
        std::env::consts::ARCH
    ));
    out.push_str(&git_lines(workspace));
    out.push_str(&listing(workspace));
    out.push_str("</environment>\n");
    out
}

fn git_lines(workspace: &Path) -> String {
    let Some(status) = run_git(
        workspace,
        &[
            "status",
            "--porcelain=v1",
            "--branch",
            "--untracked-files=normal",
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
            if name == ".git" {
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

/// Runs git in `dir`; its stdout, or `None` when it fails or takes too long
/// (then it is killed).
fn run_git(dir: &Path, args: &[&str]) -> Option<String> {
    let mut child = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_OPTIONAL_LOCKS", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut stdout = child.stdout.take()?;
    // Read on a thread, so a large status cannot fill the pipe and stall git.
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let deadline = Instant::now() + GIT_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let text = reader.join().ok()?;
    status.filter(|s| s.success()).map(|_| text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_block_names_platform_date_and_listing() {
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join("README.md"), "x").unwrap();
        std::fs::create_dir(ws.path().join("src")).unwrap();
        let block = environment_block(ws.path(), "2026-12-03");
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
        let block = environment_block(ws.path(), "2026-12-03");
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
