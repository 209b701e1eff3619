//! A request as the scripted server received it: what responders match on
//! and tests read back.

use serde_json::Value;
use std::collections::BTreeMap;

/// Which API a request was for, from its path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    /// `/v1/messages`.
    Anthropic,
    /// `/v1/chat/completions`.
    OpenAi,
    /// Anything else (answered 404).
    Other,
}

/// A request as the server received it.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordedRequest {
    /// 1-based arrival order.
    pub number: usize,
    /// HTTP method.
    pub method: String,
    /// Path, e.g. `/v1/messages`.
    pub path: String,
    /// Headers with lowercase names; repeated headers joined by `, `.
    pub headers: BTreeMap<String, String>,
    /// The body parsed as JSON (`Null` when it is not JSON).
    pub body: Value,
    /// The body's size in bytes.
    pub body_bytes: usize,
}

impl RecordedRequest {
    /// A header's value, by case-insensitive name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }

    /// Which API the request was for.
    pub fn api(&self) -> Api {
        if self.path == "/v1/messages" {
            Api::Anthropic
        } else if self.path == "/v1/chat/completions" {
            Api::OpenAi
        } else {
            Api::Other
        }
    }

    /// The text of the newest message, for responders that echo it.
    pub fn last_message_text(&self) -> String {
        self.body
            .get("messages")
            .and_then(Value::as_array)
            .and_then(|m| m.last())
            .map(content_text)
            .unwrap_or_default()
    }
}

/// The text of a message or a `tool_result` block as sent: its `content`
/// when that is a string, else the text of its blocks joined by newlines
/// (a provider may turn a string into blocks, e.g. to mark it for caching).
pub fn content_text(item: &Value) -> String {
    match item.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}
