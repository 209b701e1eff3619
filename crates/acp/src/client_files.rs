//! The editor's files: when the client offers `fs/read_text_file` and
//! `fs/write_text_file`, the tools read and write through it, so an unsaved
//! buffer is what the agent sees and an edit lands in the open buffer.

use crate::session_shared::SessionShared;
use agent_client_protocol::v1::schema::{
    FileSystemCapabilities, ReadTextFileRequest, WriteTextFileRequest,
};
use futures::future::BoxFuture;
use std::path::Path;
use std::sync::Arc;
use whittle_tools::{EditorFileCapabilities, EditorFileError, EditorFiles};

/// One session's way to the client's files.
pub(crate) struct ClientFiles {
    shared: Arc<SessionShared>,
    offered: EditorFileCapabilities,
}

impl std::fmt::Debug for ClientFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientFiles")
            .field("offered", &self.offered)
            .finish_non_exhaustive()
    }
}

impl ClientFiles {
    /// The client's files as far as it offers them; `None` when it offers
    /// neither (the disk serves).
    pub fn offered(shared: Arc<SessionShared>, fs: &FileSystemCapabilities) -> Option<Self> {
        let offered = EditorFileCapabilities {
            read: fs.read_text_file,
            write: fs.write_text_file,
        };
        (offered.read || offered.write).then_some(ClientFiles { shared, offered })
    }
}

fn refused(action: &'static str, path: &Path, reason: impl std::fmt::Display) -> EditorFileError {
    EditorFileError {
        action,
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}

impl EditorFiles for ClientFiles {
    fn capabilities(&self) -> EditorFileCapabilities {
        self.offered
    }

    fn read_text<'a>(&'a self, path: &'a Path) -> BoxFuture<'a, Result<String, EditorFileError>> {
        Box::pin(async move {
            let request = ReadTextFileRequest::new(self.shared.id(), path.to_path_buf());
            let cancel = self.shared.cancel_token();
            let sent = self.shared.connection().send_request(request);
            let answer = tokio::select! {
                answer = sent.block_task() => answer,
                _ = cancel.cancelled() => return Err(refused("read", path, "the turn was cancelled")),
            };
            let text = answer
                .map(|read| read.content)
                .map_err(|e| refused("read", path, e))?;
            self.shared.editor_read(path, &text);
            Ok(text)
        })
    }

    fn write_text<'a>(
        &'a self,
        path: &'a Path,
        text: &'a str,
    ) -> BoxFuture<'a, Result<(), EditorFileError>> {
        Box::pin(async move {
            let request =
                WriteTextFileRequest::new(self.shared.id(), path.to_path_buf(), text.to_string());
            let cancel = self.shared.cancel_token();
            let sent = self.shared.connection().send_request(request);
            let answer = tokio::select! {
                answer = sent.block_task() => answer,
                _ = cancel.cancelled() => return Err(refused("write", path, "the turn was cancelled")),
            };
            answer.map_err(|e| refused("write", path, e))?;
            self.shared.editor_wrote(path, text);
            Ok(())
        })
    }
}
