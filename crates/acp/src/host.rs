//! What the program embedding the ACP agent provides: building a whittle
//! session the way its own front end does (settings, model, sandbox, MCP
//! servers, session log), so the editor gets the same agent as the terminal.

use futures::future::BoxFuture;
use std::collections::BTreeMap;
use std::path::PathBuf;
use whittle_agent::{Agent, Approver, EventSink};
use whittle_tools::{CancellationToken, PermissionMode};

/// An MCP server the client asked for in `session/new` or `session/load`,
/// to be started like a configured one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientMcpServer {
    /// A server run as a child process speaking over stdio.
    Stdio {
        /// Its name (prefixes its tools).
        name: String,
        /// The program.
        command: PathBuf,
        /// Its arguments.
        args: Vec<String>,
        /// Variables set for it.
        env: BTreeMap<String, String>,
    },
    /// A streamable HTTP server.
    Http {
        /// Its name.
        name: String,
        /// Its endpoint.
        url: String,
        /// Headers sent with every request.
        headers: BTreeMap<String, String>,
    },
}

/// What the client asked a session to be opened with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenRequest {
    /// The workspace (the client's `cwd`, absolute).
    pub cwd: PathBuf,
    /// Servers to start besides the configured ones.
    pub mcp_servers: Vec<ClientMcpServer>,
    /// The logged session to continue (`session/load`), else a new one.
    pub resume: Option<String>,
}

/// Why the host could not do what was asked; one line for the client.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct HostError {
    message: String,
}

impl HostError {
    /// An error saying `message`.
    pub fn new(message: impl std::fmt::Display) -> Self {
        HostError {
            message: message.to_string(),
        }
    }
}

/// A model the editor may switch a session to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelChoice {
    /// What it is picked by (`PROVIDER:NAME`, as `--model` takes it).
    pub id: String,
    /// What the editor shows.
    pub name: String,
}

/// The models a session may use, and the one it uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelMenu {
    /// The id of the model in use; one of `choices`.
    pub current: String,
    /// Every model this machine can talk to now (keys set, the embedded one).
    pub choices: Vec<ModelChoice>,
}

/// A logged session an editor may load.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedSession {
    /// Its id, for `session/load`.
    pub id: String,
    /// Its workspace.
    pub cwd: PathBuf,
    /// When it was last written, as RFC 3339 (UTC).
    pub updated_at: String,
}

/// Builds sessions for the ACP agent.
pub trait Host: Send + Sync + 'static {
    /// Opens a session that asks `approver` whenever the permission layer
    /// asks; it is already logging, so its session id names it.
    fn open(
        &self,
        request: OpenRequest,
        approver: Box<dyn Approver>,
    ) -> BoxFuture<'_, Result<Box<dyn HostSession>, HostError>>;

    /// The sessions logged in workspace `cwd`, newest first.
    fn list_sessions(&self, cwd: &std::path::Path) -> Vec<ListedSession>;
}

/// One open session: the agent and what the front end adds around it.
pub trait HostSession: Send {
    /// The agent, to run turns on.
    fn agent(&mut self) -> &mut Agent;

    /// The permission mode in force.
    fn mode(&self) -> PermissionMode;

    /// Switches the permission mode; the sandbox follows it.
    fn set_mode(&mut self, mode: PermissionMode) -> Result<(), HostError>;

    /// The models this session may switch between.
    fn models(&self) -> ModelMenu;

    /// Talks to model `id` (one of [`HostSession::models`]) from the next
    /// call on; the conversation goes on.
    fn set_model(&mut self, id: &str) -> Result<(), HostError>;

    /// Runs a slash command (`compact`, `uncompact`, `context`, `cost`,
    /// `report`, `sandbox`, `rewind`, `diff`) and returns what it shows.
    fn command<'a>(
        &'a mut self,
        name: &'a str,
        arg: Option<&'a str>,
        sink: &'a mut dyn EventSink,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<String, HostError>>;

    /// Ends the session: its MCP servers stop, nothing outlives it.
    fn close(self: Box<Self>) -> BoxFuture<'static, ()>;
}
