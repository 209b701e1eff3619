//! The agent loop: pipeline, model call, tools, repeat.

use crate::hooks::{HookEvent, Hooks};
use crate::session::{SessionFileError, SessionWriter};
use crate::summarizer::ProviderSummarizer;
use futures::StreamExt;
use futures::future::BoxFuture;
use serde_json::Value;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use whittle_context::replay::Prices;
use whittle_context::session_log::SessionRecord;
use whittle_context::{
    Block, CharMeter, Compactor, History, Limits, Message, Meter, Outcome, Redactor, StepReport,
    Store, TokenMeter, ToolUse, ValidationError, validate,
};
use whittle_llm::{
    Collector, LlmError, ModelRequest, Provider, Reasoning, StreamEvent, ToolSpec, Usage,
};
use whittle_tools::{
    Decision, PermissionPolicy, Sandbox, TodoItem, ToolContext, ToolOutput, ToolRegistry,
};

/// The result the `compact` tool gives; the harness summarizes after the batch.
pub const COMPACT_ACK: &str = "[Compaction requested. This completed turn will be summarized.]";

/// How the context is measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MeterChoice {
    /// Characters, exactly (the `teaching` preset).
    Chars,
    /// Tokens, calibrated on the provider's reports.
    Tokens,
}

/// Everything about a session that is not a component.
#[derive(Clone, Debug)]
pub struct AgentConfig {
    /// The model id sent in requests.
    pub model: String,
    /// `PROVIDER:MODEL`, for the session log and messages.
    pub model_label: String,
    /// Output tokens per call.
    pub max_tokens: u32,
    /// Model calls allowed per user turn.
    pub max_turns: u32,
    /// The folder the agent works in.
    pub workspace: PathBuf,
    /// Where sessions, persisted outputs and transcripts go (`.whittle`).
    pub state_dir: PathBuf,
    /// Compaction thresholds.
    pub limits: Limits,
    /// How size is measured.
    pub meter: MeterChoice,
    /// The model's context window, in tokens (for `/context`).
    pub context_window: u64,
    /// The system prompt.
    pub system_prompt: String,
    /// Thinking and effort, sent with every call of the conversation
    /// (summaries of it included, so they share its cached prefix).
    pub reasoning: Reasoning,
    /// How commands run (subagents share it).
    pub sandbox: Sandbox,
    /// Known secret values, replaced in tool results and the session log.
    pub redactor: Redactor,
}

/// Something that happened, for the person watching.
#[derive(Clone, Debug, PartialEq)]
pub enum AgentEvent {
    /// A request went to the model; nothing has come back yet.
    Waiting,
    /// Streamed answer text.
    Text(String),
    /// Streamed thinking.
    Thinking(String),
    /// A tool is about to run.
    ToolStart {
        /// The tool_use id.
        id: String,
        /// The tool.
        name: String,
        /// Its input.
        input: Value,
    },
    /// A tool finished (or was refused).
    ToolDone {
        /// The tool_use id.
        id: String,
        /// The tool.
        name: String,
        /// What the model sees.
        output: String,
        /// Whether it failed or was refused.
        is_error: bool,
    },
    /// A compaction step ran.
    Compaction(StepReport),
    /// The provider is retrying.
    Retry {
        /// Attempt number.
        attempt: u32,
        /// Wait before it.
        delay: Duration,
        /// What went wrong, one line.
        reason: String,
    },
    /// Token usage of a call.
    Usage(Usage),
    /// The model's task list changed.
    Todos(Vec<TodoItem>),
    /// Something the person should know (a hook failed, ...).
    Warning(String),
}

/// Receives [`AgentEvent`]s as they happen.
pub trait EventSink: Send {
    /// Called for every event, in order.
    fn on_event(&mut self, event: AgentEvent);
}

impl<F: FnMut(AgentEvent) + Send> EventSink for F {
    fn on_event(&mut self, event: AgentEvent) {
        self(event)
    }
}

