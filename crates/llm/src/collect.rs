//! Assembles a stream of events into one assistant message, with the blocks
//! exactly as the server sent them.

use crate::error::LlmError;
use crate::event::{StopReason, StreamEvent, Usage};
use futures::{Stream, StreamExt};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use whittle_protocol::{Block, Message};

/// A finished model call.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelResponse {
    /// The assistant message: its blocks in the server's order, thinking
    /// signatures byte-exact, tool inputs parsed from the streamed JSON.
    pub message: Message,
    /// Final token usage.
    pub usage: Usage,
    /// Why the model stopped, when the server said.
    pub stop_reason: Option<StopReason>,
    /// The server's message id (empty when none was given).
    pub id: String,
    /// The model that answered, as the server named it.
    pub model: String,
}

/// A block being assembled: its JSON so far and the tool input fragments.
#[derive(Debug)]
struct PartialBlock {
    value: Map<String, Value>,
    input_json: String,
    saw_input_json: bool,
}

/// Builds a [`ModelResponse`] from events fed one at a time; [`collect`] is
/// the usual way to drive it.
#[derive(Debug, Default)]
pub struct Collector {
    open: BTreeMap<usize, PartialBlock>,
    done: BTreeMap<usize, Block>,
    usage: Usage,
    stop_reason: Option<StopReason>,
    id: String,
    model: String,
    /// Tool calls whose input did not parse; fatal unless `max_tokens` cut them off.
    unparsable: Vec<LlmError>,
}

