//! From whittle's conversation model to the messages a chat template renders.

use crate::template::TemplateMessage;
use crate::tools::{ToolSpec, format_tool_call, format_tool_response, tools_prompt};
use std::collections::HashMap;
use whittle_protocol::{Block, Content, Message, Role};

/// What the model is asked: the system prompt, the history, and the tools it may call.
#[derive(Clone, Copy, Debug)]
pub struct ChatRequest<'a> {
    /// The system prompt; may be empty.
    pub system: &'a str,
    /// The conversation, oldest first.
    pub messages: &'a [Message],
    /// The tools offered; their schemas go into the system prompt.
    pub tools: &'a [ToolSpec],
}

/// Builds template messages: one system message (prompt plus tool section, if any), then
/// the history with tool calls as `<tool_call>` text and tool results in the `tool` role
/// (when `tool_role`) or as `<tool_response>` user text. Consecutive user or assistant
/// messages are merged, since some templates insist on alternation.
pub fn template_messages(request: &ChatRequest<'_>, tool_role: bool) -> Vec<TemplateMessage> {
    let mut out: Vec<TemplateMessage> = Vec::with_capacity(request.messages.len() + 1);
    let mut system = request.system.trim_end().to_string();
    if !request.tools.is_empty() {
        if !system.is_empty() {
            system.push_str("\n\n");
        }
        system.push_str(&tools_prompt(request.tools));
    }
    if !system.is_empty() {
        out.push(TemplateMessage::new("system", system));
    }
    let mut tool_names: HashMap<&str, &str> = HashMap::new();
    for message in request.messages {
        match message.role() {
            Role::Assistant => {
                let mut parts = Vec::new();
                match message.content() {
                    Content::Text(s) => parts.push(s.clone()),
                    Content::Blocks(blocks) => {
                        for block in blocks {
                            match block {
                                Block::Text(t) => parts.push(t.text.clone()),
                                Block::ToolUse(u) => {
                                    tool_names.insert(&u.id, &u.name);
                                    parts.push(format_tool_call(&u.name, &u.input));
                                }
                                other => parts.extend(placeholder(other)),
                            }
                        }
                    }
                }
                push_merged(&mut out, "assistant", parts.join("\n"));
            }
            Role::User => match message.content() {
                Content::Text(s) => push_merged(&mut out, "user", s.clone()),
                Content::Blocks(blocks) => {
                    let mut parts: Vec<String> = Vec::new();
                    for block in blocks {
                        match block {
                            Block::Text(t) => parts.push(t.text.clone()),
                            Block::ToolResult(r) => {
                                let name = tool_names
                                    .get(r.tool_use_id.as_str())
                                    .copied()
                                    .unwrap_or("unknown");
                                let is_error = r.is_error == Some(true);
                                let text = r.full_text();
                                if tool_role {
                                    if !parts.is_empty() {
                                        push_merged(&mut out, "user", parts.join("\n"));
                                        parts.clear();
                                    }
                                    let content = if is_error {
                                        format!("Error: {text}")
                                    } else {
                                        text.into_owned()
                                    };
                                    out.push(TemplateMessage {
                                        role: "tool".into(),
                                        content,
                                        tool_call_id: Some(r.tool_use_id.clone()),
                                        name: Some(name.to_string()),
                                    });
                                } else {
                                    parts.push(format_tool_response(name, &text, is_error));
                                }
                            }
                            other => parts.extend(placeholder(other)),
                        }
                    }
                    if !parts.is_empty() {
                        push_merged(&mut out, "user", parts.join("\n"));
                    }
                }
            },
        }
    }
    out
}

/// What a block the local model cannot take is shown as; thinking is not replayed.
fn placeholder(block: &Block) -> Option<String> {
    match block {
        Block::Thinking(_) | Block::RedactedThinking(_) => None,
        Block::Image(_) => Some("[image omitted: this model reads text only]".into()),
        other => Some(format!("[{} block omitted]", other.type_name())),
    }
}

fn push_merged(out: &mut Vec<TemplateMessage>, role: &str, content: String) {
    if let Some(last) = out.last_mut()
        && last.role == role
        && role != "system"
    {
        last.content.push_str("\n\n");
        last.content.push_str(&content);
        return;
    }
    out.push(TemplateMessage::new(role, content));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn history() -> Vec<Message> {
        vec![
            Message::user("list files"),
            Message::assistant_blocks(vec![
                Block::text("Sure."),
                Block::tool_use("t1", "bash", json!({"command": "ls"})),
            ]),
            Message::user_blocks(vec![
                Block::tool_result("t1", "a.rs\nb.rs", false),
                Block::text("thanks"),
            ]),
        ]
    }

    fn tools() -> Vec<ToolSpec> {
        vec![ToolSpec {
            name: "bash".into(),
            description: "Run a command".into(),
            input_schema: json!({"type": "object", "properties": {"command": {"type": "string"}}}),
        }]
    }

    #[test]
    fn tool_results_become_user_text_without_a_tool_role() {
        let h = history();
        let t = tools();
        let req = ChatRequest {
            system: "Be brief.",
            messages: &h,
            tools: &t,
        };
        let m = template_messages(&req, false);
        let roles: Vec<&str> = m.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "user"]);
        assert!(m[0].content.starts_with("Be brief.\n\n# Tools"));
        assert!(m[0].content.contains("\"name\":\"bash\""));
        assert!(m[0].content.ends_with(
            "For example:\n<tool_call>\n{\"name\":\"bash\",\"arguments\":{\"command\":\"...\"}}\n</tool_call>"
        ));
        assert_eq!(
            m[2].content,
            "Sure.\n<tool_call>\n{\"name\":\"bash\",\"arguments\":{\"command\":\"ls\"}}\n</tool_call>"
        );
        assert_eq!(
            m[3].content,
            "<tool_response name=\"bash\">\na.rs\nb.rs\n</tool_response>\nthanks"
        );
    }

    #[test]
    fn tool_results_use_the_tool_role_when_there_is_one() {
        let h = history();
        let req = ChatRequest {
            system: "",
            messages: &h,
            tools: &[],
        };
        let m = template_messages(&req, true);
        let roles: Vec<&str> = m.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["user", "assistant", "tool", "user"]);
        assert_eq!(m[2].name.as_deref(), Some("bash"));
        assert_eq!(m[2].tool_call_id.as_deref(), Some("t1"));
        assert_eq!(m[2].content, "a.rs\nb.rs");
    }

    #[test]
    fn consecutive_same_role_messages_merge() {
        let h = vec![Message::user("a"), Message::user("b")];
        let req = ChatRequest {
            system: "",
            messages: &h,
            tools: &[],
        };
        let m = template_messages(&req, false);
        assert_eq!(m, vec![TemplateMessage::new("user", "a\n\nb")]);
    }
}
