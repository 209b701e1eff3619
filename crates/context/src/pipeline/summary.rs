//! The steps that need a summary: compact_history (the last resort, or when
//! asked) and reactive_compact (recovery from an overflow).
//!
//! Each is cut where the summary is needed, so that no model is called from
//! here: `start_*` does the work before the summary (measure, write the
//! transcript, choose the input) and either finishes or returns a
//! [`PendingSummary`]; [`PendingSummary::resume`] takes the summarizer's
//! answer and finishes the step, or asks once more with less input.

use super::Ctx;
use super::cache_model::CacheState;
use super::report::{Outcome, Step, StepReport, Trigger};
use super::summary_cost::{SummaryAsk, summary_input};
use super::tidy::{archive_through, fit_results_to};
use crate::history::History;
use crate::ledger::ledger_section;
use crate::markers::{
    COMPACTED_HEADER, REACTIVE_HEADER, compacted_chars_with, compacted_chars_with_json,
    compacted_message, path_text,
};
use crate::pairs::safe_cut_at_or_before;
use crate::summarize::{
    CONTINUATION_INSTRUCTION, SummarizeError, SummaryInput, bounded_transcript, summary_instruction,
};
use crate::{Content, Message, Role};
use memchr::memmem;
use std::path::PathBuf;

/// How far a summarizing step got.
pub(super) enum StepProgress {
    /// The step is over (applied, not applied, or failed).
    Done(StepReport),
    /// The step waits for a summary.
    Waiting(PendingSummary),
}

/// A summarizing step stopped at its summary request. It holds no borrow
/// of the history: whoever holds it must resume it on the same, unchanged
/// history (see `SummaryNeeded`, which makes sure of that).
pub(super) struct PendingSummary {
    /// What the step does with the summary.
    step: SummaryStep,
    /// The active request, quoted in the replacement message as the only
    /// part that carries instructions.
    request: String,
    /// The summary covers `history.messages()[..end]`.
    end: usize,
    /// What the summary should pay particular attention to.
    focus: Option<String>,
    /// How the messages are given to the summarizer this time.
    input: InputForm,
    /// Whether the one retry after "input too long" has been used.
    retried: bool,
    /// The transcript holding `..end` (and everything archived before),
    /// written before asking, so nothing is lost whatever the summary says.
    transcript: PathBuf,
    /// The ledger of `..end`, rendered: it goes into the replacement next
    /// to the summary, and to the summarizer so the prose need not repeat it.
    ledger: String,
    /// How long the summary may be, in characters (`Ctx::summary_chars`
    /// when the step started).
    max_chars: usize,
    /// The part of the ledger the markers in `..end` do not carry yet. When
    /// the summarizer reads those markers whole in its input, it is given
    /// only this: when compaction runs on every call, the ledger is then not
    /// paid for twice per call.
    new_facts: String,
    report: StepReport,
}

/// What a step does with its summary.
#[derive(Clone, Copy, Debug)]
enum SummaryStep {
    /// Replace the whole history with one `[Compacted]` message.
    CompactHistory,
    /// Replace the messages before the kept tail with one `[Reactive
    /// compact]` message, then shrink the tail's largest results.
    ReactiveCompact,
}

/// How the messages are given to the summarizer.
enum InputForm {
    /// As they are, continued with a summary request: the provider's cache
    /// serves the prefix.
    InPlace,
    /// A plain-text rendering cut to `window` characters, made once.
    Bounded { window: usize, text: String },
}

/// Why no summary runs when the system prompt and tools alone measure
/// above the hard limit.
const OVERHEAD_FILLS_WINDOW: &str =
    "the system prompt and tools alone are larger than the window: no summary can make it fit";

