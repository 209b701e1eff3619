//! The agent's events as ACP session updates, streamed while a turn runs.

use crate::session_shared::{CurrentTool, SessionShared};
use crate::tool_calls::{
    EditedFile, finished_content, started_call, text_content, tool_kind, tool_path,
};
use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, Plan, PlanEntry, PlanEntryPriority, PlanEntryStatus, SessionUpdate,
    TextContent, ToolCall, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields, UsageUpdate,
};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use whittle_agent::{AgentEvent, EventSink};
use whittle_protocol::tool_names;
use whittle_tools::{TodoItem, TodoStatus};

/// A chunk of text as content.
pub(crate) fn text_chunk(text: impl Into<String>) -> ContentChunk {
    ContentChunk::new(ContentBlock::Text(TextContent::new(text)))
}

/// The model's task list as an ACP plan.
pub(crate) fn plan(todos: &[TodoItem]) -> Plan {
    Plan::new(
        todos
            .iter()
            .map(|t| {
                let status = match t.status {
                    TodoStatus::Pending => PlanEntryStatus::Pending,
                    TodoStatus::InProgress => PlanEntryStatus::InProgress,
                    TodoStatus::Completed => PlanEntryStatus::Completed,
                };
                PlanEntry::new(t.content.clone(), PlanEntryPriority::Medium, status)
            })
            .collect(),
    )
}

/// Sends each event to the client as it happens.
pub(crate) struct UpdateSink {
    shared: Arc<SessionShared>,
    /// The context window, for usage updates.
    window: u64,
    /// Files an edit is about to change, with their text before it.
    edits: HashMap<String, (PathBuf, Option<String>)>,
    /// Files being read, whose text the editor may have given.
    reads: HashMap<String, PathBuf>,
}

impl UpdateSink {
    pub fn new(shared: Arc<SessionShared>, window: u64) -> Self {
        UpdateSink {
            shared,
            window,
            edits: HashMap::new(),
            reads: HashMap::new(),
        }
    }
}

impl EventSink for UpdateSink {
    fn on_event(&mut self, event: AgentEvent) {
        let update = match event {
            AgentEvent::Text(t) => SessionUpdate::AgentMessageChunk(text_chunk(t)),
            AgentEvent::Thinking(t) => SessionUpdate::AgentThoughtChunk(text_chunk(t)),
            AgentEvent::ToolStart { id, name, input } => {
                if (name == tool_names::WRITE_FILE || name == tool_names::EDIT_FILE)
                    && let Some(path) = tool_path(&self.shared.workspace, &name, &input)
                {
                    let old = std::fs::read_to_string(&path).ok();
                    // What the editor said of this file before is stale.
                    self.shared.take_editor_text(&path);
                    self.edits.insert(id.clone(), (path, old));
                }
                if name == tool_names::READ_FILE
                    && let Some(path) = tool_path(&self.shared.workspace, &name, &input)
                {
                    self.reads.insert(id.clone(), path);
                }
                let call = started_call(&self.shared.workspace, &id, &name, &input);
                self.shared
                    .set_current_tool(Some(CurrentTool { id, name, input }));
                SessionUpdate::ToolCall(call)
            }
            AgentEvent::ToolDone {
                id,
                name,
                output,
                is_error,
            } => {
                self.shared.set_current_tool(None);
                if name == tool_names::READ_FILE
                    && let Some(call) = self.reads.remove(&id)
                {
                    self.shared.take_editor_text(&call);
                }
                let edit = self.edits.remove(&id).map(|(path, disk_before)| {
                    let editor = self.shared.take_editor_text(&path).unwrap_or_default();
                    EditedFile {
                        before: editor.before.or(disk_before),
                        after: editor.after,
                        path,
                    }
                });
                let status = if is_error {
                    ToolCallStatus::Failed
                } else {
                    ToolCallStatus::Completed
                };
                let fields = ToolCallUpdateFields::new()
                    .status(status)
                    .content(finished_content(&name, &output, is_error, edit));
                SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(id, fields))
            }
            AgentEvent::Todos(todos) => SessionUpdate::Plan(plan(&todos)),
            AgentEvent::Compaction(report) => {
                if !report.applied() {
                    return;
                }
                let title = format!(
                    "Compacted: {} -> {} {}",
                    short_count(report.before),
                    short_count(report.after),
                    report.unit.as_str()
                );
                let id = format!("compaction-{}", uuid_like());
                let call = ToolCall::new(id, title)
                    .kind(tool_kind("compaction"))
                    .status(ToolCallStatus::Completed)
                    .content(vec![text_content(
                        report.describe(Some(&self.shared.workspace)),
                    )]);
                SessionUpdate::ToolCall(call)
            }
            AgentEvent::Usage(usage) => SessionUpdate::UsageUpdate(UsageUpdate::new(
                usage.total_input_tokens() + usage.output_tokens,
                self.window,
            )),
            AgentEvent::Retry {
                attempt, reason, ..
            } => SessionUpdate::AgentThoughtChunk(text_chunk(format!(
                "(retrying, attempt {attempt}: {reason})\n"
            ))),
            AgentEvent::Warning(w) => {
                SessionUpdate::AgentMessageChunk(text_chunk(format!("\nwarning: {w}\n")))
            }
            _ => return,
        };
        self.shared.notify(update);
    }
}

/// 170_000 as "170k".
fn short_count(n: u64) -> String {
    if n >= 10_000 {
        format!("{}k", n / 1_000)
    } else {
        n.to_string()
    }
}

/// A distinct suffix for ids this side makes up.
fn uuid_like() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_shorten_above_ten_thousand() {
        assert_eq!(short_count(170_400), "170k");
        assert_eq!(short_count(9_999), "9999");
    }
}
