//! All configured servers of a session: started side by side at session
//! start, each within its own timeout; their tools under unique names; and
//! how those tools join the agent's registry (whole, or behind
//! `mcp_tool_search` when their definitions would take too much room).

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use serde_json::Value;
use whittle_tools::{CancellationToken, Tool, ToolOutput, ToolRegistry, ToolSpec};

use crate::config::ServerConfig;
use crate::connection::StartOptions;
use crate::error::StartError;
use crate::result::to_output;
use crate::search::McpToolSearch;
use crate::server::{McpServer, StartOutcome};
use crate::tool::McpTool;

/// What happens while servers start, for a progress line.
#[derive(Debug)]
pub enum StartEvent<'a> {
    /// These servers are starting.
    Starting(Vec<&'a str>),
    /// One is ready.
    Ready {
        /// Its name.
        server: &'a str,
        /// How many of its tools can be used.
        tools: usize,
        /// Protocol revision and server identity.
        peer: &'a str,
    },
    /// One failed to start; its tools are not offered.
    Failed(&'a StartError),
}

/// How the MCP tools joined the registry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Installation {
    /// No MCP tools.
    Nothing,
    /// Every definition is sent.
    Whole {
        /// Characters of the definitions.
        chars: usize,
    },
    /// Definitions are searched with `mcp_tool_search` and loaded on demand.
    Searched {
        /// Characters the definitions would have taken.
        chars: usize,
        /// How many tools can be searched.
        tools: usize,
    },
}

/// The session's servers and their tools.
#[derive(Default)]
pub struct McpServers {
    servers: Vec<Arc<McpServer>>,
    tools: Vec<Arc<McpTool>>,
    problems: Vec<String>,
}

impl McpServers {
    /// No servers.
    pub fn none() -> McpServers {
        McpServers::default()
    }

    /// Starts every server at once; `on_event` hears how each start went,
    /// as it happens. A server that fails is reported and left out.
    pub async fn start(
        configs: Vec<ServerConfig>,
        options: StartOptions,
        mut on_event: impl FnMut(StartEvent<'_>),
    ) -> McpServers {
        if configs.is_empty() {
            return McpServers::none();
        }
        on_event(StartEvent::Starting(
            configs.iter().map(|c| c.name.as_str()).collect(),
        ));
        let options = Arc::new(options);
        let mut pending: FuturesUnordered<_> = configs
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                let options = Arc::clone(&options);
                async move { (i, McpServer::start(c, options).await) }
            })
            .collect();
        let mut started = Vec::new();
        while let Some((i, (server, outcome))) = pending.next().await {
            match &outcome {
                StartOutcome::Ready { peer, catalog } => on_event(StartEvent::Ready {
                    server: server.config().name.as_str(),
                    tools: catalog.tools.len(),
                    peer,
                }),
                StartOutcome::Failed(e) => on_event(StartEvent::Failed(e)),
            }
            started.push((i, server, outcome));
        }
        // Config order, so tool names and collisions do not depend on which
        // server answered first.
        started.sort_by_key(|(i, _, _)| *i);
        let mut out = McpServers::none();
        let mut taken: BTreeMap<String, (String, String)> = BTreeMap::new();
        for (_, server, outcome) in started {
            if let StartOutcome::Ready { catalog, .. } = outcome {
                out.problems.extend(catalog.problems);
                for remote in catalog.tools {
                    let name = server.config().name.to_string();
                    if let Some((other_server, other_tool)) = taken.get(&remote.public_name) {
                        out.problems.push(format!(
                            "mcp server {name}: tool `{}` left out: its name {} is already taken by tool `{other_tool}` of server {other_server}",
                            remote.remote_name, remote.public_name
                        ));
                        continue;
                    }
                    taken.insert(
                        remote.public_name.clone(),
                        (name, remote.remote_name.clone()),
                    );
                    out.tools
                        .push(Arc::new(McpTool::new(Arc::clone(&server), remote)));
                }
            }
            out.servers.push(server);
        }
        out
    }

    /// Whether no server is configured.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// The servers, in config order.
    pub fn servers(&self) -> &[Arc<McpServer>] {
        &self.servers
    }

    /// Every usable tool.
    pub fn tools(&self) -> &[Arc<McpTool>] {
        &self.tools
    }

    /// One line per tool left out (broken definition, name taken).
    pub fn problems(&self) -> &[String] {
        &self.problems
    }

    /// Names of the tools the servers annotated read-only.
    pub fn read_only_tool_names(&self) -> Vec<String> {
        self.tools
            .iter()
            .filter(|t| t.is_read_only())
            .map(|t| t.name().to_owned())
            .collect()
    }

    /// Characters the tools' definitions take in a request.
    pub fn definition_chars(&self) -> usize {
        let specs: Vec<ToolSpec> = self.tools.iter().map(|t| t.spec()).collect();
        whittle_protocol::json_chars(&specs)
    }

    /// Adds the tools to `registry`: whole when their definitions take at
    /// most `budget_chars`, else deferred behind `mcp_tool_search`.
    pub fn install(&self, registry: &mut ToolRegistry, budget_chars: usize) -> Installation {
        if self.tools.is_empty() {
            return Installation::Nothing;
        }
        let chars = self.definition_chars();
        if chars <= budget_chars {
            for t in &self.tools {
                registry.register(Arc::clone(t) as Arc<dyn Tool>);
            }
            return Installation::Whole { chars };
        }
        let mut searchable = Vec::new();
        for t in &self.tools {
            searchable.push((t.spec(), t.server_name().to_owned()));
            registry.register_deferred(Arc::clone(t) as Arc<dyn Tool>);
        }
        registry.register(Arc::new(McpToolSearch::new(
            searchable,
            registry.loaded_tools(),
        )));
        Installation::Searched {
            chars,
            tools: self.tools.len(),
        }
    }

    /// Calls `tool` (the server's own name for it) on `server` directly, for
    /// `whittle mcp call`.
    pub async fn call(
        &self,
        server: &str,
        tool: &str,
        arguments: Value,
        cancel: &CancellationToken,
    ) -> Result<ToolOutput, String> {
        let Some(s) = self
            .servers
            .iter()
            .find(|s| s.config().name.as_str() == server)
        else {
            let known: Vec<&str> = self
                .servers
                .iter()
                .map(|s| s.config().name.as_str())
                .collect();
            return Err(format!(
                "no mcp server {server:?} is configured; the servers are: {}",
                if known.is_empty() {
                    "(none)".to_owned()
                } else {
                    known.join(", ")
                }
            ));
        };
        let result = s
            .call(tool, arguments, cancel)
            .await
            .map_err(|e| e.to_string())?;
        to_output(&result).map_err(|problem| {
            format!("mcp server {server} sent an answer that is not a tool result: {problem}")
        })
    }

    /// Stops every server, side by side.
    pub async fn stop(&self) {
        futures::future::join_all(self.servers.iter().map(|s| s.stop())).await;
    }
}