/// Step 4. Writes the whole history to a transcript and asks for a factual
/// summary (in place while the history is small enough, else of a bounded
/// rendering). The summary, once given, replaces the history with one
/// `[Compacted]` message carrying the current request, the summary as
/// reference data, and the transcript's path; not applied if that message
/// would not be smaller than the history.
pub(super) fn start_compact_history(
    history: &mut History,
    cx: &Ctx,
    cache: Option<&CacheState>,
    request: &str,
    focus: Option<&str>,
    trigger: Trigger,
) -> StepProgress {
    let before = cx.measure(history);
    let mut report = StepReport::new(Step::CompactHistory, trigger, before, cx.meter.unit());
    if history.is_empty() {
        report.outcome = Outcome::NotApplied("the history is empty".into());
        return StepProgress::Done(report);
    }
    if cx.overhead_fills_window() {
        report.outcome = Outcome::NotApplied(OVERHEAD_FILLS_WINDOW.into());
        return StepProgress::Done(report);
    }
    let Some(ledger) = summary_can_help(history, cx, request) else {
        report.outcome = Outcome::NotApplied(
            "the conversation is too short for a summary to make it smaller".into(),
        );
        return StepProgress::Done(report);
    };
    let end = history.len();
    PendingSummary::start(
        SummaryStep::CompactHistory,
        report,
        request,
        focus,
        (history, end, Some(ledger)),
        Some(cache),
        cx,
    )
}

/// The ledger of a history's first `end` messages rendered for `place` at
/// `budget`: kept from the check that a summary can help for the step
/// that follows, which would render the same again.
struct RenderedLedger {
    end: usize,
    place: String,
    budget: usize,
    text: String,
}

impl RenderedLedger {
    fn of(history: &mut History, end: usize, place: String, budget: usize) -> RenderedLedger {
        let text = history.rendered_ledger((0..end, Some(&place), true), budget, Some(&place));
        RenderedLedger {
            end,
            place,
            budget,
            text,
        }
    }
}

/// Characters a summary needs to say anything at all.
const MIN_SUMMARY_CHARS: usize = 400;

/// Whether a summary could make the history smaller: the `[Compacted]` message with an
/// empty summary (header, request, transcript line, ledger) plus a few lines must be
/// smaller than the history. When it cannot, nothing is asked and nothing archived: on a
/// small local model the summary alone takes minutes, only to be refused. When it can,
/// the ledger it rendered of the whole history, for the step to use.
fn summary_can_help(history: &mut History, cx: &Ctx, request: &str) -> Option<RenderedLedger> {
    let (floor, ledger) = marker_floor(history, cx, request);
    (floor + MIN_SUMMARY_CHARS < history.chars()).then_some(ledger)
}

/// The size of the `[Compacted]` message that would replace `history` now,
/// with an empty summary: header, request, transcript line and ledger,
/// the ledger as long as its last rendering (see
/// `LedgerMemo::rendered_json_chars_estimate`). The band's cost check asks
/// this on every call while it waits; rendering the ledger was most of
/// such a call (29 of 40 µs at the median of a long session at 32k), and
/// [`render_marker_ledger_ahead`] renders it while the model answers.
pub(super) fn marker_floor_chars_estimate(history: &mut History, cx: &Ctx, request: &str) -> usize {
    let place = cx.store.transcript_path();
    let place = path_text(&place);
    let budget = cx.ledger_chars(history);
    let end = history.len();
    let ledger = history.rendered_ledger_json_chars_estimate(
        (0..end, Some(&place), true),
        budget,
        Some(&place),
    );
    compacted_chars_with_json(marker_without_ledger_chars(cx, request), ledger)
}

/// Renders the ledger a summary of the whole history would carry, as
/// [`marker_floor`] does, so that the next call's cost check finds its
/// length (work ahead, while the model answers).
pub(super) fn render_marker_ledger_ahead(history: &mut History, cx: &Ctx) {
    let place = cx.store.transcript_path();
    let budget = cx.ledger_chars(history);
    let end = history.len();
    RenderedLedger::of(history, end, path_text(&place).into_owned(), budget);
}

/// The size of the `[Compacted]` message that would replace a history
/// now with an empty summary and no ledger: never more than
/// [`marker_floor_chars`] (the ledger is appended), and known without
/// rendering the ledger.
pub(super) fn marker_without_ledger_chars(cx: &Ctx, request: &str) -> usize {
    let place = cx.store.transcript_path();
    compacted_message(COMPACTED_HEADER, request, "", &place, "").chars()
}

