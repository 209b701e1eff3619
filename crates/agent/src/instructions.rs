//! Project instructions: `AGENTS.md` (or `CLAUDE.md` where a folder has no
//! `AGENTS.md`) in every folder from the git root down to the workspace,
//! then the person's own `~/.config/whittle/AGENTS.md`. They go into the
//! system prompt, so they are cached with it and no compaction removes
//! them; each is bounded, and a cut says where the rest is.

use std::path::{Path, PathBuf};

/// Most characters taken from one file.
pub const MAX_FILE_CHARS: usize = 16_000;
/// Largest instruction file read at all (its first [`MAX_FILE_CHARS`] are
/// kept).
const MAX_FILE_BYTES: u64 = 4 << 20;
/// Most characters taken from all files together.
pub const MAX_TOTAL_CHARS: usize = 32_000;

/// The tag the section opens with; [`instructions_chars`] measures by it.
const OPEN: &str = "<project_instructions>";
const CLOSE: &str = "</project_instructions>";

/// One instruction file as it goes into the prompt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstructionFile {
    /// Where it was read.
    pub path: PathBuf,
    /// What the prompt shows: the whole text, or its head.
    pub text: String,
    /// Characters the file has, when only a part is shown.
    pub cut_from: Option<usize>,
}

/// The instruction files of a session, in prompt order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProjectInstructions {
    files: Vec<InstructionFile>,
}

impl ProjectInstructions {
    /// Finds the files for `workspace`; `user_file` is the person's own
    /// (`~/.config/whittle/AGENTS.md`), read last.
    pub fn discover(workspace: &Path, user_file: Option<&Path>) -> ProjectInstructions {
        let folders = folders_from_git_root(workspace);
        // A repository's instruction file may be a link to another one in
        // it (CLAUDE.md -> AGENTS.md), never to a file outside (a key).
        let top = folders.first().and_then(|f| f.canonicalize().ok());
        let stays_inside = |p: &PathBuf| {
            p.canonicalize()
                .is_ok_and(|real| top.as_ref().is_some_and(|t| real.starts_with(t)))
        };
        let mut paths: Vec<PathBuf> = folders
            .iter()
            .filter_map(|dir| {
                ["AGENTS.md", "CLAUDE.md"]
                    .iter()
                    .map(|name| dir.join(name))
                    .find(|p| p.is_file())
            })
            .filter(stays_inside)
            .collect();
        if let Some(user) = user_file.filter(|p| p.is_file()) {
            let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
                (Ok(a), Ok(b)) => a == b,
                _ => a == b,
            };
            if !paths.iter().any(|p| same(p, user)) {
                paths.push(user.to_path_buf());
            }
        }
        let mut budget = MAX_TOTAL_CHARS;
        let mut files = Vec::new();
        for path in paths {
            // Regular files only, bounded: a FIFO or a link to /dev/zero
            // would hang or fill the start-up.
            let Ok(bytes) = whittle_sandbox::read_regular_file(&path, MAX_FILE_BYTES) else {
                continue;
            };
            let text = String::from_utf8_lossy(&bytes);
            let text = text.trim();
            if text.is_empty() || budget == 0 {
                continue;
            }
            let chars = text.chars().count();
            let keep = chars.min(MAX_FILE_CHARS).min(budget);
            budget -= keep;
            files.push(InstructionFile {
                text: text.chars().take(keep).collect(),
                cut_from: (keep < chars).then_some(chars),
                path,
            });
        }
        ProjectInstructions { files }
    }

    /// The files, in prompt order.
    pub fn files(&self) -> &[InstructionFile] {
        &self.files
    }

    /// The prompt section: each file under a heading naming its path;
    /// empty when there are none.
    pub fn render(&self) -> String {
        if self.files.is_empty() {
            return String::new();
        }
        let mut out = format!(
            "{OPEN}\nInstructions for this project from its instruction files, outermost folder \
             first, then the user's own. Follow them unless the user's request says otherwise.\n"
        );
        for f in &self.files {
            out.push_str(&format!("\n## {}\n\n{}\n", f.path.display(), f.text));
            if let Some(total) = f.cut_from {
                out.push_str(&format!(
                    "\n[cut: this file has {total} characters and only the first {} are shown; read the rest with read_file]\n",
                    f.text.chars().count()
                ));
            }
        }
        out.push_str(CLOSE);
        out.push('\n');
        out
    }
}

