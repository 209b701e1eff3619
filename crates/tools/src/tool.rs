//! The `Tool` trait and the values that flow in and out of a tool run.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use whittle_store::{OutputWriter, Store};

use futures::future::BoxFuture;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use whittle_protocol::{Block, Image, ToolResult, ToolResultContent};

use crate::editor_files::EditorFiles;
use crate::todo_list::TodoStore;
use whittle_sandbox::Sandbox;

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

pub use whittle_protocol::ToolSpec;

/// How tools keep outputs too big to show whole: above `inline_max_bytes`
/// an output is saved in the store as it is produced and the model sees a
/// preview of about `preview_chars` with the file's path; `cap_bytes` is the
/// most one output may take on disk, the only cut, and said when it happens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputLimits {
    /// Outputs up to this size are returned whole.
    pub inline_max_bytes: usize,
    /// Characters of a saved output's preview.
    pub preview_chars: usize,
    /// Bytes one output may take on disk.
    pub cap_bytes: u64,
}

impl Default for OutputLimits {
    /// The seed's 30,000-char large result and 2,000-char preview; 1 GiB on disk.
    fn default() -> Self {
        OutputLimits {
            inline_max_bytes: 30_000,
            preview_chars: 2_000,
            cap_bytes: 1 << 30,
        }
    }
}

/// Everything a tool run may need from its surroundings.
///
/// Cheap to clone: the agent makes one per tool call, with that call's id
/// and, when it wants one, a per-call cancellation token.
#[derive(Clone, Debug)]
pub struct ToolContext {
    workspace: PathBuf,
    cancel: CancellationToken,
    todos: TodoStore,
    store: Store,
    output_limits: OutputLimits,
    call_id: Option<String>,
    sandbox: Sandbox,
    editor_files: Option<Arc<dyn EditorFiles>>,
}

static UNNAMED_CALLS: AtomicU64 = AtomicU64::new(0);

impl ToolContext {
    /// A context rooted at `workspace`, with a fresh cancellation token, an
    /// empty todo list, big outputs saved under `WORKSPACE/.whittle`, and
    /// no sandbox.
    pub fn new(workspace: impl Into<PathBuf>) -> Self {
        let workspace = workspace.into();
        Self {
            store: Store::new(workspace.join(".whittle")),
            workspace,
            cancel: CancellationToken::new(),
            todos: TodoStore::default(),
            output_limits: OutputLimits::default(),
            call_id: None,
            sandbox: Sandbox::none(),
            editor_files: None,
        }
    }

    /// Saves big outputs in `store` (the conversation's own, so the
    /// pipeline and the session log know the files).
    pub fn with_store(mut self, store: Store) -> Self {
        self.store = store;
        self
    }

    /// Sets when outputs are saved and how big the preview is.
    pub fn with_output_limits(mut self, limits: OutputLimits) -> Self {
        self.output_limits = limits;
        self
    }

    /// The id of the tool call being run: saved outputs are named after it.
    pub fn with_call_id(mut self, id: impl Into<String>) -> Self {
        self.call_id = Some(id.into());
        self
    }

    /// Where big outputs are saved.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// When outputs are saved and how big the preview is.
    pub fn output_limits(&self) -> OutputLimits {
        self.output_limits
    }

    /// A writer for this call's output, named after the call (or, outside
    /// a call, after `tool` and a sequence number).
    pub fn output_writer(&self, tool: &str) -> OutputWriter {
        let id = self.call_id.clone().unwrap_or_else(|| {
            format!(
                "{tool}-{}-{}",
                std::process::id(),
                UNNAMED_CALLS.fetch_add(1, Ordering::Relaxed)
            )
        });
        self.store.output_writer(
            &id,
            self.output_limits.inline_max_bytes,
            self.output_limits.cap_bytes,
        )
    }

    /// Runs commands through `sandbox` (the default runs them as they are).
    pub fn with_sandbox(mut self, sandbox: Sandbox) -> Self {
        self.sandbox = sandbox;
        self
    }

    /// Reads and writes text files through an editor, as far as it offers
    /// to (see [`EditorFiles`]); the rest goes to the disk.
    pub fn with_editor_files(mut self, files: Arc<dyn EditorFiles>) -> Self {
        self.editor_files = Some(files);
        self
    }

    /// The editor that reads files for the tools, if one does.
    pub fn editor_reads(&self) -> Option<&dyn EditorFiles> {
        self.editor_files
            .as_deref()
            .filter(|files| files.capabilities().read)
    }

    /// The editor that writes files for the tools, if one does.
    pub fn editor_writes(&self) -> Option<&dyn EditorFiles> {
        self.editor_files
            .as_deref()
            .filter(|files| files.capabilities().write)
    }

    /// How commands run: confined, refused, or as they are.
    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
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
/// it does not fit (every tool, ours or a plugin's, words it the same way).
pub fn parse_input<T: DeserializeOwned>(tool: &str, input: Value) -> Result<T, ToolOutput> {
    if !input.is_object() {
        return Err(ToolOutput::error(format!(
            "invalid input for {tool}: expected a JSON object, got {}",
            whittle_protocol::json_kind(&input)
        )));
    }
    serde_json::from_value(input)
        .map_err(|e| ToolOutput::error(format!("invalid input for {tool}: {e}")))
}