/// [`marker_floor_chars`], with the ledger rendered for it.
fn marker_floor(history: &mut History, cx: &Ctx, request: &str) -> (usize, RenderedLedger) {
    let place = cx.store.transcript_path();
    let budget = cx.ledger_chars(history);
    let end = history.len();
    let ledger = RenderedLedger::of(history, end, path_text(&place).into_owned(), budget);
    let without = marker_without_ledger_chars(cx, request);
    (compacted_chars_with(without, &ledger.text), ledger)
}

/// After the provider rejected a request as too long: writes the transcript,
/// keeps the newest `reactive_keep` messages (moved back so no pair is
/// split), and asks for a summary of everything before them, which then
/// replaces them as one `[Reactive compact]` message. If the kept messages
/// alone are still above the target, their largest results become persisted
/// previews too, since the meter has just been proven to underestimate.
pub(super) fn start_reactive_compact(
    history: &mut History,
    cx: &Ctx,
    request: &str,
) -> StepProgress {
    let report = StepReport::new(
        Step::ReactiveCompact,
        Trigger::Overflow,
        cx.measure(history),
        cx.meter.unit(),
    );
    if cx.overhead_fills_window() {
        let mut report = report;
        report.outcome = Outcome::NotApplied(OVERHEAD_FILLS_WINDOW.into());
        return StepProgress::Done(report);
    }
    let messages = history.messages();
    let tail_start = safe_cut_at_or_before(
        messages,
        messages.len().saturating_sub(cx.limits.reactive_keep),
    );
    if tail_start > 0 {
        return PendingSummary::start(
            SummaryStep::ReactiveCompact,
            report,
            request,
            None,
            (history, tail_start, None),
            None,
            cx,
        );
    }
    StepProgress::Done(shrink_kept_tail(history, cx, report))
}

impl PendingSummary {
    /// Appends the history's first `end` messages to the transcript (those
    /// not there yet) and prepares the first summary input; a failed write
    /// ends the step, leaving the history as it was. `rendered` is the
    /// ledger if already rendered. `in_place` is `None` when the input is
    /// a bounded transcript whatever the sizes (the provider has just
    /// refused the history as too long), else the cache state the choice
    /// is priced by, if any (see `summary_input`).
    fn start(
        step: SummaryStep,
        mut report: StepReport,
        request: &str,
        focus: Option<&str>,
        (history, end, rendered): (&mut History, usize, Option<RenderedLedger>),
        in_place: Option<Option<&CacheState>>,
        cx: &Ctx,
    ) -> StepProgress {
        let transcript = match archive_through(history, cx, end) {
            Ok(span) => span.path,
            Err(e) => {
                report.outcome = Outcome::Failed(e.into());
                return StepProgress::Done(report);
            }
        };
        report.paths.push(transcript.clone());
        let place = path_text(&transcript).into_owned();
        let budget = cx.ledger_chars(history);
        let ledger = match rendered {
            Some(r) if r.end == end && r.place == place && r.budget == budget => r,
            _ => RenderedLedger::of(history, end, place.clone(), budget),
        }
        .text;
        // Without a marker's ledger in the messages, the facts not in one
        // yet are all of them: the same text.
        let new_facts = if history.messages()[..end].iter().any(carries_ledger) {
            history.rendered_ledger((0..end, Some(&place), false), budget, Some(&place))
        } else {
            ledger.clone()
        };
        let max_chars = cx.summary_chars(history);
        let messages = &history.messages()[..end];
        // In place when the history, the ask appended to it and room for
        // the answer fit the window, and (priced) it costs no more. A
        // history too big already is not measured with its ask.
        let in_place = in_place.is_some_and(|cache| {
            if cx.measure(history) > cx.limits.summarize_in_place_up_to {
                return false;
            }
            let ask = summary_instruction(CONTINUATION_INSTRUCTION, focus, &new_facts, max_chars);
            let ask = SummaryAsk::of(history, cx, Some(Message::user(ask).chars()));
            match cache {
                Some(cache) => summary_input(cx, cache, &ask).0,
                None => ask.fits(cx),
            }
        });
        let input = if in_place {
            InputForm::InPlace
        } else {
            let window = cx.limits.summary_input_chars;
            InputForm::Bounded {
                window,
                text: bounded_transcript(messages, window),
            }
        };
        StepProgress::Waiting(PendingSummary {
            step,
            max_chars,
            request: request.to_string(),
            end: messages.len(),
            focus: focus.map(str::to_string),
            input,
            retried: false,
            transcript,
            ledger,
            new_facts,
            report,
        })
    }

