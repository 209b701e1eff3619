//! The set of tools the model may call, by name.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use serde_json::Value;

use crate::tool::{Tool, ToolContext, ToolOutput, ToolSpec};
use crate::{
    BashTool, EditFileTool, GlobTool, GrepTool, LoadSkillTool, ReadFileTool, TodoWriteTool,
    WriteFileTool,
};

/// Tools by name. Kept sorted by name so the tool list sent to the model is
/// byte-stable from call to call (it sits in the cached prompt prefix).
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<dyn Tool>>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.tools.keys()).finish()
    }
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every built-in tool of this crate: bash, read_file, write_file,
    /// edit_file, glob, grep, todo_write, load_skill.
    pub fn builtin() -> Self {
        let mut r = Self::new();
        r.register(Arc::new(BashTool::default()));
        r.register(Arc::new(ReadFileTool));
        r.register(Arc::new(WriteFileTool));
        r.register(Arc::new(EditFileTool));
        r.register(Arc::new(GlobTool::default()));
        r.register(Arc::new(GrepTool::default()));
        r.register(Arc::new(TodoWriteTool));
        r.register(Arc::new(LoadSkillTool));
        r
    }

    /// Adds a tool, replacing and returning any tool of the same name.
    pub fn register(&mut self, tool: Arc<dyn Tool>) -> Option<Arc<dyn Tool>> {
        self.tools.insert(tool.name().to_owned(), tool)
    }

    /// Removes a tool by name.
    pub fn remove(&mut self, name: &str) -> Option<Arc<dyn Tool>> {
        self.tools.remove(name)
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.get(name)
    }

    /// Tool names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.keys().map(String::as_str)
    }

    /// How many tools there are.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// True when there are no tools.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The specs to send the model, sorted by name.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.values().map(|t| t.spec()).collect()
    }

    /// The tools that only read: what a subagent or `read-only` mode gets.
    pub fn read_only(&self) -> ToolRegistry {
        ToolRegistry {
            tools: self
                .tools
                .iter()
                .filter(|(_, t)| t.is_read_only())
                .map(|(n, t)| (n.clone(), Arc::clone(t)))
                .collect(),
        }
    }

    /// Runs the tool called `name`. An unknown name, a cancelled context or
    /// a tool that panics all come back as error outputs.
    pub async fn run(&self, name: &str, input: Value, ctx: &ToolContext) -> ToolOutput {
        let Some(tool) = self.tools.get(name) else {
            let known: Vec<&str> = self.names().collect();
            return ToolOutput::error(format!(
                "unknown tool {name:?}; available tools: {}",
                known.join(", ")
            ));
        };
        if ctx.cancel_token().is_cancelled() {
            return ToolOutput::error(format!("{name}: cancelled before it started"));
        }
        match AssertUnwindSafe(tool.run(input, ctx)).catch_unwind().await {
            Ok(out) => out,
            Err(_) => ToolOutput::error(format!(
                "{name}: the tool failed unexpectedly (internal error)"
            )),
        }
    }
}
