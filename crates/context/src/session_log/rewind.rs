//! Where a session can be rewound to: the person's messages and the tool
//! calls that changed files, each with the checkpoint that holds the
//! workspace's files as they were then, and the log line before which the
//! conversation was as it was then.
//!
//! The log keeps every message, compactions included, so the conversation
//! at any line is the log read up to it: a point before a summary gets back
//! the messages the summary replaced.

use super::{SessionError, SessionRecord, SessionState, parse_records, parse_session};
use std::collections::HashMap;
use std::path::Path;

/// A checkpoint the session log records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointMark {
    /// The log line of its record (1-based).
    pub line: usize,
    /// Its id in the checkpoint store.
    pub id: String,
    /// The tool call it followed; `None` at a turn's start.
    pub tool_call_id: Option<String>,
    /// That tool call's tool, when the log names it.
    pub tool_name: Option<String>,
    /// Milliseconds since the Unix epoch.
    pub unix_ms: u64,
    /// Files changed since the previous checkpoint.
    pub files_changed: u64,
    /// Lines added since the previous checkpoint.
    pub insertions: u64,
    /// Lines removed since the previous checkpoint.
    pub deletions: u64,
    /// Why it was made, when not for a turn or a tool call.
    pub note: Option<String>,
}

/// What a rewind point is, for the picker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RewindTarget {
    /// Before the person sent this message: its turn undone.
    PersonMessage {
        /// What they typed.
        text: String,
    },
    /// Just after a tool call that changed files.
    ToolCall {
        /// The tool_use id.
        id: String,
        /// The tool.
        name: String,
    },
    /// Just before an earlier rewind: undoes it.
    BeforeRewind {
        /// The checkpoint's note.
        note: String,
    },
}

/// One place a session can be rewound to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RewindPoint {
    /// What it is.
    pub target: RewindTarget,
    /// The conversation rewinds to as it was before this log line.
    pub cut_line: usize,
    /// The checkpoint holding the files as they were then; `None` when the
    /// session made none by then (nothing to restore).
    pub checkpoint: Option<String>,
    /// When (of the checkpoint, or of the person's message's turn).
    pub unix_ms: Option<u64>,
    /// Files changed by what the point undoes (the turn, or the call).
    pub files_changed: u64,
    /// Lines added by it.
    pub insertions: u64,
    /// Lines removed by it.
    pub deletions: u64,
}

/// Every checkpoint record, oldest first.
pub fn checkpoint_marks(records: &[(usize, SessionRecord)]) -> Vec<CheckpointMark> {
    let mut names: HashMap<&str, &str> = HashMap::new();
    let mut out = Vec::new();
    for (line, record) in records {
        match record {
            SessionRecord::ToolRun { id, name, .. } => {
                names.insert(id, name);
            }
            SessionRecord::Checkpoint {
                id,
                tool_call_id,
                unix_ms,
                files_changed,
                insertions,
                deletions,
                note,
            } => out.push(CheckpointMark {
                line: *line,
                id: id.clone(),
                tool_call_id: tool_call_id.clone(),
                tool_name: tool_call_id
                    .as_deref()
                    .and_then(|t| names.get(t))
                    .map(|n| n.to_string()),
                unix_ms: *unix_ms,
                files_changed: *files_changed,
                insertions: *insertions,
                deletions: *deletions,
                note: note.clone(),
            }),
            _ => {}
        }
    }
    out
}

