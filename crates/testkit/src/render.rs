//! Scripted replies and errors in each API's wire format.

use crate::script::{Reply, ReplyBlock, UsageStyle};
use serde_json::{Value, json};

/// What a rendering needs to know about the request it answers.
#[derive(Clone, Debug)]
pub(crate) struct Ctx {
    /// 1-based number of the request, for ids.
    pub number: usize,
    /// The model the request named.
    pub model: String,
    /// Size of the request body, for estimated input tokens.
    pub body_bytes: usize,
    /// Whether an OpenAI request asked for a usage chunk.
    pub include_usage: bool,
    /// Where OpenAI usage goes.
    pub usage_style: UsageStyle,
}

impl Ctx {
    fn input_tokens(&self, reply: &Reply) -> u64 {
        reply
            .usage
            .input_tokens
            .unwrap_or(((self.body_bytes as u64) / 4).max(1))
    }
}

/// Most pieces one text or tool input is streamed in.
const MAX_PIECES: usize = 256;

/// `text` in pieces of `size` characters, or in [`MAX_PIECES`] equal ones
/// when that would be more. A provider sends a few tokens an event, but a
/// test's 60,000-character reply at 7 a piece is 8,600 events, each parsed,
/// dispatched and drawn by a debug build: seconds of CPU a test, spent on
/// nothing a smaller count does not also cover (every long text is still
/// split across many events, characters of any width included).
fn pieces(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let size = size.max(chars.len().div_ceil(MAX_PIECES));
    chars
        .chunks(size.max(1))
        .map(|c| c.iter().collect())
        .collect()
}

fn sse(event: &str, data: &Value) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}

/// The Anthropic Messages stream of `reply`, one string per event.
pub(crate) fn anthropic_events(reply: &Reply, ctx: &Ctx) -> Vec<String> {
    let mut events = vec![sse(
        "message_start",
        &json!({"type": "message_start", "message": {
            "id": format!("msg_testkit_{}", ctx.number),
            "type": "message",
            "role": "assistant",
            "model": ctx.model,
            "content": [],
            "stop_reason": null,
            "stop_sequence": null,
            "usage": {
                "input_tokens": ctx.input_tokens(reply),
                "cache_creation_input_tokens": reply.usage.cache_creation_input_tokens,
                "cache_read_input_tokens": reply.usage.cache_read_input_tokens,
                "cache_creation": {
                    "ephemeral_5m_input_tokens": reply.usage.cache_creation_input_tokens
                        .saturating_sub(reply.usage.cache_creation_1h_input_tokens),
                    "ephemeral_1h_input_tokens": reply.usage.cache_creation_1h_input_tokens,
                },
                "output_tokens": 1,
            },
        }}),
    )];
    events.push(sse("ping", &json!({"type": "ping"})));
    for (index, block) in reply.blocks.iter().enumerate() {
        let start = |block: Value| {
            sse(
                "content_block_start",
                &json!({"type": "content_block_start", "index": index, "content_block": block}),
            )
        };
        let delta = |delta: Value| {
            sse(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index, "delta": delta}),
            )
        };
        match block {
            ReplyBlock::Text(text) => {
                events.push(start(json!({"type": "text", "text": ""})));
                for p in pieces(text, 7) {
                    events.push(delta(json!({"type": "text_delta", "text": p})));
                }
            }
            ReplyBlock::Thinking {
                thinking,
                signature,
            } => {
                events.push(start(json!({"type": "thinking", "thinking": ""})));
                for p in pieces(thinking, 9) {
                    events.push(delta(json!({"type": "thinking_delta", "thinking": p})));
                }
                events.push(delta(
                    json!({"type": "signature_delta", "signature": signature}),
                ));
            }
            ReplyBlock::RedactedThinking(data) => {
                events.push(start(json!({"type": "redacted_thinking", "data": data})));
            }
            ReplyBlock::ToolUse { id, name, input } => {
                events.push(start(
                    json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
                ));
                events.push(delta(
                    json!({"type": "input_json_delta", "partial_json": ""}),
                ));
                for p in pieces(&input.to_string(), 5) {
                    events.push(delta(
                        json!({"type": "input_json_delta", "partial_json": p}),
                    ));
                }
            }
            ReplyBlock::Raw(block) => events.push(start(block.clone())),
            ReplyBlock::RawEvents(raw) => {
                events.extend(raw.iter().map(|(name, data)| sse(name, data)));
                continue;
            }
        }
        events.push(sse(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": index}),
        ));
    }
    events.push(sse(
        "message_delta",
        &json!({"type": "message_delta",
            "delta": {"stop_reason": reply.stop_reason(), "stop_sequence": null},
            "usage": {"output_tokens": reply.output_tokens()}}),
    ));
    events.push(sse("message_stop", &json!({"type": "message_stop"})));
    events
}

