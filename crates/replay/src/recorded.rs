//! What a recording says about each model call besides the messages: when it
//! was made, with which model, what the provider billed, and, where the
//! agent logged it, the request exactly as sent. Replay uses it to check its
//! cost model against the bill and to price cache expiry over idle gaps.

use serde::Serialize;

/// How long a prompt-cache entry lives after it was last written or read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub enum CacheTtl {
    /// The API's default: 5 minutes.
    #[default]
    FiveMinutes,
    /// `"ttl": "1h"`: written at a higher price, lives an hour.
    OneHour,
}

impl CacheTtl {
    /// The lifetime in milliseconds.
    pub fn millis(self) -> u64 {
        match self {
            CacheTtl::FiveMinutes => 5 * 60 * 1000,
            CacheTtl::OneHour => 60 * 60 * 1000,
        }
    }

    /// Reads the API's spelling (`"5m"`, `"1h"`).
    pub fn parse(text: &str) -> Option<CacheTtl> {
        match text {
            "5m" => Some(CacheTtl::FiveMinutes),
            "1h" => Some(CacheTtl::OneHour),
            _ => None,
        }
    }
}

/// The usage the provider reported for one call, in tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RecordedUsage {
    /// Input neither read from nor written to the cache.
    pub input_tokens: u64,
    /// Input read from the cache.
    pub cache_read_tokens: u64,
    /// Input written to the cache (both lifetimes).
    pub cache_write_tokens: u64,
    /// Of the writes, those for an hour.
    pub cache_write_1h_tokens: u64,
    /// Output.
    pub output_tokens: u64,
}

impl RecordedUsage {
    /// Every input token of the request, however it was billed.
    pub fn total_input(&self) -> u64 {
        self.input_tokens + self.cache_read_tokens + self.cache_write_tokens
    }
}

/// One block of a request as sent (a tool definition, a system block, a
/// message's content block), as much as the cache needs of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestBlock {
    /// Identifies the content (with the role of its message), so that equal
    /// prefixes of two requests are recognized.
    pub hash: u64,
    /// Characters of its compact JSON.
    pub chars: usize,
    /// Set when the block carries a `cache_control` breakpoint.
    pub breakpoint: Option<CacheTtl>,
}

/// What the recording says about one model call.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RecordedCall {
    /// Index in [`Conversation::messages`](crate::Conversation::messages)
    /// of the call's answer.
    pub message: usize,
    /// When the answer arrived, in milliseconds since the Unix epoch.
    pub at_ms: Option<u64>,
    /// The model that answered.
    pub model: Option<String>,
    /// What the provider billed, when the recording has it.
    pub usage: Option<RecordedUsage>,
    /// The cache lifetime the request asked for, when the recording says.
    pub cache_ttl: Option<CacheTtl>,
    /// The request exactly as sent, when the agent logged it (Claude Code's
    /// `api-request` records): every block in order, with its breakpoints.
    pub request: Option<Vec<RequestBlock>>,
    /// Whether the bill shows that the agent changed what it sends since
    /// the previous call of the same model (its tools, its system text, an
    /// earlier message): the call read back less than that call cached,
    /// within the TTL, with no compaction between (see
    /// [`changed_prompts`](crate::changed_prompts)). Everything past the
    /// billed `cache_read_tokens` was written again; replay does the same.
    /// Claude Code does this after some background tasks' notices and after
    /// `/mcp` reconnects a server.
    pub prefix_rebuilt: bool,
}

/// The model Claude Code names on answers it wrote itself (an API error,
/// "No response requested."): no request was billed for them.
pub(crate) const SYNTHETIC_MODEL: &str = "<synthetic>";

impl RecordedCall {
    /// Whether the recording agent wrote this answer itself instead of
    /// calling the model, so that there is no request to replay.
    pub fn written_by_agent(&self) -> bool {
        self.model.as_deref() == Some(SYNTHETIC_MODEL)
    }
}
