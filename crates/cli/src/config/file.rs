//! One config file as written: its shape, where the user's lies, and
//! reading it safely (a workspace's may be a cloned repository's). Apart
//! from the settings it feeds, so that trust can judge a file without
//! depending on how settings are resolved.

use crate::args::{Preset, SandboxMode};
use anyhow::bail;
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use whittle_agent::CommandHook;
use whittle_llm::{Effort, ModelFactsOverride, ModelSpec, Thinking};
use whittle_mcp::{ServerConfig, ServerEntry};
use whittle_tools::PermissionMode;

/// Looks up an environment variable; a function so tests need not touch the
/// process environment.
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// One config file as written. Unknown keys are errors: a typo should not
/// silently do nothing.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// `PROVIDER:NAME`.
    pub model: Option<String>,
    /// `default`, `read-only`, `accept-edits` or `yolo`.
    pub permission_mode: Option<PermissionMode>,
    /// `--allow` rules.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Model calls per task.
    pub max_turns: Option<u32>,
    /// Files larger than this many MiB are not kept in checkpoints (1 to
    /// 1,024).
    pub checkpoint_max_file_mb: Option<u64>,
    /// Output tokens per call.
    pub max_tokens: Option<u32>,
    /// `teaching`, or `default` for none.
    pub preset: Option<String>,
    /// Appended to the system prompt.
    pub system_prompt_extra: Option<String>,
    /// Hook commands.
    #[serde(default)]
    pub hooks: Vec<CommandHook>,
    /// Corrections to the built-in table of context windows, by model id.
    #[serde(default)]
    pub models: HashMap<String, ModelFactsOverride>,
    /// Fraction of the usable window at which compaction starts.
    pub auto_compact_fraction: Option<f64>,
    /// Tokens kept free for the answer (default: `max_tokens`). Past the
    /// window less these, a request asks for a shorter answer, down to a
    /// quarter of them, before the window forces a compaction.
    pub reserved_output_tokens: Option<u64>,
    /// Extended thinking: `"adaptive"`, `"off"` or a token budget.
    pub thinking: Option<Thinking>,
    /// `low` to `max`.
    pub effort: Option<Effort>,
    /// MCP servers, `[mcp_servers.NAME]`.
    #[serde(default)]
    pub mcp_servers: BTreeMap<String, ServerEntry>,
    /// Share of the window the MCP tool definitions may take (default 0.1).
    pub mcp_schema_share: Option<f64>,
    /// The REPL's line after each turn (default: on).
    pub status_line: Option<bool>,
    /// `[sandbox]`: how commands are confined.
    #[serde(default)]
    pub sandbox: SandboxConfig,
}

/// `[sandbox]` as written.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxConfig {
    /// `auto`, `read-only`, `workspace-write` or `off`.
    pub mode: Option<SandboxMode>,
    /// Whether commands have the network (default: off in read-only, on
    /// otherwise).
    pub network: Option<bool>,
    /// More folders commands may write (absolute or `~/...`).
    #[serde(default)]
    pub writable_roots: Vec<String>,
    /// More folders commands may read (absolute or `~/...`).
    #[serde(default)]
    pub read_roots: Vec<String>,
    /// More environment variables commands do not inherit, and whose values
    /// are redacted like the provider keys.
    #[serde(default)]
    pub hide_env: Vec<String>,
}

/// The user's config file: `$XDG_CONFIG_HOME/whittle/config.toml`, else
/// `$HOME/.config/whittle/config.toml`.
pub fn user_config_path(env: Env<'_>) -> Option<PathBuf> {
    let absolute = |v: String| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
    env("XDG_CONFIG_HOME")
        .and_then(absolute)
        .or_else(|| env("HOME").and_then(absolute).map(|h| h.join(".config")))
        .map(|dir| dir.join("whittle").join("config.toml"))
}

/// Largest config file read.
const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// Reads one config file; `Ok(None)` when it does not exist.
/// A workspace's config may be the repository's: a FIFO or a device there
/// is refused at once rather than read.
pub fn read_file_config(path: &Path) -> anyhow::Result<Option<FileConfig>> {
    let bytes = match whittle_sandbox::read_regular_file(path, MAX_CONFIG_BYTES) {
        Ok(b) => b,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => bail!("config file: {e}"),
    };
    let Ok(text) = String::from_utf8(bytes) else {
        bail!("config file {}: not valid UTF-8", path.display());
    };
    let config = parse_file_config(&text)
        .map_err(|problem| anyhow::anyhow!("config file {}: {problem}", path.display()))?;
    Ok(Some(config))
}

/// Parses and checks a config file's text; the error is one line.
pub fn parse_file_config(text: &str) -> Result<FileConfig, String> {
    let config: FileConfig = toml::from_str(text).map_err(|e| {
        let message = whittle_protocol::collapse_whitespace(e.message());
        match e.span() {
            Some(span) => {
                let (line, column) = line_column(text, span.start);
                let source = text.lines().nth(line - 1).unwrap_or("").trim();
                let source: String = source.chars().take(80).collect();
                format!("line {line}, column {column} (`{source}`): {message}")
            }
            None => message,
        }
    })?;
    if let Some(p) = &config.preset
        && p != "default"
        && Preset::parse(p).is_none()
    {
        return Err(format!(
            "unknown preset {p:?}; expected \"teaching\" or \"default\""
        ));
    }
    if let Some(f) = config.auto_compact_fraction
        && !(f > 0.0 && f <= 1.0)
    {
        return Err(format!(
            "auto_compact_fraction must be above 0 and at most 1, not {f}"
        ));
    }
    for rule in &config.allow {
        rule.parse::<whittle_tools::AllowRule>()
            .map_err(|e| e.to_string())?;
    }
    if let Some(m) = &config.model {
        m.parse::<ModelSpec>().map_err(|e| format!("model: {e}"))?;
    }
    for root in config
        .sandbox
        .writable_roots
        .iter()
        .chain(&config.sandbox.read_roots)
    {
        if !(root.starts_with('/') || root.starts_with("~/")) {
            return Err(format!(
                "sandbox root {root:?} must be an absolute path or start with ~/"
            ));
        }
    }
    for (name, entry) in &config.mcp_servers {
        ServerConfig::from_entry(name, entry).map_err(|e| e.to_string())?;
    }
    if let Some(f) = config.mcp_schema_share
        && !(0.0..=1.0).contains(&f)
    {
        return Err(format!(
            "mcp_schema_share must be from 0 (always search MCP tools) to 1, not {f}"
        ));
    }
    Ok(config)
}

/// 1-based line and column of byte `offset` in `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset.min(text.len())).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}
