//! Replay invariants on every shared trace under every policy, at the
//! window the issue sets (32,000 tokens): nothing lost, every request valid,
//! `none` shows where the window overflows, `default` never exceeds it and
//! costs no more than `none`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::shared_traces as traces;

use whittle_context::replay::{
    Policy, ReplayConfig, StandInSummarizer, render_table, replay_paths,
};

#[test]
fn every_policy_on_every_shared_trace_keeps_the_invariants() {
    let config = ReplayConfig::for_window(32_000);
    let summary = replay_paths(
        &[traces()],
        &Policy::ALL,
        &config,
        &mut || Box::new(StandInSummarizer::default()),
        "stand-in",
    );
    assert!(summary.errors.is_empty(), "{:?}", summary.errors);
    assert!(
        summary.conversations.len() >= 50,
        "{}",
        summary.conversations.len()
    );
    let column = |name: &str| summary.policies.iter().position(|p| p == name).unwrap();
    let (none, teaching, default, mask) = (
        column("none"),
        column("teaching"),
        column("default"),
        column("mask"),
    );
    for c in &summary.conversations {
        for r in &c.reports {
            assert_eq!(r.unrecoverable_chars, 0, "{} under {}", c.id, r.policy);
            assert_eq!(r.invalid_requests, 0, "{} under {}", c.id, r.policy);
            assert_eq!(
                r.input_tokens,
                r.cache_read_tokens + r.cache_write_tokens + r.uncached_tokens
            );
        }
        let n = &c.reports[none];
        assert_eq!(n.over_window as usize, n.overflow_calls.len());
        if n.peak_tokens > 32_000 {
            assert!(
                n.over_window > 0 && !n.overflow_calls.is_empty(),
                "{}",
                c.id
            );
        }
        let d = &c.reports[default];
        assert_eq!(
            d.over_window, 0,
            "{}: default sent {} requests over the window",
            c.id, d.over_window
        );
        assert!(d.peak_tokens <= 32_000, "{}", c.id);
        assert_eq!(c.reports[teaching].over_window, 0, "{}", c.id);
    }
    let t = &summary.totals;
    assert!(
        t[none].over_window > 0,
        "the traces do overflow a 32k window"
    );
    assert!(
        t[default].cost_usd <= t[none].cost_usd,
        "{}",
        render_table(&summary)
    );
    assert!(
        t[default].cost_usd < 0.8 * t[teaching].cost_usd,
        "{}",
        render_table(&summary)
    );
    assert!(
        t[default].cost_usd < 0.8 * t[mask].cost_usd,
        "{}",
        render_table(&summary)
    );
    let table = render_table(&summary);
    assert!(table.contains("estimated cost") && table.contains("default"));
}
