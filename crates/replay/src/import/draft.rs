//! A conversation being imported, and the repairs that make it a valid request.
//!
//! Recorded sessions break the pairing rules in ordinary ways: a crash leaves a
//! tool_use unanswered, an interrupted turn leaves a result nobody asked for, a
//! log repeats an id. Replay must only send what [`validate`] accepts, so
//! [`Draft::finish`] applies the smallest fix for each fault, keeps every piece
//! of content (a block is converted, never dropped), and counts the fixes.

use super::Boundary;
use crate::recorded::RecordedCall;
use std::collections::HashSet;
use whittle_protocol::{Block, Content, Message, Role, ToolResult};

/// The error result given to a tool_use the recording never answered.
pub const INTERRUPTED: &str = "[interrupted: no result recorded]";

/// The user message put in front of a conversation that began with the model.
pub const MISSING_OPENING: &str = "[the recording begins with an assistant message]";

/// A compaction the recording agent performed, before it is given an index.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Mark {
    pub trigger: Option<String>,
    pub pre_tokens: Option<u64>,
}

/// One message under construction, with the compactions just before it.
#[derive(Debug)]
pub(crate) struct Entry {
    pub role: Role,
    pub content: Content,
    marks: Vec<Mark>,
    /// What the recording says about the call that answered with this message.
    pub call: Option<RecordedCall>,
    /// Whether the recording agent's harness wrote this user message, not
    /// the person (or this importer, repairing).
    injected: bool,
}

/// A conversation under construction.
#[derive(Debug, Default)]
pub(crate) struct Draft {
    entries: Vec<Entry>,
    /// Compactions not yet followed by a message.
    marks: Vec<Mark>,
    repairs: usize,
}

/// A finished conversation: valid messages, boundaries, and how many fixes it took.
#[derive(Debug)]
pub(crate) struct Finished {
    pub messages: Vec<Message>,
    pub boundaries: Vec<Boundary>,
    pub calls: Vec<RecordedCall>,
    pub repairs: usize,
    /// Indices of the messages the harness wrote; see [`Draft::push_injected`].
    pub injected: Vec<usize>,
}

impl Draft {
    /// Appends a message; compactions recorded since the last one attach to it.
    pub fn push(&mut self, role: Role, content: Content) -> usize {
        let marks = std::mem::take(&mut self.marks);
        self.entries.push(Entry {
            role,
            content,
            marks,
            call: None,
            injected: false,
        });
        self.entries.len() - 1
    }

    /// Appends a message the recording agent's harness wrote (a reminder,
    /// a format error, its own compaction summary): sent to the model, but
    /// not the person's words, which survival probes look for.
    pub fn push_injected(&mut self, role: Role, content: Content) -> usize {
        let index = self.push(role, content);
        if let Some(e) = self.entries.get_mut(index) {
            e.injected = true;
        }
        index
    }

    /// Records a compaction: the next message pushed is the first after it.
    pub fn mark(&mut self, mark: Mark) {
        self.marks.push(mark);
    }

    /// Counts a fix made while reading (e.g. a truncated final line dropped).
    pub fn count_repair(&mut self) {
        self.repairs += 1;
    }

    /// The entry at `index`, to extend a message that arrived in parts.
    pub fn entry_mut(&mut self, index: usize) -> Option<&mut Entry> {
        self.entries.get_mut(index)
    }

