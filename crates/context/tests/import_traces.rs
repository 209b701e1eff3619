//! The importers on the recorded sessions in `../shared/traces` (written by
//! other agents): expected counts, content kept verbatim, validity, and serde
//! round trips of every imported message.
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
//! The tests below also recount what they can from the raw JSON with serde_json.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::shared_traces as traces;

use serde_json::Value;
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::OnceLock;
use whittle_context::import::{Conversation, Format, import_path, import_tree, trace_files};
use whittle_context::{Block, Content, Message, Role, validate};

/// Compaction boundaries as (index, trigger, preTokens).
type Boundaries = &'static [(usize, &'static str, u64)];

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

/// Every shared trace, imported once for all tests, by path relative to the
/// traces folder; each file must hold exactly one conversation.
fn imported() -> &'static BTreeMap<String, Conversation> {
    static ALL: OnceLock<BTreeMap<String, Conversation>> = OnceLock::new();
    ALL.get_or_init(|| {
        let root = traces();
        import_tree(&root)
            .into_iter()
            .map(|file| {
                let mut all = file.result.unwrap_or_else(|e| panic!("{e}"));
                assert_eq!(
                    all.len(),
                    1,
                    "{}: expected one conversation",
                    file.path.display()
                );
                let relative = file.path.strip_prefix(&root).unwrap();
                (relative.to_string_lossy().into_owned(), all.remove(0))
            })
            .collect()
    })
}

fn tool_pairs(c: &Conversation) -> usize {
    let uses: usize = c.messages.iter().map(|m| m.tool_uses().count()).sum();
    let results: usize = c.messages.iter().map(|m| m.tool_results().count()).sum();
    assert_eq!(uses, results, "{}: uses and results differ", c.id);
    uses
}

fn assistants(c: &Conversation) -> usize {
    c.messages
        .iter()
        .filter(|m| m.role() == Role::Assistant)
        .count()
}

fn only(path: &Path) -> Conversation {
    let mut all = import_path(path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        all.len(),
        1,
        "{}: expected one conversation",
        path.display()
    );
    all.remove(0)
}

