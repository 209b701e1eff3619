//! Why a turn failed.

use crate::session::SessionFileError;
use std::path::PathBuf;
use whittle_llm::LlmError;
use whittle_protocol::ValidationError;
use whittle_store::StoreError;

/// Why a turn failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The model call failed.
    #[error(transparent)]
    Llm(#[from] LlmError),
    /// The context stayed too long after reactive compaction.
    #[error(
        "the conversation is still too long for the model after compacting ({message}); the full history is in {}",
        transcript.as_ref().map_or_else(|| "the session log".to_string(), |p| p.display().to_string())
    )]
    Overflow {
        /// The provider's words.
        message: String,
        /// The transcript written by the last compaction.
        transcript: Option<PathBuf>,
    },
    /// Compaction left the context over the limit three times in a row.
    #[error(
        "compaction could not bring the context under the limit ({after} > {limit} {unit}) three times in a row; stopping this turn (try /compact with a focus, or /clear)"
    )]
    ContextSpiral {
        /// Size after the last attempt.
        after: u64,
        /// The limit.
        limit: u64,
        /// The unit.
        unit: &'static str,
    },
    /// A request would break the Messages API rules: a bug, never sent.
    #[error("internal error: the history is not a valid request ({0}); nothing was sent")]
    Invalid(#[from] ValidationError),
    /// The session log could not be written.
    #[error(transparent)]
    Session(#[from] SessionFileError),
    /// A tool output could not be saved in the store before it was logged.
    #[error("could not save a tool output before logging it: {0}")]
    Store(#[from] StoreError),
    /// The session's transcript (where compaction archives messages)
    /// could not be opened when the session started.
    #[error("could not open the session's transcript: {0}")]
    Transcript(StoreError),
    /// A checkpoint could not be restored (a rewind).
    #[error(transparent)]
    Checkpoint(whittle_checkpoint::CheckpointError),
}
