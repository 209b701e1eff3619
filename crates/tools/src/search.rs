//! `glob` and `grep`: .gitignore-aware file search with ripgrep's crates,
//! sorted (component-wise, like `Path`'s order) and capped with a count of
//! what was left out.
//!
//! Both run outside the sandbox, over a tree a command may have filled
//! with FIFOs and links: the walk follows no link and reads ignore files
//! only as [`crate::ignore_rules`] allows; `grep` opens only regular files,
//! never through a link, and holds at most [`MAX_LINE_BYTES`] of a line.
//! What is passed over for that is said in the output.

use std::fs::File;
use std::path::{Path, PathBuf};
use whittle_protocol::tool_names;
use whittle_sandbox::{AtName, ReadError, open_regular_file};

use futures::future::BoxFuture;
use globset::{GlobBuilder, GlobMatcher};
use grep_regex::RegexMatcherBuilder;
use grep_searcher::{BinaryDetection, SearcherBuilder, sinks::Lossy};
use serde::Deserialize;
use tokio_util::sync::CancellationToken;
use walkdir::WalkDir;

use crate::ignore_rules::IgnoreRules;
use crate::tool::{ToolContext, ToolOutput};
use crate::truncate::cap_line;
use crate::typed::TypedTool;
use schemars::JsonSchema;
use whittle_protocol::group_digits;

/// Entries a single search visits before it stops and says so.
const MAX_VISITED: usize = 200_000;
/// Characters shown of one matching line.
const MAX_MATCH_LINE_CHARS: usize = 300;
/// Longest line `grep` holds in memory: a file of one endless line (a
/// command can write one) would otherwise be read whole.
const MAX_LINE_BYTES: usize = 32 << 20;
/// Notes of one kind (files not searched, ignore files not read) named one
/// by one; the rest are counted.
const MAX_NAMED: usize = 20;

/// Folders never searched unless the search starts inside them: version
/// control internals and whittle's own session data.
const SKIPPED_DIRS: &[&str] = &[".git", ".whittle"];

/// A sorted walk over `root` that includes hidden files, follows no link
/// (but a root given as one), and leaves out [`SKIPPED_DIRS`] and what the
/// ignore rules leave out.
struct Walk {
    entries: walkdir::IntoIter,
    rules: IgnoreRules,
}

impl Walk {
    fn new(root: &Path) -> Self {
        Walk {
            entries: WalkDir::new(root)
                .follow_links(false)
                .sort_by_file_name()
                .into_iter(),
            rules: IgnoreRules::new(root),
        }
    }
}

impl Iterator for Walk {
    type Item = walkdir::Result<walkdir::DirEntry>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let entry = match self.entries.next()? {
                Ok(entry) => entry,
                Err(e) => return Some(Err(e)),
            };
            let depth = entry.depth();
            let is_dir = entry.file_type().is_dir();
            let left_out = depth > 0
                && ((is_dir && SKIPPED_DIRS.iter().any(|d| entry.file_name() == *d))
                    || self.rules.ignores(entry.path(), depth, is_dir));
            if left_out {
                if is_dir {
                    self.entries.skip_current_dir();
                }
                continue;
            }
            if is_dir {
                self.rules.enter(entry.path(), depth);
            }
            return Some(Ok(entry));
        }
    }
}

/// A file-name pattern: matched against the path relative to the search
/// root when it contains `/`, against the bare file name otherwise (so
/// `*.rs` finds Rust files at any depth, as in .gitignore).
struct PathPattern {
    matcher: GlobMatcher,
    by_name: bool,
}

impl PathPattern {
    fn new(pattern: &str) -> Result<Self, String> {
        let pattern = pattern.strip_prefix("./").unwrap_or(pattern);
        if pattern.is_empty() {
            return Err("the glob pattern is empty".to_owned());
        }
        let matcher = GlobBuilder::new(pattern)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|e| format!("invalid glob pattern {pattern:?}: {e}"))?
            .compile_matcher();
        Ok(Self {
            matcher,
            by_name: !pattern.contains('/'),
        })
    }

    fn matches(&self, root: &Path, path: &Path) -> bool {
        if self.by_name {
            path.file_name().is_some_and(|n| self.matcher.is_match(n))
        } else if self.matcher.glob().glob().starts_with('/') {
            self.matcher.is_match(path)
        } else {
            path.strip_prefix(root)
                .is_ok_and(|rel| self.matcher.is_match(rel))
        }
    }
}

