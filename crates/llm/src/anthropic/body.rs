//! The JSON body of a Messages API request, with cache breakpoints.

use crate::request::{ModelRequest, Thinking};
use serde_json::{Map, Value, json};
use whittle_protocol::{Block, Content, Message, Role};

/// The first API version that rejects `temperature`, `top_p` and `top_k`.
const NO_SAMPLING_SINCE: &str = "2026-10-21";

/// Whether `version` (a `YYYY-MM-DD` date) still accepts sampling parameters.
pub(crate) fn accepts_sampling_params(version: &str) -> bool {
    version < NO_SAMPLING_SINCE
}

fn ephemeral() -> Value {
    json!({"type": "ephemeral"})
}

/// The request body for `request` under API `version`.
///
/// `cache_control` is decided here and only here: any the messages carry is
/// removed, then, when `request.cache` is set, breakpoints go on the last
/// tool, the system prompt, the newest message, and one more (at most 4, the
/// API's limit). The fourth goes after the request's `cache_anchor` when it
/// has one (the prefix compaction will not touch), else on the user message
/// before the newest, exactly where the previous request put its newest
/// breakpoint, so the cache written then is read now however many blocks
/// the last turn added.
pub(crate) fn request_body(request: &ModelRequest, version: &str) -> Value {
    let cache = request.cache;
    let mut body = Map::new();
    body.insert("model".into(), Value::String(request.model.clone()));
    body.insert("max_tokens".into(), Value::from(request.max_tokens));
    if !request.system.is_empty() {
        let system = if cache {
            json!([{"type": "text", "text": request.system, "cache_control": ephemeral()}])
        } else {
            Value::String(request.system.clone())
        };
        body.insert("system".into(), system);
    }
    body.insert(
        "messages".into(),
        Value::Array(wire_messages(
            &request.messages,
            cache,
            request.cache_anchor,
        )),
    );
    if !request.tools.is_empty() {
        let mut tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                json!({"name": t.name, "description": t.description, "input_schema": t.input_schema})
            })
            .collect();
        if let (true, Some(Value::Object(last))) = (cache, tools.last_mut()) {
            last.insert("cache_control".into(), ephemeral());
        }
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(t) = request
        .temperature
        .filter(|_| accepts_sampling_params(version))
    {
        // Through f64 with rounding, so 0.7f32 is sent as 0.7.
        let t = (f64::from(t) * 1e4).round() / 1e4;
        body.insert("temperature".into(), Value::from(t));
    }
    insert_reasoning(&mut body, request);
    body.insert("stream".into(), Value::Bool(true));
    Value::Object(body)
}

/// `thinking` and `output_config.effort`, only when configured.
fn insert_reasoning(body: &mut Map<String, Value>, request: &ModelRequest) {
    let thinking = match request.reasoning.thinking {
        Thinking::ProviderDefault => None,
        Thinking::Off => Some(json!({"type": "disabled"})),
        Thinking::Adaptive => Some(json!({"type": "adaptive"})),
        Thinking::Budget(n) => {
            let budget = n.min(request.max_tokens.saturating_sub(1));
            (budget >= Thinking::MIN_BUDGET)
                .then(|| json!({"type": "enabled", "budget_tokens": budget}))
        }
    };
    if let Some(t) = thinking {
        body.insert("thinking".into(), t);
    }
    if let Some(e) = request.reasoning.effort {
        body.insert("output_config".into(), json!({"effort": e.as_str()}));
    }
}

fn wire_messages(messages: &[Message], cache: bool, anchor: Option<usize>) -> Vec<Value> {
    let mut out: Vec<Value> = messages.iter().map(wire_message).collect();
    if cache && !out.is_empty() {
        let newest = out.len() - 1;
        mark(&mut out[newest]);
        let fourth = match anchor {
            Some(a) if a > 0 && a <= newest => Some(a - 1),
            _ => messages[..newest]
                .iter()
                .rposition(|m| m.role() == Role::User),
        };
        if let Some(i) = fourth {
            mark(&mut out[i]);
        }
    }
    out
}

/// Only `role` and `content` go on the wire; other message fields we keep
/// for round trips (ids from imported logs) would be rejected.
fn wire_message(message: &Message) -> Value {
    let content = match message.content() {
        Content::Text(s) => Value::String(s.clone()),
        Content::Blocks(blocks) => {
            let mut wire: Vec<Value> = blocks.iter().filter_map(wire_block).collect();
            if wire.is_empty() && !blocks.is_empty() {
                // Everything was unsigned thinking; the API rejects empty content.
                wire.push(json!({"type": "text", "text": "(thinking omitted)"}));
            }
            Value::Array(wire)
        }
    };
    json!({"role": message.role().as_str(), "content": content})
}

/// A block as sent, without `cache_control`. Thinking without a signature
/// (from another provider) cannot be verified by the API and is left out.
fn wire_block(block: &Block) -> Option<Value> {
    if let Block::Thinking(t) = block {
        t.signature.as_ref()?;
    }
    let mut value = serde_json::to_value(block).ok()?;
    strip_cache_control(&mut value);
    Some(value)
}

fn strip_cache_control(block: &mut Value) {
    if let Value::Object(map) = block {
        map.remove("cache_control");
        if let Some(Value::Array(inner)) = map.get_mut("content") {
            for b in inner {
                if let Value::Object(m) = b {
                    m.remove("cache_control");
                }
            }
        }
    }
}

