//! What a session's sink, its approver and the connection's handlers share:
//! the way to the client, the session's id, the running turn's cancel token
//! and the tool call in progress (the one a permission question is about).

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{SessionId, SessionNotification, SessionUpdate};
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};
use whittle_tools::CancellationToken;

/// The tool call in progress.
#[derive(Clone, Debug)]
pub(crate) struct CurrentTool {
    pub id: String,
    pub name: String,
    pub input: serde_json::Value,
}

/// Shared by everything serving one session.
pub(crate) struct SessionShared {
    cx: ConnectionTo<Client>,
    id: OnceLock<SessionId>,
    pub workspace: PathBuf,
    cancel: Mutex<CancellationToken>,
    current_tool: Mutex<Option<CurrentTool>>,
}

impl SessionShared {
    pub fn new(cx: ConnectionTo<Client>, workspace: PathBuf) -> Self {
        SessionShared {
            cx,
            id: OnceLock::new(),
            workspace,
            cancel: Mutex::new(CancellationToken::new()),
            current_tool: Mutex::new(None),
        }
    }

    pub fn set_id(&self, id: SessionId) {
        let _ = self.id.set(id);
    }

    pub fn id(&self) -> SessionId {
        self.id.get().cloned().unwrap_or_else(|| SessionId::new(""))
    }

    pub fn connection(&self) -> &ConnectionTo<Client> {
        &self.cx
    }

    /// Tells the client; a client that is gone is not an error here (the
    /// turn is cancelled when the connection closes).
    pub fn notify(&self, update: SessionUpdate) {
        let _ = self
            .cx
            .send_notification(SessionNotification::new(self.id(), update));
    }

    /// A fresh token for a new turn.
    pub fn renew_cancel(&self) -> CancellationToken {
        let token = CancellationToken::new();
        if let Ok(mut slot) = self.cancel.lock() {
            *slot = token.clone();
        }
        token
    }

    /// The running turn's token.
    pub fn cancel_token(&self) -> CancellationToken {
        self.cancel
            .lock()
            .map(|t| t.clone())
            .unwrap_or_else(|_| CancellationToken::new())
    }

    /// `session/cancel`: stops the running turn, like Ctrl-C.
    pub fn cancel(&self) {
        self.cancel_token().cancel();
    }

    pub fn set_current_tool(&self, tool: Option<CurrentTool>) {
        if let Ok(mut slot) = self.current_tool.lock() {
            *slot = tool;
        }
    }

    pub fn current_tool(&self) -> Option<CurrentTool> {
        self.current_tool.lock().ok().and_then(|t| t.clone())
    }
}
