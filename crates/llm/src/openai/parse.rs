//! OpenAI-compatible `chat.completion.chunk` events to [`StreamEvent`]s.
//!
//! Servers differ: OpenAI, vLLM and Ollama send usage in a last chunk with
//! no choices; llama.cpp puts it on the chunk with `finish_reason`; some
//! send none. Reasoning text comes as `reasoning_content` (vLLM, llama.cpp,
//! DeepSeek) or `reasoning` (Ollama, OpenRouter). Ollama may send a whole
//! tool call in one chunk, with arguments as an object. All are handled.

use crate::error::{LlmError, classify_stream_error};
use crate::event::{StopReason, StreamEvent, Usage};
use crate::http::{EventParser, transport};
use crate::secret::Secret;
use crate::sse::SseEvent;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use whittle_protocol::{Block, Thinking};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Running {
    Text,
    Thinking,
}

/// State of one streamed response.
#[derive(Debug)]
pub(crate) struct OpenAiParser {
    address: String,
    auth_hint: String,
    secret: Option<Secret>,
    started: bool,
    next_index: usize,
    /// The open text or thinking block.
    running: Option<(Running, usize)>,
    /// OpenAI's tool-call index to our block index.
    tools: BTreeMap<u64, usize>,
    open: BTreeSet<usize>,
    finished: bool,
}

impl OpenAiParser {
    pub(crate) fn new(address: String, auth_hint: String, secret: Option<Secret>) -> Self {
        OpenAiParser {
            address,
            auth_hint,
            secret,
            started: false,
            next_index: 0,
            running: None,
            tools: BTreeMap::new(),
            open: BTreeSet::new(),
            finished: false,
        }
    }

    fn start(&mut self, block: Block, out: &mut Vec<StreamEvent>) -> usize {
        let index = self.next_index;
        self.next_index += 1;
        self.open.insert(index);
        out.push(StreamEvent::BlockStart { index, block });
        index
    }

    fn stop_running(&mut self, out: &mut Vec<StreamEvent>) {
        if let Some((_, index)) = self.running.take()
            && self.open.remove(&index)
        {
            out.push(StreamEvent::BlockStop { index });
        }
    }

    fn close_all(&mut self, out: &mut Vec<StreamEvent>) {
        self.running = None;
        for index in std::mem::take(&mut self.open) {
            out.push(StreamEvent::BlockStop { index });
        }
    }

    fn running_block(&mut self, kind: Running, out: &mut Vec<StreamEvent>) -> usize {
        match self.running {
            Some((k, index)) if k == kind => index,
            _ => {
                self.stop_running(out);
                let block = match kind {
                    Running::Text => Block::text(""),
                    Running::Thinking => Block::Thinking(Thinking {
                        thinking: String::new(),
                        signature: None,
                        extra: Default::default(),
                    }),
                };
                let index = self.start(block, out);
                self.running = Some((kind, index));
                index
            }
        }
    }

    fn tool_call(&mut self, position: usize, call: &Value, out: &mut Vec<StreamEvent>) {
        let key = call
            .get("index")
            .and_then(Value::as_u64)
            .unwrap_or(position as u64);
        let function = call.get("function");
        let index = match self.tools.get(&key) {
            Some(&index) => index,
            None => {
                self.stop_running(out);
                let id = call
                    .get("id")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    // Left out by some servers: an id of our own, never one
                    // that repeats in the next answer.
                    .unwrap_or_else(|| whittle_protocol::fresh_tool_use_id("call_"));
                let name = function
                    .and_then(|f| f.get("name"))
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let index = self.next_index;
                self.start(
                    Block::tool_use(id, name, Value::Object(Default::default())),
                    out,
                );
                self.tools.insert(key, index);
                index
            }
        };
        let arguments = match function.and_then(|f| f.get("arguments")) {
            Some(Value::String(s)) => s.clone(),
            Some(v @ Value::Object(_)) => v.to_string(),
            _ => String::new(),
        };
        if !arguments.is_empty() {
            out.push(StreamEvent::InputJsonDelta {
                index,
                partial_json: arguments,
            });
        }
    }
}

fn usage_of(u: &Value) -> Usage {
    let n = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
    let prompt = n(u.get("prompt_tokens"));
    let cached = n(u
        .get("prompt_tokens_details")
        .and_then(|d| d.get("cached_tokens")));
    Usage {
        input_tokens: prompt.saturating_sub(cached),
        output_tokens: n(u.get("completion_tokens")),
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: cached.min(prompt),
    }
}

fn non_empty_str(v: Option<&Value>) -> Option<&str> {
    v.and_then(Value::as_str).filter(|s| !s.is_empty())
}

