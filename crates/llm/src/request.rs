//! What the agent asks a model for, independent of any wire format.

use whittle_context::Message;

/// One model call: the conversation in the canonical model plus settings.
/// Each provider translates it to its own wire format.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelRequest {
    /// The model id as the provider's server knows it (e.g. `claude-sonnet-5-5`);
    /// empty means the provider's configured model ([`crate::Provider::model`]).
    pub model: String,
    /// The system prompt; empty for none.
    pub system: String,
    /// The conversation, oldest first.
    pub messages: Vec<Message>,
    /// Tools the model may call.
    pub tools: Vec<ToolSpec>,
    /// Upper bound on generated tokens.
    pub max_tokens: u32,
    /// Sampling temperature, where the API version still accepts one
    /// (Anthropic `2026-10-21` does not; it is then left out).
    pub temperature: Option<f32>,
    /// Place prompt-cache breakpoints (Anthropic): on the last tool, the
    /// system prompt and the newest messages.
    pub cache: bool,
    /// How many leading messages the next compaction will leave unchanged
    /// (from `whittle_context::Compactor::cache_anchor`). With caching on,
    /// the fourth breakpoint goes after them instead of on the previous user
    /// message, so that when compaction rewrites the rest, this prefix is
    /// still read from the cache.
    pub cache_anchor: Option<usize>,
}

impl ModelRequest {
    /// A request with no tools, 8,192 output tokens, default temperature and caching on.
    pub fn new(
        model: impl Into<String>,
        system: impl Into<String>,
        messages: Vec<Message>,
    ) -> Self {
        ModelRequest {
            model: model.into(),
            system: system.into(),
            messages,
            tools: Vec::new(),
            max_tokens: 8192,
            temperature: None,
            cache: true,
            cache_anchor: None,
        }
    }
}

pub use whittle_context::ToolSpec;