/// Characters of the project-instructions section of a system prompt,
/// for `/context`.
pub fn instructions_chars(system_prompt: &str) -> usize {
    match (system_prompt.find(OPEN), system_prompt.rfind(CLOSE)) {
        (Some(start), Some(end)) if end >= start => {
            system_prompt[start..end + CLOSE.len()].chars().count()
        }
        _ => 0,
    }
}

/// The folders from the git root (the nearest one holding `.git`) down to
/// `workspace`; just the workspace outside a repository.
fn folders_from_git_root(workspace: &Path) -> Vec<PathBuf> {
    let mut up: Vec<PathBuf> = Vec::new();
    for dir in workspace.ancestors() {
        up.push(dir.to_path_buf());
        if dir.join(".git").exists() {
            up.reverse();
            return up;
        }
    }
    vec![workspace.to_path_buf()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_found_from_the_git_root_down_then_the_users() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        std::fs::create_dir_all(r.join("repo/.git")).unwrap();
        std::fs::create_dir_all(r.join("repo/a/b")).unwrap();
        std::fs::write(r.join("AGENTS.md"), "above the repo").unwrap();
        std::fs::write(r.join("repo/AGENTS.md"), "root rules").unwrap();
        std::fs::write(r.join("repo/CLAUDE.md"), "ignored: AGENTS.md wins").unwrap();
        std::fs::write(r.join("repo/a/CLAUDE.md"), "a rules").unwrap();
        std::fs::write(r.join("repo/a/b/AGENTS.md"), "  \n").unwrap();
        std::fs::write(r.join("mine.md"), "my rules").unwrap();
        let found = ProjectInstructions::discover(&r.join("repo/a/b"), Some(&r.join("mine.md")));
        let texts: Vec<&str> = found.files().iter().map(|f| f.text.as_str()).collect();
        assert_eq!(texts, ["root rules", "a rules", "my rules"]);
        let rendered = found.render();
        let at = |s: &str| rendered.find(s).unwrap();
        assert!(at("repo/AGENTS.md\n\nroot rules") < at("a/CLAUDE.md\n\na rules"));
        assert!(at("a rules") < at("mine.md\n\nmy rules"));
        assert_eq!(
            instructions_chars(&format!("head\n{rendered}tail")),
            rendered.chars().count() - 1
        );
        // Outside a repository only the workspace counts.
        let alone = ProjectInstructions::discover(&r.join("repo/a"), None);
        assert_eq!(alone.files().len(), 2, "{alone:?}");
    }

    #[test]
    fn files_are_bounded_with_a_note() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        std::fs::create_dir_all(r.join(".git")).unwrap();
        std::fs::create_dir_all(r.join("w")).unwrap();
        std::fs::write(r.join("AGENTS.md"), "é".repeat(MAX_FILE_CHARS + 10)).unwrap();
        std::fs::write(r.join("w/AGENTS.md"), "x".repeat(MAX_FILE_CHARS * 2)).unwrap();
        std::fs::write(r.join("user.md"), "never reached").unwrap();
        let found = ProjectInstructions::discover(&r.join("w"), Some(&r.join("user.md")));
        assert_eq!(found.files().len(), 2);
        assert_eq!(found.files()[0].cut_from, Some(MAX_FILE_CHARS + 10));
        assert_eq!(found.files()[0].text.chars().count(), MAX_FILE_CHARS);
        assert_eq!(
            found.files()[1].text.chars().count(),
            MAX_TOTAL_CHARS - MAX_FILE_CHARS
        );
        let rendered = found.render();
        assert!(rendered.contains(&format!(
            "[cut: this file has {} characters and only the first {MAX_FILE_CHARS} are shown",
            MAX_FILE_CHARS + 10
        )));
        assert!(rendered.chars().count() < MAX_TOTAL_CHARS + 2_000);
        assert_eq!(ProjectInstructions::default().render(), "");
        assert_eq!(instructions_chars("no section"), 0);
    }
}
