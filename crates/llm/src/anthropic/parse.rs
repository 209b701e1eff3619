//! Messages API streaming events to [`StreamEvent`]s.

use crate::error::{LlmError, classify_stream_error};
use crate::event::{StopReason, StreamEvent, Usage};
use crate::http::{EventParser, transport};
use crate::secret::Secret;
use crate::sse::SseEvent;
use serde_json::Value;
use whittle_protocol::Block;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::{Collector, ModelResponse};
    use crate::sse::SseDecoder;
    use serde_json::json;

    /// A stream in the shape the API sends, with thinking, text, a tool call,
    /// a ping, an unknown event and CRLF line endings mixed in.
    const STREAM: &str = concat!(
        "event: message_start\r\n",
        "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-sonnet-5-5\",\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":25,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":41203,\"output_tokens\":1}}}\r\n\r\n",
        "event: content_block_start\n",
        "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n",
        "event: ping\ndata: {\"type\": \"ping\"}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"Let me think \u{1F914}\"}}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"EqQBCgIYAhIM+/==\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "event: content_block_start\n",
        "data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"H\u{e9}llo\"}}\n\n",
        "event: brand_new_event\ndata: {\"type\":\"brand_new_event\"}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
        "event: content_block_start\n",
        "data: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_01\",\"name\":\"bash\",\"input\":{}}}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"command\\\": \\\"l\"}}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"s\\\"}\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":2}\n\n",
        "event: message_delta\n",
        "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":89}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );

    fn decode(pieces: &[&[u8]]) -> Result<ModelResponse, LlmError> {
        let mut decoder = SseDecoder::new();
        let mut parser = AnthropicParser::new("test".into(), "KEY".into(), None);
        let mut collector = Collector::new();
        let mut sse = Vec::new();
        let mut events = Vec::new();
        let mut finished = false;
        for piece in pieces {
            decoder.push(piece, &mut sse)?;
            for e in sse.drain(..) {
                finished |= parser.event(e, &mut events)?;
            }
        }
        decoder.finish(&mut sse)?;
        for e in sse.drain(..) {
            finished |= parser.event(e, &mut events)?;
        }
        if !finished {
            parser.early_end(&mut events)?;
        }
        for e in &events {
            collector.push(e)?;
        }
        collector.finish()
    }

    #[test]
    fn the_whole_stream_assembles_as_sent() {
        let r = decode(&[STREAM.as_bytes()]).unwrap();
        assert_eq!(
            serde_json::to_value(&r.message).unwrap(),
            json!({"role": "assistant", "content": [
                {"type": "thinking", "thinking": "Let me think \u{1F914}", "signature": "EqQBCgIYAhIM+/=="},
                {"type": "text", "text": "H\u{e9}llo"},
                {"type": "tool_use", "id": "toolu_01", "name": "bash", "input": {"command": "ls"}},
            ]})
        );
        assert_eq!(r.usage.cache_read_input_tokens, 41203);
        assert_eq!(r.usage.output_tokens, 89);
        assert_eq!(r.stop_reason, Some(StopReason::ToolUse));
        assert_eq!(r.model, "claude-sonnet-5-5");
    }

    #[test]
    fn every_byte_boundary_gives_the_same_response() {
        let bytes = STREAM.as_bytes();
        let whole = decode(&[bytes]).unwrap();
        for i in 0..=bytes.len() {
            let (a, b) = bytes.split_at(i);
            assert_eq!(decode(&[a, b]).unwrap(), whole, "split at {i}");
        }
        let singles: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(decode(&singles).unwrap(), whole);
    }

    #[test]
    fn every_truncation_is_an_error_never_a_panic_or_a_wrong_message() {
        let bytes = STREAM.as_bytes();
        let end = STREAM.find("event: message_stop").unwrap();
        for i in 0..end {
            assert!(decode(&[&bytes[..i]]).is_err(), "truncated at {i}");
        }
    }
}
