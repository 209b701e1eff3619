//! The pipeline's entry points, with one set of limits, store and meter.
//!
//! Each entry point comes twice: `start_*` runs until it finishes or stops
//! at a summary request ([`Progress`]), for harnesses that make summaries
//! asynchronously; the plain one answers those requests with a blocking
//! [`Summarizer`].

use super::Ctx;
use super::cache_gate::{compaction_pays, micro_compact_cached, snip_compact_cached};
use super::cache_model::CacheState;
use super::progress::Progress;
use super::report::{Step, StepReport, Trigger};
use super::savings::Savings;
use super::summary::{render_marker_ledger_ahead, start_compact_history, start_reactive_compact};
use super::summary_cost::{SummaryAsk, ask_chars_at_most, cached_units, summary_call_cost};
use super::tidy::{
    cache_anchor, fit_tool_results, micro_compact, render_snip_ledger_ahead, settle_old_results,
    snip_compact, tidy_floor_with, tool_result_budget,
};
use crate::history::History;
use crate::limits::Limits;
use crate::meter::Meter;
use crate::summarize::Summarizer;
use whittle_store::Store;

/// What [`Compactor::prepare`] did before one model call.
#[derive(Clone, Debug, PartialEq)]
pub struct PrepareOutcome {
    /// One report per step that triggered, in order.
    pub reports: Vec<StepReport>,
    /// Size before the pipeline.
    pub before: u64,
    /// Size after the pipeline.
    pub after: u64,
    /// Whether the history is still over the limit after every step.
    pub over_limit: bool,
    /// How many calls in a row ended over the limit (0 when this one did not).
    pub consecutive_over_limit: u32,
}

impl PrepareOutcome {
    /// Consecutive over-limit outcomes after which the loop should stop the turn.
    pub const STOP_AFTER: u32 = 3;

    /// Whether compaction has failed to bring the context under the limit
    /// often enough in a row that calling the model again would spiral.
    pub fn should_stop(&self) -> bool {
        self.consecutive_over_limit >= Self::STOP_AFTER
    }
}

/// Runs the pipeline with one set of limits, store and meter, and remembers
/// how many times in a row it ended over the limit.
pub struct Compactor {
    limits: Limits,
    store: Store,
    meter: Box<dyn Meter + Send>,
    consecutive_over_limit: u32,
    /// What the caller said of the provider's cache for the next call.
    cache: Option<CacheState>,
    /// What compacting has saved this session, by the cache model: what a
    /// compaction the window does not force yet may bet.
    savings: Savings,
    /// The next prepare leaves the answer its full room (see
    /// [`Compactor::leave_full_answer_room`]).
    full_answer_room_next: bool,
}

impl Compactor {
    /// A compactor with the given parts.
    pub fn new(limits: Limits, store: Store, meter: Box<dyn Meter + Send>) -> Self {
        Compactor {
            limits,
            store,
            meter,
            consecutive_over_limit: 0,
            cache: None,
            savings: Savings::default(),
            full_answer_room_next: false,
        }
    }

    /// The room, in the meter's unit, the history as it is leaves an answer
    /// that may take `full`: less than `full` once the history has grown
    /// past the window limit into the answer's reserve (see
    /// [`Limits::answer_room`]). A harness sends it as the request's
    /// output limit.
    pub fn answer_room(&self, history: &History, full: u64) -> u64 {
        self.limits.answer_room(self.measure(history), full)
    }

    /// Whether the history as it is squeezes the answer's room (see
    /// [`Limits::squeezes`]): an answer cut there is worth asking again
    /// after [`Compactor::leave_full_answer_room`].
    pub fn squeezes_answer(&self, history: &History) -> bool {
        self.limits.squeezes(self.measure(history))
    }

    /// The answer to the last request was cut at a squeezed room: the next
    /// prepare compacts whatever lies above the window limit, as it would
    /// without the squeeze, so that the request asked again leaves the
    /// answer its full room.
    pub fn leave_full_answer_room(&mut self) {
        self.full_answer_room_next = true;
    }

