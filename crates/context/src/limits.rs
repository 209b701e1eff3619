//! The thresholds the pipeline works with.
//!
//! Sizes of individual tool results are always in characters (they are about
//! what a result looks like); the context limit, target and `clear_at_least`
//! are in the unit of the [`Meter`](crate::meter::Meter) in use: characters for
//! the seed's `teaching` preset, tokens for real models.

use crate::summarize::{SUMMARY_CHARS, summary_answer_tokens};

/// Every threshold of the pipeline in one value.
#[derive(Clone, Debug, PartialEq)]
pub struct Limits {
    /// Compaction starts when the context measures above this (meter units).
    pub context_limit: u64,
    /// The most a request may measure and still leave the answer its full
    /// room: the usable window (meter units). Between `context_limit` and
    /// this, a compactor that knows the provider's cache compacts only when
    /// its cost model says compacting now is cheaper than waiting (see
    /// `CacheState`); from here to `squeeze_limit` the answer's room
    /// shrinks instead; above that, it compacts always. Never taken below
    /// `context_limit`.
    pub window_limit: u64,
    /// The most a request may measure when its answer's room is squeezed
    /// to its floor (meter units). Between `window_limit` and this the
    /// request asks for a shorter answer (see [`Limits::answer_room`])
    /// instead of compacting: a rewrite forced there, at the end of a
    /// session, costs more than the whole session's rest would read. An
    /// answer cut at the squeezed room is asked again after a compaction
    /// that leaves the full room. Never taken below `window_limit`.
    pub squeeze_limit: u64,
    /// The model's whole context window (meter units), which a request and
    /// its answer share: what a squeezed answer's room is measured from.
    /// Only the squeeze uses it.
    pub window: u64,
    /// micro_compact and fit_tool_results work down to this (meter units).
    pub target: u64,
    /// tool_result_budget acts when the newest batch of results exceeds this (chars).
    pub batch_budget_chars: usize,
    /// Only results above this are persisted by tool_result_budget (chars).
    pub large_result_chars: usize,
    /// If set, every new result above this is persisted on arrival, whatever
    /// the batch's total (chars). Free in cache terms: the newest message was
    /// never cached. `None` is the seed's rule (only over the batch budget).
    pub persist_results_above: Option<usize>,
    /// Characters of a persisted result kept in context as a preview.
    pub preview_chars: usize,
    /// Preview size when fit_tool_results has to squeeze results further.
    pub fit_preview_chars: usize,
    /// snip_compact acts above this many messages; `None` turns it off.
    pub max_messages: Option<usize>,
    /// Messages snip_compact keeps at the head (the original task lives there).
    pub snip_keep_head: usize,
    /// Messages snip_compact keeps at the tail.
    pub snip_keep_tail: usize,
    /// Newest tool results micro_compact never replaces.
    pub keep_recent_results: usize,
    /// Results this short or shorter are never replaced by a placeholder (chars).
    pub placeholder_floor_chars: usize,
    /// Messages reactive_compact keeps verbatim.
    pub reactive_keep: usize,
    /// micro_compact acts only if it can free at least this much (meter units),
    /// so that the provider's cached prefix is not broken for a small gain.
    pub clear_at_least: u64,
    /// A bounded transcript for the summarizer holds at most this many characters.
    pub summary_input_chars: usize,
    /// A history is summarized in place, as a continuation the provider's
    /// cache serves, when it and the summary's ask (the instruction and the
    /// ledger it carries) measure at most this much (meter units): the
    /// window less the summary's answer. Bigger ones get a bounded
    /// transcript. 0 always uses the transcript, as the seed does.
    pub summarize_in_place_up_to: u64,
    /// The state ledger a compaction marker carries is kept within about
    /// this many tokens (2% of the window in the token policy) (taken as 4 characters each), the person's messages
    /// excepted: they are always kept. 0: no ledger.
    pub ledger_tokens: usize,
}

impl Limits {
    /// Above this a request is compacted whatever it costs: the window
    /// limit, or the context limit if that is higher.
    pub fn hard_limit(&self) -> u64 {
        self.squeeze_limit
            .max(self.window_limit)
            .max(self.context_limit)
    }

