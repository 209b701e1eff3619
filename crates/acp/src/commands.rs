//! The slash commands an editor offers in its prompt box.

use agent_client_protocol::v1::schema::{
    AvailableCommand, AvailableCommandInput, UnstructuredCommandInput,
};

/// Name, description, and the hint for its argument when it takes one.
const COMMANDS: [(&str, &str, Option<&str>); 8] = [
    (
        "compact",
        "Summarize the conversation now",
        Some("what to keep in detail (optional)"),
    ),
    (
        "uncompact",
        "Undo the last summary or snip, when the conversation then fits",
        None,
    ),
    ("context", "What fills the context window, by kind", None),
    (
        "cost",
        "Tokens used in this session and the estimated cost",
        None,
    ),
    (
        "report",
        "Write this session's report page and name its path",
        None,
    ),
    (
        "sandbox",
        "What commands may write and read, the network, and a self-test",
        None,
    ),
    (
        "rewind",
        "List the points to go back to; /rewind N [code|conversation] goes back",
        Some("a point's number, then code or conversation (default both)"),
    ),
    (
        "diff",
        "What this session changed in the files since its first checkpoint",
        None,
    ),
];

/// The commands, for `available_commands_update`.
pub fn available_commands() -> Vec<AvailableCommand> {
    COMMANDS
        .iter()
        .map(|(name, about, hint)| {
            let c = AvailableCommand::new(*name, *about);
            match hint {
                Some(h) => c.input(AvailableCommandInput::Unstructured(
                    UnstructuredCommandInput::new(*h),
                )),
                None => c,
            }
        })
        .collect()
}

/// `text` as one of the commands: its name and argument.
pub fn parse_command(text: &str) -> Option<(&'static str, Option<String>)> {
    let rest = text.trim().strip_prefix('/')?;
    let (name, arg) = match rest.split_once(char::is_whitespace) {
        Some((n, a)) => (n, Some(a.trim().to_string()).filter(|a| !a.is_empty())),
        None => (rest, None),
    };
    let known = COMMANDS.iter().find(|(n, ..)| *n == name)?.0;
    Some((known, arg))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_parse_with_and_without_argument() {
        assert_eq!(
            parse_command("/compact keep the tests"),
            Some(("compact", Some("keep the tests".into())))
        );
        assert_eq!(parse_command(" /cost "), Some(("cost", None)));
        assert_eq!(parse_command("/nope"), None);
        assert_eq!(parse_command("compact"), None);
    }
}
