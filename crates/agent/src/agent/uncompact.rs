//! `/uncompact`: undo the last summary or snip.
//!
//! Compaction loses nothing on disk, but the person may still want the
//! conversation back as it was (the summary missed what mattered, or the
//! compaction came at a bad moment). The session log has every message, so
//! the history before the last compaction, plus everything said since, can
//! be rebuilt exactly; it comes back only when it fits under the compaction
//! limit, or the next call would compact it again at once.

use super::{Agent, AgentError, LOG_INLINE_MAX_CHARS};
use crate::session::SessionFileError;
use whittle_context::session::{SessionRecord, UNCOMPACT_STEP, log_form, read_session};
use whittle_context::{History, Unit};

/// What `/uncompact` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Uncompacted {
    /// The history before the last compaction (and every message since) is back.
    Restored {
        /// Messages in the history now.
        messages: usize,
        /// Its size now.
        size: u64,
        /// The unit of `size`.
        unit: Unit,
    },
    /// No summary or snip since the session started (or since `/clear`,
    /// or since the last `/uncompact`).
    NothingToUndo,
    /// The history before the compaction is above the compaction limit.
    TooBig {
        /// Its size.
        size: u64,
        /// The compaction limit.
        limit: u64,
        /// The unit of both.
        unit: Unit,
    },
}

impl Agent {
    /// Restores the history as it was before the last summary or snip,
    /// with every message appended since, when it fits under the compaction
    /// limit; logs it so that a resumed session has it too.
    pub fn uncompact(&mut self) -> Result<Uncompacted, AgentError> {
        let Some(path) = self.session_path().map(std::path::Path::to_path_buf) else {
            return Ok(Uncompacted::NothingToUndo);
        };
        let state = read_session(&path).map_err(SessionFileError::from)?;
        let Some(before) = state.before_last_compaction else {
            return Ok(Uncompacted::NothingToUndo);
        };
        let mut restored = History::new(before);
        let size = self.compactor.measure(&restored);
        let limit = self.compactor.limits().context_limit;
        let unit = self.compactor.meter().unit();
        if size > limit {
            return Ok(Uncompacted::TooBig { size, limit, unit });
        }
        let before_size = self.compactor.measure(&self.history);
        let (messages, refs) = log_form(
            restored.messages(),
            self.compactor.store(),
            LOG_INLINE_MAX_CHARS,
        )?;
        // The whole history is new to the log; the transcript may get the
        // restored messages again at the next compaction (twice, never lost).
        restored.take_edited_span();
        let count = restored.len();
        self.compactor.history_replaced();
        self.history = restored;
        self.logged_archived = 0;
        self.log(SessionRecord::Compaction {
            step: UNCOMPACT_STEP.to_string(),
            trigger: "requested".to_string(),
            before: before_size,
            after: size,
            unit: unit.as_str().to_string(),
            paths: Vec::new(),
            from: 0,
            keep_last: 0,
            messages,
            refs,
            archived: Some(0),
        })?;
        Ok(Uncompacted::Restored {
            messages: count,
            size,
            unit,
        })
    }
}
