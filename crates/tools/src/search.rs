//! `glob` and `grep`: .gitignore-aware file search with ripgrep's crates,
//! sorted (component-wise, like `Path`'s order) and capped with a count of
//! what was left out.

use std::path::{Path, PathBuf};
use whittle_protocol::tool_names;

use futures::future::BoxFuture;
use globset::{GlobBuilder, GlobMatcher};
use grep_regex::RegexMatcherBuilder;
use grep_searcher::{BinaryDetection, SearcherBuilder, sinks::Lossy};
use ignore::WalkBuilder;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use crate::tool::{ToolContext, ToolOutput};
use crate::truncate::cap_line;
use crate::typed::TypedTool;
use schemars::JsonSchema;
use whittle_protocol::group_digits;

/// Entries a single search visits before it stops and says so.
const MAX_VISITED: usize = 200_000;
/// Characters shown of one matching line.
const MAX_MATCH_LINE_CHARS: usize = 300;

/// Folders never searched unless the search starts inside them: version
/// control internals and whittle's own session data.
const SKIPPED_DIRS: &[&str] = &[".git", ".whittle"];

/// A sorted, .gitignore-aware walk over `root` that includes hidden files.
fn walker(root: &Path) -> ignore::Walk {
    let mut b = WalkBuilder::new(root);
    b.hidden(false)
        .require_git(false)
        .follow_links(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(|e| {
            e.depth() == 0
                || !e.file_type().is_some_and(|t| t.is_dir())
                || !SKIPPED_DIRS.iter().any(|d| e.file_name() == *d)
        });
    b.build()
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

/// What stopped a walk early, if anything.
#[derive(Default)]
struct WalkNotes {
    visited: usize,
    unreadable: usize,
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

    fn render(&self, out: &mut String) {
        if self.unreadable > 0 {
            out.push_str(&format!(
                "\n[{} entries could not be read]",
                group_digits(self.unreadable as u64)
            ));
        }
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
    for entry in walker(root) {
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
        if entry
            .file_type()
            .is_some_and(|t| t.is_file() || t.is_symlink())
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
    notes.render(&mut out);
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
    let mut searcher = SearcherBuilder::new()
        .binary_detection(BinaryDetection::quit(0))
        .line_number(true)
        .build();
    let mut notes = WalkNotes::default();
    let mut shown: Vec<String> = Vec::new();
    let mut files = 0usize;
    let mut lines = 0usize;
    for entry in walker(root) {
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
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let path = entry.path();
        if filter.is_some_and(|f| !f.matches(root, path)) {
            continue;
        }
        let display = ctx.display(path);
        let mut file_lines = 0usize;
        let files_only = input.output_mode == OutputMode::Files;
        let result = searcher.search_path(
            &matcher,
            path,
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
            notes.unreadable += 1;
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
    notes.render(&mut out);
    ToolOutput::ok(out)
}
