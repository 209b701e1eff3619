//! Skills: instructions the model loads on demand. Each lives in
//! `<workspace>/.whittle/skills/<name>/SKILL.md`, starting with a YAML front
//! matter that holds at least `name` and `description`:
//!
//! ```text
//! ---
//! name: release
//! description: How to cut a release of this project.
//! ---
//! Steps...
//! ```
//!
//! The names and descriptions go into the system prompt
//! ([`Skills::prompt_listing`]); `load_skill` returns a body when the model asks.

use std::fs;
use std::path::{Path, PathBuf};
use whittle_protocol::tool_names;

use futures::future::BoxFuture;
use serde::Deserialize;

use crate::paths::real_path;
use crate::tool::{ToolContext, ToolOutput};
use crate::truncate::{cap_line, cap_middle};
use crate::typed::TypedTool;
use schemars::JsonSchema;

/// Where skills live, relative to the workspace.
pub const SKILLS_DIR: &str = ".whittle/skills";
/// A SKILL.md larger than this is refused.
const MAX_SKILL_BYTES: u64 = 1024 * 1024;
/// Characters of a body returned by `load_skill`.
const MAX_BODY_CHARS: usize = 100_000;
/// Characters of a description shown in the system prompt.
const MAX_LISTED_DESCRIPTION: usize = 1024;
/// Longest accepted skill name.
const MAX_NAME_CHARS: usize = 64;

/// Why a SKILL.md could not be used.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum SkillError {
    /// The file does not start with a `---` line.
    #[error("no front matter: the file must start with a line `---`")]
    NoFrontMatter,
    /// The opening `---` has no closing `---`.
    #[error("front matter is not closed by a line `---`")]
    Unterminated,
    /// A front matter line is not YAML this parser understands.
    #[error("front matter line {line}: {message}")]
    Syntax {
        /// 1-based line number within the file.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A required key is missing or empty.
    #[error("front matter has no `{0}`")]
    Missing(&'static str),
    /// The name cannot be used to call the skill.
    #[error("invalid name {0:?}: use at most 64 letters, digits, `-`, `_` or `.`")]
    BadName(String),
}

/// A skill's front matter and body, parsed from a SKILL.md text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsedSkill {
    /// The name the model loads the skill by.
    pub name: String,
    /// When to use the skill, shown in the system prompt.
    pub description: String,
    /// The instructions after the front matter.
    pub body: String,
}

/// Parses a SKILL.md text. Unknown keys (and nested values under them) are
/// ignored; `name` and `description` may be plain, quoted, or `|`/`>` blocks.
pub fn parse_skill(text: &str) -> Result<ParsedSkill, SkillError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    match lines.next() {
        Some(first) if first.trim_end() == "---" => {}
        _ => return Err(SkillError::NoFrontMatter),
    }
    let mut front: Vec<&str> = Vec::new();
    let mut consumed = text.split_inclusive('\n').next().map_or(0, str::len);
    let mut closed = false;
    for line in lines {
        consumed += line.len();
        let bare = line.trim_end();
        if bare == "---" || bare == "..." {
            closed = true;
            break;
        }
        front.push(line.trim_end_matches(['\n', '\r']));
    }
    if !closed {
        return Err(SkillError::Unterminated);
    }
    let (name, description) = parse_front(&front)?;
    let name = name.ok_or(SkillError::Missing("name"))?;
    let description = description.ok_or(SkillError::Missing("description"))?;
    if name.chars().count() > MAX_NAME_CHARS
        || !name
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err(SkillError::BadName(name));
    }
    Ok(ParsedSkill {
        name,
        description,
        body: text[consumed..].trim_start_matches(['\n', '\r']).to_owned(),
    })
}

/// Reads `name` and `description` from front matter lines (line 1 of the
/// slice is line 2 of the file).
fn parse_front(lines: &[&str]) -> Result<(Option<String>, Option<String>), SkillError> {
    let mut name = None;
    let mut description = None;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let lineno = i + 2;
        i += 1;
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') || line.starts_with([' ', '\t']) {
            // Blank, comment, or a nested value of a key we do not read.
            continue;
        }
        let Some((key, rest)) = split_key(line) else {
            return Err(SkillError::Syntax {
                line: lineno,
                message: format!("expected `key: value`, found {:?}", cap_line(trimmed, 60)),
            });
        };
        let wanted = match key {
            "name" => &mut name,
            "description" => &mut description,
            _ => continue,
        };
        let value = rest.trim();
        // Indented lines that follow belong to this value.
        let start = i;
        while i < lines.len() && (lines[i].trim().is_empty() || lines[i].starts_with([' ', '\t'])) {
            i += 1;
        }
        let continuation = &lines[start..i];
        let parsed = if let Some(style) = value.chars().next().filter(|c| matches!(c, '|' | '>')) {
            block_scalar(style, continuation)
        } else if value.starts_with('"') || value.starts_with('\'') {
            let joined = std::iter::once(value)
                .chain(continuation.iter().map(|l| l.trim()))
                .collect::<Vec<_>>()
                .join(" ");
            quoted(&joined).map_err(|message| SkillError::Syntax {
                line: lineno,
                message,
            })?
        } else {
            let first = strip_comment(value);
            std::iter::once(first)
                .chain(continuation.iter().map(|l| l.trim()))
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
        };
        let parsed = parsed.trim().to_owned();
        *wanted = (!parsed.is_empty()).then_some(parsed);
    }
    Ok((name, description))
}