    /// Which step waits.
    pub(super) fn step(&self) -> Step {
        self.report.step
    }

    /// What to summarize, from `history` (the one the step started on).
    pub(super) fn input<'h>(&'h self, history: &'h History) -> SummaryInput<'h> {
        match &self.input {
            InputForm::InPlace => SummaryInput::Continuation(&history.messages()[..self.end]),
            InputForm::Bounded { text, .. } => SummaryInput::Transcript(text),
        }
    }

    /// What the summary should pay particular attention to.
    pub(super) fn focus(&self) -> Option<&str> {
        self.focus.as_deref()
    }

    /// How long the summary may be, in characters.
    pub(super) fn max_chars(&self) -> usize {
        self.max_chars
    }

    /// The ledger to give the summarizer: the part not in its input yet
    /// when the input shows every marker's ledger whole (always in place),
    /// else the one the replacement will carry.
    pub(super) fn ledger(&self, history: &History) -> &str {
        let shown = match &self.input {
            InputForm::InPlace => true,
            InputForm::Bounded { text, .. } => history.messages()[..self.end]
                .iter()
                .filter_map(|m| match m.content() {
                    Content::Text(t) => ledger_section(t),
                    Content::Blocks(_) => None,
                })
                .all(|section| contains_long(text, section)),
        };
        if shown { &self.new_facts } else { &self.ledger }
    }

    /// Finishes the step with the summarizer's answer. "Input too long" is
    /// answered once by asking again with less: in place falls back to the
    /// bounded rendering, a bounded rendering is halved. Any other failure
    /// ends the step with the history as it was.
    pub(super) fn resume(
        mut self,
        history: &mut History,
        cx: &Ctx,
        answer: Result<String, SummarizeError>,
    ) -> StepProgress {
        match answer {
            Ok(summary) => StepProgress::Done(self.apply(history, cx, summary.trim())),
            Err(SummarizeError::InputTooLong) if !self.retried => {
                self.retried = true;
                let window = match self.input {
                    InputForm::InPlace => cx.limits.summary_input_chars,
                    InputForm::Bounded { window, .. } => window / 2,
                };
                self.input = InputForm::Bounded {
                    window,
                    text: bounded_transcript(&history.messages()[..self.end], window),
                };
                StepProgress::Waiting(self)
            }
            Err(e) => {
                self.report.outcome = Outcome::Failed(e.into());
                StepProgress::Done(self.report)
            }
        }
    }

    /// Puts the summary in place of what it covers, unless that would not
    /// shrink the context.
    fn apply(self, history: &mut History, cx: &Ctx, summary: &str) -> StepReport {
        let PendingSummary {
            step,
            request,
            end,
            transcript,
            ledger,
            mut report,
            ..
        } = self;
        match step {
            SummaryStep::CompactHistory => {
                let replacement =
                    compacted_message(COMPACTED_HEADER, &request, summary, &transcript, &ledger);
                if replacement.chars() >= history.chars() {
                    report.outcome =
                        Outcome::NotApplied("the summary is not smaller than the history".into());
                    return report;
                }
                report.changed = history.len();
                history.replace_all(vec![replacement]);
                report.outcome = Outcome::Applied;
                report.after = cx.measure(history);
                report
            }
            SummaryStep::ReactiveCompact => {
                let replacement =
                    compacted_message(REACTIVE_HEADER, &request, summary, &transcript, &ledger);
                let replaced: usize = history.messages()[..end].iter().map(Message::chars).sum();
                // Never grow the context: a summary longer than what it replaces is dropped.
                if replacement.chars() < replaced {
                    history.splice(0..end, vec![replacement]);
                    report.changed = end;
                    report.outcome = Outcome::Applied;
                } else {
                    report.outcome = Outcome::NotApplied(
                        "the summary is not smaller than what it replaces".into(),
                    );
                }
                shrink_kept_tail(history, cx, report)
            }
        }
    }
}

