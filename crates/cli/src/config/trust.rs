//! Trusting a folder's own config. `.whittle/config.toml` comes with the
//! code, so a cloned repository could otherwise make whittle run its hook
//! commands or skip the permission questions. Those keys apply only in a
//! folder the person trusted: answered yes at the REPL (remembered), or
//! `--trust-project` for one run.

use crate::args::SandboxMode;
use crate::config::file::{Env, FileConfig, user_config_path};
use anyhow::Context;
use std::io::Write;
use std::path::{Path, PathBuf};
use whittle_llm::{ModelSpec, ProviderKind};
use whittle_tools::PermissionMode;

/// What a project config would add beyond the defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Widening {
    /// The project config file.
    pub path: PathBuf,
    /// Hook commands it defines.
    pub hooks: usize,
    /// Allow rules it adds.
    pub allow: usize,
    /// A permission mode that asks less than `default`.
    pub permission_mode: Option<PermissionMode>,
    /// `[sandbox]` keys that let commands do more: a looser mode, the
    /// network, extra roots.
    pub sandbox: Vec<&'static str>,
    /// MCP servers it declares (a server is a command, or a place whittle
    /// sends tool calls to).
    pub mcp_servers: usize,
    /// A model file it names (`local:PATH`): whittle reads and runs it
    /// outside the sandbox, and the repository can ship the file.
    pub model_file: Option<String>,
}

impl Widening {
    /// What a project config asks for beyond `base`, the permission mode
    /// that applies without it (the user's, else `default`).
    pub fn of(path: &Path, config: &FileConfig, base: PermissionMode) -> Option<Widening> {
        let permission_mode = config
            .permission_mode
            .filter(|m| strictness(*m) < strictness(base));
        let sb = &config.sandbox;
        let mut sandbox = Vec::new();
        if matches!(
            sb.mode,
            Some(SandboxMode::Off | SandboxMode::WorkspaceWrite)
        ) {
            sandbox.push("sandbox mode");
        }
        if sb.network == Some(true) {
            sandbox.push("sandbox network");
        }
        if !sb.writable_roots.is_empty() {
            sandbox.push("sandbox writable_roots");
        }
        if !sb.read_roots.is_empty() {
            sandbox.push("sandbox read_roots");
        }
        let model_file = config
            .model
            .as_deref()
            .and_then(|m| m.parse::<ModelSpec>().ok())
            .filter(|spec| spec.provider == ProviderKind::Local && !spec.model.is_empty())
            .map(|spec| spec.model);
        let w = Widening {
            path: path.to_path_buf(),
            hooks: config.hooks.len(),
            allow: config.allow.len(),
            permission_mode,
            sandbox,
            mcp_servers: config.mcp_servers.len(),
            model_file,
        };
        (w.hooks > 0
            || w.allow > 0
            || w.permission_mode.is_some()
            || !w.sandbox.is_empty()
            || w.mcp_servers > 0
            || w.model_file.is_some())
        .then_some(w)
    }

    /// Removes from `config` what this widening found in it; the rest
    /// (model, limits, prompt text) still applies.
    pub fn withhold_from(&self, config: &mut FileConfig) {
        config.hooks.clear();
        config.allow.clear();
        config.mcp_servers.clear();
        if self.model_file.is_some() {
            config.model = None;
        }
        if self.permission_mode.is_some() {
            config.permission_mode = None;
        }
        if !self.sandbox.is_empty() {
            let sb = &mut config.sandbox;
            if matches!(
                sb.mode,
                Some(SandboxMode::Off | SandboxMode::WorkspaceWrite)
            ) {
                sb.mode = None;
            }
            if sb.network == Some(true) {
                sb.network = None;
            }
            sb.writable_roots.clear();
            sb.read_roots.clear();
        }
    }

