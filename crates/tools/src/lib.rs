//! whittle's tools and the permission policy that guards them.
//!
//! A [`Tool`] turns a JSON input from the model into a [`ToolOutput`]; it
//! never panics and reports every failure as text the model can act on. The
//! [`ToolRegistry`] holds tools by name and lists their specs for the model.
//! [`permission::PermissionPolicy`] decides, before a call runs, whether to
//! allow it, ask the user, or refuse.
//!
//! This crate knows nothing of the agent loop or of model providers.
//!
//! ```
//! use serde_json::json;
//! use std::path::Path;
//! use whittle_tools::{Decision, PermissionMode, PermissionPolicy};
//!
//! let ws = Path::new("/work/project");
//! let policy = PermissionPolicy::new(PermissionMode::AcceptEdits);
//! let edit = json!({"path": "src/lib.rs", "content": "x"});
//! assert_eq!(policy.check("write_file", &edit, ws), Decision::Allow);
//! // A nested repository's config would run code outside the sandbox: ask.
//! let hook = json!({"path": "vendor/lib/.git/config", "content": "x"});
//! assert!(matches!(policy.check("write_file", &hook, ws), Decision::Ask { .. }));
//! ```

mod bash;
mod editor_files;
mod ignore_rules;
pub mod paths;
pub mod permission;
mod read_file;
mod recall;
mod registry;
mod search;
pub mod skills;
mod todo;
mod todo_list;
mod tool;
mod truncate;
mod typed;
mod write_file;

pub use bash::{BashInput, BashTool, GroupGuard};
pub use editor_files::{EditorFileCapabilities, EditorFileError, EditorFiles};
pub use permission::{AllowRule, AllowRuleError, Decision, PermissionMode, PermissionPolicy};
pub use read_file::{ReadFileInput, ReadFileTool};
pub use recall::{RecallInput, RecallTool};
pub use registry::{LoadedTools, ToolRegistry};
pub use search::{GlobInput, GlobTool, GrepInput, GrepTool, OutputMode};
pub use skills::{LoadSkillInput, LoadSkillTool, Skill, SkillProblem, Skills};
pub use todo::{TodoWriteInput, TodoWriteTool};
pub use todo_list::{TodoError, TodoItem, TodoStatus, TodoStore, render_todos, validate_todos};
pub use tool::{OutputLimits, Tool, ToolContext, ToolOutput, ToolSpec, parse_input};
pub use truncate::cap_middle;
pub use typed::{TypedTool, input_schema_for};
pub use write_file::{EditFileInput, EditFileTool, WriteFileInput, WriteFileTool};

/// Re-exported so callers build a [`ToolContext`] without naming tokio-util.
pub use tokio_util::sync::CancellationToken;
/// Re-exported so callers hand a sandbox to [`ToolContext::with_sandbox`].
pub use whittle_sandbox::Sandbox;
