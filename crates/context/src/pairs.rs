//! Where a history may be cut without splitting a tool_use from its tool_result.
//!
//! A tool_result always answers the assistant turn just before it, and an
//! assistant turn may span several consecutive assistant messages. So a cut
//! right before message `i` keeps every pair whole unless `i` holds
//! tool_results or continues an assistant turn.

use crate::{Message, Role};

/// Whether dropping or keeping everything before `i` leaves every pair whole.
/// `0` and `len` are always safe.
pub fn is_safe_cut(messages: &[Message], i: usize) -> bool {
    if i == 0 || i >= messages.len() {
        return true;
    }
    let m = &messages[i];
    if m.has_tool_result() {
        return false;
    }
    !(m.role() == Role::Assistant && messages[i - 1].role() == Role::Assistant)
}

/// The nearest safe cut at or before `i`.
pub fn safe_cut_at_or_before(messages: &[Message], mut i: usize) -> usize {
    i = i.min(messages.len());
    while !is_safe_cut(messages, i) {
        i -= 1;
    }
    i
}

/// The nearest safe cut at or after `i`.
pub fn safe_cut_at_or_after(messages: &[Message], mut i: usize) -> usize {
    i = i.min(messages.len());
    while !is_safe_cut(messages, i) {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Block;
    use serde_json::json;

    #[test]
    fn cuts_move_around_pairs_and_split_assistant_turns() {
        let h = vec![
            Message::user("go"),
            Message::assistant("thinking aloud"),
            Message::assistant_blocks(vec![Block::tool_use("a", "x", json!({}))]),
            Message::user_blocks(vec![Block::tool_result("a", "r", false)]),
            Message::assistant("done"),
        ];
        assert!(is_safe_cut(&h, 1));
        assert!(!is_safe_cut(&h, 2));
        assert!(!is_safe_cut(&h, 3));
        assert!(is_safe_cut(&h, 4));
        assert_eq!(safe_cut_at_or_before(&h, 3), 1);
        assert_eq!(safe_cut_at_or_after(&h, 2), 4);
        assert_eq!(safe_cut_at_or_after(&h, 99), 5);
    }
}