/// What stopped a walk early, if anything, and what it passed over.
#[derive(Default)]
struct WalkNotes {
    visited: usize,
    unreadable: usize,
    /// Files `grep` listed but did not search, each with why.
    not_searched: Vec<String>,
    hit_visit_cap: bool,
    cancelled: bool,
}

impl WalkNotes {
    /// Counts one entry; false when the walk must stop.
    fn step(&mut self, cancel: &CancellationToken) -> bool {
        self.visited += 1;
        if cancel.is_cancelled() {
            self.cancelled = true;
            return false;
        }
        if self.visited > MAX_VISITED {
            self.hit_visit_cap = true;
            return false;
        }
        true
    }

    /// Appends the notes, with those on the ignore files `walk` did not read.
    fn render(&self, ctx: &ToolContext, walk: &Walk, out: &mut String) {
        if self.unreadable > 0 {
            out.push_str(&format!(
                "\n[{} entries could not be read]",
                group_digits(self.unreadable as u64)
            ));
        }
        push_named(
            out,
            walk.rules.not_read().iter().map(|n| {
                format!(
                    "[{} not read ({}): its ignore rules were not applied]",
                    ctx.display(&n.path),
                    n.why
                )
            }),
            "ignore files not read",
        );
        push_named(out, self.not_searched.iter().cloned(), "files not searched");
        if self.hit_visit_cap {
            out.push_str(&format!(
                "\n[search stopped after {} entries; narrow the path or pattern]",
                group_digits(MAX_VISITED as u64)
            ));
        }
        if self.cancelled {
            out.push_str("\n[cancelled before the search finished]");
        }
    }
}

/// Appends the first [`MAX_NAMED`] notes, one a line, and a count of the rest.
fn push_named(out: &mut String, notes: impl Iterator<Item = String>, what: &str) {
    let mut more = 0usize;
    for (i, note) in notes.enumerate() {
        if i < MAX_NAMED {
            out.push('\n');
            out.push_str(&note);
        } else {
            more += 1;
        }
    }
    if more > 0 {
        out.push_str(&format!("\n[{} more {what}]", group_digits(more as u64)));
    }
}

/// Opens a file the walk listed, to search it: without following a link
/// and without blocking, so that a link or a FIFO put at its name since
/// (by a command running alongside) is refused rather than followed out of
/// the workspace or waited on for ever. A root given as a link was checked
/// by the permission policy where it leads, and is followed.
fn open_listed(path: &Path, is_root: bool) -> Result<File, String> {
    let at_name = if is_root {
        AtName::FollowLink
    } else {
        AtName::RefuseLink
    };
    open_regular_file(path, at_name).map_err(|e| match e {
        ReadError::Io { source, .. } => source.to_string(),
        ReadError::NotRegular { .. } | ReadError::TooLarge { .. } => {
            "not a regular file".to_owned()
        }
    })
}

/// Resolves the optional `path` input to an existing search root.
fn search_root(ctx: &ToolContext, path: Option<&str>) -> Result<PathBuf, ToolOutput> {
    let root = match path {
        None | Some("") => ctx.workspace().to_path_buf(),
        Some(p) => ctx.resolve(p),
    };
    if !root.exists() {
        return Err(ToolOutput::error(format!(
            "path not found: {}",
            ctx.display(&root)
        )));
    }
    Ok(root)
}

/// The `glob` tool.
#[derive(Clone, Debug)]
pub struct GlobTool {
    max_results: usize,
}

impl Default for GlobTool {
    fn default() -> Self {
        Self { max_results: 500 }
    }
}

impl GlobTool {
    /// Sets how many paths are listed before the rest are only counted.
    pub fn with_max_results(mut self, n: usize) -> Self {
        self.max_results = n;
        self
    }
}

/// What the model sends to `glob`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GlobInput {
    /// Glob pattern, e.g. `*.toml` or `crates/**/src/*.rs`.
    #[schemars(length(min = 1))]
    pub pattern: String,
    /// Folder to search (default: the workspace).
    pub path: Option<String>,
}

impl TypedTool for GlobTool {
    type Input = GlobInput;
    const NAME: &'static str = tool_names::GLOB;
    const DESCRIPTION: &'static str = "Find files by name pattern, respecting .gitignore. A pattern without `/` matches file \
         names at any depth (`*.rs`); with `/` it matches the path relative to `path` \
         (`src/**/*.rs`). Supports *, ?, **, [abc], {a,b}. Results are sorted and capped.";
    const READ_ONLY: bool = true;

