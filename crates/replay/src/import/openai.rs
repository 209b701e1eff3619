//! OpenAI chat-completions message lists, the shape most harnesses log:
//! a JSON array of messages, or an object with a `"messages"` array.
//!
//! - `system` / `developer` messages before the first other message become
//!   [`Conversation::system`](super::Conversation) (joined by a blank line);
//!   later ones become user text at their place, since the Messages API has
//!   no system role inside the conversation.
//! - `user` content: a string, or parts: `text` → text block, `image_url`
//!   → image block (`data:` URLs as a base64 source, others as a `url`
//!   source); other parts are kept as raw JSON blocks.
//! - `assistant`: text (content or `refusal`), then one `tool_use` per
//!   `tool_calls[]` entry of type function: `arguments` is parsed as JSON;
//!   when it is not a JSON object it is kept, as written, under
//!   [`RAW_ARGUMENTS_KEY`]. A call without an id gets `call-<i>-<j>`.
//!   Reasoning fields are left out (they are not sent back to the model).
//! - `tool` messages become `tool_result`s for their `tool_call_id`.
//! - Message fields other than these (`name`, `audio`, ...) are left out; the
//!   legacy `function` role is an error naming the message.

use super::draft::Draft;
use super::{Conversation, Format, ImportError, finish, system_text};
use serde_json::{Map, Value, json};
use std::path::Path;
use whittle_protocol::{
    Block, Content, Image, Role, ToolResult, ToolResultContent, escape_controls,
};

/// The key under which tool-call arguments that are not a JSON object are
/// kept verbatim: `{"_raw_arguments": "<the string as logged>"}`.
pub const RAW_ARGUMENTS_KEY: &str = "_raw_arguments";

/// Imports one message list; `prefix` is its JSON path (`messages` or empty).
pub(crate) fn import(
    path: &Path,
    id: &str,
    prefix: &str,
    messages: &[Value],
) -> Result<Conversation, ImportError> {
    let bad = |at: String, reason: String| ImportError::BadValue {
        path: path.to_path_buf(),
        at,
        reason,
    };
    let mut system: Vec<String> = Vec::new();
    let mut draft = Draft::default();
    for (i, message) in messages.iter().enumerate() {
        let at = |field: &str| format!("{prefix}[{i}]{field}");
        let Value::Object(message) = message else {
            return Err(bad(at(""), "expected a message object".into()));
        };
        let content = message.get("content").unwrap_or(&Value::Null);
        match message.get("role").and_then(Value::as_str) {
            Some("system" | "developer") => {
                let text = system_content(content).map_err(|(j, r)| bad(at(&index(j)), r))?;
                if draft.is_empty() {
                    system.push(text);
                } else {
                    draft.push_injected(Role::User, Content::Text(text));
                }
            }
            Some("user") => {
                let content = match content {
                    Value::String(s) => Content::Text(s.clone()),
                    _ => Content::Blocks(parts(content).map_err(|(j, r)| bad(at(&index(j)), r))?),
                };
                draft.push(Role::User, content);
            }
            Some("assistant") => {
                let mut blocks = parts(content).map_err(|(j, r)| bad(at(&index(j)), r))?;
                if let Some(Value::String(refusal)) = message.get("refusal")
                    && !refusal.is_empty()
                {
                    blocks.push(Block::text(refusal.clone()));
                }
                match message.get("tool_calls") {
                    None | Some(Value::Null) => {}
                    Some(Value::Array(calls)) => {
                        for (j, call) in calls.iter().enumerate() {
                            let (block, id_filled) = tool_use(call, i, j)
                                .map_err(|r| bad(at(&format!(".tool_calls[{j}]")), r))?;
                            if id_filled {
                                draft.count_repair();
                            }
                            blocks.push(block);
                        }
                    }
                    Some(_) => return Err(bad(at(".tool_calls"), "expected an array".into())),
                }
                let content = match (content, blocks.as_slice()) {
                    // Keep a plain string as the plain string it was.
                    (Value::String(s), [Block::Text(_)]) => Content::Text(s.clone()),
                    _ => Content::Blocks(blocks),
                };
                draft.push(Role::Assistant, content);
            }
            Some("tool") => {
                let tool_use_id = match message.get("tool_call_id") {
                    Some(Value::String(s)) => s.clone(),
                    None | Some(Value::Null) => String::new(),
                    Some(_) => return Err(bad(at(".tool_call_id"), "expected a string".into())),
                };
                let output = match content {
                    Value::String(s) => ToolResultContent::Text(s.clone()),
                    _ => ToolResultContent::Blocks(
                        parts(content).map_err(|(j, r)| bad(at(&index(j)), r))?,
                    ),
                };
                draft.push(
                    Role::User,
                    Content::Blocks(vec![Block::ToolResult(ToolResult {
                        tool_use_id,
                        content: Some(output),
                        is_error: None,
                        extra: Map::new(),
                    })]),
                );
            }
            Some(other) => {
                return Err(bad(
                    at(".role"),
                    format!("unsupported role {:?}", escape_controls(other, 80)),
                ));
            }
            None => return Err(bad(at(".role"), "expected a role string".into())),
        }
    }
    finish(
        path,
        id.to_string(),
        Format::OpenAiMessages,
        system_text(&system),
        draft,
    )
}

