//! What compacting has saved a session so far, against sending every
//! message as it came: the stake a compaction between the limit and the
//! window may bet.
//!
//! Between the compaction limit and the window nothing forces a
//! compaction; taking one there is a bet that the session goes on long
//! enough to repay the rewrite (see `cache_model`). The expected-calls
//! model wins that bet on average and loses it on a session that ends soon
//! after: on the shared traces at a 32k window, five short SWE-bench runs
//! that never outgrew the window cost 0.4–12.7% more than `none`, each
//! from one tidy or summary taken a few calls before the end. So a
//! compaction in that band also must not lose, if the session ended with
//! the next call, more than compacting has already saved this session;
//! the saving comes mostly from steps that cost nothing in cache terms
//! (results saved on arrival, tidying a cold cache). Whatever happens
//! next, such a bet then never puts the session above sending everything,
//! by the model: it is covered before it is placed, and a rewrite's loss
//! only shrinks with every call after it. The one exception is a bet that
//! repays itself within [`QUICK_REPAYMENT_CALLS`] (see below): taken
//! uncovered, it loses if the session ends before then.
//!
//! Measured on the shared traces at 32k: `default` went from 0.815× to
//! 0.822× of `none`, and the conversations that never outgrew the window
//! yet cost more than `none` from five to two. Those two (xarray-4356,
//! sympy-17630) outgrew the usable window, the window less the answer's
//! reserve, which `none` is not held to: there the window forced the
//! compaction (since then a request there squeezes its answer's room
//! instead, see `cache_model`). At 200k and 1M nothing changed.
//!
//! The saving is kept by the same cache model as the decisions: per call,
//! `none` reads what it sent before and writes what is new (everything,
//! when the cache is cold), and the session reads its unchanged prefix and
//! writes the rest; a summary's own call is paid besides. `none`'s size is
//! the sent size plus everything the steps have freed so far.
//!
//! Above the window a compaction runs whatever it costs, as before.
//!
//! micro_compact's own rewrites, taken at any size when the cost model says
//! they pay, are bets too, and the same rule holds them: covered by the
//! saving, or repaid within [`QUICK_REPAYMENT_CALLS`]. The second half
//! matters at large windows: a long session's first rewrites are funded by
//! nothing (their results arrive small and their cache is rarely cold), and
//! without them a long Claude Code session of the shared traces (258c7280)
//! cost 1.22× `none` at 200k and 1.41× at 1M, where the recording agent
//! compacted on its own. Priced by the expected calls alone, as they were,
//! five short SWE-bench runs lost 2–9% at 200k and 1M, each to a rewrite a
//! few calls before its end. Measured on the shared traces (with the recording
//! agent's own summary calls counted in its sessions, see replay's
//! `Conversation::summarizes`): at 200k and 1M, 0.943× → 0.969× of
//! `none`, conversations above `none` 5 → 0; at 32k 0.771× → 0.778×, none
//! above `none` before or after.

use super::cache_model::{CachePrices, CacheState, Rewrite};

/// The calls, this one included, within which a bet the saving does not
/// cover must repay itself to be taken: a rewrite that frees most of what
/// it rewrites (a long session's first old results, a summary of a history
/// far past the limit) loses only if the session ends in the next few
/// calls. On the shared traces, 4 to 6 leave no conversation above `none`
/// at 32k, 200k or 1M (4 and 5 cost the same); 3 misses a long Claude Code
/// session's first rewrite (at 200k, 258c7280 then costs 1.22× `none`),
/// and from 7 a short SWE-bench run's late micro_compact is taken again
/// and loses (django-9296, 1.08×).
pub const QUICK_REPAYMENT_CALLS: u64 = 4;

/// The running saving of one session, in input-size units (the cache
/// model's: a token of uncached input is 1).
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Savings {
    /// Saved so far, less what summaries' own calls cost.
    banked: f64,
    /// Units every step has freed so far: what `none` sends still.
    freed: u64,
    /// What `none` sent on the previous call.
    none_before: Option<u64>,
}

impl Savings {
    /// Whether a rewrite with `state` may be bet on now: the saving covers
    /// it ([`Savings::covers`]), or it repays itself within
    /// [`QUICK_REPAYMENT_CALLS`].
    pub fn allows(&self, state: &CacheState, rewrite: Rewrite) -> bool {
        self.covers(state, rewrite) || state.repays_within(rewrite, QUICK_REPAYMENT_CALLS)
    }

    /// Whether a rewrite with `state` is covered: it loses, if the session
    /// ended with the next call, no more than was saved.
    pub fn covers(&self, state: &CacheState, rewrite: Rewrite) -> bool {
        state.loss_if_last(rewrite) <= self.banked.max(0.0)
    }

    /// A step (of this call or between calls) freed `freed` units and
    /// cost `extra` besides its rewrite (a summary's own call).
    pub fn stepped(&mut self, freed: u64, extra: f64) {
        self.freed = self.freed.saturating_add(freed);
        self.banked -= extra;
    }

    /// One model call sent `sent` units, of which the first `cached` were
    /// unchanged since the previous call (read back from the cache when it
    /// is warm).
    pub fn called(&mut self, state: &CacheState, sent: u64, cached: u64) {
        let none = sent.saturating_add(self.freed);
        let CachePrices { read, write, .. } = state.prices;
        let saved = match self.none_before.filter(|_| !state.cold()) {
            Some(before) => {
                let before = before.min(none);
                let cached = cached.min(sent);
                let none_cost = read * before as f64 + write * (none - before) as f64;
                none_cost - (read * cached as f64 + write * (sent - cached) as f64)
            }
            None => write * (none - sent) as f64,
        };
        self.banked += saved;
        self.none_before = Some(none);
    }

