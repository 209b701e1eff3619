//! Claude Code session logs (`~/.claude/projects/<dir>/<session>.jsonl`).
//!
//! One JSON event per line. What becomes conversation, and why:
//! - `user` and `assistant` events: their `message.content` verbatim (text,
//!   tool_use, tool_result, thinking with its signature, anything else as
//!   raw JSON). Other fields of `message` (model, usage, stop_reason) and of
//!   the event (`toolUseResult`, the harness's parsed copy of a tool output;
//!   `uuid`, `cwd`, ...) are bookkeeping, not what the model saw, and are left out.
//! - `isMeta` user events (skill bodies, command caveats, hook reminders) are
//!   kept: Claude Code hides them from the person but sends them to the model.
//!   The compaction summary (`isCompactSummary`) is kept the same way. These
//!   and the turns Claude Code writes without the flag (a background task's
//!   notice, a slash command's output, an interruption) are listed in
//!   [`Conversation::injected`]: they are not the person's words.
//! - One API response is logged as several `assistant` events sharing
//!   `message.id`, one block each, with the results of parallel tool calls
//!   logged between them. Such events are merged into one message (blocks in
//!   order) as long as only tool_result messages came between them; the
//!   results then follow the merged message, as in the request Claude Code sent.
//! - `system` events with `subtype: "compact_boundary"` become boundaries
//!   (`compactMetadata.trigger`, `preTokens`); the next message, the summary,
//!   is the boundary's index. All other `system` events, `progress`,
//!   `file-history-snapshot`, `summary`, `queue-operation` and unknown types
//!   are skipped. An event whose `uuid` was already seen is skipped.
//!   Assistant messages Claude Code wrote itself (API errors) are kept as
//!   recorded, like any other event of the conversation.
//! - `isSidechain` events are a subagent's. A file holding only one agent's
//!   events (the `<session>/subagents/agent-*.jsonl` files) is one
//!   conversation. Older logs mixed sidechains into the session file; there
//!   each sidechain becomes its own conversation, `<id>/agent-<agentId>`, or
//!   `<id>/sidechain-<root uuid>` when the events carry no `agentId`.
//! - The main conversation is the thread that was last sent, followed
//!   through every record type by `parentUuid` (see [`thread`]): Claude
//!   Code 2.1.100 and later put `attachment` records (environment, model,
//!   skill and agent listings, dates, prompt snapshots) in the chain; they
//!   are followed, not imported. A chain that names a missing record is an
//!   error naming the line.
//! - Every response becomes a [`RecordedCall`]: its time, model, billed
//!   `usage` (`cache_creation.ephemeral_1h_input_tokens` tells a 1-hour
//!   cache) and, when the log has `api-request*` records, the request as
//!   sent (see [`requests`]).

mod requests;
mod thread;

use super::draft::{Draft, Mark};
use super::jsonl::{Line, Lines};
use super::{Conversation, Format, ImportError, finish};
use crate::recorded::{CacheTtl, RecordedCall, RecordedUsage, SYNTHETIC_MODEL};
use requests::Requests;
use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use whittle_protocol::{Block, Content, Role};
use whittle_protocol::{escape_controls, json_kind};

/// Whether a JSON object looks like a Claude Code event.
pub(crate) fn looks_like_event(object: &Map<String, Value>) -> bool {
    object.get("type").is_some_and(Value::is_string)
        && [
            "uuid",
            "sessionId",
            "parentUuid",
            "message",
            "messageId",
            "leafUuid",
        ]
        .iter()
        .any(|k| object.contains_key(*k))
}

/// Which conversation of the file an event belongs to.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Agent {
    Main,
    Named(String),
    Chain(String),
}

