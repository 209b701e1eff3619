//! What a step did: which step, why it ran, how the size changed, what it
//! wrote, and whether it changed the history. The session log, the one dim
//! line the user sees and replay's tables are all made from these.

use crate::meter::Unit;
use crate::summarize::SummarizeError;
use crate::{abbreviate_count, collapse_whitespace};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use whittle_store::StoreError;

/// A pipeline step, named as in the seed so logs and reports line up with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
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

/// Why a step ran: the same step means different things when the user asked
/// for it and when the context overflowed, and the log keeps them apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
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
    /// The provider's cache had expired (idle past its TTL): rewriting the
    /// prefix cost nothing extra (see `CacheState`).
    CacheCold,
    /// The cache model said the rewrite saves more over the expected rest
    /// of the session than it costs (see `CacheState`).
    RewritePays,
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
            Trigger::CacheCold => "cache_cold",
            Trigger::RewritePays => "rewrite_pays",
        }
    }
}

/// Whether a step changed the history, and if not, why not.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// The history was changed.
    Applied,
    /// The step would not have helped (e.g. would not shrink the history), so
    /// the history was left as it was.
    NotApplied(String),
    /// Writing to the store or summarizing failed; the history was left as it was.
    Failed(StepError),
}

/// Why a step failed. Every failure leaves the history as it was, so the
/// caller only has to report it.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StepError {
    /// Saving what would leave the context failed, so nothing left it.
    /// Shared, because a report is cloned into events and logs and an I/O
    /// error cannot be copied.
    #[error(transparent)]
    Store(Arc<StoreError>),
    /// The summarizer could not make a summary.
    #[error(transparent)]
    Summarize(#[from] SummarizeError),
}

impl From<StoreError> for StepError {
    fn from(e: StoreError) -> Self {
        StepError::Store(Arc::new(e))
    }
}

/// Reports are compared (tests, replay), and an I/O error has no equality:
/// two failures are the same when they say the same thing.
impl PartialEq for StepError {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (StepError::Store(a), StepError::Store(b)) => {
                Arc::ptr_eq(a, b) || a.to_string() == b.to_string()
            }
            (StepError::Summarize(a), StepError::Summarize(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for StepError {}

impl Outcome {
    /// The outcome's name in JSON output (`applied`, `not_applied`, `failed`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Outcome::Applied => "applied",
            Outcome::NotApplied(_) => "not_applied",
            Outcome::Failed(_) => "failed",
        }
    }

    /// Why the history was left as it was; `None` when it was changed.
    pub fn reason(&self) -> Option<String> {
        match self {
            Outcome::Applied => None,
            Outcome::NotApplied(why) => Some(why.clone()),
            Outcome::Failed(e) => Some(e.to_string()),
        }
    }
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
    /// The meter's unit, since sizes in tokens and in characters differ tenfold.
    pub unit: Unit,
    /// How many results or messages it changed.
    pub changed: usize,
    /// Files it wrote (persisted outputs, transcripts): where to read back
    /// what left the context.
    pub paths: Vec<PathBuf>,
    /// Whether it changed the history.
    pub outcome: Outcome,
}

impl StepReport {
    pub(super) fn new(step: Step, trigger: Trigger, before: u64, unit: Unit) -> Self {
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

impl StepReport {
    /// The report on one line, for people: `212k -> 9k tokens (micro_compact,
    /// 4 changed), saved: PATH`. Paths inside `base` are shown relative to it,
    /// so the line stays short in a terminal.
    pub fn describe(&self, base: Option<&Path>) -> String {
        let show = |p: &Path| match base.and_then(|b| p.strip_prefix(b).ok()) {
            Some(relative) => relative.display().to_string(),
            None => p.display().to_string(),
        };
        let mut line = format!(
            "{} -> {} {} ({}",
            abbreviate_count(self.before),
            abbreviate_count(self.after),
            self.unit.as_str(),
            self.step.as_str()
        );
        if self.changed > 0 {
            line.push_str(&format!(", {} changed", self.changed));
        }
        line.push(')');
        match &self.outcome {
            Outcome::Applied => {}
            Outcome::NotApplied(why) if why.is_empty() => line.push_str(", not applied"),
            Outcome::NotApplied(why) => {
                line.push_str(&format!(", not applied: {}", collapse_whitespace(why)));
            }
            Outcome::Failed(e) => {
                line.push_str(&format!(
                    ", failed: {}",
                    collapse_whitespace(&e.to_string())
                ));
            }
        }
        if let Some(t) = self.transcript() {
            line.push_str(&format!(", transcript: {}", show(t)));
        } else if let Some(p) = self.paths.first() {
            line.push_str(&format!(", saved: {}", show(p)));
            if self.paths.len() > 1 {
                line.push_str(&format!(" (+{} more)", self.paths.len() - 1));
            }
        }
        line
    }
}

impl fmt::Display for StepReport {
    /// [`StepReport::describe`] with paths as they are.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe(None))
    }
}
