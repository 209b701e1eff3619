//! The importers and replay on the recorded sessions in `../shared/traces`
//! (written by other agents, beside the repository, not in it): expected
//! counts, content kept verbatim, validity, serde round trips of every
//! imported message, corrupted copies, and the replay invariants and costs.
//! Where that folder does not exist (a lone clone) the suite prints one line
//! saying it was not run; the fixture suites cover the same features there.
//!
//! The expected numbers were computed once, independently of this crate, by a
//! python3 script that reads the raw files with `json`: for Claude Code it
//! keeps `user`/`assistant` events, merges an `assistant` event into the
//! previous assistant message when it has the same `message.id` and only
//! tool_result-only user events came between, and counts `compact_boundary`
//! events with the number of messages before them; for mini-swe-agent it
//! counts the non-system messages, the assistant ones, and the assistant
//! messages whose content matches `re.findall(r"```bash\s*\n(.*?)\n```",
//! content, re.DOTALL)` exactly once and are followed by a user message.
//! The checks also recount what they can from the raw JSON with serde_json.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::checks::{
    Boundaries, assistants, boundaries_of, claude_code_content_is_kept_verbatim,
    claude_code_counts_agree_with_the_raw_events,
    mini_swe_agent_bash_blocks_become_calls_and_outputs_their_results, only,
    replay_keeps_the_invariants, tool_pairs, valid_and_round_trips_through_serde,
};
use common::corruption::{self, read_samples};
use libtest_mimic::{Arguments, Trial};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;
use std::sync::OnceLock;
use testkit::shared_traces_dir;
use whittle_replay::{
    Conversation, Format, Policy, ReplayConfig, ReplaySummary, StandInSummarizer, import_path,
    import_tree, replay_paths, trace_files,
};

fn main() -> ExitCode {
    let args = Arguments::from_args();
    let root = shared_traces_dir();
    if !root.is_dir() {
        println!(
            "traces: not run: no recorded sessions at {} (they are not part of the repository)",
            root.display()
        );
        return ExitCode::SUCCESS;
    }
    let trial = |name: &'static str, check: fn(&Path)| {
        let root = root.clone();
        Trial::test(name, move || {
            check(&root);
            Ok(())
        })
    };
    let trials = vec![
        trial(
            "the_tree_walk_finds_every_trace_in_a_fixed_order",
            the_tree_walk_finds_every_trace_in_a_fixed_order,
        ),
        trial(
            "claude_code_sessions_have_the_expected_counts",
            claude_code_sessions_have_the_expected_counts,
        ),
        trial(
            "claude_code_counts_agree_with_the_raw_events",
            claude_code_counts_agree_with_the_raw_events_of_every_session,
        ),
        trial(
            "claude_code_content_is_kept_verbatim",
            claude_code_content_is_kept_verbatim_in_every_session,
        ),
        trial(
            "mini_swe_agent_trajectories_have_the_expected_counts",
            mini_swe_agent_trajectories_have_the_expected_counts,
        ),
        trial(
            "mini_swe_agent_bash_blocks_become_calls_and_outputs_their_results",
            mini_swe_agent_bash_blocks_become_calls_and_outputs_their_results_everywhere,
        ),
        trial(
            "every_import_is_valid_and_round_trips_through_serde",
            every_import_is_valid_and_round_trips_through_serde,
        ),
        trial(
            "a_session_file_holds_only_its_own_conversation",
            a_session_file_holds_only_its_own_conversation,
        ),
        trial(
            "every_policy_on_every_shared_trace_keeps_the_invariants",
            every_policy_on_every_shared_trace_keeps_the_invariants,
        ),
        trial(
            "none_matches_the_bill_of_the_claude_code_sessions",
            none_matches_the_bill_of_the_claude_code_sessions,
        ),
        trial(
            "survival_of_facts_removed_by_compaction",
            survival_of_facts_removed_by_compaction,
        ),
        trial(
            "corrupt::a_jsonl_file_cut_mid_line_is_read_up_to_the_cut",
            |root| {
                corruption::a_jsonl_file_cut_mid_line_is_read_up_to_the_cut(&read(
                    root,
                    "claude-code/tool_heavy.jsonl",
                ))
            },
        ),
        trial(
            "corrupt::a_jsonl_file_with_lines_missing_in_the_middle_names_the_line",
            |root| {
                corruption::a_jsonl_file_with_lines_missing_in_the_middle_names_the_line(&read(
                    root,
                    "claude-code/short.jsonl",
                ))
            },
        ),
        trial(
            "corrupt::a_json_document_cut_anywhere_is_a_syntax_error_at_the_cut",
            |root| {
                corruption::a_json_document_cut_anywhere_is_a_syntax_error_at_the_cut(&read(
                    root,
                    TRAJECTORY_SAMPLE,
                ))
            },
        ),
        trial(
            "corrupt::wrong_json_types_name_the_line_or_the_path",
            |root| {
                corruption::wrong_json_types_name_the_line_or_the_path(
                    &read(root, "claude-code/short.jsonl"),
                    &read(root, TRAJECTORY_SAMPLE),
                )
            },
        ),
        trial(
            "corrupt::invalid_utf8_inside_a_jsonl_file_names_the_line",
            |root| {
                corruption::invalid_utf8_inside_a_jsonl_file_names_the_line(&read(
                    root,
                    "claude-code/short.jsonl",
                ))
            },
        ),
        trial(
            "corrupt::truncations_and_byte_flips_of_real_traces",
            |root| {
                corruption::run_properties(&read_samples(&[
                    root.join("claude-code/short.jsonl"),
                    root.join("claude-code/tool_heavy.jsonl"),
                    root.join(
                        "claude-code/ae4a77f8-aedd-4bc1-888f-c94edc91af04/subagents/agent-aac57f5.jsonl",
                    ),
                    root.join(TRAJECTORY_SAMPLE),
                ]))
            },
        ),
    ];
    libtest_mimic::run(&args, trials).exit_code()
}