/// One conversation being read: the draft and the assistant message that a
/// later part of the same response may still extend.
#[derive(Default)]
struct Reader {
    draft: Draft,
    /// `message.id` and entry index of the newest assistant message, while
    /// only tool results have followed it.
    open: Option<(String, usize)>,
    /// The `message.id` of every response billed so far: a response logged
    /// again later (apart from its first parts) is not billed twice.
    billed: HashSet<String>,
    /// The cache lifetime the last call that wrote to the cache asked for:
    /// a call that wrote nothing does not say, and asked for the same.
    ttl: Option<CacheTtl>,
}

/// Imports one Claude Code log; `id` names the main conversation.
pub(crate) fn import(
    path: &Path,
    id: &str,
    lines: Lines,
) -> Result<Vec<Conversation>, ImportError> {
    let bad = |line: usize, reason: String| ImportError::BadLine {
        path: path.to_path_buf(),
        line,
        reason,
    };
    let mut events = Vec::with_capacity(lines.lines.len());
    for Line { number, value } in lines.lines {
        let Value::Object(event) = value else {
            return Err(bad(
                number,
                format!("expected an event object, found {}", json_kind(&value)),
            ));
        };
        if !event.get("type").is_some_and(Value::is_string) {
            return Err(bad(number, "the event has no \"type\" string".into()));
        }
        events.push((number, event));
    }

    let on_thread =
        thread::main_thread(&events).map_err(|(at, reason)| bad(events[at].0, reason))?;
    let requests = Requests::collect(events.iter().map(|(_, e)| e));
    let agents = assign_agents(&events);
    let mut order: Vec<Agent> = Vec::new();
    let mut readers: HashMap<Agent, Reader> = HashMap::new();
    let mut seen_uuids: HashSet<&str> = HashSet::new();
    let mut sessions: HashMap<Agent, String> = HashMap::new();
    for (((number, event), agent), kept) in events.iter().zip(agents).zip(&on_thread) {
        if !*kept {
            continue;
        }
        if let Some(session) = event.get("sessionId").and_then(Value::as_str) {
            sessions
                .entry(agent.clone())
                .or_insert_with(|| session.to_string());
        }
        if let Some(uuid) = event.get("uuid").and_then(Value::as_str)
            && !seen_uuids.insert(uuid)
        {
            continue;
        }
        let reader = readers.entry(agent.clone()).or_insert_with(|| {
            order.push(agent);
            Reader::default()
        });
        read_event(reader, event, &requests).map_err(|reason| bad(*number, reason))?;
    }

    if lines.truncated_tail {
        let first = order
            .iter()
            .find(|a| **a == Agent::Main)
            .or(order.first())
            .cloned();
        if let Some(reader) = first.and_then(|a| readers.get_mut(&a)) {
            reader.draft.count_repair();
        }
    }

    let abandoned = abandoned_calls(&events, &on_thread, &requests);
    let single = order.len() == 1;
    let mut conversations = Vec::new();
    for agent in order {
        let Some(reader) = readers.remove(&agent) else {
            continue;
        };
        if reader.draft.is_empty() {
            continue;
        }
        let conversation_id = match (&agent, single) {
            (_, true) | (Agent::Main, _) => id.to_string(),
            (Agent::Named(name), false) => format!("{id}/agent-{name}"),
            (Agent::Chain(root), false) => format!("{id}/sidechain-{root}"),
        };
        let summarizes = match &agent {
            Agent::Named(name) if name.starts_with(COMPACTION_AGENT) => {
                compacted_session(id, single, sessions.get(&agent))
            }
            _ => None,
        };
        let mut conversation = finish(
            path,
            conversation_id,
            Format::ClaudeCode,
            None,
            reader.draft,
        )?;
        conversation.summarizes = summarizes;
        conversations.push(conversation);
        if agent == Agent::Main
            && let Some(c) = conversations.last_mut()
        {
            c.abandoned = abandoned.clone();
        }
    }
    Ok(conversations)
}

/// How Claude Code names the subagent it asks for a compaction's summary
/// (`agentId` `acompact-<hex>`), for `/compact` and automatic compactions
/// alike.
const COMPACTION_AGENT: &str = "acompact-";

