//! One coding agent session: its components, its history and its log. What
//! it does lives beside this file, one concept each: the turn loop
//! (`turn`), compaction in the loop (`compaction`), running tools
//! (`tool_dispatch`), asking the person (`approval`), usage and cost
//! (`usage`), what it reports (`events`), and how it fails (`error`).

mod approval;
mod compaction;
mod config;
mod context_breakdown;
mod error;
mod events;
mod tool_dispatch;
mod turn;
mod usage;

pub use approval::{Approval, Approver, DenyAsks};
pub use config::{AgentConfig, MeterChoice};
pub use context_breakdown::ContextBreakdown;
pub use error::AgentError;
pub use events::{AgentEvent, EventSink};
pub use tool_dispatch::COMPACT_ACK;
pub use turn::TurnOutcome;
pub use usage::{UsageMeter, UsageTotals};

use crate::hooks::{HookEvent, Hooks};
use crate::session::SessionWriter;
use approval::Approvals;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use whittle_context::{
    CharMeter, Compactor, History, Message, Meter, SessionRecord, Store, TokenMeter,
};
use whittle_llm::{Provider, ToolSpec};
use whittle_tools::{PermissionPolicy, TodoItem, ToolContext, ToolRegistry};

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
        let compactor = Compactor::new(config.limits.clone(), Store::new(&config.state_dir), meter);
        Agent {
            provider,
            tool_ctx: ToolContext::new(&config.workspace),
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
        }
    }

    /// Sets the permission policy.
    pub fn with_policy(mut self, policy: PermissionPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Sets who is asked when the policy says "ask".
    pub fn with_approver(mut self, approver: Box<dyn Approver>) -> Self {
        self.approvals = Approvals::new(approver);
        self
    }

    /// Sets the hooks.
    pub fn with_hooks(mut self, hooks: Hooks) -> Self {
        self.hooks = hooks;
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
        let writer = SessionWriter::create(&dir, &self.config.model_label, &self.config.workspace)?;
        Ok(self.session.insert(writer).path())
    }

    /// Continues the session logged at `path`: its history (with tool calls
    /// a crash left unanswered given an "interrupted" result), its active
    /// request, and further records appended to the same log.
    pub fn resume_session(&mut self, path: &Path) -> Result<usize, AgentError> {
        let (writer, state) = SessionWriter::resume(path)?;
        self.session = Some(writer);
        self.history = History::new(state.history);
        self.request = state.request;
        // The log holds all input tokens; the totals keep uncached input apart.
        let [input, output, cache_read, cache_write] = state.usage;
        self.usage.set(UsageTotals {
            calls: state.calls,
            input: input.saturating_sub(cache_read).saturating_sub(cache_write),
            output,
            cache_read,
            cache_write,
        });
        if state.repairs > 0
            && let Some(repair) = self.history.last().cloned()
        {
            self.log(SessionRecord::Message { message: repair })?;
        }
        Ok(state.repairs)
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
        self.log(SessionRecord::Message {
            message: message.clone(),
        })?;
        self.history.push(message);
        Ok(())
    }

    /// Appends a record to the session log, when logging.
    pub(super) fn log(&mut self, record: SessionRecord) -> Result<(), AgentError> {
        if let Some(s) = &mut self.session {
            s.append(&record)?;
        }
        Ok(())
    }
}

/// Characters every request carries besides the messages.
fn overhead_chars(system: &str, tools: &[ToolSpec]) -> usize {
    system.chars().count() + whittle_context::json_chars(tools)
}