    /// What the provider's cache holds before the next call (see
    /// [`CacheState`]): the prefix-rewriting steps then run only when the
    /// window forces them, the cache is cold, or the rewrite pays. `None`
    /// (the default): they run on their size triggers alone. The model
    /// takes the provider to hold the messages unchanged since the request
    /// last sent, so the caller marks each request it sends
    /// ([`History::mark`]); a history never marked is priced as if every
    /// message after its first edit had to be written again.
    pub fn set_cache_state(&mut self, cache: Option<CacheState>) {
        self.cache = cache;
    }

    /// The cache state given for the next call, if any.
    pub fn cache_state(&self) -> Option<&CacheState> {
        self.cache.as_ref()
    }

    /// The thresholds every step decides by.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// New thresholds from the next compaction on (another model, another
    /// window).
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
        self.consecutive_over_limit = 0;
    }

    /// The caller replaced the history wholesale (a rewind, an undone
    /// compaction, a resumed log): the savings stop counting what the
    /// steps freed from the old one as still saved (see `Savings`).
    pub fn history_replaced(&mut self) {
        self.savings.history_replaced();
    }

    /// Where removed content is saved, so a harness can read it back or show
    /// where it went.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// [`History::prepare_ahead`] for this compactor: its store, and every
    /// result a `micro_compact` could replace (above the placeholder
    /// floor) saved; and the ledgers brought up to date, which after an
    /// edit of old messages (micro_compact's placeholders) means recording
    /// the history again from before the edit: work the next call would
    /// otherwise begin with; then the ledgers' checkpoints taken; and
    /// between the compaction limit and the window, the ledger a summary
    /// would carry rendered, whose length the next call's cost check
    /// prices the summary by; with snip_compact on, the ledger of the
    /// middle it will archive after one more exchange rendered, which the
    /// next call's marker then carries as it is. A harness calls it while
    /// the model answers.
    pub fn prepare_ahead(&self, history: &mut History) {
        history.prepare_ahead(&self.store, Some(self.limits.placeholder_floor_chars));
        let cx = self.ctx();
        settle_old_results(history, &cx);
        self.keep_ledger(history);
        history.checkpoint_ledgers_ahead();
        // Between the limit and the window every call prices a summary,
        // the marker's ledger included (see `compaction_pays`).
        if self.keeps_ledger()
            && self.cache.is_some()
            && cx.measure(history) > self.limits.context_limit
        {
            render_marker_ledger_ahead(history, &cx);
        }
        // With snip_compact on, a long session archives its middle on
        // almost every call, one exchange (two messages) further each time.
        if self.limits.ledger_tokens > 0 {
            render_snip_ledger_ahead(history, &cx, 2);
        }
    }

    /// How this compactor measures size, in the unit of its reports.
    pub fn meter(&self) -> &dyn Meter {
        self.meter.as_ref()
    }

    /// The meter, to feed it the provider's usage reports.
    pub fn meter_mut(&mut self) -> &mut (dyn Meter + Send) {
        self.meter.as_mut()
    }

    /// The size of `history` by this compactor's meter.
    pub fn measure(&self, history: &History) -> u64 {
        self.meter.measure(history)
    }

    pub(super) fn ctx(&self) -> Ctx<'_> {
        Ctx {
            limits: &self.limits,
            store: &self.store,
            meter: self.meter.as_ref(),
        }
    }

    /// Runs every step in the fixed order, each only if its trigger holds,
    /// and summarizes only if the context is still over the limit after the
    /// first four. When [`tidy_floor`](super::tidy_floor) shows that micro_compact and
    /// fit_tool_results together could not reach the limit, they are skipped
    /// (and run only if the summary fails): editing results that are about to
    /// be summarized would only hide them from the summarizer. Never loops:
    /// if the context is still over the limit, the outcome says so and
    /// counts it.
    pub fn prepare(
        &mut self,
        history: &mut History,
        request: &str,
        summarizer: &mut dyn Summarizer,
    ) -> PrepareOutcome {
        self.start_prepare(history, request).finish_with(summarizer)
    }

    /// [`Compactor::prepare`], stopping at its summary request, if any.
    pub fn start_prepare<'a>(
        &'a mut self,
        history: &'a mut History,
        request: &str,
    ) -> Progress<'a, PrepareOutcome> {
        let full_room = std::mem::take(&mut self.full_answer_room_next)
            .then(|| self.limits.with_full_answer_room());
        let cx = match &full_room {
            Some(limits) => Ctx {
                limits,
                ..self.ctx()
            },
            None => self.ctx(),
        };
        let before = cx.measure(history);
        let mut reports = Vec::new();
        let cache = self.cache;
        reports.extend(tool_result_budget(history, &cx));
        // After the budget: a new result it replaces by its preview is
        // recorded once, as the preview (recorded before, the edit rolled
        // the ledgers back and recorded the messages after it again).
        self.keep_ledger(history);
        // Between the compaction limit and the window, the limit's
        // compaction waits until the cost model says it pays (or the window
        // forces it): the steps then see the window as their limit.
        let held;
        let cx = match &cache {
            Some(c) if !compaction_pays(history, &cx, c, &self.savings, request) => {
                held = Limits {
                    context_limit: cx.limits.hard_limit(),
                    ..cx.limits.clone()
                };
                Ctx {
                    limits: &held,
                    ..cx
                }
            }
            _ => cx,
        };
        reports.extend(match &cache {
            Some(c) => snip_compact_cached(history, &cx, c),
            None => snip_compact(history, &cx),
        });
        let limit = cx.limits.context_limit;
        // When replacing results cannot reach the limit, summarize the history
        // as it is: the summarizer sees every result, and the provider's
        // cached prefix (the previous request) still matches it.
        let clears_all = cache.is_some_and(|c| c.cold());
        let summarize_first =
            cx.measure(history) > limit && tidy_floor_with(history, &cx, clears_all) > limit;
        if !summarize_first {
            reports.extend(match &cache {
                Some(c) => micro_compact_cached(history, &cx, c, &self.savings),
                None => micro_compact(history, &cx),
            });
            reports.extend(fit_tool_results(history, &cx));
        }
        if cx.measure(history) <= limit {
            return Progress::Done(self.finish_prepare(history, before, reports, limit));
        }
        let step = start_compact_history(
            history,
            &cx,
            cache.as_ref(),
            request,
            None,
            Trigger::OverLimit,
        );
        let then = move |c: &mut Compactor, h: &mut History, report: StepReport| {
            let applied = report.applied();
            reports.push(report);
            if !applied && summarize_first {
                // The summary failed: tidy as far as possible after all.
                let cx = c.ctx();
                reports.extend(micro_compact(h, &cx));
                reports.extend(fit_tool_results(h, &cx));
            }
            c.finish_prepare(h, before, reports, limit)
        };
        Progress::after_step(self, history, step, Box::new(then))
    }

    /// Records the facts of the messages appended since the last call into
    /// the history's ledgers (see `LedgerMemo`), so that the cost of
    /// keeping the ledger is paid a message at a time, and a compaction
    /// renders it rather than reading the whole history.
    ///
    /// Not with snip_compact on: it edits the history near its head every
    /// few calls, and a ledger of the whole would be rebuilt as often; it
    /// keeps the ledger of the middle it archives instead.
    fn keep_ledger(&self, history: &mut History) {
        if !self.keeps_ledger() {
            return;
        }
        // The path as text without `Display` (a formatter per call): the
        // same text.
        let place = crate::markers::path_text(&self.store.transcript_path()).into_owned();
        let all = 0..history.len();
        history.ledger_of(all.clone(), Some(&place), true);
        history.ledger_of(all, Some(&place), false);
    }

    /// Whether the ledger is kept as messages come (see `keep_ledger`).
    fn keeps_ledger(&self) -> bool {
        self.limits.ledger_tokens > 0 && self.limits.max_messages.is_none()
    }

    /// Measures the result of prepare and counts it if it is still over
    /// `limit`: the context limit, or the window limit when the compaction
    /// was put off (a history waiting in between is not a failure to
    /// compact, and must not stop the turn).
    fn finish_prepare(
        &mut self,
        history: &History,
        before: u64,
        reports: Vec<StepReport>,
        limit: u64,
    ) -> PrepareOutcome {
        let after = self.measure(history);
        self.count_savings(history, after, &reports);
        let over_limit = after > limit;
        self.consecutive_over_limit = if over_limit {
            self.consecutive_over_limit + 1
        } else {
            0
        };
        PrepareOutcome {
            reports,
            before,
            after,
            over_limit,
            consecutive_over_limit: self.consecutive_over_limit,
        }
    }

    /// Counts what this call's steps freed and cost, and what the call
    /// then sends, into the session's savings (with a cache state only:
    /// without one there is no cost model).
    fn count_savings(&mut self, history: &History, sent: u64, reports: &[StepReport]) {
        let Some(state) = self.cache else { return };
        for report in reports {
            self.count_step(&state, report, history);
        }
        let cx = self.ctx();
        let cached = cached_units(history, &cx);
        self.savings.called(&state, sent, cached);
    }

    /// Counts what one step freed, and a summary's own call, into the
    /// session's savings.
    fn count_step(&mut self, state: &CacheState, report: &StepReport, history: &History) {
        if !report.applied() {
            return;
        }
        let cx = self.ctx();
        // The transcript and the answer at their longest: the savings are
        // never counted above what they are.
        let extra = match report.step {
            Step::CompactHistory | Step::ReactiveCompact => {
                let answer = cx.meter.chars_to_units(super::SUMMARY_CHARS);
                // At its dearest: a reactive summary is never in place,
                // and the longest ask must fit with nothing cached.
                let ask = SummaryAsk {
                    size: report.before,
                    cached: 0,
                    ask_chars: (report.step == Step::CompactHistory)
                        .then(|| ask_chars_at_most(&cx, history)),
                    transcript_chars: cx.limits.summary_input_chars,
                };
                summary_call_cost(&cx, state, &ask, report.after.min(answer))
            }
            _ => 0.0,
        };
        self.savings
            .stepped(report.before.saturating_sub(report.after), extra);
    }

    /// A summary asked for outside the pipeline (`/compact`, recovery
    /// from an overflow), counted into the savings like the pipeline's own.
    fn counted(&mut self, history: &mut History, report: StepReport) -> StepReport {
        if let Some(state) = self.cache {
            self.count_step(&state, &report, history);
        }
        report
    }

    /// Where to put the extra cache breakpoint for the next request; see [`cache_anchor`].
    pub fn cache_anchor(&self, history: &History) -> Option<usize> {
        cache_anchor(history, &self.ctx())
    }

    /// Summarizes now, whatever the size: the `compact` tool and `/compact`.
    /// The history is replaced by one `[Compacted]` message carrying the
    /// current request, the summary as reference data, and the path of a
    /// transcript of everything; not applied if that would not shrink it.
    pub fn compact(
        &mut self,
        history: &mut History,
        request: &str,
        summarizer: &mut dyn Summarizer,
        focus: Option<&str>,
    ) -> StepReport {
        self.start_compact(history, request, focus)
            .finish_with(summarizer)
    }

    /// [`Compactor::compact`], stopping at its summary request.
    pub fn start_compact<'a>(
        &'a mut self,
        history: &'a mut History,
        request: &str,
        focus: Option<&str>,
    ) -> Progress<'a, StepReport> {
        let step = start_compact_history(
            history,
            &self.ctx(),
            self.cache.as_ref(),
            request,
            focus,
            Trigger::Requested,
        );
        Progress::after_step(self, history, step, Box::new(Compactor::counted))
    }

    /// Recovers from a provider's context-overflow error: keeps the newest
    /// `reactive_keep` messages (never splitting a tool call from its
    /// result), replaces everything before them with one `[Reactive
    /// compact]` summary, and shrinks the kept messages' largest results if
    /// they alone are still above the target (the meter has just been
    /// proven to underestimate).
    pub fn reactive_compact(
        &mut self,
        history: &mut History,
        request: &str,
        summarizer: &mut dyn Summarizer,
    ) -> StepReport {
        self.start_reactive_compact(history, request)
            .finish_with(summarizer)
    }

    /// [`Compactor::reactive_compact`], stopping at its summary request.
    pub fn start_reactive_compact<'a>(
        &'a mut self,
        history: &'a mut History,
        request: &str,
    ) -> Progress<'a, StepReport> {
        let step = start_reactive_compact(history, &self.ctx(), request);
        Progress::after_step(self, history, step, Box::new(Compactor::counted))
    }
}
