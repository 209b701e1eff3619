//! whittle's session log: one JSON record per line, appended as the agent
//! works, so that a crash loses nothing that was written and a session can
//! be resumed, or replayed through other compaction policies.
//!
//! The agent writes it; this module defines the records and reads them
//! back, both for resuming (the history as the agent last had it) and for
//! replay (every message as it first entered the conversation).

mod output_refs;
mod rewind;

pub use output_refs::{OutputRef, log_form};
pub use rewind::{
    CheckpointMark, RewindPoint, RewindTarget, checkpoint_marks, rewind_points, session_before_line,
};

use crate::pipeline::Step;
use crate::{Block, Content, Message, Role};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};
use whittle_protocol::Usage;

/// The `format` of the first record; the importer recognises logs by it.
pub const SESSION_FORMAT: &str = "whittle-session-1";

/// The tool_result given to a tool call that a crash or cancel left unanswered.
pub const INTERRUPTED_RESULT: &str = "[interrupted: the session stopped before this tool finished; run it again if it is still needed]";

/// One line of a session log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum SessionRecord {
    /// The first line: which format and session the rest belongs to.
    Session {
        /// Always [`SESSION_FORMAT`].
        format: String,
        /// The session id (also the file stem).
        id: String,
        /// `PROVIDER:MODEL` at the start.
        model: String,
        /// The workspace, so a session is resumed where it ran.
        cwd: String,
        /// Milliseconds since the Unix epoch.
        created_ms: u64,
        /// The person's key's seal of the fields above, when whittle started
        /// the log with one: a log without it, or with another's, did not
        /// start here (a repository can ship `.whittle/sessions/`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        seal: Option<String>,
    },
    /// What the person typed, captured where input enters the loop: the
    /// active request that compaction keeps.
    Input {
        /// The text.
        text: String,
    },
    /// A message appended to the history.
    Message {
        /// The message, with long tool results replaced by markers naming
        /// the files that hold them (see [`log_form`]).
        message: Message,
        /// Where the texts taken out of `message` are.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        refs: Vec<OutputRef>,
    },
    /// A compaction step changed the history: after it, the history is the
    /// first `from` messages as they were, then `messages`.
    Compaction {
        /// The step's name (`micro_compact`, ...); `a+b` when several ran.
        step: String,
        /// Why each step ran (`over_limit`, ...), in the same order; empty in
        /// logs written before this field.
        #[serde(default)]
        trigger: String,
        /// Size before.
        before: u64,
        /// Size after.
        after: u64,
        /// Unit of the sizes.
        unit: String,
        /// Files written (persisted outputs, transcripts).
        paths: Vec<PathBuf>,
        /// How many leading messages the step left as they were (0, the
        /// whole history, in logs written before this field).
        #[serde(default)]
        from: usize,
        /// How many trailing messages the step left as they were, perhaps
        /// shifted (0 in logs written before this field).
        #[serde(default, skip_serializing_if = "is_zero")]
        keep_last: usize,
        /// The history between the kept head and tail, after the step, in
        /// log form.
        messages: Vec<Message>,
        /// Where the texts taken out of `messages` are.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        refs: Vec<OutputRef>,
        /// How many leading messages of the history are in the transcript
        /// after the step (absent in logs written before this field).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        archived: Option<usize>,
    },
    /// An archive step wrote messages to the transcript without changing
    /// the history (its summary failed or would not have helped): the first
    /// `count` messages are in the transcript, so a resumed session does not
    /// write them again.
    Archived {
        /// Leading messages now in the transcript.
        count: usize,
    },
    /// A compaction step failed (the store could not be written, the
    /// summary call failed) and left the history as it was.
    CompactionFailed {
        /// The step's name.
        step: String,
        /// Why it ran.
        trigger: String,
        /// What went wrong.
        reason: String,
    },
    /// A tool ran.
    ToolRun {
        /// The tool_use id.
        id: String,
        /// The tool.
        name: String,
        /// Wall time.
        ms: u64,
        /// Whether it failed.
        is_error: bool,
    },
    /// Token usage of one model call.
    Usage {
        /// Input tokens, cached or not.
        input_tokens: u64,
        /// Output tokens.
        output_tokens: u64,
        /// Of the input, read from the cache.
        cache_read_tokens: u64,
        /// Of the input, written to the cache.
        cache_write_tokens: u64,
    },
    /// `/clear`: the history starts over.
    Clear,
    /// The workspace's files were saved in the checkpoint store
    /// (`.whittle/checkpoints`), so `/rewind` can bring them back.
    Checkpoint {
        /// The checkpoint's id in the store.
        id: String,
        /// The tool call after which it was made; `None` for a turn's
        /// start, made before its first tool that may write.
        tool_call_id: Option<String>,
        /// Milliseconds since the Unix epoch.
        unix_ms: u64,
        /// Files changed since the previous checkpoint.
        files_changed: u64,
        /// Lines added since the previous checkpoint.
        insertions: u64,
        /// Lines removed since the previous checkpoint.
        deletions: u64,
        /// Why it was made, when not for a turn or a tool call (e.g.
        /// "before rewinding to ...", so the rewind can be undone).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
    /// A record this version does not know (a newer whittle wrote it):
    /// skipped, so older readers keep working.
    #[serde(other)]
    Unknown,
}

