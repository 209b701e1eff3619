//! The summary handshake. The pipeline never calls a model: an entry point
//! of the [`Compactor`] runs until it finishes or needs a summary, and then
//! hands the caller a [`SummaryNeeded`]. The caller makes the summary however
//! it likes (awaiting a provider, calling a function) and resumes the step
//! with the answer. So the library needs no async runtime and can be
//! embedded in any harness; callers that can block use
//! [`Progress::finish_with`] and a [`Summarizer`].

use super::Compactor;
use super::report::{Step, StepReport};
use super::summary::{PendingSummary, StepProgress};
use crate::history::History;
use crate::summarize::{SummarizeError, Summarizer, SummaryInput};
use std::fmt;

/// Where a compaction entry point stands: finished with its result `T`, or
/// stopped at a summary request.
#[must_use = "a step waiting for a summary has not finished; resume it, with Err(SummarizeError::Cancelled) to give up"]
pub enum Progress<'a, T> {
    /// Finished.
    Done(T),
    /// Waiting for a summary: answer it with [`SummaryNeeded::resume`].
    NeedsSummary(SummaryNeeded<'a, T>),
}

/// A compaction step stopped at its summary request.
///
/// It holds the compactor and the history until it is resumed, so neither
/// can change under the step; [`resume`](SummaryNeeded::resume) takes it by
/// value, so it is answered once, and only with a summary or the reason
/// there is none.
///
/// To give up (the person cancelled), resume it with
/// [`SummarizeError::Cancelled`]: the entry point then finishes, leaves the
/// summarized messages as they were, and reports everything it did.
/// Dropping it instead also leaves them as they were, but loses the reports
/// of the steps that ran before it (prepare's tidy steps), whose edits stay.
pub struct SummaryNeeded<'a, T> {
    compactor: &'a mut Compactor,
    history: &'a mut History,
    /// Boxed, so a finished `Progress` is not the size of a waiting one.
    pending: Box<PendingSummary>,
    then: Then<T>,
}

/// What the entry point does with the summarizing step's report: prepare
/// goes on tidying and counting; compact and reactive_compact return it.
/// It owns what it carries (no borrow), so dropping an unfinished step ends
/// the borrow of the history at once.
type Then<T> = Box<dyn FnOnce(&mut Compactor, &mut History, StepReport) -> T + Send>;

impl<'a, T> Progress<'a, T> {
    /// Continues an entry point after its summarizing step started.
    pub(super) fn after_step(
        compactor: &'a mut Compactor,
        history: &'a mut History,
        step: StepProgress,
        then: Then<T>,
    ) -> Self {
        match step {
            StepProgress::Done(report) => Progress::Done(then(compactor, history, report)),
            StepProgress::Waiting(pending) => Progress::NeedsSummary(SummaryNeeded {
                compactor,
                history,
                pending: Box::new(pending),
                then,
            }),
        }
    }

    /// Answers every summary request with `summarizer`, blocking, until the
    /// entry point finishes: the convenience for callers that can block
    /// (replay, tests).
    pub fn finish_with(self, summarizer: &mut dyn Summarizer) -> T {
        let mut progress = self;
        loop {
            match progress {
                Progress::Done(result) => return result,
                Progress::NeedsSummary(needed) => {
                    let answer = summarizer.summarize(
                        needed.input(),
                        needed.focus(),
                        needed.ledger(),
                        needed.max_chars(),
                    );
                    progress = needed.resume(answer);
                }
            }
        }
    }
}

impl<'a, T> SummaryNeeded<'a, T> {
    /// The step that waits (compact_history or reactive_compact).
    pub fn step(&self) -> Step {
        self.pending.step()
    }

    /// What to summarize.
    pub fn input(&self) -> SummaryInput<'_> {
        self.pending.input(self.history)
    }

    /// What the summary should pay particular attention to (`/compact FOCUS`).
    pub fn focus(&self) -> Option<&str> {
        self.pending.focus()
    }

    /// The ledger of the messages being summarized, rendered: the replacement
    /// carries it next to the summary, so a summarizer is given it (see
    /// [`summary_instruction`](crate::prompts::summary_instruction)) to not repeat it.
    /// When the input shows the history's earlier compaction markers whole,
    /// only the facts those do not carry yet: the summarizer reads the rest
    /// in the input.
    pub fn ledger(&self) -> &str {
        self.pending.ledger(self.history)
    }

    /// How long the summary may be, in characters: see
    /// [`SUMMARY_CHARS`](crate::SUMMARY_CHARS). A summarizer says it in its
    /// request ([`summary_instruction`](crate::prompts::summary_instruction))
    /// and bounds the answer by it; a longer answer is still taken.
    pub fn max_chars(&self) -> usize {
        self.pending.max_chars()
    }

    /// Finishes the step with the summarizer's answer, and the entry point
    /// with it, unless the answer was [`SummarizeError::InputTooLong`]: then
    /// the step asks once more with less input.
    pub fn resume(self, answer: Result<String, SummarizeError>) -> Progress<'a, T> {
        let SummaryNeeded {
            compactor,
            history,
            pending,
            then,
        } = self;
        let step = (*pending).resume(history, &compactor.ctx(), answer);
        Progress::after_step(compactor, history, step, then)
    }
}

impl<T: fmt::Debug> fmt::Debug for Progress<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Progress::Done(result) => f.debug_tuple("Done").field(result).finish(),
            Progress::NeedsSummary(needed) => f.debug_tuple("NeedsSummary").field(needed).finish(),
        }
    }
}

impl<T> fmt::Debug for SummaryNeeded<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SummaryNeeded")
            .field("step", &self.step())
            .field("input_chars", &self.input().chars())
            .field("focus", &self.focus())
            .finish_non_exhaustive()
    }
}