/// The person's answer to a permission question.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Approval {
    /// Run it this once.
    Allow,
    /// Run it, and the same call again without asking this session.
    AllowForSession,
    /// Do not run it.
    Deny,
}

/// Asks the person before a tool the policy is unsure about.
pub trait Approver: Send {
    /// Whether to run `tool` with `input`; `reason` says why we ask.
    fn approve<'a>(
        &'a mut self,
        tool: &'a str,
        input: &'a Value,
        reason: &'a str,
    ) -> BoxFuture<'a, Approval>;
}

/// The approver when nobody can be asked (`-p`): every question is a no.
#[derive(Clone, Copy, Debug, Default)]
pub struct DenyAsks;

impl Approver for DenyAsks {
    fn approve<'a>(&'a mut self, _: &'a str, _: &'a Value, _: &'a str) -> BoxFuture<'a, Approval> {
        Box::pin(async { Approval::Deny })
    }
}

/// How a turn ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TurnOutcome {
    /// The model answered without calling a tool.
    Done {
        /// Its final text.
        text: String,
    },
    /// The person cancelled; the history stays valid.
    Cancelled,
    /// The turn used up `max_turns` model calls.
    MaxTurns,
    /// A UserPromptSubmit hook refused the prompt.
    Blocked {
        /// The hook's reason.
        reason: String,
    },
}

/// Why a turn failed.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The model call failed.
    #[error(transparent)]
    Llm(#[from] LlmError),
    /// The context stayed too long after reactive compaction.
    #[error(
        "the conversation is still too long for the model after compacting ({message}); the full history is in {}",
        transcript.as_ref().map_or_else(|| "the session log".to_string(), |p| p.display().to_string())
    )]
    Overflow {
        /// The provider's words.
        message: String,
        /// The transcript written by the last compaction.
        transcript: Option<PathBuf>,
    },
    /// Compaction left the context over the limit three times in a row.
    #[error(
        "compaction could not bring the context under the limit ({after} > {limit} {unit}) three times in a row; stopping this turn (try /compact with a focus, or /clear)"
    )]
    ContextSpiral {
        /// Size after the last attempt.
        after: u64,
        /// The limit.
        limit: u64,
        /// The unit.
        unit: &'static str,
    },
    /// A request would break the Messages API rules: a bug, never sent.
    #[error("internal error: the history is not a valid request ({0}); nothing was sent")]
    Invalid(#[from] ValidationError),
    /// The session log could not be written.
    #[error(transparent)]
    Session(#[from] SessionFileError),
}

/// Token usage summed over a session.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UsageTotals {
    /// Model calls.
    pub calls: u64,
    /// Uncached input tokens.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Input tokens read from the cache.
    pub cache_read: u64,
    /// Input tokens written to the cache.
    pub cache_write: u64,
}

/// Usage totals shared between an agent and its subagents, so that `/cost`
/// counts every call made on the session's behalf.
#[derive(Clone, Debug, Default)]
pub struct UsageMeter(Arc<std::sync::Mutex<UsageTotals>>);

impl UsageMeter {
    /// The totals so far.
    pub fn totals(&self) -> UsageTotals {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn add(&self, u: &Usage) {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .add(u);
    }

    fn set(&self, totals: UsageTotals) {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = totals;
    }
}

impl UsageTotals {
    fn add(&mut self, u: &Usage) {
        // Saturating: the numbers come from the server.
        self.calls += 1;
        self.input = self.input.saturating_add(u.input_tokens);
        self.output = self.output.saturating_add(u.output_tokens);
        self.cache_read = self.cache_read.saturating_add(u.cache_read_input_tokens);
        self.cache_write = self
            .cache_write
            .saturating_add(u.cache_creation_input_tokens);
    }

