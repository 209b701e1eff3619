//! Cost of `prepare` before a model call, on synthetic histories of 100,
//! 1,000 and 10,000 messages with tool results of mixed sizes (up to ~50 MB).
//!
//! - steady: new turns appended to an already-compacted history, one call
//!   each, in runs of 20 calls on one history (so that what a call leaves
//!   to the next, such as a ledger to record again after a result was
//!   replaced by its preview, is measured too): the common case, whose cost
//!   must not grow with the history;
//! - steady_ahead: the same, with the work a harness does off the call's
//!   path not measured: its tools save big outputs while they run, and
//!   `Compactor::prepare_ahead` runs while the model answers;
//! - steady_cached: steady_ahead with the provider's cache state given
//!   before each call (warm, a few seconds idle), as the agent and replay
//!   run the default policy: the cost model's decisions (whether a
//!   rewrite pays, whether a compaction in the band is covered by the
//!   session's savings) are on every call's path;
//! - first_compaction: the first time the history goes over the limit.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use serde_json::json;
use std::hint::black_box;
use whittle_context::{
    CachePrices, CacheState, Compactor, History, Limits, SummarizeError, Summarizer, TokenBudget,
    TokenMeter,
};
use whittle_protocol::{Block, Message};
use whittle_store::Store;

struct Fixed;
impl Summarizer for Fixed {
    fn summarize(
        &mut self,
        _: whittle_context::SummaryInput<'_>,
        _: Option<&str>,
        _: &str,
        _: usize,
    ) -> Result<String, SummarizeError> {
        Ok("summary ".repeat(250))
    }
}

/// Result sizes cycle through small, medium and large, ~10 KB on average.
fn result_size(i: usize) -> usize {
    [200, 1_500, 4_000, 9_000, 35_000][i % 5]
}

fn turn(i: usize) -> [Message; 2] {
    let id = format!("toolu_{i:08}");
    [
        Message::assistant_blocks(vec![
            Block::text(format!("Step {i}: looking at the next file.")),
            Block::tool_use(&id, "read_file", json!({"path": format!("src/f{i}.rs")})),
        ]),
        Message::user_blocks(vec![Block::tool_result(
            &id,
            format!("{i} fn main() {{}}\n").repeat(result_size(i) / 16),
            false,
        )]),
    ]
}

fn history(messages: usize) -> History {
    let mut h = History::new(vec![Message::user("Refactor the crate.")]);
    for i in 0..messages / 2 {
        for m in turn(i) {
            h.push(m);
        }
    }
    h
}

/// What the agent's tools do with an output past `persist_results_above`:
/// saved while it streams, before the pipeline sees it (replay's
/// `save_outputs_as_tools_do`), so the call only names the file.
fn save_as_tools_do(c: &Compactor, m: &Message) {
    let Some(above) = c.limits().persist_results_above else {
        return;
    };
    for result in m.tool_results() {
        if result.content_chars() > above {
            c.store()
                .save_ahead(&result.tool_use_id, &result.full_text())
                .unwrap();
        }
    }
}

fn compactor(dir: &std::path::Path) -> Compactor {
    let limits = Limits::tokens(TokenBudget::new(1_000_000, 32_000));
    Compactor::new(limits, Store::new(dir), Box::new(TokenMeter::default()))
}

/// The provider's cache before call `i` of a session's steady part, or
/// none without `cached`: warm (the previous call was seconds ago), the
/// session having made as many calls as it has turns.
fn cache_state(cached: bool, n: usize, i: u64) -> Option<CacheState> {
    cached.then_some(CacheState {
        prices: CachePrices::ANTHROPIC_5M,
        ttl_ms: 300_000,
        idle_ms: Some(8_000),
        calls_so_far: (n / 2) as u64 + i,
    })
}

/// A compactor and the history of `n` messages it compacted, then one call
/// later (the history's ledger is then kept up to date, read back from the
/// marker once, as in a session): the start of every steady run.
fn compacted(dir: &std::path::Path, n: usize, cached: bool) -> (Compactor, History) {
    let mut c = compactor(dir);
    c.set_cache_state(cache_state(cached, n, 0));
    let mut h = history(n);
    let call = |c: &mut Compactor, h: &mut History| {
        c.prepare(h, "Refactor the crate.", &mut Fixed);
        h.mark();
        c.prepare_ahead(h);
    };
    call(&mut c, &mut h);
    for m in turn(n) {
        h.push(m);
    }
    call(&mut c, &mut h);
    (c, h)
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("prepare");
    group.sample_size(20);
    for n in [100usize, 1_000, 10_000] {
        let mut next = n;
        for (name, ahead, cached) in [
            ("steady", false, false),
            ("steady_ahead", true, false),
            ("steady_cached", true, true),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let (mut steady, compacted) = compacted(dir.path(), n, cached);
            group.bench_with_input(BenchmarkId::new(name, n), &n, |b, _| {
                // Calls in a row on one history, as a session makes them:
                // what a call leaves to the next (a memo to bring up to
                // date after an edit) is paid where it falls. Every RUN
                // calls the history starts again from the compacted one,
                // outside the measurement. With `ahead`, the work a
                // harness does while the model answers follows each call,
                // unmeasured: the calls' own path.
                const RUN: u64 = 20;
                b.iter_custom(|iters| {
                    let mut spent = std::time::Duration::ZERO;
                    let mut h = compacted.clone();
                    for i in 0..iters {
                        if i > 0 && i % RUN == 0 {
                            h = compacted.clone();
                        }
                        next += 2;
                        for m in turn(next) {
                            if ahead {
                                save_as_tools_do(&steady, &m);
                            }
                            h.push(m);
                        }
                        steady.set_cache_state(cache_state(cached, n, i % RUN + 1));
                        let start = std::time::Instant::now();
                        let outcome = steady.prepare(&mut h, "Refactor the crate.", &mut Fixed);
                        spent += start.elapsed();
                        black_box(outcome);
                        // The request is sent: its prefix is what the
                        // provider holds for the next call.
                        h.mark();
                        if ahead {
                            steady.prepare_ahead(&mut h);
                        }
                    }
                    spent
                })
            });
        }
        let fresh = history(n);
        group.bench_with_input(BenchmarkId::new("first_compaction", n), &n, |b, _| {
            b.iter_batched(
                || (fresh.clone(), tempfile::tempdir().unwrap()),
                |(mut h, dir)| {
                    let mut c = compactor(dir.path());
                    let outcome = c.prepare(&mut h, "Refactor the crate.", &mut Fixed);
                    (h, dir, black_box(outcome))
                },
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
