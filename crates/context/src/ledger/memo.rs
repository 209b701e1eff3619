//! The ledger kept up to date instead of rebuilt: facts recorded once per
//! message, as messages are appended, so that a compaction renders.
//!
//! A [`LedgerMemo`] lives in the [`History`](crate::History) and holds, for
//! a stretch of it (`start..upto`), the ledger [`Ledger::of`] would give
//! and the recorder's state after it. Asked for `start..end`, it records
//! only `upto..end`. Recording is sequential and depends on nothing but
//! the messages and the transcript's name, so the result is the rebuild's,
//! exactly. An edit other than an append (a placeholder, a splice, a pop)
//! rolls every memo that reaches the edited message back to its last
//! checkpoint before it (a memo keeps its state every [`CHECKPOINT_EVERY`]
//! messages, the last few of them), or drops it when there is none; the
//! next request records from there: rebuilding the whole history for an
//! edit of its newest messages made every such call cost as much as the
//! history is long. What depends on one message alone (its tool calls
//! parsed, a marker's ledger read back) is kept per message, through
//! edits of the others, and may be computed ahead of need
//! ([`LedgerMemo::prepare_ahead`]). A resumed history starts with none,
//! and the first request reads its messages (its compaction markers'
//! ledgers included) once.

use super::{CallFacts, Ledger, Recorder, marker_ledger};
use crate::per_message::PerMessage;
use crate::{Message, Role};
use std::ops::Range;

/// Memos for at most this many stretches (the whole history with and
/// without its markers' ledgers, and the middle snip_compact archives).
const SLOTS: usize = 4;

/// A memo keeps its state at least this many messages after its last
/// checkpoint, at its end when the work ahead runs (see
/// [`LedgerMemo::checkpoint_ahead`]). Keeping it costs a copy of the
/// ledger; an edit then records again what lies between the checkpoint
/// before it and the memo's end: up to about twice this many messages for
/// an edit near the end (the checkpoint at the end is behind it). Small in
/// unit tests, so that the property test of edits rolls back often.
const CHECKPOINT_EVERY: usize = if cfg!(test) { 3 } else { 32 };

/// While recording for a request, a checkpoint is taken only this far
/// after the last one: the ahead work takes them every
/// [`CHECKPOINT_EVERY`], off the call's path (a checkpoint copies the
/// ledger, which grows with the session: taken on the path, it made a call
/// in a 10,000-message session cost twice one in a 1,000-message one).
const ON_PATH_EVERY: usize = 2 * CHECKPOINT_EVERY;

/// The checkpoints a memo keeps, newest: an edit further back than these
/// (micro_compact clearing old results, which the cache model makes rare)
/// rebuilds the memo.
const CHECKPOINTS: usize = 3;

/// The ledgers of a few stretches of a history, each up to date as far as
/// it was last asked for.
#[derive(Clone, Debug, Default)]
pub(crate) struct LedgerMemo {
    slots: Vec<Memo>,
    /// The facts of the tool calls of the messages recorded, by message: a
    /// call is parsed once, however many memos record it, and however
    /// often an edit after it (a result replaced by its placeholder) makes
    /// the memos record the history again.
    parsed: PerMessage<Vec<CallFacts>>,
    /// Markers' ledgers read back ahead of need ([`LedgerMemo::prepare_ahead`]),
    /// by message: taken by the first memo that records the marker.
    read_back: PerMessage<Ledger>,
    /// Memos an edit made useless, freed by [`LedgerMemo::prepare_ahead`]
    /// rather than on the call's path (a ledger is thousands of strings),
    /// or by an edit that finds more than [`DISCARDED_MAX`] waiting.
    discarded: Vec<Memo>,
    /// The states a roll back left behind (the memo's own, and the
    /// checkpoints after the edit), freed as `discarded` is.
    rolled_back: Vec<Checkpoint>,
}