/// The id of the session a compaction agent's conversation summarizes: for
/// a `<session>/subagents/` file, the session its id is named after; the
/// file's own id when the agent's events are mixed into the session file
/// (older logs); else the `sessionId` its events carry.
fn compacted_session(id: &str, single: bool, session: Option<&String>) -> Option<String> {
    match id.rsplit_once('/') {
        Some((parent, _)) => Some(parent.to_string()),
        None if !single => Some(id.to_string()),
        None => session.cloned(),
    }
}

/// The billed responses of the main agent that are not on the thread: one
/// call per `message.id` (its parts share the usage; the last carries the
/// final output count), in file order.
fn abandoned_calls(
    events: &[(usize, Map<String, Value>)],
    on_thread: &[bool],
    requests: &Requests,
) -> Vec<RecordedCall> {
    let message_id = |e: &Map<String, Value>| {
        e.get("message")
            .and_then(|m| m.get("id"))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let response = |e: &Map<String, Value>| {
        e.get("type").and_then(Value::as_str) == Some("assistant")
            && e.get("isSidechain") != Some(&Value::Bool(true))
    };
    let replayed: HashSet<String> = events
        .iter()
        .zip(on_thread)
        .filter(|((_, e), kept)| **kept && response(e))
        .filter_map(|((_, e), _)| message_id(e))
        .collect();
    let mut order: Vec<String> = Vec::new();
    let mut calls: HashMap<String, RecordedCall> = HashMap::new();
    for ((_, e), kept) in events.iter().zip(on_thread) {
        if *kept || !response(e) {
            continue;
        }
        let Some(id) = message_id(e).filter(|id| !replayed.contains(id)) else {
            continue;
        };
        let call = recorded_call(e, requests);
        let Some(usage) = call.usage else {
            continue;
        };
        match calls.get_mut(&id) {
            Some(known) => {
                if let Some(u) = &mut known.usage {
                    u.output_tokens = u.output_tokens.max(usage.output_tokens);
                }
            }
            None => {
                order.push(id.clone());
                calls.insert(id, call);
            }
        }
    }
    order
        .into_iter()
        .filter_map(|id| calls.remove(&id))
        .collect()
}

/// The agent of every event: the session's own, a named subagent, or, for
/// unnamed sidechain events, the root of their `parentUuid` chain.
fn assign_agents<'a>(events: &'a [(usize, Map<String, Value>)]) -> Vec<Agent> {
    let sidechain = |e: &Map<String, Value>| e.get("isSidechain") == Some(&Value::Bool(true));
    let parents: HashMap<&str, &Map<String, Value>> = events
        .iter()
        .filter_map(|(_, e)| Some((e.get("uuid")?.as_str()?, e)))
        .collect();
    let uuid = |e: &'a Map<String, Value>| e.get("uuid").and_then(Value::as_str);
    // Root of each sidechain event already walked: long chains stay linear.
    let mut roots: HashMap<&str, &str> = HashMap::new();
    events
        .iter()
        .map(|(_, e)| {
            if !sidechain(e) {
                return Agent::Main;
            }
            if let Some(name) = e.get("agentId").and_then(Value::as_str) {
                return Agent::Named(name.to_string());
            }
            // Walk up while the parent is a sidechain event; the step limit
            // makes a cyclic chain terminate.
            let mut root = uuid(e).unwrap_or("");
            let mut current = e;
            let mut walked = Vec::new();
            for _ in 0..events.len() {
                if let Some(known) = roots.get(root) {
                    root = known;
                    break;
                }
                walked.push(root);
                let Some(parent) = current
                    .get("parentUuid")
                    .and_then(Value::as_str)
                    .and_then(|p| parents.get(p))
                    .filter(|p| sidechain(p))
                else {
                    break;
                };
                current = parent;
                root = uuid(current).unwrap_or(root);
            }
            for u in walked.into_iter().filter(|u| !u.is_empty()) {
                roots.insert(u, root);
            }
            Agent::Chain(root.to_string())
        })
        .collect()
}

