//! Fewer points for long curves, so a 3,000-call conversation costs the page
//! as much as a 200-call one, without hiding what a reader looks for: the
//! peaks, and the calls around every compaction.

/// Points a curve keeps at most, besides those kept for markers.
pub const MAX_POINTS: usize = 240;

/// The calls of `values` (one per call) to draw: all of them when there are
/// at most [`MAX_POINTS`]; else, per bucket of calls, its first, lowest and
/// highest call, plus every call in `keep` and the call before it (so a
/// marked drop shows as the drop it was). Sorted, without repeats.
pub fn downsample(values: &[u64], keep: &[u64]) -> Vec<usize> {
    let n = values.len();
    if n <= MAX_POINTS {
        return (0..n).collect();
    }
    let buckets = MAX_POINTS / 3;
    let mut picked: Vec<usize> = Vec::with_capacity(MAX_POINTS + 2 * keep.len() + 1);
    for b in 0..buckets {
        let start = b * n / buckets;
        let end = ((b + 1) * n / buckets).max(start + 1);
        let slice = &values[start..end];
        picked.push(start);
        if let Some((i, _)) = slice.iter().enumerate().max_by_key(|(_, v)| **v) {
            picked.push(start + i);
        }
        if let Some((i, _)) = slice.iter().enumerate().min_by_key(|(_, v)| **v) {
            picked.push(start + i);
        }
    }
    picked.push(n - 1);
    for &call in keep {
        let call = usize::try_from(call).unwrap_or(usize::MAX);
        if call < n {
            picked.push(call);
            if call > 0 {
                picked.push(call - 1);
            }
        }
    }
    picked.sort_unstable();
    picked.dedup();
    picked
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn keeps_ends_peak_and_every_marker(
            values in prop::collection::vec(0u64..1_000_000, 0..3_000),
            marks in prop::collection::vec(0u64..3_500, 0..400),
        ) {
            let kept = downsample(&values, &marks);
            prop_assert!(kept.windows(2).all(|w| w[0] < w[1]));
            prop_assert!(kept.iter().all(|&i| i < values.len()));
            if values.is_empty() {
                prop_assert!(kept.is_empty());
                return Ok(());
            }
            prop_assert_eq!(kept.first(), Some(&0));
            prop_assert_eq!(kept.last(), Some(&(values.len() - 1)));
            let peak = values.iter().max().copied();
            prop_assert_eq!(kept.iter().map(|&i| values[i]).max(), peak);
            for &m in &marks {
                if (m as usize) < values.len() {
                    prop_assert!(kept.binary_search(&(m as usize)).is_ok());
                }
            }
            let in_range = marks.iter().filter(|&&m| (m as usize) < values.len()).count();
            prop_assert!(kept.len() <= MAX_POINTS + 1 + 2 * in_range);
        }
    }

    #[test]
    fn short_curves_stay_whole() {
        let values: Vec<u64> = (0..100).collect();
        assert_eq!(downsample(&values, &[5]), (0..100).collect::<Vec<_>>());
    }
}
