//! The conversation model and context-compaction pipeline of whittle.
//!
//! A coding agent's context fills with tool output. This crate keeps it within
//! the model's window by tidying first and summarizing last: persist large tool
//! results, snip the old middle, replace old results with saved placeholders,
//! and only then summarize. It has no network and no async runtime, so any
//! harness can depend on it; summarization goes through the [`Summarizer`]
//! trait that the caller implements.
//!
//! ```
//! use whittle_context::{CharMeter, Compactor, History, Limits, Message, Store, Summarizer, SummarizeError};
//!
//! struct Fixed;
//! impl Summarizer for Fixed {
//!     fn summarize(&mut self, _: whittle_context::summarize::SummaryInput<'_>, _: Option<&str>) -> Result<String, SummarizeError> {
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

pub mod history;
pub mod import;
pub mod limits;
pub mod markers;
pub mod message;
pub mod meter;
pub mod pairs;
pub mod pipeline;
pub mod recovery;
mod redact;
pub mod replay;
pub mod session_log;
pub mod store;
pub mod summarize;
pub mod validate;

pub use history::{BlockRef, History};
pub use limits::{Limits, TokenBudget};
pub use message::{
    Block, Content, Extra, Image, Message, RedactedThinking, Role, TextBlock, Thinking, ToolResult,
    ToolResultContent, ToolSpec, ToolUse, json_chars, json_kind,
};
pub use meter::{CharMeter, Meter, TokenMeter, Unit};
pub use pipeline::{
    Compactor, Ctx, Outcome, PrepareOutcome, Step, StepReport, Trigger, compact_history,
    fit_tool_results, micro_compact, reactive_compact, snip_compact, tool_result_budget,
};
pub use redact::{MIN_SECRET_LEN, REDACTED, RedactStream, Redactor};
pub use store::{Store, StoreError, write_atomic};
pub use summarize::{SummarizeError, Summarizer};
pub use validate::{ValidationError, validate};
