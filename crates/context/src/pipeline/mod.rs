//! The compaction pipeline: lossless before lossy, zero-cost before model calls.
//!
//! ```text
//! tool_result_budget -> snip_compact -> micro_compact -> fit_tool_results -> compact_history
//! ```
//!
//! Each step is a function on a [`History`] that returns `None` when its
//! trigger does not hold and a [`StepReport`] when it does. No step loses
//! data: whatever leaves the context is first written to the [`Store`] (a
//! persisted file or a transcript), and an I/O failure leaves the history as
//! it was. [`Compactor::prepare`] runs the steps in their fixed order before
//! every model call.

mod summary;
mod tidy;

pub use summary::{compact_history, reactive_compact};
pub use tidy::{
    cache_anchor, fit_tool_results, micro_compact, snip_compact, tidy_floor, tool_result_budget,
};

use crate::history::History;
use crate::limits::Limits;
use crate::meter::{Meter, Unit};
use crate::store::Store;
use crate::summarize::Summarizer;
use std::fmt;
use std::path::PathBuf;

/// A pipeline step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// Persist the largest results of the newest batch.
    ToolResultBudget,
    /// Archive the old middle of a long history.
    SnipCompact,
    /// Replace old, already-seen results with saved placeholders.
    MicroCompact,
    /// Squeeze the largest results into short persisted previews.
    FitToolResults,
    /// Summarize the whole history into one message.
    CompactHistory,
    /// Summarize all but the newest messages after an overflow error.
    ReactiveCompact,
}

impl Step {
    /// The step's name as in the seed (`snip_compact`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Step::ToolResultBudget => "tool_result_budget",
            Step::SnipCompact => "snip_compact",
            Step::MicroCompact => "micro_compact",
            Step::FitToolResults => "fit_tool_results",
            Step::CompactHistory => "compact_history",
            Step::ReactiveCompact => "reactive_compact",
        }
    }
}

/// Why a step ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// The newest batch of results exceeded the batch budget.
    BatchOverBudget,
    /// The history had more messages than allowed.
    TooManyMessages,
    /// The context measured above the limit.
    OverLimit,
    /// The model (compact tool) or the user (/compact) asked.
    Requested,
    /// The provider rejected the request as too long.
    Overflow,
}

impl Trigger {
    /// The trigger's name in session logs (`over_limit`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::BatchOverBudget => "batch_over_budget",
            Trigger::TooManyMessages => "too_many_messages",
            Trigger::OverLimit => "over_limit",
            Trigger::Requested => "requested",
            Trigger::Overflow => "overflow",
        }
    }
}

/// What a step did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The history was changed.
    Applied,
    /// The step would not have helped (e.g. would not shrink the history), so
    /// the history was left as it was.
    NotApplied(String),
    /// Writing to the store or summarizing failed; the history was left as it was.
    Failed(String),
}

/// What one step did, for the session log and the one dim line the user sees.
#[derive(Clone, Debug, PartialEq)]
pub struct StepReport {
    /// Which step.
    pub step: Step,
    /// Why it ran.
    pub trigger: Trigger,
    /// Size before, in `unit`.
    pub before: u64,
    /// Size after, in `unit`.
    pub after: u64,
    /// The meter's unit.
    pub unit: Unit,
    /// How many results or messages it changed.
    pub changed: usize,
    /// Files it wrote (persisted outputs, transcripts).
    pub paths: Vec<PathBuf>,
    /// Whether it changed the history.
    pub outcome: Outcome,
}

impl StepReport {
    fn new(step: Step, trigger: Trigger, before: u64, unit: Unit) -> Self {
        StepReport {
            step,
            trigger,
            before,
            after: before,
            unit,
            changed: 0,
            paths: Vec::new(),
            outcome: Outcome::NotApplied(String::new()),
        }
    }

    /// Whether the history was changed.
    pub fn applied(&self) -> bool {
        self.outcome == Outcome::Applied
    }

    /// The transcript it wrote, if any.
    pub fn transcript(&self) -> Option<&PathBuf> {
        self.paths
            .iter()
            .find(|p| p.extension().is_some_and(|e| e == "jsonl"))
    }
}

