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

use super::{CallFacts, Ledger, Recorder};
use crate::{Message, Role};
use std::collections::BTreeMap;
use std::ops::Range;

/// Memos for at most this many stretches (the whole history with and
/// without its markers' ledgers, and the middle snip_compact archives).
const SLOTS: usize = 4;

/// The ledgers of a few stretches of a history, each up to date as far as
/// it was last asked for.
#[derive(Clone, Debug, Default)]
pub(crate) struct LedgerMemo {
    slots: Vec<Memo>,
    /// The facts of the tool calls of the messages recorded, by message: a
    /// call is parsed once, however many memos record it, and however
    /// often an edit after it (a result replaced by its placeholder) makes
    /// the memos record the history again. Dropped with the messages an
    /// edit reaches, as the memos are.
    parsed: BTreeMap<usize, Vec<CallFacts>>,
}

#[derive(Clone, Debug)]
struct Memo {
    start: usize,
    upto: usize,
    carry_markers: bool,
    transcript: Option<String>,
    ledger: Ledger,
    recorder: Recorder,
    /// The ledger's last rendering, while no message was recorded since:
    /// the band's cost check and the compaction that follows it in the
    /// same call render the same ledger at the same budget.
    rendered: Option<Rendered>,
}

/// One rendering of a memo's ledger, with what it was rendered for.
#[derive(Clone, Debug)]
struct Rendered {
    budget: usize,
    named_by_marker: Option<String>,
    text: String,
}

impl LedgerMemo {
    /// Message `at` (and perhaps those after it) changed other than by an
    /// append: facts recorded from them no longer hold.
    pub(crate) fn edited_from(&mut self, at: usize) {
        self.slots.retain(|m| m.upto <= at);
        self.parsed.split_off(&at);
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
        let at = self.brought_up_to_date(messages, range, transcript, carry_markers);
        &self.slots[at].ledger
    }

    /// [`LedgerMemo::ledger`] rendered as [`Ledger::render`] does, or as
    /// it was last rendered when nothing was recorded since and the
    /// rendering was for the same budget and marker.
    pub(crate) fn rendered(
        &mut self,
        messages: &[Message],
        (range, transcript, carry_markers): (Range<usize>, Option<&str>, bool),
        budget: usize,
        named_by_marker: Option<&str>,
    ) -> String {
        let at = self.brought_up_to_date(messages, range, transcript, carry_markers);
        let memo = &mut self.slots[at];
        if let Some(r) = &memo.rendered
            && r.budget == budget
            && r.named_by_marker.as_deref() == named_by_marker
        {
            return r.text.clone();
        }
        let text = memo.ledger.render(budget, named_by_marker);
        memo.rendered = Some(Rendered {
            budget,
            named_by_marker: named_by_marker.map(str::to_owned),
            text: text.clone(),
        });
        text
    }

    /// The slot holding the ledger of `messages[range]`, every message of
    /// the range recorded.
    fn brought_up_to_date(
        &mut self,
        messages: &[Message],
        range: Range<usize>,
        transcript: Option<&str>,
        carry_markers: bool,
    ) -> usize {
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
                    rendered: None,
                });
                self.slots.len() - 1
            }
        };
        let memo = &mut self.slots[at];
        if memo.upto < end {
            memo.rendered = None;
        }
        for (k, message) in messages.iter().enumerate().take(end).skip(memo.upto) {
            let parsed = match message.role() {
                Role::Assistant => self
                    .parsed
                    .entry(k)
                    .or_insert_with(|| CallFacts::of_message(message))
                    .as_slice(),
                Role::User => &[],
            };
            memo.recorder.record_parsed(
                &mut memo.ledger,
                message,
                memo.transcript.as_deref(),
                parsed,
            );
        }
        memo.upto = end;
        at
    }
}
