//! The permission policy: before a tool runs, the agent asks
//! [`PermissionPolicy::check`] whether to allow it, ask the user, or refuse.
//!
//! Three layers, in order:
//! 1. A deny list that holds in every mode: `sudo` and friends, `rm -r` of
//!    `/`, a top-level folder or home, `mkfs`, `dd if=`, `shutdown`/`reboot`,
//!    `kill -1`, writes to disk devices, fork bombs. Commands are parsed
//!    (split on `;`, `&&`, `||`, `|`, with env assignments, wrappers such as
//!    `env`/`timeout`/`xargs`, `bash -c "..."`, `eval` and `$(...)` looked
//!    into), so `echo reboot` or `grep sudo notes.txt` are not caught.
//! 2. The mode ([`PermissionMode`]).
//! 3. `--allow` rules ([`AllowRule`], syntax in [`rules`]) that turn an Ask
//!    into an Allow; they never override a Deny.
//!
//! What an Ask means is the caller's business: prompt the user, or refuse
//! in non-interactive `-p` mode.

mod deny;
mod destructive;
mod path_words;
mod read_only;
pub mod rules;
mod segment;
mod unwrap;

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use whittle_protocol::tool_names;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::paths::{real_path, resolve_input};
use deny::deny_reason;
use destructive::destructive_reason;
use path_words::path_words;
use read_only::is_read_only;
pub use rules::{AllowRule, AllowRuleError};
use segment::Segment;
use unwrap::analyze;

/// What the agent should do with a tool call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Run it.
    Allow,
    /// Ask the user first (or refuse when nobody can be asked).
    Ask {
        /// What the user is asked about, in one line.
        reason: String,
    },
    /// Never run it; tell the model why.
    Deny {
        /// Why, in one line.
        reason: String,
    },
}

impl Decision {
    fn ask(reason: impl Into<String>) -> Self {
        Decision::Ask {
            reason: whittle_protocol::controls_to_spaces(&reason.into()).into_owned(),
        }
    }

    fn deny(reason: impl Into<String>) -> Self {
        Decision::Deny {
            reason: whittle_protocol::controls_to_spaces(&reason.into()).into_owned(),
        }
    }

    /// True for [`Decision::Allow`].
    pub fn is_allow(&self) -> bool {
        matches!(self, Decision::Allow)
    }
}

/// How much the agent may do without asking.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PermissionMode {
    /// Ask before file edits, destructive commands and paths outside the workspace.
    #[default]
    Default,
    /// Only read: writes and commands that may change things are refused.
    ReadOnly,
    /// Edit files inside the workspace without asking; ask for the rest as in default.
    AcceptEdits,
    /// Allow everything except the deny list.
    Yolo,
}

impl PermissionMode {
    /// The names accepted by `--permission-mode`.
    pub const NAMES: [&'static str; 4] = ["default", "read-only", "accept-edits", "yolo"];

    /// The mode's flag name.
    pub fn as_str(self) -> &'static str {
        match self {
            PermissionMode::Default => "default",
            PermissionMode::ReadOnly => "read-only",
            PermissionMode::AcceptEdits => "accept-edits",
            PermissionMode::Yolo => "yolo",
        }
    }
}

impl fmt::Display for PermissionMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown `--permission-mode` value.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown permission mode {0:?}; expected one of default, read-only, accept-edits, yolo")]
pub struct UnknownMode(pub String);

impl FromStr for PermissionMode {
    type Err = UnknownMode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().replace('_', "-").as_str() {
            "default" => Ok(PermissionMode::Default),
            "read-only" | "readonly" => Ok(PermissionMode::ReadOnly),
            "accept-edits" | "acceptedits" => Ok(PermissionMode::AcceptEdits),
            "yolo" => Ok(PermissionMode::Yolo),
            _ => Err(UnknownMode(s.to_owned())),
        }
    }
}

/// Tools that read files by a `path` input (default: the workspace).
const READ_TOOLS: &[&str] = &[tool_names::READ_FILE, tool_names::GLOB, tool_names::GREP];
/// Tools that write the file at their `path` input.
const WRITE_TOOLS: &[&str] = &[tool_names::WRITE_FILE, tool_names::EDIT_FILE];
/// Names inside the workspace, at any depth, whose files change how git,
/// an editor or whittle behave (hooks, config, tasks): the same islands the
/// sandbox makes read-only to commands. Changing them always asks, in
/// `accept-edits` too; a `.git` file (`gitdir: ...`) is one of them.
const PROTECTED_DIRS: &[&str] = &[".git", ".whittle", ".vscode", ".idea"];

