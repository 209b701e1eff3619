//! Settings from config files, the environment and flags, later wins:
//! `~/.config/whittle/config.toml`, `<workspace>/.whittle/config.toml`,
//! `WHITTLE_MODEL`, then the command line.
//!
//! Its submodules turn settings into the things a session runs with: the
//! provider (`providers`), the agent (`setup`), the sandbox (`sandboxing`),
//! what a workspace may widen once the person trusts it (`trust`), and
//! whittle's own folder in it (`state_dir`).

pub(crate) mod file;
pub(crate) mod providers;
pub(crate) mod sandboxing;
pub(crate) mod setup;
pub(crate) mod state_dir;
pub(crate) mod trust;

use crate::args::{AgentArgs, Preset, SandboxMode};
pub use crate::config::file::{Env, FileConfig, read_file_config, user_config_path};
use anyhow::{Context, bail};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use trust::Widening;
use whittle_agent::{CommandHook, SessionKey};
use whittle_context::TokenBudget;
use whittle_llm::{ModelFactsOverride, ModelSpec, Reasoning};
use whittle_mcp::{ServerConfig, ServerEntry};
use whittle_tools::PermissionMode;

/// Share of the window the MCP tools' definitions may take before they are
/// searched with `mcp_tool_search` instead of sent whole.
pub const DEFAULT_MCP_SCHEMA_SHARE: f64 = 0.10;

/// Model calls one task may make unless configured.
pub const DEFAULT_MAX_TURNS: u32 = 200;

/// Output tokens per call unless configured: the model's own limit, capped,
/// since every token reserved for output is taken from the context.
pub const DEFAULT_MAX_TOKENS_CAP: u64 = 32_000;

/// `[sandbox]` with every layer and flag applied.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SandboxSettings {
    /// The mode.
    pub mode: SandboxMode,
    /// The network, when configured.
    pub network: Option<bool>,
    /// Extra writable folders, `~` expanded.
    pub writable_roots: Vec<PathBuf>,
    /// Extra readable folders, `~` expanded.
    pub read_roots: Vec<PathBuf>,
    /// Extra hidden variables.
    pub hide_env: Vec<String>,
}

/// A model spec and where it was given, for error messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelChoice {
    /// The parsed spec.
    pub spec: ModelSpec,
    /// `--model`, `WHITTLE_MODEL`, or a config file path.
    pub source: String,
}

/// Everything resolved; what the rest of the program uses.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The folder the agent works in (absolute).
    pub workspace: PathBuf,
    /// The model, when configured anywhere; `None` picks by available keys.
    pub model: Option<ModelChoice>,
    /// The permission mode.
    pub permission_mode: PermissionMode,
    /// Allow rules: config files' first, then flags.
    pub allow: Vec<String>,
    /// Model calls per task.
    pub max_turns: u32,
    /// Files over this many bytes are listed in a checkpoint, not kept.
    pub checkpoint_max_file_size: u64,
    /// Output tokens per call, when configured.
    pub max_tokens: Option<u32>,
    /// The preset, if any.
    pub preset: Option<Preset>,
    /// Appended to the system prompt.
    pub system_prompt_extra: Option<String>,
    /// Hook commands, user config first.
    pub hooks: Vec<CommandHook>,
    /// Context window corrections.
    pub models: HashMap<String, ModelFactsOverride>,
    /// When compaction starts, as a fraction of the usable window.
    pub auto_compact_fraction: f64,
    /// Tokens kept free for answers, when configured.
    pub reserved_output_tokens: Option<u64>,
    /// Thinking and effort for every model call.
    pub reasoning: Reasoning,
    /// MCP servers by name; a later file's entry replaces an earlier one.
    pub mcp_servers: BTreeMap<String, ServerEntry>,
    /// Share of the window the MCP tool definitions may take.
    pub mcp_schema_share: f64,
    /// The person's own instruction file, `AGENTS.md` beside the user config.
    pub user_instructions: Option<PathBuf>,
    /// The config files that were read, in order.
    pub files: Vec<PathBuf>,
    /// What the project config asked for and did not get: the folder is not
    /// trusted.
    pub withheld: Option<Widening>,
    /// How commands are confined.
    pub sandbox: SandboxSettings,
    /// Whether the REPL prints its status line after each turn.
    pub status_line: bool,
    /// The person's key that seals the session logs whittle starts (see
    /// `whittle_agent::SessionKey`); `None` when it could not be had.
    pub session_key: Option<SessionKey>,
    /// Whether the person said this folder's content is theirs (trusted,
    /// or `--trust-project`): then a log the key did not seal is resumed.
    pub folder_trusted: bool,
}