/// A session read back.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SessionState {
    /// The session id.
    pub id: String,
    /// `PROVIDER:MODEL` it started with.
    pub model: String,
    /// The workspace it started in, as its header says.
    pub cwd: String,
    /// When it started, as its header says.
    pub created_ms: u64,
    /// Its header's seal, if any.
    pub seal: Option<String>,
    /// The history as the agent last had it (compactions applied), repaired
    /// so that it is a valid request prefix: see [`repair_unanswered`].
    pub history: Vec<Message>,
    /// Every message as it first entered the conversation, compactions
    /// ignored: what replay feeds through other policies.
    pub original: Vec<Message>,
    /// The last active request, which a resumed session's compactions keep
    /// as the only instruction.
    pub request: String,
    /// Tool calls given an "interrupted" result on reading.
    pub repairs: usize,
    /// Sum of the usage records. The log counts all input tokens; here, as
    /// in every [`Usage`], `input_tokens` is the uncached part.
    pub usage: Usage,
    /// Model calls (usage records).
    pub calls: u64,
    /// How many leading messages of `history` are in the transcript already.
    pub archived: usize,
    /// Saved outputs the log refers to that are missing or changed, one line
    /// each, for the person resuming; the history says so where they were.
    pub problems: Vec<String>,
    /// The history just before the last summary or snip, then every message
    /// appended since: what undoing that compaction gives back (`None`
    /// when there was none since the start or the last clear).
    pub before_last_compaction: Option<Vec<Message>>,
}

/// Why a session log could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A line (not the last, which a crash may cut) is not a record.
    #[error("{path}:{line}: not a session record: {reason}")]
    BadLine {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// The parse error.
        reason: String,
    },
    /// The first line is not a session header.
    #[error("{path}: not a whittle session log (the first line is not a session record)")]
    NotASession {
        /// The file.
        path: PathBuf,
    },
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The step name of the compaction record `/uncompact` writes: it undoes
/// the last summary or snip, and leaves none to undo after it.
pub const UNCOMPACT_STEP: &str = "uncompact";

/// The step name of the compaction record a conversation rewind writes:
/// the whole history becomes the conversation as it was at an earlier
/// point, and no compaction is left to undo.
pub const REWIND_STEP: &str = "rewind";

/// Reads a session log. A last line cut by a crash is ignored.
pub fn read_session(path: &Path) -> Result<SessionState, SessionError> {
    let text = fs::read_to_string(path).map_err(|source| SessionError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_session(path, &text)
}

/// Every record of a session log's text with its 1-based line, in order.
/// A last line cut by a crash is left out; any other line that is not a
/// record is an error.
pub fn parse_records(path: &Path, text: &str) -> Result<Vec<(usize, SessionRecord)>, SessionError> {
    let lines: Vec<&str> = text.lines().collect();
    let mut records = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str(line) {
            Ok(r) => records.push((i + 1, r)),
            // A crash mid-write cuts only the last line.
            Err(_) if i + 1 == lines.len() && !text.ends_with('\n') => break,
            Err(e) => {
                return Err(SessionError::BadLine {
                    path: path.to_path_buf(),
                    line: i + 1,
                    reason: e.to_string(),
                });
            }
        }
    }
    Ok(records)
}

