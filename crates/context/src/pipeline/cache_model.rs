//! When rewriting the cached prefix pays: the cost model the pipeline's
//! prefix-rewriting steps decide by.
//!
//! A provider with prompt caching (Anthropic's, and most others' by now)
//! bills the part of a request that repeats the previous request's prefix
//! as a *cache read*, much cheaper than input, and the part after it as a
//! *cache write*, dearer than input. A step that edits an old message
//! (micro_compact, snip_compact, a summary) makes everything from that
//! message on a write again, once; every later call then reads a shorter
//! history. It is worth it when the reads saved over the rest of the
//! session exceed the rewrite.
//!
//! The model, with every price as a multiple of uncached input (so that
//! only ratios matter and a character meter works as well as a token one):
//!
//! - `r`: a cache read (Anthropic: 0.1), `w`: a cache write (1.25 for the
//!   5-minute cache, 2.0 for the 1-hour one), `o`: output (5.0);
//! - `ttl`: how long the provider keeps the prefix after the last call that
//!   used it (5 minutes, or an hour); `idle`: the time since that call;
//! - `N`: the calls expected in the rest of the session, this one
//!   included, estimated from the session so far as half the calls made so
//!   far (a session that has run k calls is taken to be between halfway
//!   and done: the rewrite must pay back within the shorter future), at
//!   least 1 and at most [`MAX_EXPECTED_CALLS`];
//! - `C`: the size of the prefix the provider holds (the messages unchanged
//!   since the previous request); `P ≤ C`: the size before the first
//!   message the step would change; `S`: the size the step frees; `X`: any
//!   extra the step costs (a summary call: its input as a cache read and
//!   its answer as output).
//!
//! When the cache is warm (`idle ≤ ttl`), leaving the prefix costs
//! `N·r·C` in reads of that part; rewriting costs `r·P + w·(C − P − S)` on
//! the next call, `(N − 1)·r·(C − S)` on the later ones, and `X`. The step
//! pays when
//!
//! ```text
//! (N − 1)·r·S + r·(C − P)  >  w·(C − P − S) + X
//! ```
//!
//! When the cache is cold (`idle > ttl`, or nothing was sent yet) the whole
//! request is a write whatever the step does, so freeing `S` saves
//! `w·S + (N − 1)·r·S`, and any step without extra cost pays.
//!
//! The same model decides when a summary runs between the compaction
//! limit and the window (`Limits::window_limit`: the usable window, what a
//! request may measure and still leave the answer its room). The limit
//! sits below the window so that compaction has room to work; it is not
//! itself a reason to pay for a summary. Between the two, a summary runs
//! when compacting now beats carrying the history on: it is priced as a
//! rewrite with `P = 0` (the marker replaces every message), `S` = the
//! messages less the marker (its ledger and a summary of the size the
//! instruction asks for), and `X` = the summary's own call (its input,
//! plus the summary as output). The input is the history read back
//! through the cache (the part the provider holds read, the rest and the
//! ask written), or a bounded transcript as fresh input: whichever costs
//! less, the first only while the history, the ask and the summary's
//! capped answer fit the window (`summary_cost::summary_input`). Waiting costs the reads of a bigger
//! history; summarizing costs `X` and the marker's write, and is paid
//! again at the next compaction. Where the system prompt and tools alone
//! fill the limit (Claude Code's ~26k tokens at a 32k window), the old rule
//! summarized on every call; now each summary waits until the calls since
//! the last one have grown enough to pay for it, or until the next request
//! would not fit. Above the window a summary always runs. Measured on the
//! shared traces at 32k: `default` went from 0.99× to 0.91× of `none`.
//! Since then a compaction in that band, summary or tidy, is also a bet
//! the session must be able to cover with what compacting has already
//! saved it, or that repays itself within a few calls (`savings`).
//!
//! The band reaches into the answer's reserve (`Limits::squeeze_limit`):
//! a request past the window limit asks for a shorter answer
//! (`Limits::answer_room`, down to a quarter of the reserve) rather than
//! have the window force a rewrite there. Forced near a session's end, a
//! rewrite costs more than every later read it saves: on the shared
//! traces at 32k, xarray-4356 was forced to tidy 19,500 cached tokens at
//! its 72nd call of 76 and cost 1.085× `none`, which never compacts and
//! whose requests there leave its answers the same smaller room. An answer
//! that needs more than the room is cut at it; the harness pays for it,
//! compacts as the window limit asks, and asks again
//! ([`Compactor::leave_full_answer_room`](crate::Compactor::leave_full_answer_room)).
//! Measured there: 0.815× → 0.787× of `none` (the state ledger's room
//! measured against this limit too, see `Ctx::ledger_chars`), no
//! conversation above `none` where `none` fits (one before), no answer
//! cut; at 200k and 1M nothing changed.
//!
//! `N` is a guess, and no guess is right for every session: a rewrite that
//! pays over the expected calls loses on a session that ends soon after
//! it. On the shared traces at 200k (a recorded `/compact` replayed as the
//! person's command), limiting `N` for micro_compact alone gave, against
//! `none` (total, and conversations that cost more than `none`): half the
//! calls so far (this rule) 0.959×, 5 (short SWE-bench runs, 1.02–1.09×, a
//! few cents each); a third 0.978×, 3; a quarter 0.987×, 2; a sixth
//! 1.006×, 1; caps of 16, 8, 4, 2: 0.970×, 1.008×, 1.011×, 1.023×, with
//! the long Claude Code sessions over `none` from a cap of 8 (258c7280 at
//! 1M: 1.42× with a cap of 2). Rewrites that pay are most of what a long
//! session saves at a large window; half the calls so far, capped at 32,
//! stays. What changed instead is who may bet: a rewrite the window does
//! not force is taken only when the session's saving covers its loss were
//! the session to end with the next call, or when it repays itself within
//! a few calls, where few sessions end (`savings`). With the recording
//! agent's own summary calls counted in its sessions, that took the
//! shared traces at 200k and 1M from 0.943× and 5 conversations above
//! `none` to 0.969× and none.
//!
//! Parts past the cached prefix (the messages appended since the previous
//! request) are written in either case and do not enter the comparison.
//! The pipeline is given a [`CacheState`] by its caller before each call
//! (the agent knows when it last called its provider and at what prices;
//! replay knows the recorded timestamps and its price table); without
//! one, every step runs on its size trigger alone, as it always has.

