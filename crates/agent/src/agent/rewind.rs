//! `/rewind`: the workspace's files, the conversation, or both, as they
//! were at a person's message or just after a tool call that changed files.
//!
//! The files come from the checkpoint store; the conversation from the
//! session log, which keeps every message (compactions included), so a
//! point before a summary gets the summarized messages back. The rewind is
//! logged as a compaction record that replaces the whole history, which
//! older readers already understand, so `--continue` resumes it.

use super::events::EventSink;
use super::{Agent, AgentError, LOG_INLINE_MAX_CHARS};
use crate::session::{SessionFileError, SessionWriter};
use std::path::Path;
use whittle_checkpoint::RestoreReport;
use whittle_context::History;
use whittle_context::session::{
    REWIND_STEP, RewindPoint, SessionRecord, log_form, rewind_points, session_before_line,
};
use whittle_protocol::{Message, Redactor};
use whittle_store::Store;

/// What a rewind brings back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RewindScope {
    /// The files and the conversation.
    Both,
    /// Only the files.
    Code,
    /// Only the conversation.
    Conversation,
}

impl RewindScope {
    /// Whether the files are restored.
    pub fn code(self) -> bool {
        matches!(self, RewindScope::Both | RewindScope::Code)
    }

    /// Whether the conversation is rewound.
    pub fn conversation(self) -> bool {
        matches!(self, RewindScope::Both | RewindScope::Conversation)
    }
}

/// What a rewind did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rewound {
    /// The files' restore, when asked for.
    pub restore: Option<RestoreReport>,
    /// Messages in the history after a conversation rewind.
    pub messages: Option<usize>,
    /// The rewound conversation is over the compaction limit: it is
    /// compacted again before the next request.
    pub over_limit: bool,
    /// The person's message the rewind went back to (to edit and resend).
    pub request: Option<String>,
}

/// The history as it was before `point`, rebuilt from the log at `log`.
fn history_at(log: &Path, point: &RewindPoint) -> Result<(Vec<Message>, String), AgentError> {
    let text = std::fs::read_to_string(log).map_err(|source| SessionFileError::Io {
        path: log.to_path_buf(),
        source,
    })?;
    let state = session_before_line(log, &text, point.cut_line).map_err(SessionFileError::from)?;
    Ok((state.history, state.request))
}

fn rewind_record(
    history: &History,
    store: &Store,
    before: u64,
    after: u64,
    unit: &str,
) -> Result<SessionRecord, AgentError> {
    let (messages, refs) = log_form(history.messages(), store, LOG_INLINE_MAX_CHARS)?;
    Ok(SessionRecord::Compaction {
        step: REWIND_STEP.to_string(),
        trigger: "requested".to_string(),
        before,
        after,
        unit: unit.to_string(),
        paths: Vec::new(),
        from: 0,
        keep_last: 0,
        messages,
        refs,
        archived: Some(0),
    })
}

/// The places the session logged at `log` can be rewound to, oldest first.
pub fn session_rewind_points(log: &Path) -> Result<Vec<RewindPoint>, AgentError> {
    let text = std::fs::read_to_string(log).map_err(|source| SessionFileError::Io {
        path: log.to_path_buf(),
        source,
    })?;
    Ok(rewind_points(log, &text).map_err(SessionFileError::from)?)
}

/// Rewinds the conversation of a session that is not running (`whittle
/// rewind`): appends the rewind to its log, so resuming it gives the
/// conversation as it was before `point`. Returns the messages kept.
pub fn rewind_session_log(
    log: &Path,
    state_dir: &Path,
    redactor: Redactor,
    point: &RewindPoint,
) -> Result<usize, AgentError> {
    let (history, _) = history_at(log, point)?;
    let (writer, _) = SessionWriter::resume(log)?;
    let mut writer = writer.redacting(redactor);
    let mut history = History::new(history);
    history.take_edited_span();
    let count = history.len();
    let record = rewind_record(&history, &Store::new(state_dir), 0, 0, "messages")?;
    writer.append(&record)?;
    Ok(count)
}

impl Agent {
    /// The places this session can be rewound to, oldest first.
    pub fn rewind_points(&self) -> Result<Vec<RewindPoint>, AgentError> {
        match self.session_path() {
            Some(path) => session_rewind_points(path),
            None => Ok(Vec::new()),
        }
    }

    /// Rewinds to `point`: the files (from its checkpoint, after saving the
    /// current ones so this can be undone), the conversation, or both.
    pub async fn rewind(
        &mut self,
        point: &RewindPoint,
        scope: RewindScope,
        sink: &mut dyn EventSink,
    ) -> Result<Rewound, AgentError> {
        let mut done = Rewound {
            restore: None,
            messages: None,
            over_limit: false,
            request: None,
        };
        // Read the conversation before the restore logs its own checkpoint.
        let conversation = match (scope.conversation(), self.session_path()) {
            (true, Some(log)) => Some(history_at(log, point)?),
            _ => None,
        };
        if scope.code() {
            let Some(id) = &point.checkpoint else {
                return Err(AgentError::Checkpoint(
                    whittle_checkpoint::CheckpointError::NotFound(
                        "(no checkpoint was made by then)".into(),
                    ),
                ));
            };
            done.restore = Some(self.restore_checkpoint(id, sink).await?);
        }
        if let Some((history, request)) = conversation {
            let mut restored = History::new(history);
            restored.take_edited_span();
            let before = self.compactor.measure(&self.history);
            let size = self.compactor.measure(&restored);
            let unit = self.compactor.meter().unit();
            let record = rewind_record(
                &restored,
                self.compactor.store(),
                before,
                size,
                unit.as_str(),
            )?;
            self.log(record)?;
            done.messages = Some(restored.len());
            done.over_limit = size > self.compactor.limits().context_limit;
            self.compactor.history_replaced();
            self.history = restored;
            self.logged_archived = 0;
            self.request = request;
            if let whittle_context::session::RewindTarget::PersonMessage { text } = &point.target {
                done.request = Some(text.clone());
            }
        }
        Ok(done)
    }
}
