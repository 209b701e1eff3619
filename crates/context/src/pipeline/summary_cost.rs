//! What a summary's own call costs, and so whether it is asked in place
//! (the history as it is, with the ask appended: a continuation the
//! provider's cache serves) or as a bounded transcript (fresh input); see
//! `cache_model` for the prices.

use super::Ctx;
use super::cache_model::{CachePrices, CacheState};
use crate::Message;
use crate::history::History;
use crate::summarize::{CONTINUATION_INSTRUCTION, SUMMARY_CHARS, summary_instruction};
use std::sync::LazyLock;

/// The longest the ask of a summary in place of `history` can be, as a
/// message: the instruction at the longest summary, and a ledger at its
/// budget with a tenth more for what its JSON escapes. For pricing a
/// summary before it is asked (or after, not knowing the ask): then one
/// priced in place surely was.
pub(super) fn ask_chars_at_most(cx: &Ctx, history: &History) -> usize {
    // The same on every call: measured once (the band's cost check asks on
    // every call there).
    static INSTRUCTION_CHARS: LazyLock<usize> = LazyLock::new(|| {
        let instruction = summary_instruction(CONTINUATION_INSTRUCTION, None, "", SUMMARY_CHARS);
        Message::user(instruction).chars()
    });
    *INSTRUCTION_CHARS + cx.ledger_chars(history) * 11 / 10
}

/// What the provider holds of the request `history` makes now: what a
/// request carries besides the messages, and the messages unchanged since
/// the previous request (meter units).
pub(super) fn cached_units(history: &History, cx: &Ctx) -> u64 {
    cx.overhead() + cx.units_before(history, history.unchanged_prefix())
}

/// A summary's request before it is made, as the cost model prices it.
#[derive(Clone, Copy, Debug)]
pub(super) struct SummaryAsk {
    /// The history with what a request carries besides (meter units).
    pub(super) size: u64,
    /// Of that, what the provider holds from the previous request.
    pub(super) cached: u64,
    /// The ask appended to the history in place, as a message
    /// (characters); `None`: never in place (the provider has just refused
    /// the history as too long).
    pub(super) ask_chars: Option<usize>,
    /// The bounded transcript sent instead (characters).
    pub(super) transcript_chars: usize,
}

impl SummaryAsk {
    /// The summary of `history` as it is now, with an ask of `ask_chars`
    /// (see the field).
    pub(super) fn of(history: &History, cx: &Ctx, ask_chars: Option<usize>) -> SummaryAsk {
        SummaryAsk {
            size: cx.measure(history),
            cached: cached_units(history, cx),
            ask_chars,
            transcript_chars: history.chars().min(cx.limits.summary_input_chars),
        }
    }

    /// Whether the history, the ask and the summary's answer fit the
    /// window (`Limits::summarize_in_place_up_to`), so that it can be asked
    /// in place at all.
    pub(super) fn fits(&self, cx: &Ctx) -> bool {
        self.ask_chars.is_some_and(|ask| {
            self.size.saturating_add(cx.meter.chars_to_units(ask))
                <= cx.limits.summarize_in_place_up_to
        })
    }
}

/// How a summary is asked, and what its input costs (input-size units).
/// In place when the history, the ask and the answer fit the window
/// ([`SummaryAsk::fits`]) and it costs no more than a bounded transcript
/// as fresh input. In place, the part the provider holds is read and the
/// rest written (all of it, the cache cold), with what a request carries
/// besides the messages: beside a big system prompt, a short history costs
/// more in place than as a transcript, which carries the history alone.
pub(super) fn summary_input(cx: &Ctx, cache: &CacheState, ask: &SummaryAsk) -> (bool, f64) {
    let CachePrices { read, write, .. } = cache.prices;
    let asked = cx.meter.chars_to_units(ask.ask_chars.unwrap_or(0)) as f64;
    let transcript = cx.meter.chars_to_units(ask.transcript_chars) as f64 + asked;
    if !ask.fits(cx) {
        return (false, transcript);
    }
    let cached = if cache.cold() {
        0.0
    } else {
        ask.cached.min(ask.size) as f64
    };
    let in_place = read * cached + write * (ask.size as f64 - cached + asked);
    if in_place <= transcript {
        (true, in_place)
    } else {
        (false, transcript)
    }
}

/// What a summary's own call costs, in input-size units: its input (see
/// [`summary_input`]) and its answer of `answer` units, as output.
pub(super) fn summary_call_cost(
    cx: &Ctx,
    cache: &CacheState,
    ask: &SummaryAsk,
    answer: u64,
) -> f64 {
    let (_, input) = summary_input(cx, cache, ask);
    input + cache.prices.output * answer as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CharMeter, Limits, TokenBudget};
    use whittle_store::Store;

    /// A 32,000-unit window (characters, so that sizes read as they are),
    /// a summary's answer of 1,000 at most: in place up to 31,000.
    fn limits() -> Limits {
        Limits {
            summarize_in_place_up_to: 31_000,
            ..Limits::tokens(TokenBudget::new(32_000, 4_000))
        }
    }

    fn warm() -> CacheState {
        CacheState {
            prices: CachePrices::ANTHROPIC_5M,
            ttl_ms: 300_000,
            idle_ms: Some(10_000),
            calls_so_far: 20,
        }
    }

    fn in_place(ask: SummaryAsk, cache: CacheState) -> bool {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        let limits = limits();
        let cx = Ctx {
            limits: &limits,
            store: &store,
            meter: &CharMeter,
        };
        summary_input(&cx, &cache, &ask).0
    }

    /// A long history the provider holds: read back in place beats sending
    /// it again; near the window too, as long as the ask and the answer fit.
    #[test]
    fn a_history_the_cache_holds_is_summarized_in_place_while_it_fits() {
        let ask = SummaryAsk {
            size: 29_000,
            cached: 28_000,
            ask_chars: Some(1_500),
            transcript_chars: 25_000,
        };
        assert!(in_place(ask, warm()));
        // The ask and the answer no longer fit beside it.
        assert!(!in_place(
            SummaryAsk {
                size: 30_000,
                ..ask
            },
            warm()
        ));
        assert!(!in_place(
            SummaryAsk {
                ask_chars: None,
                ..ask
            },
            warm()
        ));
    }

    /// Beside a big system prompt a short history is cheaper as a transcript
    /// (it carries the history alone); so is any history the cache no
    /// longer holds (in place, all of it would be written).
    #[test]
    fn a_transcript_is_sent_when_it_costs_less() {
        let beside_a_big_prompt = SummaryAsk {
            size: 28_000,
            cached: 26_500,
            ask_chars: Some(1_500),
            transcript_chars: 2_000,
        };
        assert!(!in_place(beside_a_big_prompt, warm()));
        let long = SummaryAsk {
            size: 29_000,
            cached: 28_000,
            ask_chars: Some(1_500),
            transcript_chars: 25_000,
        };
        let cold = CacheState {
            idle_ms: Some(600_000),
            ..warm()
        };
        assert!(!in_place(long, cold));
    }
}