/// Parses the text of a session log; see [`read_session`].
pub fn parse_session(path: &Path, text: &str) -> Result<SessionState, SessionError> {
    let mut state = SessionState::default();
    // Logs live in ROOT/sessions/; the outputs they refer to are under ROOT.
    let root = path
        .parent()
        .and_then(Path::parent)
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let mut first = true;
    for (line, record) in parse_records(path, text)? {
        if first {
            let SessionRecord::Session {
                id,
                model,
                cwd,
                created_ms,
                seal,
                ..
            } = &record
            else {
                return Err(SessionError::NotASession {
                    path: path.to_path_buf(),
                });
            };
            state.id = id.clone();
            state.model = model.clone();
            state.cwd = cwd.clone();
            state.created_ms = *created_ms;
            state.seal = seal.clone();
            first = false;
            continue;
        }
        match record {
            SessionRecord::Session { .. }
            | SessionRecord::ToolRun { .. }
            | SessionRecord::CompactionFailed { .. }
            | SessionRecord::Checkpoint { .. }
            | SessionRecord::Unknown => {}
            SessionRecord::Input { text } => state.request = text,
            SessionRecord::Message { message, refs } => {
                let mut one = [message];
                output_refs::restore(&mut one, &refs, &root, &mut state.problems);
                let [message] = one;
                state.original.push(message.clone());
                if let Some(before) = &mut state.before_last_compaction {
                    before.push(message.clone());
                }
                state.history.push(message);
            }
            SessionRecord::Archived { count } => state.archived = count,
            SessionRecord::Compaction {
                step,
                from,
                keep_last,
                mut messages,
                refs,
                archived,
                ..
            } => {
                output_refs::restore(&mut messages, &refs, &root, &mut state.problems);
                if from > state.history.len() {
                    return Err(SessionError::BadLine {
                        path: path.to_path_buf(),
                        line,
                        reason: format!(
                            "a compaction keeps {from} messages of {}",
                            state.history.len()
                        ),
                    });
                }
                if keep_last > state.history.len() - from {
                    return Err(SessionError::BadLine {
                        path: path.to_path_buf(),
                        line,
                        reason: format!(
                            "a compaction keeps {from} leading and {keep_last} trailing messages of {}",
                            state.history.len()
                        ),
                    });
                }
                if [
                    Step::CompactHistory,
                    Step::ReactiveCompact,
                    Step::SnipCompact,
                ]
                .iter()
                .any(|s| step.split('+').any(|part| part == s.as_str()))
                {
                    state.before_last_compaction = Some(state.history.clone());
                }
                let tail = state.history.split_off(state.history.len() - keep_last);
                state.history.truncate(from);
                state.history.extend(messages);
                state.history.extend(tail);
                state.archived = archived.unwrap_or(0);
                if step == UNCOMPACT_STEP || step == REWIND_STEP {
                    state.before_last_compaction = None;
                }
            }
            SessionRecord::Usage {
                input_tokens,
                output_tokens,
                cache_read_tokens,
                cache_write_tokens,
            } => {
                state.calls += 1;
                state.usage += Usage {
                    input_tokens: input_tokens
                        .saturating_sub(cache_read_tokens)
                        .saturating_sub(cache_write_tokens),
                    output_tokens,
                    cache_creation_input_tokens: cache_write_tokens,
                    cache_read_input_tokens: cache_read_tokens,
                };
            }
            SessionRecord::Clear => {
                state.history.clear();
                state.archived = 0;
                state.before_last_compaction = None;
            }
        }
    }
    if first {
        return Err(SessionError::NotASession {
            path: path.to_path_buf(),
        });
    }
    state.archived = state.archived.min(state.history.len());
    state.repairs = repair_unanswered(&mut state.history);
    repair_unanswered(&mut state.original);
    if let Some(before) = &mut state.before_last_compaction {
        repair_unanswered(before);
    }
    Ok(state)
}

