//! What a replay measured, as plain data: the table for people and the
//! `--json` for machines are both made from these.

use crate::calibration::Measured;
use crate::call_times::{TenthsP99, median};
use crate::import::Conversation;
use crate::recorded::RecordedCall;
use crate::survival::Survival;
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
    /// Of the writes, those for an hour (priced higher).
    pub cache_write_1h_tokens: u64,
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
    /// Answers the policy's squeezed room would have cut (see
    /// `whittle_context::Limits::answer_room`): each is paid for, up to
    /// the room, then asked again after a compaction (both calls counted).
    pub cut_answers: u64,
    /// Requests that failed the validator.
    pub invalid_requests: u64,
    /// Characters that left the context and are not in the store; must be 0.
    pub unrecoverable_chars: u64,
    /// Pipeline time per call, median, in microseconds: `prepare` less the
    /// summary calls it makes (the model's time in the agent; here the
    /// stand-in summarizer's and the pricing of its request). In totals,
    /// the largest of the conversations' medians: the conversation whose
    /// typical call is slowest, not the median of every call.
    pub pipeline_us_median: u64,
    /// Pipeline time per call, median over every call, in microseconds: in
    /// a conversation, `pipeline_us_median`; in totals, the median of all
    /// the conversations' calls together.
    pub pipeline_us_median_all_calls: u64,
    /// Pipeline time per call, max, in microseconds.
    pub pipeline_us_max: u64,
    /// Pipeline time in all, in microseconds.
    pub pipeline_us_total: u64,
    /// Time in all, in microseconds, of the work done ahead of need while
    /// the model answers ([`whittle_context::History::prepare_ahead`]), and
    /// of saving the outputs the agent's tools save while they run (those
    /// past `persist_results_above`): off the calls' path, as in the
    /// agent, and not in the pipeline's figures, but counted here so that
    /// none of the work is hidden.
    pub ahead_us_total: u64,
    /// The pipeline's p99 per call in each tenth of the session; in totals,
    /// the longest session's: whether the slowest calls stay flat as a
    /// session grows.
    pub pipeline_us_p99_by_tenth: TenthsP99,
    /// Pipeline time of each call in call order, in microseconds: whether
    /// the cost stays flat as a session grows (in totals, every
    /// conversation's calls one after the other). Not in JSON (one per
    /// call).
    #[serde(skip)]
    pub pipeline_us_by_call: Vec<u64>,
    /// Calls measured as the recording logged them, not rebuilt from messages.
    pub exact_requests: u64,
    /// What the policy's compactions kept of the facts they removed.
    pub survival: Survival,
    /// The request of each call in call order, in tokens: the curve a
    /// report draws. Not in JSON (one per call).
    #[serde(skip)]
    pub tokens_by_call: Vec<u64>,
    /// Every step that changed the history, in order, with the call it ran
    /// before: where a report marks the curve. Not in JSON (one per step).
    #[serde(skip)]
    pub applied_steps: Vec<AppliedStep>,
    /// Where the policy starts compacting, in tokens of this conversation
    /// (`None`: it never compacts on size).
    #[serde(skip)]
    pub compaction_limit_tokens: Option<u64>,
}

/// One step that changed the history during a replay.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppliedStep {
    /// The call (0-based) the step ran before.
    pub call: u64,
    /// The step's key in [`ReplayReport::steps`].
    pub step: String,
    /// Its report line (`212k -> 9k tokens (micro_compact, 4 changed)`),
    /// without the scratch store's paths.
    pub line: String,
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

    /// Adds `other` into `self` (for totals); medians become the max of
    /// medians, but for the median of all calls.
    pub fn absorb(&mut self, other: &ReplayReport) {
        self.calls += other.calls;
        self.peak_tokens = self.peak_tokens.max(other.peak_tokens);
        self.input_tokens += other.input_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        self.cache_write_1h_tokens += other.cache_write_1h_tokens;
        self.exact_requests += other.exact_requests;
        self.uncached_tokens += other.uncached_tokens;
        self.output_tokens += other.output_tokens;
        self.summarize_calls += other.summarize_calls;
        self.summarize_input_tokens += other.summarize_input_tokens;
        self.cost_usd += other.cost_usd;
        for (k, v) in &other.steps {
            *self.steps.entry(k.clone()).or_default() += v;
        }
        self.over_window += other.over_window;
        self.cut_answers += other.cut_answers;
        self.invalid_requests += other.invalid_requests;
        self.unrecoverable_chars += other.unrecoverable_chars;
        self.pipeline_us_median = self.pipeline_us_median.max(other.pipeline_us_median);
        self.pipeline_us_by_call
            .extend_from_slice(&other.pipeline_us_by_call);
        self.pipeline_us_median_all_calls = median(&self.pipeline_us_by_call);
        self.pipeline_us_max = self.pipeline_us_max.max(other.pipeline_us_max);
        self.pipeline_us_total += other.pipeline_us_total;
        self.ahead_us_total += other.ahead_us_total;
        self.pipeline_us_p99_by_tenth
            .absorb(&other.pipeline_us_p99_by_tenth);
        self.survival.absorb(&other.survival);
    }
}