/// The most memos and states [`LedgerMemo`] keeps waiting to be freed: more
/// than one compaction's edits leave (a harness that never calls
/// [`LedgerMemo::prepare_ahead`] frees them on the path, a few at a time).
const DISCARDED_MAX: usize = SLOTS * (CHECKPOINTS + 1);

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
    /// The length, as a JSON string, of the ledger's last rendering,
    /// kept while messages are recorded after it: what the band's cost
    /// check prices a summary's marker by (see
    /// [`LedgerMemo::rendered_json_chars_estimate`]).
    last_rendered_json_chars: Option<usize>,
    /// The memo as it was at a few earlier points, oldest first.
    checkpoints: Vec<Checkpoint>,
}

/// A memo's state after recording the messages before `upto`.
#[derive(Clone, Debug)]
struct Checkpoint {
    upto: usize,
    ledger: Ledger,
    recorder: Recorder,
}

impl Memo {
    /// Back to the newest checkpoint at or before message `at`, if there
    /// is one; otherwise left as it is (and dropped by the caller). What
    /// it leaves behind goes to `freed`, to be freed off the call's path.
    ///
    /// The checkpoint becomes the memo's state, moved, not copied (a copy
    /// of a long session's ledger was a fifth of a micro_compact's time):
    /// none is kept at that point any more; the work ahead of the next call
    /// takes a new one at the memo's end once it is far enough from the
    /// one before ([`LedgerMemo::checkpoint_ahead`]).
    fn roll_back(&mut self, at: usize, freed: &mut Vec<Checkpoint>) {
        // Checkpoints are kept oldest first.
        let kept = self.checkpoints.partition_point(|c| c.upto <= at);
        freed.extend(self.checkpoints.drain(kept..));
        if let Some(c) = self.checkpoints.pop() {
            freed.push(Checkpoint {
                upto: self.upto,
                ledger: std::mem::replace(&mut self.ledger, c.ledger),
                recorder: std::mem::replace(&mut self.recorder, c.recorder),
            });
            self.upto = c.upto;
            self.rendered = None;
        }
    }

    /// Keeps the memo's state at message `k` (what it holds now, before
    /// recording `k`) when the last checkpoint is `every` messages back.
    fn checkpoint_at(&mut self, k: usize, every: usize) {
        let last = self.checkpoints.last().map_or(self.start, |c| c.upto);
        if k < last + every {
            return;
        }
        if self.checkpoints.len() >= CHECKPOINTS {
            self.checkpoints.remove(0);
        }
        self.checkpoints.push(Checkpoint {
            upto: k,
            ledger: self.ledger.clone(),
            recorder: self.recorder.clone(),
        });
    }
}

/// One rendering of a memo's ledger, with what it was rendered for.
#[derive(Clone, Debug)]
struct Rendered {
    budget: usize,
    named_by_marker: Option<String>,
    text: String,
}

impl LedgerMemo {
    /// Message `k` changed (a result replaced by its placeholder).
    pub(crate) fn message_changed(&mut self, k: usize) {
        self.recorded_before(k);
        self.parsed.changed(k);
        self.read_back.changed(k);
    }

    /// Messages `range` were replaced by `inserted` others.
    pub(crate) fn messages_spliced(&mut self, range: Range<usize>, inserted: usize) {
        self.recorded_before(range.start);
        self.parsed.spliced(range.clone(), inserted);
        self.read_back.spliced(range, inserted);
    }

    /// The history was cut to its first `len` messages.
    pub(crate) fn truncated(&mut self, len: usize) {
        self.recorded_before(len);
        self.parsed.truncated(len);
        self.read_back.truncated(len);
    }

