//! Importers of recorded agent sessions into the conversation model.
//!
//! `whittle replay` measures the compaction pipeline on sessions recorded by
//! other agents. Each importer turns one file into [`Conversation`]s whose
//! messages pass [`validate`](whittle_protocol::validate()), because replay must only send
//! requests the API would accept. The format is detected from the content,
//! never from the file name:
//! - Claude Code session logs (JSONL events), see [`Format::ClaudeCode`];
//! - mini-swe-agent trajectories, see [`Format::MiniSweAgent`];
//! - OpenAI chat-completions message lists, see [`Format::OpenAiMessages`];
//! - whittle's own session logs: recognized, not imported yet.
//!
//! Recordings break the pairing rules in ordinary ways (a crash mid-tool,
//! an interrupted turn). Such faults are repaired minimally, without losing
//! content, and counted in [`Conversation::repairs`]; see [`INTERRUPTED`].
//! A JSONL file whose final line was cut by a crash mid-write is read up to
//! that line, which counts as one repair; every other malformed input is an
//! [`ImportError`] naming the file and the line or JSON path.

mod claude_code;
mod draft;
mod error;
mod jsonl;
mod mini_swe_agent;
mod openai;
mod tree;

pub use draft::{INTERRUPTED, MISSING_OPENING};
pub use error::ImportError;
pub use openai::RAW_ARGUMENTS_KEY;
pub use tree::{ImportedFile, import_tree, trace_files};

use crate::prefix_change::{PREFIX_CHANGE_SHORTFALL, changed_prompts};
use crate::recorded::RecordedCall;
use draft::Draft;
use serde_json::{Map, Value};
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use whittle_protocol::Message;
use whittle_protocol::validate;

/// One recorded conversation, ready to replay.
#[derive(Clone, Debug, PartialEq)]
pub struct Conversation {
    /// A stable name: the file name without its extension (and without
    /// `.traj`). A subagent file's is `<session>/<file stem>`; a sidechain
    /// inside a session file is `<session>/agent-<agentId>`, or
    /// `<session>/sidechain-<uuid of its first event>` without an agentId.
    pub id: String,
    /// The file it came from.
    pub source: PathBuf,
    /// The format it was read as.
    pub format: Format,
    /// The system prompt, when the recording has one.
    pub system: Option<String>,
    /// The messages, valid for the Messages API.
    pub messages: Vec<Message>,
    /// Where the recording agent compacted its own context, in order.
    pub compaction_boundaries: Vec<Boundary>,
    /// How many faults were repaired to make the messages valid (0 for a
    /// clean recording); see the module documentation.
    pub repairs: usize,
    /// What the recording says about its model calls (time, model, billed
    /// usage, the exact request), in order; empty when it says nothing.
    pub calls: Vec<RecordedCall>,
    /// Indices, ascending, of the user messages the recording agent's harness
    /// wrote rather than the person (reminders, skill bodies, command output,
    /// format errors, its own compaction summary) or that an importer's
    /// repair made; survival probes do not take them for the person's words.
    pub injected: Vec<usize>,
    /// Calls the recording billed that are not on the replayed path, once
    /// per response: branches the person rewound or edited away, responses
    /// logged off the thread that was last sent. Replay cannot make their
    /// requests, so they are reported beside it (see
    /// [`RecordedTotals`](crate::RecordedTotals)), not dropped.
    pub abandoned: Vec<RecordedCall>,
    /// The id of the session this conversation is the recording agent's
    /// own compaction call for (Claude Code's `acompact-` agents, which
    /// summarize the session for its `/compact` and its automatic
    /// compactions), when it is one. Such a call belongs to the recording
    /// agent's policy: `none` makes it, as part of that session's bill; a
    /// policy with a pipeline makes its own summaries instead, priced in
    /// the session itself (see [`replay_paths`](crate::replay_paths)).
    pub summarizes: Option<String>,
}

/// A compaction the recording agent performed (e.g. Claude Code's `/compact`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Boundary {
    /// Index in [`Conversation::messages`] of the first message after the
    /// compaction (in Claude Code, the summary); `messages.len()` when the
    /// recording ends at the boundary.
    pub index: usize,
    /// What started it, as recorded (`"auto"`, `"manual"`), when known.
    pub trigger: Option<String>,
    /// The context size in tokens just before it, when recorded.
    pub pre_tokens: Option<u64>,
}

impl Boundary {
    /// Whether the person asked for this compaction (Claude Code's
    /// `/compact`), rather than the recording agent deciding on its own.
    pub fn requested(&self) -> bool {
        self.trigger.as_deref() == Some("manual")
    }
}

