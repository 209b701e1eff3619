//! Asking the person before a tool the permission policy is unsure about,
//! and remembering what they allowed for the whole session.

use futures::future::BoxFuture;
use serde_json::Value;
use std::collections::HashSet;

/// The person's answer to a permission question.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Approval {
    /// Run it this once.
    Allow,
    /// Run it, and the same call again without asking this session.
    AllowForSession,
    /// Do not run it.
    Deny,
}

/// Asks the person before a tool the policy is unsure about.
pub trait Approver: Send {
    /// Whether to run `tool` with `input`; `reason` says why we ask.
    fn approve<'a>(
        &'a mut self,
        tool: &'a str,
        input: &'a Value,
        reason: &'a str,
    ) -> BoxFuture<'a, Approval>;
}

/// The approver when nobody can be asked (`-p`): every question is a no.
#[derive(Clone, Copy, Debug, Default)]
pub struct DenyAsks;

impl Approver for DenyAsks {
    fn approve<'a>(&'a mut self, _: &'a str, _: &'a Value, _: &'a str) -> BoxFuture<'a, Approval> {
        Box::pin(async { Approval::Deny })
    }
}

/// The session's approver, and the calls the person allowed for the rest of
/// the session, so the same question is not asked twice.
pub(super) struct Approvals {
    approver: Box<dyn Approver>,
    /// Calls allowed for the session, by tool name and exact input.
    allowed_for_session: HashSet<String>,
}

impl Approvals {
    pub(super) fn new(approver: Box<dyn Approver>) -> Self {
        Approvals {
            approver,
            allowed_for_session: HashSet::new(),
        }
    }

    /// Whether `tool` may run with `input`: yes at once if the person allowed
    /// this very call for the session, else whatever they answer now.
    pub(super) async fn allow(&mut self, tool: &str, input: &Value, reason: &str) -> bool {
        let key = format!("{tool}\0{input}");
        if self.allowed_for_session.contains(&key) {
            return true;
        }
        match self.approver.approve(tool, input, reason).await {
            Approval::Allow => true,
            Approval::AllowForSession => {
                self.allowed_for_session.insert(key);
                true
            }
            Approval::Deny => false,
        }
    }
}