    /// Whether nothing has been pushed.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Repairs the draft into messages that pass [`validate`].
    pub fn finish(self) -> Finished {
        let Draft {
            mut entries,
            marks: mut tail,
            mut repairs,
        } = self;
        repairs += drop_empty(&mut entries, &mut tail);
        repairs += move_misplaced_blocks(&mut entries);
        if entries.first().is_some_and(|e| e.role == Role::Assistant) {
            entries.insert(0, entry(Role::User, Content::Text(MISSING_OPENING.into())));
            repairs += 1;
        }
        let (mut entries, pairing_repairs) = repair_pairing(entries);
        repairs += pairing_repairs;
        // Restructured turns can leave emptied messages; their removal is part
        // of the repair already counted.
        drop_empty(&mut entries, &mut tail);

        let mut messages = Vec::with_capacity(entries.len());
        let mut boundaries = Vec::new();
        let mut calls = Vec::new();
        let mut injected = Vec::new();
        for (index, e) in entries.into_iter().enumerate() {
            if e.injected {
                injected.push(index);
            }
            boundaries.extend(e.marks.into_iter().map(|m| boundary(index, m)));
            calls.extend(e.call.map(|call| RecordedCall {
                message: index,
                ..call
            }));
            messages.push(Message::new(e.role, e.content));
        }
        let end = messages.len();
        boundaries.extend(tail.into_iter().map(|m| boundary(end, m)));
        Finished {
            messages,
            boundaries,
            calls,
            repairs,
            injected,
        }
    }
}

/// A message the repairs make: never the person's.
fn entry(role: Role, content: Content) -> Entry {
    Entry {
        role,
        content,
        marks: Vec::new(),
        call: None,
        injected: true,
    }
}

fn boundary(index: usize, mark: Mark) -> Boundary {
    Boundary {
        index,
        trigger: mark.trigger,
        pre_tokens: mark.pre_tokens,
    }
}

fn is_empty(content: &Content) -> bool {
    match content {
        Content::Text(s) => s.is_empty(),
        Content::Blocks(b) => b.is_empty(),
    }
}

/// Removes messages with no content (the API rejects them); compactions
/// attached to one move to the next message.
fn drop_empty(entries: &mut Vec<Entry>, tail: &mut Vec<Mark>) -> usize {
    let before = entries.len();
    let mut carried: Vec<Mark> = Vec::new();
    let mut kept = Vec::with_capacity(entries.len());
    for mut e in entries.drain(..) {
        if is_empty(&e.content) {
            carried.append(&mut e.marks);
        } else {
            if !carried.is_empty() {
                carried.append(&mut e.marks);
                e.marks = std::mem::take(&mut carried);
            }
            kept.push(e);
        }
    }
    carried.append(tail);
    *tail = carried;
    *entries = kept;
    before - entries.len()
}

/// A tool_result the pairing rules cannot place, as text that keeps its content.
fn orphan_text(result: &ToolResult) -> Block {
    let error = if result.is_error == Some(true) {
        ", is_error"
    } else {
        ""
    };
    Block::text(format!(
        "[tool_result for {}{error}, which answers no tool_use before it]\n{}",
        result.tool_use_id,
        result.full_text()
    ))
}

/// tool_results belong to users and tool_uses to the model; a block on the
/// wrong side becomes text holding the same content.
fn move_misplaced_blocks(entries: &mut [Entry]) -> usize {
    let mut repairs = 0;
    for e in entries {
        let Content::Blocks(blocks) = &mut e.content else {
            continue;
        };
        for block in blocks.iter_mut() {
            let replacement = match (e.role, &*block) {
                (Role::Assistant, Block::ToolResult(r)) => orphan_text(r),
                (Role::User, Block::ToolUse(u)) => Block::text(format!(
                    "[tool_use in a user message]\n{}",
                    serde_json::to_string(u).unwrap_or_default()
                )),
                _ => continue,
            };
            *block = replacement;
            repairs += 1;
        }
    }
    repairs
}

/// A tool_use of the latest assistant turn, waiting for its result.
struct Pending {
    /// The id as recorded, which results name.
    recorded: String,
    /// The id after de-duplication.
    actual: String,
    answered: bool,
}

