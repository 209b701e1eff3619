//! What a test scripts: model replies, faults, and replies computed from the request.

use crate::request::RecordedRequest;
use serde_json::Value;
use std::fmt;
use std::sync::Arc;

/// One content block of a scripted reply.
#[derive(Clone, Debug, PartialEq)]
pub enum ReplyBlock {
    /// Text, streamed in small deltas.
    Text(String),
    /// Extended thinking with its signature (OpenAI servers stream it as
    /// `reasoning_content` and drop the signature, as vLLM and llama.cpp do).
    Thinking {
        /// The thinking text.
        thinking: String,
        /// The signature, sent as one `signature_delta`.
        signature: String,
    },
    /// Redacted thinking (Anthropic only).
    RedactedThinking(String),
    /// A tool call whose input is streamed as JSON fragments.
    ToolUse {
        /// The call id.
        id: String,
        /// The tool name.
        name: String,
        /// The input object.
        input: Value,
    },
    /// A block sent verbatim in `content_block_start` (Anthropic only), for
    /// block types the client does not know.
    Raw(Value),
    /// SSE events `(event name, data)` sent verbatim at this point, for
    /// unknown event or delta types. The block index this item would have
    /// had is theirs to use; no `content_block_stop` is added. On the OpenAI
    /// endpoint each data object is sent as a chunk.
    RawEvents(Vec<(String, Value)>),
}

/// Token counts a reply reports. Unset input tokens are estimated from the
/// request body (4 bytes a token), so meters see realistic numbers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplyUsage {
    /// Uncached input tokens; `None` estimates them from the request size.
    pub input_tokens: Option<u64>,
    /// Output tokens; `None` estimates them from the reply's content.
    pub output_tokens: Option<u64>,
    /// Tokens written to the cache.
    pub cache_creation_input_tokens: u64,
    /// Tokens read from the cache.
    pub cache_read_input_tokens: u64,
    /// Of the tokens written to the cache, those written for an hour
    /// (`"ttl": "1h"`); the rest were written for 5 minutes.
    pub cache_creation_1h_input_tokens: u64,
}

/// A scripted model reply, rendered in the wire format of whichever API
/// the client called.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reply {
    /// The content blocks, in order.
    pub blocks: Vec<ReplyBlock>,
    /// Reported usage.
    pub usage: ReplyUsage,
    /// Anthropic's stop reason; defaults to `tool_use` when a block calls a
    /// tool and `end_turn` otherwise (mapped to OpenAI's finish reasons).
    pub stop_reason: Option<String>,
}

impl Reply {
    /// An empty reply; add blocks with the `with_*` methods.
    pub fn new() -> Self {
        Self::default()
    }

