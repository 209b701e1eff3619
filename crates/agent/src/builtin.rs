//! The tools that belong to the loop rather than to the workspace:
//! `compact` and `task` (a subagent).

use crate::agent::{Agent, AgentConfig, COMPACT_ACK, DenyAsks, TurnOutcome, UsageMeter};
use crate::hooks::Hooks;
use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;
use std::sync::Arc;
use whittle_llm::Provider;
use whittle_protocol::tool_names;
use whittle_tools::{
    PermissionMode, PermissionPolicy, ToolContext, ToolOutput, ToolRegistry, TypedTool,
};

/// The model raises its hand: summarize the history after this batch of tools.
/// The loop recognises the call by name; running it only acknowledges.
#[derive(Clone, Copy, Debug, Default)]
pub struct CompactTool;

/// What the model sends to `compact`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompactInput {
    /// What the summary must keep in detail.
    pub focus: Option<String>,
}

impl TypedTool for CompactTool {
    type Input = CompactInput;
    const NAME: &'static str = tool_names::COMPACT;
    const DESCRIPTION: &'static str = "Summarize the conversation so far to free context space. Call it after finishing a stage \
         of work when the details before it are no longer needed; the summary keeps the goal, \
         decisions, files and remaining work. Give a focus to say what the summary must keep.";
    const READ_ONLY: bool = true;

    fn call<'a>(&'a self, _: CompactInput, _: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async { ToolOutput::ok(COMPACT_ACK) })
    }
}

/// A subagent: a fresh context, read-only tools, its own compaction; it
/// returns its final answer. For searches and reading many files without
/// filling the main context.
pub struct TaskTool {
    provider: Arc<dyn Provider>,
    tools: ToolRegistry,
    config: AgentConfig,
    hooks: Hooks,
    usage: Option<UsageMeter>,
    policy: PermissionPolicy,
}

impl TaskTool {
    /// Model calls a subagent may make.
    pub const MAX_TURNS: u32 = 30;

    /// A task tool whose subagents use `provider`, the read-only subset of
    /// `tools`, and `config` (its compaction limits and state folder).
    pub fn new(provider: Arc<dyn Provider>, tools: &ToolRegistry, mut config: AgentConfig) -> Self {
        let mut tools = tools.read_only();
        tools.remove(tool_names::TASK);
        tools.remove(tool_names::TODO_WRITE);
        config.max_turns = config.max_turns.min(Self::MAX_TURNS);
        config.system_prompt = format!(
            "{}\n\nYou are a subagent: another agent gave you the task below. Work with your \
             read-only tools, then answer with everything the other agent needs, in a self-contained \
             final message (it sees nothing else of your work).",
            config.system_prompt
        );
        TaskTool {
            provider,
            tools,
            config,
            hooks: Hooks::new(),
            usage: None,
            policy: PermissionPolicy::new(PermissionMode::ReadOnly),
        }
    }

    /// Gives subagents what `parent` allows of the read-only tools they
    /// have (its rules for MCP tools; see [`PermissionPolicy::for_subagent`]).
    pub fn with_parent_policy(mut self, parent: &PermissionPolicy) -> Self {
        self.policy = parent.for_subagent();
        self
    }

    /// Counts subagents' model calls in `meter` (the parent's), so the
    /// session's cost includes them.
    pub fn with_usage_meter(mut self, meter: UsageMeter) -> Self {
        self.usage = Some(meter);
        self
    }

    /// Runs the session's hooks inside subagents too (their tool calls and
    /// compactions; see [`Hooks::for_subagent`]).
    pub fn with_hooks(mut self, hooks: Hooks) -> Self {
        self.hooks = hooks;
        self
    }
}

/// What the model sends to `task`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskInput {
    /// A few words naming the task.
    pub description: Option<String>,
    /// The full task for the subagent.
    pub prompt: String,
}

impl TypedTool for TaskTool {
    type Input = TaskInput;
    const NAME: &'static str = tool_names::TASK;
    const DESCRIPTION: &'static str = "Delegate a self-contained research task (searching, reading many files, summarizing) to a \
         subagent with a fresh context and read-only tools. It returns only its final answer, so \
         your own context stays small. Say exactly what you need back.";
    const READ_ONLY: bool = true;

    fn call<'a>(&'a self, input: TaskInput, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let mut agent = Agent::new(
                self.provider.clone(),
                self.tools.clone(),
                self.config.clone(),
            )
            .with_policy(self.policy.clone())
            .with_approver(Box::new(DenyAsks))
            .with_hooks(self.hooks.for_subagent());
            if let Some(meter) = &self.usage {
                agent = agent.with_usage_meter(meter.clone());
            }
            let mut sink = |_| {};
            match agent
                .run_turn(&input.prompt, &mut sink, ctx.cancel_token())
                .await
            {
                Ok(TurnOutcome::Done { text }) => ToolOutput::ok(text),
                Ok(TurnOutcome::MaxTurns) => ToolOutput::error(format!(
                    "the subagent used all {} model calls without a final answer",
                    self.config.max_turns
                )),
                Ok(TurnOutcome::Cancelled) => ToolOutput::error("the subagent was cancelled"),
                Ok(TurnOutcome::Blocked { reason }) => {
                    ToolOutput::error(format!("the subagent was blocked: {reason}"))
                }
                Err(e) => ToolOutput::error(format!("the subagent failed: {e}")),
            }
        })
    }
}
