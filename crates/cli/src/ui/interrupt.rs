//! Ctrl-C during a turn: the first one cancels the turn (the history stays
//! valid and the session goes on), a second one quits at once.

use crate::ui::render::err_line;
use std::sync::{Arc, Mutex};
use whittle_agent::{Agent, AgentError, EventSink, TurnOutcome};
use whittle_context::StepReport;
use whittle_tools::CancellationToken;

/// Exit status after Ctrl-C, as shells report a SIGINT death.
pub const CANCELLED_EXIT: u8 = 130;

/// The token of the turn in progress, shared with whoever may cancel it
/// from elsewhere (the permission prompt, where Ctrl-C is read as a key).
#[derive(Clone, Debug, Default)]
pub struct CancelSlot(Arc<Mutex<CancellationToken>>);

impl CancelSlot {
    /// A fresh token for a new turn.
    pub fn renew(&self) -> CancellationToken {
        let token = CancellationToken::new();
        if let Ok(mut slot) = self.0.lock() {
            *slot = token.clone();
        }
        token
    }

    /// Cancels the turn in progress.
    pub fn cancel(&self) {
        if let Ok(slot) = self.0.lock() {
            slot.cancel();
        }
    }
}

/// Runs one turn; Ctrl-C cancels it, a second Ctrl-C exits the process
/// (the session log is already on disk).
pub async fn run_turn(
    agent: &mut Agent,
    input: &str,
    sink: &mut dyn EventSink,
    slot: &CancelSlot,
) -> Result<TurnOutcome, AgentError> {
    let cancel = slot.renew();
    until_done_or_ctrl_c(&cancel, agent.run_turn(input, sink, &cancel)).await
}

/// `/compact [focus]`; Ctrl-C abandons the summary and keeps the history.
pub async fn compact(
    agent: &mut Agent,
    focus: Option<&str>,
    sink: &mut dyn EventSink,
    slot: &CancelSlot,
) -> Result<StepReport, AgentError> {
    let cancel = slot.renew();
    until_done_or_ctrl_c(&cancel, agent.compact(focus, sink, &cancel)).await
}

/// Awaits `work` while a separate task turns Ctrl-C into `cancel`: the
/// work may block its own thread (a summary inside compaction does), so the
/// signal must be watched elsewhere.
async fn until_done_or_ctrl_c<T>(cancel: &CancellationToken, work: impl Future<Output = T>) -> T {
    let watcher = tokio::spawn(cancel_on_ctrl_c(cancel.clone()));
    let out = work.await;
    watcher.abort();
    out
}

async fn cancel_on_ctrl_c(cancel: CancellationToken) {
    // Without signal handling the work just runs to the end.
    while tokio::signal::ctrl_c().await.is_ok() {
        if cancel.is_cancelled() {
            err_line("");
            // Exiting skips destructors: the servers' process groups are
            // killed here instead.
            whittle_mcp::kill_all_servers();
            std::process::exit(i32::from(CANCELLED_EXIT));
        }
        err_line("\ncancelling... (Ctrl-C again to quit)");
        cancel.cancel();
    }
}