/// Makes every tool_use answered in the next user turn, every tool_result
/// answer one, and every id unique. Works turn by turn (runs of one role).
fn repair_pairing(entries: Vec<Entry>) -> (Vec<Entry>, usize) {
    let recorded_ids: HashSet<String> = entries
        .iter()
        .flat_map(|e| match &e.content {
            Content::Blocks(b) => b.as_slice(),
            Content::Text(_) => &[],
        })
        .filter_map(|b| b.as_tool_use().map(|u| u.id.clone()))
        .collect();
    let mut seen: HashSet<String> = HashSet::new();
    let mut pending: Vec<Pending> = Vec::new();
    let mut repairs = 0;
    let mut out = Vec::with_capacity(entries.len());
    let mut rest = entries.into_iter().peekable();
    while let Some(first) = rest.next() {
        let role = first.role;
        let mut turn = vec![first];
        while let Some(next) = rest.next_if(|e| e.role == role) {
            turn.push(next);
        }
        match role {
            Role::Assistant => {
                for e in &mut turn {
                    repairs += register_tool_uses(e, &recorded_ids, &mut seen, &mut pending);
                }
                out.append(&mut turn);
                if rest.peek().is_none() && !pending.is_empty() {
                    let results = interrupted_results(&pending);
                    repairs += results.len();
                    out.push(entry(Role::User, Content::Blocks(results)));
                }
            }
            Role::User => {
                repairs += repair_user_turn(&mut turn, &mut pending);
                out.append(&mut turn);
            }
        }
        if role == Role::User {
            pending.clear();
        }
    }
    (out, repairs)
}

/// Records the tool_uses of one assistant message, renaming repeated ids.
fn register_tool_uses(
    e: &mut Entry,
    recorded_ids: &HashSet<String>,
    seen: &mut HashSet<String>,
    pending: &mut Vec<Pending>,
) -> usize {
    let Content::Blocks(blocks) = &mut e.content else {
        return 0;
    };
    let mut repairs = 0;
    for block in blocks {
        let Block::ToolUse(tool_use) = block else {
            continue;
        };
        let recorded = tool_use.id.clone();
        if !seen.insert(recorded.clone()) {
            let unique = (1..)
                .map(|n| format!("{recorded}-dup{n}"))
                .find(|c| !seen.contains(c) && !recorded_ids.contains(c))
                .unwrap_or_default();
            seen.insert(unique.clone());
            tool_use.id = unique;
            repairs += 1;
        }
        pending.push(Pending {
            recorded,
            actual: tool_use.id.clone(),
            answered: false,
        });
    }
    repairs
}

fn interrupted_results(pending: &[Pending]) -> Vec<Block> {
    pending
        .iter()
        .filter(|p| !p.answered)
        .map(|p| Block::tool_result(p.actual.clone(), INTERRUPTED, true))
        .collect()
}