/// The trajectory the corruption cases use.
const TRAJECTORY_SAMPLE: &str = "mini-swe-agent/astropy__astropy-12907.traj.json";

fn read(root: &Path, file: &str) -> Vec<u8> {
    std::fs::read(root.join(file)).unwrap()
}

/// Claude Code: (file, messages, assistant messages, tool pairs,
/// boundaries as (index, trigger, preTokens)). Files are listed in the order
/// `trace_files` must return them: files first, then subfolders, sorted.
const CLAUDE_CODE: &[(&str, usize, usize, usize, Boundaries)] = &[
    (
        "claude-code/258c7280-ae70-4798-800f-63464d01a85d.jsonl",
        344,
        152,
        186,
        &[(229, "auto", 167094)],
    ),
    (
        "claude-code/ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl",
        466,
        217,
        242,
        &[(288, "manual", 142431)],
    ),
    ("claude-code/short.jsonl", 5, 1, 2, &[]),
    ("claude-code/subagent.jsonl", 32, 12, 16, &[]),
    ("claude-code/tool_heavy.jsonl", 17, 4, 6, &[]),
    (
        "claude-code/258c7280-ae70-4798-800f-63464d01a85d/subagents/agent-a881341.jsonl",
        6,
        3,
        2,
        &[],
    ),
    (
        "claude-code/258c7280-ae70-4798-800f-63464d01a85d/subagents/agent-acompact-fffbd0.jsonl",
        4,
        1,
        0,
        &[],
    ),
    (
        "claude-code/ae4a77f8-aedd-4bc1-888f-c94edc91af04/subagents/agent-aac57f5.jsonl",
        16,
        3,
        12,
        &[],
    ),
    (
        "claude-code/ae4a77f8-aedd-4bc1-888f-c94edc91af04/subagents/agent-acompact-946d2b.jsonl",
        2,
        1,
        0,
        &[],
    ),
];