/// Puts a breakpoint on the last block that may carry one (not thinking,
/// not empty text); string content becomes one text block.
fn mark(message: &mut Value) {
    let Some(content) = message.get_mut("content") else {
        return;
    };
    match content {
        Value::String(s) if !s.is_empty() => {
            *content = json!([{"type": "text", "text": s, "cache_control": ephemeral()}]);
        }
        Value::Array(blocks) => {
            let eligible = blocks.iter_mut().rev().find(|b| {
                let kind = b.get("type").and_then(Value::as_str).unwrap_or("");
                let empty_text =
                    kind == "text" && b.get("text").and_then(Value::as_str) == Some("");
                !matches!(kind, "thinking" | "redacted_thinking") && !empty_text
            });
            if let Some(Value::Object(block)) = eligible {
                block.insert("cache_control".into(), ephemeral());
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::ToolSpec;

    fn count_breakpoints(v: &Value) -> usize {
        match v {
            Value::Object(m) => {
                usize::from(m.contains_key("cache_control"))
                    + m.values().map(count_breakpoints).sum::<usize>()
            }
            Value::Array(a) => a.iter().map(count_breakpoints).sum(),
            _ => 0,
        }
    }

    #[test]
    fn reasoning_fields_are_sent_only_when_configured() {
        use crate::request::{Effort, Reasoning};
        let r = ModelRequest::new("m", "", vec![Message::user("hi")]);
        let body = request_body(&r, "2026-10-21");
        assert!(body.get("thinking").is_none() && body.get("output_config").is_none());
        let with = |thinking, effort| {
            let mut r = r.clone();
            r.max_tokens = 8000;
            r.reasoning = Reasoning { thinking, effort };
            request_body(&r, "2026-10-21")
        };
        let body = with(Thinking::Adaptive, Some(Effort::Low));
        assert_eq!(body["thinking"], json!({"type": "adaptive"}));
        assert_eq!(body["output_config"], json!({"effort": "low"}));
        assert_eq!(
            with(Thinking::Off, None)["thinking"],
            json!({"type": "disabled"})
        );
        assert_eq!(
            with(Thinking::Budget(2000), None)["thinking"],
            json!({"type": "enabled", "budget_tokens": 2000})
        );
        // Lowered below max_tokens, and left out where no budget fits.
        assert_eq!(
            with(Thinking::Budget(50_000), None)["thinking"]["budget_tokens"],
            7999
        );
        let mut small = r.clone();
        small.max_tokens = 1000;
        small.reasoning.thinking = Thinking::Budget(4000);
        assert!(request_body(&small, "2026-10-21").get("thinking").is_none());
    }

    #[test]
    fn sampling_params_only_for_older_versions() {
        assert!(!accepts_sampling_params("2026-10-21"));
        assert!(accepts_sampling_params("2023-06-01"));
        let mut r = ModelRequest::new("m", "", vec![Message::user("hi")]);
        r.temperature = Some(0.7);
        assert!(request_body(&r, "2026-10-21").get("temperature").is_none());
        assert_eq!(request_body(&r, "2023-06-01")["temperature"], json!(0.7));
    }

    #[test]
    fn at_most_four_breakpoints_and_old_ones_are_removed() {
        let old = Block::from_value(
            json!({"type": "text", "text": "old", "cache_control": {"type": "ephemeral"}}),
        );
        let mut messages = Vec::new();
        for i in 0..10 {
            messages.push(Message::user_blocks(vec![
                old.clone(),
                Block::text(format!("u{i}")),
            ]));
            messages.push(Message::assistant(format!("a{i}")));
        }
        messages.push(Message::user("last"));
        let mut r = ModelRequest::new("m", "system", messages);
        r.tools = vec![
            ToolSpec {
                name: "a".into(),
                description: "d".into(),
                input_schema: json!({"type": "object"}),
            };
            3
        ];
        let body = request_body(&r, "2026-10-21");
        assert_eq!(count_breakpoints(&body), 4);
        r.cache = false;
        assert_eq!(count_breakpoints(&request_body(&r, "2026-10-21")), 0);
    }

    #[test]
    fn a_cache_anchor_takes_the_fourth_breakpoint() {
        let messages: Vec<Message> = (0..6)
            .map(|i| {
                if i % 2 == 0 {
                    Message::user(format!("u{i}"))
                } else {
                    Message::assistant(format!("a{i}"))
                }
            })
            .collect();
        let mut r = ModelRequest::new("m", "sys", messages);
        r.cache_anchor = Some(2);
        let body = request_body(&r, "2026-10-21");
        let marked: Vec<bool> = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| count_breakpoints(m) > 0)
            .collect();
        assert_eq!(marked, [false, true, false, false, false, true]);
        r.cache_anchor = Some(0);
        let body = request_body(&r, "2026-10-21");
        assert!(
            count_breakpoints(&body["messages"][4]) > 0,
            "falls back to the previous user message"
        );
    }

    #[test]
    fn breakpoints_skip_thinking_and_empty_text() {
        let mut m = json!({"role": "assistant", "content": [
            {"type": "text", "text": "x"},
            {"type": "text", "text": ""},
            {"type": "thinking", "thinking": "t", "signature": "s"},
        ]});
        mark(&mut m);
        assert!(m["content"][0].get("cache_control").is_some());
        let mut empty = json!({"role": "user", "content": ""});
        mark(&mut empty);
        assert_eq!(empty["content"], json!(""));
    }
}
