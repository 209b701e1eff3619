//! A conversation history whose size is always known without re-serializing it.

use crate::ledger::{Ledger, LedgerMemo};
use crate::per_message::PerMessage;
use crate::{Block, Message, ToolResult, ToolResultContent};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::ops::Range;
use whittle_store::{Store, WrittenLine};

/// The messages of one conversation, with their total size kept up to date.
///
/// Appending is the common case and keeps [`History::epoch`] unchanged; any
/// other edit bumps it, so a meter calibrated on an earlier state knows its
/// calibration no longer applies.
#[derive(Clone, Debug, Default)]
pub struct History {
    messages: Vec<Message>,
    /// Sum of the messages' cached sizes.
    message_chars: usize,
    epoch: u64,
    /// Messages `..unchanged` are byte-identical since the last [`History::mark`].
    unchanged: usize,
    /// Messages `..saved` are unedited since the last [`History::take_edited_span`].
    saved: usize,
    /// The last `kept_tail` messages are, in order, the last messages of the
    /// history as saved then (edits before them only shifted them).
    kept_tail: usize,
    /// Messages `..archived` are in the store's transcript already.
    archived: usize,
    /// The ledgers of the messages, kept up to date (see `LedgerMemo`).
    ledger: LedgerMemo,
    /// The transcript lines of messages not archived yet, written ahead of
    /// need by [`History::prepare_ahead`].
    lines: PerMessage<WrittenLine>,
    /// Messages before this one had the work of [`History::prepare_ahead`]
    /// done (their line written, unless archived) since they last changed.
    ahead_upto: usize,
    /// The messages the last splice removed, freed by
    /// [`History::prepare_ahead`] rather than on the call's path, or by
    /// the next splice.
    removed: Vec<Message>,
    /// Messages before `upto` hold only tool results that
    /// [`History::settle_results`] found settled with `floor`: see there.
    settled: Settled,
}

/// How far a history's tool results are settled (see
/// [`History::settle_results`]).
#[derive(Clone, Copy, Debug, Default)]
struct Settled {
    upto: usize,
    floor: usize,
}

/// Whether a tool result is settled for good with a given size floor: one
/// that no step looking for results to shrink will ever take, until it is
/// edited.
pub(crate) type SettledBy = fn(&ToolResult, usize) -> bool;

/// The part of a history that changed since it was last saved: messages
/// `from..len - keep_last`; see [`History::take_edited_span`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EditedSpan {
    /// Leading messages left as they were.
    pub from: usize,
    /// Trailing messages left as they were (perhaps shifted).
    pub keep_last: usize,
}

/// Where a tool_result block sits in a history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockRef {
    /// Index of the message.
    pub message: usize,
    /// Index of the block within the message.
    pub block: usize,
}

impl History {
    /// A history holding `messages`.
    pub fn new(messages: Vec<Message>) -> Self {
        let message_chars = messages.iter().map(Message::chars).sum();
        History {
            unchanged: messages.len(),
            saved: messages.len(),
            kept_tail: messages.len(),
            messages,
            message_chars,
            epoch: 0,
            archived: 0,
            ledger: LedgerMemo::default(),
            lines: PerMessage::default(),
            ahead_upto: 0,
            removed: Vec::new(),
            settled: Settled::default(),
        }
    }

    /// How many leading messages are in the transcript already: an archive
    /// step writes only the messages after them, so each message is written
    /// once however often the history is compacted.
    pub fn archived(&self) -> usize {
        self.archived.min(self.messages.len())
    }

    /// Records that the first `count` messages are in the transcript (a
    /// resumed session restores what its log says).
    pub fn set_archived(&mut self, count: usize) {
        self.archived = count.min(self.messages.len());
    }

    /// The messages, oldest first.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// Number of messages.
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    /// Whether there are no messages.
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// The newest message.
    pub fn last(&self) -> Option<&Message> {
        self.messages.last()
    }

    /// Characters of the history serialized as a JSON array, in O(1).
    pub fn chars(&self) -> usize {
        2 + self.message_chars + self.messages.len().saturating_sub(1)
    }

    /// Characters of messages `from..` alone (their JSON plus separators).
    pub fn chars_from(&self, from: usize) -> usize {
        let tail = self.messages.get(from..).unwrap_or(&[]);
        tail.iter().map(|m| m.chars() + 1).sum()
    }

    /// Counts edits other than appends; see the type's documentation.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// How many leading messages are unchanged since the last [`History::mark`]
    /// (appends do not count as changes). A request sent then and one sent
    /// now share at least this prefix, which the provider may have cached.
    pub fn unchanged_prefix(&self) -> usize {
        self.unchanged.min(self.messages.len())
    }

