//! The model's task list: its items, their rules, and the store the CLI
//! watches. Apart from the `todo_write` tool, because every tool's context
//! holds the store.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use tokio::sync::watch;

/// Most items one list may hold; a longer list is a plan gone wrong.
pub(crate) const MAX_ITEMS: usize = 100;

/// Where a task stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    /// Not started.
    Pending,
    /// Being worked on now; at most one item at a time.
    InProgress,
    /// Done.
    Completed,
}

/// One task in the model's list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TodoItem {
    /// What the task is, in the imperative ("Run the tests").
    pub content: String,
    /// Where it stands.
    pub status: TodoStatus,
    /// The same task in the present continuous ("Running the tests"), for a
    /// spinner while it is in progress.
    #[serde(
        default,
        rename = "activeForm",
        skip_serializing_if = "Option::is_none"
    )]
    pub active_form: Option<String>,
}

/// Why a todo list was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TodoError {
    /// An item has no text.
    #[error("item {index} has empty content")]
    EmptyContent {
        /// 1-based position of the item.
        index: usize,
    },
    /// More than one item is in progress.
    #[error(
        "{count} items are in_progress (items {positions}); at most one task may be in progress at a time"
    )]
    SeveralInProgress {
        /// How many items are in progress.
        count: usize,
        /// Their 1-based positions, comma-separated.
        positions: String,
    },
    /// The list is longer than one list may hold: a plan gone wrong.
    #[error("{count} items is too many; keep the list to at most {MAX_ITEMS}")]
    TooMany {
        /// How many items were given.
        count: usize,
    },
}

/// Checks a list before it replaces the stored one.
pub fn validate_todos(items: &[TodoItem]) -> Result<(), TodoError> {
    if items.len() > MAX_ITEMS {
        return Err(TodoError::TooMany { count: items.len() });
    }
    if let Some(i) = items.iter().position(|t| t.content.trim().is_empty()) {
        return Err(TodoError::EmptyContent { index: i + 1 });
    }
    let in_progress: Vec<usize> = items
        .iter()
        .enumerate()
        .filter(|(_, t)| t.status == TodoStatus::InProgress)
        .map(|(i, _)| i + 1)
        .collect();
    if in_progress.len() > 1 {
        return Err(TodoError::SeveralInProgress {
            count: in_progress.len(),
            positions: in_progress
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    Ok(())
}

/// The shared task list: `todo_write` replaces it, the CLI reads or
/// subscribes to it. Clones share one list.
#[derive(Clone, Debug)]
pub struct TodoStore {
    list: Arc<watch::Sender<Vec<TodoItem>>>,
}

impl Default for TodoStore {
    fn default() -> Self {
        Self {
            list: Arc::new(watch::Sender::new(Vec::new())),
        }
    }
}

impl TodoStore {
    /// The current list.
    pub fn snapshot(&self) -> Vec<TodoItem> {
        self.list.borrow().clone()
    }

    /// A receiver that wakes whenever the list changes, for live display.
    pub fn subscribe(&self) -> watch::Receiver<Vec<TodoItem>> {
        self.list.subscribe()
    }

    /// Validates and stores a new list (the whole list is replaced).
    pub fn replace(&self, items: Vec<TodoItem>) -> Result<(), TodoError> {
        validate_todos(&items)?;
        self.list.send_replace(items);
        Ok(())
    }
}

/// Renders a list as the model and the user see it.
pub fn render_todos(items: &[TodoItem]) -> String {
    if items.is_empty() {
        return "(no tasks)".to_owned();
    }
    items
        .iter()
        .map(|t| {
            let mark = match t.status {
                TodoStatus::Pending => "[ ]",
                TodoStatus::InProgress => "[>]",
                TodoStatus::Completed => "[x]",
            };
            format!("{mark} {}", t.content.trim())
        })
        .collect::<Vec<_>>()
        .join("\n")
}
