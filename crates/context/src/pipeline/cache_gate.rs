//! The prefix-rewriting steps behind the cache model: each runs when the
//! window forces it (over the context limit), when the cache is cold
//! anyway, or when [`CacheState::verdict`] says the rewrite pays; see
//! `cache_model` for the model.

use super::Ctx;
use super::cache_model::{CacheState, Rewrite, Verdict};
use super::report::{StepReport, Trigger};
use super::savings::Savings;
use super::summary::{marker_floor_chars_estimate, marker_without_ledger_chars};
use super::summary_cost::{SummaryAsk, ask_chars_at_most, summary_call_cost};
use super::tidy::{
    micro_compact, micro_compact_now, micro_estimate, settle_old_results, snip_compact, snip_span,
    tidy_floor_with,
};
use crate::history::History;
use crate::limits::Limits;

/// The rewrite of messages `first_changed..` that frees `freed_chars`.
fn rewrite(history: &History, cx: &Ctx, first_changed: usize, freed_chars: usize) -> Rewrite {
    let unchanged = history.unchanged_prefix();
    Rewrite {
        cached: cx.units_before(history, unchanged),
        kept: cx.units_before(history, first_changed.min(unchanged)),
        freed: cx.meter.chars_to_units(freed_chars),
        extra: 0.0,
    }
}

/// The trigger a verdict gives a step, if it lets the step run.
fn trigger_of(verdict: Verdict) -> Option<Trigger> {
    match verdict {
        Verdict::Cold => Some(Trigger::CacheCold),
        Verdict::Pays => Some(Trigger::RewritePays),
        Verdict::DoesNotPay => None,
    }
}

/// snip_compact under the cache model: over the limit as always; else only
/// when cold or when archiving the middle pays.
pub(super) fn snip_compact_cached(
    history: &mut History,
    cx: &Ctx,
    cache: &CacheState,
) -> Option<StepReport> {
    if cx.measure(history) > cx.limits.context_limit {
        return snip_compact(history, cx);
    }
    let span = snip_span(history, cx)?;
    let removed: usize = history.messages()[span.clone()]
        .iter()
        .map(|m| m.chars())
        .sum();
    // The marker keeps the ledger and a line naming the transcript.
    let freed = removed.saturating_sub(cx.ledger_chars(history) + 400);
    let trigger = trigger_of(cache.verdict(rewrite(history, cx, span.start, freed)))?;
    let mut report = snip_compact(history, cx)?;
    report.trigger = trigger;
    Some(report)
}

/// micro_compact under the cache model. When the cache is cold, every old
/// result is replaced (the whole request is written anyway); over the
/// limit, results are replaced down to the target as always; under it
/// with a warm cache, every old result is replaced if that pays and the
/// session may bet on it (`Savings::allows`), else none.
pub(super) fn micro_compact_cached(
    history: &mut History,
    cx: &Ctx,
    cache: &CacheState,
    savings: &Savings,
) -> Option<StepReport> {
    settle_old_results(history, cx);
    let clear_all = Limits {
        context_limit: 0,
        target: 0,
        clear_at_least: 0,
        ..cx.limits.clone()
    };
    let all = Ctx {
        limits: &clear_all,
        ..*cx
    };
    let over = cx.measure(history) > cx.limits.context_limit;
    if over && !cache.cold() {
        return micro_compact(history, cx);
    }
    let Some((first, freeable)) = micro_estimate(history, &all) else {
        return over.then(|| micro_compact(history, cx)).flatten();
    };
    let rewrite = rewrite(history, cx, first, freeable);
    match trigger_of(cache.verdict(rewrite)).filter(|_| savings.allows(cache, rewrite)) {
        Some(trigger) => micro_compact_now(history, &all, trigger),
        None if over => micro_compact(history, cx),
        None => None,
    }
}

/// Whether the compaction the context limit asks for runs on this call.
/// Always when the history is above the window limit (the request would
/// not leave the answer its room) or not above the context limit (nothing
/// asks for it then). In between nothing forces it, and it is a bet that
/// the session goes on: it runs only if it could lose, were the session to
/// end with the next call, no more than compacting has saved the session
/// so far (`Savings`). Tidying, when it alone can bring the history under
/// the limit (results are saved, the step is lossless, and it is what
/// keeps a long session from summarizing), runs on that condition alone.
/// A summary must also pay by the cost model against carrying the history
/// on: it replaces every message with a marker (the ledger, and a summary
/// as long as it may be, `Ctx::summary_chars`), and its own call (the
/// history read back, the summary written as output) is its `X`.
pub(super) fn compaction_pays(
    history: &mut History,
    cx: &Ctx,
    cache: &CacheState,
    savings: &Savings,
    request: &str,
) -> bool {
    let size = cx.measure(history);
    if size <= cx.limits.context_limit || size > cx.limits.hard_limit() {
        return true;
    }
    let floor = tidy_floor_with(history, cx, cache.cold());
    if floor <= cx.limits.context_limit {
        return savings.allows(cache, tidy_rewrite(history, cx, size - floor));
    }
    // A bigger marker frees less, and the saving grows with what is freed:
    // if the summary does not pay even with a marker that carries no
    // ledger, it does not pay with the ledger either, and the ledger need
    // not be rendered (most calls in the band wait, each with new facts).
    let unledgered = marker_without_ledger_chars(cx, request);
    let bare = summary_rewrite(history, cx, cache, unledgered);
    if cache.verdict(bare) == Verdict::DoesNotPay || !savings.allows(cache, bare) {
        return false;
    }
    let marker = marker_floor_chars_estimate(history, cx, request);
    let summary = summary_rewrite(history, cx, cache, marker);
    cache.verdict(summary) != Verdict::DoesNotPay && savings.allows(cache, summary)
}

/// The rewrite tidying makes when it frees `freed` units: from the first
/// message holding a result it could shrink (one above the placeholder
/// floor), the earliest change micro_compact or fit_tool_results can make.
fn tidy_rewrite(history: &History, cx: &Ctx, freed: u64) -> Rewrite {
    let floor = cx.limits.placeholder_floor_chars;
    let first = history
        .messages()
        .iter()
        .position(|m| m.tool_results().any(|r| r.content_chars() > floor))
        .unwrap_or(0);
    Rewrite {
        freed,
        ..rewrite(history, cx, first, 0)
    }
}

/// The rewrite a summary of `history` makes, priced before it is asked
/// for, with a marker of `marker_chars` besides the summary.
fn summary_rewrite(
    history: &History,
    cx: &Ctx,
    cache: &CacheState,
    marker_chars: usize,
) -> Rewrite {
    let summary_chars = cx.summary_chars(history);
    let marker = cx.meter.chars_to_units(marker_chars + summary_chars);
    let messages = cx.units_before(history, history.len());
    let answer = cx.meter.chars_to_units(summary_chars);
    let ask = SummaryAsk::of(history, cx, Some(ask_chars_at_most(cx, history)));
    Rewrite {
        cached: cx.units_before(history, history.unchanged_prefix()),
        kept: 0,
        freed: messages.saturating_sub(marker),
        extra: summary_call_cost(cx, cache, &ask, answer),
    }
}
