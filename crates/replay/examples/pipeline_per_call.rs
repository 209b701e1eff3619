//! The pipeline's time per model call, in call order, for the longest
//! conversation under a folder: whether its cost stays flat as a session
//! grows. `cargo run --release -p whittle-replay --example pipeline_per_call
//! -- POLICY PATH` prints `call<TAB>microseconds` lines, then a summary by
//! tenths of the session, then the median per call over every conversation
//! under the folder.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::PathBuf;
use whittle_replay::{Policy, ReplayConfig, StandInSummarizer, import_tree, replay_conversation};

fn main() {
    let mut args = std::env::args().skip(1);
    let policy = args
        .next()
        .and_then(|p| Policy::parse(&p))
        .unwrap_or(Policy::Teaching);
    let root = PathBuf::from(args.next().unwrap_or_else(|| "../shared/traces".into()));
    let all: Vec<_> = import_tree(&root)
        .into_iter()
        .filter_map(|f| f.result.ok())
        .flatten()
        .collect();
    let longest = all
        .iter()
        .max_by_key(|c| c.messages.len())
        .expect("no conversation under the folder");
    let config = ReplayConfig::for_window(32_000);
    let dir = tempfile::tempdir().unwrap();
    // Best of three runs per call: the machine is shared, the minimum is the signal.
    let mut best: Vec<u64> = Vec::new();
    for _ in 0..3 {
        let r = replay_conversation(
            &longest.id,
            &longest.messages,
            longest.system.as_deref(),
            policy,
            &config,
            &mut StandInSummarizer::default(),
            dir.path(),
        );
        if best.is_empty() {
            best = r.pipeline_us_by_call;
        } else {
            for (b, t) in best.iter_mut().zip(r.pipeline_us_by_call) {
                *b = (*b).min(t);
            }
        }
    }
    eprintln!(
        "{} ({} messages, {} calls) under {}",
        longest.id,
        longest.messages.len(),
        best.len(),
        policy.name()
    );
    for (i, us) in best.iter().enumerate() {
        println!("{i}\t{us}");
    }
    let tenth = best.len().div_ceil(10).max(1);
    for (k, chunk) in best.chunks(tenth).enumerate() {
        let mut sorted = chunk.to_vec();
        sorted.sort_unstable();
        eprintln!(
            "calls {:>4}-{:<4} median {:>6} us",
            k * tenth,
            k * tenth + chunk.len() - 1,
            sorted[sorted.len() / 2]
        );
    }
    let mut every: Vec<u64> = Vec::new();
    for c in &all {
        let dir = tempfile::tempdir().unwrap();
        let r = replay_conversation(
            &c.id,
            &c.messages,
            c.system.as_deref(),
            policy,
            &config,
            &mut StandInSummarizer::default(),
            dir.path(),
        );
        every.extend(r.pipeline_us_by_call);
    }
    every.sort_unstable();
    eprintln!(
        "all {} conversations, {} calls: median {} us, p90 {} us, total {} ms",
        all.len(),
        every.len(),
        every[every.len() / 2],
        every[every.len() * 9 / 10],
        every.iter().sum::<u64>() / 1000
    );
}