    fn call<'a>(&'a self, input: GlobInput, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let pattern = match PathPattern::new(&input.pattern) {
                Ok(p) => p,
                Err(e) => return ToolOutput::error(e),
            };
            let root = match search_root(ctx, input.path.as_deref()) {
                Ok(r) => r,
                Err(e) => return e,
            };
            let ctx2 = ctx.clone();
            let max = self.max_results;
            let job = tokio::task::spawn_blocking(move || {
                run_glob(&ctx2, &root, &pattern, &input.pattern, max)
            });
            job.await
                .unwrap_or_else(|e| ToolOutput::error(format!("glob failed: {e}")))
        })
    }
}

fn run_glob(
    ctx: &ToolContext,
    root: &Path,
    pattern: &PathPattern,
    raw: &str,
    max: usize,
) -> ToolOutput {
    let mut notes = WalkNotes::default();
    let mut found: Vec<PathBuf> = Vec::new();
    let mut walk = Walk::new(root);
    for entry in &mut walk {
        if !notes.step(ctx.cancel_token()) {
            break;
        }
        let entry = match entry {
            Ok(e) => e,
            Err(_) => {
                notes.unreadable += 1;
                continue;
            }
        };
        if (entry.file_type().is_file() || entry.file_type().is_symlink())
            && pattern.matches(root, entry.path())
        {
            found.push(entry.into_path());
        }
    }
    found.sort();
    let total = found.len();
    let mut out = if total == 0 {
        format!("No files match {raw:?} in {}", ctx.display(root))
    } else {
        found
            .iter()
            .take(max)
            .map(|p| ctx.display(p))
            .collect::<Vec<_>>()
            .join("\n")
    };
    if total > max {
        out.push_str(&format!(
            "\n[{} more files not shown ({} matched); narrow the pattern or path]",
            group_digits((total - max) as u64),
            group_digits(total as u64)
        ));
    }
    notes.render(ctx, &walk, &mut out);
    ToolOutput::ok(out)
}

/// The `grep` tool.
#[derive(Clone, Debug)]
pub struct GrepTool {
    max_results: usize,
}

impl Default for GrepTool {
    fn default() -> Self {
        Self { max_results: 500 }
    }
}

impl GrepTool {
    /// Sets how many files or lines are listed before the rest are only counted.
    pub fn with_max_results(mut self, n: usize) -> Self {
        self.max_results = n;
        self
    }
}

/// What grep lists.
#[derive(Clone, Copy, Debug, Default, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum OutputMode {
    /// Paths of matching files.
    #[default]
    #[serde(alias = "files_with_matches")]
    Files,
    /// Matching lines as `path:line:text`.
    Content,
}

/// What the model sends to `grep`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrepInput {
    /// Regular expression to search for.
    #[schemars(length(min = 1))]
    pub pattern: String,
    /// File or folder to search (default: the workspace).
    pub path: Option<String>,
    /// Only search files matching this glob, e.g. `*.rs` or `src/**/*.ts`.
    pub glob: Option<String>,
    /// Match regardless of case (default false).
    #[serde(default)]
    pub case_insensitive: bool,
    /// `files` (default) lists matching files; `content` lists matching
    /// lines as path:line:text.
    #[serde(default)]
    pub output_mode: OutputMode,
}

impl TypedTool for GrepTool {
    type Input = GrepInput;
    const NAME: &'static str = tool_names::GREP;
    const DESCRIPTION: &'static str = "Search file contents with a regular expression (Rust regex syntax, like ripgrep), \
         respecting .gitignore and skipping binary files. output_mode `files` (default) lists \
         matching files; `content` lists matching lines as path:line:text. Filter files with \
         `glob` (e.g. `*.rs`). Results are sorted and capped.";
    const READ_ONLY: bool = true;

    fn call<'a>(&'a self, input: GrepInput, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            if input.pattern.is_empty() {
                return ToolOutput::error("invalid input for grep: `pattern` is empty");
            }
            let filter = match input.glob.as_deref() {
                None | Some("") => None,
                Some(g) => match PathPattern::new(g) {
                    Ok(p) => Some(p),
                    Err(e) => return ToolOutput::error(e),
                },
            };
            let root = match search_root(ctx, input.path.as_deref()) {
                Ok(r) => r,
                Err(e) => return e,
            };
            let ctx2 = ctx.clone();
            let max = self.max_results;
            let job = tokio::task::spawn_blocking(move || {
                run_grep(&ctx2, &root, &input, filter.as_ref(), max)
            });
            job.await
                .unwrap_or_else(|e| ToolOutput::error(format!("grep failed: {e}")))
        })
    }
}

