//! The importers and replay on `tests/fixtures`: small sessions we wrote in
//! each format (see the README there), so that a lone clone tests every
//! feature the recorded sessions of `../shared/traces` exercise. The same
//! checks run on those in the `traces` suite.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::checks::{
    Boundaries, assistants, boundaries_of, claude_code_content_is_kept_verbatim,
    claude_code_counts_agree_with_the_raw_events,
    mini_swe_agent_bash_blocks_become_calls_and_outputs_their_results, only,
    replay_keeps_the_invariants, tool_pairs, valid_and_round_trips_through_serde,
};
use common::fixtures;
use serde_json::{Value, json};
use std::path::PathBuf;
use whittle_protocol::{Block, Content, Message, Role};
use whittle_replay::{
    CacheTtl, Format, ImportError, Measured, Policy, RAW_ARGUMENTS_KEY, ReplayConfig, ReplayReport,
    ReplaySummary, StandInSummarizer, import_path, import_tree, replay_paths, trace_files,
};

/// Claude Code: (file, id, messages, assistant messages, tool pairs,
/// boundaries), counted by hand from the events we wrote.
const CLAUDE_CODE: &[(&str, &str, usize, usize, usize, Boundaries)] = &[
    (
        "claude-code/session.jsonl",
        "session",
        21,
        9,
        7,
        &[(12, "auto", 48213)],
    ),
    (
        "claude-code/session/subagents/agent-a1.jsonl",
        "session/agent-a1",
        4,
        2,
        1,
        &[],
    ),
];

/// A Claude Code session whose compact boundary names a logical parent that
/// is not in the file, with a branch the person rewound before it.
const LOST_PARENT: &str = "claude-code-bill/lost-parent.jsonl";

const TRAJECTORY: &str = "mini-swe-agent/widgets__widgets-101.traj.json";
const OPENAI: &str = "openai/chat.json";
const WHITTLE: &str = "whittle/20260301-100000-fixture.jsonl";

fn blocks(m: &Message) -> Vec<Value> {
    m.blocks()
        .iter()
        .map(|b| serde_json::to_value(b).unwrap())
        .collect()
}

#[test]
fn the_tree_walk_finds_every_fixture_in_a_fixed_order() {
    let root = fixtures();
    let found: Vec<String> = trace_files(&root)
        .into_iter()
        .map(|f| {
            let path = f.unwrap();
            let relative = path.strip_prefix(&root).unwrap();
            relative.to_string_lossy().replace('\\', "/")
        })
        .collect();
    let mut expected = vec![CLAUDE_CODE[0].0, CLAUDE_CODE[1].0];
    expected.extend(RECORDED.iter().map(|r| r.0));
    expected.extend([LOST_PARENT, TRAJECTORY, OPENAI, WHITTLE]);
    assert_eq!(found, expected);
}

#[test]
fn claude_code_fixtures_have_the_expected_counts() {
    for &(file, id, messages, assistant, pairs, boundaries) in CLAUDE_CODE {
        let path = fixtures().join(file);
        let c = only(&path);
        assert_eq!(c.id, id);
        assert_eq!(c.format, Format::ClaudeCode, "{file}");
        assert_eq!(c.source, path);
        assert_eq!(c.repairs, 0, "{file}");
        assert_eq!(c.system, None);
        assert_eq!(
            (c.messages.len(), assistants(&c), tool_pairs(&c)),
            (messages, assistant, pairs),
            "{file}: (messages, assistant messages, tool pairs)"
        );
        assert_eq!(boundaries_of(&c), boundaries, "{file}: boundaries");
        claude_code_counts_agree_with_the_raw_events(&path, &c);
        claude_code_content_is_kept_verbatim(&path, &c);
    }
}

