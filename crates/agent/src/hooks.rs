//! Hooks: code that runs at fixed points of the loop and may block or steer it.
//!
//! A hook is either a Rust callback ([`Hook`]) or an external command from
//! the config ([`CommandHook`]): the event goes to its stdin as JSON; exit 0
//! continues, exit 2 blocks with stderr as the reason (fed back to the model
//! where that makes sense), anything else or a timeout is reported and ignored.

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use whittle_tools::GroupGuard;

/// The points of the loop where hooks run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub enum HookKind {
    /// A prompt is about to enter the loop. Blocking refuses it.
    UserPromptSubmit,
    /// A tool is about to run. Blocking refuses the call; the reason goes to the model.
    PreToolUse,
    /// A tool has run. Blocking adds the reason to the result the model sees.
    PostToolUse,
    /// The model answered without calling a tool. Blocking makes it go on,
    /// with the reason as the next user message.
    Stop,
    /// Compaction is about to run. Informational.
    PreCompact,
    /// A compaction step changed the history. Informational.
    PostCompact,
}

/// What happened, as a hook sees it (and as JSON on a command hook's stdin).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "hook_event_name")]
#[non_exhaustive]
pub enum HookEvent {
    /// See [`HookKind::UserPromptSubmit`].
    UserPromptSubmit {
        /// The prompt.
        prompt: String,
    },
    /// See [`HookKind::PreToolUse`].
    PreToolUse {
        /// The tool.
        tool_name: String,
        /// Its input.
        tool_input: Value,
        /// The tool_use id.
        tool_use_id: String,
    },
    /// See [`HookKind::PostToolUse`].
    PostToolUse {
        /// The tool.
        tool_name: String,
        /// Its input.
        tool_input: Value,
        /// The tool_use id.
        tool_use_id: String,
        /// What it returned.
        tool_output: String,
        /// Whether it failed.
        is_error: bool,
    },
    /// See [`HookKind::Stop`].
    Stop {
        /// The model's final text.
        last_text: String,
    },
    /// See [`HookKind::PreCompact`].
    PreCompact {
        /// `auto`, `manual` or `overflow`.
        trigger: String,
        /// Context size now.
        size: u64,
    },
    /// See [`HookKind::PostCompact`].
    PostCompact {
        /// The step.
        step: String,
        /// Size before.
        before: u64,
        /// Size after.
        after: u64,
        /// Files written.
        paths: Vec<PathBuf>,
    },
}

impl HookEvent {
    /// Which point of the loop this is.
    pub fn kind(&self) -> HookKind {
        match self {
            HookEvent::UserPromptSubmit { .. } => HookKind::UserPromptSubmit,
            HookEvent::PreToolUse { .. } => HookKind::PreToolUse,
            HookEvent::PostToolUse { .. } => HookKind::PostToolUse,
            HookEvent::Stop { .. } => HookKind::Stop,
            HookEvent::PreCompact { .. } => HookKind::PreCompact,
            HookEvent::PostCompact { .. } => HookKind::PostCompact,
        }
    }

    fn tool_name(&self) -> Option<&str> {
        match self {
            HookEvent::PreToolUse { tool_name, .. } | HookEvent::PostToolUse { tool_name, .. } => {
                Some(tool_name)
            }
            _ => None,
        }
    }
}

/// A hook's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HookDecision {
    /// Go on.
    Continue,
    /// Block, with a reason.
    Block(String),
    /// Go on, but tell the person something went wrong with the hook.
    Warn(String),
}

/// A hook written in Rust.
pub trait Hook: Send + Sync {
    /// Called at every event; return [`HookDecision::Continue`] for events it ignores.
    fn on_event<'a>(
        &'a self,
        event: &'a HookEvent,
        workspace: &'a Path,
    ) -> BoxFuture<'a, HookDecision>;
}

/// A hook command from the config:
///
/// ```toml
/// [[hooks]]
/// event = "PreToolUse"
/// matcher = "bash"          # optional: only for this tool
/// command = "./check.sh"    # run with `sh -c` in the workspace
/// timeout_secs = 30         # optional, default 60
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
pub struct CommandHook {
    /// The event it runs on.
    pub event: HookKind,
    /// For tool events, the tool name it applies to (all when absent).
    #[serde(default)]
    pub matcher: Option<String>,
    /// The shell command.
    pub command: String,
    /// Seconds before it is killed.
    #[serde(default)]
    pub timeout_secs: Option<u64>,
}

