//! The steps that cost no model call: persist, snip, replace, fit.

use super::Ctx;
use super::report::{Outcome, Step, StepError, StepReport, Trigger};
use crate::history::{BlockRef, History};
use crate::markers::{archive_marker, is_archive_marker};
use crate::pairs::{safe_cut_at_or_after, safe_cut_at_or_before};
use crate::{Block, Role, ToolResult};
use std::borrow::Cow;
use std::ops::Range;
use std::path::PathBuf;
use whittle_store::{
    ArchivedSpan, Preview, Store, StoreError, is_saved_placeholder, looks_saved, persisted_output,
    saved_placeholder,
};

/// Step 1. If the newest user message's tool_results together exceed the
/// batch budget, persists the largest ones above the large-result limit,
/// largest first, until the batch fits; and, with `persist_results_above`,
/// every result above that size whatever the batch. Each becomes a
/// persisted-output marker with a preview; results already persisted are
/// left alone. Acting only on the newest message, it never touches what the
/// provider has cached.
pub fn tool_result_budget(history: &mut History, cx: &Ctx) -> Option<StepReport> {
    let last = history.len().checked_sub(1)?;
    let message = history.last()?;
    let budget = cx.limits.batch_budget_chars;
    let any_above = cx.limits.persist_results_above.unwrap_or(usize::MAX);
    // The message's JSON is never shorter than its results' text: a free precheck.
    if message.role() != Role::User || message.chars() <= budget.min(any_above) {
        return None;
    }
    let mut ranked: Vec<(usize, usize)> = message
        .blocks()
        .iter()
        .enumerate()
        .filter_map(|(i, b)| b.as_tool_result().map(|r| (i, r.content_chars())))
        .collect();
    let mut total: usize = ranked.iter().map(|(_, n)| n).sum();
    let largest = ranked.iter().map(|(_, n)| *n).max().unwrap_or(0);
    if total <= budget && largest <= any_above {
        return None;
    }
    ranked.sort_by_key(|r| std::cmp::Reverse(r.1));

    let mut report = StepReport::new(
        Step::ToolResultBudget,
        Trigger::BatchOverBudget,
        cx.measure(history),
        cx.meter.unit(),
    );
    for (block, chars) in ranked {
        let over_budget = total > budget && chars > cx.limits.large_result_chars;
        if !over_budget && chars <= any_above {
            if total <= budget {
                break;
            }
            continue;
        }
        let at = BlockRef {
            message: last,
            block,
        };
        let Some(result) = history.block(at).and_then(Block::as_tool_result) else {
            continue;
        };
        if cx.store.saved_path(result).is_some() {
            continue;
        }
        match persist_preview(history, cx, at, cx.limits.preview_chars) {
            Ok(Some((path, new_chars))) => {
                total = total - chars + new_chars;
                report.paths.push(path);
                report.changed += 1;
            }
            Ok(None) => {}
            Err(e) => report.outcome = Outcome::Failed(e),
        }
    }
    finish(report, history, cx)
}

