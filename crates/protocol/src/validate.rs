//! The one place that decides whether a history is a valid Messages API request.
//!
//! The API merges consecutive messages of the same role into one turn; the
//! rules below are checked on those merged turns, and errors name the index of
//! the original message at fault.

use crate::message::{Block, Content, Message, Role};
use std::collections::HashSet;

/// Why a history would be rejected by the Messages API.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ValidationError {
    /// A request needs at least one message.
    #[error("the history has no messages")]
    Empty,
    /// The first turn must be the user's.
    #[error("message {index}: the first message must have role user")]
    FirstNotUser {
        /// Index of the offending message.
        index: usize,
    },
    /// Only the final assistant message may be empty.
    #[error("message {index}: content is empty")]
    EmptyContent {
        /// Index of the offending message.
        index: usize,
    },
    /// Two tool_use blocks share an id.
    #[error("message {index}: tool_use id {id:?} is used more than once")]
    DuplicateToolUseId {
        /// Index of the offending message.
        index: usize,
        /// The repeated id.
        id: String,
    },
    /// A tool_result does not answer a tool_use of the immediately preceding assistant turn.
    #[error(
        "message {index}: tool_result {id:?} answers no tool_use of the preceding assistant message"
    )]
    OrphanToolResult {
        /// Index of the offending message.
        index: usize,
        /// The tool_use_id it names.
        id: String,
    },
    /// Two tool_results answer the same tool_use.
    #[error("message {index}: tool_use {id:?} is answered more than once")]
    DuplicateToolResult {
        /// Index of the offending message.
        index: usize,
        /// The tool_use_id answered twice.
        id: String,
    },
    /// A tool_use has no tool_result in the next user turn.
    #[error("message {index}: tool_use {id:?} is not answered in the next user message")]
    UnansweredToolUse {
        /// Index of the assistant message holding the tool_use.
        index: usize,
        /// The unanswered id.
        id: String,
    },
    /// In a turn that answers tool calls, tool_result blocks must come before any other content.
    #[error("message {index}: tool_result {id:?} comes after other content")]
    ToolResultNotFirst {
        /// Index of the offending message.
        index: usize,
        /// The tool_use_id of the late result.
        id: String,
    },
}

