//! The pipeline's time per model call, in call order, as `whittle replay`
//! measures it (the recorded calls, their timestamps and the cache model):
//! whether its cost stays flat as a session grows. `cargo run --release -p
//! whittle-replay --example pipeline_per_call -- POLICY PATH
//! [WINDOW_TOKENS]` prints `call<TAB>microseconds` lines for the
//! conversation with the most calls under PATH (a file or a folder), then
//! its median and p99 by tenths of the session, then the median, p90 and
//! p99 per call over every conversation. The window is 32,000 tokens unless
//! given. Each call's time is the best of three runs: the machine is
//! shared, the minimum is the signal.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::PathBuf;
use whittle_context::Summarizer;
use whittle_replay::{
    Policy, ReplayConfig, StandInSummarizer, TenthsP99, median, p99_of_sorted, replay_paths, tenths,
};

fn main() {
    let mut args = std::env::args().skip(1);
    let policy = args
        .next()
        .and_then(|p| Policy::parse(&p))
        .unwrap_or(Policy::Teaching);
    let root = PathBuf::from(args.next().unwrap_or_else(|| "../shared/traces".into()));
    let window = args.next().and_then(|w| w.parse().ok()).unwrap_or(32_000);
    let config = ReplayConfig::for_window(window);
    let mut factory = || Box::new(StandInSummarizer::default()) as Box<dyn Summarizer>;
    // Per conversation: its id and the best time of each call.
    let mut best: Vec<(String, Vec<u64>)> = Vec::new();
    for run in 0..3 {
        let summary = replay_paths(
            std::slice::from_ref(&root),
            &[policy],
            &config,
            &mut factory,
            "stand-in",
        );
        for (k, row) in summary.conversations.into_iter().enumerate() {
            let times = row.reports.into_iter().next().unwrap().pipeline_us_by_call;
            if run == 0 {
                best.push((row.id, times));
            } else {
                for (b, t) in best[k].1.iter_mut().zip(times) {
                    *b = (*b).min(t);
                }
            }
        }
    }
    let (id, longest) = best
        .iter()
        .max_by_key(|(_, t)| t.len())
        .expect("no conversation under the path");
    eprintln!(
        "{id} ({} calls) under {} at {window} tokens",
        longest.len(),
        policy.name()
    );
    for (i, us) in longest.iter().enumerate() {
        println!("{i}\t{us}");
    }
    let p99 = TenthsP99::of(longest).p99_us;
    for (run, p99) in tenths(longest.len()).zip(p99) {
        eprintln!(
            "calls {:>4}-{:<4} median {:>6} us, p99 {:>6} us",
            run.start,
            run.end - 1,
            median(&longest[run.clone()]),
            p99
        );
    }
    let mut every: Vec<u64> = best.iter().flat_map(|(_, t)| t.iter().copied()).collect();
    every.sort_unstable();
    eprintln!(
        "all {} conversations, {} calls: median {} us, p90 {} us, p99 {} us, total {} ms",
        best.len(),
        every.len(),
        median(&every),
        every[every.len() * 9 / 10],
        p99_of_sorted(&every),
        every.iter().sum::<u64>() / 1000
    );
}
