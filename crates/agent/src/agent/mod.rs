//! One coding agent session: its components, its history and its log. What
//! it does lives beside this file, one concept each: the turn loop
//! (`turn`), compaction in the loop (`compaction`), running tools
//! (`tool_dispatch`), asking the person (`approval`), usage and cost
//! (`usage`), what it reports (`events`), and how it fails (`error`).

mod approval;
mod checkpoints;
mod compaction;
mod config;
mod context_breakdown;
mod error;
mod events;
mod rewind;
mod tool_dispatch;
mod turn;
mod uncompact;
mod usage;

pub use approval::{Approval, Approver, DenyAsks};
pub use checkpoints::{
    DEFAULT_CHECKPOINT_MAX_FILE_SIZE, DEFAULT_GC_LIMITS, OpenedStore, StoreOwner,
    checkpoint_store_dir, checkpoints_refused, gc_if_due, open_checkpoint_store,
};
pub use config::{AgentConfig, MeterChoice};
pub use context_breakdown::ContextBreakdown;
pub use error::AgentError;
pub use events::{AgentEvent, EventSink};
pub use rewind::{RewindScope, Rewound, rewind_session_log, session_rewind_points};
pub use tool_dispatch::COMPACT_ACK;
pub use turn::TurnOutcome;
pub use uncompact::Uncompacted;

pub use usage::{UsageMeter, UsageTotals};

use crate::hooks::{HookEvent, Hooks};
use crate::session::{SessionWriter, check_sealed};
use approval::Approvals;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use whittle_context::session::{INTERRUPTED_RESULT, SessionRecord, log_form};
use whittle_context::{CharMeter, Compactor, History, Limits, Meter, TokenMeter};
use whittle_llm::{Provider, ToolSpec};
use whittle_protocol::Message;
use whittle_store::Store;
use whittle_tools::{OutputLimits, PermissionPolicy, TodoItem, ToolContext, ToolRegistry};

/// One coding agent session.
pub struct Agent {
    provider: Arc<dyn Provider>,
    tools: ToolRegistry,
    policy: PermissionPolicy,
    approvals: Approvals,
    hooks: Hooks,
    compactor: Compactor,
    history: History,
    session: Option<SessionWriter>,
    request: String,
    tool_ctx: ToolContext,
    config: AgentConfig,
    usage: UsageMeter,
    /// The transcript of the newest compaction, named when the context
    /// still overflows after it.
    last_transcript: Option<PathBuf>,
    /// The history's archived mark as the session log last recorded it.
    logged_archived: usize,
    /// The checkpoint store, when the session saves the files.
    checkpoints: checkpoints::Checkpoints,
    /// When the provider was last sent a request, and how many so far:
    /// what the compactor's cache model is told (see `Agent::cache_state`).
    model_calls: compaction::ModelCalls,
}

/// Tool results longer than this go into the session log by reference: the
/// text is saved once in the store, the log line names the file. Short
/// ones stay in the line, where a file of their own would cost more than it
/// saves.
const LOG_INLINE_MAX_CHARS: usize = 1_000;

/// What resuming a session found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resumed {
    /// Tool calls a crash left unanswered, now answered "interrupted".
    pub repairs: usize,
    /// Saved outputs the log refers to that are missing or changed, one
    /// line each; the history says so where they were.
    pub problems: Vec<String>,
}

