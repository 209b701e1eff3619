//! Replays trace folders under every policy and prints the summary as JSON:
//! `cargo run --release -p whittle-replay --example replay -- WINDOW PATH...`
//! (`whittle replay` is the same for users, with a table; this one needs no binary.)
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::PathBuf;
use whittle_replay::{Policy, ReplayConfig, StandInSummarizer, replay_paths};

fn main() {
    let mut args = std::env::args().skip(1);
    let window: u64 = args.next().and_then(|w| w.parse().ok()).unwrap_or(32_000);
    let paths: Vec<PathBuf> = args.map(PathBuf::from).collect();
    let config = ReplayConfig::for_window(window);
    let summary = replay_paths(
        &paths,
        &Policy::ALL,
        &config,
        &mut || Box::new(StandInSummarizer::default()),
        "stand-in, up to 2000 chars",
    );
    println!("{}", serde_json::to_string_pretty(&summary).unwrap());
}