/// One response logged as four events, a tool result between its parts,
/// is one message holding the parts in order, its results after it; the
/// hidden caveat (`isMeta`) and the summary after the boundary are kept;
/// the harness's copies of outputs and the usage are not.
#[test]
fn claude_code_parts_of_a_response_merge_and_bookkeeping_is_left_out() {
    let c = only(&fixtures().join(CLAUDE_CODE[0].0));
    let first = blocks(&c.messages[1]);
    let kinds: Vec<&str> = first.iter().map(|b| b["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["thinking", "text", "tool_use", "tool_use"]);
    assert_eq!(first[0]["signature"], "c2lnbmF0dXJlLWZpeHR1cmUtMQ==");
    assert_eq!(first[2]["caller"], json!({"type": "direct"}));
    let results: Vec<String> = c.messages[2..4]
        .iter()
        .flat_map(Message::tool_results)
        .map(|r| r.tool_use_id.clone())
        .collect();
    assert_eq!(results, ["toolu_01", "toolu_02"]);
    assert!(c.messages[10].text().starts_with("Caveat: "));
    let summary = &c.messages[c.compaction_boundaries[0].index];
    assert!(
        summary
            .text()
            .contains("Summary: fix `widget_041_reports_its_size`")
    );
    let all = serde_json::to_string(&c.messages).unwrap();
    for left_out in [
        "the harness's copy",
        "cache_read_input_tokens",
        "msg_A",
        "also run clippy\"",
    ] {
        assert!(!all.contains(left_out), "{left_out} was imported");
    }
}

/// The user turns Claude Code and mini-swe-agent wrote themselves are
/// marked, so that survival probes do not take them for the person's:
/// `isMeta` and the compaction summary, a format error; the person's own
/// messages and the tool results are not marked.
#[test]
fn harness_written_user_messages_are_marked_injected() {
    let c = only(&fixtures().join(CLAUDE_CODE[0].0));
    let summary = c.compaction_boundaries[0].index;
    assert!(c.injected.contains(&10), "{:?}", c.injected);
    assert!(c.injected.contains(&summary), "{:?}", c.injected);
    for (i, m) in c.messages.iter().enumerate() {
        let raw_text = m.role() == Role::User && !m.has_tool_result();
        if !raw_text || c.injected.contains(&i) {
            continue;
        }
        // Everything left is something a person typed.
        let text = m.text();
        assert!(
            !text.starts_with("Caveat: ") && !text.starts_with("This session is being continued"),
            "{i}: {text}"
        );
    }
    assert!(!c.injected.contains(&0));
    assert!(c.injected.windows(2).all(|w| w[0] < w[1]));

    let t = only(&fixtures().join(TRAJECTORY));
    let texts: Vec<usize> = (0..t.messages.len())
        .filter(|&i| t.messages[i].role() == Role::User && !t.messages[i].has_tool_result())
        .collect();
    // The task is the person's; the format errors after it are not.
    assert_eq!(texts[0], 0);
    assert!(texts.len() > 1, "{texts:?}");
    assert_eq!(t.injected, texts[1..]);
    assert!(
        t.messages[texts[1]].text().contains("EXACTLY ONE"),
        "{}",
        t.messages[texts[1]].text()
    );
}

#[test]
fn a_session_file_holds_only_its_own_conversation() {
    let root = fixtures().join("claude-code");
    let main = whittle_replay::import_path(&root.join("session.jsonl")).unwrap();
    assert_eq!(main.len(), 1);
    assert_eq!(main[0].id, "session");
    let sub = only(&root.join("session/subagents/agent-a1.jsonl"));
    assert_eq!(sub.id, "session/agent-a1");
    assert!(
        sub.messages[0]
            .text()
            .starts_with("Which functions call widget_041")
    );
}

#[test]
fn the_mini_swe_agent_fixture_becomes_bash_calls_and_their_results() {
    let path = fixtures().join(TRAJECTORY);
    let c = only(&path);
    assert_eq!(c.id, "widgets__widgets-101");
    assert_eq!(c.format, Format::MiniSweAgent);
    assert_eq!(c.repairs, 0);
    assert!(c.compaction_boundaries.is_empty());
    assert_eq!(
        (c.messages.len(), assistants(&c), tool_pairs(&c)),
        (15, 7, 5)
    );
    mini_swe_agent_bash_blocks_become_calls_and_outputs_their_results(&path, &c);
    // Ids name the message's index in the file; with no block or two, the
    // message stays text and so does the format error that answers it.
    let calls: Vec<(String, String)> = c
        .messages
        .iter()
        .flat_map(Message::tool_uses)
        .map(|t| {
            (
                t.id.clone(),
                t.input["command"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let ids: Vec<&str> = calls.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "msa-bash-2",
            "msa-bash-4",
            "msa-bash-10",
            "msa-bash-12",
            "msa-bash-14"
        ]
    );
    assert_eq!(
        calls[3].1,
        "sed -i 's/+ index$/+ index + 1/' widgets/size.py && grep -n 'index + 1' widgets/size.py",
        "the command is trimmed, after whitespace and blank lines at the fence"
    );
    for (i, found) in [(5, "found 0 actions"), (7, "found 2 actions")] {
        assert!(matches!(c.messages[i].content(), Content::Text(_)));
        assert!(c.messages[i + 1].text().contains(found));
    }
    let all = serde_json::to_string(&c.messages).unwrap();
    assert!(
        !all.contains("chatcmpl-fixture"),
        "per-message extra was imported"
    );
}

#[test]
fn the_openai_fixture_maps_to_the_messages_format() {
    let c = only(&fixtures().join(OPENAI));
    assert_eq!((c.id.as_str(), c.format), ("chat", Format::OpenAiMessages));
    assert_eq!(c.repairs, 0);
    assert_eq!(
        c.system.as_deref(),
        Some("You are a coding agent. Use the tools.\n\nAnswer in one paragraph.")
    );
    use Role::{Assistant as A, User as U};
    let roles: Vec<Role> = c.messages.iter().map(Message::role).collect();
    assert_eq!(roles, [U, A, U, U, U, A, U, U, A]);
    let images: Vec<&str> = c.messages[0]
        .blocks()
        .iter()
        .filter_map(|b| match b {
            Block::Image(_) => Some("image"),
            _ => None,
        })
        .collect();
    assert_eq!(images.len(), 2);
    assert_eq!(
        blocks(&c.messages[1])[3],
        json!({"type": "tool_use", "id": "call_3", "name": "grep", "input": {RAW_ARGUMENTS_KEY: "{broken json"}})
    );
    assert_eq!(
        blocks(&c.messages[5]),
        [json!({"type": "tool_use", "id": "call_4", "name": "list_workers", "input": {}})]
    );
    assert_eq!(c.messages[7].text(), "The person has 5 minutes left.");
    let all = serde_json::to_string(&c.messages).unwrap();
    assert!(!all.contains("not shown to the model again"));
}

/// A whittle session log: every message as it first entered the
/// conversation, whatever the agent's own compactions did to the history.
#[test]
fn the_whittle_fixture_imports_every_original_message() {
    let c = only(&fixtures().join(WHITTLE));
    assert_eq!(c.id, "20260301-100000-fixture");
    assert_eq!(c.format, Format::WhittleSession);
    assert_eq!(
        (c.messages.len(), assistants(&c), tool_pairs(&c)),
        (8, 4, 2)
    );
    let first_result = c.messages[2].tool_results().next().unwrap();
    assert!(
        first_result
            .content_str()
            .unwrap()
            .contains("fn handler_149()"),
        "the output as it arrived, not the placeholder that replaced it"
    );
    assert!(
        !serde_json::to_string(&c.messages)
            .unwrap()
            .contains("[Old tool result")
    );
}

#[test]
fn every_fixture_imports_valid_and_round_trips_through_serde() {
    let all: Vec<_> = import_tree(&fixtures())
        .into_iter()
        .flat_map(|f| f.result.unwrap_or_else(|e| panic!("{e}")))
        .collect();
    assert_eq!(all.len(), 6 + RECORDED.len());
    for c in &all {
        valid_and_round_trips_through_serde(c);
    }
}

/// A window the Claude Code fixture overflows many times without
/// compaction, and that `default` can keep only with every kind of step.
const WINDOW: u64 = 4_000;

/// The same replay twice in one process measures the same: nothing
/// process-wide (a store's count of transcripts, here pushed past more
/// digits in between) may change the size of what compaction leaves.
#[test]
fn a_replay_measures_the_same_however_many_stores_came_before() {
    let config = ReplayConfig::for_window(WINDOW);
    let path = [fixtures().join(CLAUDE_CODE[0].0)];
    let replay = || {
        replay_paths(
            &path,
            &Policy::ALL,
            &config,
            &mut || Box::new(StandInSummarizer::default()),
            "stand-in",
        )
    };
    let first = replay();
    let scratch = tempfile::tempdir().unwrap();
    for _ in 0..20_000 {
        // Names its transcript from the process-wide count; writes nothing.
        whittle_store::Store::new(scratch.path());
    }
    let second = replay();
    let compacted = first
        .totals
        .iter()
        .map(|t| t.survival.compactions)
        .sum::<u64>();
    assert!(compacted > 0, "the window must make every policy compact");
    for (a, b) in first.totals.iter().zip(&second.totals) {
        assert_eq!(
            (a.input_tokens, a.cache_read_tokens, a.cache_write_tokens),
            (b.input_tokens, b.cache_read_tokens, b.cache_write_tokens),
            "{}",
            a.policy
        );
    }
}

#[test]
fn replay_over_the_fixtures_keeps_the_invariants_and_adds_up() {
    let config = ReplayConfig::for_window(WINDOW);
    // Not the recorded Claude Code sessions: their system prompt and tools
    // alone are bigger than this window.
    let hand_written: Vec<PathBuf> = ["claude-code", "mini-swe-agent", "openai", "whittle"]
        .iter()
        .map(|d| fixtures().join(d))
        .collect();
    let summary = replay_paths(
        &hand_written,
        &Policy::ALL,
        &config,
        &mut || Box::new(StandInSummarizer::default()),
        "stand-in",
    );
    replay_keeps_the_invariants(&summary, WINDOW);
    let rows: Vec<(&str, &str)> = summary
        .conversations
        .iter()
        .map(|c| (c.id.as_str(), c.format.as_str()))
        .collect();
    assert_eq!(
        rows,
        [
            ("session", "claude-code"),
            ("session/agent-a1", "claude-code"),
            ("widgets__widgets-101", "mini-swe-agent"),
            ("chat", "openai-messages"),
            ("20260301-100000-fixture", "whittle-session"),
        ]
    );
    let column = |name: &str| summary.policies.iter().position(|p| p == name).unwrap();
    let session = &summary.conversations[0];
    let none = &session.reports[column("none")];
    assert!(none.over_window > 1, "{none:?}");
    // `default` persists outputs on arrival, clears old ones and summarizes
    // the long text, in time: the provider never rejects a request.
    let default = &session.reports[column("default")];
    for step in ["tool_result_budget", "micro_compact", "compact_history"] {
        assert!(default.steps.contains_key(step), "no {step}: {default:?}");
    }
    assert!(
        !default.steps.contains_key("reactive_compact"),
        "{default:?}"
    );
    assert!(default.summarize_calls > 0 && default.summarize_input_tokens > 0);
    // Compaction pays for itself here: without the state ledger `default`
    // costs less than `none`. With it, the one summary (three calls before
    // the end of nine) also carries the ledger in its request and marker,
    // and keeps every message the person wrote.
    let mut no_ledger = config.clone();
    let mut limits = no_ledger.default_limits();
    limits.ledger_tokens = 0;
    no_ledger.default_limits = Some(limits);
    let plain = replay_paths(
        &[fixtures().join("claude-code")],
        &[Policy::Default],
        &no_ledger,
        &mut || Box::new(StandInSummarizer::default()),
        "stand-in",
    );
    let plain_default = &plain
        .conversations
        .iter()
        .find(|c| c.id == session.id)
        .unwrap()
        .reports[0];
    assert!(
        plain_default.cost_usd < none.cost_usd,
        "{plain_default:?}\n{none:?}"
    );
    assert!(
        default.cost_usd > plain_default.cost_usd,
        "the ledger is not free"
    );
    assert_eq!(
        default.survival.person.survived,
        default.survival.person.probed
    );
    assert!(default.survival.person.probed > 0, "{default:?}");
    // The totals are the rows added up.
    for (k, total) in summary.totals.iter().enumerate() {
        let mut sum = ReplayReport {
            conversation: "total".into(),
            policy: total.policy.clone(),
            ..ReplayReport::default()
        };
        for c in &summary.conversations {
            sum.absorb(&c.reports[k]);
        }
        assert_eq!(&sum, total);
        assert_eq!(
            total.calls,
            summary
                .conversations
                .iter()
                .map(|c| c.reports[k].calls)
                .sum::<u64>()
        );
    }
}

/// A file that cannot be imported is listed, one line naming it, and the
/// others are still replayed.
#[test]
fn replay_lists_a_bad_file_and_replays_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(fixtures().join(OPENAI), dir.path().join("chat.json")).unwrap();
    let broken = dir.path().join("broken.jsonl");
    std::fs::write(
        &broken,
        "{\"type\": \"user\", \"uuid\": \"u1\", \"message\": 7}\n",
    )
    .unwrap();
    let summary = replay_paths(
        &[PathBuf::from(dir.path())],
        &[Policy::None, Policy::Default],
        &ReplayConfig::for_window(WINDOW),
        &mut || Box::new(StandInSummarizer::default()),
        "stand-in",
    );
    assert_eq!(summary.conversations.len(), 1);
    assert_eq!(summary.conversations[0].id, "chat");
    assert_eq!(summary.errors.len(), 1, "{:?}", summary.errors);
    assert!(
        summary.errors[0].starts_with(&format!("{}:1: ", broken.display())),
        "{}",
        summary.errors[0]
    );
    assert!(!summary.errors[0].contains('\n'));
}

/// Sessions recorded from Claude Code 2.1.332 against testkit's server (see
/// `examples/record_claude_code.rs`): (file, model calls, messages, tool
/// pairs, how replay measures them). `two-prompts` was continued with
/// `--continue`, whose first request names a message the log does not hold,
/// so it is estimated; `idle-gap` is `two-prompts` with ten idle minutes
/// before the second prompt, on the server's clock and in the log.
const RECORDED: &[(&str, u64, usize, usize, Measured)] = &[
    (
        "claude-code-2.1/idle-gap.jsonl",
        7,
        14,
        5,
        Measured::Estimated,
    ),
    (
        "claude-code-2.1/three-calls.jsonl",
        3,
        6,
        2,
        Measured::Exact,
    ),
    (
        "claude-code-2.1/two-prompts.jsonl",
        7,
        14,
        5,
        Measured::Estimated,
    ),
];

#[test]
fn claude_code_2_1_sessions_import_every_call_through_their_attachments() {
    for &(file, calls, messages, pairs, _) in RECORDED {
        let path = fixtures().join(file);
        let c = only(&path);
        assert_eq!(c.format, Format::ClaudeCode);
        assert_eq!(c.repairs, 0, "{file}");
        assert_eq!(
            (c.calls.len() as u64, c.messages.len(), tool_pairs(&c)),
            (calls, messages, pairs),
            "{file}: (calls, messages, tool pairs)"
        );
        assert_eq!(assistants(&c) as u64, calls, "{file}");
        // The chain runs through attachments, which are followed, not imported.
        let raw = std::fs::read_to_string(&path).unwrap();
        let events: Vec<Value> = raw
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let attachments = events.iter().filter(|e| e["type"] == "attachment").count();
        assert!(attachments >= 10, "{file}: {attachments} attachments");
        let parents_are_attachments = events
            .iter()
            .filter(|e| e["type"] == "user" || e["type"] == "assistant")
            .filter(|e| {
                events
                    .iter()
                    .any(|p| p["uuid"] == e["parentUuid"] && p["type"] == "attachment")
            })
            .count();
        assert!(parents_are_attachments >= 1, "{file}");
        let all = serde_json::to_string(&c.messages).unwrap();
        assert!(!all.contains("prompt_snapshot") && !all.contains("skill_listing"));
        // Every call knows its time, model and bill.
        for call in &c.calls {
            assert!(call.at_ms.is_some() && call.usage.is_some(), "{file}");
            assert_eq!(call.model.as_deref(), Some("claude-opus-5-5"));
            assert_eq!(call.cache_ttl, Some(CacheTtl::FiveMinutes));
            assert_eq!(c.messages[call.message].role(), Role::Assistant);
        }
    }
    let three = only(&fixtures().join(RECORDED[1].0));
    assert!(three.calls.iter().all(|c| c.request.is_some()));
    let first = three.calls[0].request.as_ref().unwrap();
    // Tools, system blocks and messages as sent, with the log's breakpoints.
    assert!(first.len() > 12, "{}", first.len());
    assert_eq!(first.iter().filter(|b| b.breakpoint.is_some()).count(), 3);
    assert!(first.iter().map(|b| b.chars).sum::<usize>() > 40_000);
    assert_eq!(
        three.messages[0].text(),
        "Say hello with echo, then read notes.txt and tell me what it says."
    );
}

#[test]
fn a_chain_broken_mid_file_is_an_error_naming_the_line() {
    let raw = std::fs::read_to_string(fixtures().join(RECORDED[1].0)).unwrap();
    let lines: Vec<&str> = raw.lines().collect();
    // The tool result of the first call: point it at a record that is not there.
    let at = lines
        .iter()
        .position(|l| l.contains("\"type\":\"user\"") && l.contains("tool_result"))
        .unwrap();
    let mut event: Value = serde_json::from_str(lines[at]).unwrap();
    event["parentUuid"] = json!("00000000-0000-0000-0000-000000000000");
    let mut edited: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    edited[at] = event.to_string();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken-chain.jsonl");
    std::fs::write(&path, edited.join("\n") + "\n").unwrap();
    let err = import_path(&path).unwrap_err();
    assert!(
        matches!(err, ImportError::BadLine { line, .. } if line == at + 1),
        "{err}"
    );
    let message = err.to_string();
    assert!(
        message.starts_with(&format!("{}:{}: ", path.display(), at + 1)),
        "{message}"
    );
    assert!(message.contains("00000000-0000-0000-0000-000000000000") && !message.contains('\n'));
}

fn replay_recorded_fixtures() -> ReplaySummary {
    let paths: Vec<PathBuf> = RECORDED.iter().map(|r| fixtures().join(r.0)).collect();
    replay_paths(
        &paths,
        &Policy::ALL,
        &ReplayConfig::default(),
        &mut || Box::new(StandInSummarizer::default()),
        "stand-in",
    )
}

/// `none` against what testkit's prompt cache billed Claude Code, call by
/// call from its own breakpoints: cache reads and writes within 10%, cost
/// within 5%, for each recorded fixture and in total.
#[test]
fn none_matches_the_bill_on_every_recorded_fixture() {
    let summary = replay_recorded_fixtures();
    let none = summary.policies.iter().position(|p| p == "none").unwrap();
    assert_eq!(summary.conversations.len(), RECORDED.len());
    for (c, &(file, calls, _, _, measured)) in summary.conversations.iter().zip(RECORDED) {
        assert_eq!(c.measured, measured, "{file}");
        let recorded = c.recorded.unwrap();
        let r = &c.reports[none];
        assert_eq!((r.calls, recorded.calls), (calls, calls), "{file}");
        let error = c.none_vs_recorded.unwrap();
        assert_eq!(error.calls, Some(0.0));
        assert!(error.cache_read.unwrap().abs() < 10.0, "{file}: {error:?}");
        assert!(error.cache_write.unwrap().abs() < 10.0, "{file}: {error:?}");
        assert!(error.cost.unwrap().abs() < 5.0, "{file}: {error:?}");
        // The bill is realistic: the growing conversation is mostly read back.
        assert!(
            recorded.cache_read_tokens > recorded.cache_write_tokens,
            "{file}"
        );
        if measured == Measured::Exact {
            assert_eq!(r.exact_requests, calls);
        }
    }
    let total = summary.none_vs_recorded.unwrap();
    assert!(total.cache_read.unwrap().abs() < 10.0 && total.cache_write.unwrap().abs() < 10.0);
    assert!(total.cost.unwrap().abs() < 5.0, "{total:?}");
}

/// Ten idle minutes with a 5-minute cache: the call after the gap writes the
/// whole prompt again, in the bill and in the replay.
#[test]
fn the_call_after_an_idle_gap_longer_than_the_ttl_is_a_cache_write() {
    let gap = only(&fixtures().join(RECORDED[0].0));
    let busy = only(&fixtures().join(RECORDED[2].0));
    let after_gap = gap
        .calls
        .windows(2)
        .position(|w| w[1].at_ms.unwrap() - w[0].at_ms.unwrap() > 10 * 60 * 1000)
        .unwrap()
        + 1;
    let billed = gap.calls[after_gap].usage.unwrap();
    assert!(
        billed.cache_write_tokens > billed.cache_read_tokens,
        "{billed:?}"
    );
    let summary = replay_recorded_fixtures();
    let none = summary.policies.iter().position(|p| p == "none").unwrap();
    let row = |id: &str| {
        &summary
            .conversations
            .iter()
            .find(|c| c.id == id)
            .unwrap()
            .reports[none]
    };
    let (cold, warm) = (row("idle-gap"), row("two-prompts"));
    assert_eq!(cold.input_tokens, warm.input_tokens);
    let rewritten = cold.cache_write_tokens - warm.cache_write_tokens;
    assert!(
        rewritten + 1_000
            >= billed.cache_write_tokens - busy.calls[after_gap].usage.unwrap().cache_write_tokens,
        "{rewritten}"
    );
    assert!(cold.cost_usd > warm.cost_usd);
}

/// Issue 24: a compact boundary whose `logicalParentUuid` names a record
/// that is not in the file. Both segments import, joined where the boundary
/// continues the newest conversation event before it; every billed call is
/// in `recorded` once per `message.id` (a response logged in two parts, and
/// a rewound answer logged twice, count once), and the rewound branch is
/// reported on its own, not replayed and not in the error against `none`.
#[test]
fn a_compact_boundary_whose_logical_parent_is_absent_imports_both_segments() {
    let path = fixtures().join(LOST_PARENT);
    let raw = std::fs::read_to_string(&path).unwrap();
    let events: Vec<Value> = raw
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let boundary = events
        .iter()
        .find(|e| e["subtype"] == "compact_boundary")
        .unwrap();
    let parent = boundary["logicalParentUuid"].as_str().unwrap();
    assert!(
        events.iter().all(|e| e["uuid"] != parent),
        "the parent is absent"
    );
    let mut billed: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "assistant" && e["message"]["usage"].is_object())
        .map(|e| e["message"]["id"].as_str().unwrap())
        .collect();
    billed.sort_unstable();
    billed.dedup();
    assert_eq!(billed.len(), 9);

    let c = only(&path);
    let texts: Vec<String> = c.messages.iter().map(Message::text).collect();
    let at = |text: &str| {
        texts
            .iter()
            .position(|t| t.contains(text))
            .unwrap_or_else(|| panic!("no {text:?} in {texts:#?}"))
    };
    assert_eq!(at("The parser tests fail"), 0);
    let b = c.compaction_boundaries[0].index;
    assert_eq!(boundaries_of(&c), [(b, "manual", 29_300)]);
    assert_eq!(at("This session is being continued"), b);
    // Before the boundary: the first segment, through the branch that went on.
    assert!(at("All 12 parser tests pass") < b);
    assert!(at("Added the line under Unreleased") < b);
    assert!(at("Clippy has no warnings") > b);
    // The rewound branch is not in the conversation.
    assert!(!texts.iter().any(|t| t.contains("Now update the changelog")));
    assert!(!texts.iter().any(|t| t.contains("Which version")));

    // The billed calls of both segments, each once, with their bills.
    assert!(c.calls.iter().all(|k| k.usage.is_some()));
    let before = c.calls.iter().filter(|k| k.message < b).count();
    let after = c.calls.iter().filter(|k| k.message > b).count();
    assert_eq!((before, after), (6, 2));
    // The first response, logged in two parts, is one call with its final output.
    assert_eq!(c.calls[0].usage.unwrap().output_tokens, 95);
    assert_eq!(c.abandoned.len(), 1);
    let rewound = c.abandoned[0].usage.unwrap();
    assert_eq!(
        (rewound.cache_read_tokens, rewound.cache_write_tokens),
        (29_082, 60)
    );

    let summary = replay_paths(
        &[path],
        &[Policy::None],
        &ReplayConfig::default(),
        &mut || Box::new(StandInSummarizer::default()),
        "stand-in",
    );
    let row = &summary.conversations[0];
    let recorded = row.recorded.unwrap();
    assert_eq!(recorded.calls, billed.len() as u64);
    assert_eq!(recorded.abandoned.calls, 1);
    assert!(recorded.abandoned.cost_usd > 0.0);
    assert_eq!(recorded.replayed().calls, 8);
    assert_eq!(row.reports[0].calls, 8);
    assert_eq!(row.none_vs_recorded.unwrap().calls, Some(0.0));
    assert_eq!(summary.recorded.unwrap().abandoned, recorded.abandoned);
}