impl CommandHook {
    /// Default time limit of a hook command.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

    async fn run(&self, event: &HookEvent, workspace: &Path) -> HookDecision {
        let payload = match serde_json::to_vec(&serde_json::json!({
            "event": event,
            "cwd": workspace,
        })) {
            Ok(p) => p,
            Err(e) => return HookDecision::Warn(format!("hook `{}`: {e}", self.command)),
        };
        let mut child = match tokio::process::Command::new("sh")
            .arg("-c")
            .arg(&self.command)
            .current_dir(workspace)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
        {
            Ok(c) => c,
            Err(e) => {
                return HookDecision::Warn(format!("hook `{}` did not start: {e}", self.command));
            }
        };
        // A timed-out or abandoned hook takes everything it started with it.
        let mut group = GroupGuard::new(child.id());
        if let Some(mut stdin) = child.stdin.take() {
            // A hook that does not read its input is fine.
            let _ = stdin.write_all(&payload).await;
        }
        let timeout = self
            .timeout_secs
            .map_or(Self::DEFAULT_TIMEOUT, Duration::from_secs);
        let finished = tokio::time::timeout(timeout, child.wait_with_output()).await;
        if finished.is_ok() {
            group.disarm();
        }
        match finished {
            Err(_) => HookDecision::Warn(format!(
                "hook `{}` timed out after {}s and was killed",
                self.command,
                timeout.as_secs()
            )),
            Ok(Err(e)) => HookDecision::Warn(format!("hook `{}`: {e}", self.command)),
            Ok(Ok(out)) => match out.status.code() {
                Some(0) => HookDecision::Continue,
                Some(2) => {
                    let reason = String::from_utf8_lossy(&out.stderr).trim().to_string();
                    HookDecision::Block(if reason.is_empty() {
                        format!("blocked by hook `{}`", self.command)
                    } else {
                        reason
                    })
                }
                code => HookDecision::Warn(format!(
                    "hook `{}` failed (exit {}): {}",
                    self.command,
                    code.map_or("signal".to_string(), |c| c.to_string()),
                    String::from_utf8_lossy(&out.stderr).trim()
                )),
            },
        }
    }
}

/// Every hook of a session.
#[derive(Clone, Default)]
pub struct Hooks {
    callbacks: Vec<Arc<dyn Hook>>,
    commands: Vec<CommandHook>,
    /// When set, only these events run hooks.
    only: Option<&'static [HookKind]>,
}

impl Hooks {
    /// No hooks.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a Rust hook.
    pub fn add(&mut self, hook: Arc<dyn Hook>) {
        self.callbacks.push(hook);
    }

    /// Adds command hooks from the config.
    pub fn add_commands(&mut self, commands: impl IntoIterator<Item = CommandHook>) {
        self.commands.extend(commands);
    }

    /// The same hooks for a subagent: its tool calls and compactions run
    /// them (a hook that guards `read_file` guards it there too), while its
    /// prompt and its end belong to the parent's `task` call.
    pub fn for_subagent(&self) -> Hooks {
        Hooks {
            only: Some(&[
                HookKind::PreToolUse,
                HookKind::PostToolUse,
                HookKind::PreCompact,
                HookKind::PostCompact,
            ]),
            ..self.clone()
        }
    }

