//! mini-swe-agent trajectories (`"trajectory_format": "mini-swe-agent-1"`).
//!
//! The agent has no structured tool calls: the model writes THOUGHT text and
//! one fenced ```` ```bash ```` block, and the next user message is the
//! command's output. The import makes that explicit, and loses nothing:
//! - the system message becomes [`Conversation::system`](super::Conversation);
//! - an assistant message with exactly one bash block becomes a text block
//!   holding the *whole* message text as written (thought, fence and all, so
//!   the original is recoverable byte for byte), then
//!   `tool_use{name: "bash", input: {command}}` with the id `msa-bash-<i>`
//!   (`i` = the message's index in the file);
//! - the user message right after it becomes that tool_use's `tool_result`,
//!   its content verbatim (including the `<returncode>`; `is_error` stays unset);
//! - an assistant message with no bash block, or with several, stays text:
//!   mini-swe-agent ran nothing then and answered with a format error, which
//!   stays an ordinary user message. Blocks are found exactly as mini-swe-agent
//!   finds them (the regex ```` ```bash\s*\n(.*?)\n``` ````) and the command is trimmed as it did;
//! - the per-message `extra` (raw API response, usage) is metadata, not context.

use super::draft::Draft;
use super::{Conversation, Format, ImportError, finish, system_text};
use serde_json::{Map, Value, json};
use std::path::Path;
use whittle_protocol::{Block, Content, Role, tool_names};

/// The only `trajectory_format` this module reads.
pub(crate) const TRAJECTORY_FORMAT: &str = "mini-swe-agent-1";

/// Imports one trajectory document.
pub(crate) fn import(
    path: &Path,
    id: &str,
    document: &Map<String, Value>,
) -> Result<Conversation, ImportError> {
    let bad = |at: String, reason: &str| ImportError::BadValue {
        path: path.to_path_buf(),
        at,
        reason: reason.to_string(),
    };
    let Some(Value::Array(messages)) = document.get("messages") else {
        return Err(bad("messages".into(), "expected an array of messages"));
    };
    let mut system: Vec<&str> = Vec::new();
    let mut draft = Draft::default();
    // The id of the bash call the next user message answers.
    let mut awaiting: Option<String> = None;
    for (i, message) in messages.iter().enumerate() {
        let at = |field: &str| format!("messages[{i}]{field}");
        let Value::Object(message) = message else {
            return Err(bad(at(""), "expected a message object"));
        };
        let Some(Value::String(content)) = message.get("content") else {
            return Err(bad(at(".content"), "expected a string"));
        };
        let role = message.get("role").and_then(Value::as_str);
        let answered = awaiting.take();
        match role {
            Some("system") if draft.is_empty() => system.push(content),
            Some("system") => {
                draft.push_injected(Role::User, Content::Text(content.clone()));
            }
            Some("user") => match answered {
                Some(call) => {
                    draft.push(
                        Role::User,
                        Content::Blocks(vec![Block::tool_result(call, content.clone(), false)]),
                    );
                }
                // The task opens the trajectory; any later text is
                // mini-swe-agent's own (a format error, a limit reached).
                None if draft.is_empty() => {
                    draft.push(Role::User, Content::Text(content.clone()));
                }
                None => {
                    draft.push_injected(Role::User, Content::Text(content.clone()));
                }
            },
            Some("assistant") => match bash_blocks(content).as_slice() {
                [command] => {
                    let call = format!("msa-bash-{i}");
                    draft.push(
                        Role::Assistant,
                        Content::Blocks(vec![
                            Block::text(content.clone()),
                            Block::tool_use(
                                call.clone(),
                                tool_names::BASH,
                                json!({ "command": command.trim() }),
                            ),
                        ]),
                    );
                    awaiting = Some(call);
                }
                _ => {
                    draft.push(Role::Assistant, Content::Text(content.clone()));
                }
            },
            _ => {
                return Err(bad(
                    at(".role"),
                    "expected \"system\", \"user\" or \"assistant\"",
                ));
            }
        }
    }
    finish(
        path,
        id.to_string(),
        Format::MiniSweAgent,
        system_text(&system),
        draft,
    )
}