/// The places the session logged in `text` can be rewound to, oldest
/// first: each person's message (code as at its turn's start) and each
/// tool call that changed files (code and conversation just after it).
pub fn rewind_points(path: &Path, text: &str) -> Result<Vec<RewindPoint>, SessionError> {
    let records = parse_records(path, text)?;
    let marks = checkpoint_marks(&records);
    // The line after the message that answers each tool call.
    let mut answered: HashMap<String, usize> = HashMap::new();
    for (line, record) in &records {
        if let SessionRecord::Message { message, .. } = record {
            for r in message.tool_results() {
                answered.entry(r.tool_use_id.clone()).or_insert(line + 1);
            }
        }
    }
    let mut points: Vec<RewindPoint> = Vec::new();
    let mut marks = marks.into_iter().peekable();
    let mut last_checkpoint: Option<(String, u64)> = None;
    // The person's message whose turn is running, and whether its turn's
    // start checkpoint was seen.
    let mut turn: Option<(usize, bool)> = None;
    for (line, record) in &records {
        match record {
            SessionRecord::Input { text } => {
                turn = Some((points.len(), false));
                points.push(RewindPoint {
                    target: RewindTarget::PersonMessage { text: text.clone() },
                    cut_line: *line,
                    checkpoint: last_checkpoint.as_ref().map(|(id, _)| id.clone()),
                    unix_ms: last_checkpoint.as_ref().map(|(_, ms)| *ms),
                    files_changed: 0,
                    insertions: 0,
                    deletions: 0,
                });
            }
            SessionRecord::Checkpoint { .. } => {
                let Some(mark) = marks.next_if(|m| m.line == *line) else {
                    continue;
                };
                last_checkpoint = Some((mark.id.clone(), mark.unix_ms));
                if let Some(note) = &mark.note {
                    points.push(RewindPoint {
                        target: RewindTarget::BeforeRewind { note: note.clone() },
                        cut_line: line + 1,
                        checkpoint: Some(mark.id.clone()),
                        unix_ms: Some(mark.unix_ms),
                        files_changed: mark.files_changed,
                        insertions: mark.insertions,
                        deletions: mark.deletions,
                    });
                    continue;
                }
                match &mark.tool_call_id {
                    None => {
                        if let Some((at, seen)) = &mut turn
                            && !*seen
                        {
                            *seen = true;
                            points[*at].checkpoint = Some(mark.id.clone());
                            points[*at].unix_ms = Some(mark.unix_ms);
                        }
                    }
                    Some(call) => {
                        if let Some((at, _)) = turn {
                            let p = &mut points[at];
                            p.files_changed += mark.files_changed;
                            p.insertions += mark.insertions;
                            p.deletions += mark.deletions;
                        }
                        if mark.files_changed > 0 {
                            points.push(RewindPoint {
                                target: RewindTarget::ToolCall {
                                    id: call.clone(),
                                    name: mark.tool_name.clone().unwrap_or_default(),
                                },
                                cut_line: answered.get(call).copied().unwrap_or(line + 1),
                                checkpoint: Some(mark.id.clone()),
                                unix_ms: Some(mark.unix_ms),
                                files_changed: mark.files_changed,
                                insertions: mark.insertions,
                                deletions: mark.deletions,
                            });
                        }
                    }
                }
            }
            SessionRecord::Clear => turn = None,
            _ => {}
        }
    }
    Ok(points)
}

