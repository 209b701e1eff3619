//! `--allow` rules: patterns that turn an Ask into an Allow.
//!
//! Syntax, one rule per flag or config entry:
//!
//! | rule | allows |
//! |---|---|
//! | `edit_file` | every call of the tool `edit_file` |
//! | `bash(git status*)` | bash commands whose every questioned part matches `git status*` |
//! | `bash(cargo test)` | exactly `cargo test` |
//! | `write_file(src/**)` | writes to any file under `src/` in the workspace |
//! | `read_file(/etc/hosts)` | reading that file outside the workspace |
//! | `mcp__fs__*` | every tool of the MCP server `fs` |
//! | `mcp__fs__read_file` | one MCP tool |
//!
//! For `bash` the pattern is a wildcard over the command text, where `*`
//! matches any characters and everything else is literal; it is checked
//! against each simple command that raised the question (so
//! `bash(git status*)` does not allow `git status; rm -rf x`), written either
//! as given or with wrappers like `timeout 60` removed. A rule lifts every
//! question its command raised, including one about a path outside the
//! workspace, so keep patterns narrow. For file tools
//! (`read_file`, `write_file`, `edit_file`, `glob`, `grep`) the pattern is a
//! glob over the path relative to the workspace, or over the absolute path
//! outside it (`*` stays within one folder, `**` crosses folders). For any
//! other tool the pattern is a wildcard over the input as compact JSON.
//! The name of an MCP tool (`mcp__SERVER__TOOL`) may itself hold `*`, to
//! cover a server's tools at once; other names may not, so no rule can
//! stand for every tool. Rules never override a Deny.

use std::path::Path;
use std::str::FromStr;
use whittle_protocol::tool_names;

use globset::{GlobBuilder, GlobMatcher};

/// Why an allow rule could not be parsed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AllowRuleError {
    /// The tool name is empty or has characters tool names never have.
    #[error(
        "allow rule {0:?}: expected TOOL or TOOL(PATTERN), with a tool name of letters, digits, `_` or `-`"
    )]
    BadName(String),
    /// A `*` in the name of a tool that is not an MCP tool.
    #[error(
        "allow rule {0:?}: only MCP tool names (mcp__SERVER__TOOL) may hold `*`, as in `mcp__fs__*`"
    )]
    WildName(String),
    /// An opening parenthesis without a closing one at the end.
    #[error("allow rule {0:?}: the pattern must end with `)`")]
    Unclosed(String),
    /// The path pattern is not a valid glob.
    #[error("allow rule {rule:?}: invalid path pattern: {message}")]
    BadGlob {
        /// The rule as given.
        rule: String,
        /// What the glob parser said.
        message: String,
    },
}

/// What every MCP tool's name starts with.
pub(crate) const MCP_PREFIX: &str = "mcp__";

/// Tools whose rule pattern is a path glob.
pub(crate) const PATH_TOOLS: &[&str] = &[
    tool_names::READ_FILE,
    tool_names::WRITE_FILE,
    tool_names::EDIT_FILE,
    tool_names::GLOB,
    tool_names::GREP,
];

#[derive(Clone, Debug)]
enum Pattern {
    Any,
    Wildcard(String),
    Path(GlobMatcher),
}

/// One parsed `--allow` rule.
#[derive(Clone, Debug)]
pub struct AllowRule {
    source: String,
    tool: String,
    pattern: Pattern,
}

impl FromStr for AllowRule {
    type Err = AllowRuleError;

    fn from_str(rule: &str) -> Result<Self, Self::Err> {
        let rule = rule.trim();
        let (tool, inner) = match rule.split_once('(') {
            None => (rule, None),
            Some((tool, rest)) => match rest.strip_suffix(')') {
                Some(inner) => (tool.trim(), Some(inner)),
                None => return Err(AllowRuleError::Unclosed(rule.to_owned())),
            },
        };
        if tool.is_empty()
            || !tool
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '*')
        {
            return Err(AllowRuleError::BadName(rule.to_owned()));
        }
        if tool.contains('*') && !tool.starts_with(MCP_PREFIX) {
            return Err(AllowRuleError::WildName(rule.to_owned()));
        }
        let pattern = match inner {
            None => Pattern::Any,
            Some(p) if p.is_empty() || p == "*" || p == "**" => Pattern::Any,
            Some(p) if PATH_TOOLS.contains(&tool) => {
                let p = p.strip_prefix("./").unwrap_or(p);
                let glob = GlobBuilder::new(p)
                    .literal_separator(true)
                    .build()
                    .map_err(|e| AllowRuleError::BadGlob {
                        rule: rule.to_owned(),
                        message: e.to_string(),
                    })?;
                Pattern::Path(glob.compile_matcher())
            }
            Some(p) => Pattern::Wildcard(p.to_owned()),
        };
        Ok(Self {
            source: rule.to_owned(),
            tool: tool.to_owned(),
            pattern,
        })
    }
}