/// Bytes of a long needle [`contains_long`] searches for first.
const NEEDLE_HEAD: usize = 64;

/// `text.contains(needle)`, for a needle of a few thousand bytes (a
/// marker's ledger) in a text of tens of thousands (a bounded transcript):
/// the standard search prepares the whole needle first, which on every
/// summary cost more than the search itself. This one searches for the
/// needle's head and compares the rest where the head is found (every
/// place, overlapping ones included).
fn contains_long(text: &str, needle: &str) -> bool {
    if needle.len() <= NEEDLE_HEAD {
        return memmem::find(text.as_bytes(), needle.as_bytes()).is_some();
    }
    let cut = (1..=NEEDLE_HEAD)
        .rev()
        .find(|&i| needle.is_char_boundary(i))
        .unwrap_or(needle.len());
    let head = &needle[..cut];
    let mut from = 0;
    // A byte match of a whole UTF-8 string starts on a char boundary.
    let finder = memmem::Finder::new(head.as_bytes());
    while let Some(found) = text
        .as_bytes()
        .get(from..)
        .and_then(|rest| finder.find(rest))
    {
        let at = from + found;
        if text[at..].starts_with(needle) {
            return true;
        }
        // The next place a match could start: after this one's first char.
        from = at + text[at..].chars().next().map_or(1, char::len_utf8);
    }
    false
}

/// Whether `m` is a compaction marker with a ledger, as the ledger's
/// recorder reads one back: a user message without tool results.
fn carries_ledger(m: &Message) -> bool {
    if m.role() != Role::User || m.has_tool_result() {
        return false;
    }
    match m.content() {
        Content::Text(t) => ledger_section(t).is_some(),
        Content::Blocks(_) => ledger_section(&m.text()).is_some(),
    }
}

/// The end of reactive_compact: whatever the summary did, the largest
/// results still in the history become persisted previews until it is at
/// the target.
fn shrink_kept_tail(history: &mut History, cx: &Ctx, mut report: StepReport) -> StepReport {
    if let Some(fit) = fit_results_to(
        history,
        cx,
        cx.limits.target,
        Step::ReactiveCompact,
        Trigger::Overflow,
    ) {
        report.changed += fit.changed;
        report.paths.extend(fit.paths);
        if fit.outcome == Outcome::Applied {
            report.outcome = Outcome::Applied;
        }
    }
    if matches!(report.outcome, Outcome::NotApplied(_)) {
        report.outcome = Outcome::NotApplied("nothing left to summarize or shrink".into());
    }
    report.after = cx.measure(history);
    report
}

#[cfg(test)]
mod tests {
    use super::contains_long;
    use proptest::prelude::*;

    #[test]
    fn a_long_needle_is_found_where_it_overlaps_a_false_start() {
        let needle = format!("{}b", "a".repeat(100));
        assert!(contains_long(&format!("x{}b", "a".repeat(150)), &needle));
        assert!(!contains_long(&"a".repeat(300), &needle));
        let wide = format!("é{}", "ü".repeat(40));
        assert!(contains_long(&format!("ab{wide}cd"), &wide));
        assert!(!contains_long("short", &wide));
    }

    proptest! {
        /// Whatever the needle and the text, the answer is the standard
        /// search's; a small alphabet makes repeats and overlaps common.
        #[test]
        fn a_long_needle_is_found_as_the_standard_search_finds_it(
            needle in "[ab]{60,90}",
            before in "[ab]{0,80}",
            after in "[ab]{0,80}",
            plant in any::<bool>(),
        ) {
            let text = if plant {
                format!("{before}{needle}{after}")
            } else {
                format!("{before}{after}")
            };
            prop_assert_eq!(contains_long(&text, &needle), text.contains(needle.as_str()));
        }
    }
}