/// Splits `key: rest` (the colon must end the line or be followed by a space).
fn split_key(line: &str) -> Option<(&str, &str)> {
    let mut search = 0;
    while let Some(pos) = line[search..].find(':') {
        let at = search + pos;
        let after = &line[at + 1..];
        if after.is_empty() || after.starts_with([' ', '\t']) {
            let key = line[..at].trim().trim_matches(['"', '\'']);
            return (!key.is_empty()).then_some((key, after));
        }
        search = at + 1;
    }
    None
}

/// A plain scalar ends at ` #`.
fn strip_comment(value: &str) -> &str {
    match value.find(" #") {
        Some(at) => value[..at].trim_end(),
        None => value,
    }
}

/// A `|` (literal) or `>` (folded) block: the indented lines after the key.
fn block_scalar(style: char, lines: &[&str]) -> String {
    let indent = lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    let body: Vec<&str> = lines
        .iter()
        .map(|l| l.get(indent..).unwrap_or(""))
        .collect();
    if style == '|' {
        return body.join("\n");
    }
    let mut out = String::new();
    for line in body {
        if line.trim().is_empty() {
            out.push('\n');
        } else {
            if !out.is_empty() && !out.ends_with('\n') {
                out.push(' ');
            }
            out.push_str(line.trim_end());
        }
    }
    out
}

/// A single- or double-quoted scalar, which must close and end the value.
fn quoted(value: &str) -> Result<String, String> {
    let mut chars = value.chars();
    let quote = chars.next().unwrap_or('"');
    let mut out = String::new();
    loop {
        match chars.next() {
            None => return Err("unterminated quoted string".to_owned()),
            Some(c) if c == quote => {
                if quote == '\'' && chars.clone().next() == Some('\'') {
                    chars.next();
                    out.push('\'');
                    continue;
                }
                break;
            }
            Some('\\') if quote == '"' => match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('"') => out.push('"'),
                Some('\\') => out.push('\\'),
                Some('/') => out.push('/'),
                Some(other) => {
                    out.push('\\');
                    out.push(other);
                }
                None => return Err("unterminated quoted string".to_owned()),
            },
            Some(c) => out.push(c),
        }
    }
    let rest = strip_comment(chars.as_str().trim());
    if !rest.is_empty() && !rest.starts_with('#') {
        return Err(format!("unexpected text after the closing quote: {rest:?}"));
    }
    Ok(out)
}

/// A skill found on disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skill {
    /// The name the model loads it by.
    pub name: String,
    /// When to use it.
    pub description: String,
    /// The SKILL.md file.
    pub path: PathBuf,
}

/// A SKILL.md that could not be used, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkillProblem {
    /// The file (or folder) in question.
    pub path: PathBuf,
    /// One line on what is wrong.
    pub message: String,
}

/// The skills of a workspace: the usable ones and the broken ones.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Skills {
    /// Usable skills, sorted by folder name.
    pub skills: Vec<Skill>,
    /// Files that were skipped, so the CLI can warn about them.
    pub problems: Vec<SkillProblem>,
}

impl Skills {
    /// Reads every `<workspace>/.whittle/skills/*/SKILL.md`. A missing folder
    /// means no skills; nothing here fails or panics.
    pub fn discover(workspace: &Path) -> Self {
        let dir = workspace.join(SKILLS_DIR);
        let mut out = Skills::default();
        let Ok(entries) = fs::read_dir(&dir) else {
            return out;
        };
        let mut folders: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect();
        folders.sort();
        let mut found: Vec<Skill> = Vec::new();
        for folder in folders {
            let path = folder.join("SKILL.md");
            match load(workspace, &path) {
                Ok(parsed) => found.push(Skill {
                    name: parsed.name,
                    description: parsed.description,
                    path,
                }),
                Err(message) => out.problems.push(SkillProblem { path, message }),
            }
        }
        // Of skills sharing a name, the one in the folder of that name wins.
        let in_own_folder = |s: &Skill| folder_name(&s.path).is_some_and(|f| f == s.name);
        for skill in &found {
            let winner = found
                .iter()
                .filter(|s| s.name == skill.name)
                .find(|s| in_own_folder(s))
                .or_else(|| found.iter().find(|s| s.name == skill.name));
            if winner.is_some_and(|w| w.path == skill.path) {
                out.skills.push(skill.clone());
            } else {
                out.problems.push(SkillProblem {
                    path: skill.path.clone(),
                    message: format!("a skill named {:?} already exists", skill.name),
                });
            }
        }
        out.problems.sort_by(|a, b| a.path.cmp(&b.path));
        out
    }

