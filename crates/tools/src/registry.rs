//! The set of tools the model may call, by name.

use std::collections::{BTreeMap, BTreeSet};
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};

use futures::FutureExt;
use serde_json::Value;

use crate::tool::{Tool, ToolContext, ToolOutput, ToolSpec};
use crate::{
    BashTool, EditFileTool, GlobTool, GrepTool, LoadSkillTool, ReadFileTool, RecallTool,
    TodoWriteTool, WriteFileTool,
};

/// Tools by name. Kept sorted by name so the tool list sent to the model is
/// byte-stable from call to call (it sits in the cached prompt prefix).
///
/// A tool may be *deferred*: callable, but its spec is sent only once it
/// was loaded (by a search tool, when many MCP tools would otherwise fill
/// the window). Loaded tools follow the others in the order they were
/// loaded, so each load adds to the end of the list and leaves what was
/// sent before unchanged.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<dyn Tool>>,
    deferred: BTreeSet<String>,
    loaded: LoadedTools,
}

/// The deferred tools loaded so far, in load order. Shared by a registry,
/// its clones and its read-only subset (a subagent's load shows in the
/// parent's list too: it cannot be unsent).
#[derive(Clone, Debug, Default)]
pub struct LoadedTools(Arc<Mutex<Vec<String>>>);

impl LoadedTools {
    fn with<T>(&self, f: impl FnOnce(&mut Vec<String>) -> T) -> T {
        match self.0.lock() {
            Ok(mut names) => f(&mut names),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    /// Marks `name` loaded; true when it was not loaded before.
    pub fn load(&self, name: &str) -> bool {
        self.with(|names| {
            if names.iter().any(|n| n == name) {
                false
            } else {
                names.push(name.to_owned());
                true
            }
        })
    }

    /// Whether `name` was loaded.
    pub fn contains(&self, name: &str) -> bool {
        self.with(|names| names.iter().any(|n| n == name))
    }

    /// The loaded names, in load order.
    pub fn names(&self) -> Vec<String> {
        self.with(|names| names.clone())
    }
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
    /// edit_file, glob, grep, recall, todo_write, load_skill.
    pub fn builtin() -> Self {
        let mut r = Self::new();
        r.register(Arc::new(BashTool::default()));
        r.register(Arc::new(ReadFileTool));
        r.register(Arc::new(WriteFileTool));
        r.register(Arc::new(EditFileTool));
        r.register(Arc::new(GlobTool::default()));
        r.register(Arc::new(GrepTool::default()));
        r.register(Arc::new(RecallTool));
        r.register(Arc::new(TodoWriteTool));
        r.register(Arc::new(LoadSkillTool));
        r
    }

    /// Adds a tool, replacing and returning any tool of the same name.
    pub fn register(&mut self, tool: Arc<dyn Tool>) -> Option<Arc<dyn Tool>> {
        self.deferred.remove(tool.name());
        self.tools.insert(tool.name().to_owned(), tool)
    }

    /// Adds a tool whose spec is sent only once it is loaded (see
    /// [`ToolRegistry::loaded_tools`]); it can be called either way.
    pub fn register_deferred(&mut self, tool: Arc<dyn Tool>) -> Option<Arc<dyn Tool>> {
        self.deferred.insert(tool.name().to_owned());
        self.tools.insert(tool.name().to_owned(), tool)
    }

    /// Whether `name` is a deferred tool.
    pub fn is_deferred(&self, name: &str) -> bool {
        self.deferred.contains(name)
    }

    /// The handle that loads deferred tools into the specs.
    pub fn loaded_tools(&self) -> LoadedTools {
        self.loaded.clone()
    }

    /// Removes a tool by name.
    pub fn remove(&mut self, name: &str) -> Option<Arc<dyn Tool>> {
        self.deferred.remove(name);
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

    /// The specs to send the model: the tools sorted by name, then the
    /// loaded deferred tools in load order.
    pub fn specs(&self) -> Vec<ToolSpec> {
        let mut specs: Vec<ToolSpec> = self
            .tools
            .iter()
            .filter(|(n, _)| !self.deferred.contains(*n))
            .map(|(_, t)| t.spec())
            .collect();
        if !self.deferred.is_empty() {
            for name in self.loaded.names() {
                if self.deferred.contains(&name)
                    && let Some(t) = self.tools.get(&name)
                {
                    specs.push(t.spec());
                }
            }
        }
        specs
    }

    /// The tools that only read: what a subagent or `read-only` mode gets.
    pub fn read_only(&self) -> ToolRegistry {
        let tools: BTreeMap<String, Arc<dyn Tool>> = self
            .tools
            .iter()
            .filter(|(_, t)| t.is_read_only())
            .map(|(n, t)| (n.clone(), Arc::clone(t)))
            .collect();
        ToolRegistry {
            deferred: self
                .deferred
                .iter()
                .filter(|n| tools.contains_key(*n))
                .cloned()
                .collect(),
            tools,
            loaded: self.loaded.clone(),
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
