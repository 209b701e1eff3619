//! What a session's sink, its approver and the connection's handlers share:
//! the way to the client, the session's id, the running turn's cancel token
//! and the tool call in progress (the one a permission question is about).

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{SessionId, SessionNotification, SessionUpdate};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
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
    /// Texts the editor gave or took for a file during the tool call in
    /// progress, so the call's diff shows the buffer, not the disk.
    editor_texts: Mutex<HashMap<PathBuf, EditorText>>,
}

/// A file's text as the editor had it before a tool wrote it, and after.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct EditorText {
    pub before: Option<String>,
    pub after: Option<String>,
}

impl SessionShared {
    pub fn new(cx: ConnectionTo<Client>, workspace: PathBuf) -> Self {
        SessionShared {
            cx,
            id: OnceLock::new(),
            workspace,
            cancel: Mutex::new(CancellationToken::new()),
            current_tool: Mutex::new(None),
            editor_texts: Mutex::new(HashMap::new()),
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

    /// The editor gave `text` for `path`.
    pub fn editor_read(&self, path: &Path, text: &str) {
        if let Ok(mut texts) = self.editor_texts.lock() {
            texts.entry(path.to_path_buf()).or_default().before = Some(text.to_string());
        }
    }

    /// The editor took `text` for `path`.
    pub fn editor_wrote(&self, path: &Path, text: &str) {
        if let Ok(mut texts) = self.editor_texts.lock() {
            texts.entry(path.to_path_buf()).or_default().after = Some(text.to_string());
        }
    }

    /// What the editor gave and took for `path` since the last call.
    pub fn take_editor_text(&self, path: &Path) -> Option<EditorText> {
        self.editor_texts.lock().ok()?.remove(path)
    }
}