impl Agent {
    /// A new session with no history. It asks nobody (see [`Agent::with_approver`])
    /// and writes no log until [`Agent::start_session`].
    pub fn new(provider: Arc<dyn Provider>, tools: ToolRegistry, config: AgentConfig) -> Self {
        let meter: Box<dyn Meter + Send> = match config.meter {
            MeterChoice::Chars => Box::new(CharMeter),
            MeterChoice::Tokens => {
                let mut m = TokenMeter::default();
                m.set_overhead_chars(overhead_chars(&config.system_prompt, &tools.specs()));
                Box::new(m)
            }
        };
        let store = Store::new(&config.state_dir).redacting(config.redactor.clone());
        let tool_ctx = ToolContext::new(&config.workspace)
            .with_sandbox(config.sandbox.clone())
            .with_store(store.clone())
            .with_output_limits(output_limits(&config.limits));
        let compactor = Compactor::new(
            compaction_limits(&config.limits, config.reasoning),
            store,
            meter,
        );
        Agent {
            provider,
            tool_ctx,
            tools,
            policy: PermissionPolicy::new(whittle_tools::PermissionMode::Default),
            approvals: Approvals::new(Box::new(DenyAsks)),
            hooks: Hooks::new(),
            compactor,
            history: History::default(),
            session: None,
            request: String::new(),
            config,
            usage: UsageMeter::default(),
            last_transcript: None,
            logged_archived: 0,
            checkpoints: checkpoints::Checkpoints::default(),
            model_calls: compaction::ModelCalls::default(),
        }
    }