/// The JSON path suffix of content part `j`, or of the content itself.
fn index(j: Option<usize>) -> String {
    match j {
        Some(j) => format!(".content[{j}]"),
        None => ".content".into(),
    }
}

/// System content as one string: the string, or its text parts joined by newlines.
fn system_content(content: &Value) -> Result<String, (Option<usize>, String)> {
    let mut text = String::new();
    for (j, block) in parts(content)?.into_iter().enumerate() {
        let Block::Text(t) = block else {
            return Err((Some(j), "system content parts must be text".into()));
        };
        if j > 0 {
            text.push('\n');
        }
        text.push_str(&t.text);
    }
    Ok(text)
}

/// Content as blocks: a string is one text block, null is none.
/// Errors carry the index of the bad part (`None`: the content itself).
fn parts(content: &Value) -> Result<Vec<Block>, (Option<usize>, String)> {
    match content {
        Value::Null => Ok(Vec::new()),
        Value::String(s) if s.is_empty() => Ok(Vec::new()),
        Value::String(s) => Ok(vec![Block::text(s.clone())]),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(j, item)| part(item).map_err(|r| (Some(j), r)))
            .collect(),
        _ => Err((None, "expected a string, null or an array of parts".into())),
    }
}

fn part(item: &Value) -> Result<Block, String> {
    let Value::Object(fields) = item else {
        return Err("expected a content part object".into());
    };
    match fields.get("type").and_then(Value::as_str) {
        Some("text") => match fields.get("text") {
            Some(Value::String(t)) => Ok(Block::text(t.clone())),
            _ => Err("a text part needs a \"text\" string".into()),
        },
        Some("refusal") => match fields.get("refusal") {
            Some(Value::String(t)) => Ok(Block::text(t.clone())),
            _ => Err("a refusal part needs a \"refusal\" string".into()),
        },
        Some("image_url") => {
            let url = match fields.get("image_url") {
                Some(Value::String(url)) => url,
                Some(Value::Object(o)) => match o.get("url") {
                    Some(Value::String(url)) => url,
                    _ => return Err("image_url needs a \"url\" string".into()),
                },
                _ => return Err("an image_url part needs an \"image_url\"".into()),
            };
            Ok(Block::Image(Image {
                source: image_source(url),
                extra: Map::new(),
            }))
        }
        _ => Ok(Block::Unknown(item.clone())),
    }
}

/// `data:<media type>;base64,<data>` becomes a base64 source, anything else a URL source.
fn image_source(url: &str) -> Value {
    if let Some(rest) = url.strip_prefix("data:")
        && let Some((media_type, data)) = rest.split_once(";base64,")
    {
        return json!({"type": "base64", "media_type": media_type, "data": data});
    }
    json!({"type": "url", "url": url})
}

/// One `tool_calls[j]` entry of message `i` as a tool_use block, and whether
/// its id had to be made up.
fn tool_use(call: &Value, i: usize, j: usize) -> Result<(Block, bool), String> {
    let Value::Object(call) = call else {
        return Err("expected a tool call object".into());
    };
    let Some(Value::Object(function)) = call.get("function") else {
        return Err(
            "expected a \"function\" object (only function tool calls are supported)".into(),
        );
    };
    let Some(Value::String(name)) = function.get("name") else {
        return Err("function.name: expected a string".into());
    };
    let (id, id_filled) = match call.get("id") {
        Some(Value::String(id)) if !id.is_empty() => (id.clone(), false),
        _ => (format!("call-{i}-{j}"), true),
    };
    let input = match function.get("arguments") {
        None | Some(Value::Null) => json!({}),
        Some(Value::Object(o)) => Value::Object(o.clone()),
        Some(Value::String(s)) if s.trim().is_empty() => json!({}),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Object(o)) => Value::Object(o),
            _ => json!({ RAW_ARGUMENTS_KEY: s }),
        },
        Some(other) => json!({ RAW_ARGUMENTS_KEY: other }),
    };
    Ok((Block::tool_use(id, name.clone(), input), id_filled))
}