/// Step 2. Above `max_messages`, keeps the first `snip_keep_head` and the last
/// `snip_keep_tail` messages (cut points moved so no pair is split), and puts
/// an archive marker where the middle was, naming the transcript lines that
/// hold it. Everything up to the cut that is not in the transcript yet is
/// appended first (the head too, the first time, so the transcript reads in
/// order): each snip writes only what it newly archives. A middle that is
/// only an earlier marker is left alone.
pub fn snip_compact(history: &mut History, cx: &Ctx) -> Option<StepReport> {
    let Range {
        start: head_end,
        end: tail_start,
    } = snip_span(history, cx)?;
    let messages = history.messages();
    let mut report = StepReport::new(
        Step::SnipCompact,
        Trigger::TooManyMessages,
        cx.measure(history),
        cx.meter.unit(),
    );
    let removed_chars: usize = messages[head_end..tail_start]
        .iter()
        .map(|m| m.chars())
        .sum();
    // The marker's length is known up to the path; a generous path length decides.
    if removed_chars <= 400 {
        report.outcome = Outcome::NotApplied("the middle is smaller than its marker".into());
        return Some(report);
    }
    let archived_before = history.archived();
    let span = match archive_through(history, cx, tail_start) {
        Ok(span) => span,
        Err(e) => {
            report.outcome = Outcome::Failed(e.into());
            return Some(report);
        }
    };
    // The middle's own lines, when this step wrote all of it (a summary that
    // failed after archiving may have written some of it earlier).
    let count = tail_start - head_end;
    let lines =
        (archived_before <= head_end).then(|| (span.last_line + 1 - count as u64, span.last_line));
    let transcript = crate::markers::path_text(&span.path).into_owned();
    let ledger = snip_ledger(history, cx, head_end..tail_start, &transcript);
    let marker = archive_marker(count, &span.path, lines, &ledger);
    if marker.chars() >= removed_chars {
        report.outcome = Outcome::NotApplied("the middle is smaller than its marker".into());
        return Some(report);
    }
    history.splice(head_end..tail_start, vec![marker]);
    report.paths.push(span.path);
    report.changed = count;
    report.outcome = Outcome::Applied;
    report.after = cx.measure(history);
    Some(report)
}

/// The ledger of the middle `span` a snip marker carries, naming the
/// `transcript` the middle is archived in.
fn snip_ledger(history: &mut History, cx: &Ctx, span: Range<usize>, transcript: &str) -> String {
    let budget = cx.ledger_chars(history);
    history.rendered_ledger((span, Some(transcript), true), budget, Some(transcript))
}

/// Renders the ledger of the middle snip_compact would archive once `more`
/// messages come (see [`snip_span_after`]): work ahead, so that the call
/// finds it rendered when they do.
pub(super) fn render_snip_ledger_ahead(history: &mut History, cx: &Ctx, more: usize) {
    if let Some(span) = snip_span_after(history, cx, more) {
        let transcript = crate::markers::path_text(&cx.store.transcript_path()).into_owned();
        snip_ledger(history, cx, span, &transcript);
    }
}

/// The middle snip_compact would archive now, if its trigger holds.
pub(super) fn snip_span(history: &History, cx: &Ctx) -> Option<Range<usize>> {
    snip_span_after(history, cx, 0)
}

/// The middle snip_compact would archive once `more` messages are
/// appended, if its trigger holds then. Its messages are all there
/// already, as long as `more` is less than the tail snip_compact keeps.
pub(super) fn snip_span_after(history: &History, cx: &Ctx, more: usize) -> Option<Range<usize>> {
    let max = cx.limits.max_messages?;
    let len = history.len() + more;
    if len <= max || more >= cx.limits.snip_keep_tail {
        return None;
    }
    let messages = history.messages();
    let head_end = safe_cut_at_or_after(messages, cx.limits.snip_keep_head.min(messages.len()));
    let tail_start = safe_cut_at_or_before(
        messages,
        len.saturating_sub(cx.limits.snip_keep_tail)
            .min(messages.len()),
    );
    if head_end >= tail_start || messages[head_end..tail_start].iter().all(is_archive_marker) {
        return None;
    }
    Some(head_end..tail_start)
}

/// Appends `history.messages()[archived..end]` to the transcript and moves
/// the archived mark to `end`: what an archive step writes before it takes
/// messages out of the context.
pub(super) fn archive_through(
    history: &mut History,
    cx: &Ctx,
    end: usize,
) -> Result<ArchivedSpan, StoreError> {
    let archived = history.archived();
    let from = archived.min(end);
    let written = history.take_written_lines(from..end);
    let span = cx
        .store
        .archive_written(&history.messages()[from..end], &written)?;
    // Never lower the mark: an earlier step that was not applied may have
    // archived further than this one reaches.
    history.set_archived(end.max(archived));
    Ok(span)
}