/// The permission policy: a mode, allow rules, and tools trusted outright.
#[derive(Clone, Debug)]
pub struct PermissionPolicy {
    mode: PermissionMode,
    allow: Vec<AllowRule>,
    trusted: BTreeSet<String>,
    /// MCP tools their server annotated read-only: the only ones
    /// `read-only` mode lets run.
    read_only_mcp: BTreeSet<String>,
}

impl Default for PermissionPolicy {
    fn default() -> Self {
        Self::new(PermissionMode::Default)
    }
}

impl PermissionPolicy {
    /// A policy in `mode`, with no allow rules; `todo_write`, `load_skill`
    /// and `recall` (which reads only the session's own store) are trusted.
    pub fn new(mode: PermissionMode) -> Self {
        Self {
            mode,
            allow: Vec::new(),
            trusted: [
                tool_names::TODO_WRITE,
                tool_names::LOAD_SKILL,
                tool_names::RECALL,
            ]
            .map(str::to_owned)
            .into(),
            read_only_mcp: BTreeSet::new(),
        }
    }

    /// Names the MCP tools whose server annotated them `readOnlyHint: true`.
    pub fn with_read_only_mcp_tools<S: Into<String>>(
        mut self,
        names: impl IntoIterator<Item = S>,
    ) -> Self {
        self.read_only_mcp.extend(names.into_iter().map(Into::into));
        self
    }

    /// The policy of a subagent: `read-only`, with this policy's trusted
    /// tools and its rules for MCP tools (a subagent cannot ask, so an MCP
    /// tool it may run is one the person allowed).
    pub fn for_subagent(&self) -> PermissionPolicy {
        PermissionPolicy {
            mode: PermissionMode::ReadOnly,
            allow: self
                .allow
                .iter()
                .filter(|r| r.tool().starts_with(rules::MCP_PREFIX))
                .cloned()
                .collect(),
            trusted: self.trusted.clone(),
            read_only_mcp: self.read_only_mcp.clone(),
        }
    }

    /// Adds `--allow` rules.
    pub fn with_allow_rules(mut self, rules: impl IntoIterator<Item = AllowRule>) -> Self {
        self.allow.extend(rules);
        self
    }

    /// Parses and adds `--allow` rules, failing on the first bad one.
    pub fn with_allow_strs<S: AsRef<str>>(
        self,
        rules: impl IntoIterator<Item = S>,
    ) -> Result<Self, AllowRuleError> {
        let parsed = rules
            .into_iter()
            .map(|r| r.as_ref().parse())
            .collect::<Result<Vec<AllowRule>, _>>()?;
        Ok(self.with_allow_rules(parsed))
    }

    /// Marks tools as allowed in every mode without checks: tools that
    /// touch no files and run nothing themselves (e.g. `compact`, or `task`,
    /// whose subagent's tools are checked one by one).
    pub fn with_trusted_tools<S: Into<String>>(
        mut self,
        names: impl IntoIterator<Item = S>,
    ) -> Self {
        self.trusted.extend(names.into_iter().map(Into::into));
        self
    }

    /// The mode.
    pub fn mode(&self) -> PermissionMode {
        self.mode
    }

    /// Changes the mode (e.g. from a slash command).
    pub fn set_mode(&mut self, mode: PermissionMode) {
        self.mode = mode;
    }

    /// The allow rules.
    pub fn allow_rules(&self) -> &[AllowRule] {
        &self.allow
    }

    /// Decides about one tool call. `input` is the call's JSON input as the
    /// model sent it; `workspace` the folder the agent works in.
    pub fn check(&self, tool_name: &str, input: &Value, workspace: &Path) -> Decision {
        match tool_name {
            tool_names::BASH => self.check_bash(input, workspace),
            t if READ_TOOLS.contains(&t) => self.check_read(t, input, workspace),
            t if WRITE_TOOLS.contains(&t) => self.check_write(t, input, workspace),
            t if t.starts_with(rules::MCP_PREFIX) => self.check_mcp(t, input),
            t if self.trusted.contains(t) => Decision::Allow,
            t => self.check_other(t, input),
        }
    }

