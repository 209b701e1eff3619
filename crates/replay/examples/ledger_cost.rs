//! What the state ledger costs: `default` replayed side by side with and
//! without it (`ledger_tokens = 0`) over a folder of traces, at one window.
//! `cargo run --release -p whittle-replay --example ledger_cost -- [PATH]
//! [WINDOW]` prints cost, cache reads and writes, summaries and peak for
//! both, and the ratio.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::PathBuf;
use whittle_replay::{Policy, ReplayConfig, StandInSummarizer, replay_paths};

fn main() {
    let mut args = std::env::args().skip(1);
    let root = PathBuf::from(args.next().unwrap_or_else(|| "../shared/traces".into()));
    let window: u64 = args.next().map_or(32_000, |w| w.parse().unwrap());
    let with = ReplayConfig::for_window(window);
    let mut without = ReplayConfig::for_window(window);
    let mut limits = without.default_limits();
    limits.ledger_tokens = 0;
    without.default_limits = Some(limits);
    let mut rows = Vec::new();
    let mut per: Vec<Vec<(String, f64, u64)>> = Vec::new();
    for (name, config) in [("without ledger", &without), ("with ledger", &with)] {
        let mut make = || Box::new(StandInSummarizer::default()) as Box<_>;
        let summary = replay_paths(
            std::slice::from_ref(&root),
            &[Policy::Default],
            config,
            &mut make,
            "stand-in",
        );
        let t = &summary.totals[0];
        println!(
            "{name:>15}: ${:.2}  cache reads {}  writes {}  summaries {}  over window {}",
            t.cost_usd, t.cache_read_tokens, t.cache_write_tokens, t.summarize_calls, t.over_window
        );
        rows.push(t.cost_usd);
        per.push(
            summary
                .conversations
                .iter()
                .map(|c| {
                    (
                        c.reports[0].conversation.clone(),
                        c.reports[0].cost_usd,
                        c.reports[0].over_window,
                    )
                })
                .collect(),
        );
    }
    let mut deltas: Vec<_> = per[0]
        .iter()
        .zip(&per[1])
        .map(|(a, b)| (b.1 - a.1, a.0.clone(), a.1, b.1, a.2, b.2))
        .collect();
    deltas.sort_by(|a, b| b.0.total_cmp(&a.0));
    for d in deltas.iter().take(12) {
        println!(
            "{:+8.3} {:>8.3} -> {:>8.3} over {} -> {}  {}",
            d.0, d.2, d.3, d.4, d.5, d.1
        );
    }
    println!("cost with / without: {:.4}", rows[1] / rows[0]);
}