/// mini-swe-agent: (instance, messages without the system one, assistant
/// messages, bash tool pairs).
const MINI_SWE_AGENT: &[(&str, usize, usize, usize)] = &[
    ("astropy__astropy-12907", 41, 20, 20),
    ("astropy__astropy-14508", 51, 25, 24),
    ("django__django-10880", 63, 31, 31),
    ("django__django-11149", 73, 36, 36),
    ("django__django-11433", 81, 40, 37),
    ("django__django-11790", 53, 26, 26),
    ("django__django-12143", 55, 27, 27),
    ("django__django-12663", 101, 50, 45),
    ("django__django-13089", 51, 25, 25),
    ("django__django-13344", 89, 44, 37),
    ("django__django-13568", 53, 26, 25),
    ("django__django-13821", 101, 50, 50),
    ("django__django-14140", 51, 25, 25),
    ("django__django-14493", 45, 22, 22),
    ("django__django-14771", 83, 41, 40),
    ("django__django-15128", 81, 40, 37),
    ("django__django-15467", 49, 24, 23),
    ("django__django-15732", 63, 31, 31),
    ("django__django-16100", 103, 51, 50),
    ("django__django-16485", 51, 25, 24),
    ("django__django-16667", 39, 19, 19),
    ("django__django-9296", 37, 18, 18),
    ("matplotlib__matplotlib-22719", 113, 56, 54),
    ("matplotlib__matplotlib-24637", 83, 41, 38),
    ("matplotlib__matplotlib-26291", 69, 34, 32),
    ("psf__requests-2317", 67, 33, 32),
    ("pydata__xarray-4356", 153, 76, 74),
    ("pydata__xarray-7233", 45, 22, 22),
    ("pytest-dev__pytest-10051", 71, 35, 35),
    ("pytest-dev__pytest-7324", 75, 37, 37),
    ("scikit-learn__scikit-learn-11578", 51, 25, 25),
    ("scikit-learn__scikit-learn-14087", 75, 37, 37),
    ("scikit-learn__scikit-learn-25973", 71, 35, 33),
    ("sphinx-doc__sphinx-7440", 97, 48, 47),
    ("sphinx-doc__sphinx-8265", 157, 78, 78),
    ("sphinx-doc__sphinx-9230", 91, 45, 41),
    ("sympy__sympy-11618", 89, 44, 44),
    ("sympy__sympy-13757", 175, 87, 82),
    ("sympy__sympy-15349", 59, 29, 27),
    ("sympy__sympy-17630", 87, 43, 43),
    ("sympy__sympy-19954", 49, 24, 24),
    ("sympy__sympy-22080", 161, 80, 79),
    ("sympy__sympy-24539", 43, 21, 20),
];

/// Every shared trace, imported once for all checks, by path relative to
/// the traces folder; each file must hold exactly one conversation.
fn imported(root: &Path) -> &'static BTreeMap<String, Conversation> {
    static ALL: OnceLock<BTreeMap<String, Conversation>> = OnceLock::new();
    ALL.get_or_init(|| {
        import_tree(root)
            .into_iter()
            .map(|file| {
                let mut all = file.result.unwrap_or_else(|e| panic!("{e}"));
                assert_eq!(
                    all.len(),
                    1,
                    "{}: expected one conversation",
                    file.path.display()
                );
                let relative = file.path.strip_prefix(root).unwrap();
                (relative.to_string_lossy().into_owned(), all.remove(0))
            })
            .collect()
    })
}

