//! What the agent tells the person watching, as it happens.

use crate::SummaryProgress;
use serde_json::Value;
use std::time::Duration;
use whittle_context::StepReport;
use whittle_llm::Usage;
use whittle_tools::TodoItem;

/// Something that happened, for the person watching.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
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
    /// A summary is being written for a compaction: sent when the call
    /// starts and as the summary grows, so a slow model shows progress.
    Summarizing(SummaryProgress),
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
    /// The workspace's files were saved (and logged), so `/rewind` can
    /// bring them back.
    Checkpoint {
        /// Its id in the store.
        id: String,
        /// The tool call it followed; `None` at a turn's start.
        tool_call_id: Option<String>,
        /// Files changed since the previous checkpoint.
        files_changed: u64,
        /// Lines added since then.
        insertions: u64,
        /// Lines removed since then.
        deletions: u64,
    },
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