    /// A reply of one text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::new().with_text(text)
    }

    /// A reply that calls one tool.
    pub fn tool_use(id: impl Into<String>, name: impl Into<String>, input: Value) -> Self {
        Self::new().with_tool_use(id, name, input)
    }

    /// A reply that calls several tools at once.
    pub fn tool_uses<I, S, T>(calls: I) -> Self
    where
        I: IntoIterator<Item = (S, T, Value)>,
        S: Into<String>,
        T: Into<String>,
    {
        calls.into_iter().fold(Self::new(), |r, (id, name, input)| {
            r.with_tool_use(id, name, input)
        })
    }

    /// Adds a text block.
    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        self.blocks.push(ReplyBlock::Text(text.into()));
        self
    }

    /// Adds a thinking block with its signature.
    pub fn with_thinking(
        mut self,
        thinking: impl Into<String>,
        signature: impl Into<String>,
    ) -> Self {
        self.blocks.push(ReplyBlock::Thinking {
            thinking: thinking.into(),
            signature: signature.into(),
        });
        self
    }

    /// Adds a redacted thinking block.
    pub fn with_redacted_thinking(mut self, data: impl Into<String>) -> Self {
        self.blocks.push(ReplyBlock::RedactedThinking(data.into()));
        self
    }

    /// Adds a tool call.
    pub fn with_tool_use(
        mut self,
        id: impl Into<String>,
        name: impl Into<String>,
        input: Value,
    ) -> Self {
        self.blocks.push(ReplyBlock::ToolUse {
            id: id.into(),
            name: name.into(),
            input,
        });
        self
    }

    /// Adds a block sent verbatim.
    pub fn with_raw_block(mut self, block: Value) -> Self {
        self.blocks.push(ReplyBlock::Raw(block));
        self
    }

    /// Sets the reported input and output tokens.
    pub fn with_usage(mut self, input_tokens: u64, output_tokens: u64) -> Self {
        self.usage.input_tokens = Some(input_tokens);
        self.usage.output_tokens = Some(output_tokens);
        self
    }

    /// Sets the reported cache writes and reads.
    pub fn with_cache(mut self, creation_tokens: u64, read_tokens: u64) -> Self {
        self.usage.cache_creation_input_tokens = creation_tokens;
        self.usage.cache_read_input_tokens = read_tokens;
        self
    }

    /// Sets the stop reason (Anthropic spelling, e.g. `max_tokens`).
    pub fn with_stop_reason(mut self, reason: impl Into<String>) -> Self {
        self.stop_reason = Some(reason.into());
        self
    }

    /// Adds raw SSE events at this point; see [`ReplyBlock::RawEvents`].
    pub fn with_raw_events<S: Into<String>>(
        mut self,
        events: impl IntoIterator<Item = (S, Value)>,
    ) -> Self {
        self.blocks.push(ReplyBlock::RawEvents(
            events.into_iter().map(|(e, d)| (e.into(), d)).collect(),
        ));
        self
    }

    pub(crate) fn stop_reason(&self) -> &str {
        match &self.stop_reason {
            Some(r) => r,
            None if self
                .blocks
                .iter()
                .any(|b| matches!(b, ReplyBlock::ToolUse { .. })) =>
            {
                "tool_use"
            }
            None => "end_turn",
        }
    }

    /// Output tokens: the scripted number, or about 4 characters a token.
    pub(crate) fn output_tokens(&self) -> u64 {
        self.usage.output_tokens.unwrap_or_else(|| {
            let chars: usize = self
                .blocks
                .iter()
                .map(|b| match b {
                    ReplyBlock::Text(t) => t.chars().count(),
                    ReplyBlock::Thinking { thinking, .. } => thinking.chars().count(),
                    ReplyBlock::ToolUse { input, .. } => input.to_string().chars().count(),
                    ReplyBlock::RedactedThinking(_)
                    | ReplyBlock::Raw(_)
                    | ReplyBlock::RawEvents(_) => 0,
                })
                .sum();
            (chars as u64).div_ceil(4).max(1)
        })
    }
}

/// A failure to inject.
#[derive(Clone, Debug, PartialEq)]
pub enum Fault {
    /// Answer with this HTTP status and the API's usual error body for it
    /// (or `body` verbatim), plus `retry-after` when set.
    Status {
        /// HTTP status, e.g. 429, 529, 500.
        status: u16,
        /// Seconds for the `retry-after` header.
        retry_after: Option<u64>,
        /// A body to send instead of the usual one.
        body: Option<String>,
    },
    /// Stream `reply` but break the connection after `bytes` bytes.
    CutAfter {
        /// What the stream would have been.
        reply: Reply,
        /// Bytes sent before the cut.
        bytes: usize,
    },
    /// Stream `reply` but fall silent forever after `bytes` bytes.
    Stall {
        /// What the stream would have been.
        reply: Reply,
        /// Bytes sent before the silence.
        bytes: usize,
    },
    /// Stream `reply` with an event whose JSON is broken inserted after
    /// `after_events` events.
    MalformedEvent {
        /// The reply around the broken event.
        reply: Reply,
        /// Events sent before it.
        after_events: usize,
    },
    /// HTTP 200 with `body` as `application/json`: a server that ignored
    /// `stream: true`, or one that reports errors with status 200.
    PlainJson {
        /// The body.
        body: Value,
    },
    /// Anthropic only: after `after_events` events of `reply`, send an
    /// `error` event of `error_type` (e.g. `overloaded_error`) and end.
    ErrorEvent {
        /// The reply that is interrupted.
        reply: Reply,
        /// Events sent before the error.
        after_events: usize,
        /// The error's `type`.
        error_type: String,
    },
}

