//! The sessions shipped in the repository's `traces/` (recorded by us from a
//! real Claude Code against a scripted model: see `traces/README.md`), which
//! the README's replay and report examples read: every one imports as
//! recorded and replays with totals that add up and agree with its bill.

use crate::common;

use common::checks::{
    claude_code_content_is_kept_verbatim, claude_code_counts_agree_with_the_raw_events, only,
    replay_keeps_the_invariants, tool_pairs, valid_and_round_trips_through_serde,
};
use common::shipped_traces;
use whittle_replay::{
    Format, Measured, Policy, ReplayConfig, ReplaySummary, StandInSummarizer, replay_paths,
    trace_files,
};

/// The window of the README's example (`--window-tokens 32000 traces/`).
const WINDOW: u64 = 32_000;

fn replay_shipped() -> ReplaySummary {
    replay_paths(
        &[shipped_traces()],
        &Policy::ALL,
        &ReplayConfig::for_window(WINDOW),
        &mut || Box::new(StandInSummarizer::default()),
        "stand-in",
    )
}

#[test]
fn every_shipped_session_imports_as_recorded() {
    let files: Vec<_> = trace_files(&shipped_traces())
        .into_iter()
        .map(|f| f.unwrap())
        .collect();
    assert!(files.len() >= 2, "{files:?}");
    let mut boundaries = 0;
    for path in &files {
        let c = only(path);
        assert_eq!(c.format, Format::ClaudeCode, "{}", path.display());
        claude_code_counts_agree_with_the_raw_events(path, &c);
        claude_code_content_is_kept_verbatim(path, &c);
        valid_and_round_trips_through_serde(&c);
        assert!(
            tool_pairs(&c) >= 5,
            "{}: {} tool calls",
            c.id,
            tool_pairs(&c)
        );
        assert!(!c.calls.is_empty(), "{}: no recorded calls", c.id);
        boundaries += c.compaction_boundaries.len();
    }
    assert!(boundaries >= 1, "one session compacts (/compact)");
}

#[test]
fn the_shipped_sessions_replay_with_totals_that_add_up_and_match_their_bill() {
    let summary = replay_shipped();
    replay_keeps_the_invariants(&summary, WINDOW);
    let files = trace_files(&shipped_traces()).len();
    assert_eq!(summary.conversations.len(), files);
    let recorded = summary.recorded.expect("the sessions carry their usage");
    for c in &summary.conversations {
        assert_eq!(c.measured, Measured::Exact, "{}", c.id);
    }
    for t in &summary.totals {
        assert_eq!(t.calls, recorded.calls, "{}", t.policy);
        assert!(t.cost_usd > 0.0 && t.input_tokens > 0, "{}", t.policy);
        assert!(t.cache_read_tokens > 0, "{}", t.policy);
    }
    // A session that did not compact replays as billed under `none`.
    let uncompacted = summary
        .conversations
        .iter()
        .find(|c| c.recorded_survival.is_none())
        .expect("a session without /compact");
    let error = uncompacted.none_vs_recorded.unwrap().cost.unwrap();
    assert!(
        error.abs() < 1.0,
        "{}: none is {error:+.2}% off its bill",
        uncompacted.id
    );
}
