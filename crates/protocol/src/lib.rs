//! whittle's wire types: the messages, blocks and tool specs every layer
//! speaks (providers, the embedded model, tools, MCP, the compaction
//! engine), with what belongs to them and nothing else: validation of a
//! conversation's shape, the text helpers that keep what is shown on one
//! line, the names of the built-in tools, and redaction of secrets.
//!
//! No I/O and no async: a provider or a tool depends on this crate alone,
//! so a change to the compaction pipeline rebuilds none of them.
//!
//! ```
//! use whittle_protocol::{Block, Extra, Message, Redactor, ToolUse, quote_line, validate};
//! use serde_json::json;
//!
//! let call = ToolUse {
//!     id: "t1".into(),
//!     name: "bash".into(),
//!     input: json!({"command": "ls"}),
//!     extra: Extra::default(),
//! };
//! let conversation = vec![
//!     Message::user("list the files"),
//!     Message::assistant_blocks(vec![Block::ToolUse(call)]),
//! ];
//! // Every tool call needs its result before the next request is sent.
//! assert!(validate(&conversation).is_err());
//! assert_eq!(validate(&conversation[..1]), Ok(()));
//! assert_eq!(quote_line("a\nb", 80), "a b");
//! let redactor = Redactor::new(["sk-live-0123456789"]);
//! assert_eq!(redactor.redact("key=sk-live-0123456789"), "key=[REDACTED]");
//! ```

mod json_write;
mod message;
mod redact;
mod text;
pub mod tool_names;
mod tool_use_id;
mod usage;
mod validate;

pub use json_write::{message_json, str_json, value_json};
pub use message::{
    Block, Content, Extra, Image, Message, RedactedThinking, Role, TextBlock, Thinking, ToolResult,
    ToolResultContent, ToolSpec, ToolUse, json_chars, json_kind, json_str_chars,
};
pub use redact::{MIN_SECRET_LEN, REDACTED, RedactStream, Redactor};
pub use text::{
    abbreviate_count, collapse_whitespace, controls_to_spaces, escape_controls, first_line,
    group_digits, prefix_chars, quote_line, suffix_chars,
};
pub use tool_use_id::fresh_tool_use_id;
pub use usage::Usage;
pub use validate::{ValidationError, validate};