/// The raw events, as `Value`s so that a missing key indexes to null.
fn raw_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn the_tree_walk_finds_every_trace_in_a_fixed_order() {
    let root = traces();
    let found: Vec<String> = trace_files(&root)
        .into_iter()
        .map(|f| {
            let path = f.unwrap();
            path.strip_prefix(&root)
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

#[test]
fn claude_code_sessions_have_the_expected_counts() {
    let root = traces();
    for &(file, messages, assistant, pairs, boundaries) in CLAUDE_CODE {
        let path = root.join(file);
        let c = &imported()[file];
        assert_eq!(c.format, Format::ClaudeCode, "{file}");
        assert_eq!(c.source, path);
        assert_eq!(c.repairs, 0, "{file}");
        assert_eq!(c.system, None);
        assert_eq!(
            (c.messages.len(), assistants(c), tool_pairs(c)),
            (messages, assistant, pairs),
            "{file}: (messages, assistant messages, tool pairs)"
        );
        let got: Vec<(usize, &str, u64)> = c
            .compaction_boundaries
            .iter()
            .map(|b| {
                (
                    b.index,
                    b.trigger.as_deref().unwrap(),
                    b.pre_tokens.unwrap(),
                )
            })
            .collect();
        assert_eq!(got, boundaries, "{file}: boundaries");

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

/// Recounts from the raw events: one assistant message per distinct
/// `message.id`, one user message per user event, one boundary per
/// `compact_boundary` event, and the summary after each boundary at its index.
#[test]
fn claude_code_counts_agree_with_the_raw_events() {
    let root = traces();
    for &(file, ..) in CLAUDE_CODE {
        let path = root.join(file);
        let c = &imported()[file];
        let events = raw_lines(&path);
        let of_type = |t: &'static str| events.iter().filter(move |e| e["type"] == t);
        let ids: HashSet<&str> = of_type("assistant")
            .map(|e| e["message"]["id"].as_str().unwrap())
            .collect();
        assert_eq!(assistants(c), ids.len(), "{file}");
        assert_eq!(
            c.messages.len() - assistants(c),
            of_type("user").count(),
            "{file}"
        );
        let boundaries: Vec<usize> = events
            .iter()
            .enumerate()
            .filter(|(_, e)| e["type"] == "system" && e["subtype"] == "compact_boundary")
            .map(|(i, _)| i)
            .collect();
        assert_eq!(c.compaction_boundaries.len(), boundaries.len(), "{file}");
        for (b, &at) in c.compaction_boundaries.iter().zip(&boundaries) {
            let summary = events[at + 1..]
                .iter()
                .find(|e| e["type"] == "user" || e["type"] == "assistant")
                .unwrap();
            assert_eq!(summary["isCompactSummary"], true, "{file}");
            let content: Content =
                serde_json::from_value(summary["message"]["content"].clone()).unwrap();
            assert_eq!(c.messages[b.index].content(), &content, "{file}");
            assert!(
                c.messages[b.index]
                    .text()
                    .starts_with("This session is being continued")
            );
        }
    }
}

/// Every content block (and string content) of the raw events is in the
/// import, per role in the same order, byte for byte: tool results with
/// their is_error, thinking with signatures, unknown fields such as `caller`.
#[test]
fn claude_code_content_is_kept_verbatim() {
    let root = traces();
    for &(file, ..) in CLAUDE_CODE {
        let path = root.join(file);
        let c = &imported()[file];
        let events = raw_lines(&path);
        for role in [Role::User, Role::Assistant] {
            let raw: Vec<Value> = events
                .iter()
                .filter(|e| e["type"] == role.as_str())
                .flat_map(|e| match &e["message"]["content"] {
                    Value::Array(items) => items.clone(),
                    other => vec![other.clone()],
                })
                .collect();
            let imported: Vec<Value> = c
                .messages
                .iter()
                .filter(|m| m.role() == role)
                .flat_map(|m| match m.content() {
                    Content::Text(s) => vec![Value::String(s.clone())],
                    Content::Blocks(b) => {
                        b.iter().map(|b| serde_json::to_value(b).unwrap()).collect()
                    }
                })
                .collect();
            assert_eq!(imported.len(), raw.len(), "{file} {role:?}");
            for (i, (a, b)) in imported.iter().zip(&raw).enumerate() {
                assert_eq!(a, b, "{file} {role:?} item {i}");
            }
        }
        let signed = c
            .messages
            .iter()
            .flat_map(Message::blocks)
            .filter(|b| matches!(b, Block::Thinking(t) if t.signature.is_some()))
            .count();
        let raw_signed = events
            .iter()
            .filter_map(|e| e["message"]["content"].as_array())
            .flatten()
            .filter(|b| b["type"] == "thinking" && b["signature"].is_string())
            .count();
        assert_eq!(signed, raw_signed, "{file}");
    }
}

#[test]
fn mini_swe_agent_trajectories_have_the_expected_counts() {
    for &(instance, messages, assistant, pairs) in MINI_SWE_AGENT {
        let c = &imported()[&format!("mini-swe-agent/{instance}.traj.json")];
        assert_eq!(c.id, instance);
        assert_eq!(
            c.source,
            traces().join(format!("mini-swe-agent/{instance}.traj.json"))
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

/// The import against the raw trajectory: system prompt, task first, each
/// assistant text kept whole, each command taken from its fence, each
/// output verbatim as the result of the call before it.
#[test]
fn mini_swe_agent_bash_blocks_become_calls_and_outputs_their_results() {
    let root = traces().join("mini-swe-agent");
    for &(instance, ..) in MINI_SWE_AGENT {
        let path = root.join(format!("{instance}.traj.json"));
        let c = &imported()[&format!("mini-swe-agent/{instance}.traj.json")];
        let raw: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let raw = raw["messages"].as_array().unwrap();
        assert_eq!(raw[0]["role"], "system");
        assert_eq!(c.system.as_deref(), raw[0]["content"].as_str());
        assert!(c.messages[0].text().contains("<pr_description>"));
        assert_eq!(c.messages.len(), raw.len() - 1);
        let mut last_call: Option<String> = None;
        for (m, r) in c.messages.iter().zip(&raw[1..]) {
            let raw_text = r["content"].as_str().unwrap();
            assert_eq!(m.role().as_str(), r["role"].as_str().unwrap());
            match (m.role(), m.content()) {
                (Role::Assistant, Content::Blocks(blocks)) => {
                    let [Block::Text(text), Block::ToolUse(call)] = blocks.as_slice() else {
                        panic!("{instance}: unexpected blocks {blocks:?}");
                    };
                    assert_eq!(text.text, raw_text);
                    assert_eq!(call.name, "bash");
                    let command = call.input["command"].as_str().unwrap();
                    assert!(!command.is_empty() && raw_text.contains(command));
                    assert_eq!(raw_text.matches("```bash").count(), 1, "{instance}");
                    last_call = Some(call.id.clone());
                }
                (Role::Assistant, Content::Text(text)) => {
                    assert_eq!(text, raw_text);
                    last_call = None;
                }
                (Role::User, Content::Blocks(blocks)) => {
                    let [Block::ToolResult(result)] = blocks.as_slice() else {
                        panic!("{instance}: unexpected blocks {blocks:?}");
                    };
                    assert_eq!(Some(&result.tool_use_id), last_call.as_ref());
                    assert_eq!(result.content_str(), Some(raw_text));
                    assert_eq!(result.is_error, None);
                }
                (Role::User, Content::Text(text)) => {
                    assert_eq!(text, raw_text);
                    assert!(last_call.is_none(), "{instance}: an output left as text");
                }
            }
        }
    }
}

/// Every imported conversation passes the validator, and every message
/// survives serialization and deserialization unchanged (cached sizes too).
#[test]
fn every_import_is_valid_and_round_trips_through_serde() {
    for c in imported().values() {
        {
            validate(&c.messages).unwrap_or_else(|e| panic!("{}: {e}", c.id));
            for m in &c.messages {
                let json = serde_json::to_string(m).unwrap();
                assert_eq!(m.chars(), json.chars().count());
                let back: Message = serde_json::from_str(&json).unwrap();
                assert_eq!(&back, m, "{}", c.id);
            }
        }
    }
    assert_eq!(imported().len(), CLAUDE_CODE.len() + MINI_SWE_AGENT.len());
}

#[test]
fn a_session_file_holds_only_its_own_conversation() {
    let root = traces().join("claude-code");
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