impl EventParser for OpenAiParser {
    fn event(&mut self, sse: SseEvent, out: &mut Vec<StreamEvent>) -> Result<bool, LlmError> {
        let data = sse.data.trim();
        if data.is_empty() {
            return Ok(false);
        }
        if data == "[DONE]" {
            self.close_all(out);
            return Ok(true);
        }
        let v: Value = serde_json::from_str(data)
            .map_err(|e| LlmError::malformed(format!("a stream chunk is not valid JSON ({e})")))?;
        if v.get("error").is_some_and(|e| !e.is_null()) {
            return Err(classify_stream_error(
                &v,
                &self.auth_hint,
                self.secret.as_ref(),
            ));
        }
        if !self.started {
            self.started = true;
            let field = |k: &str| {
                v.get(k)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            out.push(StreamEvent::MessageStart {
                id: field("id"),
                model: field("model"),
            });
        }
        let choice = v
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first());
        if let Some(choice) = choice {
            let delta = choice.get("delta");
            let reasoning = non_empty_str(delta.and_then(|d| d.get("reasoning_content")))
                .or_else(|| non_empty_str(delta.and_then(|d| d.get("reasoning"))));
            if let Some(thinking) = reasoning {
                let index = self.running_block(Running::Thinking, out);
                out.push(StreamEvent::ThinkingDelta {
                    index,
                    thinking: thinking.to_owned(),
                });
            }
            if let Some(text) = non_empty_str(delta.and_then(|d| d.get("content"))) {
                let index = self.running_block(Running::Text, out);
                out.push(StreamEvent::TextDelta {
                    index,
                    text: text.to_owned(),
                });
            }
            if let Some(calls) = delta
                .and_then(|d| d.get("tool_calls"))
                .and_then(Value::as_array)
            {
                for (position, call) in calls.iter().enumerate() {
                    self.tool_call(position, call, out);
                }
            }
            if let Some(reason) = non_empty_str(choice.get("finish_reason")) {
                self.close_all(out);
                self.finished = true;
                let mut stop = StopReason::from_openai(reason);
                // Some servers say "stop" even when the turn ends in tool calls.
                if stop == StopReason::EndTurn && !self.tools.is_empty() {
                    stop = StopReason::ToolUse;
                }
                out.push(StreamEvent::Stop(stop));
            }
        }
        if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
            out.push(StreamEvent::Usage(usage_of(u)));
        }
        Ok(false)
    }

    fn early_end(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), LlmError> {
        if self.finished {
            // No `[DONE]`, but the answer was complete.
            self.close_all(out);
            return Ok(());
        }
        Err(transport(
            &self.address,
            "the stream ended before the response finished",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::{Collector, ModelResponse};
    use crate::sse::SseDecoder;
    use serde_json::json;

    /// OpenAI's chunk shapes: role chunk, content, two interleaved tool
    /// calls, finish, usage chunk, `[DONE]`.
    const STREAM: &str = concat!(
        "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-5\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}],\"usage\":null}\n\n",
        "data: {\"id\":\"chatcmpl-1\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"hmm\"},\"finish_reason\":null}],\"usage\":null}\n\n",
        "data: {\"id\":\"chatcmpl-1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Sure \u{2014} \"},\"finish_reason\":null}],\"usage\":null}\n\n",
        "data: {\"id\":\"chatcmpl-1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_a\",\"type\":\"function\",\"function\":{\"name\":\"bash\",\"arguments\":\"\"}}]},\"finish_reason\":null}],\"usage\":null}\n\n",
        "data: {\"id\":\"chatcmpl-1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"call_b\",\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"arguments\":\"{\\\"pa\"}}]},\"finish_reason\":null}],\"usage\":null}\n\n",
        "data: {\"id\":\"chatcmpl-1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"command\\\":\\\"ls\\\"}\"}}]},\"finish_reason\":null}],\"usage\":null}\n\n",
        "data: {\"id\":\"chatcmpl-1\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"function\":{\"arguments\":\"th\\\":\\\"a\\\"}\"}}]},\"finish_reason\":null}],\"usage\":null}\n\n",
        "data: {\"id\":\"chatcmpl-1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}],\"usage\":null}\n\n",
        "data: {\"id\":\"chatcmpl-1\",\"choices\":[],\"usage\":{\"prompt_tokens\":120,\"completion_tokens\":30,\"total_tokens\":150,\"prompt_tokens_details\":{\"cached_tokens\":100}}}\n\n",
        "data: [DONE]\n\n",
    );

    fn decode(pieces: &[&[u8]]) -> Result<ModelResponse, LlmError> {
        let mut decoder = SseDecoder::new();
        let mut parser = OpenAiParser::new("test".into(), "KEY".into(), None);
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
    fn interleaved_tool_calls_assemble_and_usage_is_split() {
        let r = decode(&[STREAM.as_bytes()]).unwrap();
        assert_eq!(
            serde_json::to_value(&r.message).unwrap(),
            json!({"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hmm"},
                {"type": "text", "text": "Sure \u{2014} "},
                {"type": "tool_use", "id": "call_a", "name": "bash", "input": {"command": "ls"}},
                {"type": "tool_use", "id": "call_b", "name": "read_file", "input": {"path": "a"}},
            ]})
        );
        assert_eq!(
            r.usage,
            Usage {
                input_tokens: 20,
                output_tokens: 30,
                cache_creation_input_tokens: 0,
                cache_read_input_tokens: 100,
            }
        );
        assert_eq!(r.stop_reason, Some(StopReason::ToolUse));
    }

    #[test]
    fn every_byte_boundary_gives_the_same_response() {
        let bytes = STREAM.as_bytes();
        let whole = decode(&[bytes]).unwrap();
        for i in 0..=bytes.len() {
            let (a, b) = bytes.split_at(i);
            assert_eq!(decode(&[a, b]).unwrap(), whole, "split at {i}");
        }
    }

    #[test]
    fn a_stream_that_ends_before_finishing_is_an_error() {
        let end = STREAM.find("data: {\"id\":\"chatcmpl-1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\"").unwrap();
        for i in 0..end {
            assert!(
                decode(&[&STREAM.as_bytes()[..i]]).is_err(),
                "truncated at {i}"
            );
        }
        // Finished but no [DONE] (some servers just close): complete.
        let no_done = STREAM.replace("data: [DONE]\n\n", "");
        assert!(decode(&[no_done.as_bytes()]).is_ok());
    }
}