/// What the recording says was billed, summed over its calls: every call
/// billed, once per response, whether or not replay makes its request.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct RecordedTotals {
    /// Calls with recorded usage.
    pub calls: u64,
    /// Input neither read from nor written to the cache.
    pub uncached_tokens: u64,
    /// Input read from the cache.
    pub cache_read_tokens: u64,
    /// Input written to the cache.
    pub cache_write_tokens: u64,
    /// Of the writes, those for an hour.
    pub cache_write_1h_tokens: u64,
    /// Output.
    pub output_tokens: u64,
    /// The cost of all of it with the run's prices.
    pub cost_usd: f64,
    /// Of all this, the calls on abandoned branches: billed, but not on the
    /// path replay follows (see [`Conversation::abandoned`]).
    pub abandoned: BilledCalls,
}

/// Some billed calls, summed.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct BilledCalls {
    /// How many.
    pub calls: u64,
    /// Input neither read from nor written to the cache.
    pub uncached_tokens: u64,
    /// Input read from the cache.
    pub cache_read_tokens: u64,
    /// Input written to the cache.
    pub cache_write_tokens: u64,
    /// Of the writes, those for an hour.
    pub cache_write_1h_tokens: u64,
    /// Output.
    pub output_tokens: u64,
    /// Their cost with the run's prices.
    pub cost_usd: f64,
}

impl BilledCalls {
    /// The usage of `calls` (those with usage), priced with `prices`.
    pub fn of<'a>(calls: impl IntoIterator<Item = &'a RecordedCall>, prices: &Prices) -> Self {
        let mut t = BilledCalls::default();
        for u in calls.into_iter().filter_map(|call| call.usage) {
            t.calls += 1;
            t.uncached_tokens += u.input_tokens;
            t.cache_read_tokens += u.cache_read_tokens;
            t.cache_write_tokens += u.cache_write_tokens;
            t.cache_write_1h_tokens += u.cache_write_1h_tokens.min(u.cache_write_tokens);
            t.output_tokens += u.output_tokens;
        }
        t.cost_usd = prices.cost_usd(
            t.uncached_tokens,
            t.cache_read_tokens,
            t.cache_write_tokens - t.cache_write_1h_tokens,
            t.cache_write_1h_tokens,
            t.output_tokens,
        );
        t
    }

    fn absorb(&mut self, other: &BilledCalls) {
        self.calls += other.calls;
        self.uncached_tokens += other.uncached_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        self.cache_write_1h_tokens += other.cache_write_1h_tokens;
        self.output_tokens += other.output_tokens;
        self.cost_usd += other.cost_usd;
    }
}

impl RecordedTotals {
    /// The billed totals of `c`, priced with `prices`; `None` when no call
    /// has recorded usage.
    pub fn of(c: &Conversation, prices: &Prices) -> Option<RecordedTotals> {
        let replayed = BilledCalls::of(&c.calls, prices);
        let abandoned = BilledCalls::of(&c.abandoned, prices);
        let mut all = replayed;
        all.absorb(&abandoned);
        (all.calls > 0).then_some(RecordedTotals {
            calls: all.calls,
            uncached_tokens: all.uncached_tokens,
            cache_read_tokens: all.cache_read_tokens,
            cache_write_tokens: all.cache_write_tokens,
            cache_write_1h_tokens: all.cache_write_1h_tokens,
            output_tokens: all.output_tokens,
            cost_usd: all.cost_usd,
            abandoned,
        })
    }

    /// The calls on the path replay follows: everything but the abandoned branches.
    pub fn replayed(&self) -> BilledCalls {
        let a = &self.abandoned;
        BilledCalls {
            calls: self.calls - a.calls,
            uncached_tokens: self.uncached_tokens - a.uncached_tokens,
            cache_read_tokens: self.cache_read_tokens - a.cache_read_tokens,
            cache_write_tokens: self.cache_write_tokens - a.cache_write_tokens,
            cache_write_1h_tokens: self.cache_write_1h_tokens - a.cache_write_1h_tokens,
            output_tokens: self.output_tokens - a.output_tokens,
            cost_usd: self.cost_usd - a.cost_usd,
        }
    }

    /// Adds `other` into `self` (for totals).
    pub fn absorb(&mut self, other: &RecordedTotals) {
        self.calls += other.calls;
        self.uncached_tokens += other.uncached_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        self.cache_write_1h_tokens += other.cache_write_1h_tokens;
        self.output_tokens += other.output_tokens;
        self.cost_usd += other.cost_usd;
        self.abandoned.absorb(&other.abandoned);
    }
}

