//! The compaction pipeline: lossless before lossy, zero-cost before model calls.
//!
//! ```text
//! tool_result_budget -> snip_compact -> micro_compact -> fit_tool_results -> compact_history
//! ```
//!
//! Each tidy step is a function on a [`History`] that returns `None` when its
//! trigger does not hold and a [`StepReport`] when it does. No step loses
//! data: whatever leaves the context is first written to the [`Store`] (a
//! persisted file or a transcript), and an I/O failure leaves the history as
//! it was. [`Compactor::prepare`] runs the steps in their fixed order before
//! every model call; the summarizing steps stop at a [`SummaryNeeded`] for
//! the caller to answer.
//!
//! The steps that rewrite what the provider has cached (snip_compact,
//! micro_compact) run on their size triggers alone unless the caller gives
//! the compactor a [`CacheState`] ([`Compactor::set_cache_state`]); with
//! one, each runs only when the window forces it, when the cache is cold
//! anyway, or when the cost model in [`CacheState`] says it pays.

mod cache_gate;
mod cache_model;
mod compactor;
mod progress;
mod report;
mod savings;
mod summary;
mod summary_cost;
mod tidy;

pub use cache_model::{CachePrices, CacheState, MAX_EXPECTED_CALLS, Rewrite, Verdict};
pub use compactor::{Compactor, PrepareOutcome};
pub use progress::{Progress, SummaryNeeded};
pub use report::{Outcome, Step, StepError, StepReport, Trigger};
pub use tidy::{
    cache_anchor, fit_tool_results, micro_compact, snip_compact, tidy_floor, tool_result_budget,
};

use crate::history::History;
use crate::limits::Limits;
use crate::meter::{Meter, Unit};
pub use crate::summarize::SUMMARY_CHARS;
use whittle_store::Store;

/// What the tidy steps need besides the history, borrowed from a
/// [`Compactor`] or assembled by a caller that runs single steps (replay).
pub struct Ctx<'a> {
    /// The thresholds every step decides by.
    pub limits: &'a Limits,
    /// Where removed content is saved first, so that no step loses data.
    pub store: &'a Store,
    /// How size is measured; the limits are in its unit.
    pub meter: &'a dyn Meter,
}

