//! Ctrl-C during a turn: the first one cancels the turn (the history stays
//! valid and the session goes on), a second one quits at once.

use crate::render::err_line;
use std::sync::{Arc, Mutex};
use whittle_agent::{Agent, AgentError, EventSink, TurnOutcome};
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
    let turn = agent.run_turn(input, sink, &cancel);
    tokio::pin!(turn);
    loop {
        tokio::select! {
            outcome = &mut turn => return outcome,
            signal = tokio::signal::ctrl_c() => {
                if signal.is_err() {
                    // No signal handling here: just let the turn finish.
                    return turn.await;
                }
                if cancel.is_cancelled() {
                    err_line("");
                    std::process::exit(i32::from(CANCELLED_EXIT));
                }
                err_line("\ncancelling... (Ctrl-C again to quit)");
                cancel.cancel();
            }
        }
    }
}