/// The recording formats this module knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// whittle's own `.whittle/sessions/*.jsonl`; detected, not importable yet.
    WhittleSession,
    /// Claude Code's session JSONL, one event per line. Kept: `user` and
    /// `assistant` events' `message.content`, verbatim, including `isMeta`
    /// events (hidden from the person, sent to the model) and the compaction
    /// summary. Merged: consecutive `assistant` events sharing `message.id`
    /// (one response), even with tool results logged between them. Boundaries:
    /// `system` events with subtype `compact_boundary`. Skipped: other
    /// `system` events, `progress`, `file-history-snapshot`, `summary`,
    /// unknown types, repeated `uuid`s, and bookkeeping fields (`toolUseResult`,
    /// `usage`, `model`). Sidechain events in a session file (older logs)
    /// become their own conversations.
    ClaudeCode,
    /// mini-swe-agent's `mini-swe-agent-1` trajectory. An assistant message
    /// with exactly one fenced bash block becomes a text block holding the
    /// whole message as written, then `tool_use{name: "bash", input: {command}}`
    /// (id `msa-bash-<index in the file>`), answered by the next user message
    /// verbatim. With no block or several, mini-swe-agent ran nothing and
    /// replied with a format error, so the message stays text.
    MiniSweAgent,
    /// A JSON array of OpenAI chat messages, or `{"messages": [...]}`.
    /// Leading `system`/`developer` messages become the system prompt, later
    /// ones user text; `tool_calls` become tool_use blocks (arguments that are
    /// not a JSON object are kept under [`RAW_ARGUMENTS_KEY`]); `tool`
    /// messages become tool_results; `image_url` parts become image blocks.
    OpenAiMessages,
}

impl Format {
    /// A short name for tables and messages.
    pub fn name(self) -> &'static str {
        match self {
            Format::WhittleSession => "whittle-session",
            Format::ClaudeCode => "claude-code",
            Format::MiniSweAgent => "mini-swe-agent",
            Format::OpenAiMessages => "openai-messages",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Imports every conversation in one file, whatever its name.
///
/// A Claude Code session's subagents live in other files; import those (or
/// the whole folder with [`import_tree`]) to get them.
pub fn import_path(path: &Path) -> Result<Vec<Conversation>, ImportError> {
    let bytes = fs::read(path).map_err(|source| ImportError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&bytes);
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ImportError::Empty {
            path: path.to_path_buf(),
        });
    }
    let id = conversation_id(path);
    match serde_json::from_slice::<Value>(bytes) {
        Ok(value) => import_document(path, &id, value, bytes),
        // Not one JSON document: JSON Lines, if the first line says so.
        Err(whole) => match jsonl::first_values(bytes).as_slice() {
            [Value::Object(first), ..] if jsonl_format(first).is_some() => {
                import_jsonl(path, &id, first, bytes)
            }
            [Value::Object(_), Value::Object(_)] => Err(ImportError::UnknownFormat {
                path: path.to_path_buf(),
                reason: "JSON Lines whose first line is not a Claude Code event".into(),
            }),
            _ => Err(ImportError::Syntax {
                path: path.to_path_buf(),
                line: whole.line(),
                column: whole.column(),
                reason: jsonl::reason(&whole),
            }),
        },
    }
}

/// A file that is a single JSON value.
fn import_document(
    path: &Path,
    id: &str,
    value: Value,
    bytes: &[u8],
) -> Result<Vec<Conversation>, ImportError> {
    let unknown = |reason: String| ImportError::UnknownFormat {
        path: path.to_path_buf(),
        reason,
    };
    let object = match value {
        Value::Array(messages) => return Ok(vec![openai::import(path, id, "", &messages)?]),
        Value::Object(object) => object,
        other => {
            return Err(unknown(format!(
                "a lone JSON value ({})",
                whittle_protocol::json_kind(&other)
            )));
        }
    };
    if let Some(format) = object.get("trajectory_format") {
        return match format.as_str() {
            Some(mini_swe_agent::TRAJECTORY_FORMAT) => {
                Ok(vec![mini_swe_agent::import(path, id, &object)?])
            }
            _ => Err(unknown(format!(
                "trajectory_format {} is not {:?}",
                whittle_protocol::escape_controls(&format.to_string(), 80),
                mini_swe_agent::TRAJECTORY_FORMAT
            ))),
        };
    }
    if let Some(messages) = object.get("messages") {
        return match messages {
            Value::Array(messages) => Ok(vec![openai::import(path, id, "messages", messages)?]),
            _ => Err(ImportError::BadValue {
                path: path.to_path_buf(),
                at: "messages".into(),
                reason: "expected an array of messages".into(),
            }),
        };
    }
    // A JSON Lines file with a single line.
    if jsonl_format(&object).is_some() {
        return import_jsonl(path, id, &object, bytes);
    }
    Err(unknown(
        "a JSON object without \"messages\", \"trajectory_format\" or a Claude Code event \"type\""
            .into(),
    ))
}

/// The format of a JSON Lines file, judged by its first object.
fn jsonl_format(first: &Map<String, Value>) -> Option<Format> {
    if looks_like_whittle_session(first) {
        Some(Format::WhittleSession)
    } else if claude_code::looks_like_event(first) {
        Some(Format::ClaudeCode)
    } else {
        None
    }
}

/// whittle's session logs start with a `session` record naming the format.
fn looks_like_whittle_session(first: &Map<String, Value>) -> bool {
    first.get("type").and_then(Value::as_str) == Some("session")
        && first
            .get("format")
            .and_then(Value::as_str)
            .is_some_and(|f| f.starts_with("whittle-session"))
}