impl Collector {
    /// An empty collector.
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies one event. Events that contradict the protocol (a delta for a
    /// block that was never started, a block started twice, tool input that
    /// is not JSON) are [`LlmError::MalformedResponse`].
    pub fn push(&mut self, event: &StreamEvent) -> Result<(), LlmError> {
        match event {
            StreamEvent::MessageStart { id, model } => {
                self.id.clone_from(id);
                self.model.clone_from(model);
            }
            StreamEvent::BlockStart { index, block } => {
                if self.open.contains_key(index) || self.done.contains_key(index) {
                    return Err(LlmError::malformed(format!(
                        "content block {index} started twice"
                    )));
                }
                let value = match serde_json::to_value(block) {
                    Ok(Value::Object(map)) => map,
                    _ => {
                        return Err(LlmError::malformed(format!(
                            "content block {index} is not a JSON object"
                        )));
                    }
                };
                self.open.insert(
                    *index,
                    PartialBlock {
                        value,
                        input_json: String::new(),
                        saw_input_json: false,
                    },
                );
            }
            StreamEvent::TextDelta { index, text } => {
                append_str(&mut self.block(*index)?.value, "text", text);
            }
            StreamEvent::ThinkingDelta { index, thinking } => {
                append_str(&mut self.block(*index)?.value, "thinking", thinking);
            }
            StreamEvent::SignatureDelta { index, signature } => {
                append_str(&mut self.block(*index)?.value, "signature", signature);
            }
            StreamEvent::InputJsonDelta {
                index,
                partial_json,
            } => {
                let block = self.block(*index)?;
                block.input_json.push_str(partial_json);
                block.saw_input_json = true;
            }
            StreamEvent::OtherDelta { index, delta } => {
                apply_other_delta(&mut self.block(*index)?.value, delta);
            }
            StreamEvent::BlockStop { index } => {
                let Some(partial) = self.open.remove(index) else {
                    return Err(LlmError::malformed(format!(
                        "content block {index} stopped but was never started"
                    )));
                };
                match finish_block(*index, partial) {
                    Ok(block) => {
                        self.done.insert(*index, block);
                    }
                    Err(e) => self.unparsable.push(e),
                }
            }
            StreamEvent::Usage(usage) => self.usage = *usage,
            StreamEvent::Stop(reason) => self.stop_reason = Some(reason.clone()),
            StreamEvent::Retry { .. } => {}
        }
        Ok(())
    }

    /// The assembled response. Blocks the stream never closed are closed
    /// here: a provider only ends its stream successfully once the message is
    /// complete.
    ///
    /// A tool call whose input is not valid JSON is an error, except when
    /// the model stopped at `max_tokens`: then the call was cut off, cannot
    /// run, and is left out, and the stop reason tells the caller why.
    pub fn finish(mut self) -> Result<ModelResponse, LlmError> {
        for (index, partial) in std::mem::take(&mut self.open) {
            match finish_block(index, partial) {
                Ok(block) => {
                    self.done.insert(index, block);
                }
                Err(e) => self.unparsable.push(e),
            }
        }
        if let Some(first) = self.unparsable.into_iter().next()
            && self.stop_reason != Some(StopReason::MaxTokens)
        {
            return Err(first);
        }
        Ok(ModelResponse {
            message: Message::assistant_blocks(self.done.into_values().collect()),
            usage: self.usage,
            stop_reason: self.stop_reason,
            id: self.id,
            model: self.model,
        })
    }

    fn block(&mut self, index: usize) -> Result<&mut PartialBlock, LlmError> {
        self.open.get_mut(&index).ok_or_else(|| {
            LlmError::malformed(format!(
                "delta for content block {index}, which is not open"
            ))
        })
    }
}

fn append_str(value: &mut Map<String, Value>, key: &str, piece: &str) {
    match value.get_mut(key) {
        Some(Value::String(s)) => s.push_str(piece),
        _ => {
            value.insert(key.to_owned(), Value::String(piece.to_owned()));
        }
    }
}

/// Applies a delta type we do not model: citations are appended to the
/// block's `citations`; any other string field extends the block's string
/// field of the same name (e.g. `compaction_delta.content`); the rest is ignored.
fn apply_other_delta(value: &mut Map<String, Value>, delta: &Value) {
    let Some(fields) = delta.as_object() else {
        return;
    };
    if delta.get("type").and_then(Value::as_str) == Some("citations_delta") {
        if let Some(citation) = fields.get("citation") {
            match value.get_mut("citations") {
                Some(Value::Array(list)) => list.push(citation.clone()),
                _ => {
                    value.insert("citations".into(), Value::Array(vec![citation.clone()]));
                }
            }
        }
        return;
    }
    for (key, piece) in fields {
        if key == "type" {
            continue;
        }
        if let (Some(Value::String(existing)), Value::String(piece)) = (value.get_mut(key), piece) {
            existing.push_str(piece);
        }
    }
}

fn finish_block(index: usize, partial: PartialBlock) -> Result<Block, LlmError> {
    let mut value = partial.value;
    if partial.saw_input_json && !partial.input_json.trim().is_empty() {
        let input: Value = serde_json::from_str(&partial.input_json).map_err(|e| {
            LlmError::malformed(format!(
                "tool input of content block {index} is not valid JSON ({e})"
            ))
        })?;
        value.insert("input".into(), input);
    }
    Ok(Block::from_value(Value::Object(value)))
}

/// Drains `stream` into one [`ModelResponse`], calling `on_event` for every
/// event first (to print text as it arrives, show retries, ...).
pub async fn collect<S>(
    stream: S,
    mut on_event: impl FnMut(&StreamEvent),
) -> Result<ModelResponse, LlmError>
where
    S: Stream<Item = Result<StreamEvent, LlmError>>,
{
    let mut stream = std::pin::pin!(stream);
    let mut collector = Collector::new();
    while let Some(item) = stream.next().await {
        let event = item?;
        on_event(&event);
        collector.push(&event)?;
    }
    collector.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use whittle_protocol::Content;

    fn run(events: Vec<StreamEvent>) -> Result<ModelResponse, LlmError> {
        let stream = futures::stream::iter(events.into_iter().map(Ok));
        futures::executor::block_on(collect(stream, |_| {}))
    }

    #[test]
    fn assembles_interleaved_blocks_in_index_order() {
        let response = run(vec![
            StreamEvent::MessageStart {
                id: "msg_1".into(),
                model: "m".into(),
            },
            StreamEvent::BlockStart {
                index: 0,
                block: Block::Thinking(whittle_protocol::Thinking {
                    thinking: String::new(),
                    signature: None,
                    extra: Default::default(),
                }),
            },
            StreamEvent::ThinkingDelta {
                index: 0,
                thinking: "let me ".into(),
            },
            StreamEvent::ThinkingDelta {
                index: 0,
                thinking: "think".into(),
            },
            StreamEvent::SignatureDelta {
                index: 0,
                signature: "EqQBCgIYAh+/==".into(),
            },
            StreamEvent::BlockStop { index: 0 },
            StreamEvent::tool_use_start(2, "t2", "read_file"),
            StreamEvent::tool_use_start(1, "t1", "bash"),
            StreamEvent::InputJsonDelta {
                index: 1,
                partial_json: "{\"comm".into(),
            },
            StreamEvent::InputJsonDelta {
                index: 2,
                partial_json: "{\"path\":\"a.rs\"}".into(),
            },
            StreamEvent::InputJsonDelta {
                index: 1,
                partial_json: "and\":\"ls\"}".into(),
            },
            StreamEvent::BlockStop { index: 2 },
            StreamEvent::BlockStop { index: 1 },
            StreamEvent::Stop(StopReason::ToolUse),
        ])
        .unwrap();
        assert_eq!(response.id, "msg_1");
        assert_eq!(response.stop_reason, Some(StopReason::ToolUse));
        let wire = serde_json::to_value(&response.message).unwrap();
        assert_eq!(
            wire,
            json!({"role": "assistant", "content": [
                {"type": "thinking", "thinking": "let me think", "signature": "EqQBCgIYAh+/=="},
                {"type": "tool_use", "id": "t1", "name": "bash", "input": {"command": "ls"}},
                {"type": "tool_use", "id": "t2", "name": "read_file", "input": {"path": "a.rs"}},
            ]})
        );
    }

    #[test]
    fn tool_without_input_deltas_keeps_empty_object() {
        let r = run(vec![
            StreamEvent::tool_use_start(0, "t", "todo"),
            StreamEvent::InputJsonDelta {
                index: 0,
                partial_json: String::new(),
            },
            StreamEvent::BlockStop { index: 0 },
        ])
        .unwrap();
        assert_eq!(r.message.tool_uses().next().unwrap().input, json!({}));
    }

    #[test]
    fn invalid_tool_json_is_malformed_not_a_panic() {
        let err = run(vec![
            StreamEvent::tool_use_start(0, "t", "bash"),
            StreamEvent::InputJsonDelta {
                index: 0,
                partial_json: "{\"command\": ".into(),
            },
            StreamEvent::BlockStop { index: 0 },
        ])
        .unwrap_err();
        assert!(matches!(err, LlmError::MalformedResponse { .. }), "{err}");
    }

    #[test]
    fn a_tool_call_cut_off_by_max_tokens_is_dropped_not_fatal() {
        let r = run(vec![
            StreamEvent::text_start(0),
            StreamEvent::TextDelta {
                index: 0,
                text: "Writing the file.".into(),
            },
            StreamEvent::BlockStop { index: 0 },
            StreamEvent::tool_use_start(1, "t", "write_file"),
            StreamEvent::InputJsonDelta {
                index: 1,
                partial_json: "{\"path\": \"a.rs\", \"content\": \"fn ma".into(),
            },
            StreamEvent::BlockStop { index: 1 },
            StreamEvent::Stop(StopReason::MaxTokens),
        ])
        .unwrap();
        assert_eq!(r.stop_reason, Some(StopReason::MaxTokens));
        assert_eq!(r.message.text(), "Writing the file.");
        assert!(!r.message.has_tool_use());
    }

    #[test]
    fn protocol_violations_are_errors() {
        let delta_without_start = vec![StreamEvent::TextDelta {
            index: 3,
            text: "x".into(),
        }];
        assert!(run(delta_without_start).is_err());
        let twice = vec![StreamEvent::text_start(0), StreamEvent::text_start(0)];
        assert!(run(twice).is_err());
        let stop_without_start = vec![StreamEvent::BlockStop { index: 1 }];
        assert!(run(stop_without_start).is_err());
    }

    #[test]
    fn unknown_blocks_and_deltas_are_kept() {
        let r = run(vec![
            StreamEvent::BlockStart {
                index: 0,
                block: Block::from_value(json!({"type": "text", "text": "", "citations": []})),
            },
            StreamEvent::TextDelta {
                index: 0,
                text: "cited".into(),
            },
            StreamEvent::OtherDelta {
                index: 0,
                delta: json!({"type": "citations_delta", "citation": {"type": "char_location", "cited_text": "x"}}),
            },
            StreamEvent::OtherDelta {
                index: 0,
                delta: json!({"type": "future_delta", "whatever": 1}),
            },
            StreamEvent::BlockStop { index: 0 },
            StreamEvent::BlockStart {
                index: 1,
                block: Block::from_value(json!({"type": "compaction", "content": ""})),
            },
            StreamEvent::OtherDelta {
                index: 1,
                delta: json!({"type": "compaction_delta", "content": "summary"}),
            },
            StreamEvent::BlockStart {
                index: 2,
                block: Block::from_value(
                    json!({"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {}}),
                ),
            },
            StreamEvent::InputJsonDelta {
                index: 2,
                partial_json: "{\"query\":\"rust\"}".into(),
            },
        ])
        .unwrap();
        let Content::Blocks(blocks) = r.message.content() else {
            panic!()
        };
        assert_eq!(
            serde_json::to_value(blocks).unwrap(),
            json!([
                {"type": "text", "text": "cited", "citations": [{"type": "char_location", "cited_text": "x"}]},
                {"type": "compaction", "content": "summary"},
                {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {"query": "rust"}},
            ])
        );
    }
}