/// How far a replay is from the bill, in percent of the billed value
/// (positive: the replay says more); `None` where the bill says 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct ErrorPct {
    /// Model calls.
    pub calls: Option<f64>,
    /// Uncached input.
    pub uncached: Option<f64>,
    /// Cache reads.
    pub cache_read: Option<f64>,
    /// Cache writes.
    pub cache_write: Option<f64>,
    /// Cost.
    pub cost: Option<f64>,
}

impl ErrorPct {
    /// `replay` (the `none` policy) against the calls of `recorded` on the
    /// path it replayed: the abandoned branches are reported beside it.
    pub fn of(replay: &ReplayReport, recorded: &RecordedTotals) -> ErrorPct {
        let recorded = recorded.replayed();
        let pct = |ours: f64, billed: f64| (billed > 0.0).then(|| 100.0 * (ours - billed) / billed);
        ErrorPct {
            calls: pct(replay.calls as f64, recorded.calls as f64),
            uncached: pct(
                replay.uncached_tokens as f64,
                recorded.uncached_tokens as f64,
            ),
            cache_read: pct(
                replay.cache_read_tokens as f64,
                recorded.cache_read_tokens as f64,
            ),
            cache_write: pct(
                replay.cache_write_tokens as f64,
                recorded.cache_write_tokens as f64,
            ),
            cost: pct(replay.cost_usd, recorded.cost_usd),
        }
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
    /// How its requests were measured.
    pub measured: Measured,
    /// The characters per token used for it.
    pub chars_per_token: f64,
    /// Tokens every request carried besides the messages (system prompt,
    /// tools, injected context), as calibrated.
    pub overhead_tokens: u64,
    /// What was billed, when the recording says.
    pub recorded: Option<RecordedTotals>,
    /// The `none` policy against the bill, when both are there.
    pub none_vs_recorded: Option<ErrorPct>,
    /// What the recording agent's own compactions kept, when it compacted.
    pub recorded_survival: Option<Survival>,
}

impl ConversationRow {
    /// Adds the row of the recording agent's compaction call for this
    /// session (see [`Conversation::summarizes`](crate::Conversation::summarizes)):
    /// its reports, policy by policy, with its calls numbered after the
    /// session's own, and its bill.
    pub fn absorb_compaction_call(&mut self, call: &ConversationRow) {
        for (report, other) in self.reports.iter_mut().zip(&call.reports) {
            let after = report.calls;
            report.absorb(other);
            report
                .overflow_calls
                .extend(other.overflow_calls.iter().map(|k| k + after));
            report
                .tokens_by_call
                .extend_from_slice(&other.tokens_by_call);
        }
        // A session without a bill stays without one: the call's bill
        // alone would be set against the whole session's replay.
        if let (Some(mine), Some(theirs)) = (&mut self.recorded, &call.recorded) {
            mine.absorb(theirs);
        }
        match (&mut self.recorded_survival, &call.recorded_survival) {
            (Some(mine), Some(theirs)) => mine.absorb(theirs),
            (mine @ None, Some(theirs)) => *mine = Some(theirs.clone()),
            (_, None) => {}
        }
    }
}

/// Everything a `whittle replay` run measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ReplaySummary {
    /// The window replayed against.
    pub window_tokens: u64,
    /// The prices used.
    pub prices: Prices,
    /// Who wrote the summaries (e.g. "stand-in, up to 2000 chars").
    pub summarizer: String,
    /// The policies, in column order.
    pub policies: Vec<String>,
    /// Per conversation.
    pub conversations: Vec<ConversationRow>,
    /// Totals per policy, in column order.
    pub totals: Vec<ReplayReport>,
    /// Files that could not be imported, one line each.
    pub errors: Vec<String>,
    /// What was billed, over the conversations whose recording says.
    pub recorded: Option<RecordedTotals>,
    /// The `none` policy over those same conversations.
    pub none_on_recorded: Option<ReplayReport>,
    /// `none_on_recorded` against `recorded`.
    pub none_vs_recorded: Option<ErrorPct>,
    /// What the recording agents' own compactions (e.g. Claude Code's
    /// summaries) kept, over the conversations that have them.
    pub recorded_survival: Option<Survival>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timed(calls: &[u64]) -> ReplayReport {
        ReplayReport {
            calls: calls.len() as u64,
            pipeline_us_median: median(calls),
            pipeline_us_median_all_calls: median(calls),
            pipeline_us_by_call: calls.to_vec(),
            ..ReplayReport::default()
        }
    }

    /// Totals keep the slowest conversation's median and, beside it, the
    /// median of every call: a one-call conversation moves the first only.
    #[test]
    fn totals_keep_the_slowest_median_and_the_median_of_all_calls() {
        let mut totals = ReplayReport::default();
        for report in [timed(&[3, 1, 2, 5, 4]), timed(&[70]), timed(&[6, 2, 1])] {
            totals.absorb(&report);
        }
        assert_eq!(totals.pipeline_us_median, 70);
        // 1 1 2 2 3 4 5 6 70: the fifth.
        assert_eq!(totals.pipeline_us_median_all_calls, 3);
        assert_eq!(totals.calls, 9);
    }
}