    /// Facts the memos recorded from message `at` on no longer hold:
    /// recording is sequential, so an edit reaches every message after it.
    fn recorded_before(&mut self, at: usize) {
        if !self.slots.iter().any(|m| m.upto > at) {
            return;
        }
        if self.discarded.len() + self.rolled_back.len() > DISCARDED_MAX {
            self.discarded.clear();
            self.rolled_back.clear();
        }
        for memo in &mut self.slots {
            if memo.upto > at {
                memo.roll_back(at, &mut self.rolled_back);
            }
        }
        if self.slots.iter().any(|m| m.upto > at) {
            let (kept, discarded): (Vec<Memo>, Vec<Memo>) = std::mem::take(&mut self.slots)
                .into_iter()
                .partition(|m| m.upto <= at);
            self.slots = kept;
            self.discarded.extend(discarded);
        }
    }

    /// The work of the next requests that depends on single messages, done
    /// now: every tool call parsed, every compaction marker that no memo
    /// has recorded read back, and the memos the last edit discarded
    /// freed. A harness calls it while the model answers, so that the
    /// compaction after the answer finds the marker the last one wrote
    /// already read; the results are the ones the requests would compute,
    /// so nothing but when they are computed changes. Messages before
    /// `from` were looked at already, and have not changed since.
    pub(crate) fn prepare_ahead(&mut self, messages: &[Message], from: usize) {
        self.discarded.clear();
        self.rolled_back.clear();
        for (k, message) in messages.iter().enumerate().skip(from) {
            match message.role() {
                Role::Assistant => {
                    self.parsed
                        .get_or_set_with(k, || CallFacts::of_message(message));
                }
                Role::User => {
                    let recorded = self
                        .slots
                        .iter()
                        .any(|m| m.carry_markers && m.start <= k && k < m.upto);
                    if !recorded
                        && !self.read_back.has(k)
                        && let Some(ledger) = marker_ledger(message)
                    {
                        self.read_back.set(k, ledger);
                    }
                }
            }
        }
    }

    /// Keeps each memo's state as it is now when its last checkpoint is
    /// [`CHECKPOINT_EVERY`] messages back: a harness calls it while the
    /// model answers, after the memos were brought up to date, so that the
    /// requests record without copying a ledger.
    pub(crate) fn checkpoint_ahead(&mut self) {
        for memo in &mut self.slots {
            let upto = memo.upto;
            memo.checkpoint_at(upto, CHECKPOINT_EVERY);
        }
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
        memo.last_rendered_json_chars = Some(whittle_protocol::json_str_chars(&text));
        memo.rendered = Some(Rendered {
            budget,
            named_by_marker: named_by_marker.map(str::to_owned),
            text: text.clone(),
        });
        text
    }

