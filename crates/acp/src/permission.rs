//! Every ask of the permission layer as `session/request_permission`, about
//! the tool call in progress. A rejection, a cancelled turn or a client
//! that is gone are all a no: the tool never starts.

use crate::session_shared::SessionShared;
use crate::tool_calls::{tool_kind, tool_title};
use agent_client_protocol::v1::schema::{
    PermissionOption, PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest,
    ToolCallUpdate, ToolCallUpdateFields,
};
use futures::future::BoxFuture;
use serde_json::Value;
use std::collections::HashSet;
use std::sync::Arc;
use whittle_agent::{Approval, Approver};

const ALLOW_ONCE: &str = "allow-once";
const ALLOW_ALWAYS: &str = "allow-always";
const REJECT_ONCE: &str = "reject-once";
const REJECT_ALWAYS: &str = "reject-always";

/// Asks the editor. "Allow always" is remembered by the agent for the
/// session; "reject always" here, per tool, so the same tool is refused
/// without asking again.
pub(crate) struct AcpApprover {
    shared: Arc<SessionShared>,
    rejected_tools: HashSet<String>,
}

impl AcpApprover {
    pub fn new(shared: Arc<SessionShared>) -> Self {
        AcpApprover {
            shared,
            rejected_tools: HashSet::new(),
        }
    }

    fn options() -> Vec<PermissionOption> {
        vec![
            PermissionOption::new(ALLOW_ONCE, "Allow once", PermissionOptionKind::AllowOnce),
            PermissionOption::new(
                ALLOW_ALWAYS,
                "Allow always (this session)",
                PermissionOptionKind::AllowAlways,
            ),
            PermissionOption::new(REJECT_ONCE, "Reject", PermissionOptionKind::RejectOnce),
            PermissionOption::new(
                REJECT_ALWAYS,
                "Reject always (this session)",
                PermissionOptionKind::RejectAlways,
            ),
        ]
    }

    async fn ask(&mut self, tool: &str, input: &Value, reason: &str) -> Approval {
        if self.rejected_tools.contains(tool) {
            return Approval::Deny;
        }
        let id = self
            .shared
            .current_tool()
            .filter(|t| t.name == tool && &t.input == input)
            .map_or_else(|| format!("ask-{tool}"), |t| t.id);
        let fields = ToolCallUpdateFields::new()
            .title(format!("{} ({reason})", tool_title(tool, input)))
            .kind(tool_kind(tool))
            .raw_input(input.clone());
        let request = RequestPermissionRequest::new(
            self.shared.id(),
            ToolCallUpdate::new(id, fields),
            Self::options(),
        );
        let cancel = self.shared.cancel_token();
        let sent = self.shared.connection().send_request(request);
        let answer = tokio::select! {
            answer = sent.block_task() => answer,
            _ = cancel.cancelled() => return Approval::Deny,
        };
        let Ok(answer) = answer else {
            return Approval::Deny;
        };
        match answer.outcome {
            RequestPermissionOutcome::Selected(selected) => match &*selected.option_id.0 {
                ALLOW_ONCE => Approval::Allow,
                ALLOW_ALWAYS => Approval::AllowForSession,
                REJECT_ALWAYS => {
                    self.rejected_tools.insert(tool.to_string());
                    Approval::Deny
                }
                _ => Approval::Deny,
            },
            _ => Approval::Deny,
        }
    }
}

impl Approver for AcpApprover {
    fn approve<'a>(
        &'a mut self,
        tool: &'a str,
        input: &'a Value,
        reason: &'a str,
    ) -> BoxFuture<'a, Approval> {
        Box::pin(self.ask(tool, input, reason))
    }
}