/// The bodies of the fenced bash blocks, as `re.findall(r"```bash\s*\n(.*?)\n```",
/// text, re.DOTALL)` returns them.
pub(crate) fn bash_blocks(text: &str) -> Vec<&str> {
    const OPEN: &str = "```bash";
    const CLOSE: &str = "\n```";
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(offset) = text[from..].find(OPEN) {
        let after_open = from + offset + OPEN.len();
        let rest = &text[after_open..];
        let spaces = rest.len() - rest.trim_start().len();
        // `\s*\n` backtracks from the longest run of whitespace: the body
        // starts after its last newline whose rest holds a close.
        let mut newlines = rest[..spaces]
            .char_indices()
            .filter(|(_, c)| *c == '\n')
            .map(|(at, _)| after_open + at + 1)
            .rev();
        let Some(last) = newlines.next() else {
            from = after_open;
            continue;
        };
        let matched = match text[last..].find(CLOSE) {
            Some(len) => (last, last + len),
            // Before `last` there is only whitespace: from an earlier
            // newline the one close more to find is the one the last
            // newline itself starts. Without it there is no close after
            // this point, for this block or any later one (searching from
            // every newline of a long run, block after block, was
            // quadratic: a recorded answer could stall the import).
            None => match newlines.next() {
                Some(body) if text[last..].starts_with("```") => (body, last - 1),
                _ => break,
            },
        };
        let (body, end) = matched;
        found.push(&text[body..end]);
        from = end + CLOSE.len();
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_blocks_as_the_python_regex_does() {
        assert_eq!(bash_blocks("T\n\n```bash\nls -la\n```\n"), ["ls -la"]);
        assert_eq!(bash_blocks("```bash  \n\n  a\nb\n```"), ["  a\nb"]);
        assert_eq!(bash_blocks("```bash\n\n```"), [""]);
        assert_eq!(bash_blocks("```bash ls```"), Vec::<&str>::new());
        assert_eq!(bash_blocks("```bash\nx\n```\n```bash\ny\n```"), ["x", "y"]);
        assert_eq!(bash_blocks("```python\nx\n```"), Vec::<&str>::new());
        assert_eq!(bash_blocks("```bashé\nx"), Vec::<&str>::new());
        // A long run of newlines with no close, block after block.
        let open = format!("```bash{}x", "\n".repeat(100_000));
        assert_eq!(bash_blocks(&open.repeat(50)), Vec::<&str>::new());
    }

    /// The regex's semantics, tried from every newline as the regex
    /// backtracks: what the scan above must return.
    fn bash_blocks_by_backtracking(text: &str) -> Vec<&str> {
        let mut found = Vec::new();
        let mut from = 0;
        while let Some(offset) = text[from..].find("```bash") {
            let after_open = from + offset + "```bash".len();
            let rest = &text[after_open..];
            let spaces = rest.len() - rest.trim_start().len();
            let matched = rest[..spaces]
                .char_indices()
                .filter(|(_, c)| *c == '\n')
                .map(|(at, _)| after_open + at + 1)
                .rev()
                .find_map(|body| text[body..].find("\n```").map(|len| (body, body + len)));
            match matched {
                Some((body, end)) => {
                    found.push(&text[body..end]);
                    from = end + 4;
                }
                None => from = after_open,
            }
        }
        found
    }

    proptest::proptest! {
        #[test]
        fn the_scan_finds_what_backtracking_finds(
            parts in proptest::collection::vec(
                proptest::sample::select(vec!["```bash", "```", "\n", " ", "\t", "x", "é", "\n```"]),
                0..40,
            )
        ) {
            let text = parts.concat();
            proptest::prop_assert_eq!(bash_blocks(&text), bash_blocks_by_backtracking(&text));
        }
    }
}