    /// Sets the permission policy.
    pub fn with_policy(mut self, policy: PermissionPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Changes the permission policy mid-session (an editor switching
    /// modes); the next tool call is checked against it.
    pub fn set_policy(&mut self, policy: PermissionPolicy) {
        self.policy = policy;
    }

    /// Talks to another model from the next call on (an editor's model
    /// picker): the history and the log go on; the window, the output cap
    /// and the compaction limits become `model`'s (the rest of it, such as
    /// the system prompt, is not read), and subagents use it too.
    pub fn switch_model(&mut self, provider: Arc<dyn Provider>, model: &AgentConfig) {
        self.provider = provider.clone();
        self.config.model = model.model.clone();
        self.config.model_label = model.model_label.clone();
        self.config.max_tokens = model.max_tokens;
        self.config.context_window = model.context_window;
        self.config.limits = model.limits.clone();
        self.compactor
            .set_limits(compaction_limits(&model.limits, self.config.reasoning));
        if self.tools.get(whittle_protocol::tool_names::TASK).is_some() {
            let task = crate::TaskTool::new(provider, &self.tools, self.config.clone())
                .with_hooks(self.hooks.clone())
                .with_usage_meter(self.usage.clone())
                .with_parent_policy(&self.policy);
            self.tools.register(Arc::new(task));
        }
    }

    /// Lets an editor read and write the files the tools read and write
    /// (its unsaved buffers are what the agent then sees); the permission
    /// layer still checks every path first.
    pub fn set_editor_files(&mut self, files: Arc<dyn whittle_tools::EditorFiles>) {
        self.tool_ctx = self.tool_ctx.clone().with_editor_files(files);
    }

    /// Changes how commands are confined mid-session, so the sandbox
    /// follows a mode switch; commands already running keep theirs.
    pub fn set_sandbox(&mut self, sandbox: whittle_tools::Sandbox) {
        self.tool_ctx = self.tool_ctx.clone().with_sandbox(sandbox.clone());
        self.config.sandbox = sandbox;
    }

    /// Sets who is asked when the policy says "ask".
    pub fn with_approver(mut self, approver: Box<dyn Approver>) -> Self {
        self.approvals = Approvals::new(approver);
        self
    }

    /// Sets the hooks.
    pub fn with_hooks(mut self, hooks: Hooks) -> Self {
        self.hooks = hooks.with_store(self.compactor.store().clone());
        self
    }

    /// Adds this agent's usage to `meter` (a subagent shares its parent's).
    pub fn with_usage_meter(mut self, meter: UsageMeter) -> Self {
        self.usage = meter;
        self
    }

    /// Starts logging to a new session in `.whittle/sessions/`.
    pub fn start_session(&mut self) -> Result<&Path, AgentError> {
        let dir = self.config.state_dir.join("sessions");
        let writer = SessionWriter::create(
            &dir,
            &self.config.model_label,
            &self.config.workspace,
            self.config.session_key.as_ref(),
        )?
        .redacting(self.config.redactor.clone());
        self.compactor.store().name_transcript(writer.id());
        if let Err(e) = self.compactor.store().open_transcript() {
            // A log with a header alone would be the newest session to
            // continue. Best effort: the error is what matters.
            let _ = std::fs::remove_file(writer.path());
            return Err(AgentError::Transcript(e));
        }
        Ok(self.session.insert(writer).path())
    }

    /// Continues the session logged at `path`: its history (with tool calls
    /// a crash left unanswered given an "interrupted" result, naming what
    /// they had printed so far), its active request, its transcript, and
    /// further records appended to the same log. Saved outputs that have
    /// gone missing are reported, not fatal.
    pub fn resume_session(&mut self, path: &Path) -> Result<Resumed, AgentError> {
        let (writer, state) = SessionWriter::resume(path)?;
        if let Some(key) = &self.config.session_key
            && !self.config.resume_unsealed
        {
            check_sealed(path, &state, key, &self.config.workspace)?;
        }
        let mut problems = state.problems;
        let store = self.compactor.store();
        store.name_transcript(writer.id());
        // A transcript the history names but that is gone: new lines would
        // take the numbers the history's markers give the lost ones, and
        // recall would answer with the wrong messages. Later compactions
        // write to a transcript of their own, the first name not lost.
        for n in 1..=MAX_LOST_TRANSCRIPTS {
            let transcript = store.transcript_path();
            if transcript.exists() || !names_path(&state.history, &transcript) {
                break;
            }
            problems.push(format!(
                "the transcript {} is missing: what the summaries archived there cannot be read back",
                transcript.display()
            ));
            let suffix = if n == 1 {
                String::new()
            } else {
                format!("-{n}")
            };
            store.name_transcript(&format!("{}-after-loss{suffix}", writer.id()));
        }
        store.open_transcript().map_err(AgentError::Transcript)?;
        self.session = Some(writer.redacting(self.config.redactor.clone()));
        self.compactor.history_replaced();
        self.history = History::new(state.history);
        self.history.set_archived(state.archived);
        self.logged_archived = self.history.archived();
        self.request = state.request;
        self.usage.set(UsageTotals {
            calls: state.calls,
            input: state.usage.input_tokens,
            output: state.usage.output_tokens,
            cache_read: state.usage.cache_read_input_tokens,
            cache_write: state.usage.cache_creation_input_tokens,
        });
        if state.repairs > 0 {
            self.name_partial_outputs();
            if let Some(repair) = self.history.last().cloned() {
                self.log_message(&repair)?;
            }
        }
        Ok(Resumed {
            repairs: state.repairs,
            problems,
        })
    }

    /// Points each "interrupted" result of the newest message at the output
    /// its command had written when the session stopped (a `.partial` file).
    fn name_partial_outputs(&mut self) {
        let Some(last) = self.history.len().checked_sub(1) else {
            return;
        };
        for at in self.history.tool_result_refs() {
            if at.message != last {
                continue;
            }
            let Some(result) = self.history.block(at).and_then(|b| b.as_tool_result()) else {
                continue;
            };
            if result.content_str() != Some(INTERRUPTED_RESULT) {
                continue;
            }
            let partial = self.compactor.store().partial_outputs(&result.tool_use_id);
            let Some(file) = partial.last() else {
                continue;
            };
            let text = format!(
                "{INTERRUPTED_RESULT} What it printed before it stopped is in {} (incomplete).",
                file.display()
            );
            self.history.set_tool_result_content(at, text);
        }
    }

    /// The session id, when logging.
    pub fn session_id(&self) -> Option<&str> {
        self.session.as_ref().map(SessionWriter::id)
    }

    /// The session log, when logging.
    pub fn session_path(&self) -> Option<&Path> {
        self.session.as_ref().map(SessionWriter::path)
    }

    /// The history the next request sends, compactions applied.
    pub fn history(&self) -> &History {
        &self.history
    }

    /// The active request: the person's newest input, which compaction
    /// keeps verbatim as the only instruction.
    pub fn request(&self) -> &str {
        &self.request
    }

    /// What the session was configured with (for `/context`, `/cost`, subagents).
    pub fn config(&self) -> &AgentConfig {
        &self.config
    }

    /// Token usage so far, summaries and subagents included.
    pub fn usage(&self) -> UsageTotals {
        self.usage.totals()
    }

    /// The model's task list.
    pub fn todos(&self) -> Vec<TodoItem> {
        self.tool_ctx.todos().snapshot()
    }

    /// `/clear`: forget the history (the log keeps it).
    pub fn clear(&mut self) -> Result<(), AgentError> {
        self.history.replace_all(Vec::new());
        self.request.clear();
        self.log(SessionRecord::Clear)
    }

    /// Runs the hooks for `event`; returns a block reason. Hook failures are
    /// warnings. Borrows only what it needs, so the future stays `Send`.
    pub(super) fn run_hook<'a>(
        &self,
        event: &'a HookEvent,
        sink: &'a mut dyn EventSink,
    ) -> impl std::future::Future<Output = Option<String>> + Send + 'a {
        let hooks = self.hooks.clone();
        let workspace = self.config.workspace.clone();
        async move {
            let mut warnings = Vec::new();
            let blocked = hooks.run(event, &workspace, &mut warnings).await;
            for w in warnings {
                sink.on_event(AgentEvent::Warning(w));
            }
            blocked
        }
    }