fn the_tree_walk_finds_every_trace_in_a_fixed_order(root: &Path) {
    let found: Vec<String> = trace_files(root)
        .into_iter()
        .map(|f| {
            let path = f.unwrap();
            path.strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    let mut expected: Vec<String> = CLAUDE_CODE.iter().map(|e| e.0.to_string()).collect();
    expected.extend(
        MINI_SWE_AGENT
            .iter()
            .map(|e| format!("mini-swe-agent/{}.traj.json", e.0)),
    );
    assert_eq!(found, expected);
}

fn claude_code_sessions_have_the_expected_counts(root: &Path) {
    for &(file, messages, assistant, pairs, boundaries) in CLAUDE_CODE {
        let path = root.join(file);
        let c = &imported(root)[file];
        assert_eq!(c.format, Format::ClaudeCode, "{file}");
        assert_eq!(c.source, path);
        assert_eq!(c.repairs, 0, "{file}");
        assert_eq!(c.system, None);
        assert_eq!(
            (c.messages.len(), assistants(c), tool_pairs(c)),
            (messages, assistant, pairs),
            "{file}: (messages, assistant messages, tool pairs)"
        );
        assert_eq!(boundaries_of(c), boundaries, "{file}: boundaries");

        let expected_id = match file.split_once("/subagents/") {
            Some((session, agent)) => format!(
                "{}/{}",
                session.trim_start_matches("claude-code/"),
                agent.trim_end_matches(".jsonl")
            ),
            None => file
                .trim_start_matches("claude-code/")
                .trim_end_matches(".jsonl")
                .to_string(),
        };
        assert_eq!(c.id, expected_id);
    }
}

fn claude_code_counts_agree_with_the_raw_events_of_every_session(root: &Path) {
    for &(file, ..) in CLAUDE_CODE {
        claude_code_counts_agree_with_the_raw_events(&root.join(file), &imported(root)[file]);
    }
}

fn claude_code_content_is_kept_verbatim_in_every_session(root: &Path) {
    for &(file, ..) in CLAUDE_CODE {
        claude_code_content_is_kept_verbatim(&root.join(file), &imported(root)[file]);
    }
}

fn mini_swe_agent_trajectories_have_the_expected_counts(root: &Path) {
    for &(instance, messages, assistant, pairs) in MINI_SWE_AGENT {
        let c = &imported(root)[&format!("mini-swe-agent/{instance}.traj.json")];
        assert_eq!(c.id, instance);
        assert_eq!(
            c.source,
            root.join(format!("mini-swe-agent/{instance}.traj.json"))
        );
        assert_eq!(c.format, Format::MiniSweAgent);
        assert_eq!(c.repairs, 0, "{instance}");
        assert!(c.compaction_boundaries.is_empty());
        assert_eq!(
            (c.messages.len(), assistants(c), tool_pairs(c)),
            (messages, assistant, pairs),
            "{instance}: (messages, assistant messages, bash pairs)"
        );
    }
}

fn mini_swe_agent_bash_blocks_become_calls_and_outputs_their_results_everywhere(root: &Path) {
    for &(instance, ..) in MINI_SWE_AGENT {
        let file = format!("mini-swe-agent/{instance}.traj.json");
        mini_swe_agent_bash_blocks_become_calls_and_outputs_their_results(
            &root.join(&file),
            &imported(root)[&file],
        );
    }
}

fn every_import_is_valid_and_round_trips_through_serde(root: &Path) {
    for c in imported(root).values() {
        valid_and_round_trips_through_serde(c);
    }
    assert_eq!(
        imported(root).len(),
        CLAUDE_CODE.len() + MINI_SWE_AGENT.len()
    );
}

fn a_session_file_holds_only_its_own_conversation(root: &Path) {
    let root = root.join("claude-code");
    let session = "258c7280-ae70-4798-800f-63464d01a85d";
    let main = import_path(&root.join(format!("{session}.jsonl"))).unwrap();
    assert_eq!(main.len(), 1);
    assert_eq!(main[0].id, session);
    let sub = only(&root.join(format!("{session}/subagents/agent-a881341.jsonl")));
    assert_eq!(sub.id, format!("{session}/agent-a881341"));
    assert!(
        sub.messages[0]
            .text()
            .starts_with("What is the output contract")
    );
}

/// Replay invariants on every shared trace under every policy, at the
/// window the issue sets (32,000 tokens): nothing lost, every request valid,
/// `none` shows where the window overflows, `default` never exceeds it and
/// costs less than the others.
fn every_policy_on_every_shared_trace_keeps_the_invariants(root: &Path) {
    let summary = replayed_at_32k(root);
    replay_keeps_the_invariants(summary, 32_000);
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
        // Claude Code's own system prompt and tools (calibrated from its
        // bill) leave a 32k window little room; only where they fit can a
        // policy keep every request in it.
        if c.overhead_tokens < 32_000 / 2 {
            assert_eq!(c.reports[teaching].over_window, 0, "{}", c.id);
        }
    }
    let t = &summary.totals;
    assert!(
        t[none].over_window > 0,
        "the traces do overflow a 32k window"
    );
    // `default` costs no more than `none` over the conversations whose
    // recorded overhead (Claude Code's system prompt and tools, calibrated
    // from its bill, about 26k tokens) is less than half the window. Where it
    // is more, a 32k window leaves `default` a few thousand tokens and it
    // compacts almost every call, while `none` keeps sending requests the
    // provider would reject: there `none` is no price to beat. Not per
    // conversation either: where `none` never overflows, `default` still
    // compacts ahead of the window and may cost a few percent more.
    let (mut none_cost, mut default_cost) = (0.0, 0.0);
    for c in summary
        .conversations
        .iter()
        .filter(|c| c.overhead_tokens < 32_000 / 2)
    {
        none_cost += c.reports[none].cost_usd;
        default_cost += c.reports[default].cost_usd;
    }
    assert!(
        default_cost <= none_cost,
        "default ${default_cost:.2} > none ${none_cost:.2} where the overhead fits"
    );
    assert!(
        t[default].cost_usd < 0.8 * t[teaching].cost_usd,
        "{}",
        costs(summary)
    );
    assert!(
        t[default].cost_usd < 0.8 * t[mask].cost_usd,
        "{}",
        costs(summary)
    );
}

/// Every shared trace under every policy at the issue's window (32,000
/// tokens), replayed once for all checks.
fn replayed_at_32k(root: &Path) -> &'static ReplaySummary {
    static SUMMARY: OnceLock<ReplaySummary> = OnceLock::new();
    SUMMARY.get_or_init(|| {
        replay_paths(
            &[root.to_path_buf()],
            &Policy::ALL,
            &ReplayConfig::for_window(32_000),
            &mut || Box::new(StandInSummarizer::default()),
            "stand-in",
        )
    })
}