    fn rules_for<'a>(&'a self, tool: &'a str) -> impl Iterator<Item = &'a AllowRule> + 'a {
        self.allow.iter().filter(move |r| r.matches_tool(tool))
    }

    /// An MCP tool runs code of someone else's: it asks unless a rule
    /// allows it, and in `read-only` mode only a tool its server annotated
    /// read-only may run at all.
    fn check_mcp(&self, tool: &str, input: &Value) -> Decision {
        match self.mode {
            PermissionMode::Yolo => return Decision::Allow,
            PermissionMode::ReadOnly if !self.read_only_mcp.contains(tool) => {
                return Decision::deny(format!(
                    "read-only mode: {tool} is not annotated read-only by its MCP server"
                ));
            }
            _ => {}
        }
        let text = serde_json::to_string(input).unwrap_or_default();
        if self.rules_for(tool).any(|r| r.matches_text(&text)) {
            return Decision::Allow;
        }
        Decision::ask(format!("run the MCP tool {tool}"))
    }

    fn check_other(&self, tool: &str, input: &Value) -> Decision {
        let decision = match self.mode {
            PermissionMode::Yolo => return Decision::Allow,
            PermissionMode::ReadOnly => {
                return Decision::deny(format!(
                    "read-only mode: {tool} is not known to be read-only"
                ));
            }
            _ => Decision::ask(format!("run the tool {tool}")),
        };
        let text = serde_json::to_string(input).unwrap_or_default();
        if self.rules_for(tool).any(|r| r.matches_text(&text)) {
            return Decision::Allow;
        }
        decision
    }

    fn check_read(&self, tool: &str, input: &Value, workspace: &Path) -> Decision {
        if self.mode == PermissionMode::Yolo {
            return Decision::Allow;
        }
        let given = input
            .get("path")
            .and_then(Value::as_str)
            .filter(|p| !p.is_empty())
            .unwrap_or(".");
        let place = Place::of(workspace, given);
        if place.inside {
            return Decision::Allow;
        }
        if self
            .rules_for(tool)
            .any(|r| r.matches_path(&place.workspace, &place.real))
        {
            return Decision::Allow;
        }
        Decision::ask(format!("{tool} reads {given}, outside the workspace"))
    }

    fn check_write(&self, tool: &str, input: &Value, workspace: &Path) -> Decision {
        match self.mode {
            PermissionMode::ReadOnly => {
                return Decision::deny(format!("read-only mode: {tool} is not allowed"));
            }
            PermissionMode::Yolo => return Decision::Allow,
            PermissionMode::Default | PermissionMode::AcceptEdits => {}
        }
        let Some(given) = input
            .get("path")
            .and_then(Value::as_str)
            .filter(|p| !p.is_empty())
        else {
            // Nothing is written: the tool itself reports the bad input.
            return Decision::Allow;
        };
        let place = Place::of(workspace, given);
        let decision = if !place.inside {
            Decision::ask(format!("{tool} writes {given}, outside the workspace"))
        } else if let Some(dir) = place.protected_dir() {
            Decision::ask(format!(
                "{tool} changes {given}, inside {dir}/ (settings and hooks)"
            ))
        } else if self.mode == PermissionMode::AcceptEdits {
            return Decision::Allow;
        } else {
            Decision::ask(format!("{tool} changes {given}"))
        };
        if self
            .rules_for(tool)
            .any(|r| r.matches_path(&place.workspace, &place.real))
        {
            return Decision::Allow;
        }
        decision
    }

    fn check_bash(&self, input: &Value, workspace: &Path) -> Decision {
        let Some(command) = input.get("command").and_then(Value::as_str) else {
            return Decision::Allow;
        };
        let analysis = analyze(command);
        if analysis.fork_bomb {
            return Decision::deny("never allowed: a fork bomb");
        }
        if let Some(reason) = analysis.segments.iter().find_map(deny_reason) {
            return Decision::deny(format!("never allowed: {reason}"));
        }
        // Each question, with the segment that raised it (None: the whole line).
        let mut asks: Vec<(Option<&Segment>, String)> = Vec::new();
        match self.mode {
            PermissionMode::Yolo => return Decision::Allow,
            PermissionMode::ReadOnly => {
                if let Some(seg) = analysis.segments.iter().find(|s| !is_read_only(s)) {
                    return Decision::deny(format!(
                        "read-only mode: `{}` may change things; only read-only commands run",
                        shown(seg)
                    ));
                }
                if let Some(p) = &analysis.problem {
                    return Decision::deny(format!(
                        "read-only mode: cannot parse the command ({p})"
                    ));
                }
                if let Some(var) = &analysis.program_var {
                    return Decision::deny(format!(
                        "read-only mode: setting {var} makes a command run another program"
                    ));
                }
            }
            PermissionMode::Default | PermissionMode::AcceptEdits => {
                if let Some(p) = &analysis.problem {
                    asks.push((None, format!("the command could not be fully parsed ({p})")));
                }
                for seg in &analysis.segments {
                    if let Some(r) = destructive_reason(seg) {
                        asks.push((Some(seg), r));
                    }
                    if !is_read_only(seg)
                        && let Some(dir) = mentions_protected(seg)
                    {
                        asks.push((
                            Some(seg),
                            format!("`{}` may change {dir}/ (settings and hooks)", shown(seg)),
                        ));
                    }
                }
            }
        }
        for seg in &analysis.segments {
            for word in path_words(seg, workspace) {
                let place = Place::of(workspace, &expand_home(&word));
                if !place.inside {
                    asks.push((
                        Some(seg),
                        format!("`{}` touches {word}, outside the workspace", shown(seg)),
                    ));
                }
            }
        }
        if asks.is_empty() {
            return Decision::Allow;
        }
        let rules: Vec<&AllowRule> = self.rules_for(tool_names::BASH).collect();
        // A pattern is matched per simple command, never against the whole
        // line, so `bash(rm build/*)` cannot allow `rm build/x; rm -r src`.
        let whole_line = rules.iter().any(|r| r.is_any());
        let each_part = asks.iter().all(|(seg, _)| {
            seg.is_some_and(|s| {
                rules
                    .iter()
                    .any(|r| r.matches_text(&s.text) || r.matches_text(&s.inner_text()))
            })
        });
        if whole_line || each_part {
            return Decision::Allow;
        }
        let mut reasons: Vec<String> = Vec::new();
        for (_, r) in asks {
            if !reasons.contains(&r) {
                reasons.push(r);
            }
        }
        Decision::ask(reasons.join("; "))
    }
}