fn run_grep(
    ctx: &ToolContext,
    root: &Path,
    input: &GrepInput,
    filter: Option<&PathPattern>,
    max: usize,
) -> ToolOutput {
    let matcher = match RegexMatcherBuilder::new()
        .case_insensitive(input.case_insensitive)
        .line_terminator(Some(b'\n'))
        .build(&input.pattern)
    {
        Ok(m) => m,
        Err(e) => {
            return ToolOutput::error(format!("invalid regex {:?}: {e}", input.pattern));
        }
    };
    if std::fs::metadata(root).is_ok_and(|m| !m.is_dir() && !m.is_file()) {
        return ToolOutput::error(format!(
            "{} is not a regular file or folder (a FIFO, device or socket); grep searches those only",
            ctx.display(root)
        ));
    }
    let mut searcher = SearcherBuilder::new()
        .binary_detection(BinaryDetection::quit(0))
        .line_number(true)
        .heap_limit(Some(MAX_LINE_BYTES))
        .build();
    let mut notes = WalkNotes::default();
    let mut shown: Vec<String> = Vec::new();
    let mut files = 0usize;
    let mut lines = 0usize;
    let mut walk = Walk::new(root);
    for entry in &mut walk {
        if !notes.step(ctx.cancel_token()) {
            break;
        }
        let entry = match entry {
            Ok(e) => e,
            Err(_) => {
                notes.unreadable += 1;
                continue;
            }
        };
        if !entry.file_type().is_file() {
            continue;
        }
        let path = entry.path();
        if filter.is_some_and(|f| !f.matches(root, path)) {
            continue;
        }
        let display = ctx.display(path);
        let file = match open_listed(path, entry.depth() == 0) {
            Ok(file) => file,
            Err(why) => {
                notes
                    .not_searched
                    .push(format!("[{display} not searched: {why}]"));
                continue;
            }
        };
        let mut file_lines = 0usize;
        let files_only = input.output_mode == OutputMode::Files;
        let result = searcher.search_file(
            &matcher,
            &file,
            Lossy(|lnum, line| {
                file_lines += 1;
                if files_only {
                    return Ok(false);
                }
                if lines + file_lines <= max {
                    let text = cap_line(line.trim_end_matches(['\n', '\r']), MAX_MATCH_LINE_CHARS);
                    shown.push(format!("{display}:{lnum}:{text}"));
                }
                Ok(true)
            }),
        );
        if result.is_err() {
            notes.not_searched.push(format!(
                "[{display} not searched: it has a line longer than {} MiB, or could not be read]",
                MAX_LINE_BYTES >> 20
            ));
            continue;
        }
        if file_lines > 0 {
            files += 1;
            lines += file_lines;
            if files_only && files <= max {
                shown.push(display);
            }
        }
    }
    let mut out = if files == 0 {
        format!(
            "No matches for {:?} in {}",
            input.pattern,
            ctx.display(root)
        )
    } else {
        shown.join("\n")
    };
    match input.output_mode {
        OutputMode::Files if files > max => out.push_str(&format!(
            "\n[{} more files not shown ({} matched); narrow the pattern, path or glob]",
            group_digits((files - max) as u64),
            group_digits(files as u64)
        )),
        OutputMode::Content if lines > max => out.push_str(&format!(
            "\n[{} more matching lines not shown ({} lines in {} files matched); narrow the pattern, path or glob]",
            group_digits((lines - max) as u64),
            group_digits(lines as u64),
            group_digits(files as u64)
        )),
        _ => {}
    }
    notes.render(ctx, &walk, &mut out);
    ToolOutput::ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What grep meets when a command swaps a listed file for a FIFO or a
    /// link after the walk saw it: refused at once, never waited on.
    #[test]
    fn a_listed_name_opens_only_as_a_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.txt");
        std::fs::write(&file, "text").unwrap();
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.unwrap().success());
        let zero = dir.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();

        assert!(open_listed(&file, false).is_ok());
        assert_eq!(open_listed(&fifo, false).unwrap_err(), "not a regular file");
        assert!(
            open_listed(&zero, false)
                .unwrap_err()
                .contains("symbolic links")
        );
        assert!(open_listed(&link, false).is_err());
        // A root given as a link is followed, to a regular file only.
        assert!(open_listed(&link, true).is_ok());
        assert_eq!(open_listed(&zero, true).unwrap_err(), "not a regular file");
    }
}
