//! How configuring, starting and calling a server fail. Every message is one
//! line that names the server, so it can be shown as it is.

/// A `[mcp_servers.NAME]` entry that cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// The name has characters a tool name cannot carry.
    #[error(
        "mcp_servers.{0:?}: a server name has 1 to 32 letters, digits, `_` or `-` (it prefixes the names of its tools)"
    )]
    BadName(String),
    /// The entry contradicts itself or holds a bad value.
    #[error("mcp_servers.{server}: {message}")]
    Invalid {
        /// The server.
        server: String,
        /// What is wrong, in one line.
        message: String,
    },
}

/// Why a server could not be started or reached.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StartError {
    /// A `${VAR}` in its config is not set.
    #[error("mcp server {server}: {key} uses ${{{variable}}}, which is not set in the environment")]
    MissingVariable {
        /// The server.
        server: String,
        /// The header or env key.
        key: String,
        /// The variable.
        variable: String,
    },
    /// The program could not be started.
    #[error("mcp server {server}: cannot start `{command}`: {message}")]
    Spawn {
        /// The server.
        server: String,
        /// The program.
        command: String,
        /// What the OS said.
        message: String,
    },
    /// The handshake or the tool listing failed.
    #[error("mcp server {server}: {message}")]
    Protocol {
        /// The server.
        server: String,
        /// What went wrong, with the server's own last words when it died.
        message: String,
    },
    /// It did not finish starting in time.
    #[error("mcp server {server}: did not start within {seconds} s (startup_timeout_s)")]
    Timeout {
        /// The server.
        server: String,
        /// The limit.
        seconds: u64,
    },
}

/// Why one tool call produced no result.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CallError {
    /// The server is not running and will not be restarted.
    #[error("mcp server {server} is not available: {reason}")]
    Unavailable {
        /// The server.
        server: String,
        /// Why.
        reason: String,
    },
    /// The connection broke during the call.
    #[error("mcp server {server} stopped during the call: {reason}")]
    Died {
        /// The server.
        server: String,
        /// Exit status, malformed output or transport error, with its last words.
        reason: String,
    },
    /// This call's exchange failed (a broken or unreadable HTTP response)
    /// while the connection stays usable.
    #[error("mcp server {server}: the call failed: {reason}")]
    Transport {
        /// The server.
        server: String,
        /// What the transport said.
        reason: String,
    },
    /// The server answered with a JSON-RPC error.
    #[error("mcp server {server} refused the call: {message}")]
    Refused {
        /// The server.
        server: String,
        /// The error's message and code.
        message: String,
    },
    /// The answer is not a tool result.
    #[error("mcp server {server} sent an answer that is not a tool result: {message}")]
    BadAnswer {
        /// The server.
        server: String,
        /// What is wrong with it.
        message: String,
    },
    /// No answer within `tool_timeout_s`; the call was cancelled.
    #[error(
        "mcp server {server} did not answer within {seconds} s (tool_timeout_s); the call was cancelled"
    )]
    Timeout {
        /// The server.
        server: String,
        /// The limit.
        seconds: u64,
    },
    /// The person cancelled the turn; the call was cancelled.
    #[error("cancelled by the user; mcp server {server} was told to stop the call")]
    Cancelled {
        /// The server.
        server: String,
    },
}
