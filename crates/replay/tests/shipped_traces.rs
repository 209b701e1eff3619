//! The sessions shipped in the repository's `traces/` (recorded by us from a
//! real Claude Code against a scripted model: see `traces/README.md`), which
//! the README's replay and report examples read: every one imports as
//! recorded, replays with totals that add up and agree with its bill, and
//! the README's table is what replay says of them, so that neither the
//! example nor the table can rot.

use crate::common;

use common::checks::{
    claude_code_content_is_kept_verbatim, claude_code_counts_agree_with_the_raw_events, only,
    replay_keeps_the_invariants, tool_pairs, valid_and_round_trips_through_serde,
};
use common::{readme, shipped_traces};
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
/// The cells of the README table's row whose first cell starts with `name`.
fn readme_row(readme: &str, name: &str) -> Vec<String> {
    readme
        .lines()
        .find(|l| {
            l.trim_start_matches("| ")
                .trim_start_matches("**")
                .starts_with(name)
        })
        .unwrap_or_else(|| panic!("no README row for {name}"))
        .split('|')
        .map(|cell| cell.trim().trim_matches('*').to_owned())
        .filter(|cell| !cell.is_empty())
        .collect()
}

#[test]
fn the_readme_table_is_what_replay_says_of_the_shipped_traces() {
    let text = std::fs::read_to_string(readme()).unwrap();
    assert!(
        text.contains(&format!("replay --window-tokens {WINDOW} traces/")),
        "the README's example replays traces/ at {WINDOW} tokens"
    );
    let summary = replay_shipped();
    let none = summary.totals[0].cost_usd;
    for t in &summary.totals {
        let row = readme_row(&text, &t.policy);
        let expected = [
            format!("${:.2}", t.cost_usd),
            format!("{:.2}x", t.cost_usd / none),
            format!("{:.1}%", 100.0 * t.cache_read_share()),
            t.over_window.to_string(),
        ];
        assert_eq!(row[1..5], expected, "README row {row:?}");
    }
}
