//! What a provider's stream yields: the pieces of one assistant message as
//! they arrive, plus usage, the stop reason and retries.

use crate::error::LlmError;
use futures::Stream;

use serde_json::Value;
use std::pin::Pin;
use std::time::Duration;
use whittle_protocol::Block;
pub(crate) use whittle_protocol::Usage;

/// The stream a [`crate::Provider`] returns. Dropping it cancels the request.
pub type EventStream = Pin<Box<dyn Stream<Item = Result<StreamEvent, LlmError>> + Send>>;

/// One step of a streamed response.
///
/// Block events carry the `index` the server gave the block, so interleaved
/// blocks (parallel tool calls) assemble correctly; [`crate::collect`] turns
/// a sequence of these into one assistant message.
#[derive(Clone, Debug, PartialEq)]
pub enum StreamEvent {
    /// The server accepted the request and began a message.
    MessageStart {
        /// The server's message id (empty when the server gives none).
        id: String,
        /// The model that answers, as the server names it.
        model: String,
    },
    /// A content block begins. Text starts empty and tool_use with `{}` input;
    /// blocks of unknown types arrive whole as [`Block::Unknown`].
    BlockStart {
        /// Position of the block in the message.
        index: usize,
        /// The block as the server opened it.
        block: Block,
    },
    /// More text for a text block.
    TextDelta {
        /// The block it extends.
        index: usize,
        /// The new text.
        text: String,
    },
    /// More thinking for a thinking block.
    ThinkingDelta {
        /// The block it extends.
        index: usize,
        /// The new thinking text.
        thinking: String,
    },
    /// (Part of) a thinking block's signature; kept byte-exact.
    SignatureDelta {
        /// The block it extends.
        index: usize,
        /// The signature text.
        signature: String,
    },
    /// A fragment of a tool_use block's input JSON; fragments concatenate.
    InputJsonDelta {
        /// The block it extends.
        index: usize,
        /// The JSON fragment.
        partial_json: String,
    },
    /// A delta of a type this crate does not model (`citations_delta`,
    /// `compaction_delta`, future ones), kept as sent.
    OtherDelta {
        /// The block it extends.
        index: usize,
        /// The raw delta object, including its `type`.
        delta: Value,
    },
    /// A content block is complete.
    BlockStop {
        /// The block that ended.
        index: usize,
    },
    /// Token usage so far; each one replaces the previous (totals, not increments).
    Usage(Usage),
    /// Why the model stopped.
    Stop(StopReason),
    /// The request failed before any content arrived and will be sent again
    /// after `delay`. Shown to the user; changes nothing in the message.
    Retry {
        /// 1 for the first retry.
        attempt: u32,
        /// How long the provider waits before sending again.
        delay: Duration,
        /// What went wrong.
        reason: LlmError,
    },
}

impl StreamEvent {
    /// Whether this event is part of the message content: once one has been
    /// yielded, a broken stream can no longer be retried silently.
    pub fn is_content(&self) -> bool {
        !matches!(
            self,
            StreamEvent::MessageStart { .. } | StreamEvent::Usage(_) | StreamEvent::Retry { .. }
        )
    }

    /// A text block opening, for providers that build events by hand.
    pub fn text_start(index: usize) -> Self {
        StreamEvent::BlockStart {
            index,
            block: Block::text(""),
        }
    }

    /// A tool_use block opening with empty input, for providers that build events by hand.
    pub fn tool_use_start(index: usize, id: impl Into<String>, name: impl Into<String>) -> Self {
        StreamEvent::BlockStart {
            index,
            block: Block::tool_use(id, name, Value::Object(Default::default())),
        }
    }
}

/// Why generation ended.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum StopReason {
    /// The model finished its turn.
    EndTurn,
    /// `max_tokens` was reached; the message may be cut off.
    MaxTokens,
    /// A stop sequence was generated.
    StopSequence,
    /// The model wants tool results before it continues.
    ToolUse,
    /// A long server-side turn paused; send the conversation back to continue.
    PauseTurn,
    /// The model declined (or a content filter stopped it).
    Refusal,
    /// The context window filled during generation.
    ContextWindowExceeded,
    /// A reason this crate does not know, as the server spelled it.
    Other(String),
}

impl StopReason {
    /// Parses Anthropic's `stop_reason` spelling.
    pub fn from_anthropic(reason: &str) -> Self {
        match reason {
            "end_turn" => StopReason::EndTurn,
            "max_tokens" => StopReason::MaxTokens,
            "stop_sequence" => StopReason::StopSequence,
            "tool_use" => StopReason::ToolUse,
            "pause_turn" => StopReason::PauseTurn,
            "refusal" => StopReason::Refusal,
            "model_context_window_exceeded" => StopReason::ContextWindowExceeded,
            other => StopReason::Other(other.to_owned()),
        }
    }

    /// Parses an OpenAI `finish_reason`.
    pub fn from_openai(reason: &str) -> Self {
        match reason {
            "stop" => StopReason::EndTurn,
            "length" => StopReason::MaxTokens,
            "tool_calls" | "function_call" => StopReason::ToolUse,
            "content_filter" => StopReason::Refusal,
            other => StopReason::Other(other.to_owned()),
        }
    }

    /// The name in Anthropic's spelling, for logs and session events.
    pub fn as_str(&self) -> &str {
        match self {
            StopReason::EndTurn => "end_turn",
            StopReason::MaxTokens => "max_tokens",
            StopReason::StopSequence => "stop_sequence",
            StopReason::ToolUse => "tool_use",
            StopReason::PauseTurn => "pause_turn",
            StopReason::Refusal => "refusal",
            StopReason::ContextWindowExceeded => "model_context_window_exceeded",
            StopReason::Other(s) => s,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn total_input_counts_cache_reads_and_writes() {
        let u = Usage {
            input_tokens: 10,
            output_tokens: 5,
            cache_creation_input_tokens: 100,
            cache_read_input_tokens: 1000,
        };
        assert_eq!(u.total_input_tokens(), 1110);
        let mut sum = u;
        sum += u;
        assert_eq!(sum.total_input_tokens(), 2220);
        assert_eq!(sum.output_tokens, 10);
    }

    #[test]
    fn stop_reasons_round_trip_their_names() {
        for name in [
            "end_turn",
            "max_tokens",
            "stop_sequence",
            "tool_use",
            "pause_turn",
            "refusal",
            "model_context_window_exceeded",
            "something_new",
        ] {
            assert_eq!(StopReason::from_anthropic(name).as_str(), name);
        }
        assert_eq!(StopReason::from_openai("tool_calls"), StopReason::ToolUse);
        assert_eq!(StopReason::from_openai("length"), StopReason::MaxTokens);
    }
}