/// `.whittle` in `workspace`: where its sessions, saved outputs and
/// transcripts live.
pub fn state_dir_of(workspace: &Path) -> PathBuf {
    workspace.join(".whittle")
}

impl Settings {
    /// `.whittle` in the workspace: sessions, saved outputs, transcripts.
    pub fn state_dir(&self) -> PathBuf {
        state_dir_of(&self.workspace)
    }

    /// The enabled MCP servers, checked (each entry was checked when its
    /// file was read, so this fails only for settings built by hand).
    pub fn mcp_server_configs(&self) -> anyhow::Result<Vec<ServerConfig>> {
        let mut out = Vec::new();
        for (name, entry) in &self.mcp_servers {
            if let Some(c) = ServerConfig::from_entry(name, entry)? {
                out.push(c);
            }
        }
        Ok(out)
    }
}

/// The largest file checkpoints keep, in MiB, whatever a config says.
pub const MAX_CHECKPOINT_FILE_MB: u64 = 1024;

/// Asked when a folder's own config would widen what runs and the folder is
/// not trusted yet; `true` trusts it from now on.
pub type AskTrust<'a> = &'a dyn Fn(&Widening) -> bool;

/// Resolves the workspace and every setting from files, `env` and `args`.
/// What the project config would widen applies only in a trusted folder
/// (see [`crate::config::trust`]); `ask` may make it trusted, else it is withheld and
/// named in [`Settings::withheld`].
pub fn load(args: &AgentArgs, env: Env<'_>, ask: Option<AskTrust<'_>>) -> anyhow::Result<Settings> {
    let workspace = workspace(args.cwd.as_deref())?;
    let mut folder_trusted = args.trust_project || trust::is_trusted(env, &workspace);
    if !folder_trusted {
        state_dir::refuse_links(&workspace)?;
    }
    let mut layers = Vec::new();
    if let Some(path) = user_config_path(env)
        && let Some(config) = read_file_config(&path)?
    {
        layers.push((path, config));
    }
    let mut withheld = None;
    let project = workspace.join(".whittle").join("config.toml");
    if let Some(mut config) = read_file_config(&project)? {
        let base = layers
            .first()
            .and_then(|(_, user): &(PathBuf, FileConfig)| user.permission_mode)
            .unwrap_or_default();
        if let Some(w) = Widening::of(&project, &config, base)
            && !folder_trusted
        {
            if ask.is_some_and(|ask| ask(&w)) {
                trust::remember(env, &workspace)?;
                folder_trusted = true;
            } else {
                w.withhold_from(&mut config);
                withheld = Some(w);
            }
        }
        layers.push((project, config));
    }
    let mut settings = resolve(workspace, layers, args, env)?;
    settings.withheld = withheld;
    settings.folder_trusted = folder_trusted;
    settings.session_key =
        match trust::session_key_path(env).map(|p| SessionKey::load_or_create(&p)) {
            Some(Ok(key)) => Some(key),
            // Sessions still work, unsealed, and any log is resumed.
            Some(Err(e)) => {
                eprintln!("whittle: {e}; session logs are not sealed");
                None
            }
            None => None,
        };
    Ok(settings)
}

pub fn workspace(cwd: Option<&Path>) -> anyhow::Result<PathBuf> {
    let dir = match cwd {
        Some(d) => d.to_path_buf(),
        None => std::env::current_dir().context("cannot read the current folder")?,
    };
    let dir = dir
        .canonicalize()
        .with_context(|| format!("workspace {}: no such folder (check --cwd)", dir.display()))?;
    if !dir.is_dir() {
        bail!("workspace {} is not a folder (check --cwd)", dir.display());
    }
    Ok(dir)
}

