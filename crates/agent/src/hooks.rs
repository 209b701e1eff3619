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
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use whittle_store::{CapturedOutput, Store};
use whittle_tools::{GroupGuard, OutputLimits};

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

    async fn run(&self, event: &HookEvent, workspace: &Path, store: &Store) -> HookDecision {
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
        // stderr may be a block reason the model reads: kept whole, streamed
        // into the store when big, as a command's output is.
        let stderr = child.stderr.take();
        let finished = tokio::time::timeout(timeout, async {
            let mut writer = store.output_writer(
                &format!(
                    "hook-{}-{}",
                    std::process::id(),
                    HOOK_RUNS.fetch_add(1, Ordering::Relaxed)
                ),
                REASON_INLINE_MAX_BYTES,
                OutputLimits::default().cap_bytes,
            );
            if let Some(mut stderr) = stderr {
                let mut buf = vec![0u8; 16 * 1024];
                while let Ok(n) = stderr.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    writer.write(&buf[..n]);
                }
            }
            (child.wait().await, writer.finish())
        })
        .await;
        if finished.is_ok() {
            group.disarm();
        }
        let (status, stderr) = match finished {
            Err(_) => {
                return HookDecision::Warn(format!(
                    "hook `{}` timed out after {}s and was killed",
                    self.command,
                    timeout.as_secs()
                ));
            }
            Ok((Err(e), _)) => return HookDecision::Warn(format!("hook `{}`: {e}", self.command)),
            Ok((Ok(status), stderr)) => (status, stderr),
        };
        let said = || stderr_text(stderr);
        match status.code() {
            Some(0) => HookDecision::Continue,
            Some(2) => {
                let reason = said();
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
                whittle_protocol::collapse_whitespace(&said())
            )),
        }
    }
}

/// Hook stderr up to this size is the reason as written; a bigger one is
/// saved whole and the reason is its preview with the file's path.
const REASON_INLINE_MAX_BYTES: usize = 30_000;

static HOOK_RUNS: AtomicU64 = AtomicU64::new(0);

/// What a hook said on stderr, trimmed: the whole text, or the marker of
/// the saved file.
fn stderr_text(captured: CapturedOutput) -> String {
    let preview = OutputLimits::default().preview_chars;
    captured.into_text(&[], preview).trim().to_string()
}

/// Every hook of a session.
#[derive(Clone, Default)]
pub struct Hooks {
    callbacks: Vec<Arc<dyn Hook>>,
    commands: Vec<CommandHook>,
    /// When set, only these events run hooks.
    only: Option<&'static [HookKind]>,
    /// Where a hook's long stderr is saved (the session's store).
    store: Option<Store>,
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

    /// Saves long hook output in `store` (the session's own) rather than
    /// under the workspace's `.whittle`.
    pub fn with_store(mut self, store: Store) -> Self {
        self.store = Some(store);
        self
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
        let store = self
            .store
            .clone()
            .unwrap_or_else(|| Store::new(workspace.join(".whittle")));
        for hook in &self.commands {
            if hook.event != event.kind() {
                continue;
            }
            if let (Some(m), Some(tool)) = (&hook.matcher, event.tool_name())
                && m != tool
            {
                continue;
            }
            match hook.run(event, workspace, &store).await {
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
    async fn a_long_block_reason_is_saved_whole_and_previewed() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().join("state"));
        let mut hooks = Hooks::new().with_store(store.clone());
        hooks.add_commands([CommandHook {
            event: HookKind::PreToolUse,
            matcher: None,
            command: "seq 1 100000 >&2; exit 2".into(),
            timeout_secs: None,
        }]);
        let mut warnings = Vec::new();
        let reason = hooks
            .run(&pre_tool("bash"), dir.path(), &mut warnings)
            .await
            .unwrap();
        assert!(reason.starts_with("<persisted-output>"), "{reason}");
        assert!(reason.len() < 4_000);
        let path = reason
            .lines()
            .nth(1)
            .unwrap()
            .strip_prefix("Full output: ")
            .unwrap();
        let full: String = (1..=100_000).map(|i| format!("{i}\n")).collect();
        assert_eq!(std::fs::read_to_string(path).unwrap(), full);
        assert!(store.trusted_path(path).is_some());
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