    /// Estimated cost at `prices`.
    pub fn cost_usd(&self, p: &Prices) -> f64 {
        let m = 1_000_000.0;
        self.input as f64 * p.input / m
            + self.output as f64 * p.output / m
            + self.cache_read as f64 * p.input * p.cache_read_multiplier / m
            + self.cache_write as f64 * p.input * p.cache_write_multiplier / m
    }
}

/// What fills the context, for `/context`, in the meter's unit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ContextBreakdown {
    /// The system prompt.
    pub system: u64,
    /// The tool definitions.
    pub tools: u64,
    /// Messages, except tool results.
    pub messages: u64,
    /// Tool results.
    pub tool_results: u64,
    /// Where compaction starts.
    pub limit: u64,
    /// The model's window (tokens), or the limit in chars mode.
    pub window: u64,
}

/// One coding agent session.
pub struct Agent {
    provider: Arc<dyn Provider>,
    tools: ToolRegistry,
    policy: PermissionPolicy,
    approver: Box<dyn Approver>,
    hooks: Hooks,
    compactor: Compactor,
    history: History,
    session: Option<SessionWriter>,
    request: String,
    tool_ctx: ToolContext,
    config: AgentConfig,
    usage: UsageMeter,
    /// Usage of summary calls, counted and logged after their compaction.
    summary_usage: Vec<Usage>,
    approved: HashSet<String>,
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
            tool_ctx: ToolContext::new(&config.workspace).with_sandbox(config.sandbox.clone()),
            tools,
            policy: PermissionPolicy::new(whittle_tools::PermissionMode::Default),
            approver: Box::new(DenyAsks),
            hooks: Hooks::new(),
            compactor,
            history: History::default(),
            session: None,
            request: String::new(),
            config,
            usage: UsageMeter::default(),
            summary_usage: Vec::new(),
            approved: HashSet::new(),
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
        self.approver = approver;
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
        let writer = SessionWriter::create(&dir, &self.config.model_label, &self.config.workspace)?
            .redacting(self.config.redactor.clone());
        Ok(self.session.insert(writer).path())
    }

    /// Continues the session logged at `path`: its history (with tool calls
    /// a crash left unanswered given an "interrupted" result), its active
    /// request, and further records appended to the same log.
    pub fn resume_session(&mut self, path: &Path) -> Result<usize, AgentError> {
        let (writer, state) = SessionWriter::resume(path)?;
        self.session = Some(writer.redacting(self.config.redactor.clone()));
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

    /// The history.
    pub fn history(&self) -> &History {
        &self.history
    }

    /// The active request.
    pub fn request(&self) -> &str {
        &self.request
    }

    /// The configuration.
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

    /// What fills the context, for `/context`.
    pub fn context_breakdown(&self) -> ContextBreakdown {
        let meter = self.compactor.meter();
        let specs = self.tools.specs();
        let result_chars: usize = self
            .history
            .messages()
            .iter()
            .flat_map(|m| {
                m.blocks()
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| matches!(b, Block::ToolResult(_)))
                    .map(|(i, _)| m.block_chars(i).unwrap_or(0))
            })
            .sum();
        let limits = self.compactor.limits();
        ContextBreakdown {
            system: meter.chars_to_units(self.config.system_prompt.chars().count()),
            tools: meter.chars_to_units(whittle_context::json_chars(&specs)),
            messages: meter.chars_to_units(self.history.chars().saturating_sub(result_chars)),
            tool_results: meter.chars_to_units(result_chars),
            limit: limits.context_limit,
            window: match self.config.meter {
                MeterChoice::Chars => limits.context_limit,
                MeterChoice::Tokens => self.config.context_window,
            },
        }
    }

    /// Runs one user turn: the input enters as the active request, then the
    /// model and tools alternate until the model answers without a tool call.
    pub async fn run_turn(
        &mut self,
        input: &str,
        sink: &mut dyn EventSink,
        cancel: &CancellationToken,
    ) -> Result<TurnOutcome, AgentError> {
        let prompt = HookEvent::UserPromptSubmit {
            prompt: input.to_string(),
        };
        if let Some(reason) = self.run_hook(&prompt, sink).await {
            return Ok(TurnOutcome::Blocked { reason });
        }
        self.request = input.to_string();
        self.log(SessionRecord::Input {
            text: input.to_string(),
        })?;
        self.push(Message::user(input))?;
        self.continue_turn(sink, cancel).await
    }

    /// Runs the loop from the current history without new input (after a
    /// resume whose last message awaits an answer).
    pub async fn continue_turn(
        &mut self,
        sink: &mut dyn EventSink,
        cancel: &CancellationToken,
    ) -> Result<TurnOutcome, AgentError> {
        let tool_ctx = self.tool_ctx.clone().with_cancel(cancel.clone());
        let mut calls = 0;
        let mut reactive_used = false;
        loop {
            if cancel.is_cancelled() {
                return Ok(TurnOutcome::Cancelled);
            }
            if calls >= self.config.max_turns {
                return Ok(TurnOutcome::MaxTurns);
            }
            let outcome = self.prepare(sink, cancel).await?;
            if cancel.is_cancelled() {
                return Ok(TurnOutcome::Cancelled);
            }
            if outcome.should_stop() {
                return Err(AgentError::ContextSpiral {
                    after: outcome.after,
                    limit: self.compactor.limits().context_limit,
                    unit: self.compactor.meter().unit().as_str(),
                });
            }
            let response = match self.call_model(sink, cancel).await {
                Ok(Some(r)) => r,
                Ok(None) => return Ok(TurnOutcome::Cancelled),
                Err(LlmError::ContextOverflow {
                    message, tokens, ..
                }) => {
                    if reactive_used {
                        return Err(AgentError::Overflow {
                            message,
                            transcript: self.last_transcript.clone(),
                        });
                    }
                    reactive_used = true;
                    if let Some(t) = tokens {
                        // The meter underestimated: learn the real size.
                        self.compactor.meter_mut().observe(&self.history, t);
                    }
                    let report = self.reactive_compact(sink, cancel).await?;
                    if cancel.is_cancelled() {
                        return Ok(TurnOutcome::Cancelled);
                    }
                    if !report.applied() {
                        return Err(AgentError::Overflow {
                            message,
                            transcript: self.last_transcript.clone(),
                        });
                    }
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            reactive_used = false;
            calls += 1;
            self.count_usage(&response.usage)?;
            self.compactor
                .meter_mut()
                .observe(&self.history, response.usage.total_input_tokens());
            sink.on_event(AgentEvent::Usage(response.usage));

            let mut message = response.message;
            if message.blocks().is_empty() && message.text().is_empty() {
                message = Message::assistant("(no answer)");
            }
            let uses: Vec<ToolUse> = message.tool_uses().cloned().collect();
            let text = message.text();
            self.push(message)?;
            if uses.is_empty() {
                let stop = HookEvent::Stop {
                    last_text: text.clone(),
                };
                if let Some(reason) = self.run_hook(&stop, sink).await {
                    self.push(Message::user(format!("[Stop hook] {reason}")))?;
                    continue;
                }
                return Ok(TurnOutcome::Done { text });
            }
            let (results, compact) = self.run_tools(&uses, &tool_ctx, sink, cancel).await?;
            self.push(Message::user_blocks(results))?;
            if cancel.is_cancelled() {
                return Ok(TurnOutcome::Cancelled);
            }
            if let Some(focus) = compact {
                self.compact(focus.as_deref(), sink, cancel).await?;
            }
        }
    }

    /// `/compact [focus]` and the `compact` tool: summarize now. `cancel`
    /// abandons the summary call, leaving the history as it was.
    pub async fn compact(
        &mut self,
        focus: Option<&str>,
        sink: &mut dyn EventSink,
        cancel: &CancellationToken,
    ) -> Result<StepReport, AgentError> {
        let report = self
            .compaction("manual", true, sink, cancel, |c, h, request, s| {
                c.compact(h, request, s, focus)
            })
            .await;
        self.after_compaction(std::slice::from_ref(&report), sink)
            .await?;
        Ok(report)
    }

    async fn prepare(
        &mut self,
        sink: &mut dyn EventSink,
        cancel: &CancellationToken,
    ) -> Result<whittle_context::PrepareOutcome, AgentError> {
        let over = self.compactor.measure(&self.history) > self.compactor.limits().context_limit;
        let outcome = self
            .compaction("auto", over, sink, cancel, |c, h, request, s| {
                c.prepare(h, request, s)
            })
            .await;
        self.after_compaction(&outcome.reports, sink).await?;
        Ok(outcome)
    }

    async fn reactive_compact(
        &mut self,
        sink: &mut dyn EventSink,
        cancel: &CancellationToken,
    ) -> Result<StepReport, AgentError> {
        let report = self
            .compaction("overflow", true, sink, cancel, |c, h, request, s| {
                c.reactive_compact(h, request, s)
            })
            .await;
        self.after_compaction(std::slice::from_ref(&report), sink)
            .await?;
        Ok(report)
    }

    /// Runs one of the compactor's entry points with the session's
    /// summarizer, after the PreCompact hook when `announce`. The pipeline is
    /// synchronous and may block on the model, hence `block_in_place`.
    async fn compaction<T>(
        &mut self,
        trigger: &str,
        announce: bool,
        sink: &mut dyn EventSink,
        cancel: &CancellationToken,
        run: impl FnOnce(&mut Compactor, &mut History, &str, &mut ProviderSummarizer) -> T,
    ) -> T {
        if announce {
            let size = self.compactor.measure(&self.history);
            let event = HookEvent::PreCompact {
                trigger: trigger.into(),
                size,
            };
            self.run_hook(&event, sink).await;
        }
        let mut summarizer = self.summarizer().with_cancel(cancel.clone());
        let request = self.request.clone();
        let result = tokio::task::block_in_place(|| {
            run(
                &mut self.compactor,
                &mut self.history,
                &request,
                &mut summarizer,
            )
        });
        self.summary_usage.extend(summarizer.take_usage());
        result
    }

    /// Adds one call's usage to the totals and the session log.
    fn count_usage(&mut self, usage: &Usage) -> Result<(), AgentError> {
        self.usage.add(usage);
        self.log(SessionRecord::Usage {
            input_tokens: usage.total_input_tokens(),
            output_tokens: usage.output_tokens,
            cache_read_tokens: usage.cache_read_input_tokens,
            cache_write_tokens: usage.cache_creation_input_tokens,
        })
    }

    fn summarizer(&self) -> ProviderSummarizer {
        ProviderSummarizer::new(
            self.provider.clone(),
            &self.config.model,
            &self.config.system_prompt,
            self.tools.specs(),
            self.config.max_tokens,
        )
        .with_reasoning(self.config.reasoning)
    }

    /// Shows and logs what compaction did; the log gets the new history once.
    async fn after_compaction(
        &mut self,
        reports: &[StepReport],
        sink: &mut dyn EventSink,
    ) -> Result<(), AgentError> {
        for usage in std::mem::take(&mut self.summary_usage) {
            self.count_usage(&usage)?;
            sink.on_event(AgentEvent::Usage(usage));
        }
        let applied: Vec<&StepReport> = reports.iter().filter(|r| r.applied()).collect();
        for r in reports {
            if let Some(t) = r.transcript() {
                self.last_transcript = Some(t.clone());
            }
            sink.on_event(AgentEvent::Compaction(r.clone()));
            if let Outcome::Failed(why) = &r.outcome {
                sink.on_event(AgentEvent::Warning(format!(
                    "{} failed: {why}",
                    r.step.as_str()
                )));
                self.log(SessionRecord::CompactionFailed {
                    step: r.step.as_str().to_string(),
                    trigger: r.trigger.as_str().to_string(),
                    reason: why.clone(),
                })?;
            }
        }
        let (Some(first), Some(last)) = (applied.first(), applied.last()) else {
            return Ok(());
        };
        let from = self.history.take_edited_from();
        let record = SessionRecord::Compaction {
            step: applied
                .iter()
                .map(|r| r.step.as_str())
                .collect::<Vec<_>>()
                .join("+"),
            trigger: applied
                .iter()
                .map(|r| r.trigger.as_str())
                .collect::<Vec<_>>()
                .join("+"),
            before: first.before,
            after: last.after,
            unit: last.unit.as_str().to_string(),
            paths: applied
                .iter()
                .flat_map(|r| r.paths.iter().cloned())
                .collect(),
            from,
            messages: self.history.messages()[from..].to_vec(),
        };
        self.log(record)?;
        for r in applied {
            let event = HookEvent::PostCompact {
                step: r.step.as_str().to_string(),
                before: r.before,
                after: r.after,
                paths: r.paths.clone(),
            };
            self.run_hook(&event, sink).await;
        }
        Ok(())
    }

    /// One model call, streamed to the sink. `Ok(None)` when cancelled.
    async fn call_model(
        &mut self,
        sink: &mut dyn EventSink,
        cancel: &CancellationToken,
    ) -> Result<Option<whittle_llm::ModelResponse>, LlmError> {
        if let Err(e) = validate(self.history.messages()) {
            return Err(LlmError::Config(format!(
                "internal error, request not sent: the history is invalid: {e}"
            )));
        }
        let mut request = ModelRequest::new(
            &self.config.model,
            &self.config.system_prompt,
            self.history.messages().to_vec(),
        );
        request.tools = self.tools.specs();
        request.max_tokens = self.config.max_tokens;
        request.reasoning = self.config.reasoning;
        request.cache_anchor = self.compactor.cache_anchor(&self.history);
        self.history.mark();
        sink.on_event(AgentEvent::Waiting);
        let mut stream = tokio::select! {
            s = self.provider.stream(request) => s?,
            _ = cancel.cancelled() => return Ok(None),
        };
        let mut collector = Collector::new();
        loop {
            let next = tokio::select! {
                n = stream.next() => n,
                _ = cancel.cancelled() => return Ok(None),
            };
            let Some(event) = next else { break };
            let event = event?;
            match &event {
                StreamEvent::TextDelta { text, .. } => {
                    sink.on_event(AgentEvent::Text(text.clone()))
                }
                StreamEvent::ThinkingDelta { thinking, .. } => {
                    sink.on_event(AgentEvent::Thinking(thinking.clone()))
                }
                StreamEvent::Retry {
                    attempt,
                    delay,
                    reason,
                } => sink.on_event(AgentEvent::Retry {
                    attempt: *attempt,
                    delay: *delay,
                    reason: reason.to_string(),
                }),
                _ => {}
            }
            collector.push(&event)?;
        }
        collector.finish().map(Some)
    }

    /// Runs every tool of one response, in order; returns their results and
    /// the `compact` request, if any (with its focus).
    async fn run_tools(
        &mut self,
        uses: &[ToolUse],
        tool_ctx: &ToolContext,
        sink: &mut dyn EventSink,
        cancel: &CancellationToken,
    ) -> Result<(Vec<Block>, Option<Option<String>>), AgentError> {
        let mut results = Vec::with_capacity(uses.len());
        let mut compact = None;
        for call in uses {
            if cancel.is_cancelled() {
                results.push(Block::tool_result(
                    &call.id,
                    "[cancelled by the user before it ran]",
                    true,
                ));
                continue;
            }
            sink.on_event(AgentEvent::ToolStart {
                id: call.id.clone(),
                name: call.name.clone(),
                input: call.input.clone(),
            });
            let started = Instant::now();
            let mut output = if call.name == "compact" {
                compact = Some(
                    call.input
                        .get("focus")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                );
                ToolOutput::ok(COMPACT_ACK)
            } else {
                self.run_one_tool(call, tool_ctx, sink, cancel).await
            };
            if let std::borrow::Cow::Owned(clean) = self.config.redactor.redact(&output.content) {
                output.content = clean;
            }
            let post = HookEvent::PostToolUse {
                tool_name: call.name.clone(),
                tool_input: call.input.clone(),
                tool_use_id: call.id.clone(),
                tool_output: output.content.clone(),
                is_error: output.is_error,
            };
            if let Some(reason) = self.run_hook(&post, sink).await {
                output
                    .content
                    .push_str(&format!("\n\n[PostToolUse hook] {reason}"));
            }
            self.log(SessionRecord::ToolRun {
                id: call.id.clone(),
                name: call.name.clone(),
                ms: started.elapsed().as_millis() as u64,
                is_error: output.is_error,
            })?;
            if call.name == "todo_write" {
                sink.on_event(AgentEvent::Todos(self.tool_ctx.todos().snapshot()));
            }
            sink.on_event(AgentEvent::ToolDone {
                id: call.id.clone(),
                name: call.name.clone(),
                output: output.content.clone(),
                is_error: output.is_error,
            });
            results.push(Block::tool_result(
                &call.id,
                output.content,
                output.is_error,
            ));
        }
        Ok((results, compact))
    }

    async fn run_one_tool(
        &mut self,
        call: &ToolUse,
        tool_ctx: &ToolContext,
        sink: &mut dyn EventSink,
        cancel: &CancellationToken,
    ) -> ToolOutput {
        let Some(tool) = self.tools.get(&call.name).cloned() else {
            let known: Vec<&str> = self.tools.names().collect();
            return ToolOutput::error(format!(
                "unknown tool `{}`; the tools are: {}",
                call.name,
                known.join(", ")
            ));
        };
        let pre = HookEvent::PreToolUse {
            tool_name: call.name.clone(),
            tool_input: call.input.clone(),
            tool_use_id: call.id.clone(),
        };
        if let Some(reason) = self.run_hook(&pre, sink).await {
            return ToolOutput::error(format!("[blocked by a PreToolUse hook] {reason}"));
        }
        match self
            .policy
            .check(&call.name, &call.input, &self.config.workspace)
        {
            Decision::Allow => {}
            Decision::Deny { reason } => {
                return ToolOutput::error(format!("[denied] {reason}"));
            }
            Decision::Ask { reason } => {
                let key = format!("{}\0{}", call.name, call.input);
                if !self.approved.contains(&key) {
                    match self
                        .approver
                        .approve(&call.name, &call.input, &reason)
                        .await
                    {
                        Approval::Allow => {}
                        Approval::AllowForSession => {
                            self.approved.insert(key);
                        }
                        Approval::Deny => {
                            return ToolOutput::error(format!(
                                "[denied] not allowed without asking ({reason}); the user was not asked or said no"
                            ));
                        }
                    }
                }
            }
        }
        tokio::select! {
            out = tool.run(call.input.clone(), tool_ctx) => out,
            _ = cancel.cancelled() => ToolOutput::error("[cancelled by the user]"),
        }
    }

    /// Runs the hooks for `event`; returns a block reason. Hook failures are
    /// warnings. Borrows only what it needs, so the future stays `Send`.
    fn run_hook<'a>(
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

    fn push(&mut self, message: Message) -> Result<(), AgentError> {
        self.log(SessionRecord::Message {
            message: message.clone(),
        })?;
        self.history.push(message);
        Ok(())
    }

    fn log(&mut self, record: SessionRecord) -> Result<(), AgentError> {
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
