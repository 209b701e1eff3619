//! Replays every shared trace (or, without them, the test fixtures) under
//! `none`, `teaching` and `default` at a 32,000-token window: the pipeline's cost on
//! real sessions, end to end (import once, then rebuild each history call by
//! call, prepare, price, check recovery).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use std::path::PathBuf;
use whittle_replay::{Policy, ReplayConfig, StandInSummarizer, import_tree, replay_conversation};

fn bench(c: &mut Criterion) {
    // At run time: a shared target dir may hold a binary built in another clone.
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from);
    // The recorded sessions beside the repository, else our own fixtures.
    let traces = testkit::shared_traces_dir();
    let (set, root) = if traces.is_dir() {
        ("shared_traces", traces)
    } else {
        eprintln!(
            "replay bench: {} not found; replaying tests/fixtures instead",
            traces.display()
        );
        ("fixtures", manifest.join("tests/fixtures"))
    };
    let conversations: Vec<_> = import_tree(&root)
        .into_iter()
        .filter_map(|f| f.result.ok())
        .flatten()
        .collect();
    let config = ReplayConfig::for_window(32_000);
    let mut group = c.benchmark_group("replay");
    group.sample_size(10);
    for policy in [Policy::None, Policy::Teaching, Policy::Default] {
        group.bench_function(format!("{set}/{}", policy.name()), |b| {
            b.iter(|| {
                let mut calls = 0;
                for conv in &conversations {
                    let dir = tempfile::tempdir().unwrap();
                    let r = replay_conversation(
                        &conv.id,
                        &conv.messages,
                        conv.system.as_deref(),
                        policy,
                        &config,
                        &mut StandInSummarizer::default(),
                        dir.path(),
                    );
                    calls += r.calls;
                }
                black_box(calls)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