impl Fault {
    /// HTTP 429 with `retry-after: secs`.
    pub fn rate_limited(retry_after_secs: u64) -> Self {
        Fault::Status {
            status: 429,
            retry_after: Some(retry_after_secs),
            body: None,
        }
    }

    /// HTTP 529 overloaded.
    pub fn overloaded() -> Self {
        Self::status(529)
    }

    /// HTTP 500.
    pub fn server_error() -> Self {
        Self::status(500)
    }

    /// Any HTTP status with the API's usual error body.
    pub fn status(status: u16) -> Self {
        Fault::Status {
            status,
            retry_after: None,
            body: None,
        }
    }

    /// Any HTTP status with a body of the test's choosing (real server texts).
    pub fn status_with_body(status: u16, body: impl Into<String>) -> Self {
        Fault::Status {
            status,
            retry_after: None,
            body: Some(body.into()),
        }
    }

    /// The stream of `reply` broken after `bytes` bytes.
    pub fn cut_after(reply: Reply, bytes: usize) -> Self {
        Fault::CutAfter { reply, bytes }
    }

    /// The stream of `reply` silent forever after `bytes` bytes.
    pub fn stall(reply: Reply, bytes: usize) -> Self {
        Fault::Stall { reply, bytes }
    }

    /// The stream of `reply` with broken JSON after `after_events` events.
    pub fn malformed_event(reply: Reply, after_events: usize) -> Self {
        Fault::MalformedEvent {
            reply,
            after_events,
        }
    }

    /// A 200 answer with a JSON body instead of a stream.
    pub fn plain_json(body: Value) -> Self {
        Fault::PlainJson { body }
    }

    /// The stream of `reply` interrupted by an `error` event after `after_events` events.
    pub fn error_event(reply: Reply, after_events: usize, error_type: impl Into<String>) -> Self {
        Fault::ErrorEvent {
            reply,
            after_events,
            error_type: error_type.into(),
        }
    }
}

/// A reply computed from the request, e.g. a summary that quotes it.
pub type Responder = Arc<dyn Fn(&RecordedRequest) -> Step + Send + Sync>;

/// One queued answer.
#[derive(Clone)]
pub enum Step {
    /// A normal reply.
    Reply(Reply),
    /// A failure.
    Fault(Fault),
    /// Whatever the closure returns for the request.
    Dynamic(Responder),
}

impl fmt::Debug for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Reply(r) => f.debug_tuple("Reply").field(r).finish(),
            Step::Fault(x) => f.debug_tuple("Fault").field(x).finish(),
            Step::Dynamic(_) => f.write_str("Dynamic(..)"),
        }
    }
}

impl From<Reply> for Step {
    fn from(r: Reply) -> Self {
        Step::Reply(r)
    }
}

impl From<Fault> for Step {
    fn from(f: Fault) -> Self {
        Step::Fault(f)
    }
}

/// How requests larger than a context window are refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContextLimit {
    /// A request body above this many bytes gets "prompt is too long".
    pub max_body_bytes: usize,
    /// Refuse only the first oversized request, then accept everything.
    pub once: bool,
}

/// How responses are split into chunks on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunking {
    /// Chunks are 1..=max bytes long (0 sends each response in one piece).
    pub max_chunk: usize,
    /// Seed of the split positions, so a failure can be reproduced.
    pub seed: u64,
}

impl Default for Chunking {
    fn default() -> Self {
        Chunking {
            max_chunk: 13,
            seed: 0x5eed,
        }
    }
}

/// Where an OpenAI-compatible server reports usage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UsageStyle {
    /// A last chunk with empty `choices`, when `stream_options.include_usage`
    /// asks for it (OpenAI, vLLM, Ollama).
    #[default]
    SeparateChunk,
    /// On the chunk with `finish_reason` (llama.cpp).
    OnFinishChunk,
    /// Not at all.
    None,
}
