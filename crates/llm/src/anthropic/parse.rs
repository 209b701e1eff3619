//! Messages API streaming events to [`StreamEvent`]s.

use crate::error::{LlmError, classify_stream_error};
use crate::event::{StopReason, StreamEvent, Usage};
use crate::http::{EventParser, transport};
use crate::secret::Secret;
use crate::sse::SseEvent;
use serde_json::Value;
use whittle_context::Block;

/// State of one streamed response.
#[derive(Debug)]
pub(crate) struct AnthropicParser {
    address: String,
    auth_hint: String,
    secret: Option<Secret>,
    usage: Usage,
}

impl AnthropicParser {
    pub(crate) fn new(address: String, auth_hint: String, secret: Option<Secret>) -> Self {
        AnthropicParser {
            address,
            auth_hint,
            secret,
            usage: Usage::default(),
        }
    }

    /// Usage objects carry running totals; absent or null fields keep their value.
    fn merge_usage(&mut self, usage: Option<&Value>) -> bool {
        let Some(u) = usage.filter(|u| u.is_object()) else {
            return false;
        };
        let set = |field: &mut u64, key: &str| {
            if let Some(n) = u.get(key).and_then(Value::as_u64) {
                *field = n;
            }
        };
        set(&mut self.usage.input_tokens, "input_tokens");
        set(&mut self.usage.output_tokens, "output_tokens");
        set(
            &mut self.usage.cache_creation_input_tokens,
            "cache_creation_input_tokens",
        );
        set(
            &mut self.usage.cache_read_input_tokens,
            "cache_read_input_tokens",
        );
        true
    }
}

fn index_of(v: &Value) -> Result<usize, LlmError> {
    v.get("index")
        .and_then(Value::as_u64)
        .and_then(|i| usize::try_from(i).ok())
        .ok_or_else(|| LlmError::malformed("a content block event has no index"))
}

fn text_field(delta: &Value, key: &str) -> Result<String, LlmError> {
    delta
        .get(key)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| LlmError::malformed(format!("a delta has no string `{key}`")))
}

impl EventParser for AnthropicParser {
    fn event(&mut self, sse: SseEvent, out: &mut Vec<StreamEvent>) -> Result<bool, LlmError> {
        if sse.data.trim().is_empty() {
            return Ok(false);
        }
        let v: Value = serde_json::from_str(&sse.data).map_err(|e| {
            LlmError::malformed(format!("a `{}` event is not valid JSON ({e})", sse.event))
        })?;
        let kind = v
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(&sse.event)
            .to_owned();
        match kind.as_str() {
            "message_start" => {
                let message = v.get("message");
                let field = |k: &str| {
                    message
                        .and_then(|m| m.get(k))
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned()
                };
                out.push(StreamEvent::MessageStart {
                    id: field("id"),
                    model: field("model"),
                });
                if self.merge_usage(message.and_then(|m| m.get("usage"))) {
                    out.push(StreamEvent::Usage(self.usage));
                }
            }
            "content_block_start" => {
                let index = index_of(&v)?;
                let block = v
                    .get("content_block")
                    .filter(|b| b.is_object())
                    .cloned()
                    .ok_or_else(|| LlmError::malformed("content_block_start without a block"))?;
                out.push(StreamEvent::BlockStart {
                    index,
                    block: Block::from_value(block),
                });
            }
            "content_block_delta" => {
                let index = index_of(&v)?;
                let delta = v
                    .get("delta")
                    .filter(|d| d.is_object())
                    .ok_or_else(|| LlmError::malformed("content_block_delta without a delta"))?;
                let event = match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => StreamEvent::TextDelta {
                        index,
                        text: text_field(delta, "text")?,
                    },
                    Some("thinking_delta") => StreamEvent::ThinkingDelta {
                        index,
                        thinking: text_field(delta, "thinking")?,
                    },
                    Some("signature_delta") => StreamEvent::SignatureDelta {
                        index,
                        signature: text_field(delta, "signature")?,
                    },
                    Some("input_json_delta") => StreamEvent::InputJsonDelta {
                        index,
                        partial_json: text_field(delta, "partial_json")?,
                    },
                    _ => StreamEvent::OtherDelta {
                        index,
                        delta: delta.clone(),
                    },
                };
                out.push(event);
            }
            "content_block_stop" => out.push(StreamEvent::BlockStop {
                index: index_of(&v)?,
            }),
            "message_delta" => {
                if let Some(reason) = v
                    .get("delta")
                    .and_then(|d| d.get("stop_reason"))
                    .and_then(Value::as_str)
                {
                    out.push(StreamEvent::Stop(StopReason::from_anthropic(reason)));
                }
                if self.merge_usage(v.get("usage")) {
                    out.push(StreamEvent::Usage(self.usage));
                }
            }
            "message_stop" => return Ok(true),
            "error" => {
                return Err(classify_stream_error(
                    &v,
                    &self.auth_hint,
                    self.secret.as_ref(),
                ));
            }
            // ping, and event types newer than this crate.
            _ => {}
        }
        Ok(false)
    }

    fn early_end(&mut self, _out: &mut Vec<StreamEvent>) -> Result<(), LlmError> {
        Err(transport(
            &self.address,
            "the stream ended before message_stop",
        ))
    }
}