/// Checks every rule; returns the first violation, in message order.
pub fn validate(messages: &[Message]) -> Result<(), ValidationError> {
    if messages.is_empty() {
        return Err(ValidationError::Empty);
    }
    if messages[0].role() != Role::User {
        return Err(ValidationError::FirstNotUser { index: 0 });
    }
    let last = messages.len() - 1;
    for (index, m) in messages.iter().enumerate() {
        let empty = match m.content() {
            Content::Text(s) => s.is_empty(),
            Content::Blocks(b) => b.is_empty(),
        };
        if empty && !(index == last && m.role() == Role::Assistant) {
            return Err(ValidationError::EmptyContent { index });
        }
    }

    let mut seen_ids = HashSet::new();
    // tool_use ids of the previous assistant turn still waiting for an answer,
    // with the index of the message that holds each one.
    let mut pending: Vec<(String, usize)> = Vec::new();
    let mut answered: HashSet<String> = HashSet::new();
    let mut start = 0;
    while start < messages.len() {
        let role = messages[start].role();
        let end = messages[start..]
            .iter()
            .position(|m| m.role() != role)
            .map_or(messages.len(), |n| start + n);
        match role {
            Role::Assistant => {
                if let Some((id, index)) = pending.first() {
                    return Err(ValidationError::UnansweredToolUse {
                        index: *index,
                        id: id.clone(),
                    });
                }
                for (index, m) in messages[start..end].iter().enumerate() {
                    for t in m.tool_uses() {
                        if !seen_ids.insert(t.id.clone()) {
                            return Err(ValidationError::DuplicateToolUseId {
                                index: start + index,
                                id: t.id.clone(),
                            });
                        }
                        pending.push((t.id.clone(), start + index));
                    }
                }
            }
            Role::User => {
                answered.clear();
                let mut other_seen = false;
                for (offset, m) in messages[start..end].iter().enumerate() {
                    let index = start + offset;
                    let blocks: &[Block] = match m.content() {
                        Content::Text(s) => {
                            other_seen |= !s.is_empty();
                            &[]
                        }
                        Content::Blocks(b) => b,
                    };
                    for b in blocks {
                        let Block::ToolResult(r) = b else {
                            other_seen = true;
                            continue;
                        };
                        let id = &r.tool_use_id;
                        if answered.contains(id) {
                            return Err(ValidationError::DuplicateToolResult {
                                index,
                                id: id.clone(),
                            });
                        }
                        if !pending.iter().any(|(p, _)| p == id) {
                            return Err(ValidationError::OrphanToolResult {
                                index,
                                id: id.clone(),
                            });
                        }
                        if other_seen {
                            return Err(ValidationError::ToolResultNotFirst {
                                index,
                                id: id.clone(),
                            });
                        }
                        answered.insert(id.clone());
                    }
                }
                if let Some((id, index)) = pending.iter().find(|(p, _)| !answered.contains(p)) {
                    return Err(ValidationError::UnansweredToolUse {
                        index: *index,
                        id: id.clone(),
                    });
                }
                pending.clear();
            }
        }
        start = end;
    }
    if let Some((id, index)) = pending.first() {
        return Err(ValidationError::UnansweredToolUse {
            index: *index,
            id: id.clone(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(id: &str) -> Message {
        Message::assistant_blocks(vec![Block::tool_use(id, "bash", json!({}))])
    }
    fn result(id: &str) -> Message {
        Message::user_blocks(vec![Block::tool_result(id, "out", false)])
    }

    #[test]
    fn accepts_pairs_parallel_calls_and_merged_turns() {
        let h = vec![
            Message::user("go"),
            Message::user("and also this"),
            Message::assistant_blocks(vec![
                Block::text("two at once"),
                Block::tool_use("a", "x", json!({})),
                Block::tool_use("b", "x", json!({})),
            ]),
            Message::user_blocks(vec![
                Block::tool_result("b", "", false),
                Block::tool_result("a", "", true),
                Block::text("note"),
            ]),
            call("c"),
            result("c"),
            Message::assistant(""),
        ];
        assert_eq!(validate(&h), Ok(()));
    }

    #[test]
    fn names_the_offending_index() {
        use ValidationError::*;
        assert_eq!(validate(&[]), Err(Empty));
        assert_eq!(validate(&[call("a")]), Err(FirstNotUser { index: 0 }));
        assert_eq!(
            validate(&[Message::user("x"), call("a")]),
            Err(UnansweredToolUse {
                index: 1,
                id: "a".into()
            })
        );
        assert_eq!(
            validate(&[Message::user("x"), call("a"), Message::user("no answer")]),
            Err(UnansweredToolUse {
                index: 1,
                id: "a".into()
            })
        );
        assert_eq!(
            validate(&[Message::user("x"), result("a")]),
            Err(OrphanToolResult {
                index: 1,
                id: "a".into()
            })
        );
        assert_eq!(
            validate(&[
                Message::user("x"),
                call("a"),
                result("a"),
                call("a"),
                result("a")
            ]),
            Err(DuplicateToolUseId {
                index: 3,
                id: "a".into()
            })
        );
        assert_eq!(
            validate(&[Message::user("x"), call("a"), result("a"), result("a")]),
            Err(DuplicateToolResult {
                index: 3,
                id: "a".into()
            })
        );
        assert_eq!(
            validate(&[
                Message::user("x"),
                call("a"),
                Message::user("hi"),
                result("a")
            ]),
            Err(ToolResultNotFirst {
                index: 3,
                id: "a".into()
            })
        );
        assert_eq!(
            validate(&[Message::user(""), Message::assistant("x")]),
            Err(EmptyContent { index: 0 })
        );
        // A result answering a call two turns back is an orphan.
        assert_eq!(
            validate(&[
                Message::user("x"),
                call("a"),
                result("a"),
                Message::assistant("text"),
                result("a")
            ]),
            Err(OrphanToolResult {
                index: 4,
                id: "a".into()
            })
        );
    }
}
