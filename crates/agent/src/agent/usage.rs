//! Token usage and what it costs, summed over a session and its subagents.

use super::Agent;
use super::error::AgentError;
use std::sync::Arc;
use whittle_context::session::SessionRecord;
use whittle_llm::Prices;
use whittle_llm::Usage;

/// Token usage summed over a session.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UsageTotals {
    /// Model calls.
    pub calls: u64,
    /// Uncached input tokens.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Input tokens read from the cache.
    pub cache_read: u64,
    /// Input tokens written to the cache.
    pub cache_write: u64,
}

/// Usage totals shared between an agent and its subagents, so that `/cost`
/// counts every call made on the session's behalf.
#[derive(Clone, Debug, Default)]
pub struct UsageMeter(Arc<std::sync::Mutex<UsageTotals>>);

impl UsageMeter {
    /// The totals so far.
    pub fn totals(&self) -> UsageTotals {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(super) fn add(&self, u: &Usage) {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .add(u);
    }

    pub(super) fn set(&self, totals: UsageTotals) {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = totals;
    }
}

impl UsageTotals {
    fn add(&mut self, u: &Usage) {
        // Saturating: the numbers come from the server.
        self.calls += 1;
        self.input = self.input.saturating_add(u.input_tokens);
        self.output = self.output.saturating_add(u.output_tokens);
        self.cache_read = self.cache_read.saturating_add(u.cache_read_input_tokens);
        self.cache_write = self
            .cache_write
            .saturating_add(u.cache_creation_input_tokens);
    }

    /// Estimated cost at `prices`.
    pub fn cost_usd(&self, p: &Prices) -> f64 {
        let m = 1_000_000.0;
        self.input as f64 * p.input / m
            + self.output as f64 * p.output / m
            + self.cache_read as f64 * p.input * p.cache_read_multiplier / m
            + self.cache_write as f64 * p.input * p.cache_write_multiplier / m
    }
}

impl Agent {
    /// Adds one call's usage to the totals and the session log.
    pub(super) fn count_usage(&mut self, usage: &Usage) -> Result<(), AgentError> {
        self.usage.add(usage);
        self.log(SessionRecord::Usage {
            input_tokens: usage.total_input_tokens(),
            output_tokens: usage.output_tokens,
            cache_read_tokens: usage.cache_read_input_tokens,
            cache_write_tokens: usage.cache_creation_input_tokens,
        })
    }
}