    /// Appends a message to the history and the session log.
    pub(super) fn push(&mut self, message: Message) -> Result<(), AgentError> {
        self.log_message(&message)?;
        self.history.push(message);
        Ok(())
    }

    /// Logs a message, long tool results by reference (saved first).
    fn log_message(&mut self, message: &Message) -> Result<(), AgentError> {
        if self.session.is_none() {
            return Ok(());
        }
        let (mut logged, refs) = log_form(
            std::slice::from_ref(message),
            self.compactor.store(),
            LOG_INLINE_MAX_CHARS,
        )?;
        let message = logged.pop().unwrap_or_else(|| message.clone());
        self.log(SessionRecord::Message { message, refs })
    }

    /// Appends a record to the session log, when logging.
    pub(super) fn log(&mut self, record: SessionRecord) -> Result<(), AgentError> {
        if let Some(s) = &mut self.session {
            s.append(&record)?;
        }
        Ok(())
    }
}

/// The pipeline's limits for a session that reasons with `reasoning`:
/// `limits`, but without the answer's squeeze when thinking has a fixed
/// budget. A squeezed `max_tokens` lowers that budget, and below its
/// minimum leaves thinking out of the request, which the provider refuses
/// in a tool loop whose earlier answers thought.
fn compaction_limits(limits: &Limits, reasoning: whittle_llm::Reasoning) -> Limits {
    match reasoning.thinking {
        whittle_llm::Thinking::Budget(_) => limits.with_full_answer_room(),
        _ => limits.clone(),
    }
}

/// How tools keep big outputs, from the pipeline's limits: an output the
/// pipeline would persist on arrival is saved while it streams instead.
fn output_limits(limits: &Limits) -> OutputLimits {
    OutputLimits {
        inline_max_bytes: limits
            .persist_results_above
            .unwrap_or(limits.large_result_chars),
        preview_chars: limits.preview_chars,
        ..OutputLimits::default()
    }
}

/// Characters every request carries besides the messages.
fn overhead_chars(system: &str, tools: &[ToolSpec]) -> usize {
    system.chars().count() + whittle_protocol::json_chars(tools)
}

/// Transcripts of one session that may be found lost on a resume, each
/// replaced by the next name.
const MAX_LOST_TRANSCRIPTS: usize = 16;

/// Whether a message of `history` names `path` (a compaction marker naming
/// the transcript it archived to).
fn names_path(history: &[Message], path: &Path) -> bool {
    let path = path.to_string_lossy();
    history.iter().any(|m| m.text().contains(path.as_ref()))
}
