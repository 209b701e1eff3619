//! What a replay measured, as plain data: the table for people and the
//! `--json` for machines are both made from these.

use std::collections::BTreeMap;
use std::path::PathBuf;
use whittle_llm::Prices;

/// What replaying one conversation under one policy measured.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct ReplayReport {
    /// The conversation's id.
    pub conversation: String,
    /// The policy's name.
    pub policy: String,
    /// Model calls (assistant turns).
    pub calls: u64,
    /// The largest request, in tokens.
    pub peak_tokens: u64,
    /// Input tokens summed over all calls (cached or not).
    pub input_tokens: u64,
    /// Of those, read from the cache.
    pub cache_read_tokens: u64,
    /// Of those, written to the cache.
    pub cache_write_tokens: u64,
    /// Of those, neither (uncached input).
    pub uncached_tokens: u64,
    /// Output tokens of the recorded answers and of summaries.
    pub output_tokens: u64,
    /// Summarization calls.
    pub summarize_calls: u64,
    /// Input tokens sent to the summarizer (uncached).
    pub summarize_input_tokens: u64,
    /// Estimated cost in dollars, summaries included.
    pub cost_usd: f64,
    /// How many times each step changed the history.
    pub steps: BTreeMap<String, u64>,
    /// Requests above the window after all compaction (would be rejected).
    pub over_window: u64,
    /// Call numbers (0-based) where the request was above the window.
    pub overflow_calls: Vec<u64>,
    /// Requests that failed the validator.
    pub invalid_requests: u64,
    /// Characters that left the context and are not in the store; must be 0.
    pub unrecoverable_chars: u64,
    /// Pipeline time per call, median, in microseconds.
    pub pipeline_us_median: u64,
    /// Pipeline time per call, max, in microseconds.
    pub pipeline_us_max: u64,
    /// Pipeline time in all, in microseconds.
    pub pipeline_us_total: u64,
    /// Pipeline time of each call in call order, in microseconds: whether
    /// the cost stays flat as a session grows. Not in JSON (one per call).
    #[serde(skip)]
    pub pipeline_us_by_call: Vec<u64>,
}

impl ReplayReport {
    /// Share of input tokens read from the cache.
    pub fn cache_read_share(&self) -> f64 {
        if self.input_tokens == 0 {
            0.0
        } else {
            self.cache_read_tokens as f64 / self.input_tokens as f64
        }
    }

    /// Adds `other` into `self` (for totals); medians become the max of medians.
    pub fn absorb(&mut self, other: &ReplayReport) {
        self.calls += other.calls;
        self.peak_tokens = self.peak_tokens.max(other.peak_tokens);
        self.input_tokens += other.input_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        self.uncached_tokens += other.uncached_tokens;
        self.output_tokens += other.output_tokens;
        self.summarize_calls += other.summarize_calls;
        self.summarize_input_tokens += other.summarize_input_tokens;
        self.cost_usd += other.cost_usd;
        for (k, v) in &other.steps {
            *self.steps.entry(k.clone()).or_default() += v;
        }
        self.over_window += other.over_window;
        self.invalid_requests += other.invalid_requests;
        self.unrecoverable_chars += other.unrecoverable_chars;
        self.pipeline_us_median = self.pipeline_us_median.max(other.pipeline_us_median);
        self.pipeline_us_max = self.pipeline_us_max.max(other.pipeline_us_max);
        self.pipeline_us_total += other.pipeline_us_total;
    }
}

/// One conversation's reports, one per policy.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ConversationRow {
    /// The conversation's id.
    pub id: String,
    /// The file it came from.
    pub source: PathBuf,
    /// Its format.
    pub format: String,
    /// Messages in the recording.
    pub messages: usize,
    /// One report per policy, in the run's policy order.
    pub reports: Vec<ReplayReport>,
}

/// Everything a `whittle replay` run measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ReplaySummary {
    /// The window replayed against.
    pub window_tokens: u64,
    /// The prices used.
    pub prices: Prices,
    /// Who wrote the summaries (e.g. "stand-in, 2000 chars").
    pub summarizer: String,
    /// The policies, in column order.
    pub policies: Vec<String>,
    /// Per conversation.
    pub conversations: Vec<ConversationRow>,
    /// Totals per policy, in column order.
    pub totals: Vec<ReplayReport>,
    /// Files that could not be imported, one line each.
    pub errors: Vec<String>,
}