/// Applies the layers in order, then `WHITTLE_MODEL`, then the flags.
pub fn resolve(
    workspace: PathBuf,
    layers: Vec<(PathBuf, FileConfig)>,
    args: &AgentArgs,
    env: Env<'_>,
) -> anyhow::Result<Settings> {
    let mut s = Settings::defaults(workspace, env);
    let home = env("HOME").filter(|h| h.starts_with('/'));
    for (path, c) in layers {
        s.apply_file(c, &path.display().to_string(), home.as_deref())?;
        s.files.push(path);
    }
    if let Some(m) = env("WHITTLE_MODEL").filter(|m| !m.trim().is_empty()) {
        s.model = Some(choice(&m, "WHITTLE_MODEL")?);
    }
    s.apply_flags(args)?;
    s.check()?;
    Ok(s)
}

impl Settings {
    /// What holds with no config file, no environment and no flag.
    fn defaults(workspace: PathBuf, env: Env<'_>) -> Settings {
        Settings {
            workspace,
            model: None,
            permission_mode: PermissionMode::Default,
            allow: Vec::new(),
            max_turns: DEFAULT_MAX_TURNS,
            checkpoint_max_file_size: whittle_agent::DEFAULT_CHECKPOINT_MAX_FILE_SIZE,
            max_tokens: None,
            preset: None,
            system_prompt_extra: None,
            hooks: Vec::new(),
            models: HashMap::new(),
            auto_compact_fraction: TokenBudget::DEFAULT_FRACTION,
            reserved_output_tokens: None,
            reasoning: Reasoning::default(),
            mcp_servers: BTreeMap::new(),
            mcp_schema_share: DEFAULT_MCP_SCHEMA_SHARE,
            user_instructions: user_config_path(env).map(|p| p.with_file_name("AGENTS.md")),
            files: Vec::new(),
            withheld: None,
            sandbox: SandboxSettings::default(),
            status_line: true,
            session_key: None,
            folder_trusted: false,
        }
    }

    /// One config file's settings (from `source`) over what came before;
    /// `home` expands `~/` in sandbox roots.
    fn apply_file(
        &mut self,
        c: FileConfig,
        source: &str,
        home: Option<&str>,
    ) -> anyhow::Result<()> {
        let s = self;
        let expand = |root: &str| -> anyhow::Result<PathBuf> {
            match root.strip_prefix("~/") {
                Some(rest) => match home {
                    Some(h) => Ok(Path::new(h).join(rest)),
                    None => bail!("sandbox root {root:?}: HOME is not set"),
                },
                None => Ok(PathBuf::from(root)),
            }
        };
        if let Some(m) = c.model {
            s.model = Some(choice(&m, source)?);
        }
        if let Some(m) = c.permission_mode {
            s.permission_mode = m;
        }
        s.allow.extend(c.allow);
        if let Some(n) = c.max_turns {
            s.max_turns = n;
        }
        if let Some(mb) = c.checkpoint_max_file_mb {
            // At least 1 MiB: a project's config cannot turn keeping off;
            // at most MAX_CHECKPOINT_FILE_MB: a snapshot holds a file in
            // memory while it hashes it, and a sandboxed command can make a
            // sparse file of terabytes.
            s.checkpoint_max_file_size = mb
                .clamp(1, MAX_CHECKPOINT_FILE_MB)
                .saturating_mul(1024 * 1024);
        }
        if let Some(n) = c.max_tokens {
            s.max_tokens = Some(n);
        }
        if let Some(p) = c.preset {
            s.preset = Preset::parse(&p);
        }
        if let Some(extra) = c.system_prompt_extra {
            s.system_prompt_extra = Some(extra);
        }
        s.hooks.extend(c.hooks);
        s.models.extend(c.models);
        if let Some(f) = c.auto_compact_fraction {
            s.auto_compact_fraction = f;
        }
        if let Some(n) = c.reserved_output_tokens {
            s.reserved_output_tokens = Some(n);
        }
        if let Some(t) = c.thinking {
            s.reasoning.thinking = t;
        }
        if let Some(e) = c.effort {
            s.reasoning.effort = Some(e);
        }
        if let Some(on) = c.status_line {
            s.status_line = on;
        }
        if let Some(m) = c.sandbox.mode {
            s.sandbox.mode = m;
        }
        if let Some(n) = c.sandbox.network {
            s.sandbox.network = Some(n);
        }
        for r in &c.sandbox.writable_roots {
            s.sandbox.writable_roots.push(expand(r)?);
        }
        for r in &c.sandbox.read_roots {
            s.sandbox.read_roots.push(expand(r)?);
        }
        s.sandbox.hide_env.extend(c.sandbox.hide_env);
        s.mcp_servers.extend(c.mcp_servers);
        if let Some(f) = c.mcp_schema_share {
            s.mcp_schema_share = f;
        }
        Ok(())
    }

