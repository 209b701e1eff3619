//! Which events of a Claude Code log are the conversation that was last sent.
//!
//! Every record with a `uuid` names its predecessor in `parentUuid`; the
//! chain runs through every record type (`attachment`, `progress`, `system`
//! ...), not only `user` and `assistant`. A rewound or edited conversation
//! leaves abandoned branches behind. The thread is the chain from the newest
//! leaf back to the root: the newer of the last `last-prompt` record's
//! `leafUuid` and the last conversation event in the file. A
//! `compact_boundary` starts a new chain; its `logicalParentUuid` links it to
//! the history before it, which is kept. When that record is not in the file,
//! the boundary continues the newest conversation event before it.
//!
//! Parallel tool calls branch the chain: each part of the response, and each
//! result, may hang off a different predecessor. So besides the chain itself,
//! the thread holds the other parts of every response on it (same
//! `message.id`) and the tool results that answer its tool calls.
//! Events without a `uuid` or without a `parentUuid` key (hand-written
//! logs) say nothing about the chain and are kept.

use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet};

/// Which events (by index) are on the main thread. Sidechain events are
/// not judged here and are all kept. The error is the index of the event
/// whose parent is missing, and why.
pub(super) fn main_thread(
    events: &[(usize, Map<String, Value>)],
) -> Result<Vec<bool>, (usize, String)> {
    let mut by_uuid: HashMap<&str, usize> = HashMap::new();
    for (i, (_, e)) in events.iter().enumerate() {
        if let Some(u) = uuid(e) {
            by_uuid.entry(u).or_insert(i);
        }
    }
    let conversation =
        |e: &Map<String, Value>| matches!(kind(e), Some("user" | "assistant")) && !sidechain(e);
    let last_event = events
        .iter()
        .rposition(|(_, e)| conversation(e) && uuid(e).is_some());
    let last_prompt = events
        .iter()
        .rev()
        .find(|(_, e)| kind(e) == Some("last-prompt"))
        .and_then(|(_, e)| e.get("leafUuid").and_then(Value::as_str))
        .and_then(|leaf| by_uuid.get(leaf).copied());
    // Events that do not say where they hang (no uuid, or no parentUuid
    // at all, as in hand-written logs) cannot be judged: they are kept.
    let mut keep: Vec<bool> = events
        .iter()
        .map(|(_, e)| sidechain(e) || uuid(e).is_none() || !e.contains_key("parentUuid"))
        .collect();
    let Some(leaf) = last_event.max(last_prompt) else {
        return Ok(keep);
    };

    // The chain from the leaf back to the root.
    let mut on_chain = HashSet::new();
    let mut at = leaf;
    loop {
        if !on_chain.insert(at) {
            return Err((at, "the parentUuid chain runs in a circle".into()));
        }
        let e = &events[at].1;
        let parent = match e.get("parentUuid").and_then(Value::as_str) {
            Some(p) => Some((p, true)),
            None => e
                .get("logicalParentUuid")
                .and_then(Value::as_str)
                .map(|p| (p, false)),
        };
        match parent {
            None => break,
            Some((p, strict)) => match by_uuid.get(p) {
                Some(&i) => at = i,
                // A logical parent missing from the file: the compaction
                // continued the newest leaf before the boundary in file
                // order (Claude Code writes them in order), so that part is
                // billed and kept too; with nothing before it, the parent
                // was in an older file.
                None if !strict => {
                    match events[..at]
                        .iter()
                        .rposition(|(_, e)| conversation(e) && uuid(e).is_some())
                    {
                        Some(before) => at = before,
                        None => break,
                    }
                }
                None => {
                    return Err((
                        at,
                        format!(
                            "parentUuid {} names no record of the file: the chain of events is broken",
                            whittle_protocol::escape_controls(p, 80)
                        ),
                    ));
                }
            },
        }
    }

    // The responses on the chain, whole, and the results of their tool calls.
    let mut responses: HashSet<&str> = HashSet::new();
    for &i in &on_chain {
        let e = &events[i].1;
        if kind(e) == Some("assistant")
            && let Some(id) = message_id(e)
        {
            responses.insert(id);
        }
    }
    let mut calls: HashSet<&str> = HashSet::new();
    for (i, (_, e)) in events.iter().enumerate() {
        let kept = on_chain.contains(&i)
            || (kind(e) == Some("assistant")
                && !sidechain(e)
                && message_id(e).is_some_and(|id| responses.contains(id)));
        if kept {
            keep[i] = true;
            calls.extend(blocks(e).filter_map(|b| {
                (b.get("type")?.as_str()? == "tool_use").then(|| b.get("id")?.as_str())?
            }));
        }
    }
    for (i, (_, e)) in events.iter().enumerate() {
        if keep[i] || !conversation(e) || kind(e) != Some("user") {
            continue;
        }
        let mut results = blocks(e).peekable();
        let answers = results.peek().is_some()
            && results.all(|b| {
                b.get("type").and_then(Value::as_str) == Some("tool_result")
                    && b.get("tool_use_id")
                        .and_then(Value::as_str)
                        .is_some_and(|id| calls.contains(id))
            });
        keep[i] = answers;
    }
    Ok(keep)
}

fn kind(e: &Map<String, Value>) -> Option<&str> {
    e.get("type").and_then(Value::as_str)
}

fn uuid(e: &Map<String, Value>) -> Option<&str> {
    e.get("uuid").and_then(Value::as_str)
}

fn sidechain(e: &Map<String, Value>) -> bool {
    e.get("isSidechain") == Some(&Value::Bool(true))
}

fn message_id(e: &Map<String, Value>) -> Option<&str> {
    e.get("message")?.get("id")?.as_str()
}

fn blocks(e: &Map<String, Value>) -> impl Iterator<Item = &Map<String, Value>> {
    e.get("message")
        .and_then(|m| m.get("content"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
}
