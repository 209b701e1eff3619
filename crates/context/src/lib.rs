//! The conversation model and context-compaction pipeline of whittle.
//!
//! A coding agent's context fills with tool output. This crate keeps it within
//! the model's window by tidying first and summarizing last: persist large tool
//! results, snip the old middle, replace old results with saved placeholders,
//! and only then summarize. It has no network and no async runtime, so any
//! harness can depend on it: a step that needs a summary stops at a
//! [`SummaryNeeded`], which the caller answers however it makes summaries
//! (awaiting its model, usually) and resumes.
//!
//! ```
//! use whittle_context::{CharMeter, Compactor, History, Limits, Progress};
//! use whittle_store::Store;
//! use whittle_protocol::Message;
//!
//! let dir = tempfile::tempdir().unwrap();
//! let mut compactor = Compactor::new(Limits::teaching(), Store::new(dir.path()), Box::new(CharMeter));
//! let mut history = History::new(vec![Message::user("write a haiku"), Message::assistant("x".repeat(60_000))]);
//! history.push(Message::user("shorter please"));
//! let mut progress = compactor.start_prepare(&mut history, "shorter please");
//! let outcome = loop {
//!     progress = match progress {
//!         Progress::Done(outcome) => break outcome,
//!         Progress::NeedsSummary(needed) => {
//!             // A harness sends needed.input() and needed.focus() to its model here.
//!             assert!(needed.input().chars() > 60_000);
//!             needed.resume(Ok("the user wants a haiku".into()))
//!         }
//!     };
//! };
//! assert!(!outcome.over_limit);
//! assert!(history.messages()[0].text().starts_with("[Compacted]"));
//! ```
//!
//! A caller that can block (replay, a test) implements [`Summarizer`]
//! instead, and [`Compactor::prepare`] answers every request with it:
//!
//! ```
//! use whittle_context::{CharMeter, Compactor, History, Limits, Summarizer, SummarizeError, SummaryInput};
//! use whittle_store::Store;
//! use whittle_protocol::Message;
//!
//! struct Fixed;
//! impl Summarizer for Fixed {
//!     fn summarize(&mut self, _: SummaryInput<'_>, _: Option<&str>, _: &str, _: usize) -> Result<String, SummarizeError> {
//!         Ok("the user wants a haiku".into())
//!     }
//! }
//! let dir = tempfile::tempdir().unwrap();
//! let mut compactor = Compactor::new(Limits::teaching(), Store::new(dir.path()), Box::new(CharMeter));
//! let mut history = History::new(vec![Message::user("write a haiku"), Message::assistant("x".repeat(60_000))]);
//! history.push(Message::user("shorter please"));
//! let outcome = compactor.prepare(&mut history, "shorter please", &mut Fixed);
//! assert!(!outcome.over_limit);
//! assert!(history.messages()[0].text().starts_with("[Compacted]"));
//! ```
//!
//! Once a request is sent, a harness calls [`History::prepare_ahead`] while
//! the model answers: it does the part of the next compaction that depends
//! on single messages (tool calls parsed, the last marker's ledger read
//! back, transcript lines written), so that the next `prepare` finds it
//! done. Nothing it computes differs from what `prepare` would compute
//! itself; only when the work is done changes, and a harness that never
//! calls it gets the same results.

mod history;
mod ledger;
mod limits;
mod markers;
mod meter;
mod pairs;
mod path_tokens;
mod per_message;
mod pipeline;
mod recovery;
mod session_log;
mod summarize;
pub use history::{BlockRef, EditedSpan, History};
pub use ledger::{LEDGER_CLOSE, LEDGER_OPEN, Ledger, ledger_file_paths, ledger_section};
pub use limits::{Limits, TokenBudget};
pub use markers::{COMPACTED_HEADER, REACTIVE_HEADER};
pub use meter::{CharMeter, Meter, TokenMeter, Unit};
pub use path_tokens::{CONTENT_FIELDS, is_path_like, path_tokens, tool_input_strings};
pub use pipeline::{
    CachePrices, CacheState, Compactor, Ctx, MAX_EXPECTED_CALLS, Outcome, PrepareOutcome, Progress,
    Rewrite, SUMMARY_CHARS, Step, StepError, StepReport, SummaryNeeded, Trigger, Verdict,
};
pub use recovery::{RecoveryReport, check as check_recovery};
pub use summarize::{SummarizeError, Summarizer, SummaryInput};

/// The pipeline's steps one by one, for a harness that orders its own
/// pipeline or measures a step alone; [`Compactor`] runs them in the
/// seed's order.
pub mod steps {
    pub use crate::pipeline::{
        cache_anchor, fit_tool_results, micro_compact, snip_compact, tidy_floor, tool_result_budget,
    };
}

/// The session log: one JSON line per event, enough to resume a session,
/// rebuild what compaction replaced, and list the points `/rewind` can go
/// back to.
pub mod session {
    pub use crate::session_log::{
        CheckpointMark, INTERRUPTED_RESULT, OutputRef, REWIND_STEP, RewindPoint, RewindTarget,
        SESSION_FORMAT, SessionError, SessionRecord, SessionState, UNCOMPACT_STEP,
        checkpoint_marks, log_form, parse_records, parse_session, read_session, repair_unanswered,
        rewind_points, session_before_line,
    };
}

/// The texts a summary is asked with: the system prompt, the instruction
/// and its rules, and the bounded transcript a small model is given instead
/// of the whole history.
pub mod prompts {
    pub use crate::summarize::{
        AUTHORITY_RULE, CONTINUATION_INSTRUCTION, SUMMARY_SYSTEM_PROMPT, TRANSCRIPT_INSTRUCTION,
        bounded_transcript, summary_answer_tokens, summary_instruction,
    };
}

// The wire types live in whittle-protocol, which callers name directly;
// the engine's own modules reach them through the crate root.
pub(crate) use whittle_protocol::{
    Block, Content, Message, Role, ToolResult, ToolResultContent, ToolUse, abbreviate_count,
    collapse_whitespace, controls_to_spaces, first_line, group_digits, prefix_chars, suffix_chars,
    tool_names,
};
