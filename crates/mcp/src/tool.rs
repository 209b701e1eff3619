//! A server's tool as a whittle tool.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::Value;
use whittle_tools::{Tool, ToolContext, ToolOutput};

use crate::catalog::RemoteTool;
use crate::result::to_output;
use crate::server::McpServer;

/// `mcp__<server>__<tool>`: runs the tool on its server. Read-only when the
/// server annotated it `readOnlyHint: true` (a claim of the server's; the
/// permission policy still asks before it runs).
pub struct McpTool {
    server: Arc<McpServer>,
    remote: RemoteTool,
}

impl McpTool {
    /// The tool `remote` of `server`.
    pub fn new(server: Arc<McpServer>, remote: RemoteTool) -> McpTool {
        McpTool { server, remote }
    }

    /// The name the server knows the tool by.
    pub fn remote_name(&self) -> &str {
        &self.remote.remote_name
    }

    /// The server's name.
    pub fn server_name(&self) -> &str {
        self.server.config().name.as_str()
    }
}

impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.remote.public_name
    }

    fn description(&self) -> &str {
        &self.remote.description
    }

    fn input_schema(&self) -> Value {
        self.remote.input_schema.clone()
    }

    fn is_read_only(&self) -> bool {
        self.remote.read_only
    }

    fn run<'a>(&'a self, input: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let arguments = match input {
                Value::Object(_) => input,
                Value::Null => Value::Object(Default::default()),
                other => {
                    return ToolOutput::error(format!(
                        "invalid input for {}: expected a JSON object, got {}",
                        self.remote.public_name,
                        whittle_protocol::json_kind(&other)
                    ));
                }
            };
            match self
                .server
                .call(&self.remote.remote_name, arguments, ctx.cancel_token())
                .await
            {
                Ok(result) => to_output(&result).unwrap_or_else(|problem| {
                    ToolOutput::error(format!(
                        "mcp server {} sent an answer that is not a tool result: {problem}",
                        self.server_name()
                    ))
                }),
                Err(e) => ToolOutput::error(e.to_string()),
            }
        })
    }
}