/// Gives every tool_use of the final assistant turn that has no result an
/// error result saying it was interrupted, so the history is a valid request
/// prefix again. Returns how many it answered.
pub fn repair_unanswered(history: &mut Vec<Message>) -> usize {
    let Some(last_assistant) = history.iter().rposition(|m| m.role() == Role::Assistant) else {
        return 0;
    };
    let answered: HashSet<String> = history[last_assistant + 1..]
        .iter()
        .flat_map(|m| m.tool_results().map(|r| r.tool_use_id.clone()))
        .collect();
    // The assistant turn may span several messages.
    let turn_start = history[..last_assistant]
        .iter()
        .rposition(|m| m.role() != Role::Assistant)
        .map_or(0, |i| i + 1);
    let missing: Vec<Block> = history[turn_start..=last_assistant]
        .iter()
        .flat_map(Message::tool_uses)
        .filter(|t| !answered.contains(&t.id))
        .map(|t| Block::tool_result(t.id.clone(), INTERRUPTED_RESULT, true))
        .collect();
    let count = missing.len();
    if count == 0 {
        return 0;
    }
    match history.get(last_assistant + 1) {
        // Results already there: add the missing ones before anything else.
        Some(next) if next.has_tool_result() => {
            let mut blocks = missing;
            blocks.extend(next.blocks().iter().cloned());
            history[last_assistant + 1] =
                Message::with_extra(next.role(), Content::Blocks(blocks), next.extra().clone());
        }
        _ => history.insert(last_assistant + 1, Message::user_blocks(missing)),
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use whittle_protocol::validate;

    fn line(r: &SessionRecord) -> String {
        serde_json::to_string(r).unwrap() + "\n"
    }

    #[test]
    fn a_log_cut_mid_tool_resumes_valid() {
        let mut text = line(&SessionRecord::Session {
            format: SESSION_FORMAT.into(),
            id: "s1".into(),
            model: "anthropic:claude-sonnet-5-5".into(),
            cwd: "/w".into(),
            created_ms: 1,
            seal: None,
        });
        text += &line(&SessionRecord::Input {
            text: "fix it".into(),
        });
        text += &line(&SessionRecord::Message {
            message: Message::user("fix it"),
            refs: Vec::new(),
        });
        text += &line(&SessionRecord::Message {
            message: Message::assistant_blocks(vec![
                Block::tool_use("a", "bash", json!({"command": "sleep 100"})),
                Block::tool_use("b", "bash", json!({"command": "ls"})),
            ]),
            refs: Vec::new(),
        });
        text += "{\"type\":\"tool_run\",\"id\":\"a\",\"na"; // cut by the crash
        let s = parse_session(Path::new("x.jsonl"), &text).unwrap();
        assert_eq!(s.request, "fix it");
        assert_eq!(s.repairs, 2);
        assert_eq!(validate(&s.history), Ok(()));
        assert_eq!(s.history.len(), 3);
        assert!(
            s.history[2]
                .tool_results()
                .all(|r| r.is_error == Some(true))
        );
    }

    #[test]
    fn compactions_replace_the_history_but_not_the_original() {
        let mut text = line(&SessionRecord::Session {
            format: SESSION_FORMAT.into(),
            id: "s".into(),
            model: "m".into(),
            cwd: "/".into(),
            created_ms: 0,
            seal: None,
        });
        for m in [
            Message::user("a"),
            Message::assistant("b"),
            Message::user("c"),
        ] {
            text += &line(&SessionRecord::Message {
                message: m,
                refs: Vec::new(),
            });
        }
        text += &line(&SessionRecord::Compaction {
            step: "compact_history".into(),
            trigger: "over_limit".into(),
            before: 10,
            after: 1,
            unit: "tokens".into(),
            paths: vec![],
            from: 0,
            keep_last: 0,
            messages: vec![Message::user("[Compacted] ...")],
            refs: Vec::new(),
            archived: None,
        });
        text += &line(&SessionRecord::Message {
            message: Message::assistant("d"),
            refs: Vec::new(),
        });
        let s = parse_session(Path::new("x"), &text).unwrap();
        assert_eq!(s.history.len(), 2);
        assert_eq!(s.original.len(), 4);
        // A record written before `from` existed replaces the whole history.
        let old_style = line(&SessionRecord::Compaction {
            step: "s".into(),
            trigger: String::new(),
            before: 1,
            after: 1,
            unit: "tokens".into(),
            paths: vec![],
            from: 0,
            keep_last: 0,
            messages: vec![Message::user("only")],
            refs: Vec::new(),
            archived: None,
        })
        .replace(",\"from\":0", "");
        assert!(!old_style.contains("from"));
        let s = parse_session(Path::new("x"), &(text.clone() + &old_style)).unwrap();
        assert_eq!(s.history, [Message::user("only")]);
        // A step that kept the first message replaces only the rest.
        let tail = line(&SessionRecord::Compaction {
            step: "tool_result_budget".into(),
            trigger: "batch_over_budget".into(),
            before: 9,
            after: 5,
            unit: "tokens".into(),
            paths: vec![],
            from: 1,
            keep_last: 0,
            messages: vec![Message::assistant("d, shorter")],
            refs: Vec::new(),
            archived: None,
        });
        let s = parse_session(Path::new("x"), &(text.clone() + &tail)).unwrap();
        assert_eq!(s.history.len(), 2);
        assert_eq!(s.history[0].text(), "[Compacted] ...");
        assert_eq!(s.history[1].text(), "d, shorter");
        let beyond = tail.replace("\"from\":1", "\"from\":7");
        assert!(matches!(
            parse_session(Path::new("x"), &(text.clone() + &beyond)),
            Err(SessionError::BadLine { line: 7, .. })
        ));
        assert!(matches!(
            parse_session(Path::new("x"), "{\"type\":\"input\",\"text\":\"a\"}\n"),
            Err(SessionError::NotASession { .. })
        ));
        assert!(matches!(
            parse_session(Path::new("x"), &(text.clone() + "garbage\n")),
            Err(SessionError::BadLine { line: 7, .. })
        ));
    }
}