/// Step 3. Only when over the context limit: replaces results the model has
/// already seen, oldest first and except the newest `keep_recent_results`,
/// with `[Earlier tool result saved at PATH]`, saving each first, until the
/// context is at the target and at least `clear_at_least` was freed. Does
/// nothing if it could not free `clear_at_least` in all: a small gain is not
/// worth rewriting the provider's cached prefix.
pub fn micro_compact(history: &mut History, cx: &Ctx) -> Option<StepReport> {
    if cx.measure(history) <= cx.limits.context_limit {
        return None;
    }
    micro_compact_now(history, cx, Trigger::OverLimit)
}

/// The longest a result that looks like a marker can be and still be
/// taken for one by its text (a placeholder is about 200 characters).
const PLACEHOLDER_MAX_CHARS: usize = 300;

/// The tool results micro_compact looks at, oldest first, with their size:
/// seen by the model (before the newest assistant message), not among the
/// newest `keep_recent_results`, and above the placeholder floor. The walk
/// starts at the history's settled mark ([`settle_old_results`]).
fn old_results<'h>(
    history: &'h History,
    cx: &Ctx,
) -> impl Iterator<Item = (BlockRef, &'h ToolResult, usize)> + 'h {
    let seen_before = history.last_assistant_index().unwrap_or(0);
    let floor = cx.limits.placeholder_floor_chars;
    // Every result before the mark is settled, so the newest
    // `keep_recent_results` of the whole history that lie after it are
    // the newest of these.
    let refs = history.tool_result_refs_from(history.settled_upto(floor));
    let protected_from = refs.len().saturating_sub(cx.limits.keep_recent_results);
    refs.into_iter()
        .take(protected_from)
        .take_while(move |at| at.message < seen_before)
        .filter_map(move |at| {
            let result = history.block(at).and_then(Block::as_tool_result)?;
            let chars = result.content_chars();
            (chars > floor).then_some((at, result, chars))
        })
}

/// Whether micro_compact, and the cache anchor, pass `result` over for
/// good with a placeholder floor of `floor`: at or below the floor, or a
/// placeholder already by its text.
fn settled_result(result: &ToolResult, floor: usize) -> bool {
    let chars = result.content_chars();
    chars <= floor
        || (chars <= PLACEHOLDER_MAX_CHARS
            && result.content_str().is_some_and(is_saved_placeholder))
}

/// Moves `history`'s settled mark past the results micro_compact has
/// replaced (see [`History::settle_results`]): what keeps its walk, on
/// every call of a long session that never summarizes, to the results
/// that arrived since.
pub(super) fn settle_old_results(history: &mut History, cx: &Ctx) {
    history.settle_results(settled_result, cx.limits.placeholder_floor_chars);
}

/// Results micro_compact may replace: already seen, not among the newest
/// `keep_recent_results`, above the placeholder floor, not placeholders
/// yet; each with where it is saved already, if it is. Also a
/// conservative guess of the characters replacing them all frees.
pub(super) fn micro_candidates(
    history: &History,
    cx: &Ctx,
) -> (Vec<(BlockRef, Option<PathBuf>)>, usize) {
    let mut candidates = Vec::new();
    let mut freeable = 0usize;
    for (at, result, chars) in old_results(history, cx) {
        // A placeholder already, by its text: skipped without asking the
        // file system (one call per placeholder of a long session, on
        // every micro_compact). One that only imitates a placeholder stays
        // as it is, which loses nothing.
        if chars <= PLACEHOLDER_MAX_CHARS && result.content_str().is_some_and(is_saved_placeholder)
        {
            continue;
        }
        let saved = cx.store.saved_path(result);
        if saved
            .as_ref()
            .is_some_and(|p| saved_placeholder(p).chars().count() >= chars)
        {
            continue; // already a placeholder
        }
        // A conservative guess of the placeholder's size; the exact one is checked below.
        freeable += chars.saturating_sub(200);
        candidates.push((at, saved));
    }
    (candidates, freeable)
}

/// What replacing every result [`micro_candidates`] would find frees, by
/// text alone: the first message it would change and the characters freed.
/// No file is looked at (deciding whether to act runs before every call;
/// acting checks each result against the store), so a result that only
/// looks like a placeholder counts as one.
pub(super) fn micro_estimate(history: &History, cx: &Ctx) -> Option<(usize, usize)> {
    let mut first = None;
    let mut freeable = 0usize;
    for (at, result, chars) in old_results(history, cx) {
        // A placeholder is about 200 characters: one is not replaced again.
        if chars <= PLACEHOLDER_MAX_CHARS && looks_saved(result) {
            continue;
        }
        freeable += chars.saturating_sub(200);
        first.get_or_insert(at.message);
    }
    first.map(|f| (f, freeable))
}

/// micro_compact whatever the size, for `trigger`: the work down to the
/// target once the caller has decided it should run.
pub(super) fn micro_compact_now(
    history: &mut History,
    cx: &Ctx,
    trigger: Trigger,
) -> Option<StepReport> {
    settle_old_results(history, cx);
    let before = cx.measure(history);
    let (candidates, freeable) = micro_candidates(history, cx);
    let mut report = StepReport::new(Step::MicroCompact, trigger, before, cx.meter.unit());
    if candidates.is_empty() {
        return None;
    }
    let goal = cx.limits.clear_at_least;
    if cx.meter.chars_to_units(freeable) < goal {
        report.outcome = Outcome::NotApplied(format!(
            "could free only {} {}, less than clear_at_least",
            cx.meter.chars_to_units(freeable),
            cx.meter.unit().as_str()
        ));
        return Some(report);
    }
    for (at, saved) in candidates {
        let now = cx.measure(history);
        if now <= cx.limits.target && before.saturating_sub(now) >= goal {
            break;
        }
        let Some(result) = history.block(at).and_then(Block::as_tool_result) else {
            continue;
        };
        let path = match saved {
            Some(p) => p,
            None => match cx
                .store
                .persist_tool_result(&result.tool_use_id, &result.full_text())
            {
                Ok(saved) => {
                    report.paths.push(saved.path.clone());
                    saved.path
                }
                Err(e) => {
                    report.outcome = Outcome::Failed(e.into());
                    continue;
                }
            },
        };
        let placeholder = saved_placeholder(&path);
        if placeholder.chars().count() >= result.content_chars() {
            continue;
        }
        if history.set_tool_result_content(at, placeholder).is_some() {
            report.changed += 1;
        }
    }
    finish(report, history, cx)
}

/// Where the provider should put a cache breakpoint besides the system
/// prompt and the newest message: after the messages that neither changed
/// since the last request ([`History::unchanged_prefix`]) nor hold a result
/// micro_compact could replace next. When micro_compact acts, everything
/// before this point is read back from the cache instead of written again.
/// `None` when that prefix is empty or is the whole history.
pub fn cache_anchor(history: &History, cx: &Ctx) -> Option<usize> {
    // Runs before every request: text checks only, and only up to the
    // unchanged prefix, since the anchor is never past it.
    // Settled results are never replaced: the walk starts past them.
    let unchanged = history.unchanged_prefix();
    let floor = cx.limits.placeholder_floor_chars;
    let settled = history.settled_upto(floor).min(unchanged);
    let first_replaceable = history.messages()[settled..unchanged]
        .iter()
        .position(|m| {
            m.tool_results()
                .any(|r| !looks_saved(r) && r.content_chars() > floor)
        })
        .map_or(unchanged, |k| settled + k);
    (first_replaceable > 0 && first_replaceable < history.len()).then_some(first_replaceable)
}

/// The smallest size (meter units) micro_compact and fit_tool_results could
/// reach together, by the same eligibility rules, without changing anything.
/// micro_compact does nothing unless it frees `clear_at_least`; then the
/// results it would replace only shrink as fit_tool_results shrinks them.
/// (Counted as replaced, the floor promised a size the steps could not
/// reach: they rewrote the cached prefix, and the summary that followed in
/// the same call paid for its whole input again.)
pub fn tidy_floor(history: &History, cx: &Ctx) -> u64 {
    tidy_floor_with(history, cx, false)
}

/// [`tidy_floor`], where `clears_all` says micro_compact replaces every old
/// result whatever that frees: under the cache model when the cache is
/// cold (the whole request is written anyway).
pub(super) fn tidy_floor_with(history: &History, cx: &Ctx, clears_all: bool) -> u64 {
    let seen_before = history.last_assistant_index().unwrap_or(0);
    let refs = history.tool_result_refs();
    let protected_from = refs.len().saturating_sub(cx.limits.keep_recent_results);
    let fit_size = cx.limits.fit_preview_chars + 400;
    // Freed by fit alone, and what micro_compact frees beyond that.
    let mut by_fit = 0usize;
    let mut by_micro = 0usize;
    let mut micro_frees = 0usize;
    for (k, at) in refs.iter().enumerate() {
        let Some(result) = history.block(*at).and_then(Block::as_tool_result) else {
            continue;
        };
        let chars = result.content_chars();
        let fit = chars - chars.min(fit_size);
        by_fit += fit;
        let replaceable = k < protected_from
            && at.message < seen_before
            && chars > cx.limits.placeholder_floor_chars;
        if replaceable {
            by_micro += chars - chars.min(200) - fit;
            micro_frees += chars.saturating_sub(200);
        }
    }
    let micro_runs = clears_all || cx.meter.chars_to_units(micro_frees) >= cx.limits.clear_at_least;
    let reducible = by_fit + if micro_runs { by_micro } else { 0 };
    cx.measure(history)
        .saturating_sub(cx.meter.chars_to_units(reducible))
}

/// Step 3b. Still over the limit after micro_compact: the largest results,
/// whether seen or not, become persisted previews of `fit_preview_chars`,
/// largest first, until the context is at the target.
pub fn fit_tool_results(history: &mut History, cx: &Ctx) -> Option<StepReport> {
    let before = cx.measure(history);
    if before <= cx.limits.context_limit {
        return None;
    }
    fit_results_to(
        history,
        cx,
        cx.limits.target,
        Step::FitToolResults,
        Trigger::OverLimit,
    )
}

/// Persists results, largest first, as short previews until `history`
/// measures at most `goal`. Shared by fit_tool_results and reactive_compact.
pub(super) fn fit_results_to(
    history: &mut History,
    cx: &Ctx,
    goal: u64,
    step: Step,
    trigger: Trigger,
) -> Option<StepReport> {
    let preview = cx.limits.fit_preview_chars;
    // A persisted marker adds its path and framing to the preview.
    let floor = preview + 400;
    let mut ranked: Vec<(BlockRef, usize)> = history
        .tool_result_refs()
        .into_iter()
        .filter_map(|at| {
            let r = history.block(at)?.as_tool_result()?;
            let chars = r.content_chars();
            (chars > floor).then_some((at, chars))
        })
        .collect();
    if ranked.is_empty() {
        return None;
    }
    ranked.sort_by_key(|r| std::cmp::Reverse(r.1));
    let mut report = StepReport::new(step, trigger, cx.measure(history), cx.meter.unit());
    for (at, _) in ranked {
        if cx.measure(history) <= goal {
            break;
        }
        match persist_preview(history, cx, at, preview) {
            Ok(Some((path, _))) => {
                report.paths.push(path);
                report.changed += 1;
            }
            Ok(None) => {}
            Err(e) => report.outcome = Outcome::Failed(e),
        }
    }
    finish(report, history, cx)
}

/// Saves the result at `at` (unless it is already saved in the store) and
/// replaces its content by a persisted-output marker with a preview.
/// Returns the path and the new content's size in chars; `None` when `at`
/// holds no tool result.
fn persist_preview(
    history: &mut History,
    cx: &Ctx,
    at: BlockRef,
    preview_chars: usize,
) -> Result<Option<(PathBuf, usize)>, StepError> {
    let Some(result) = history.block(at).and_then(Block::as_tool_result) else {
        return Ok(None);
    };
    // An already-saved result keeps its file; the preview is of the file, not of the marker.
    let (path, source) = match cx.store.saved_path(result) {
        Some(p) => {
            let text = Store::read_persisted(&p)?;
            (p, Cow::Owned(text))
        }
        None => {
            let full = result.full_text();
            let saved = cx.store.persist_tool_result(&result.tool_use_id, &full)?;
            (saved.path, full)
        }
    };
    let marker = persisted_output(&path, &Preview::head(&source, preview_chars), None);
    let new_chars = marker.chars().count();
    Ok(history
        .set_tool_result_content(at, marker)
        .map(|()| (path, new_chars)))
}

/// Fills in `after` and the outcome of a tidy step.
fn finish(mut report: StepReport, history: &History, cx: &Ctx) -> Option<StepReport> {
    report.after = cx.measure(history);
    if report.changed > 0 {
        report.outcome = Outcome::Applied;
    } else if report.outcome == Outcome::NotApplied(String::new()) {
        report.outcome = Outcome::NotApplied("nothing could be reduced".into());
    }
    Some(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CharMeter, Limits, Message, TokenBudget, ToolResultContent};
    use proptest::prelude::*;
    use std::path::Path;

    const FLOORS: [usize; 5] = [0, 50, 120, 250, 400];
    const KEEPS: [usize; 4] = [0, 1, 3, 7];

    /// A tool result's content.
    #[derive(Clone, Debug)]
    enum Content {
        Text(usize),
        /// micro_compact's placeholder, under a short path or a long one
        /// (above every floor but the largest).
        Placeholder(bool),
        /// tool_result_budget's marker of a saved output.
        Persisted,
        Blocks(usize),
        PlaceholderInBlocks,
        Absent,
    }

    #[derive(Clone, Debug)]
    enum Op {
        /// An assistant message with up to two tool calls.
        Call(u8),
        /// A user message of a note and these results.
        Results(Vec<Content>),
        Text,
        Settle(u8),
        /// A result replaced by another.
        Replace(u8, Content),
        /// Any block of any message replaced, by a result or a text.
        ReplaceBlock(u8, u8, Option<Content>),
        Pop,
        Splice(u8, u8, Vec<Content>),
        Mark,
        /// Every message replaced, in reverse order.
        ReplaceAll,
        /// micro_compact, every old result, at one of the floors and keeps.
        MicroCompact(u8, u8),
    }

    fn content() -> impl Strategy<Value = Content> {
        prop_oneof![
            4 => prop_oneof![0usize..60, 40usize..140, 100usize..420, 1_000usize..3_000]
                .prop_map(Content::Text),
            2 => any::<bool>().prop_map(Content::Placeholder),
            1 => Just(Content::Persisted),
            1 => (0usize..500).prop_map(Content::Blocks),
            1 => Just(Content::PlaceholderInBlocks),
            1 => Just(Content::Absent),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => any::<u8>().prop_map(Op::Call),
            5 => prop::collection::vec(content(), 1..4).prop_map(Op::Results),
            1 => Just(Op::Text),
            3 => any::<u8>().prop_map(Op::Settle),
            2 => (any::<u8>(), content()).prop_map(|(k, c)| Op::Replace(k, c)),
            2 => (any::<u8>(), any::<u8>(), prop::option::of(content()))
                .prop_map(|(m, b, c)| Op::ReplaceBlock(m, b, c)),
            1 => Just(Op::Pop),
            1 => (any::<u8>(), any::<u8>(), prop::collection::vec(content(), 0..3))
                .prop_map(|(a, b, c)| Op::Splice(a, b, c)),
            1 => Just(Op::Mark),
            1 => Just(Op::ReplaceAll),
            2 => (any::<u8>(), any::<u8>()).prop_map(|(f, k)| Op::MicroCompact(f, k)),
        ]
    }

    fn placeholder(long: bool) -> String {
        let path = if long {
            format!("/s/{}/r.txt", "d".repeat(200))
        } else {
            "/s/r.txt".to_string()
        };
        saved_placeholder(Path::new(&path))
    }

    fn result(id: &str, content: &Content) -> Block {
        let text = match content {
            Content::Text(n) => ToolResultContent::Text("x".repeat(*n)),
            Content::Placeholder(long) => ToolResultContent::Text(placeholder(*long)),
            Content::Persisted => ToolResultContent::Text(persisted_output(
                Path::new("/s/p.txt"),
                &Preview::head("abc", 3),
                None,
            )),
            Content::Blocks(n) => ToolResultContent::Blocks(vec![Block::text("y".repeat(*n))]),
            Content::PlaceholderInBlocks => {
                ToolResultContent::Blocks(vec![Block::text(placeholder(false))])
            }
            Content::Absent => ToolResultContent::Text(String::new()),
        };
        let Block::ToolResult(r) = Block::tool_result(id, "", false) else {
            unreachable!("a tool result")
        };
        let mut r = r.with_content(text);
        if matches!(content, Content::Absent) {
            r.content = None;
        }
        Block::ToolResult(r)
    }

    fn results(n: usize, contents: &[Content]) -> Message {
        let mut blocks = vec![Block::text("note")];
        for (i, c) in contents.iter().enumerate() {
            blocks.push(result(&format!("t{n}_{i}"), c));
        }
        Message::user_blocks(blocks)
    }

    fn limits(floor: usize, keep: usize) -> Limits {
        Limits {
            placeholder_floor_chars: floor,
            keep_recent_results: keep,
            clear_at_least: 0,
            target: 0,
            ..Limits::tokens(TokenBudget::new(200_000, 8_000))
        }
    }

    fn ctx<'a>(limits: &'a Limits, store: &'a Store) -> Ctx<'a> {
        Ctx {
            limits,
            store,
            meter: &CharMeter,
        }
    }

    /// The same messages with no settled mark, and the same unchanged
    /// prefix (which the cache anchor depends on).
    fn unmarked(h: &History) -> History {
        let unchanged = h.unchanged_prefix();
        let mut copy = History::new(h.messages()[..unchanged].to_vec());
        for m in &h.messages()[unchanged..] {
            copy.push(m.clone());
        }
        copy
    }

    /// A message of one of three kinds: a person's text, an assistant's
    /// tool call, the result of the call `k` (whatever came before it).
    fn exchange_message(kind: u8, k: usize) -> Message {
        match kind % 3 {
            0 => Message::user(format!("note {k}")),
            1 => Message::assistant_blocks(vec![Block::tool_use(
                format!("t{k}"),
                "bash",
                serde_json::json!({"command": "ls"}),
            )]),
            _ => Message::user_blocks(vec![Block::tool_result(format!("t{k}"), "out", false)]),
        }
    }

    proptest! {
        /// The middle snip_compact will archive once `more` messages come
        /// is the one it archives when they have: whatever they are, and
        /// wherever the tool calls and results around the cut fall.
        #[test]
        fn the_middle_to_come_is_the_middle_when_it_comes(
            kinds in prop::collection::vec(0u8..3, 0..120),
            coming in prop::collection::vec(0u8..3, 0..4),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::new(dir.path());
            let limits = Limits::teaching();
            let cx = ctx(&limits, &store);
            let mut h = History::default();
            for (k, kind) in kinds.iter().enumerate() {
                h.push(exchange_message(*kind, k));
            }
            let ahead = snip_span_after(&h, &cx, coming.len());
            for (k, kind) in coming.iter().enumerate() {
                h.push(exchange_message(*kind, kinds.len() + k));
            }
            prop_assert_eq!(ahead, snip_span(&h, &cx));
        }

        /// Through appends, edits of any block, pops, splices, wholesale
        /// replacements and micro_compact's own placeholders, with the
        /// mark moved at any floor: every result before the mark is
        /// settled at the floor it was moved with, and at every floor and
        /// `keep_recent_results`, micro_compact, its estimate and the cache
        /// anchor see what they see in the same messages with no mark (a
        /// clone included).
        #[test]
        fn the_settled_mark_changes_nothing_micro_compact_sees(
            ops in prop::collection::vec(op(), 1..60),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::new(dir.path());
            let mut h = History::new(vec![Message::user("go")]);
            // The floor the mark was last moved with.
            let mut floor_moved = 0;
            for (n, op) in ops.into_iter().enumerate() {
                let len = h.len();
                match op {
                    Op::Call(k) => {
                        let mut blocks = vec![Block::text("thinking")];
                        for i in 0..k % 3 {
                            blocks.push(Block::tool_use(format!("c{n}_{i}"), "read", serde_json::json!({})));
                        }
                        h.push(Message::assistant_blocks(blocks));
                    }
                    Op::Results(contents) => h.push(results(n, &contents)),
                    Op::Text => h.push(Message::user("hello")),
                    Op::Settle(f) => {
                        floor_moved = FLOORS[f as usize % FLOORS.len()];
                        settle_old_results(&mut h, &ctx(&limits(floor_moved, 3), &store));
                    }
                    Op::Replace(k, c) => {
                        let refs = h.tool_result_refs();
                        if !refs.is_empty() {
                            h.replace_block(refs[k as usize % refs.len()], result("r", &c));
                        }
                    }
                    Op::ReplaceBlock(m, b, c) if len > 0 => {
                        let message = m as usize % len;
                        let blocks = h.messages()[message].blocks().len().max(1);
                        let at = BlockRef { message, block: b as usize % blocks };
                        h.replace_block(at, c.map_or_else(|| Block::text("t"), |c| result("b", &c)));
                    }
                    Op::ReplaceBlock(..) => {}
                    Op::Pop => {
                        h.pop();
                    }
                    Op::Splice(a, b, contents) => {
                        let (a, b) = (a.min(b) as usize * len / 255, a.max(b) as usize * len / 255);
                        let mut replacement = vec![Message::user("[marker]")];
                        if !contents.is_empty() {
                            replacement.push(results(n, &contents));
                        }
                        h.splice(a..b, replacement);
                    }
                    Op::Mark => h.mark(),
                    Op::ReplaceAll => {
                        let mut messages = h.messages().to_vec();
                        messages.reverse();
                        h.replace_all(messages);
                    }
                    Op::MicroCompact(f, k) => {
                        floor_moved = FLOORS[f as usize % FLOORS.len()];
                        let l = limits(floor_moved, KEEPS[k as usize % KEEPS.len()]);
                        let mut copy = unmarked(&h);
                        let marked = micro_compact_now(&mut h, &ctx(&l, &store), Trigger::RewritePays);
                        let plain = micro_compact_now(&mut copy, &ctx(&l, &store), Trigger::RewritePays);
                        prop_assert_eq!(marked.map(|r| r.changed), plain.map(|r| r.changed));
                        prop_assert_eq!(h.messages(), copy.messages());
                    }
                }
                let copy = unmarked(&h);
                prop_assert_eq!(copy.settled_upto(floor_moved), 0);
                for m in &h.messages()[..h.settled_upto(floor_moved)] {
                    prop_assert!(m.tool_results().all(|r| settled_result(r, floor_moved)));
                }
                for floor in FLOORS {
                    for keep in KEEPS {
                        let l = limits(floor, keep);
                        let cx = ctx(&l, &store);
                        prop_assert_eq!(micro_estimate(&h, &cx), micro_estimate(&copy, &cx));
                        prop_assert_eq!(micro_candidates(&h, &cx), micro_candidates(&copy, &cx));
                        prop_assert_eq!(cache_anchor(&h, &cx), cache_anchor(&copy, &cx));
                        prop_assert_eq!(micro_candidates(&h.clone(), &cx), micro_candidates(&copy, &cx));
                    }
                }
            }
        }
    }
}
