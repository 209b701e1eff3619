#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]
use std::path::PathBuf;
use whittle_context::Summarizer;
use whittle_replay::{Policy, ReplayConfig, StandInSummarizer, replay_paths};
fn main() {
    let mut args = std::env::args().skip(1);
    let root = PathBuf::from(args.next().unwrap());
    let n: usize = args.next().unwrap().parse().unwrap();
    let config = ReplayConfig::for_window(args.next().map_or(32_000, |w| w.parse().unwrap()));
    let mut factory = || Box::new(StandInSummarizer::default()) as Box<dyn Summarizer>;
    let mut all = Vec::new();
    for _ in 0..n {
        let s = replay_paths(
            std::slice::from_ref(&root),
            &[Policy::Default],
            &config,
            &mut factory,
            "stand-in",
        );
        for row in s.conversations {
            all.extend(row.reports.into_iter().next().unwrap().pipeline_us_by_call);
        }
    }
    all.sort();
    println!("n={} min={} med={} ", all.len(), all[0], all[all.len() / 2]);
}