fn finish_reason(stop_reason: &str) -> &'static str {
    match stop_reason {
        "tool_use" => "tool_calls",
        "max_tokens" => "length",
        "refusal" => "content_filter",
        _ => "stop",
    }
}

/// The OpenAI chat-completions stream of `reply`, one string per event.
/// Redacted thinking and raw blocks have no OpenAI form and are skipped.
pub(crate) fn openai_events(reply: &Reply, ctx: &Ctx) -> Vec<String> {
    let chunk = |delta: Value, finish: Value, usage: Value| {
        let mut c = json!({
            "id": format!("chatcmpl-testkit-{}", ctx.number),
            "object": "chat.completion.chunk",
            "created": 1_760_000_000,
            "model": ctx.model,
            "system_fingerprint": "fp_testkit",
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        });
        if ctx.include_usage || !usage.is_null() {
            c["usage"] = usage;
        }
        format!("data: {c}\n\n")
    };
    let none = Value::Null;
    let mut events = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        none.clone(),
        none.clone(),
    )];
    let mut tool_index = 0;
    for block in &reply.blocks {
        match block {
            ReplyBlock::Text(text) => {
                for p in pieces(text, 7) {
                    events.push(chunk(json!({"content": p}), none.clone(), none.clone()));
                }
            }
            ReplyBlock::Thinking { thinking, .. } => {
                for p in pieces(thinking, 9) {
                    events.push(chunk(
                        json!({"reasoning_content": p}),
                        none.clone(),
                        none.clone(),
                    ));
                }
            }
            ReplyBlock::ToolUse { id, name, input } => {
                events.push(chunk(
                    json!({"tool_calls": [{"index": tool_index, "id": id, "type": "function",
                        "function": {"name": name, "arguments": ""}}]}),
                    none.clone(),
                    none.clone(),
                ));
                for p in pieces(&input.to_string(), 5) {
                    events.push(chunk(
                        json!({"tool_calls": [{"index": tool_index, "function": {"arguments": p}}]}),
                        none.clone(),
                        none.clone(),
                    ));
                }
                tool_index += 1;
            }
            ReplyBlock::RawEvents(raw) => {
                events.extend(raw.iter().map(|(_, data)| format!("data: {data}\n\n")));
            }
            ReplyBlock::RedactedThinking(_) | ReplyBlock::Raw(_) => {}
        }
    }
    let input = ctx.input_tokens(reply) + reply.usage.cache_read_input_tokens;
    let output = reply.output_tokens();
    let usage = json!({
        "prompt_tokens": input,
        "completion_tokens": output,
        "total_tokens": input + output,
        "prompt_tokens_details": {"cached_tokens": reply.usage.cache_read_input_tokens},
    });
    let finish = Value::String(finish_reason(reply.stop_reason()).into());
    match ctx.usage_style {
        UsageStyle::OnFinishChunk => events.push(chunk(json!({}), finish, usage)),
        UsageStyle::SeparateChunk => {
            events.push(chunk(json!({}), finish, none.clone()));
            if ctx.include_usage {
                let mut last = json!({
                    "id": format!("chatcmpl-testkit-{}", ctx.number),
                    "object": "chat.completion.chunk",
                    "created": 1_760_000_000,
                    "model": ctx.model,
                    "system_fingerprint": "fp_testkit",
                    "choices": [],
                });
                last["usage"] = usage;
                events.push(format!("data: {last}\n\n"));
            }
        }
        UsageStyle::None => events.push(chunk(json!({}), finish, none)),
    }
    events.push("data: [DONE]\n\n".to_owned());
    events
}

/// An event whose JSON is cut short, in each API's framing.
pub(crate) fn malformed_event(openai: bool) -> String {
    if openai {
        "data: {\"id\":\"chatcmpl-broken\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"unterminated\n\n".to_owned()
    } else {
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"unterminated\n\n".to_owned()
    }
}

