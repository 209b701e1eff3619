//! The steps that call the summarizer: last resort, and recovery from overflow.

use super::tidy::fit_results_to;
use super::{Ctx, Outcome, Step, StepReport, Trigger};
use crate::history::History;
use crate::markers::{COMPACTED_HEADER, REACTIVE_HEADER, compacted_message};
use crate::message::Message;
use crate::pairs::safe_cut_at_or_before;
use crate::summarize::{SummarizeError, Summarizer, SummaryInput, bounded_transcript};
use std::path::PathBuf;

/// Step 4. Writes the whole history to a transcript, asks for a factual
/// summary of a bounded rendering of it (retrying once with half the input
/// if the summarizer says it is too long), and replaces the history with one
/// `[Compacted]` message carrying the current request, the summary as
/// reference data, and the transcript's path. Not applied if that message
/// would not be smaller than the history.
pub fn compact_history(
    history: &mut History,
    cx: &Ctx,
    request: &str,
    summarizer: &mut dyn Summarizer,
    focus: Option<&str>,
    trigger: Trigger,
) -> StepReport {
    let mut report = StepReport::new(
        Step::CompactHistory,
        trigger,
        cx.measure(history),
        cx.meter.unit(),
    );
    if history.is_empty() {
        report.outcome = Outcome::NotApplied("the history is empty".into());
        return report;
    }
    let in_place = cx.measure(history) <= cx.limits.summarize_in_place_up_to;
    let Some((summary, transcript)) = summarize_into(
        history.messages(),
        in_place,
        cx,
        summarizer,
        focus,
        &mut report,
    ) else {
        return report;
    };
    let replacement = compacted_message(COMPACTED_HEADER, request, &summary, &transcript);
    if replacement.chars() >= history.chars() {
        report.outcome = Outcome::NotApplied("the summary is not smaller than the history".into());
        return report;
    }
    report.changed = history.len();
    history.replace_all(vec![replacement]);
    report.outcome = Outcome::Applied;
    report.after = cx.measure(history);
    report
}

/// After the provider rejected a request as too long: writes the transcript,
/// keeps the newest `reactive_keep` messages (moved back so no pair is split),
/// and replaces everything before them with one `[Reactive compact]` summary
/// message. If the kept messages alone are still above the target, their
/// largest results become persisted previews too, since the meter has just
/// been proven to underestimate.
pub fn reactive_compact(
    history: &mut History,
    cx: &Ctx,
    request: &str,
    summarizer: &mut dyn Summarizer,
) -> StepReport {
    let mut report = StepReport::new(
        Step::ReactiveCompact,
        Trigger::Overflow,
        cx.measure(history),
        cx.meter.unit(),
    );
    let messages = history.messages();
    let tail_start = safe_cut_at_or_before(
        messages,
        messages.len().saturating_sub(cx.limits.reactive_keep),
    );
    if tail_start > 0 {
        let Some((summary, transcript)) = summarize_into(
            &messages[..tail_start],
            false,
            cx,
            summarizer,
            None,
            &mut report,
        ) else {
            return report;
        };
        let replacement = compacted_message(REACTIVE_HEADER, request, &summary, &transcript);
        let replaced: usize = messages[..tail_start].iter().map(Message::chars).sum();
        // Never grow the context: a summary longer than what it replaces is dropped.
        if replacement.chars() < replaced {
            history.splice(0..tail_start, vec![replacement]);
            report.changed = tail_start;
            report.outcome = Outcome::Applied;
        } else {
            report.outcome =
                Outcome::NotApplied("the summary is not smaller than what it replaces".into());
        }
    }
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
    if report.outcome != Outcome::Applied && matches!(report.outcome, Outcome::NotApplied(_)) {
        report.outcome = Outcome::NotApplied("nothing left to summarize or shrink".into());
    }
    report.after = cx.measure(history);
    report
}

/// Writes the transcript of `messages` and summarizes them: in place when
/// `in_place`, else from a bounded transcript; "input too long" falls back
/// from in place to the transcript, or halves the transcript, once. Returns
/// the trimmed summary and the transcript's path; on failure records it in
/// `report` and returns `None`.
fn summarize_into(
    messages: &[Message],
    in_place: bool,
    cx: &Ctx,
    summarizer: &mut dyn Summarizer,
    focus: Option<&str>,
    report: &mut StepReport,
) -> Option<(String, PathBuf)> {
    let transcript = match cx.store.write_transcript(messages) {
        Ok(p) => p,
        Err(e) => {
            report.outcome = Outcome::Failed(e.to_string());
            return None;
        }
    };
    report.paths.push(transcript.clone());
    let mut window = cx.limits.summary_input_chars;
    let mut in_place = in_place;
    let mut retried = false;
    let summary = loop {
        let result = if in_place {
            summarizer.summarize(SummaryInput::Continuation(messages), focus)
        } else {
            let text = bounded_transcript(messages, window);
            summarizer.summarize(SummaryInput::Transcript(&text), focus)
        };
        match result {
            Ok(s) => break s,
            Err(SummarizeError::InputTooLong) if !retried => {
                retried = true;
                if in_place {
                    in_place = false;
                } else {
                    window /= 2;
                }
            }
            Err(e) => {
                report.outcome = Outcome::Failed(e.to_string());
                return None;
            }
        }
    };
    Some((summary.trim().to_string(), transcript))
}