    /// "2 hooks (commands it runs), 1 allow rule, permission_mode yolo".
    pub fn describe(&self) -> String {
        let plural = |n: usize, one: &str| match n {
            1 => format!("1 {one}"),
            n => format!("{n} {one}s"),
        };
        let mut parts = Vec::new();
        if self.hooks > 0 {
            parts.push(format!("{} (commands it runs)", plural(self.hooks, "hook")));
        }
        if self.allow > 0 {
            parts.push(plural(self.allow, "allow rule"));
        }
        if let Some(m) = self.permission_mode {
            parts.push(format!("permission_mode {m}"));
        }
        parts.extend(self.sandbox.iter().map(|k| k.to_string()));
        if self.mcp_servers > 0 {
            parts.push(format!(
                "{} (programs it starts)",
                plural(self.mcp_servers, "MCP server")
            ));
        }
        if let Some(file) = &self.model_file {
            parts.push(format!("model file {file} (a program whittle runs)"));
        }
        parts.join(", ")
    }

    /// The one line said when these keys were ignored.
    pub fn ignored_notice(&self) -> String {
        format!(
            "note: ignoring {} from {}: this folder is not trusted (say yes when the REPL asks, or pass --trust-project)",
            self.describe(),
            self.path.display()
        )
    }
}

/// Higher asks more: a project may tighten the mode, never loosen it.
fn strictness(mode: PermissionMode) -> u8 {
    match mode {
        PermissionMode::Yolo => 0,
        PermissionMode::AcceptEdits => 1,
        PermissionMode::Default => 2,
        PermissionMode::ReadOnly => 3,
    }
}

/// Where trusted folders are remembered: `trusted-folders` next to the user
/// config, one absolute path per line.
pub fn trusted_folders_path(env: Env<'_>) -> Option<PathBuf> {
    user_config_path(env).map(|p| p.with_file_name("trusted-folders"))
}

/// The person's session key (see `whittle_agent::SessionKey`), next to
/// the trusted folders: outside every workspace.
pub fn session_key_path(env: Env<'_>) -> Option<PathBuf> {
    user_config_path(env).map(|p| p.with_file_name("session-key"))
}

/// Whether the person trusted `workspace` (an absolute, canonical path).
pub fn is_trusted(env: Env<'_>, workspace: &Path) -> bool {
    let Some(path) = trusted_folders_path(env) else {
        return false;
    };
    whittle_sandbox::read_regular_file(&path, 4 << 20)
        .map(|bytes| {
            String::from_utf8_lossy(&bytes)
                .lines()
                .any(|l| Path::new(l) == workspace)
        })
        .unwrap_or(false)
}

