//! The ledger kept up to date instead of rebuilt: facts recorded once per
//! message, as messages are appended, so that a compaction renders.
//!
//! A [`LedgerMemo`] lives in the [`History`](crate::History) and holds, for
//! a stretch of it (`start..upto`), the ledger [`Ledger::of`] would give
//! and the recorder's state after it. Asked for `start..end`, it records
//! only `upto..end`. Recording is sequential and depends on nothing but
//! the messages and the transcript's name, so the result is the rebuild's,
//! exactly. An edit other than an append (a placeholder, a splice, a pop)
//! drops every memo that reaches the edited message; the next request
//! rebuilds it once. A resumed history starts with none, and the first
//! request reads its messages (its compaction markers' ledgers included)
//! once.

use super::{Ledger, Recorder};
use crate::Message;
use std::ops::Range;

/// Memos for at most this many stretches (the whole history with and
/// without its markers' ledgers, and the middle snip_compact archives).
const SLOTS: usize = 4;

/// The ledgers of a few stretches of a history, each up to date as far as
/// it was last asked for.
#[derive(Clone, Debug, Default)]
pub(crate) struct LedgerMemo {
    slots: Vec<Memo>,
}

#[derive(Clone, Debug)]
struct Memo {
    start: usize,
    upto: usize,
    carry_markers: bool,
    transcript: Option<String>,
    ledger: Ledger,
    recorder: Recorder,
}

impl LedgerMemo {
    /// Message `at` (and perhaps those after it) changed other than by an
    /// append: facts recorded from them no longer hold.
    pub(crate) fn edited_from(&mut self, at: usize) {
        self.slots.retain(|m| m.upto <= at);
    }

    /// The ledger of `messages[range]`, as [`Ledger::of`] (or, without
    /// `carry_markers`, `Ledger::since_markers`) gives it.
    pub(crate) fn ledger(
        &mut self,
        messages: &[Message],
        range: Range<usize>,
        transcript: Option<&str>,
        carry_markers: bool,
    ) -> &Ledger {
        let end = range.end.min(messages.len());
        let start = range.start.min(end);
        let found = self.slots.iter().position(|m| {
            m.start == start
                && m.upto <= end
                && m.carry_markers == carry_markers
                && m.transcript.as_deref() == transcript
        });
        let at = match found {
            Some(i) => i,
            None => {
                if self.slots.len() >= SLOTS {
                    self.slots.remove(0);
                }
                let mut ledger = Ledger::default();
                if let Some(t) = transcript {
                    // A set: inserted first or last, the same places.
                    ledger.places.insert(t.to_owned());
                }
                self.slots.push(Memo {
                    start,
                    upto: start,
                    carry_markers,
                    transcript: transcript.map(str::to_owned),
                    ledger,
                    recorder: Recorder {
                        carry_markers,
                        ..Recorder::default()
                    },
                });
                self.slots.len() - 1
            }
        };
        let memo = &mut self.slots[at];
        for message in &messages[memo.upto..end] {
            memo.recorder
                .record(&mut memo.ledger, message, memo.transcript.as_deref());
        }
        memo.upto = end;
        &memo.ledger
    }
}