fn import_jsonl(
    path: &Path,
    id: &str,
    first: &Map<String, Value>,
    bytes: &[u8],
) -> Result<Vec<Conversation>, ImportError> {
    match jsonl_format(first) {
        Some(Format::ClaudeCode) => claude_code::import(path, id, jsonl::parse(path, bytes)?),
        Some(Format::WhittleSession) => import_whittle_session(path, id, bytes),
        Some(format) => Err(ImportError::Unsupported {
            path: path.to_path_buf(),
            format,
        }),
        None => Err(ImportError::UnknownFormat {
            path: path.to_path_buf(),
            reason: "JSON Lines whose first line is not a known event".into(),
        }),
    }
}

/// A whittle session: every message as it first entered the conversation
/// (the agent's own compactions are what replay re-decides).
fn import_whittle_session(
    path: &Path,
    id: &str,
    bytes: &[u8],
) -> Result<Vec<Conversation>, ImportError> {
    let text = String::from_utf8_lossy(bytes);
    let state = whittle_context::session::parse_session(path, &text).map_err(|e| {
        ImportError::BadValue {
            path: path.to_path_buf(),
            at: "session".into(),
            reason: e.to_string(),
        }
    })?;
    if state.original.is_empty() {
        return Err(ImportError::NoMessages {
            path: path.to_path_buf(),
            id: id.to_string(),
        });
    }
    validate(&state.original).map_err(|source| ImportError::Invalid {
        path: path.to_path_buf(),
        id: id.to_string(),
        source,
    })?;
    Ok(vec![Conversation {
        id: id.to_string(),
        source: path.to_path_buf(),
        format: Format::WhittleSession,
        system: None,
        messages: state.original,
        compaction_boundaries: Vec::new(),
        repairs: 0,
        calls: Vec::new(),
        injected: Vec::new(),
        abandoned: Vec::new(),
        summarizes: None,
    }])
}

/// The id of the conversation a file holds; see [`Conversation::id`].
fn conversation_id(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut stem = name.as_str();
    for suffix in [".jsonl", ".json"] {
        if stem.len() > suffix.len()
            && stem.is_char_boundary(stem.len() - suffix.len())
            && stem[stem.len() - suffix.len()..].eq_ignore_ascii_case(suffix)
        {
            stem = &stem[..stem.len() - suffix.len()];
            break;
        }
    }
    let stem = stem.strip_suffix(".traj").unwrap_or(stem);
    let parent = path.parent();
    let in_subagents = parent
        .and_then(Path::file_name)
        .is_some_and(|n| n == "subagents");
    match parent.and_then(Path::parent).and_then(Path::file_name) {
        Some(session) if in_subagents => format!("{}/{stem}", session.to_string_lossy()),
        _ => stem.to_string(),
    }
}

/// System prompt parts joined by a blank line; `None` when there are none.
fn system_text<S: AsRef<str>>(parts: &[S]) -> Option<String> {
    if parts.is_empty() {
        return None;
    }
    Some(
        parts
            .iter()
            .map(AsRef::as_ref)
            .collect::<Vec<_>>()
            .join("\n\n"),
    )
}

/// Repairs a draft and checks the result, so that no importer can hand out
/// a conversation the validator rejects.
fn finish(
    path: &Path,
    id: String,
    format: Format,
    system: Option<String>,
    draft: Draft,
) -> Result<Conversation, ImportError> {
    let finished = draft.finish();
    if finished.messages.is_empty() {
        return Err(ImportError::NoMessages {
            path: path.to_path_buf(),
            id,
        });
    }
    if let Err(source) = validate(&finished.messages) {
        return Err(ImportError::Invalid {
            path: path.to_path_buf(),
            id,
            source,
        });
    }
    let mut calls = finished.calls;
    let restarts: Vec<usize> = finished.boundaries.iter().map(|b| b.index).collect();
    let changed = changed_prompts(&calls, &restarts, PREFIX_CHANGE_SHORTFALL);
    for (call, changed) in calls.iter_mut().zip(changed) {
        call.prefix_rebuilt = changed;
    }
    Ok(Conversation {
        id,
        source: path.to_path_buf(),
        format,
        system,
        messages: finished.messages,
        compaction_boundaries: finished.boundaries,
        repairs: finished.repairs,
        calls,
        injected: finished.injected,
        abandoned: Vec::new(),
        summarizes: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_come_from_the_file_name() {
        assert_eq!(conversation_id(Path::new("a/b/s1.jsonl")), "s1");
        assert_eq!(conversation_id(Path::new("x.traj.json")), "x");
        assert_eq!(conversation_id(Path::new("X.JSON")), "X");
        assert_eq!(
            conversation_id(Path::new("p/s1/subagents/agent-a1.jsonl")),
            "s1/agent-a1"
        );
        assert_eq!(conversation_id(Path::new("subagents/a.json")), "a");
        assert_eq!(conversation_id(Path::new("é.jsonl")), "é");
    }
}
