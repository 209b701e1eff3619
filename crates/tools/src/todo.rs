//! `todo_write`: the model's task list, kept where the CLI can show it.

use whittle_protocol::tool_names;

use futures::future::BoxFuture;
use serde::Deserialize;

use crate::todo_list::{MAX_ITEMS, TodoItem, TodoStatus, render_todos};
use crate::tool::{ToolContext, ToolOutput};
use crate::typed::TypedTool;
use schemars::JsonSchema;

/// The `todo_write` tool.
#[derive(Debug, Default)]
pub struct TodoWriteTool;

/// What the model sends to `todo_write`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TodoWriteInput {
    /// The complete, updated task list.
    #[schemars(length(max = MAX_ITEMS))]
    pub todos: Vec<TodoItem>,
}

impl TypedTool for TodoWriteTool {
    type Input = TodoWriteInput;
    const NAME: &'static str = tool_names::TODO_WRITE;
    const DESCRIPTION: &'static str = "Replace your task list for the current work. Use it for multi-step tasks: write every step, \
         mark exactly one in_progress while you work on it and completed as soon as it is done. \
         The user sees this list. Send the whole list each time.";
    const READ_ONLY: bool = false;

    fn call<'a>(
        &'a self,
        input: TodoWriteInput,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let count = input.todos.len();
            let rendered = render_todos(&input.todos);
            let done = input
                .todos
                .iter()
                .filter(|t| t.status == TodoStatus::Completed)
                .count();
            match ctx.todos().replace(input.todos) {
                Ok(()) => ToolOutput::ok(format!(
                    "Todo list updated ({done}/{count} completed):\n{rendered}"
                )),
                Err(e) => ToolOutput::error(format!("todo list not saved: {e}")),
            }
        })
    }
}