/// Adds one event to its conversation; the error is the reason, for the caller to locate.
fn read_event(
    reader: &mut Reader,
    event: &Map<String, Value>,
    requests: &Requests,
) -> Result<(), String> {
    match event.get("type").and_then(Value::as_str) {
        Some("user") => {
            let content = message_content(event)?;
            let only_results = matches!(&content, Content::Blocks(b)
                if !b.is_empty() && b.iter().all(|b| matches!(b, Block::ToolResult(_))));
            if written_by_claude_code(event, &content) {
                reader.draft.push_injected(Role::User, content);
            } else {
                reader.draft.push(Role::User, content);
            }
            if !only_results {
                reader.open = None;
            }
        }
        Some("assistant") => {
            let content = message_content(event)?;
            let message_id = event
                .get("message")
                .and_then(|m| m.get("id"))
                .and_then(Value::as_str);
            if let (Some(id), Some((open_id, index))) = (message_id, &reader.open)
                && id == open_id
                && let Some(entry) = reader.draft.entry_mut(*index)
            {
                append(&mut entry.content, content);
                // Later parts of a response carry the final output count.
                if let (Some(call), Some(later)) = (&mut entry.call, recorded_usage(event)) {
                    let output = call.usage.map_or(0, |u| u.output_tokens);
                    call.usage = Some(RecordedUsage {
                        output_tokens: later.output_tokens.max(output),
                        ..later
                    });
                }
                return Ok(());
            }
            let index = reader.draft.push(Role::Assistant, content);
            let mut call = recorded_call(event, requests);
            // Billed once per response, however often it was logged.
            if let Some(id) = message_id
                && !reader.billed.insert(id.to_string())
            {
                call.usage = None;
            }
            if call.usage.is_some() {
                match call.cache_ttl {
                    Some(ttl) => reader.ttl = Some(ttl),
                    None => call.cache_ttl = reader.ttl,
                }
            }
            if let Some(entry) = reader.draft.entry_mut(index) {
                entry.call = Some(call);
            }
            reader.open = message_id.map(|id| (id.to_string(), index));
        }
        Some("system")
            if event.get("subtype").and_then(Value::as_str) == Some("compact_boundary") =>
        {
            let meta = event.get("compactMetadata");
            reader.draft.mark(Mark {
                trigger: meta
                    .and_then(|m| m.get("trigger"))
                    .and_then(Value::as_str)
                    .map(str::to_string),
                pre_tokens: meta
                    .and_then(|m| m.get("preTokens"))
                    .and_then(Value::as_u64),
            });
            reader.open = None;
        }
        _ => {}
    }
    Ok(())
}

/// How the user turns Claude Code writes itself begin (a background task's
/// notice, a slash command's output, an interruption), when the event does
/// not say so with `isMeta`.
const HARNESS_OPENINGS: &[&str] = &[
    "<task-notification>",
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<local-command-caveat>",
    "<bash-stdout>",
    "<bash-stderr>",
    "<system-reminder>",
    "[Request interrupted by user",
];

/// Whether a user event is Claude Code's own text rather than the person's.
fn written_by_claude_code(event: &Map<String, Value>, content: &Content) -> bool {
    let flag = |key: &str| event.get(key) == Some(&Value::Bool(true));
    if flag("isMeta") || flag("isCompactSummary") {
        return true;
    }
    let opening = opening(content);
    HARNESS_OPENINGS.iter().any(|h| opening.starts_with(h))
}

/// The start of a user turn's first text.
fn opening(content: &Content) -> &str {
    let first_text = match content {
        Content::Text(s) => s.as_str(),
        Content::Blocks(blocks) => blocks
            .iter()
            .find_map(|b| match b {
                Block::Text(t) => Some(t.text.as_str()),
                _ => None,
            })
            .unwrap_or(""),
    };
    first_text.trim_start()
}

