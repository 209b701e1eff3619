//! whittle as an [Agent Client Protocol](https://agentclientprotocol.com)
//! agent: an editor (Zed, a JetBrains IDE, ...) starts `whittle acp` and
//! drives sessions over newline-delimited JSON-RPC on stdio. The agent crate
//! knows nothing of ACP: this crate turns its events into session updates,
//! its permission questions into `session/request_permission`, and the
//! logged history into a replay for `session/load`. The program embedding
//! it builds the sessions ([`Host`]), as its own front end does.
//!
//! ```
//! use whittle_acp::{available_commands, mode_state};
//! use whittle_tools::PermissionMode;
//!
//! // The modes an editor can switch between, and the slash commands it offers.
//! let modes = mode_state(PermissionMode::Default);
//! assert_eq!(&*modes.current_mode_id.0, "default");
//! assert_eq!(modes.available_modes.len(), 4);
//! assert!(available_commands().iter().any(|c| c.name == "compact"));
//! ```

mod client_files;
mod commands;
mod error;
mod host;
mod models;
mod modes;
mod permission;
mod replay;
mod server;
mod session_shared;
mod tool_calls;
mod updates;

pub use commands::{available_commands, parse_command};
pub use error::AcpError;
pub use host::{
    ClientMcpServer, Host, HostError, HostSession, ListedSession, ModelChoice, ModelMenu,
    OpenRequest,
};
pub use models::{MODEL_OPTION, model_option};
pub use modes::{mode_id, mode_of, mode_state};
pub use server::{serve, serve_stdio};
pub use tool_calls::{tool_kind, tool_title};