    /// The command line's flags, over everything else.
    fn apply_flags(&mut self, args: &AgentArgs) -> anyhow::Result<()> {
        let s = self;
        if let Some(m) = &args.model {
            s.model = Some(choice(m, "--model")?);
        }
        if let Some(m) = args.permission_mode {
            s.permission_mode = m;
        }
        if let Some(m) = args.sandbox {
            s.sandbox.mode = m;
        }
        for rule in &args.allow {
            rule.parse::<whittle_tools::AllowRule>()
                .map_err(|e| anyhow::anyhow!("--allow: {e}"))?;
        }
        s.allow.extend(args.allow.iter().cloned());
        if let Some(n) = args.max_turns {
            s.max_turns = n;
        }
        if let Some(n) = args.max_tokens {
            s.max_tokens = Some(n);
        }
        if let Some(p) = args.preset {
            s.preset = Some(p);
        }
        if let Some(t) = args.thinking {
            s.reasoning.thinking = t;
        }
        if let Some(e) = args.effort {
            s.reasoning.effort = Some(e);
        }
        if args.no_status {
            s.status_line = false;
        }
        Ok(())
    }

    /// Values no layer may set.
    fn check(&self) -> anyhow::Result<()> {
        if self.max_turns == 0 {
            bail!("max_turns must be at least 1");
        }
        if self.max_tokens == Some(0) {
            bail!("max_tokens must be at least 1");
        }
        Ok(())
    }
}

