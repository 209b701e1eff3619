//! Tick labels in dollars that tell their ticks apart at any scale: a
//! session of a few hundred tokens costs a hundredth of a cent, and four
//! decimals would print `$0.0001, $0.0001, $0.0000` on its axis.

use plotters::coord::ranged1d::Ranged;
use plotters::coord::types::RangedCoordf64;

/// How many decimals the labels of an axis from 0 to `top` with at most
/// `labels` ticks need: those of the step between ticks (plotters steps by
/// 1, 2 or 5 times a power of ten), and never fewer than cents.
pub fn dollar_decimals(top: f64, labels: usize) -> usize {
    let ticks = RangedCoordf64::from(0.0..top.max(f64::MIN_POSITIVE)).key_points(labels);
    let step = ticks
        .windows(2)
        .map(|w| w[1] - w[0])
        .fold(f64::INFINITY, f64::min);
    let step = if step.is_finite() && step > 0.0 {
        step
    } else {
        top
    };
    if !(step.is_finite() && step > 0.0) {
        return 2;
    }
    // A step of 5e-5 needs 5 decimals, one of 1e-4 needs 4: the power of
    // ten of its first significant digit, with room for rounding.
    let decimals = (-step.log10() - 1e-9).ceil();
    (decimals.max(2.0) as usize).min(12)
}

/// `x` in dollars with `decimals` decimals.
pub fn dollars(x: f64, decimals: usize) -> String {
    format!("${x:.decimals$}")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use proptest::prelude::*;

    fn labels(top: f64, n: usize) -> Vec<String> {
        let decimals = dollar_decimals(top, n);
        RangedCoordf64::from(0.0..top)
            .key_points(n)
            .into_iter()
            .map(|x| dollars(x, decimals))
            .collect()
    }

    #[test]
    fn a_hundredth_of_a_cent_gets_the_digits_it_needs() {
        assert_eq!(labels(0.000165, 3), ["$0.0000", "$0.0001"]);
        assert_eq!(
            labels(0.000165, 5),
            ["$0.00000", "$0.00005", "$0.00010", "$0.00015"]
        );
        // Dollars and more: cents, as everywhere else.
        assert!(
            labels(12.0, 5).iter().all(|l| l.ends_with(".00")),
            "{:?}",
            labels(12.0, 5)
        );
    }

    proptest! {
        /// At any scale the ticks read differently and none reads as more
        /// than a rounding of its value.
        #[test]
        fn ticks_are_told_apart_at_any_scale(exp in -7.0f64..4.0, mantissa in 1.0f64..10.0, n in 2usize..8) {
            let top = mantissa * 10f64.powf(exp);
            let decimals = dollar_decimals(top, n);
            let ticks = RangedCoordf64::from(0.0..top).key_points(n);
            let shown: Vec<String> = ticks.iter().map(|&x| dollars(x, decimals)).collect();
            let mut distinct = shown.clone();
            distinct.dedup();
            prop_assert_eq!(&distinct, &shown, "top {}", top);
            for (x, s) in ticks.iter().zip(&shown) {
                let back: f64 = s.trim_start_matches('$').parse().unwrap();
                prop_assert!((back - x).abs() <= 0.5 * 10f64.powi(-(decimals as i32)) + 1e-15, "{} vs {}", s, x);
            }
        }
    }
}
