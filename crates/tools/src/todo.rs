//! `todo_write`: the model's task list, kept where the CLI can show it.

use whittle_context::tool_names;

use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::todo_list::{MAX_ITEMS, TodoItem, TodoStatus, render_todos};
use crate::tool::{Tool, ToolContext, ToolOutput, parse_input};

/// The `todo_write` tool.
#[derive(Debug, Default)]
pub struct TodoWriteTool;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    todos: Vec<TodoItem>,
}

impl Tool for TodoWriteTool {
    fn name(&self) -> &str {
        tool_names::TODO_WRITE
    }

    fn description(&self) -> &str {
        "Replace your task list for the current work. Use it for multi-step tasks: write every step, \
         mark exactly one in_progress while you work on it and completed as soon as it is done. \
         The user sees this list. Send the whole list each time."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "todos": {
                    "type": "array",
                    "description": "The complete, updated task list.",
                    "maxItems": MAX_ITEMS,
                    "items": {
                        "type": "object",
                        "properties": {
                            "content": {"type": "string", "minLength": 1, "description": "The task, imperative (\"Run the tests\")."},
                            "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
                            "activeForm": {"type": "string", "description": "Present continuous form (\"Running the tests\")."}
                        },
                        "required": ["content", "status"],
                        "additionalProperties": false
                    }
                }
            },
            "required": ["todos"],
            "additionalProperties": false
        })
    }

    fn is_read_only(&self) -> bool {
        false
    }

    fn run<'a>(&'a self, input: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let input: Input = match parse_input(self.name(), input) {
                Ok(i) => i,
                Err(e) => return e,
            };
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