/// What an assistant event says about the call that produced it.
fn recorded_call(event: &Map<String, Value>, requests: &Requests) -> RecordedCall {
    let message = event.get("message");
    let model = message
        .and_then(|m| m.get("model"))
        .and_then(Value::as_str)
        .map(str::to_string);
    // Claude Code's own answers (an API error, "No response requested.")
    // were never billed, whatever usage they carry.
    let usage = recorded_usage(event).filter(|_| model.as_deref() != Some(SYNTHETIC_MODEL));
    let cache_ttl = event
        .get("promptCacheRequested")
        .and_then(Value::as_str)
        .and_then(CacheTtl::parse)
        .or_else(|| {
            // Only a call that wrote says which lifetime it asked for.
            let creation = message?.get("usage")?.get("cache_creation")?;
            let written = |key: &str| creation.get(key).and_then(Value::as_u64).unwrap_or(0);
            if written("ephemeral_1h_input_tokens") > 0 {
                Some(CacheTtl::OneHour)
            } else if written("ephemeral_5m_input_tokens") > 0 {
                Some(CacheTtl::FiveMinutes)
            } else {
                None
            }
        });
    RecordedCall {
        message: 0,
        at_ms: event
            .get("timestamp")
            .and_then(Value::as_str)
            .and_then(|t| humantime::parse_rfc3339_weak(t).ok())
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_millis() as u64),
        model,
        usage,
        cache_ttl,
        request: event
            .get("requestRef")
            .and_then(Value::as_str)
            .and_then(|id| requests.rebuild(id)),
        prefix_rebuilt: false,
    }
}

/// `message.usage` as billed, when the event has it.
fn recorded_usage(event: &Map<String, Value>) -> Option<RecordedUsage> {
    let usage = event.get("message")?.get("usage")?;
    let n = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
    let written_1h = usage
        .get("cache_creation")
        .and_then(|c| c.get("ephemeral_1h_input_tokens"))
        .and_then(Value::as_u64)
        .unwrap_or(0);
    Some(RecordedUsage {
        input_tokens: n("input_tokens"),
        cache_read_tokens: n("cache_read_input_tokens"),
        cache_write_tokens: n("cache_creation_input_tokens"),
        cache_write_1h_tokens: written_1h,
        output_tokens: n("output_tokens"),
    })
}

/// `message.content` as the model saw it.
fn message_content(event: &Map<String, Value>) -> Result<Content, String> {
    let message = match event.get("message") {
        Some(Value::Object(m)) => m,
        Some(other) => {
            return Err(format!(
                "\"message\" is {}, not an object",
                json_kind(other)
            ));
        }
        None => return Err("the event has no \"message\"".into()),
    };
    match message.get("content") {
        Some(Value::String(s)) => Ok(Content::Text(s.clone())),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| match item {
                Value::Object(_) => Ok(Block::from_value(item.clone())),
                other => Err(format!(
                    "message.content[{i}] is {}, not a content block object",
                    json_kind(other)
                )),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Content::Blocks),
        Some(other) => Err(format!(
            "message.content is {}, not a string or an array",
            json_kind(other)
        )),
        None => Err(format!(
            "the {} event's message has no \"content\"",
            escape_controls(event.get("type").and_then(Value::as_str).unwrap_or("?"), 80)
        )),
    }
}

/// Appends a later part of a response to the message holding the earlier parts.
fn append(content: &mut Content, part: Content) {
    let mut blocks = match std::mem::replace(content, Content::Blocks(Vec::new())) {
        Content::Blocks(b) => b,
        Content::Text(s) if s.is_empty() => Vec::new(),
        Content::Text(s) => vec![Block::text(s)],
    };
    match part {
        Content::Blocks(b) => blocks.extend(b),
        Content::Text(s) if s.is_empty() => {}
        Content::Text(s) => blocks.push(Block::text(s)),
    }
    *content = Content::Blocks(blocks);
}