    /// Marks the current messages as sent; see [`History::unchanged_prefix`].
    pub fn mark(&mut self) {
        self.unchanged = self.messages.len();
    }

    /// Appends a message.
    pub fn push(&mut self, message: Message) {
        // An append is saved by whoever appends (a log writes each message).
        if self.saved == self.messages.len() {
            self.saved += 1;
        }
        self.kept_tail += 1;
        self.message_chars += message.chars();
        self.messages.push(message);
    }

    /// What changed since the previous call, then starts over: a log that
    /// saved the history then (and each message appended since) needs only
    /// `messages()[span.from..len - span.keep_last]` to save it again, the
    /// messages before and after being as they were. Archiving the middle
    /// of a long history costs its marker, not the history's tail again.
    pub fn take_edited_span(&mut self) -> EditedSpan {
        let len = self.messages.len();
        let from = self.saved.min(len);
        let span = EditedSpan {
            from,
            keep_last: self.kept_tail.min(len - from),
        };
        self.saved = len;
        self.kept_tail = len;
        span
    }

    /// Removes and returns the newest message.
    pub fn pop(&mut self) -> Option<Message> {
        let m = self.messages.pop()?;
        self.message_chars -= m.chars();
        self.epoch += 1;
        self.unchanged = self.unchanged.min(self.messages.len());
        self.saved = self.saved.min(self.messages.len());
        self.kept_tail = 0;
        self.archived = self.archived.min(self.messages.len());
        self.ledger.truncated(self.messages.len());
        self.lines.truncated(self.messages.len());
        self.ahead_upto = self.ahead_upto.min(self.messages.len());
        self.settled.upto = self.settled.upto.min(self.messages.len());
        Some(m)
    }

    /// Replaces one block, returning the old one; `None` if there is no such block.
    pub fn replace_block(&mut self, at: BlockRef, block: Block) -> Option<Block> {
        let message = self.messages.get_mut(at.message)?;
        let before = message.chars();
        let old = message.replace_block(at.block, block)?;
        self.message_chars = self.message_chars + message.chars() - before;
        self.epoch += 1;
        self.unchanged = self.unchanged.min(at.message);
        self.saved = self.saved.min(at.message);
        self.kept_tail = self.kept_tail.min(self.messages.len() - 1 - at.message);
        self.ledger.message_changed(at.message);
        self.lines.changed(at.message);
        self.ahead_upto = self.ahead_upto.min(at.message);
        self.settled.upto = self.settled.upto.min(at.message);
        Some(old)
    }

    /// Replaces the content of the tool_result at `at`; `None` if it is not one.
    pub fn set_tool_result_content(&mut self, at: BlockRef, content: String) -> Option<()> {
        let Block::ToolResult(result) = self.messages.get(at.message)?.blocks().get(at.block)?
        else {
            return None;
        };
        let result = result.with_content(ToolResultContent::Text(content));
        self.replace_block(at, Block::ToolResult(result))
            .map(|_| ())
    }

    /// Replaces the messages in `range` with `replacement`.
    ///
    /// # Panics
    /// Never: an out-of-bounds range is clamped to the history.
    pub fn splice(&mut self, range: Range<usize>, replacement: Vec<Message>) {
        let old_len = self.messages.len();
        let end = range.end.min(old_len);
        let start = range.start.min(end);
        let added: usize = replacement.iter().map(Message::chars).sum();
        let added_messages = replacement.len();
        // The messages removed before go now: never more than one splice's
        // waiting to be freed.
        self.removed = self.messages.splice(start..end, replacement).collect();
        let removed: usize = self.removed.iter().map(Message::chars).sum();
        self.message_chars = self.message_chars + added - removed;
        self.epoch += 1;
        self.unchanged = self.unchanged.min(start);
        self.saved = self.saved.min(start);
        self.kept_tail = self.kept_tail.min(old_len - end);
        // The replacement is new: only what precedes it stays archived.
        self.archived = self.archived.min(start);
        self.ledger.messages_spliced(start..end, added_messages);
        self.lines.spliced(start..end, added_messages);
        self.ahead_upto = self.ahead_upto.min(start);
        self.settled.upto = self.settled.upto.min(start);
    }

