//! The names of whittle's built-in tools.
//!
//! The tools crate defines the tools, the agent dispatches on some of them,
//! the CLI shows their inputs, the permission policy and the importers read
//! them. One list, so that a rename cannot miss a reader. Constants rather
//! than an enum: tool names arrive as strings from the model and from MCP
//! servers, and constants work directly in `match` patterns.

/// Runs a shell command.
pub const BASH: &str = "bash";
/// Reads a file.
pub const READ_FILE: &str = "read_file";
/// Creates or overwrites a file.
pub const WRITE_FILE: &str = "write_file";
/// Replaces text in a file.
pub const EDIT_FILE: &str = "edit_file";
/// Lists files matching a pattern.
pub const GLOB: &str = "glob";
/// Searches file contents.
pub const GREP: &str = "grep";
/// Replaces the model's task list.
pub const TODO_WRITE: &str = "todo_write";
/// Runs a subagent with a fresh context.
pub const TASK: &str = "task";
/// Loads a skill's instructions.
pub const LOAD_SKILL: &str = "load_skill";
/// Asks the harness to summarize the conversation.
pub const COMPACT: &str = "compact";
/// Searches what left the context in this session.
pub const RECALL: &str = "recall";