/// Anthropic's in-stream `error` event.
pub(crate) fn anthropic_error_event(error_type: &str) -> String {
    let message = if error_type == "overloaded_error" {
        "Overloaded"
    } else {
        "An error occurred"
    };
    sse(
        "error",
        &json!({"type": "error", "error": {"type": error_type, "message": message}}),
    )
}

/// Anthropic's error body for `status`, as its API sends it.
pub(crate) fn anthropic_error(status: u16, number: usize) -> String {
    let (kind, message) = match status {
        401 => ("authentication_error", "invalid x-api-key"),
        402 => (
            "billing_error",
            "Your credit balance is too low to access the Anthropic API.",
        ),
        403 => (
            "permission_error",
            "Your API key does not have permission to use the specified resource.",
        ),
        404 => ("not_found_error", "model: claude-nonexistent"),
        413 => (
            "request_too_large",
            "Request exceeds the maximum allowed number of bytes.",
        ),
        429 => (
            "rate_limit_error",
            "This request would exceed the rate limit for your organization of 50,000 input tokens per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits.",
        ),
        500 => ("api_error", "Internal server error"),
        504 => ("timeout_error", "Request timed out"),
        529 => ("overloaded_error", "Overloaded"),
        _ => ("invalid_request_error", "Invalid request"),
    };
    anthropic_error_with(kind, message, number)
}

pub(crate) fn anthropic_error_with(kind: &str, message: &str, number: usize) -> String {
    json!({"type": "error", "error": {"type": kind, "message": message},
        "request_id": format!("req_testkit_{number}")})
    .to_string()
}

/// OpenAI's error body for `status`, as its API sends it.
pub(crate) fn openai_error(status: u16) -> String {
    let (message, kind, code) = match status {
        401 => (
            "Incorrect API key provided: sk-test-wrong. You can find your API key at https://platform.openai.com/account/api-keys.",
            "invalid_request_error",
            json!("invalid_api_key"),
        ),
        429 => (
            "Rate limit reached for gpt-4o in organization org-testkit on tokens per min (TPM): Limit 30000, Used 30000, Requested 1200. Please try again in 2.4s. Visit https://platform.openai.com/account/rate-limits to learn more.",
            "tokens",
            json!("rate_limit_exceeded"),
        ),
        500 => (
            "The server had an error while processing your request. Sorry about that!",
            "server_error",
            Value::Null,
        ),
        503 | 529 => (
            "The engine is currently overloaded, please try again later",
            "server_error",
            Value::Null,
        ),
        _ => ("Invalid request", "invalid_request_error", Value::Null),
    };
    openai_error_with(message, kind, code)
}

pub(crate) fn openai_error_with(message: &str, kind: &str, code: Value) -> String {
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}}).to_string()
}

/// Anthropic's "prompt is too long" for a body of `bytes` against `max_bytes`.
pub(crate) fn anthropic_overflow(bytes: usize, max_bytes: usize, number: usize) -> String {
    let max = (max_bytes / 4).max(1);
    let tokens = (bytes / 4).max(max + 1);
    anthropic_error_with(
        "invalid_request_error",
        &format!("prompt is too long: {tokens} tokens > {max} maximum"),
        number,
    )
}

/// OpenAI's `context_length_exceeded` for a body of `bytes` against `max_bytes`.
pub(crate) fn openai_overflow(bytes: usize, max_bytes: usize) -> String {
    let max = (max_bytes / 4).max(1);
    let tokens = (bytes / 4).max(max + 1);
    json!({"error": {
        "message": format!("This model's maximum context length is {max} tokens. However, your messages resulted in {tokens} tokens. Please reduce the length of the messages."),
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }})
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::{MAX_PIECES, pieces};

    #[test]
    fn a_short_text_goes_in_small_pieces_and_a_long_one_in_at_most_max_pieces() {
        let short = "héllo wörld, the parser";
        let p = pieces(short, 7);
        assert!(p.iter().all(|p| p.chars().count() <= 7));
        assert_eq!(p.concat(), short);
        let long = "é tables. ".repeat(6_000);
        let p = pieces(&long, 7);
        assert!(
            p.len() <= MAX_PIECES && p.len() > MAX_PIECES / 2,
            "{}",
            p.len()
        );
        assert_eq!(p.concat(), long);
    }
}
