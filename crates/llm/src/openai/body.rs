//! The canonical conversation as an OpenAI chat-completions request.

use crate::request::{Effort, ModelRequest};
use serde_json::{Map, Value, json};
use whittle_protocol::{Block, Content, Image, Message, Role, ToolResult, ToolResultContent};

/// Which field carries the output limit: OpenAI's own API wants
/// `max_completion_tokens` (reasoning models reject `max_tokens`); Ollama,
/// llama.cpp, vLLM and LM Studio all read `max_tokens`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MaxTokensField {
    /// `max_tokens`.
    MaxTokens,
    /// `max_completion_tokens`.
    MaxCompletionTokens,
}

/// The request body for `request`.
pub(crate) fn request_body(request: &ModelRequest, max_tokens_field: MaxTokensField) -> Value {
    let mut messages = Vec::new();
    if !request.system.is_empty() {
        messages.push(json!({"role": "system", "content": request.system}));
    }
    for m in &request.messages {
        convert_message(m, &mut messages);
    }
    let mut body = Map::new();
    body.insert("model".into(), Value::String(request.model.clone()));
    body.insert("messages".into(), Value::Array(messages));
    let limit_key = match max_tokens_field {
        MaxTokensField::MaxTokens => "max_tokens",
        MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
    };
    body.insert(limit_key.into(), Value::from(request.max_tokens));
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.input_schema,
                }})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(t) = request.temperature {
        let t = (f64::from(t) * 1e4).round() / 1e4;
        body.insert("temperature".into(), Value::from(t));
    }
    if let Some(e) = request.reasoning.effort {
        // OpenAI's scale stops at xhigh; thinking has no chat-completions field.
        let effort = match e {
            Effort::Max => Effort::XHigh,
            e => e,
        };
        body.insert("reasoning_effort".into(), Value::from(effort.as_str()));
    }
    body.insert("stream".into(), Value::Bool(true));
    body.insert("stream_options".into(), json!({"include_usage": true}));
    Value::Object(body)
}

/// An image block as an `image_url` content part (a data URL for base64).
fn image_part(image: &Image) -> Option<Value> {
    let source = &image.source;
    let url = match source.get("type").and_then(Value::as_str) {
        Some("base64") => format!(
            "data:{};base64,{}",
            source.get("media_type")?.as_str()?,
            source.get("data")?.as_str()?
        ),
        Some("url") => source.get("url")?.as_str()?.to_owned(),
        _ => return None,
    };
    Some(json!({"type": "image_url", "image_url": {"url": url}}))
}

/// Text and image parts as message content: a plain string when there is
/// only text (every server accepts that), else a list of parts.
fn content_of(parts: Vec<Value>) -> Value {
    if parts
        .iter()
        .all(|p| p.get("type").and_then(Value::as_str) == Some("text"))
    {
        let texts: Vec<&str> = parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect();
        Value::String(texts.join("\n"))
    } else {
        Value::Array(parts)
    }
}

fn tool_message(result: &ToolResult, images: &mut Vec<Value>) -> Value {
    if let Some(ToolResultContent::Blocks(blocks)) = &result.content {
        images.extend(blocks.iter().filter_map(|b| match b {
            Block::Image(i) => image_part(i),
            _ => None,
        }));
    }
    let text = result.text();
    let content = if result.is_error == Some(true) {
        format!("Error: {text}")
    } else {
        text
    };
    json!({"role": "tool", "tool_call_id": result.tool_use_id, "content": content})
}

/// Appends the OpenAI messages for one canonical message: tool results
/// become `tool` messages (which must directly follow the assistant's
/// `tool_calls`), the rest one `user` or `assistant` message. Thinking and
/// block types OpenAI has no place for are left out.
fn convert_message(message: &Message, out: &mut Vec<Value>) {
    let blocks = match message.content() {
        Content::Text(s) => {
            out.push(json!({"role": message.role().as_str(), "content": s}));
            return;
        }
        Content::Blocks(blocks) => blocks,
    };
    match message.role() {
        Role::User => {
            let mut parts = Vec::new();
            let mut tool_images = Vec::new();
            for block in blocks {
                match block {
                    Block::ToolResult(r) => out.push(tool_message(r, &mut tool_images)),
                    Block::Text(t) => parts.push(json!({"type": "text", "text": t.text})),
                    Block::Image(i) => parts.extend(image_part(i)),
                    _ => {}
                }
            }
            if !tool_images.is_empty() {
                parts.push(json!({"type": "text", "text": "(images returned by the tools above)"}));
                parts.extend(tool_images);
            }
            if !parts.is_empty() {
                out.push(json!({"role": "user", "content": content_of(parts)}));
            }
        }
        Role::Assistant => {
            let text: Vec<&str> = blocks
                .iter()
                .filter_map(|b| match b {
                    Block::Text(t) => Some(t.text.as_str()),
                    _ => None,
                })
                .collect();
            let calls: Vec<Value> = blocks
                .iter()
                .filter_map(Block::as_tool_use)
                .map(|t| {
                    json!({"id": t.id, "type": "function", "function": {
                        "name": t.name,
                        "arguments": serde_json::to_string(&t.input).unwrap_or_else(|_| "{}".into()),
                    }})
                })
                .collect();
            let mut m = Map::new();
            m.insert("role".into(), Value::String("assistant".into()));
            let content = if text.is_empty() && !calls.is_empty() {
                Value::Null
            } else {
                Value::String(text.join("\n"))
            };
            m.insert("content".into(), content);
            if !calls.is_empty() {
                m.insert("tool_calls".into(), Value::Array(calls));
            }
            out.push(Value::Object(m));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn effort_becomes_reasoning_effort_capped_at_xhigh() {
        use crate::request::{Reasoning, Thinking};
        let mut r = ModelRequest::new("m", "", vec![Message::user("hi")]);
        let body = request_body(&r, MaxTokensField::MaxTokens);
        assert!(body.get("reasoning_effort").is_none());
        for (effort, sent) in [(Effort::Medium, "medium"), (Effort::Max, "xhigh")] {
            r.reasoning = Reasoning {
                thinking: Thinking::Adaptive,
                effort: Some(effort),
            };
            let body = request_body(&r, MaxTokensField::MaxCompletionTokens);
            assert_eq!(body["reasoning_effort"], sent);
            assert!(body.get("thinking").is_none());
        }
    }

    #[test]
    fn tool_results_become_tool_messages_before_the_user_text() {
        let mut out = Vec::new();
        convert_message(
            &Message::user_blocks(vec![
                Block::tool_result("c1", "ok", false),
                Block::tool_result("c2", "boom", true),
                Block::text("next step?"),
            ]),
            &mut out,
        );
        assert_eq!(
            Value::Array(out),
            json!([
                {"role": "tool", "tool_call_id": "c1", "content": "ok"},
                {"role": "tool", "tool_call_id": "c2", "content": "Error: boom"},
                {"role": "user", "content": "next step?"},
            ])
        );
    }

    #[test]
    fn assistant_thinking_is_dropped_and_tool_calls_carry_json_strings() {
        let mut out = Vec::new();
        convert_message(
            &Message::assistant_blocks(vec![
                Block::from_value(json!({"type": "thinking", "thinking": "hm", "signature": "s"})),
                Block::tool_use("c1", "bash", json!({"command": "ls"})),
            ]),
            &mut out,
        );
        assert_eq!(
            out[0],
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{\"command\":\"ls\"}"}}
            ]})
        );
    }
}