/// Pairs one user turn with the tool_uses before it: answers are matched (and
/// follow renamed ids), unmatched results become text, results that come after
/// other content are moved to the front of the turn, and tool_uses left
/// unanswered get an error result.
fn repair_user_turn(turn: &mut Vec<Entry>, pending: &mut [Pending]) -> usize {
    let mut repairs = 0;
    for e in turn.iter_mut() {
        let Content::Blocks(blocks) = &mut e.content else {
            continue;
        };
        for block in blocks.iter_mut() {
            let Block::ToolResult(result) = block else {
                continue;
            };
            match pending
                .iter_mut()
                .find(|p| !p.answered && p.recorded == result.tool_use_id)
            {
                Some(p) => {
                    p.answered = true;
                    result.tool_use_id.clone_from(&p.actual);
                }
                None => {
                    *block = orphan_text(result);
                    repairs += 1;
                }
            }
        }
    }

    let mut other_seen = false;
    let mut late = false;
    for e in turn.iter() {
        match &e.content {
            Content::Text(s) => other_seen |= !s.is_empty(),
            Content::Blocks(blocks) => {
                for b in blocks {
                    match b {
                        Block::ToolResult(_) => late |= other_seen,
                        _ => other_seen = true,
                    }
                }
            }
        }
    }

    let missing = interrupted_results(pending);
    repairs += missing.len();
    if late {
        repairs += 1;
        let mut results = Vec::new();
        for e in turn.iter_mut() {
            if let Content::Blocks(blocks) = &mut e.content {
                let (answers, others): (Vec<Block>, Vec<Block>) = std::mem::take(blocks)
                    .into_iter()
                    .partition(|b| matches!(b, Block::ToolResult(_)));
                results.extend(answers);
                *blocks = others;
            }
        }
        results.extend(missing);
        turn.insert(0, entry(Role::User, Content::Blocks(results)));
    } else if !missing.is_empty() {
        match turn.first_mut() {
            Some(Entry {
                content: Content::Blocks(blocks),
                marks,
                ..
            }) if marks.is_empty() => {
                let at = blocks
                    .iter()
                    .take_while(|b| matches!(b, Block::ToolResult(_)))
                    .count();
                blocks.splice(at..at, missing);
            }
            _ => turn.insert(0, entry(Role::User, Content::Blocks(missing))),
        }
    }
    repairs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use whittle_protocol::validate;

    fn finish(messages: Vec<(Role, Content)>) -> Finished {
        let mut d = Draft::default();
        for (role, content) in messages {
            d.push(role, content);
        }
        d.finish()
    }

    fn blocks(b: Vec<Block>) -> Content {
        Content::Blocks(b)
    }

    #[test]
    fn valid_input_is_untouched() {
        let input = vec![
            (Role::User, Content::Text("go".into())),
            (
                Role::Assistant,
                blocks(vec![Block::tool_use("a", "bash", json!({}))]),
            ),
            (
                Role::User,
                blocks(vec![Block::tool_result("a", "out", false)]),
            ),
            (Role::User, Content::Text("more".into())),
        ];
        let expected: Vec<Message> = input
            .iter()
            .map(|(r, c)| Message::new(*r, c.clone()))
            .collect();
        let f = finish(input);
        assert_eq!(f.repairs, 0);
        assert_eq!(f.messages, expected);
    }

    #[test]
    fn every_fault_is_fixed_counted_and_keeps_content() {
        let f = finish(vec![
            (
                Role::Assistant,
                blocks(vec![
                    Block::tool_use("a", "bash", json!({})),
                    Block::tool_use("a", "bash", json!({"n": 2})),
                ]),
            ),
            (Role::User, Content::Text(String::new())),
            (
                Role::User,
                blocks(vec![
                    Block::text("typed first"),
                    Block::tool_result("a", "first", false),
                    Block::tool_result("zzz", "stray", true),
                ]),
            ),
            (
                Role::Assistant,
                blocks(vec![Block::tool_use("b", "bash", json!({}))]),
            ),
        ]);
        // opening user message, empty message, duplicate id, late result moved,
        // orphan to text, "a-dup1" unanswered, "b" unanswered at the end.
        assert_eq!(f.repairs, 7, "{:#?}", f.messages);
        assert_eq!(validate(&f.messages), Ok(()));
        let all = serde_json::to_string(&f.messages).unwrap();
        for needle in [
            "typed first",
            "first",
            "stray",
            "zzz",
            "a-dup1",
            INTERRUPTED,
        ] {
            assert!(all.contains(needle), "{needle} lost: {all}");
        }
        assert_eq!(f.messages[0].text(), MISSING_OPENING);
    }

    #[test]
    fn boundaries_follow_their_message_through_repairs() {
        let mut d = Draft::default();
        d.push(Role::User, Content::Text("task".into()));
        d.push(
            Role::Assistant,
            blocks(vec![Block::tool_use("a", "bash", json!({}))]),
        );
        d.mark(Mark {
            trigger: Some("auto".into()),
            pre_tokens: Some(9),
        });
        d.push(Role::User, Content::Text(String::new()));
        d.push(Role::User, Content::Text("summary".into()));
        d.mark(Mark::default());
        let f = d.finish();
        assert_eq!(validate(&f.messages), Ok(()));
        // task, call, inserted error result, summary.
        assert_eq!(f.messages.len(), 4);
        assert_eq!(f.boundaries.len(), 2);
        assert_eq!(f.boundaries[0].index, 3);
        assert_eq!(f.messages[3].text(), "summary");
        assert_eq!(f.boundaries[0].pre_tokens, Some(9));
        assert_eq!(f.boundaries[1].index, 4);
    }
}