impl fmt::Display for StepReport {
    /// One line: `[micro_compact] 212k -> 9k tokens (4 results), saved: PATH`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[{}] {} -> {} {}",
            self.step.as_str(),
            human(self.before),
            human(self.after),
            self.unit.as_str()
        )?;
        if self.changed > 0 {
            write!(f, " ({} changed)", self.changed)?;
        }
        match &self.outcome {
            Outcome::Applied => {}
            Outcome::NotApplied(why) => write!(f, ", not applied: {why}")?,
            Outcome::Failed(why) => write!(f, ", failed: {why}")?,
        }
        if let Some(t) = self.transcript() {
            write!(f, ", transcript: {}", t.display())?;
        } else if let Some(p) = self.paths.first() {
            write!(f, ", saved: {}", p.display())?;
            if self.paths.len() > 1 {
                write!(f, " (+{} more)", self.paths.len() - 1)?;
            }
        }
        Ok(())
    }
}

/// `212345` -> `212k`, `1234567` -> `1.2M`.
pub fn human(n: u64) -> String {
    match n {
        0..=9_999 => n.to_string(),
        10_000..=999_999 => format!("{}k", n / 1000),
        _ => format!("{:.1}M", n as f64 / 1_000_000.0),
    }
}

/// What the steps need besides the history.
pub struct Ctx<'a> {
    /// The thresholds.
    pub limits: &'a Limits,
    /// Where removed content is saved.
    pub store: &'a Store,
    /// How size is measured.
    pub meter: &'a dyn Meter,
}

impl Ctx<'_> {
    fn measure(&self, history: &History) -> u64 {
        self.meter.measure(history)
    }
}

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
}

impl Compactor {
    /// A compactor with the given parts.
    pub fn new(limits: Limits, store: Store, meter: Box<dyn Meter + Send>) -> Self {
        Compactor {
            limits,
            store,
            meter,
            consecutive_over_limit: 0,
        }
    }

    /// The thresholds.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The meter.
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

    fn ctx(&self) -> Ctx<'_> {
        Ctx {
            limits: &self.limits,
            store: &self.store,
            meter: self.meter.as_ref(),
        }
    }

    /// Runs every step in the fixed order, each only if its trigger holds,
    /// and summarizes only if the context is still over the limit after the
    /// first four. When [`tidy_floor`] shows that micro_compact and
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
        let cx = self.ctx();
        let before = cx.measure(history);
        let mut reports = Vec::new();
        reports.extend(tool_result_budget(history, &cx));
        reports.extend(snip_compact(history, &cx));
        let limit = cx.limits.context_limit;
        // When replacing results cannot reach the limit, summarize the history
        // as it is: the summarizer sees every result, and the provider's
        // cached prefix (the previous request) still matches it.
        let summarize_first = cx.measure(history) > limit && tidy_floor(history, &cx) > limit;
        if !summarize_first {
            reports.extend(micro_compact(history, &cx));
            reports.extend(fit_tool_results(history, &cx));
        }
        if cx.measure(history) > limit {
            let report =
                compact_history(history, &cx, request, summarizer, None, Trigger::OverLimit);
            let applied = report.applied();
            reports.push(report);
            if !applied && summarize_first {
                // The summary failed: tidy as far as possible after all.
                reports.extend(micro_compact(history, &cx));
                reports.extend(fit_tool_results(history, &cx));
            }
        }
        let after = cx.measure(history);
        let over_limit = after > self.limits.context_limit;
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

    /// Where to put the extra cache breakpoint for the next request; see [`cache_anchor`].
    pub fn cache_anchor(&self, history: &History) -> Option<usize> {
        cache_anchor(history, &self.ctx())
    }

    /// Summarizes now, whatever the size: the `compact` tool and `/compact`.
    pub fn compact(
        &mut self,
        history: &mut History,
        request: &str,
        summarizer: &mut dyn Summarizer,
        focus: Option<&str>,
    ) -> StepReport {
        compact_history(
            history,
            &self.ctx(),
            request,
            summarizer,
            focus,
            Trigger::Requested,
        )
    }

    /// Recovers from a provider's context-overflow error; see [`reactive_compact`].
    pub fn reactive_compact(
        &mut self,
        history: &mut History,
        request: &str,
        summarizer: &mut dyn Summarizer,
    ) -> StepReport {
        reactive_compact(history, &self.ctx(), request, summarizer)
    }
}
