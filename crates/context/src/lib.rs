//! The conversation model and context-compaction pipeline of whittle.
//!
//! A coding agent's context fills with tool output. This crate keeps it within
//! the model's window by tidying first and summarizing last: persist large tool
//! results, snip the old middle, replace old results with saved placeholders,
//! and only then summarize. It has no network and no async runtime, so any
//! harness can depend on it; summarization goes through the [`Summarizer`]
//! trait that the caller implements.

pub mod history;
pub mod import;
pub mod message;
pub mod store;
pub mod validate;

pub use history::{BlockRef, History};
pub use message::{
    Block, Content, Extra, Image, Message, RedactedThinking, Role, TextBlock, Thinking, ToolResult,
    ToolResultContent, ToolUse, json_chars,
};
pub use store::{Store, StoreError, write_atomic};
pub use validate::{ValidationError, validate};
