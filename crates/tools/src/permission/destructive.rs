//! Commands that deserve a question before they run: deleting files,
//! recursive permission changes, stopping processes, raw writes, git
//! commands that lose work or history, deleting containers, publishing
//! packages, piping data into a shell.

use super::segment::{Segment, has_recursive_flag, operands};
use super::unwrap::SHELLS;

/// Why a command deserves a question before it runs, if it does.
pub(crate) fn destructive_reason(seg: &Segment) -> Option<String> {
    let name = seg.name();
    let args = seg.argv.get(1..).unwrap_or_default();
    let has = |x: &str| args.iter().any(|a| a == x);
    match name {
        "rm" | "rmdir" | "unlink" | "shred" | "truncate" => {
            Some(format!("`{}` deletes or destroys files", seg.inner_text()))
        }
        "chmod" | "chown" | "chgrp" if has_recursive_flag(args) => Some(format!(
            "`{}` changes permissions recursively",
            seg.inner_text()
        )),
        "kill" | "pkill" | "killall" => Some(format!("`{}` stops processes", seg.inner_text())),
        "dd" => Some(format!("`{}` writes raw data", seg.inner_text())),
        "git" => git_destructive(args).map(|why| format!("`{}` {why}", seg.inner_text())),
        "find" if has("-delete") => Some(format!("`{}` deletes files", seg.inner_text())),
        "docker" | "podman" => {
            let sub: Vec<&str> = operands(args).into_iter().take(2).collect();
            let risky = matches!(sub.first(), Some(&("rm" | "rmi")))
                || sub.get(1).is_some_and(|s| matches!(*s, "prune" | "rm"));
            risky.then(|| format!("`{}` deletes containers or data", seg.inner_text()))
        }
        "cargo" | "npm" | "yarn" | "pnpm" | "twine" | "gem" => {
            let sub = operands(args).first().copied();
            matches!(
                sub,
                Some("publish" | "yank" | "unpublish" | "push" | "upload")
            )
            .then(|| format!("`{}` publishes a package", seg.inner_text()))
        }
        n if SHELLS.contains(&n) && seg.piped_in && operands(args).is_empty() => {
            Some(format!("pipes data into `{n}` to run it as a script"))
        }
        _ => None,
    }
}

fn git_destructive(args: &[String]) -> Option<&'static str> {
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if matches!(a, "-C" | "-c" | "--git-dir" | "--work-tree" | "--namespace") {
            i += 2;
        } else if a.starts_with('-') {
            i += 1;
        } else {
            break;
        }
    }
    let sub = args.get(i)?.as_str();
    let rest = &args[i + 1..];
    let has = |x: &str| rest.iter().any(|a| a == x);
    let short = |c: char| {
        rest.iter()
            .any(|a| a.starts_with('-') && !a.starts_with("--") && a.contains(c))
    };
    match sub {
        "push"
            if short('f')
                || short('d')
                || rest.iter().any(|a| {
                    a.starts_with("--force") || a == "--delete" || a == "--mirror" || a == "--prune"
                })
                || rest
                    .iter()
                    .skip(1)
                    .any(|a| a.starts_with('+') || a.starts_with(':')) =>
        {
            Some("rewrites or deletes remote history")
        }
        "reset" if has("--hard") || has("--merge") || has("--keep") => {
            Some("discards uncommitted work")
        }
        "clean" => Some("deletes untracked files"),
        "checkout" if has("--") || has(".") || short('f') || has("--force") => {
            Some("discards uncommitted changes")
        }
        "restore" if !has("--staged") || has("--worktree") => Some("discards uncommitted changes"),
        "branch" if short('D') || (has("--delete") && has("--force")) => {
            Some("deletes a branch that may not be merged")
        }
        "stash" if has("drop") || has("clear") => Some("deletes stashed work"),
        "tag" if short('d') || has("--delete") => Some("deletes a tag"),
        "filter-branch" | "filter-repo" => Some("rewrites history"),
        "reflog" if has("expire") || has("delete") => Some("deletes recovery points"),
        "gc" if rest.iter().any(|a| a.starts_with("--prune")) => Some("deletes recovery points"),
        "update-ref" if has("-d") => Some("deletes a ref"),
        "rebase" if has("--root") => Some("rewrites all history"),
        _ => None,
    }
}