fn choice(spec: &str, source: &str) -> anyhow::Result<ModelChoice> {
    let parsed = spec
        .parse::<ModelSpec>()
        .map_err(|e| anyhow::anyhow!("{source}: {e}"))?;
    Ok(ModelChoice {
        spec: parsed,
        source: source.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use whittle_llm::{Effort, Thinking};

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn layer(name: &str, text: &str) -> (PathBuf, FileConfig) {
        (
            PathBuf::from(name),
            crate::config::file::parse_file_config(text).unwrap(),
        )
    }

    #[test]
    fn later_layers_win_and_lists_accumulate() {
        let user = layer(
            "/home/u/.config/whittle/config.toml",
            r#"
model = "anthropic:claude-opus-5-5"
permission_mode = "read-only"
allow = ["bash(git status*)"]
max_turns = 10
auto_compact_fraction = 0.5
checkpoint_max_file_mb = 64
[[hooks]]
event = "PreToolUse"
command = "true"
[models."my-model"]
context_window = 32000
"#,
        );
        let project = layer(
            "/w/.whittle/config.toml",
            r#"
model = "openai:gpt-5"
allow = ["edit_file"]
preset = "teaching"
"#,
        );
        let args = AgentArgs {
            permission_mode: Some(PermissionMode::Yolo),
            allow: vec!["bash(cargo test)".into()],
            max_tokens: Some(1000),
            ..AgentArgs::default()
        };
        let s = resolve("/w".into(), vec![user, project], &args, &no_env).unwrap();
        let model = s.model.unwrap();
        assert_eq!(model.spec.to_string(), "openai:gpt-5");
        assert_eq!(model.source, "/w/.whittle/config.toml");
        assert_eq!(s.permission_mode, PermissionMode::Yolo);
        assert_eq!(
            s.allow,
            ["bash(git status*)", "edit_file", "bash(cargo test)"]
        );
        assert_eq!(s.max_turns, 10);
        assert_eq!(s.checkpoint_max_file_size, 64 * 1024 * 1024);
        assert_eq!(s.max_tokens, Some(1000));
        assert_eq!(s.preset, Some(Preset::Teaching));
        assert_eq!(s.hooks.len(), 1);
        assert_eq!(s.models["my-model"].context_window, Some(32000));
        assert_eq!(s.auto_compact_fraction, 0.5);
    }

    #[test]
    fn the_checkpoint_file_cap_is_bounded_both_ways() {
        for (mb, bytes) in [(0, 1 << 20), (100_000_000, MAX_CHECKPOINT_FILE_MB << 20)] {
            let project = layer(
                "/w/.whittle/config.toml",
                &format!("checkpoint_max_file_mb = {mb}"),
            );
            let s = resolve("/w".into(), vec![project], &AgentArgs::default(), &no_env).unwrap();
            assert_eq!(s.checkpoint_max_file_size, bytes, "{mb} MiB");
        }
    }

    #[test]
    fn mcp_servers_merge_by_name_and_later_files_win() {
        let user = layer(
            "/u.toml",
            r#"
[mcp_servers.fs]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "."]
env = { KEY = "value" }
startup_timeout_s = 20
tool_timeout_s = 120
[mcp_servers.remote]
url = "https://example.invalid/mcp"
headers = { Authorization = "Bearer ${REMOTE_TOKEN}" }
"#,
        );
        let project = layer(
            "/w.toml",
            "mcp_schema_share = 0.25\n[mcp_servers.remote]\nurl = \"http://127.0.0.1:9/mcp\"\nenabled = false\n",
        );
        let s = resolve(
            "/w".into(),
            vec![user, project],
            &AgentArgs::default(),
            &no_env,
        )
        .unwrap();
        assert_eq!(s.mcp_schema_share, 0.25);
        let configs = s.mcp_server_configs().unwrap();
        let names: Vec<&str> = configs.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["fs"], "remote was turned off by the later file");
        assert_eq!(configs[0].tool_timeout, std::time::Duration::from_secs(120));
        let defaults = resolve("/w".into(), vec![], &AgentArgs::default(), &no_env).unwrap();
        assert_eq!(defaults.mcp_schema_share, DEFAULT_MCP_SCHEMA_SHARE);
    }

    #[test]
    fn the_status_line_is_on_unless_a_file_or_the_flag_turns_it_off() {
        let on = resolve("/w".into(), Vec::new(), &AgentArgs::default(), &no_env).unwrap();
        assert!(on.status_line);
        let off = layer("/u/config.toml", "status_line = false");
        let s = resolve("/w".into(), vec![off], &AgentArgs::default(), &no_env).unwrap();
        assert!(!s.status_line);
        let back_on = layer("/w/.whittle/config.toml", "status_line = true");
        let args = AgentArgs {
            no_status: true,
            ..AgentArgs::default()
        };
        let s = resolve("/w".into(), vec![back_on], &args, &no_env).unwrap();
        assert!(!s.status_line, "the flag wins");
    }

    #[test]
    fn thinking_and_effort_come_from_files_and_flags() {
        let files = vec![
            layer("/u.toml", "thinking = 16000\neffort = \"low\""),
            layer("/w.toml", "thinking = \"adaptive\""),
        ];
        let s = resolve("/w".into(), files, &AgentArgs::default(), &no_env).unwrap();
        assert_eq!(s.reasoning.thinking, Thinking::Adaptive);
        assert_eq!(s.reasoning.effort, Some(Effort::Low));
        let args = AgentArgs {
            thinking: Some(Thinking::Off),
            effort: Some(Effort::Max),
            ..AgentArgs::default()
        };
        let s = resolve("/w".into(), vec![], &args, &no_env).unwrap();
        assert_eq!(s.reasoning.thinking, Thinking::Off);
        assert_eq!(s.reasoning.effort, Some(Effort::Max));
    }

    #[test]
    fn env_beats_files_and_flags_beat_env() {
        let env =
            |k: &str| (k == "WHITTLE_MODEL").then(|| "anthropic:claude-haiku-5-5".to_string());
        let files = vec![layer("/c.toml", "model = \"openai:gpt-5\"")];
        let s = resolve("/w".into(), files, &AgentArgs::default(), &env).unwrap();
        assert_eq!(s.model.unwrap().source, "WHITTLE_MODEL");
        let args = AgentArgs {
            model: Some("local".into()),
            ..AgentArgs::default()
        };
        let s = resolve("/w".into(), vec![], &args, &env).unwrap();
        assert_eq!(s.model.unwrap().spec.to_string(), "local:");
    }

    #[test]
    fn bad_files_are_one_line_naming_the_problem() {
        for (text, expect) in [
            ("model = ", "line 1"),
            ("modle = \"x\"", "modle"),
            ("max_turns = \"ten\"", "max_turns"),
            ("permission_mode = \"sometimes\"", "sometimes"),
            ("preset = \"fast\"", "preset"),
            ("auto_compact_fraction = 1.5", "auto_compact_fraction"),
            ("allow = [\"bash(oops\"]", "allow rule"),
            ("model = \"mistral\"", "openai:mistral"),
            ("[[hooks]]\nevent = \"Nope\"\ncommand = \"x\"", "Nope"),
            ("thinking = 500", "at least 1024"),
            ("thinking = \"lots\"", "thinking must be"),
            ("thinking = true", "token budget"),
            ("effort = \"extreme\"", "effort must be"),
            ("[sandbox]\nmode = \"sometimes\"", "sometimes"),
            ("[sandbox]\nwritable_roots = [\"rel/dir\"]", "absolute"),
            ("[sandbox]\nnetwork = \"yes\"", "network"),
            ("[sandbox]\nroots = []", "roots"),
            (
                "[mcp_servers.fs]\nargs = []",
                "mcp_servers.fs: give `command`",
            ),
            ("[mcp_servers.\"a b\"]\ncommand = \"x\"", "server name"),
            ("[mcp_servers.fs]\ncommand = \"x\"\ncomand = 1", "comand"),
            ("mcp_schema_share = 2.0", "mcp_schema_share"),
        ] {
            let err = crate::config::file::parse_file_config(text).unwrap_err();
            assert!(!err.contains('\n'), "{err}");
            assert!(err.contains(expect), "{text}: {err}");
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, "max_turns = [").unwrap();
        let err = read_file_config(&path).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("config file {}: line 1", path.display())),
            "{err}"
        );
        assert!(
            read_file_config(&dir.path().join("absent.toml"))
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn the_user_config_follows_xdg_then_home() {
        let xdg = |k: &str| match k {
            "XDG_CONFIG_HOME" => Some("/x".to_string()),
            "HOME" => Some("/h".to_string()),
            _ => None,
        };
        assert_eq!(
            user_config_path(&xdg),
            Some(PathBuf::from("/x/whittle/config.toml"))
        );
        let home = |k: &str| (k == "HOME").then(|| "/h".to_string());
        assert_eq!(
            user_config_path(&home),
            Some(PathBuf::from("/h/.config/whittle/config.toml"))
        );
        let relative = |k: &str| (k == "XDG_CONFIG_HOME").then(|| "rel".to_string());
        assert_eq!(user_config_path(&relative), None);
    }

    proptest::proptest! {
        #[test]
        fn any_text_parses_or_gives_one_line(text in "\\PC{0,200}") {
            if let Err(e) = crate::config::file::parse_file_config(&text) {
                proptest::prop_assert!(!e.contains('\n'));
            }
        }
    }
}