    /// The history was replaced (a rewind, an undone compaction, a
    /// resumed log): what the steps freed from the old one is no longer
    /// what `none` sends more, and nothing sent before is cached for it.
    /// What was saved stays saved.
    pub fn history_replaced(&mut self) {
        self.freed = 0;
        self.none_before = None;
    }

    /// Saved so far, in input-size units.
    #[cfg(test)]
    pub fn banked(&self) -> f64 {
        self.banked
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(idle_ms: Option<u64>) -> CacheState {
        CacheState {
            prices: CachePrices::ANTHROPIC_5M,
            ttl_ms: 300_000,
            idle_ms,
            calls_so_far: 3,
        }
    }

    #[test]
    fn sending_what_none_sends_saves_nothing() {
        let mut s = Savings::default();
        s.called(&state(None), 1_000, 0);
        s.called(&state(Some(1)), 1_500, 1_000);
        s.called(&state(Some(1)), 2_000, 1_500);
        assert_eq!(s.banked(), 0.0);
    }

    #[test]
    fn freed_units_are_saved_on_every_later_call() {
        let mut s = Savings::default();
        s.called(&state(None), 1_000, 0);
        // 400 freed from the newest (never cached) message: the session
        // writes 400 less now, then reads 400 less on every call.
        s.stepped(400, 0.0);
        s.called(&state(Some(1)), 1_100, 1_000);
        assert!((s.banked() - 1.25 * 400.0).abs() < 1e-9, "{}", s.banked());
        s.called(&state(Some(1)), 1_200, 1_100);
        assert!((s.banked() - (1.25 + 0.1) * 400.0).abs() < 1e-9);
        // Cold: both write everything; the session writes 400 less.
        s.called(&state(Some(400_000)), 1_300, 1_200);
        assert!((s.banked() - (2.5 + 0.1) * 400.0).abs() < 1e-9);
    }

    #[test]
    fn a_rewrite_of_the_cached_prefix_is_paid_then_repaid() {
        let mut s = Savings::default();
        s.called(&state(None), 10_000, 0);
        // 4,000 freed at message 2,000 of the cached prefix: 4,000 of it
        // written again at 1.25 instead of read at 0.1, 4,000 not read.
        s.stepped(4_000, 0.0);
        s.called(&state(Some(1)), 6_000, 2_000);
        let first = 0.1 * 10_000.0 - (0.1 * 2_000.0 + 1.25 * 4_000.0);
        assert!((s.banked() - first).abs() < 1e-9, "{}", s.banked());
        s.called(&state(Some(1)), 6_000, 6_000);
        assert!((s.banked() - (first + 0.1 * 4_000.0)).abs() < 1e-9);
    }

    #[test]
    fn a_replaced_history_no_longer_counts_what_was_freed_from_the_old_one() {
        let mut s = Savings::default();
        s.called(&state(None), 1_000, 0);
        s.stepped(400, 0.0);
        s.called(&state(Some(1)), 1_100, 1_000);
        let saved = s.banked();
        assert!(saved > 0.0);
        s.history_replaced();
        s.called(&state(Some(1)), 1_500, 0);
        s.called(&state(Some(1)), 1_600, 1_500);
        assert_eq!(s.banked(), saved);
    }

    #[test]
    fn a_summary_call_is_paid_from_the_saving() {
        let mut s = Savings::default();
        s.stepped(0, 250.0);
        assert_eq!(s.banked(), -250.0);
    }

    #[test]
    fn an_uncovered_rewrite_is_allowed_only_when_it_repays_within_four_calls() {
        let nothing = Savings::default();
        let warm = |calls| CacheState {
            calls_so_far: calls,
            ..state(Some(1))
        };
        // 100k cached, 60k of it freed from 20k on: the next call writes
        // 20k again (1.25·20k) and reads 20k less than leaving it (0.1·80k
        // saved on the rewritten part); each later call reads 60k less.
        // Net: 6,000·(N − 1) + 8,000 − 25,000, positive from N = 4 on.
        let quick = Rewrite {
            cached: 100_000,
            kept: 20_000,
            freed: 60_000,
            extra: 0.0,
        };
        // Half as much freed, so 50k written again: 3,000·(N − 1) + 8,000 −
        // 62,500, positive from N = 20 on.
        let slow = Rewrite {
            freed: 30_000,
            ..quick
        };
        assert!(!nothing.covers(&warm(40), quick));
        assert!(nothing.allows(&warm(40), quick));
        // The cost model takes it at 40 calls so far (N = 20), but without
        // a saving to cover it, it is not bet on.
        assert!(warm(40).net_saving(slow) > 0.0);
        assert!(!nothing.allows(&warm(40), slow));
        // Three calls so far expect two: not even the quick one repays.
        assert!(!nothing.allows(&warm(3), quick));
        assert!(nothing.allows(&warm(7), quick));
    }

    #[test]
    fn nothing_saved_covers_only_a_rewrite_that_cannot_lose() {
        let s = Savings::default();
        let warm = state(Some(1));
        let costly = Rewrite {
            cached: 10_000,
            kept: 0,
            freed: 1_000,
            extra: 0.0,
        };
        assert!(warm.loss_if_last(costly) > 0.0);
        assert!(!s.covers(&warm, costly));
        // Cold, freeing without extra cost saves on the next call already.
        assert!(s.covers(&state(None), costly));
        // A result of 10,000 units saved on arrival: not written, then not
        // read.
        let mut rich = Savings::default();
        rich.called(&state(None), 10_000, 0);
        rich.stepped(10_000, 0.0);
        rich.called(&state(Some(1)), 10_000, 10_000);
        assert!(rich.banked() >= warm.loss_if_last(costly));
        assert!(rich.covers(&warm, costly));
    }
}