/// The most calls the model expects the rest of a session to make: a
/// long session's past is a weak promise of an equally long future.
pub const MAX_EXPECTED_CALLS: u64 = 32;

/// Prices as multiples of uncached input.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CachePrices {
    /// A cache read (`r`).
    pub read: f64,
    /// A cache write (`w`).
    pub write: f64,
    /// An output token (`o`).
    pub output: f64,
}

impl CachePrices {
    /// Anthropic's list prices for the 5-minute cache: read 0.1×, write
    /// 1.25×, output 5× input.
    pub const ANTHROPIC_5M: CachePrices = CachePrices {
        read: 0.1,
        write: 1.25,
        output: 5.0,
    };
}

/// What the pipeline knows of the provider's cache before one model call.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CacheState {
    /// The prices.
    pub prices: CachePrices,
    /// How long the provider keeps a prefix after the call that used it, ms.
    pub ttl_ms: u64,
    /// Milliseconds since the previous model call of this session; `None`
    /// when there was none (or when is unknown): then nothing is cached.
    pub idle_ms: Option<u64>,
    /// Model calls this session has made so far.
    pub calls_so_far: u64,
}

/// The sizes of one rewrite, in the meter's unit (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Rewrite {
    /// `C`: the size of the prefix the provider holds.
    pub cached: u64,
    /// `P`: the size before the first message the step changes.
    pub kept: u64,
    /// `S`: the size the step frees.
    pub freed: u64,
    /// `X`: what the step costs besides the rewrite, in input-size units.
    pub extra: f64,
}

/// Why a prefix-rewriting step may run on this call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The cache is cold anyway: any shrinking is free.
    Cold,
    /// The cache is warm and the model says the rewrite pays.
    Pays,
    /// The cache is warm and the rewrite would cost more than it saves.
    DoesNotPay,
}

impl CacheState {
    /// Whether the provider has nothing of this session cached: no call
    /// yet, or the last one longer ago than the TTL.
    pub fn cold(&self) -> bool {
        self.idle_ms.is_none_or(|idle| idle > self.ttl_ms)
    }

    /// `N`: the calls expected from now to the end of the session, this
    /// one included.
    pub fn expected_calls(&self) -> u64 {
        self.calls_so_far.div_ceil(2).clamp(1, MAX_EXPECTED_CALLS)
    }

    /// The modelled saving of `rewrite` over the rest of the session, in
    /// input-size units; positive when it pays.
    pub fn net_saving(&self, rewrite: Rewrite) -> f64 {
        self.net_saving_over(rewrite, self.expected_calls())
    }

    /// The modelled saving of `rewrite` were the session to make `calls`
    /// more calls, this one included.
    fn net_saving_over(&self, rewrite: Rewrite, calls: u64) -> f64 {
        let CachePrices { read, write, .. } = self.prices;
        let n = calls as f64;
        let freed = rewrite.freed as f64;
        if self.cold() {
            return write * freed + (n - 1.0) * read * freed - rewrite.extra;
        }
        let cached = rewrite.cached as f64;
        let kept = (rewrite.kept as f64).min(cached);
        let rewritten = (cached - kept - freed).max(0.0);
        (n - 1.0) * read * freed + read * (cached - kept) - write * rewritten - rewrite.extra
    }

    /// What `rewrite` costs more than it saves if the session ends with
    /// the next call (0 when it saves even then): the most a rewrite taken
    /// now can lose against leaving the history as it is.
    pub fn loss_if_last(&self, rewrite: Rewrite) -> f64 {
        (-self.net_saving_over(rewrite, 1)).max(0.0)
    }

