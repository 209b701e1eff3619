//! Running the tool calls of one model response: hooks before and after,
//! the permission policy and the person's approval, cancellation, and the
//! `compact` tool, which only asks for a summary after the batch.

use super::Agent;
use super::error::AgentError;
use super::events::{AgentEvent, EventSink};
use crate::hooks::HookEvent;
use serde_json::Value;
use std::time::Instant;
use tokio_util::sync::CancellationToken;
use whittle_context::session::SessionRecord;
use whittle_protocol::tool_names;
use whittle_protocol::{Block, ToolUse};
use whittle_tools::{Decision, ToolContext, ToolOutput};

/// How long a cancelled tool may take to stop on its own before it is
/// dropped: longer than an MCP server's cancellation notice may take to go
/// out on a loaded machine (3 s), short enough that a tool ignoring its
/// token does not hold up the turn for long (a second Ctrl-C quits anyway).
const TOOL_STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// The result the `compact` tool gives; the harness summarizes after the batch.
pub const COMPACT_ACK: &str = "[Compaction requested. This completed turn will be summarized.]";

/// What the model asked for besides its tools' results.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum AfterTools {
    /// Nothing: the turn goes on.
    Continue,
    /// The `compact` tool was called: summarize this turn, with the focus
    /// it named, if any.
    Compact { focus: Option<String> },
}

impl Agent {
    /// Runs every tool of one response, in order; returns their results and
    /// whether `compact` was asked for.
    pub(super) async fn run_tools(
        &mut self,
        uses: &[ToolUse],
        tool_ctx: &ToolContext,
        sink: &mut dyn EventSink,
        cancel: &CancellationToken,
    ) -> Result<(Vec<Block>, AfterTools), AgentError> {
        let mut results = Vec::with_capacity(uses.len());
        let mut after = AfterTools::Continue;
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
            let writes = self.may_write(&call.name);
            if writes {
                self.checkpoint_turn_start(sink).await?;
            }
            let started = Instant::now();
            let mut output = if call.name == tool_names::COMPACT {
                after = AfterTools::Compact {
                    focus: call
                        .input
                        .get("focus")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                };
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
            if writes {
                self.checkpoint_after(&call.id, sink).await?;
            }
            if call.name == tool_names::TODO_WRITE {
                sink.on_event(AgentEvent::Todos(self.tool_ctx.todos().snapshot()));
            }
            sink.on_event(AgentEvent::ToolDone {
                id: call.id.clone(),
                name: call.name.clone(),
                output: output.content.clone(),
                is_error: output.is_error,
            });
            results.push(output.into_tool_result(&call.id));
        }
        Ok((results, after))
    }

    /// One call: an unknown tool, a PreToolUse hook's block, or the policy's
    /// (or the person's) no become an error result the model can read;
    /// otherwise the tool runs until it ends or the turn is cancelled.
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
                if !self.approvals.allow(&call.name, &call.input, &reason).await {
                    return ToolOutput::error(format!(
                        "[denied] not allowed without asking ({reason}); the user was not asked or said no"
                    ));
                }
            }
        }
        // Outputs the tool saves are named after the call.
        let call_ctx = tool_ctx.clone().with_call_id(&call.id);
        let run = tool.run(call.input.clone(), &call_ctx);
        tokio::pin!(run);
        tokio::select! {
            out = &mut run => out,
            _ = cancel.cancelled() => {
                // The tool sees the same token and stops on its own: let it,
                // for a while. Dropped mid-step, it cannot finish what
                // stopping takes (an MCP call dropped while its request is
                // going out never tells the server to stop).
                match tokio::time::timeout(TOOL_STOP_GRACE, &mut run).await {
                    Ok(out) => out,
                    Err(_) => ToolOutput::error("[cancelled by the user]"),
                }
            }
        }
    }
}