    /// Moves the settled mark past every message after it whose tool
    /// results are all settled by `settled` with `floor`: the steps that look for results to shrink (micro_compact, each of
    /// its calls, and the cache anchor) then start their walk there, so
    /// that a long session's placeholders are passed over once, not on
    /// every call. Appends keep the mark; an edit lowers it to the edited
    /// message. `settled` must be the same function on every call.
    pub(crate) fn settle_results(&mut self, settled: SettledBy, floor: usize) {
        let from = self.settled_upto(floor);
        let more = self.messages[from..]
            .iter()
            .take_while(|m| m.tool_results().all(|r| settled(r, floor)))
            .count();
        self.settled = Settled {
            upto: from + more,
            floor,
        };
    }

    /// Messages before this hold only tool results settled with `floor`
    /// (0 when the mark was moved with another floor).
    pub(crate) fn settled_upto(&self, floor: usize) -> usize {
        if self.settled.floor == floor {
            self.settled.upto.min(self.messages.len())
        } else {
            0
        }
    }

    /// Does now what the next compaction would do with single messages:
    /// parses the tool calls, reads back the ledger of a marker the last
    /// compaction wrote, saves each tool result above `save_above_chars`
    /// in `store` (a compaction that replaces it by a placeholder then
    /// finds it saved: saving tens of files in that call was its longest
    /// wait; [`Store::save_ahead`] removes, when the store goes, a file
    /// nothing came to name), and writes the transcript line of every message not archived
    /// yet as `store` would. A harness calls it while the model answers
    /// (work then costs no one any waiting); what the pipeline computes is
    /// the same with or without it, only its time on the call's path
    /// changes. Each message's work is done once in its life, kept through
    /// edits of the others, and dropped with the message. What the last
    /// edit removed (messages, ledgers) is freed here too.
    ///
    /// The lines are kept until their messages are archived, so a history
    /// that is never compacted holds its messages' JSON beside them; and
    /// the first call after a resume does every message's work at once. A
    /// result that cannot be saved now is left as it is: the compaction
    /// that needs it saved tries again, and says so if it fails.
    pub fn prepare_ahead(&mut self, store: &Store, save_above_chars: Option<usize>) {
        self.removed = Vec::new();
        self.ledger.prepare_ahead(&self.messages, self.ahead_upto);
        let from = self.ahead_upto.max(self.archived());
        for (k, message) in self.messages.iter().enumerate().skip(from) {
            if self.lines.has(k) {
                continue;
            }
            if let Some(floor) = save_above_chars {
                for result in message.tool_results() {
                    let unsaved = store.saved_output(&result.tool_use_id).is_none()
                        && store.saved_path(result).is_none();
                    if unsaved && result.content_chars() > floor {
                        // Best effort: see above.
                        let _ = store.save_ahead(&result.tool_use_id, &result.full_text());
                    }
                }
            }
            self.lines.set(k, store.transcript_line(message));
        }
        self.ahead_upto = self.messages.len();
    }

    /// Checkpoints of the ledgers as they are now, where one is due: work
    /// ahead, after they were brought up to date (see `LedgerMemo`).
    pub(crate) fn checkpoint_ledgers_ahead(&mut self) {
        self.ledger.checkpoint_ahead();
    }

    /// The transcript lines written ahead for `messages()[range]`, taken
    /// (an archived message needs its line no more): `None` for a message
    /// without one.
    pub(crate) fn take_written_lines(&mut self, range: Range<usize>) -> Vec<Option<WrittenLine>> {
        range.map(|k| self.lines.take(k)).collect()
    }

    /// The ledger of `messages()[range]` with `transcript` as where they
    /// are archived: what [`Ledger::of`] gives (or, without
    /// `carry_markers`, the facts outside the markers' ledgers), recording
    /// only the messages appended since it was last asked for.
    pub(crate) fn ledger_of(
        &mut self,
        range: Range<usize>,
        transcript: Option<&str>,
        carry_markers: bool,
    ) -> &Ledger {
        self.ledger
            .ledger(&self.messages, range, transcript, carry_markers)
    }

    /// [`History::ledger_of`] rendered at `budget` for a marker that names
    /// `named_by_marker` ([`Ledger::render`]), rendered again only when a
    /// message was recorded since the last time it was asked for.
    pub(crate) fn rendered_ledger(
        &mut self,
        (range, transcript, carry_markers): (Range<usize>, Option<&str>, bool),
        budget: usize,
        named_by_marker: Option<&str>,
    ) -> String {
        self.ledger.rendered(
            &self.messages,
            (range, transcript, carry_markers),
            budget,
            named_by_marker,
        )
    }

