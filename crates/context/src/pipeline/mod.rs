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

mod compactor;
mod progress;
mod report;
mod summary;
mod tidy;

pub use compactor::{Compactor, PrepareOutcome};
pub use progress::{Progress, SummaryNeeded};
pub use report::{Outcome, Step, StepError, StepReport, Trigger};
pub use tidy::{
    cache_anchor, fit_tool_results, micro_compact, snip_compact, tidy_floor, tool_result_budget,
};

use crate::history::History;
use crate::limits::Limits;
use crate::meter::Meter;
use crate::store::Store;

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
}
