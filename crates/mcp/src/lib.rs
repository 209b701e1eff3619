//! whittle's Model Context Protocol client, on the official Rust SDK
//! (`rmcp`).
//!
//! [`McpServers::start`] starts the configured servers side by side (stdio
//! children in their own process groups, or streamable HTTP endpoints with
//! `${VAR}`-expanded headers), each within its startup timeout, and lists
//! their tools. Each tool becomes an [`McpTool`] named
//! `mcp__<server>__<tool>` within the model APIs' name rules; broken
//! definitions and name collisions are left out with a line each
//! ([`McpServers::problems`]). [`McpServers::install`] puts the tools in the
//! agent's registry whole, or, when their definitions would take too much
//! of the window, behind [`McpToolSearch`].
//!
//! Servers are assumed hostile or broken: malformed JSON-RPC ends the
//! connection with a clear line, results of any size pass whole (the
//! pipeline persists large ones), hung calls time out and are cancelled
//! with `notifications/cancelled`, and a server that died is restarted once
//! on its next use.
//!
//! ```
//! use whittle_mcp::Template;
//!
//! // A header value from the config: expanded only when the server starts.
//! let header = Template::parse("Bearer ${API_TOKEN}").unwrap();
//! let env = |name: &str| (name == "API_TOKEN").then(|| "s3cret".to_string());
//! assert_eq!(header.expand(&env).unwrap().expose(), "Bearer s3cret");
//! assert_eq!(header.expand(&|_: &str| None).unwrap_err().to_string(), "API_TOKEN is not set");
//! ```

mod catalog;
mod config;
mod connection;
mod error;
mod health;
mod names;
mod result;
mod search;
mod server;
mod servers;
mod stdio;
mod template;
mod tool;

pub use catalog::{Catalog, MAX_DESCRIPTION_CHARS, MAX_SCHEMA_BYTES, RemoteTool};
pub use config::{ServerConfig, ServerEntry, ServerName, Transport};
pub use connection::StartOptions;
pub use error::{CallError, ConfigError, StartError};
pub use names::{MAX_TOOL_NAME, PREFIX, is_valid_tool_name, public_tool_name};
pub use result::{NotAResult, to_output};
pub use search::{McpToolSearch, TOOL_SEARCH_NAME};
pub use server::{McpServer, StartOutcome};
pub use servers::{Installation, McpServers, StartEvent};
pub use stdio::{MAX_MESSAGE_BYTES, kill_all_servers};
pub use template::{Secret, Template, TemplateError, Unset};
pub use tool::McpTool;