impl Ctx<'_> {
    fn measure(&self, history: &History) -> u64 {
        self.meter.measure(history)
    }

    /// The size of what every request carries besides the messages (the
    /// system prompt and tools), by the meter.
    fn overhead(&self) -> u64 {
        self.meter.measure(&History::default())
    }

    /// Whether the system prompt and tools alone measure above the hard
    /// limit: then no compaction of the messages can make a request fit,
    /// and a summary would only cost its call and lose detail.
    fn overhead_fills_window(&self) -> bool {
        self.overhead() > self.limits.hard_limit()
    }

    /// The ledger's budget in characters: the configured one, but at most a
    /// quarter of the room the hard limit (`Limits::hard_limit`, where the
    /// window forces a compaction) leaves beside the system prompt and
    /// tools (a marker that alone fills the window would make compaction
    /// run on every call), and never below a floor that holds the person's
    /// messages and the newest few facts. 0 only when the ledger is off.
    ///
    /// The floor holds also when the system prompt and tools alone leave no
    /// room under the target, so that compaction runs on every call. Then
    /// each marker carries the facts of the one before it plus the newest,
    /// and the ledger is all the agent remembers of its work; every
    /// character of it is paid on every call (written into the marker, and
    /// read by the next summarizer). Measured on the shared traces at a 32k
    /// window, where Claude Code's ~26k tokens of system prompt and tools do
    /// exactly this, against no ledger at all: a 1,000-character floor kept
    /// 87% of the removed paths for +3.1% cost, 1,500 keeps 99% for +4.9%.
    /// Since a summary between the compaction limit and the window waits
    /// until it pays, one compaction removes the facts of several calls at
    /// once: 1,500 then kept commands 96.3%, 1,700 keeps 98.3% (paths 100%)
    /// for +2.4% cost, 2,000 keeps 99.8% for +5.2% (fewer calls fit
    /// beside a bigger marker).
    ///
    /// The room was the target's until the history could grow into the
    /// answer's reserve (`Limits::squeeze_limit`). Then the floor alone
    /// kept 88.9% of commands at 32k (paths 99.2%; each compaction removed
    /// twice the calls), and the room below the hard limit, about 5,000
    /// characters beside Claude Code's system prompt, keeps 100% of both
    /// at 0.787× of `none` (0.778× with the floor).
    ///
    /// A token budget becomes characters at the ratio the meter sees in
    /// `history` ([`Ctx::chars_per_unit`]).
    fn ledger_chars(&self, history: &History) -> usize {
        const FLOOR_CHARS: usize = 1_700;
        if self.limits.ledger_tokens == 0 {
            return 0;
        }
        let chars_per_unit = self.chars_per_unit(history);
        let configured = match self.meter.unit() {
            Unit::Chars => self.limits.ledger_chars(),
            Unit::Tokens => (self.limits.ledger_tokens as f64 * chars_per_unit) as usize,
        };
        let room = self.room_chars(self.limits.hard_limit(), chars_per_unit);
        configured.min((room / 4).max(FLOOR_CHARS))
    }

    /// The size (meter units) of `history.messages()[..end]`.
    pub(crate) fn units_before(&self, history: &History, end: usize) -> u64 {
        let chars = history.chars().saturating_sub(history.chars_from(end));
        self.meter.chars_to_units(chars)
    }

    /// The longest summary a compaction asks for, in characters: about
    /// [`SUMMARY_CHARS`] (a few short lines in each of the instruction's
    /// sections), but at most a quarter of the room the target leaves
    /// beside the system prompt and tools, and never under a floor that
    /// still says what was done and what is next.
    ///
    /// The marker a summary leaves is the request, the summary and the
    /// ledger; with the ledger also at most a quarter of the room, half of
    /// it is left for the work before the next compaction. A fixed-size
    /// summary beside a big system prompt leaves almost none: on the shared
    /// traces at a 32k window, where Claude Code's ~26k tokens of system
    /// prompt and tools leave about 2k, 2,000-character summaries made the
    /// longest session summarize on 167 of its 217 calls, each summary paid
    /// as output and then written to the cache. With the budget (the floor
    /// there) it summarizes on 115 and costs 0.78x of `none`, not 1.12x;
    /// all conversations at 32k cost 0.82x of `none`, not 0.91x, with
    /// commands kept 97.0% (98.9%), paths and the person's messages 100%.
    /// At 200k and 1M nothing changes: the room is there.
    pub(crate) fn summary_chars(&self, history: &History) -> usize {
        const FLOOR_CHARS: usize = 1_000;
        let room = self.room_chars(self.limits.target, self.chars_per_unit(history));
        SUMMARY_CHARS.min((room / 4).max(FLOOR_CHARS))
    }

    /// The room `limit` (meter units) leaves beside the system prompt and
    /// tools, in characters at `chars_per_unit` ([`Ctx::chars_per_unit`]).
    fn room_chars(&self, limit: u64, chars_per_unit: f64) -> usize {
        let room = limit.saturating_sub(self.overhead());
        (room as f64 * chars_per_unit) as usize
    }

    /// Characters per unit of the meter: 1 for characters; for tokens, the
    /// ratio the meter sees in `history` (code and JSON run well under 4
    /// characters a token), 4 for an empty one.
    fn chars_per_unit(&self, history: &History) -> f64 {
        match self.meter.unit() {
            Unit::Chars => 1.0,
            Unit::Tokens => {
                let tokens = self.meter.measure(history).saturating_sub(self.overhead());
                if tokens == 0 {
                    4.0
                } else {
                    (history.chars() as f64 / tokens as f64).clamp(1.0, 8.0)
                }
            }
        }
    }
}