    /// Whether a request measuring `size` has its answer's room squeezed:
    /// past the window limit, up to the squeeze limit. Never where the
    /// limits do not squeeze (the character preset's, whose units are not
    /// the answer's); not above the squeeze limit either, where the
    /// compaction that should have run did not, and the provider decides.
    pub fn squeezes(&self, size: u64) -> bool {
        self.window_limit < size && size <= self.squeeze_limit
    }

    /// The room a request measuring `size` leaves an answer that may take
    /// `full`: all of it, but where the request [squeezes](Limits::squeezes)
    /// it, what the window has left (at least a quarter of the reserve, at
    /// the squeeze limit).
    pub fn answer_room(&self, size: u64, full: u64) -> u64 {
        if !self.squeezes(size) {
            return full;
        }
        full.min(self.window.saturating_sub(size))
    }

    /// The same limits without the squeeze: above the window limit a
    /// compaction runs, so that the answer gets its full room (after an
    /// answer was cut at a squeezed one).
    pub fn with_full_answer_room(&self) -> Limits {
        Limits {
            squeeze_limit: self.window_limit,
            ..self.clone()
        }
    }

    /// The ledger's budget in characters.
    pub fn ledger_chars(&self) -> usize {
        self.ledger_tokens.saturating_mul(4)
    }
}

/// The inputs of the token-based policy.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TokenBudget {
    /// The model's context window, in tokens.
    pub context_window: u64,
    /// Tokens kept free for the model's answer.
    pub reserved_output_tokens: u64,
    /// Fraction of the usable window at which compaction starts.
    pub auto_compact_fraction: f64,
}

impl TokenBudget {
    /// The default fraction at which compaction starts.
    pub const DEFAULT_FRACTION: f64 = 0.85;

    /// A budget for a window with the default fraction.
    pub fn new(context_window: u64, reserved_output_tokens: u64) -> Self {
        TokenBudget {
            context_window,
            reserved_output_tokens,
            auto_compact_fraction: Self::DEFAULT_FRACTION,
        }
    }
}

impl Limits {
    /// The seed's character limits, exactly: 50,000-char context, 200,000-char
    /// batch, 30,000-char large result, 2,000-char preview, 50 messages, keep 3.
    /// Meant to be used with the [`CharMeter`](crate::meter::CharMeter), to watch every step happen.
    pub fn teaching() -> Self {
        Limits {
            context_limit: 50_000,
            window_limit: 50_000,
            squeeze_limit: 50_000,
            window: 50_000,
            target: 40_000,
            batch_budget_chars: 200_000,
            large_result_chars: 30_000,
            persist_results_above: None,
            preview_chars: 2_000,
            fit_preview_chars: 1_000,
            max_messages: Some(50),
            snip_keep_head: 3,
            snip_keep_tail: 47,
            keep_recent_results: 3,
            placeholder_floor_chars: 120,
            reactive_keep: 5,
            clear_at_least: 0,
            summary_input_chars: 80_000,
            summarize_in_place_up_to: 0,
            ledger_tokens: 500,
        }
    }