/// The session as it was before log line `line` (1-based): its history is
/// the conversation a rewind to that line gives back.
pub fn session_before_line(
    path: &Path,
    text: &str,
    line: usize,
) -> Result<SessionState, SessionError> {
    let mut prefix = String::with_capacity(text.len());
    for l in text.lines().take(line.saturating_sub(1)) {
        prefix.push_str(l);
        prefix.push('\n');
    }
    parse_session(path, &prefix)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::session_log::{REWIND_STEP, SESSION_FORMAT};
    use crate::{Block, Message};
    use serde_json::json;

    fn line(r: &SessionRecord) -> String {
        serde_json::to_string(r).unwrap() + "\n"
    }

    fn checkpoint(id: &str, call: Option<&str>, files: u64) -> SessionRecord {
        SessionRecord::Checkpoint {
            id: id.into(),
            tool_call_id: call.map(str::to_string),
            unix_ms: 5,
            files_changed: files,
            insertions: files,
            deletions: 0,
            note: None,
        }
    }

    fn header() -> String {
        line(&SessionRecord::Session {
            format: SESSION_FORMAT.into(),
            id: "s".into(),
            model: "m".into(),
            cwd: "/w".into(),
            created_ms: 0,
            seal: None,
        })
    }

    /// A turn: input, a bash call between a turn-start checkpoint and its
    /// own, its result, an answer.
    fn turn(text: &str, call: &str, files: u64) -> String {
        let mut s = line(&SessionRecord::Input { text: text.into() });
        s += &line(&SessionRecord::Message {
            message: Message::user(text),
            refs: Vec::new(),
        });
        s += &line(&SessionRecord::Message {
            message: Message::assistant_blocks(vec![Block::tool_use(
                call,
                "bash",
                json!({"command": "touch x"}),
            )]),
            refs: Vec::new(),
        });
        s += &line(&checkpoint(&format!("start-{call}"), None, 0));
        s += &line(&SessionRecord::ToolRun {
            id: call.into(),
            name: "bash".into(),
            ms: 1,
            is_error: false,
        });
        s += &line(&checkpoint(&format!("after-{call}"), Some(call), files));
        s += &line(&SessionRecord::Message {
            message: Message::user_blocks(vec![Block::tool_result(call, "ok", false)]),
            refs: Vec::new(),
        });
        s += &line(&SessionRecord::Message {
            message: Message::assistant(format!("done {text}")),
            refs: Vec::new(),
        });
        s
    }

    #[test]
    fn points_are_messages_and_calls_that_changed_files() {
        let text = header() + &turn("one", "c1", 2) + &turn("two", "c2", 0);
        let points = rewind_points(Path::new("x"), &text).unwrap();
        let kinds: Vec<&RewindTarget> = points.iter().map(|p| &p.target).collect();
        assert_eq!(
            kinds,
            [
                &RewindTarget::PersonMessage { text: "one".into() },
                &RewindTarget::ToolCall {
                    id: "c1".into(),
                    name: "bash".into()
                },
                &RewindTarget::PersonMessage { text: "two".into() },
            ]
        );
        assert_eq!(points[0].checkpoint.as_deref(), Some("start-c1"));
        assert_eq!(points[0].files_changed, 2);
        assert_eq!(points[1].checkpoint.as_deref(), Some("after-c1"));
        assert_eq!(points[2].checkpoint.as_deref(), Some("start-c2"));
        // Before "one": nothing; just after c1: its result is in.
        let s = session_before_line(Path::new("x"), &text, points[0].cut_line).unwrap();
        assert!(s.history.is_empty());
        let s = session_before_line(Path::new("x"), &text, points[1].cut_line).unwrap();
        assert_eq!(s.history.len(), 3);
        assert_eq!(s.repairs, 0);
        let s = session_before_line(Path::new("x"), &text, points[2].cut_line).unwrap();
        assert_eq!(s.history.last().unwrap().text(), "done one");
    }

    #[test]
    fn a_rewind_record_replaces_the_history_and_leaves_nothing_to_uncompact() {
        let mut text = header() + &turn("one", "c1", 1);
        text += &line(&SessionRecord::Compaction {
            step: "compact_history".into(),
            trigger: "over_limit".into(),
            before: 10,
            after: 1,
            unit: "tokens".into(),
            paths: vec![],
            from: 0,
            keep_last: 0,
            messages: vec![Message::user("[summary]")],
            refs: Vec::new(),
            archived: None,
        });
        let s = parse_session(Path::new("x"), &text).unwrap();
        assert!(s.before_last_compaction.is_some());
        text += &line(&SessionRecord::Compaction {
            step: REWIND_STEP.into(),
            trigger: "requested".into(),
            before: 1,
            after: 0,
            unit: "tokens".into(),
            paths: vec![],
            from: 0,
            keep_last: 0,
            messages: vec![],
            refs: Vec::new(),
            archived: Some(0),
        });
        let s = parse_session(Path::new("x"), &text).unwrap();
        assert!(s.history.is_empty());
        assert_eq!(s.before_last_compaction, None);
    }

    #[test]
    fn unknown_records_are_skipped_and_old_logs_without_checkpoints_load() {
        let old = header()
            + &turn("one", "c1", 1)
                .replace("\"type\":\"checkpoint\"", "\"type\":\"from_the_future\"");
        assert!(old.contains("from_the_future"));
        let s = parse_session(Path::new("x"), &old).unwrap();
        assert_eq!(s.history.len(), 4);
        let points = rewind_points(Path::new("x"), &old).unwrap();
        assert_eq!(points.len(), 1);
        assert_eq!(points[0].checkpoint, None);
        // A checkpoint record round-trips; its note is optional.
        let r = checkpoint("a", None, 1);
        let text = line(&r);
        assert!(!text.contains("note"));
        assert_eq!(serde_json::from_str::<SessionRecord>(&text).unwrap(), r);
    }
}