/// Issue 16's targets on the recorded Claude Code sessions: `none` within
/// 10% of the billed cache reads and writes (each conversation and in all)
/// and within 5% of the cost in all. The calls after which Claude Code
/// rebuilt its prompt (a background task's notice, `/mcp`'s output) are the
/// ones whose bill reads only the shared system prompt back.
fn none_matches_the_bill_of_the_claude_code_sessions(root: &Path) {
    let rebuilt = |file: &str| -> Vec<usize> {
        imported(root)[file]
            .calls
            .iter()
            .filter(|c| c.prefix_rebuilt)
            .map(|c| c.message)
            .collect()
    };
    assert_eq!(
        rebuilt("claude-code/258c7280-ae70-4798-800f-63464d01a85d.jsonl"),
        [79, 339]
    );
    assert_eq!(rebuilt("claude-code/tool_heavy.jsonl"), [10]);
    let summary = replayed_at_32k(root);
    let mut billed = 0;
    for c in &summary.conversations {
        let Some(e) = c.none_vs_recorded else {
            continue;
        };
        billed += 1;
        assert!(e.cache_read.unwrap().abs() < 10.0, "{}: {e:?}", c.id);
        assert!(e.cache_write.unwrap().abs() < 10.0, "{}: {e:?}", c.id);
    }
    // Nine billed Claude Code conversations, two of them the compaction
    // calls of the long sessions, folded into the sessions they summarize.
    assert_eq!(billed, 7);
    let total = summary.none_vs_recorded.unwrap();
    assert!(total.cache_read.unwrap().abs() < 10.0, "{total:?}");
    assert!(total.cache_write.unwrap().abs() < 10.0, "{total:?}");
    assert!(total.cost.unwrap().abs() < 5.0, "{total:?}");
}