    /// whittle's token policy for a model's window.
    ///
    /// Compaction is rare and acts in large steps: it starts at
    /// `auto_compact_fraction` of the usable window, works down to half of
    /// that, and frees at least a fifth of the limit, so that the history's
    /// cached prefix is rewritten seldom. Per-batch result budgets shrink with
    /// small windows so one batch never fills the context.
    pub fn tokens(budget: TokenBudget) -> Self {
        let usable = budget
            .context_window
            .saturating_sub(budget.reserved_output_tokens)
            .max(1);
        let fraction = budget.auto_compact_fraction.clamp(0.05, 1.0);
        let context_limit = ((usable as f64) * fraction) as u64;
        // A batch may take about a quarter of the usable window (≈4 chars/token).
        let batch = usize::try_from(usable)
            .unwrap_or(usize::MAX)
            .clamp(8_000, 200_000);
        Limits {
            context_limit,
            window_limit: usable,
            // An answer may be squeezed to a quarter of its reserve.
            squeeze_limit: budget
                .context_window
                .saturating_sub(budget.reserved_output_tokens.div_ceil(4))
                .max(usable),
            window: budget.context_window,
            target: context_limit / 2,
            batch_budget_chars: batch,
            large_result_chars: (batch / 4).clamp(2_000, 30_000),
            persist_results_above: Some((batch / 4).clamp(2_000, 30_000)),
            preview_chars: 2_000,
            fit_preview_chars: 1_000,
            max_messages: None,
            snip_keep_head: 3,
            snip_keep_tail: 47,
            keep_recent_results: 3,
            placeholder_floor_chars: 120,
            reactive_keep: 5,
            clear_at_least: context_limit / 5,
            summary_input_chars: 80_000,
            // The summary's answer is capped far below the answer reserve
            // of an ordinary call: the window less that cap. (Less the
            // reserve, a history in the band near the window was summarized
            // from a transcript, as fresh input, where the cache would
            // have served it.)
            summarize_in_place_up_to: budget
                .context_window
                .saturating_sub(summary_answer_tokens(SUMMARY_CHARS) as u64),
            // 2% of the window (4,000 tokens at 200k, 20,000 at 1M): the
            // facts a session piles up grow with what a window holds. Never
            // less than a tenth of a small window up to 3,000 tokens, where
            // it is the whole memory of a session compacted on every call.
            ledger_tokens: usize::try_from(
                (budget.context_window / 50).max((usable / 10).clamp(500, 3_000)),
            )
            .unwrap_or(usize::MAX),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_policy_squeezes_the_answer_to_a_quarter_of_its_reserve() {
        let limits = Limits::tokens(TokenBudget::new(32_000, 4_000));
        assert_eq!(limits.window_limit, 28_000);
        assert_eq!(limits.squeeze_limit, 31_000);
        assert_eq!(limits.hard_limit(), 31_000);
        // Within the window limit the answer has its full room; past it,
        // one token less for every token more, down to the floor.
        assert_eq!(limits.answer_room(10_000, 4_000), 4_000);
        assert_eq!(limits.answer_room(28_000, 4_000), 4_000);
        assert_eq!(limits.answer_room(29_500, 4_000), 2_500);
        assert_eq!(limits.answer_room(31_000, 4_000), 1_000);
        // Above the squeeze limit the compaction that should have run did
        // not: the answer asks for its full room, and the provider decides.
        assert!(!limits.squeezes(31_001));
        assert_eq!(limits.answer_room(31_001, 4_000), 4_000);
        // A request's room plus its size never passes the window.
        for size in [28_000, 29_999, 31_000] {
            assert!(size + limits.answer_room(size, 4_000) <= 32_000);
        }
    }

    #[test]
    fn a_squeezed_room_is_what_the_window_has_left_whatever_the_reserve() {
        // A reserve larger than the answer: past the window limit the
        // answer still fits whole until the window is that close.
        let limits = Limits::tokens(TokenBudget::new(32_000, 16_000));
        assert_eq!(limits.squeeze_limit, 28_000);
        assert_eq!(limits.answer_room(17_000, 4_000), 4_000);
        assert_eq!(limits.answer_room(limits.squeeze_limit, 4_000), 4_000);
        assert_eq!(limits.answer_room(27_000, 20_000), 5_000);
        // At most what the window has left, never less than the floor.
        for size in limits.window_limit + 1..=limits.squeeze_limit {
            let room = limits.answer_room(size, 20_000);
            assert!(size + room <= 32_000 && room >= 4_000, "{size}: {room}");
        }
    }

    #[test]
    fn without_the_squeeze_the_window_limit_is_the_hard_one() {
        let limits = Limits::tokens(TokenBudget::new(200_000, 25_000));
        let full = limits.with_full_answer_room();
        assert_eq!(full.hard_limit(), limits.window_limit);
        assert!(!full.squeezes(limits.window_limit + 500));
        assert_eq!(full.answer_room(limits.window_limit + 500, 25_000), 25_000);
        assert_eq!(full.context_limit, limits.context_limit);
        // No reserve, nothing to squeeze; the smallest still leaves a token.
        let none = Limits::tokens(TokenBudget::new(4_096, 0));
        assert_eq!(none.squeeze_limit, none.window_limit);
        let tiny = Limits::tokens(TokenBudget::new(4_096, 3));
        assert_eq!(tiny.answer_room(tiny.squeeze_limit, 3), 1);
    }

    #[test]
    fn the_character_preset_never_squeezes() {
        let limits = Limits::teaching();
        assert_eq!(limits.hard_limit(), limits.window_limit);
        assert_eq!(limits.answer_room(90_000, 1_024), 1_024);
    }
}