    /// [`LedgerMemo::rendered_json_chars_estimate`] of this history.
    pub(crate) fn rendered_ledger_json_chars_estimate(
        &mut self,
        (range, transcript, carry_markers): (Range<usize>, Option<&str>, bool),
        budget: usize,
        named_by_marker: Option<&str>,
    ) -> usize {
        self.ledger.rendered_json_chars_estimate(
            &self.messages,
            (range, transcript, carry_markers),
            budget,
            named_by_marker,
        )
    }

    /// Replaces every message.
    pub fn replace_all(&mut self, messages: Vec<Message>) {
        let len = self.messages.len();
        self.splice(0..len, messages);
    }

    /// Where every tool_result block is, oldest first.
    pub fn tool_result_refs(&self) -> Vec<BlockRef> {
        self.tool_result_refs_from(0)
    }

    /// Where every tool_result block of `messages()[from..]` is, oldest first.
    pub(crate) fn tool_result_refs_from(&self, from: usize) -> Vec<BlockRef> {
        let mut refs = Vec::new();
        for (mi, m) in self.messages.iter().enumerate().skip(from) {
            for (bi, b) in m.blocks().iter().enumerate() {
                if matches!(b, Block::ToolResult(_)) {
                    refs.push(BlockRef {
                        message: mi,
                        block: bi,
                    });
                }
            }
        }
        refs
    }

    /// The block at `at`.
    pub fn block(&self, at: BlockRef) -> Option<&Block> {
        self.messages.get(at.message)?.blocks().get(at.block)
    }

    /// Index of the newest assistant message.
    pub fn last_assistant_index(&self) -> Option<usize> {
        self.messages
            .iter()
            .rposition(|m| m.role() == crate::Role::Assistant)
    }

    /// Consumes the history, returning its messages.
    pub fn into_messages(self) -> Vec<Message> {
        self.messages
    }
}

/// Two histories are equal when they hold the same messages: the marks
/// (what was sent, logged, archived) are bookkeeping about a history, not
/// part of it, so "the step left the history as it was" compares messages.
impl PartialEq for History {
    fn eq(&self, other: &Self) -> bool {
        self.messages == other.messages
    }
}

impl From<Vec<Message>> for History {
    fn from(messages: Vec<Message>) -> Self {
        History::new(messages)
    }
}