/// Survival (issue 13): what each policy's compactions kept of the facts
/// they removed, and the same for Claude Code's own two summaries.
fn survival_of_facts_removed_by_compaction(root: &Path) {
    let summary = replayed_at_32k(root);
    let total = |name: &str| {
        &summary
            .totals
            .iter()
            .find(|t| t.policy == name)
            .unwrap()
            .survival
    };
    // Removing nothing, `none` and `mask` probe nothing.
    for name in ["none", "mask"] {
        let s = total(name);
        assert_eq!(
            (
                s.paths.probed,
                s.commands.probed,
                s.person.probed,
                s.compactions
            ),
            (0, 0, 0, 0),
            "{name}"
        );
    }
    for name in ["teaching", "default"] {
        let s = total(name);
        assert!(s.compactions > 0, "{name}");
        assert_eq!(s.ledger_tokens.len() as u64, s.compactions, "{name}");
        for t in [s.paths, s.commands, s.person] {
            assert!(t.probed > 0 && t.survived <= t.probed, "{name}: {s:?}");
        }
    }

    // Claude Code's own summaries, on the same facts: the issue's findings
    // (a third of the paths as written, fewer than one command in ten, the
    // person's messages kept), on the two sessions with a compact_boundary.
    let recorded = summary.recorded_survival.as_ref().unwrap();
    assert_eq!(recorded.compactions, 2);
    assert!(recorded.ledger_tokens.is_empty());
    let percent = |t: whittle_replay::Tally| t.percent().unwrap();
    assert!(recorded.paths.probed >= 100, "{recorded:?}");
    assert!(
        (25.0..=40.0).contains(&percent(recorded.paths)),
        "{recorded:?}"
    );
    assert!(percent(recorded.commands) < 10.0, "{recorded:?}");
    assert_eq!(recorded.person.probed, 2);
    assert_eq!(recorded.person.survived, 2);
    let with_boundaries = summary
        .conversations
        .iter()
        .filter(|c| c.recorded_survival.is_some())
        .count();
    assert_eq!(with_boundaries, 2);

    // The issue's targets for `default`, on every conversation: the
    // person's messages all kept, paths at least 95%, commands at least
    // 80%, the ledger under 4,000 tokens at the median. Printed apart: the
    // conversations whose system prompt and tools fill the target of a 32k
    // window (Claude Code's ~26k tokens, calibrated from the bill), where
    // compaction runs on every call and each marker carries the ledger's
    // floor (see `Ctx::ledger_chars`).
    let config = ReplayConfig::for_window(32_000);
    let target = config.default_limits().target;
    let column = summary
        .policies
        .iter()
        .position(|p| p == "default")
        .unwrap();
    let mut with_room = whittle_replay::Survival::default();
    let mut no_room = whittle_replay::Survival::default();
    for c in &summary.conversations {
        let s = &c.reports[column].survival;
        if c.overhead_tokens < target {
            with_room.absorb(s);
        } else {
            no_room.absorb(s);
        }
    }
    let default = total("default");
    let line = |s: &whittle_replay::Survival| {
        format!(
            "{} compactions: person {:.1}% of {}, paths {:.1}% of {}, commands {:.1}% of {}, \
             ledger median {} tokens",
            s.compactions,
            percent(s.person),
            s.person.probed,
            percent(s.paths),
            s.paths.probed,
            percent(s.commands),
            s.commands.probed,
            s.ledger_tokens_median().unwrap_or(0),
        )
    };
    println!(
        "survival under default: all {}; with room under the target {}; \
         with no room {}",
        line(default),
        line(&with_room),
        line(&no_room)
    );
    assert!(with_room.compactions > 0 && no_room.compactions > 0);
    assert_eq!(percent(default.person), 100.0, "{default:?}");
    assert!(percent(default.paths) >= 95.0, "{default:?}");
    assert!(percent(default.commands) >= 80.0, "{default:?}");
    assert!(
        default.ledger_tokens_median().unwrap() < 4_000,
        "{default:?}"
    );
    assert!(default.ledger_tokens.iter().all(|t| *t > 0), "{default:?}");
}

/// The total cost per policy, for a failure message.
fn costs(summary: &ReplaySummary) -> String {
    summary
        .totals
        .iter()
        .map(|t| format!("{} ${:.2}", t.policy, t.cost_usd))
        .collect::<Vec<_>>()
        .join(", ")
}