    /// The length as a JSON string of [`LedgerMemo::rendered`], as it was
    /// at the last rendering: exact when nothing was recorded since, for
    /// the same budget and marker; else close (the messages recorded since
    /// add a few facts to a ledger that is mostly at its budget, and the
    /// budget moves a little with the history's characters per token). A
    /// memo never rendered is rendered now.
    pub(crate) fn rendered_json_chars_estimate(
        &mut self,
        messages: &[Message],
        (range, transcript, carry_markers): (Range<usize>, Option<&str>, bool),
        budget: usize,
        named_by_marker: Option<&str>,
    ) -> usize {
        let at = self.brought_up_to_date(messages, range.clone(), transcript, carry_markers);
        // The last rendering's, which is the rendering itself when nothing
        // was recorded since (it is set with `rendered`).
        if let Some(chars) = self.slots[at].last_rendered_json_chars {
            return chars;
        }
        let text = self.rendered(
            messages,
            (range, transcript, carry_markers),
            budget,
            named_by_marker,
        );
        whittle_protocol::json_str_chars(&text)
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
                    last_rendered_json_chars: None,
                    checkpoints: Vec::new(),
                });
                self.slots.len() - 1
            }
        };
        let memo = &mut self.slots[at];
        if memo.upto < end {
            memo.rendered = None;
        }
        for (k, message) in messages.iter().enumerate().take(end).skip(memo.upto) {
            // Checkpoints are taken ahead ([`LedgerMemo::checkpoint_ahead`]);
            // one is taken here only when none was for twice as long (a
            // harness that does no work ahead). Only the last few are
            // kept: none is taken where a later one in this same
            // recording would drop it.
            if end - k <= ON_PATH_EVERY * CHECKPOINTS {
                memo.checkpoint_at(k, ON_PATH_EVERY);
            }
            let (parsed, read_back) = match message.role() {
                Role::Assistant => (
                    self.parsed
                        .get_or_set_with(k, || CallFacts::of_message(message))
                        .as_slice(),
                    None,
                ),
                Role::User if memo.carry_markers => (&[][..], self.read_back.take(k)),
                Role::User => (&[][..], None),
            };
            memo.recorder.record_parsed(
                &mut memo.ledger,
                message,
                memo.transcript.as_deref(),
                (parsed, read_back),
            );
        }
        memo.upto = end;
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The estimate of a rendering's length is exact while nothing was
    /// recorded since it, the last rendering's after that, and a rendering
    /// made now when there was none.
    #[test]
    fn a_renderings_length_is_estimated_from_the_last_one() {
        let bash = |i: usize| {
            Message::assistant_blocks(vec![crate::Block::tool_use(
                format!("t{i}"),
                "bash",
                serde_json::json!({"command": format!("cargo test -p crate{i} --lib")}),
            )])
        };
        let mut messages = vec![Message::user("the task")];
        for i in 0..6 {
            messages.push(bash(i));
        }
        let place = (0..messages.len(), Some("/t.jsonl"), true);
        let exact = |messages: &[Message]| {
            let mut fresh = LedgerMemo::default();
            let text = fresh.rendered(
                messages,
                (0..messages.len(), Some("/t.jsonl"), true),
                4_000,
                None,
            );
            whittle_protocol::json_str_chars(&text)
        };
        let mut memo = LedgerMemo::default();
        // None yet: rendered now, exactly.
        let first = memo.rendered_json_chars_estimate(&messages, place.clone(), 4_000, None);
        assert_eq!(first, exact(&messages));
        // Nothing recorded since: the same rendering.
        assert_eq!(
            memo.rendered_json_chars_estimate(&messages, place, 4_000, None),
            first
        );
        // Two more commands: the last rendering's length, not the new one's.
        messages.push(bash(6));
        messages.push(bash(7));
        let grown = (0..messages.len(), Some("/t.jsonl"), true);
        assert!(exact(&messages) > first);
        assert_eq!(
            memo.rendered_json_chars_estimate(&messages, grown.clone(), 4_000, None),
            first
        );
        // Rendered again (as the work ahead does): exact once more.
        memo.rendered(&messages, grown.clone(), 4_000, None);
        assert_eq!(
            memo.rendered_json_chars_estimate(&messages, grown, 4_000, None),
            exact(&messages)
        );
    }

    /// What edits leave behind waits for the harness's work ahead, and is
    /// never more than one compaction's worth when none comes.
    #[test]
    fn what_an_edit_leaves_is_bounded_and_freed_ahead() {
        let messages: Vec<Message> = (0..200)
            .map(|i| Message::user(format!("message {i} about src/f{i}.rs")))
            .collect();
        let mut memo = LedgerMemo::default();
        let waiting = |memo: &LedgerMemo| memo.discarded.len() + memo.rolled_back.len();
        for edit in (0..200).rev().step_by(7) {
            for carry in [true, false] {
                memo.ledger(&messages, 0..messages.len(), Some("/t.jsonl"), carry);
            }
            memo.message_changed(edit);
            assert!(
                waiting(&memo) <= 2 * DISCARDED_MAX,
                "{} waiting after an edit at {edit}",
                waiting(&memo)
            );
        }
        assert!(
            waiting(&memo) > 0,
            "the edits left nothing to free: the test tests nothing"
        );
        memo.prepare_ahead(&messages, messages.len());
        assert_eq!(waiting(&memo), 0);
    }
}