    /// The section of the system prompt that lists the skills; empty when
    /// there are none.
    pub fn prompt_listing(&self) -> String {
        if self.skills.is_empty() {
            return String::new();
        }
        let mut out = String::from(
            "Skills (call load_skill with the name to read one when the task matches its description):\n",
        );
        for s in &self.skills {
            let description = s.description.replace('\n', " ");
            out.push_str(&format!(
                "- {}: {}\n",
                s.name,
                cap_line(&description, MAX_LISTED_DESCRIPTION)
            ));
        }
        out
    }

    /// Finds a skill by its name, or by its folder name.
    pub fn find(&self, name: &str) -> Option<&Skill> {
        self.skills.iter().find(|s| s.name == name).or_else(|| {
            self.skills
                .iter()
                .find(|s| folder_name(&s.path) == Some(name))
        })
    }
}

/// The name of the folder holding a SKILL.md.
fn folder_name(skill_md: &Path) -> Option<&str> {
    skill_md.parent()?.file_name()?.to_str()
}

/// Reads and parses one SKILL.md, with a one-line error. As with AGENTS.md,
/// it may be a link to another file in the workspace but never lead out of
/// it, through its own name or a folder on the way (`.whittle`, a skill's
/// folder): the repository chooses these links, and what is read goes to
/// the model. It must be a regular file of bounded size, read by an open
/// that cannot block: a FIFO would hang the start-up, `/dev/zero` would
/// never end. It is read at the path the check resolved, so that a link
/// put at its name after the check is not followed.
fn load(workspace: &Path, path: &Path) -> Result<ParsedSkill, String> {
    let real = real_path(path).ok_or("SKILL.md leads nowhere (a loop of links)")?;
    if !real_path(workspace).is_some_and(|ws| real.starts_with(ws)) {
        return Err("SKILL.md leads outside the workspace: not read".to_owned());
    }
    let bytes =
        whittle_sandbox::read_regular_file(&real, MAX_SKILL_BYTES).map_err(|e| match e {
            e if e.is_not_found() => "the folder has no SKILL.md".to_owned(),
            whittle_sandbox::ReadError::NotRegular { .. } => {
                "SKILL.md is not a regular file".to_owned()
            }
            whittle_sandbox::ReadError::TooLarge { .. } => {
                format!("SKILL.md is larger than {MAX_SKILL_BYTES} bytes")
            }
            other => format!("cannot read SKILL.md: {other}"),
        })?;
    let text = String::from_utf8(bytes).map_err(|_| "SKILL.md is not valid UTF-8".to_owned())?;
    parse_skill(&text).map_err(|e| e.to_string())
}

/// The `load_skill` tool.
#[derive(Debug, Default)]
pub struct LoadSkillTool;

/// What the model sends to `load_skill`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoadSkillInput {
    /// The skill's name as listed.
    #[schemars(length(min = 1))]
    pub name: String,
}

impl TypedTool for LoadSkillTool {
    type Input = LoadSkillInput;
    const NAME: &'static str = tool_names::LOAD_SKILL;
    const DESCRIPTION: &'static str = "Load the full instructions of a skill listed in the system prompt, by name. Do this \
         before starting a task that matches the skill's description.";
    const READ_ONLY: bool = true;

    fn call<'a>(
        &'a self,
        input: LoadSkillInput,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let workspace = ctx.workspace().to_path_buf();
            let job = tokio::task::spawn_blocking(move || load_by_name(&workspace, &input.name));
            job.await
                .unwrap_or_else(|e| ToolOutput::error(format!("load_skill failed: {e}")))
        })
    }
}

fn load_by_name(workspace: &Path, name: &str) -> ToolOutput {
    let skills = Skills::discover(workspace);
    let Some(skill) = skills.find(name) else {
        if let Some(p) = skills
            .problems
            .iter()
            .find(|p| folder_name(&p.path) == Some(name))
        {
            return ToolOutput::error(format!(
                "skill {name:?} cannot be loaded: {} ({})",
                p.message,
                crate::paths::display_path(workspace, &p.path)
            ));
        }
        let names: Vec<&str> = skills.skills.iter().map(|s| s.name.as_str()).collect();
        return ToolOutput::error(if names.is_empty() {
            format!("no skill named {name:?}: this workspace has no skills")
        } else {
            format!("no skill named {name:?}; available: {}", names.join(", "))
        });
    };
    match load(workspace, &skill.path) {
        Ok(parsed) => {
            let dir = skill.path.parent().unwrap_or(workspace);
            ToolOutput::ok(format!(
                "<skill name=\"{}\" folder=\"{}\">\n{}\n</skill>",
                parsed.name,
                crate::paths::display_path(workspace, dir),
                cap_middle(
                    parsed.body.trim_end(),
                    MAX_BODY_CHARS,
                    &crate::paths::display_path(workspace, &skill.path)
                )
            ))
        }
        Err(message) => ToolOutput::error(format!("skill {name:?} cannot be loaded: {message}")),
    }
}
