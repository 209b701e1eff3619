//! The `Tool` trait and the values that flow in and out of a tool run.

use std::path::{Path, PathBuf};

use futures::future::BoxFuture;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use whittle_context::{Block, Image, ToolResult, ToolResultContent};

use crate::todo::TodoStore;

/// What a tool hands back to the model: text, and whether it describes a failure.
///
/// Failures are data, not panics or `Err`s: the model reads the text and
/// decides what to do next, so every problem must be explained in `content`.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolOutput {
    /// The text the model sees as the tool_result content.
    pub content: String,
    /// True when the tool failed; sent as the tool_result's `is_error`.
    pub is_error: bool,
    /// Pictures that go with the text (an MCP server's screenshot, say),
    /// sent as image blocks after it; hooks and the terminal see the text.
    pub images: Vec<Image>,
}

impl ToolOutput {
    /// A successful result.
    pub fn ok(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: false,
            images: Vec::new(),
        }
    }

    /// A failed result; `content` says what went wrong and what to do.
    pub fn error(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: true,
            images: Vec::new(),
        }
    }

    /// The tool_result block answering the call `tool_use_id`: the text
    /// alone as a string, or text and images as blocks.
    pub fn into_tool_result(self, tool_use_id: &str) -> Block {
        if self.images.is_empty() {
            return Block::tool_result(tool_use_id, self.content, self.is_error);
        }
        let mut blocks = vec![Block::text(self.content)];
        blocks.extend(self.images.into_iter().map(Block::Image));
        Block::ToolResult(ToolResult {
            tool_use_id: tool_use_id.to_owned(),
            content: Some(ToolResultContent::Blocks(blocks)),
            is_error: self.is_error.then_some(true),
            extra: Default::default(),
        })
    }
}

pub use whittle_context::ToolSpec;

/// Everything a tool run may need from its surroundings.
///
/// Cheap to clone: the agent makes one per tool call when it wants a
/// per-call cancellation token (`with_cancel(parent.child_token())`).
#[derive(Clone, Debug)]
pub struct ToolContext {
    workspace: PathBuf,
    cancel: CancellationToken,
    todos: TodoStore,
}

impl ToolContext {
    /// A context rooted at `workspace`, with a fresh cancellation token and
    /// an empty todo list.
    pub fn new(workspace: impl Into<PathBuf>) -> Self {
        Self {
            workspace: workspace.into(),
            cancel: CancellationToken::new(),
            todos: TodoStore::default(),
        }
    }

    /// Replaces the cancellation signal; cancelling it stops running tools
    /// (bash kills its whole process group).
    pub fn with_cancel(mut self, cancel: CancellationToken) -> Self {
        self.cancel = cancel;
        self
    }

    /// Shares a todo list with the caller, so the CLI can show what
    /// `todo_write` stores.
    pub fn with_todos(mut self, todos: TodoStore) -> Self {
        self.todos = todos;
        self
    }

    /// The folder tools run in and resolve relative paths against.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The signal that asks running tools to stop.
    pub fn cancel_token(&self) -> &CancellationToken {
        &self.cancel
    }

    /// The model's task list.
    pub fn todos(&self) -> &TodoStore {
        &self.todos
    }

    /// Resolves a path given by the model: relative to the workspace, or
    /// absolute, with a leading `~/` meaning the home directory.
    pub fn resolve(&self, path: &str) -> PathBuf {
        crate::paths::resolve_input(&self.workspace, path)
    }

    /// How a path is shown back to the model: relative when inside the
    /// workspace, as given otherwise.
    pub fn display(&self, path: &Path) -> String {
        crate::paths::display_path(&self.workspace, path)
    }
}

/// A capability the model can call.
///
/// Object-safe so the registry can hold `Arc<dyn Tool>`; `run` returns a
/// boxed future because tools like `bash` run long and must stay cancellable
/// through [`ToolContext::cancel_token`].
pub trait Tool: Send + Sync {
    /// The unique name the model calls the tool by.
    fn name(&self) -> &str;

    /// What the tool does and when to use it, written for the model.
    fn description(&self) -> &str;

    /// A JSON Schema object for the input.
    fn input_schema(&self) -> Value;

    /// True when the tool never changes files or runs commands; such tools
    /// make up the read-only set a subagent or `read-only` mode gets.
    fn is_read_only(&self) -> bool;

    /// Runs the tool. Never panics and never returns an `Err`: every failure
    /// is a [`ToolOutput::error`] that says what went wrong.
    fn run<'a>(&'a self, input: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput>;

    /// The spec the model is shown.
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name().to_owned(),
            description: self.description().to_owned(),
            input_schema: self.input_schema(),
        }
    }
}

/// Parses a tool's input into its typed form, or explains in one line why
/// it does not fit.
pub(crate) fn parse_input<T: DeserializeOwned>(tool: &str, input: Value) -> Result<T, ToolOutput> {
    if !input.is_object() {
        return Err(ToolOutput::error(format!(
            "invalid input for {tool}: expected a JSON object, got {}",
            whittle_context::json_kind(&input)
        )));
    }
    serde_json::from_value(input)
        .map_err(|e| ToolOutput::error(format!("invalid input for {tool}: {e}")))
}