/// Remembers that the person trusts `workspace`.
pub fn remember(env: Env<'_>, workspace: &Path) -> anyhow::Result<()> {
    let path = trusted_folders_path(env)
        .context("cannot remember the trusted folder: neither XDG_CONFIG_HOME nor HOME is set")?;
    let Some(text) = workspace.to_str().filter(|t| !t.contains('\n')) else {
        anyhow::bail!(
            "cannot remember {} as trusted: the path is not plain text",
            workspace.display()
        );
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    writeln!(file, "{text}").with_context(|| format!("cannot write {}", path.display()))
}

/// Asks at the terminal whether to trust the folder; anything but yes is no.
pub fn ask_at_terminal(w: &Widening) -> bool {
    eprint!(
        "{} adds {}. Trust this folder and apply them? [y/N] ",
        w.path.display(),
        w.describe()
    );
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    if std::io::stdin().read_line(&mut answer).is_err() {
        return false;
    }
    matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::file::parse_file_config;

    #[test]
    fn only_widening_keys_count_and_only_they_are_withheld() {
        let path = Path::new("/w/.whittle/config.toml");
        let mild = parse_file_config(
            "model = \"openai:gpt-5\"\npermission_mode = \"read-only\"\nmax_turns = 3\n",
        )
        .unwrap();
        let base = PermissionMode::Default;
        assert_eq!(Widening::of(path, &mild, base), None);
        let mut wide = parse_file_config(
            r#"
model = "openai:gpt-5"
permission_mode = "yolo"
allow = ["edit_file", "bash(make*)"]
[[hooks]]
event = "PreToolUse"
command = "true"
"#,
        )
        .unwrap();
        let w = Widening::of(path, &wide, base).unwrap();
        assert_eq!((w.hooks, w.allow), (1, 2));
        assert_eq!(w.permission_mode, Some(PermissionMode::Yolo));
        assert_eq!(
            w.describe(),
            "1 hook (commands it runs), 2 allow rules, permission_mode yolo"
        );
        assert!(w.ignored_notice().contains("/w/.whittle/config.toml"));
        w.withhold_from(&mut wide);
        assert_eq!(Widening::of(path, &wide, base), None);
        assert!(wide.model.is_some());
        // A tightening mode is not a widening: it stays.
        let strict =
            parse_file_config("permission_mode = \"read-only\"\nallow = [\"edit_file\"]").unwrap();
        let w = Widening::of(path, &strict, base).unwrap();
        assert_eq!(w.permission_mode, None);
        let mut strict = strict;
        w.withhold_from(&mut strict);
        assert_eq!(strict.permission_mode, Some(PermissionMode::ReadOnly));
        assert!(strict.allow.is_empty());
        // A project may not open the sandbox up, only close it further.
        let mut open = parse_file_config(
            "[sandbox]\nmode = \"off\"\nnetwork = true\nwritable_roots = [\"/\"]\nhide_env = [\"X\"]",
        )
        .unwrap();
        let w = Widening::of(path, &open, base).unwrap();
        assert_eq!(
            w.describe(),
            "sandbox mode, sandbox network, sandbox writable_roots"
        );
        w.withhold_from(&mut open);
        assert_eq!(Widening::of(path, &open, base), None);
        assert_eq!(open.sandbox.hide_env, ["X"], "hiding more is not widening");
        let closed = parse_file_config("[sandbox]\nmode = \"read-only\"\nnetwork = false").unwrap();
        assert_eq!(Widening::of(path, &closed, base), None);
        // A server is a command: it waits for trust like a hook.
        let mut servers = parse_file_config(
            "model = \"openai:gpt-5\"\n[mcp_servers.fs]\ncommand = \"npx\"\n[mcp_servers.web]\nurl = \"http://127.0.0.1:1/mcp\"\n",
        )
        .unwrap();
        let w = Widening::of(path, &servers, base).unwrap();
        assert_eq!(w.mcp_servers, 2);
        assert_eq!(w.describe(), "2 MCP servers (programs it starts)");
        w.withhold_from(&mut servers);
        assert!(servers.mcp_servers.is_empty() && servers.model.is_some());
        // A model file is a program whittle loads outside the sandbox; the
        // embedded default (pinned by its hash) is not.
        let mut local = parse_file_config("model = \"local:models/evil.gguf\"").unwrap();
        let w = Widening::of(path, &local, base).unwrap();
        assert_eq!(
            w.describe(),
            "model file models/evil.gguf (a program whittle runs)"
        );
        w.withhold_from(&mut local);
        assert!(local.model.is_none());
        let default_local = parse_file_config("model = \"local\"").unwrap();
        assert_eq!(Widening::of(path, &default_local, base), None);
        // Against a read-only user config, `default` loosens too.
        let lax = parse_file_config("permission_mode = \"default\"").unwrap();
        assert_eq!(Widening::of(path, &lax, base), None);
        let w = Widening::of(path, &lax, PermissionMode::ReadOnly).unwrap();
        assert_eq!(w.permission_mode, Some(PermissionMode::Default));
    }

    #[test]
    fn remembered_folders_are_trusted_and_others_not() {
        let home = tempfile::tempdir().unwrap();
        let root = home.path().to_string_lossy().into_owned();
        let env = move |k: &str| (k == "XDG_CONFIG_HOME").then(|| root.clone());
        let a = Path::new("/projects/a");
        assert!(!is_trusted(&env, a));
        remember(&env, a).unwrap();
        remember(&env, Path::new("/projects/b")).unwrap();
        assert!(is_trusted(&env, a));
        assert!(!is_trusted(&env, Path::new("/projects")));
        assert!(!is_trusted(&env, Path::new("/projects/a/sub")));
        assert!(remember(&env, Path::new("/bad\nline")).is_err());
        let nowhere = |_: &str| None;
        assert!(!is_trusted(&nowhere, a));
        assert!(remember(&nowhere, a).is_err());
    }
}
