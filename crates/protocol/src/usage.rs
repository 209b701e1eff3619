//! What one model call used, in the four counts providers bill by.

use serde::{Deserialize, Serialize};
use std::ops::AddAssign;

/// Tokens a request used, as the server reported them.
///
/// `input_tokens` excludes cached tokens (Anthropic's convention; the OpenAI
/// provider converts), so the context actually sent is
/// [`Usage::total_input_tokens`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Input tokens that were neither read from nor written to the cache.
    pub input_tokens: u64,
    /// Tokens the model generated.
    pub output_tokens: u64,
    /// Input tokens written to the prompt cache (billed at a premium).
    pub cache_creation_input_tokens: u64,
    /// Input tokens read from the prompt cache (billed at a discount).
    pub cache_read_input_tokens: u64,
}

impl Usage {
    /// Every input token of the request: uncached, cache writes and cache reads.
    /// This is the size of the context the model saw.
    pub fn total_input_tokens(&self) -> u64 {
        self.input_tokens
            .saturating_add(self.cache_creation_input_tokens)
            .saturating_add(self.cache_read_input_tokens)
    }
}

impl AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.cache_creation_input_tokens = self
            .cache_creation_input_tokens
            .saturating_add(other.cache_creation_input_tokens);
        self.cache_read_input_tokens = self
            .cache_read_input_tokens
            .saturating_add(other.cache_read_input_tokens);
    }
}