/// A segment as the user wrote it, for messages.
fn shown(seg: &Segment) -> String {
    crate::truncate::cap_line(&seg.text, 120)
}

fn expand_home(word: &str) -> String {
    let home = std::env::var("HOME").unwrap_or_default();
    for prefix in ["${HOME}", "$HOME"] {
        if let Some(rest) = word.strip_prefix(prefix) {
            return format!("{home}{rest}");
        }
    }
    word.to_owned()
}

fn mentions_protected(seg: &Segment) -> Option<&'static str> {
    let words = seg
        .argv
        .iter()
        .skip(1)
        .chain(seg.redirects.iter().map(|r| &r.target));
    for w in words {
        for dir in PROTECTED_DIRS {
            let w = w.strip_prefix("./").unwrap_or(w);
            if w == *dir || w.starts_with(&format!("{dir}/")) || w.contains(&format!("/{dir}/")) {
                return Some(dir);
            }
        }
    }
    None
}

/// Where a model-given path really is, relative to the workspace.
struct Place {
    /// The workspace, symlinks resolved.
    workspace: PathBuf,
    /// The path, `..` and symlinks resolved.
    real: PathBuf,
    inside: bool,
}

impl Place {
    fn of(workspace: &Path, given: &str) -> Self {
        let ws = real_path(workspace).unwrap_or_else(|| workspace.to_path_buf());
        let joined = resolve_input(workspace, given);
        match real_path(&joined) {
            Some(real) => Place {
                inside: real.starts_with(&ws),
                workspace: ws,
                real,
            },
            // A symlink loop: nobody can tell where it goes.
            None => Place {
                workspace: ws,
                real: joined,
                inside: false,
            },
        }
    }

    fn protected_dir(&self) -> Option<&'static str> {
        let rel = self.real.strip_prefix(&self.workspace).ok()?;
        rel.components().find_map(|part| {
            PROTECTED_DIRS
                .iter()
                .copied()
                .find(|d| part.as_os_str() == *d)
        })
    }
}