impl Serialize for History {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.messages.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for History {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Vec::<Message>::deserialize(deserializer).map(History::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Op {
        Push(String),
        Pop,
        Placeholder(u8),
        Splice(u8, u8, u8),
        Ahead,
        Save(u8),
        Archive(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => "[a-z\"\n]{0,12}".prop_map(Op::Push),
            1 => Just(Op::Pop),
            1 => any::<u8>().prop_map(Op::Placeholder),
            1 => (any::<u8>(), any::<u8>(), 0u8..3).prop_map(|(a, b, n)| Op::Splice(a, b, n)),
            2 => Just(Op::Ahead),
            1 => any::<u8>().prop_map(Op::Save),
            1 => any::<u8>().prop_map(Op::Archive),
        ]
    }

    proptest! {
        /// Through any edits and saves, what is archived with the lines
        /// written ahead is what is archived without them, byte for byte:
        /// each batch is archived twice, with and without, and the two
        /// appended stretches of the transcript compared.
        #[test]
        fn lines_written_ahead_archive_as_written_now(ops in prop::collection::vec(op(), 1..60)) {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::with_transcript_name(dir.path(), "t");
            let mut h = History::default();
            let mut n = 0;
            for op in ops {
                let len = h.len();
                let at = |x: u8| x as usize * len / 255;
                match op {
                    Op::Push(text) => {
                        n += 1;
                        h.push(if n % 2 == 0 {
                            Message::user_blocks(vec![Block::tool_result(format!("t{}", n % 6), text, false)])
                        } else {
                            Message::assistant(text)
                        });
                    }
                    Op::Pop => {
                        h.pop();
                    }
                    Op::Placeholder(k) => {
                        let refs = h.tool_result_refs();
                        if !refs.is_empty() {
                            h.set_tool_result_content(refs[k as usize % refs.len()], "[saved]".into());
                        }
                    }
                    Op::Splice(a, b, k) => {
                        let (a, b) = (at(a.min(b)), at(a.max(b)));
                        h.splice(a..b, (0..k).map(|i| Message::user(format!("[marker {i}]"))).collect());
                    }
                    Op::Ahead => h.prepare_ahead(&store, Some(8)),
                    // A step saves a result after its line was written
                    // (ids repeat: a save may be under another's id).
                    Op::Save(k) => {
                        let results: Vec<_> = h.messages().iter().flat_map(|m| m.tool_results()).cloned().collect();
                        if !results.is_empty() {
                            let r = &results[k as usize % results.len()];
                            store.persist_tool_result(&r.tool_use_id, &r.full_text()).unwrap();
                        }
                    }
                    Op::Archive(upto) => {
                        let (from, end) = (h.archived(), at(upto).max(h.archived()));
                        let written = h.take_written_lines(from..end);
                        let messages = &h.messages()[from..end];
                        let ahead = store.archive_written(messages, &written).unwrap();
                        let now = store.archive(messages).unwrap();
                        let text = std::fs::read_to_string(&now.path).unwrap_or_default();
                        let lines: Vec<&str> = text.lines().collect();
                        let stretch = |first: u64, last: u64| lines[(first - 1) as usize..last as usize].to_vec();
                        prop_assert_eq!(
                            stretch(ahead.first_line, ahead.last_line),
                            stretch(now.first_line, now.last_line)
                        );
                        h.set_archived(end);
                    }
                }
            }
        }
    }

    fn actual(h: &History) -> usize {
        serde_json::to_string(h).unwrap().chars().count()
    }

    #[test]
    fn edits_since_the_last_save_are_found_and_appends_are_not() {
        let span = |from, keep_last| EditedSpan { from, keep_last };
        let mut h = History::new(vec![Message::user("a"), Message::assistant("b")]);
        assert_eq!(h.take_edited_span(), span(2, 0), "nothing edited");
        h.push(Message::user("c"));
        h.push(Message::assistant("d"));
        assert_eq!(
            h.take_edited_span(),
            span(4, 0),
            "appends are saved by their writer"
        );
        h.push(Message::user("e"));
        h.splice(3..4, vec![Message::assistant("D")]);
        h.push(Message::assistant("f"));
        assert_eq!(h.take_edited_span(), span(3, 2), "e and f are as logged");
        assert_eq!(h.take_edited_span(), span(6, 0));
        h.pop();
        h.pop();
        assert_eq!(h.take_edited_span(), span(4, 0));
        // A middle taken out: the head and the shifted tail are kept.
        let mut h = History::new((0..10).map(|i| Message::user(format!("m{i}"))).collect());
        h.splice(3..7, vec![Message::user("[marker]")]);
        assert_eq!(h.take_edited_span(), span(3, 3));
        let block = Message::user_blocks(vec![Block::tool_result("t", "x", false)]);
        let mut h = History::new(vec![
            Message::user("a"),
            block.clone(),
            block,
            Message::user("z"),
        ]);
        h.set_tool_result_content(
            BlockRef {
                message: 1,
                block: 0,
            },
            "y".into(),
        );
        assert_eq!(h.take_edited_span(), span(1, 2));
    }

    #[test]
    fn sizes_stay_exact_through_every_edit() {
        let mut h = History::default();
        assert_eq!(h.chars(), actual(&h));
        h.push(Message::user("hello"));
        h.push(Message::assistant_blocks(vec![Block::tool_use(
            "t1",
            "bash",
            serde_json::json!({"command": "ls"}),
        )]));
        h.push(Message::user_blocks(vec![Block::tool_result(
            "t1",
            "a\nb\n".repeat(100),
            false,
        )]));
        assert_eq!(h.chars(), actual(&h));
        let epoch = h.epoch();
        h.set_tool_result_content(
            BlockRef {
                message: 2,
                block: 0,
            },
            "[saved]".into(),
        )
        .unwrap();
        assert!(h.epoch() > epoch);
        assert_eq!(h.chars(), actual(&h));
        h.splice(1..3, vec![Message::assistant("done")]);
        assert_eq!(h.chars(), actual(&h));
        assert_eq!(
            h.chars_from(1),
            actual(&h) - actual(&History::new(vec![Message::user("hello")]))
        );
        h.mark();
        h.push(Message::user("more"));
        assert_eq!(h.unchanged_prefix(), 2);
        h.replace_block(
            BlockRef {
                message: 1,
                block: 0,
            },
            Block::text("x"),
        );
        assert_eq!(
            h.unchanged_prefix(),
            2,
            "not a block message: nothing changed"
        );
        h.splice(1..2, vec![Message::assistant("changed")]);
        assert_eq!(h.unchanged_prefix(), 1);
        h.splice(5..9, vec![]);
        h.pop();
        assert_eq!(h.chars(), actual(&h));
        assert!(
            h.set_tool_result_content(
                BlockRef {
                    message: 0,
                    block: 0
                },
                "x".into()
            )
            .is_none()
        );
    }
}