    /// Whether `rewrite` has repaid itself by the end of the next `calls`
    /// calls (this one included), or of the session's expected calls when
    /// it expects fewer.
    pub fn repays_within(&self, rewrite: Rewrite, calls: u64) -> bool {
        self.net_saving_over(rewrite, calls.min(self.expected_calls())) > 0.0
    }

    /// Whether `rewrite` may run now, and why.
    pub fn verdict(&self, rewrite: Rewrite) -> Verdict {
        if rewrite.freed == 0 {
            return Verdict::DoesNotPay;
        }
        let pays = self.net_saving(rewrite) > 0.0;
        match (self.cold(), pays) {
            (true, true) => Verdict::Cold,
            (false, true) => Verdict::Pays,
            (_, false) => Verdict::DoesNotPay,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn warm(calls: u64) -> CacheState {
        CacheState {
            prices: CachePrices::ANTHROPIC_5M,
            ttl_ms: 300_000,
            idle_ms: Some(10_000),
            calls_so_far: calls,
        }
    }

    #[test]
    fn idle_past_the_ttl_is_cold_and_any_free_step_pays() {
        let cold = CacheState {
            idle_ms: Some(300_001),
            ..warm(1)
        };
        assert!(cold.cold());
        assert!(
            CacheState {
                idle_ms: None,
                ..warm(1)
            }
            .cold()
        );
        assert!(!warm(1).cold());
        let small = Rewrite {
            cached: 100_000,
            kept: 0,
            freed: 10,
            extra: 0.0,
        };
        assert_eq!(cold.verdict(small), Verdict::Cold);
        assert_eq!(warm(1).verdict(small), Verdict::DoesNotPay);
    }

    #[test]
    fn a_warm_rewrite_pays_only_over_enough_calls() {
        // 100k cached, the first 20k kept, 40k freed: pays when
        // 0.1·40k·(N−1) + 0.1·80k > 1.25·40k, i.e. N − 1 > 10.5; N is
        // half the calls so far.
        let r = Rewrite {
            cached: 100_000,
            kept: 20_000,
            freed: 40_000,
            extra: 0.0,
        };
        assert_eq!(warm(22).verdict(r), Verdict::DoesNotPay);
        assert_eq!(warm(23).verdict(r), Verdict::Pays);
        // The cap: a thousand calls so far promise no more than the cap.
        assert_eq!(warm(1_000).expected_calls(), MAX_EXPECTED_CALLS);
    }

    #[test]
    fn an_extra_cost_must_be_earned_too() {
        let r = Rewrite {
            cached: 10_000,
            kept: 0,
            freed: 9_000,
            extra: 1e9,
        };
        assert_eq!(warm(40).verdict(r), Verdict::DoesNotPay);
        assert_eq!(warm(40).verdict(Rewrite { extra: 0.0, ..r }), Verdict::Pays);
    }

    /// Any cache state, warm or cold, and any rewrite of any size.
    fn state_and_rewrite() -> impl proptest::strategy::Strategy<Value = (CacheState, Rewrite)> {
        use proptest::strategy::Strategy;
        (
            0u64..200,
            proptest::option::of(0u64..600_000),
            0u64..400_000,
            0u64..400_000,
            0u64..400_000,
            0.0f64..100_000.0,
        )
            .prop_map(|(calls, idle, cached, kept, freed, extra)| {
                let state = CacheState {
                    idle_ms: idle,
                    ..warm(calls)
                };
                let rewrite = Rewrite {
                    cached,
                    kept,
                    freed,
                    extra,
                };
                (state, rewrite)
            })
    }

    proptest::proptest! {
        /// Freeing more never turns a rewrite that pays into one that does
        /// not: the band's check prices a summary with the smallest marker
        /// first, and renders the ledger only when that one pays.
        #[test]
        fn freeing_more_never_pays_less(
            (state, less) in state_and_rewrite(),
            more in 0u64..400_000,
        ) {
            let bigger = Rewrite { freed: less.freed + more, ..less };
            if state.verdict(bigger) == Verdict::DoesNotPay {
                proptest::prop_assert_eq!(state.verdict(less), Verdict::DoesNotPay);
            }
        }

        /// A rewrite that has repaid itself within some calls stays repaid
        /// over any longer session: what a bet allowed for repaying soon
        /// can lose is confined to sessions that end sooner.
        #[test]
        fn repaid_within_a_few_calls_stays_repaid(
            (state, r) in state_and_rewrite(),
            within in 1u64..8,
            longer in 0u64..64,
        ) {
            if state.repays_within(r, within) {
                let n = within.min(state.expected_calls()) + longer;
                proptest::prop_assert!(state.net_saving_over(r, n) > 0.0);
            }
        }
    }

    #[test]
    fn freeing_nothing_never_pays() {
        let cold = CacheState {
            idle_ms: None,
            ..warm(40)
        };
        assert_eq!(cold.verdict(Rewrite::default()), Verdict::DoesNotPay);
    }
}
