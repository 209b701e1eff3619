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
//! only shrinks with every call after it.
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
//! Above the window a compaction runs whatever it costs, as before, and
//! micro_compact's own rewrites (taken when they pay, at any size) stay
//! priced by the expected calls alone. At large windows those are what
//! lets a long session match the compactions the recording agent made on
//! its own: staked too, the two long Claude Code sessions of the shared
//! traces cost 3% and 11% more than `none` at 200k, and one 42% more at
//! 1M (none of their rewrites is funded: their results arrive small and
//! their cache is rarely cold).

use super::cache_model::{CachePrices, CacheState, Rewrite};

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
    /// Whether a rewrite with `state` may be bet on now: it loses, if the
    /// session ended with the next call, no more than was saved.
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
