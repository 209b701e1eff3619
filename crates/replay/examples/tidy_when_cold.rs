//! Issue 16's idle-gap experiment: `default` with and without
//! `ReplayConfig::tidy_when_cold` (clear old tool results when the prompt
//! cache went cold over an idle gap longer than its TTL) on the same traces,
//! at 32k and 200k windows: cost, cache writes and survival side by side,
//! in total and for every conversation whose cost differs.
//! `cargo run -p whittle-replay --example tidy_when_cold -- [PATH]`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::PathBuf;
use whittle_replay::{
    COLD_TIDY, Policy, ReplayConfig, ReplayReport, StandInSummarizer, Tally, replay_paths,
};

fn main() {
    let root = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "../shared/traces".into()),
    );
    let pct = |t: Tally| t.percent().map_or("-".into(), |p| format!("{p:.1}%"));
    println!(
        "{:>8} {:>5} {:>10} {:>10} {:>10} {:>10} {:>8} {:>8} {:>8} {:>8} {:>6}",
        "window",
        "cold",
        "cost",
        "writes",
        "reads",
        "summaries",
        "paths",
        "commands",
        "person",
        "tidied",
        "calls"
    );
    for window in [32_000, 200_000] {
        let mut by_conversation: Vec<Vec<ReplayReport>> = Vec::new();
        for tidy in [false, true] {
            let config = ReplayConfig {
                tidy_when_cold: tidy,
                ..ReplayConfig::for_window(window)
            };
            let summary = replay_paths(
                std::slice::from_ref(&root),
                &[Policy::Default],
                &config,
                &mut || Box::new(StandInSummarizer::default()),
                "stand-in",
            );
            let t = &summary.totals[0];
            let s = &t.survival;
            println!(
                "{:>8} {:>5} {:>10} {:>10} {:>10} {:>10} {:>8} {:>8} {:>8} {:>8} {:>6}",
                window,
                if tidy { "on" } else { "off" },
                format!("${:.3}", t.cost_usd),
                t.cache_write_tokens,
                t.cache_read_tokens,
                t.summarize_calls,
                pct(s.paths),
                pct(s.commands),
                pct(s.person),
                t.steps.get(COLD_TIDY).copied().unwrap_or(0),
                t.calls,
            );
            for (k, c) in summary.conversations.iter().enumerate() {
                if by_conversation.len() <= k {
                    by_conversation.push(Vec::new());
                }
                by_conversation[k].push(c.reports[0].clone());
            }
        }
        for reports in &by_conversation {
            let [off, on] = reports.as_slice() else {
                continue;
            };
            if (off.cost_usd - on.cost_usd).abs() > 1e-9 {
                println!(
                    "    {}: ${:.3} -> ${:.3} ({:+.1}%), tidied {} times",
                    off.conversation,
                    off.cost_usd,
                    on.cost_usd,
                    100.0 * (on.cost_usd - off.cost_usd) / off.cost_usd,
                    on.steps.get(COLD_TIDY).copied().unwrap_or(0)
                );
            }
        }
    }
}
