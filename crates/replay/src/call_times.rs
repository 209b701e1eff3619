//! How the pipeline's time per call is spread over a session: whether the
//! slowest calls stay as fast late in a long session as early in it.

use serde::Serialize;
use std::ops::Range;

/// The 99th-percentile pipeline time of each tenth of one session's calls,
/// in call order: flat when the cost of a call does not grow with the
/// session. Totals keep the figure of the session with the most calls.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TenthsP99 {
    /// The calls of the session measured.
    pub calls: u64,
    /// Microseconds: the p99 of each tenth (fewer than ten entries when
    /// the session has fewer than ten calls: one per call then).
    pub p99_us: Vec<u64>,
}

/// The calls of each tenth of a session of `calls` calls: ten runs whose
/// lengths differ by one at most (one run per call under ten calls).
pub fn tenths(calls: usize) -> impl Iterator<Item = Range<usize>> {
    let runs = calls.min(10);
    (0..runs).map(move |k| k * calls / runs..(k + 1) * calls / runs)
}

impl TenthsP99 {
    /// The figure of one session, from its calls' times in call order
    /// (its [`tenths`]).
    pub fn of(times_in_call_order: &[u64]) -> TenthsP99 {
        let p99_us = tenths(times_in_call_order.len())
            .map(|run| {
                let mut sorted = times_in_call_order[run].to_vec();
                sorted.sort_unstable();
                p99_of_sorted(&sorted)
            })
            .collect();
        TenthsP99 {
            calls: times_in_call_order.len() as u64,
            p99_us,
        }
    }

    /// Keeps whichever of the two measured the longer session (for totals).
    pub fn absorb(&mut self, other: &TenthsP99) {
        if other.calls > self.calls {
            *self = other.clone();
        }
    }

    /// The fastest and the slowest tenth's p99, `None` with no calls.
    pub fn range(&self) -> Option<(u64, u64)> {
        let min = self.p99_us.iter().min()?;
        let max = self.p99_us.iter().max()?;
        Some((*min, *max))
    }
}

/// The 99th percentile of sorted times (the value below which 99% of them
/// lie: the largest of fewer than a hundred); 0 for none.
pub fn p99_of_sorted(sorted: &[u64]) -> u64 {
    match sorted.len() {
        0 => 0,
        n => sorted[(n * 99 / 100).min(n - 1)],
    }
}

/// The middle of the times once sorted (the upper one of an even count); 0
/// for none. Selected, not sorted: totals take it of every call so far each
/// time a conversation is added.
pub fn median(times: &[u64]) -> u64 {
    if times.is_empty() {
        return 0;
    }
    let mut times = times.to_vec();
    let middle = times.len() / 2;
    *times.select_nth_unstable(middle).1
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_median_is_the_middle_call() {
        assert_eq!(median(&[]), 0);
        assert_eq!(median(&[4]), 4);
        assert_eq!(median(&[9, 1, 2]), 2);
        assert_eq!(median(&[8, 1, 9, 2]), 8);
    }

    #[test]
    fn a_slow_call_shows_in_its_tenth_only() {
        let mut times = vec![10u64; 95];
        times[93] = 700;
        let t = TenthsP99::of(&times);
        assert_eq!(t.calls, 95);
        // Ten runs of 9 or 10 calls: the last holds calls 85-94.
        assert_eq!(t.p99_us.len(), 10);
        assert_eq!(t.p99_us[9], 700);
        assert!(t.p99_us[..9].iter().all(|&p| p == 10), "{t:?}");
        assert_eq!(t.range(), Some((10, 700)));
    }

    #[test]
    fn short_and_empty_sessions() {
        assert_eq!(TenthsP99::of(&[]).range(), None);
        assert_eq!(TenthsP99::of(&[5, 9, 7]).p99_us, vec![5, 9, 7]);
    }

    #[test]
    fn totals_keep_the_longest_session() {
        let mut total = TenthsP99::of(&[1; 20]);
        total.absorb(&TenthsP99::of(&[2; 5]));
        assert_eq!(total.calls, 20);
        total.absorb(&TenthsP99::of(&[3; 30]));
        assert_eq!((total.calls, total.range()), (30, Some((3, 3))));
    }

    proptest! {
        /// The median selected is the middle of the times sorted.
        #[test]
        fn the_median_is_the_middle_once_sorted(times in proptest::collection::vec(0u64..50, 1..100)) {
            let mut sorted = times.clone();
            sorted.sort_unstable();
            prop_assert_eq!(median(&times), sorted[sorted.len() / 2]);
        }

        /// Every call falls in exactly one tenth, in order; there are ten
        /// of nearly equal length (one per call under ten calls); each
        /// tenth's p99 is one of its own calls and at most 1% are slower.
        #[test]
        fn tenths_cover_the_calls(times in proptest::collection::vec(0u64..1000, 0..300)) {
            let t = TenthsP99::of(&times);
            prop_assert_eq!(t.calls as usize, times.len());
            let runs: Vec<_> = tenths(times.len()).collect();
            prop_assert_eq!(runs.len(), times.len().min(10));
            prop_assert_eq!(t.p99_us.len(), runs.len());
            let mut next = 0;
            for (run, p99) in runs.iter().zip(&t.p99_us) {
                prop_assert_eq!(run.start, next);
                next = run.end;
                let chunk = &times[run.clone()];
                prop_assert!(chunk.len() == times.len() / runs.len() || chunk.len() == times.len() / runs.len() + 1);
                prop_assert!(chunk.contains(p99));
                let above = chunk.iter().filter(|&&x| x > *p99).count();
                prop_assert!(above * 100 <= chunk.len(), "{} above {} of {}", above, p99, chunk.len());
            }
            prop_assert_eq!(next, times.len());
        }
    }
}