impl AllowRule {
    /// The rule as written.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// The tool the rule is about (for an MCP rule, maybe a `*` pattern).
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// Whether the rule is about the tool called `name`.
    pub fn matches_tool(&self, name: &str) -> bool {
        if self.tool.contains('*') {
            wildcard(&self.tool, name)
        } else {
            self.tool == name
        }
    }

    /// True when the rule covers every use of its tool.
    pub(crate) fn is_any(&self) -> bool {
        matches!(self.pattern, Pattern::Any)
    }

    /// Matches a text (bash command, or JSON input of other tools).
    pub(crate) fn matches_text(&self, text: &str) -> bool {
        match &self.pattern {
            Pattern::Any => true,
            Pattern::Wildcard(p) => wildcard(p, text.trim()),
            Pattern::Path(_) => false,
        }
    }

    /// Matches a path: relative to the workspace when inside it.
    pub(crate) fn matches_path(&self, workspace: &Path, path: &Path) -> bool {
        match &self.pattern {
            Pattern::Any => true,
            Pattern::Wildcard(_) => false,
            Pattern::Path(glob) => match path.strip_prefix(workspace) {
                Ok(rel) => glob.is_match(rel),
                Err(_) => glob.is_match(path),
            },
        }
    }
}

/// `*` matches any run of characters; everything else is literal.
fn wildcard(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if pi < p.len() && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards() {
        assert!(wildcard("git status*", "git status"));
        assert!(wildcard("git status*", "git status --short"));
        assert!(!wildcard("git status*", "git push"));
        assert!(wildcard("*test*", "cargo test -p x"));
        assert!(wildcard("a*b*c", "aXXbYYc"));
        assert!(!wildcard("a*b*c", "aXXbYY"));
        assert!(wildcard("", ""));
    }

    #[test]
    fn rules_parse() {
        let r: AllowRule = "write_file(src/**)".parse().unwrap();
        assert!(r.matches_path(Path::new("/w"), Path::new("/w/src/a/b.rs")));
        assert!(!r.matches_path(Path::new("/w"), Path::new("/w/tests/a.rs")));
        let r: AllowRule = "edit_file".parse().unwrap();
        assert!(r.is_any());
        assert!(matches!(
            "bash(git".parse::<AllowRule>(),
            Err(AllowRuleError::Unclosed(_))
        ));
        assert!(matches!(
            "(x)".parse::<AllowRule>(),
            Err(AllowRuleError::BadName(_))
        ));
        assert!(matches!(
            "ba sh".parse::<AllowRule>(),
            Err(AllowRuleError::BadName(_))
        ));
        assert!(matches!(
            "read_file([)".parse::<AllowRule>(),
            Err(AllowRuleError::BadGlob { .. })
        ));
    }

    #[test]
    fn mcp_rules_may_name_tools_by_pattern() {
        let r: AllowRule = "mcp__fs__*".parse().unwrap();
        assert!(r.matches_tool("mcp__fs__read_file"));
        assert!(!r.matches_tool("mcp__fsx__read_file"));
        assert!(!r.matches_tool("mcp__git__log"));
        let r: AllowRule = "mcp__fs__read_file(*notes*)".parse().unwrap();
        assert!(r.matches_tool("mcp__fs__read_file") && !r.matches_tool("mcp__fs__read"));
        assert!(r.matches_text(r#"{"path":"notes.txt"}"#));
        for wild in ["*", "bash*", "b*sh(ls)", "mcp_*"] {
            assert!(
                matches!(wild.parse::<AllowRule>(), Err(AllowRuleError::WildName(_))),
                "{wild}"
            );
        }
    }
}
