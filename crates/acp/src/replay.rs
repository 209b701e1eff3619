//! `session/load`: the logged history replayed to the client as the
//! updates it would have seen live.

use crate::tool_calls::{finished_content, started_call};
use crate::updates::text_chunk;
use agent_client_protocol::v1::schema::{
    SessionUpdate, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields,
};
use std::collections::HashMap;
use std::path::Path;
use whittle_protocol::{Block, Message, Role};

/// The updates that show `messages`.
pub(crate) fn replay_updates(workspace: &Path, messages: &[Message]) -> Vec<SessionUpdate> {
    let mut out = Vec::new();
    let mut names: HashMap<String, String> = HashMap::new();
    for message in messages {
        let user = message.role() == Role::User;
        let blocks: Vec<Block> = if message.blocks().is_empty() {
            vec![Block::text(message.text())]
        } else {
            message.blocks().to_vec()
        };
        for block in blocks {
            match block {
                Block::Text(t) if t.text.is_empty() => {}
                Block::Text(t) if user => {
                    out.push(SessionUpdate::UserMessageChunk(text_chunk(t.text)));
                }
                Block::Text(t) => out.push(SessionUpdate::AgentMessageChunk(text_chunk(t.text))),
                Block::Thinking(t) => {
                    out.push(SessionUpdate::AgentThoughtChunk(text_chunk(t.thinking)));
                }
                Block::ToolUse(u) => {
                    names.insert(u.id.clone(), u.name.clone());
                    let call = started_call(workspace, &u.id, &u.name, &u.input);
                    out.push(SessionUpdate::ToolCall(call));
                }
                Block::ToolResult(r) => {
                    let name = names.get(&r.tool_use_id).cloned().unwrap_or_default();
                    let output = r.text();
                    let status = if r.is_error == Some(true) {
                        ToolCallStatus::Failed
                    } else {
                        ToolCallStatus::Completed
                    };
                    let fields = ToolCallUpdateFields::new()
                        .status(status)
                        .content(finished_content(&name, &output, true, None));
                    out.push(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                        r.tool_use_id.clone(),
                        fields,
                    )));
                }
                _ => {}
            }
        }
    }
    out
}