    /// Runs every hook for `event`, in order; the first block wins. Warnings
    /// from hooks that failed are collected in `warnings`.
    pub async fn run(
        &self,
        event: &HookEvent,
        workspace: &Path,
        warnings: &mut Vec<String>,
    ) -> Option<String> {
        if self.only.is_some_and(|only| !only.contains(&event.kind())) {
            return None;
        }
        for hook in &self.callbacks {
            match hook.on_event(event, workspace).await {
                HookDecision::Continue => {}
                HookDecision::Block(reason) => return Some(reason),
                HookDecision::Warn(w) => warnings.push(w),
            }
        }
        for hook in &self.commands {
            if hook.event != event.kind() {
                continue;
            }
            if let (Some(m), Some(tool)) = (&hook.matcher, event.tool_name())
                && m != tool
            {
                continue;
            }
            match hook.run(event, workspace).await {
                HookDecision::Continue => {}
                HookDecision::Block(reason) => return Some(reason),
                HookDecision::Warn(w) => warnings.push(w),
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pre_tool(tool: &str) -> HookEvent {
        HookEvent::PreToolUse {
            tool_name: tool.into(),
            tool_input: serde_json::json!({"command": "ls"}),
            tool_use_id: "t1".into(),
        }
    }

    #[tokio::test]
    async fn command_hooks_block_with_stderr_and_see_the_event() {
        let dir = tempfile::tempdir().unwrap();
        let mut hooks = Hooks::new();
        hooks.add_commands([
            CommandHook {
                event: HookKind::PreToolUse,
                matcher: Some("bash".into()),
                command: "cat > seen.json; echo 'no shell today' >&2; exit 2".into(),
                timeout_secs: None,
            },
            CommandHook {
                event: HookKind::Stop,
                matcher: None,
                command: "exit 2".into(),
                timeout_secs: None,
            },
        ]);
        let mut warnings = Vec::new();
        let blocked = hooks
            .run(&pre_tool("bash"), dir.path(), &mut warnings)
            .await;
        assert_eq!(blocked.as_deref(), Some("no shell today"));
        let seen: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join("seen.json")).unwrap())
                .unwrap();
        assert_eq!(seen["event"]["hook_event_name"], "PreToolUse");
        assert_eq!(seen["event"]["tool_input"]["command"], "ls");
        assert_eq!(
            hooks
                .run(&pre_tool("read_file"), dir.path(), &mut warnings)
                .await,
            None
        );
        assert!(warnings.is_empty());
    }

    #[tokio::test]
    async fn failing_and_slow_hooks_warn_but_do_not_block() {
        let dir = tempfile::tempdir().unwrap();
        let mut hooks = Hooks::new();
        hooks.add_commands([
            CommandHook {
                event: HookKind::PreToolUse,
                matcher: None,
                command: "exit 3".into(),
                timeout_secs: None,
            },
            CommandHook {
                event: HookKind::PreToolUse,
                matcher: None,
                // A child of the hook's shell, which must die with it.
                command: "sleep 30 & echo $! > child.pid; wait".into(),
                timeout_secs: Some(1),
            },
        ]);
        let mut warnings = Vec::new();
        assert_eq!(
            hooks
                .run(&pre_tool("bash"), dir.path(), &mut warnings)
                .await,
            None
        );
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[1].contains("timed out"));
        let pid = std::fs::read_to_string(dir.path().join("child.pid")).unwrap();
        // Killed and reaped by init once its group is gone; `kill -0` then fails.
        let mut alive = true;
        for _ in 0..100 {
            let status = std::process::Command::new("kill")
                .args(["-0", pid.trim()])
                .stderr(std::process::Stdio::null())
                .status()
                .unwrap();
            alive = status.success();
            if !alive {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(!alive, "the hook's child {pid} outlived the timeout");
    }

    #[tokio::test]
    async fn subagent_hooks_run_on_tools_and_not_on_prompts_or_stops() {
        let dir = tempfile::tempdir().unwrap();
        let mut hooks = Hooks::new();
        for event in [
            HookKind::PreToolUse,
            HookKind::UserPromptSubmit,
            HookKind::Stop,
        ] {
            hooks.add_commands([CommandHook {
                event,
                matcher: None,
                command: "echo no >&2; exit 2".into(),
                timeout_secs: None,
            }]);
        }
        let sub = hooks.for_subagent();
        let mut warnings = Vec::new();
        let prompt = HookEvent::UserPromptSubmit {
            prompt: "look around".into(),
        };
        assert!(
            hooks
                .run(&prompt, dir.path(), &mut warnings)
                .await
                .is_some()
        );
        assert_eq!(sub.run(&prompt, dir.path(), &mut warnings).await, None);
        assert!(
            sub.run(&pre_tool("read_file"), dir.path(), &mut warnings)
                .await
                .is_some()
        );
    }
}
