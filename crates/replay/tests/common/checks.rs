//! Checks of an import against its raw file, and of a replay's reports, made
//! alike on our fixtures and on the recorded sessions: recounts from the raw
//! JSON with serde_json, content kept verbatim, validity, serde round trips,
//! and the replay invariants.

use serde_json::Value;
use std::collections::HashSet;
use std::path::Path;
use whittle_protocol::{Block, Content, Message, Role, validate};
use whittle_replay::{Conversation, ReplaySummary, import_path};

/// Compaction boundaries as (index, trigger, preTokens).
pub type Boundaries = &'static [(usize, &'static str, u64)];

/// A conversation's boundaries as [`Boundaries`] list them; each must have
/// its trigger and size.
pub fn boundaries_of(c: &Conversation) -> Vec<(usize, &str, u64)> {
    c.compaction_boundaries
        .iter()
        .map(|b| {
            (
                b.index,
                b.trigger.as_deref().unwrap(),
                b.pre_tokens.unwrap(),
            )
        })
        .collect()
}

/// Tool calls, checked to equal tool results.
pub fn tool_pairs(c: &Conversation) -> usize {
    let uses: usize = c.messages.iter().map(|m| m.tool_uses().count()).sum();
    let results: usize = c.messages.iter().map(|m| m.tool_results().count()).sum();
    assert_eq!(uses, results, "{}: uses and results differ", c.id);
    uses
}

pub fn assistants(c: &Conversation) -> usize {
    c.messages
        .iter()
        .filter(|m| m.role() == Role::Assistant)
        .count()
}

/// The one conversation `path` holds.
pub fn only(path: &Path) -> Conversation {
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
pub fn raw_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Recounts a Claude Code import from the raw events of `path`: one
/// assistant message per distinct `message.id`, one user message per user
/// event, one boundary per `compact_boundary` event, and the summary after
/// each boundary at its index.
pub fn claude_code_counts_agree_with_the_raw_events(path: &Path, c: &Conversation) {
    let file = path.display();
    let events = raw_lines(path);
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

/// Every content block (and string content) of the raw events of `path` is
/// in the import, per role in the same order, byte for byte: tool results
/// with their is_error, thinking with signatures, unknown fields such as
/// `caller`.
pub fn claude_code_content_is_kept_verbatim(path: &Path, c: &Conversation) {
    let file = path.display();
    let events = raw_lines(path);
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
                Content::Blocks(b) => b.iter().map(|b| serde_json::to_value(b).unwrap()).collect(),
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

/// A mini-swe-agent import against the raw trajectory of `path`: system
/// prompt, task first, each assistant text kept whole, each command taken
/// from its fence, each output verbatim as the result of the call before it.
pub fn mini_swe_agent_bash_blocks_become_calls_and_outputs_their_results(
    path: &Path,
    c: &Conversation,
) {
    let instance = path.display();
    let raw: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
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

/// The conversation passes the validator, and every message survives
/// serialization and deserialization unchanged (cached sizes too).
pub fn valid_and_round_trips_through_serde(c: &Conversation) {
    validate(&c.messages).unwrap_or_else(|e| panic!("{}: {e}", c.id));
    for m in &c.messages {
        let json = serde_json::to_string(m).unwrap();
        assert_eq!(m.chars(), json.chars().count());
        let back: Message = serde_json::from_str(&json).unwrap();
        assert_eq!(&back, m, "{}", c.id);
    }
}

/// What must hold for every conversation of a replay at `window` tokens
/// under all four policies: nothing lost, every request valid, the cache
/// split adds up, `none` shows where the window overflows, and `default`
/// never exceeds it.
pub fn replay_keeps_the_invariants(summary: &ReplaySummary, window: u64) {
    assert!(summary.errors.is_empty(), "{:?}", summary.errors);
    let column = |name: &str| summary.policies.iter().position(|p| p == name).unwrap();
    let (none, default) = (column("none"), column("default"));
    for c in &summary.conversations {
        assert_eq!(c.reports.len(), summary.policies.len(), "{}", c.id);
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
        if n.peak_tokens > window {
            assert!(
                n.over_window > 0 && !n.overflow_calls.is_empty(),
                "{}",
                c.id
            );
        }
        let d = &c.reports[default];
        // What the recording sent besides the messages (calibrated from its
        // bill) is no policy's to shrink; only when it fits can they.
        if c.overhead_tokens >= window / 2 {
            continue;
        }
        assert_eq!(
            d.over_window, 0,
            "{}: default sent {} requests over the window",
            c.id, d.over_window
        );
        assert!(d.peak_tokens <= window, "{}", c.id);
    }
}