#[cfg(test)]
mod sandbox_tests {
    use super::*;

    #[test]
    fn sandbox_settings_layer_and_expand_the_home_folder() {
        let user = (
            PathBuf::from("/u.toml"),
            crate::config::file::parse_file_config(
                "[sandbox]\nnetwork = false\nwritable_roots = [\"~/data\"]\nhide_env = [\"GITHUB_TOKEN\"]",
            )
            .unwrap(),
        );
        let project = (
            PathBuf::from("/w/.whittle/config.toml"),
            crate::config::file::parse_file_config(
                "[sandbox]\nmode = \"read-only\"\nread_roots = [\"/srv/docs\"]",
            )
            .unwrap(),
        );
        let env = |k: &str| (k == "HOME").then(|| "/home/u".to_string());
        let s = resolve(
            "/w".into(),
            vec![user, project],
            &AgentArgs::default(),
            &env,
        )
        .unwrap();
        assert_eq!(
            s.sandbox,
            SandboxSettings {
                mode: SandboxMode::ReadOnly,
                network: Some(false),
                writable_roots: vec![PathBuf::from("/home/u/data")],
                read_roots: vec![PathBuf::from("/srv/docs")],
                hide_env: vec!["GITHUB_TOKEN".into()],
            }
        );
        let args = AgentArgs {
            sandbox: Some(SandboxMode::Off),
            ..AgentArgs::default()
        };
        let s = resolve("/w".into(), vec![], &args, &env).unwrap();
        assert_eq!(s.sandbox.mode, SandboxMode::Off, "the flag wins");
    }
}
