//! What is known about why a connection ended: a protocol fault seen on
//! the wire, how the process exited, and the last words on its stderr.
//! Filled in by the transport and the process watcher; read when a call
//! or a start fails, to say in one line what happened.

use std::sync::Mutex;
use std::time::Duration;

/// Bytes of stderr kept for messages.
const TAIL_BYTES: usize = 2_000;
/// Characters of stderr quoted in a message.
const QUOTED_CHARS: usize = 200;

#[derive(Default)]
struct State {
    fault: Option<String>,
    exit: Option<String>,
    stderr_tail: Vec<u8>,
}

/// Shared between a connection's transport, its process watcher and the
/// code that reports failures.
#[derive(Default)]
pub struct Health {
    state: Mutex<State>,
}

impl Health {
    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        match self.state.lock() {
            Ok(mut s) => f(&mut s),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    /// The server broke the protocol; the first fault is the one kept.
    pub fn set_fault(&self, fault: String) {
        self.with(|s| {
            s.fault.get_or_insert(fault);
        });
    }

    /// How the process ended.
    pub fn set_exit(&self, exit: String) {
        self.with(|s| s.exit = Some(exit));
    }

    /// More of the process's stderr.
    pub fn push_stderr(&self, bytes: &[u8]) {
        self.with(|s| {
            s.stderr_tail.extend_from_slice(bytes);
            let excess = s.stderr_tail.len().saturating_sub(TAIL_BYTES);
            s.stderr_tail.drain(..excess);
        });
    }

    /// Whether the process is known to have ended.
    pub fn exited(&self) -> bool {
        self.with(|s| s.exit.is_some())
    }

    /// Why the connection ended, in one line: the fault, else the exit,
    /// else `fallback`; then the last line the server wrote on stderr.
    pub fn reason(&self, fallback: &str) -> String {
        self.with(|s| {
            let mut line = s
                .fault
                .clone()
                .or_else(|| s.exit.clone().map(|e| format!("the process {e}")))
                .unwrap_or_else(|| fallback.to_owned());
            if let Some(last) = last_line(&s.stderr_tail) {
                line.push_str(&format!("; its stderr ends: {last}"));
            }
            line
        })
    }

    /// Waits a moment for the process watcher, so that a message about a
    /// connection that just closed can say how the process ended.
    pub async fn settle(&self) {
        for _ in 0..25 {
            if self.exited() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// The last non-empty stderr line, one line, bounded.
fn last_line(tail: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(tail);
    let line = text.lines().rev().map(str::trim).find(|l| !l.is_empty())?;
    Some(format!(
        "`{}`",
        whittle_protocol::quote_line(line, QUOTED_CHARS)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reason_prefers_the_fault_and_quotes_stderr() {
        let h = Health::default();
        assert_eq!(h.reason("closed"), "closed");
        h.push_stderr(b"starting\nError: port in use\n\n");
        h.set_exit("exited with status 1".into());
        assert_eq!(
            h.reason("closed"),
            "the process exited with status 1; its stderr ends: `Error: port in use`"
        );
        h.set_fault("sent garbage".into());
        h.set_fault("second".into());
        assert!(h.reason("closed").starts_with("sent garbage;"));
    }

    #[test]
    fn the_tail_is_bounded() {
        let h = Health::default();
        for _ in 0..1_000 {
            h.push_stderr(&[b'x'; 100]);
        }
        let r = h.reason("x");
        assert!(r.chars().count() < QUOTED_CHARS + 50, "{r}");
    }
}
