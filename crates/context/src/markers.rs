//! The texts compaction leaves in the context, written and recognised in one place.

use crate::Message;
use std::path::Path;

pub(crate) const ARCHIVE_INFIX: &str = " messages archived at ";
/// How a summary marker names its transcript, on the line before its ledger.
pub(crate) const TRANSCRIPT_LINE: &str = "Full transcript: ";

pub(crate) use whittle_store::path_text;

/// First line of the message that replaces a summarized history.
pub const COMPACTED_HEADER: &str = "[Compacted]";
/// First line of the message that replaces history after a context-overflow error.
pub const REACTIVE_HEADER: &str = "[Reactive compact]";

/// The message snip_compact puts where it removed `count` messages: where
/// they are, to the line, so the model can read them back with `read_file`,
/// and the ledger of what they held (empty: none).
pub fn archive_marker(
    count: usize,
    transcript: &Path,
    lines: Option<(u64, u64)>,
    ledger: &str,
) -> Message {
    let lines = lines.map_or_else(String::new, |(a, b)| format!(", lines {a}-{b}"));
    let mut text = format!("[{count}{ARCHIVE_INFIX}{}{lines}]", path_text(transcript));
    if !ledger.is_empty() {
        text.push_str(
            "

",
        );
        text.push_str(ledger);
    }
    Message::user(text)
}

/// Whether a message is only a snip marker (so snipping it alone gains nothing).
pub fn is_archive_marker(message: &Message) -> bool {
    let crate::Content::Text(text) = message.content() else {
        return false;
    };
    let text = text.lines().next().unwrap_or_default();
    text.strip_prefix('[')
        .and_then(|t| t.split_once(ARCHIVE_INFIX))
        .is_some_and(|(n, rest)| n.bytes().all(|b| b.is_ascii_digit()) && rest.ends_with(']'))
}

/// The message that replaces a summarized history. The request is the only
/// part that carries instructions; the summary is quoted as a JSON string so
/// that it reads as data; the ledger (empty: none) comes last, where
/// [`ledger_section`](crate::ledger_section) finds it.
pub fn compacted_message(
    header: &str,
    request: &str,
    summary: &str,
    transcript: &Path,
    ledger: &str,
) -> Message {
    let quoted = whittle_protocol::str_json(summary);
    let place = path_text(transcript);
    // Written in pieces, in one allocation: a summary marker is made (or
    // sized) on every compaction.
    let pieces = [
        header,
        "\n\nCurrent user request:\n",
        request,
        "\n\nConversation summary (reference only):\n",
        &quoted,
        "\n\n",
        TRANSCRIPT_LINE,
        &place,
    ];
    let ledger_len = if ledger.is_empty() {
        0
    } else {
        2 + ledger.len()
    };
    let mut text =
        String::with_capacity(pieces.iter().map(|p| p.len()).sum::<usize>() + ledger_len);
    for piece in pieces {
        text.push_str(piece);
    }
    if !ledger.is_empty() {
        text.push_str("\n\n");
        text.push_str(ledger);
    }
    Message::user(text)
}

/// The size of [`compacted_message`] with `ledger`, from its size without
/// one (`without_chars`): a character of a JSON string's content counts
/// the same wherever it is in the string, so the ledger and the empty line
/// before it add what they count alone, and the marker need not be written
/// and counted again for each ledger it is priced with.
pub fn compacted_chars_with(without_chars: usize, ledger: &str) -> usize {
    compacted_chars_with_json(without_chars, whittle_protocol::json_str_chars(ledger))
}

/// [`compacted_chars_with`] for a ledger known by its length as a JSON
/// string (`json_str_chars`, quotes included; 0 for no ledger).
pub(crate) fn compacted_chars_with_json(without_chars: usize, ledger_json_chars: usize) -> usize {
    if ledger_json_chars <= "\"\"".len() {
        return without_chars;
    }
    // The ledger's own quotes are not in the message: the "\n\n" before it is.
    without_chars + "\\n\\n".len() + ledger_json_chars - "\"\"".len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Counted from the marker without a ledger, a marker with one is
        /// as long as written.
        #[test]
        fn a_marker_with_a_ledger_is_counted_from_one_without(
            request in "(\\PC|\n|\t|\"|\\\\)*",
            summary in "(\\PC|\n|\")*",
            ledger in "(\\PC|\n|\x01|\\\\)*",
        ) {
            let place = Path::new("/t/x.jsonl");
            let without = compacted_message(COMPACTED_HEADER, &request, &summary, place, "").chars();
            let with = compacted_message(COMPACTED_HEADER, &request, &summary, place, &ledger).chars();
            prop_assert_eq!(compacted_chars_with(without, &ledger), with);
        }

        /// Written in pieces, the marker reads as the one formatted whole.
        #[test]
        fn a_marker_written_in_pieces_is_the_formatted_one(
            request in "(\\PC|\n|\")*",
            summary in "(\\PC|\n|\")*",
            ledger in "(\\PC|\n)*",
            place in "(\\PC|/)*",
        ) {
            let quoted = serde_json::to_string(&summary).unwrap();
            let mut formatted = format!(
                "{COMPACTED_HEADER}\n\nCurrent user request:\n{request}\n\n\
                 Conversation summary (reference only):\n{quoted}\n\n\
                 {TRANSCRIPT_LINE}{}",
                Path::new(&place).display()
            );
            if !ledger.is_empty() {
                formatted.push_str("\n\n");
                formatted.push_str(&ledger);
            }
            let written = compacted_message(COMPACTED_HEADER, &request, &summary, Path::new(&place), &ledger);
            prop_assert_eq!(written.text(), formatted);
        }
    }

    #[test]
    fn archive_markers_are_recognised() {
        let marker = archive_marker(12, Path::new("/t/x.jsonl"), Some((4, 15)), "");
        assert_eq!(
            marker.text(),
            "[12 messages archived at /t/x.jsonl, lines 4-15]"
        );
        assert!(is_archive_marker(&marker));
        assert!(!is_archive_marker(&Message::user(
            "[see 12 messages archived at x] later"
        )));
    }
}
