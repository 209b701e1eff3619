//! The markers a saved output leaves in the context, written and recognised
//! in one place: the pipeline's steps and the tools that save their outputs
//! while they run all write them here, and [`Store::saved_path`](crate::Store::saved_path) reads them
//! back.

use std::borrow::Cow;
use std::path::Path;
use whittle_protocol::{ToolResult, group_digits, prefix_chars, suffix_chars};

const PERSISTED_OPEN: &str = "<persisted-output>\nFull output: ";
const PERSISTED_CLOSE: &str = "\n</persisted-output>";
const SAVED_OPEN: &str = "[Earlier tool result saved at ";

/// What a persisted-output marker shows of the output it stands for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Preview<'a> {
    head: Cow<'a, str>,
    rest: Rest<'a>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Rest<'a> {
    /// The head is the whole output.
    Nothing,
    /// More follows the head (the seed's `...`).
    More,
    /// The end of the output, and how many bytes lie between head and end.
    Tail {
        tail: Cow<'a, str>,
        omitted_bytes: u64,
    },
}

impl<'a> Preview<'a> {
    /// The first `chars` characters, as the seed shows a persisted result.
    pub fn head(text: &'a str, chars: usize) -> Self {
        let head = prefix_chars(text, chars);
        let rest = if head.len() < text.len() {
            Rest::More
        } else {
            Rest::Nothing
        };
        Preview {
            head: head.into(),
            rest,
        }
    }

    /// About `chars` characters of an output known by its first and last
    /// bytes (what an [`OutputWriter`](crate::OutputWriter) keeps): a
    /// quarter from the start and the rest from the end, since for a
    /// command the end (the error, the summary line) matters most. Bytes
    /// that are not UTF-8 show as U+FFFD.
    pub fn of_ends(head: &[u8], tail: &[u8], total_bytes: u64, chars: usize) -> Preview<'static> {
        let whole = head.len() as u64 >= total_bytes;
        let head_text = String::from_utf8_lossy(head);
        if whole && head_text.chars().count() <= chars {
            return Preview::head_and_tail(head_text.into_owned(), String::new(), 0);
        }
        let head_part = prefix_chars(&head_text, chars / 4).to_string();
        let tail_text = String::from_utf8_lossy(tail_without_cut_char(tail));
        let tail_part = suffix_chars(&tail_text, chars - chars / 4).to_string();
        let shown = (head_part.len() + tail_part.len()) as u64;
        let omitted = total_bytes.saturating_sub(shown);
        Preview::head_and_tail(head_part, tail_part, omitted)
    }

    /// The start and the end of an output too big to hold in memory, with
    /// the number of bytes between them: for a command's output the end
    /// (the error, the summary line) matters as much as the start.
    pub fn head_and_tail(head: String, tail: String, omitted_bytes: u64) -> Preview<'static> {
        let rest = if omitted_bytes == 0 && tail.is_empty() {
            Rest::Nothing
        } else {
            Rest::Tail {
                tail: tail.into(),
                omitted_bytes,
            }
        };
        Preview {
            head: head.into(),
            rest,
        }
    }
}

/// `bytes` without the continuation bytes of a character cut off at its start.
fn tail_without_cut_char(bytes: &[u8]) -> &[u8] {
    let skip = bytes
        .iter()
        .take(3)
        .take_while(|b| **b & 0xC0 == 0x80)
        .count();
    &bytes[skip..]
}

/// A path as the text a marker names it by: what `Display` and
/// `to_string_lossy` give, borrowed when it is UTF-8 (checked at once, not
/// a piece at a time as the lossy conversion reads it: micro_compact
/// writes a placeholder for every old result it clears).
pub fn path_text(path: &Path) -> Cow<'_, str> {
    match path.to_str() {
        Some(text) => Cow::Borrowed(text),
        None => path.to_string_lossy(),
    }
}

/// A persisted result as it stays in context: where the whole output is,
/// an optional note (its size, the exit status: what a reader needs before
/// deciding to open the file), and a preview. The one format of the one
/// marker: the pipeline's steps and the tools that save their outputs
/// while they run all write it here, and [`Store::saved_path`](crate::Store::saved_path) reads it back.
pub fn persisted_output(path: &Path, preview: &Preview<'_>, note: Option<&str>) -> String {
    let path = path_text(path);
    let tail = match &preview.rest {
        Rest::Tail { tail, .. } => tail.len(),
        _ => 0,
    };
    let mut out = String::with_capacity(
        PERSISTED_OPEN.len() + path.len() + preview.head.len() + tail + PERSISTED_CLOSE.len() + 96,
    );
    out.push_str(PERSISTED_OPEN);
    out.push_str(&path);
    out.push('\n');
    if let Some(note) = note {
        out.push_str(note.trim_end());
        out.push('\n');
    }
    match &preview.rest {
        Rest::Nothing => {
            out.push_str("Preview:\n");
            out.push_str(&preview.head);
        }
        Rest::More => {
            out.push_str("Preview:\n");
            out.push_str(&preview.head);
            out.push_str("\n...");
        }
        Rest::Tail {
            tail,
            omitted_bytes,
        } => {
            out.push_str("Preview (start and end):\n");
            out.push_str(preview.head.trim_end_matches('\n'));
            out.push_str("\n[... ");
            out.push_str(&group_digits(*omitted_bytes));
            out.push_str(" bytes not shown ...]\n");
            out.push_str(tail);
        }
    }
    out.push_str(PERSISTED_CLOSE);
    out
}

/// The placeholder micro_compact leaves for an old result it saved.
pub fn saved_placeholder(path: &Path) -> String {
    let path = path_text(path);
    let mut out = String::with_capacity(SAVED_OPEN.len() + path.len() + 1);
    out.push_str(SAVED_OPEN);
    out.push_str(&path);
    out.push(']');
    out
}

/// The path a persisted-output marker or a saved placeholder names, as
/// written and untrusted: for listing where material went, never for
/// reading it (see [`Store::saved_path`](crate::Store::saved_path)).
pub fn saved_path_text(text: &str) -> Option<&str> {
    if let Some(rest) = text.strip_prefix(PERSISTED_OPEN) {
        if !text.ends_with(PERSISTED_CLOSE) {
            return None;
        }
        Some(rest.split_once('\n')?.0)
    } else {
        text.strip_prefix(SAVED_OPEN)?.strip_suffix(']')
    }
}

/// Whether a result's content is one of compaction's markers, judged by its
/// text alone: cheap, for hints such as the cache anchor, never for trust
/// (see [`Store::saved_path`](crate::Store::saved_path)).
pub fn looks_saved(result: &ToolResult) -> bool {
    result.content_str().is_some_and(|t| {
        is_saved_placeholder(t) || (t.starts_with(PERSISTED_OPEN) && t.ends_with(PERSISTED_CLOSE))
    })
}

/// Whether the content is a micro_compact placeholder (any path).
pub fn is_saved_placeholder(text: &str) -> bool {
    text.starts_with(SAVED_OPEN) && text.ends_with(']') && !text.contains('\n')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn a_path_reads_as_displayed() {
        use std::os::unix::ffi::OsStrExt;
        for bytes in [
            &b"/t/x.jsonl"[..],
            b"/t/\xffx\xc3.jsonl",
            "/t/\u{e9}".as_bytes(),
        ] {
            let p = Path::new(std::ffi::OsStr::from_bytes(bytes));
            assert_eq!(path_text(p), p.display().to_string());
        }
    }

    #[test]
    fn previews_of_ends_show_both_ends_and_count_the_rest() {
        let small = Preview::of_ends(b"abc", b"abc", 3, 100);
        assert_eq!(
            small,
            Preview::head_and_tail("abc".into(), String::new(), 0)
        );
        let text: String = (0..1000).map(|i| format!("{i}\n")).collect();
        let bytes = text.as_bytes();
        let p = Preview::of_ends(
            &bytes[..100],
            &bytes[bytes.len() - 100..],
            bytes.len() as u64,
            40,
        );
        let shown = persisted_output(Path::new("/x"), &p, None);
        assert!(
            shown.contains("Preview (start and end):\n0\n1\n"),
            "{shown}"
        );
        assert!(
            shown.ends_with("998\n999\n\n</persisted-output>"),
            "{shown}"
        );
        assert!(shown.contains(&format!(
            "[... {} bytes not shown ...]",
            group_digits(bytes.len() as u64 - 40)
        )));
        // A tail that starts inside a character does not show half of it.
        let p = Preview::of_ends("é".as_bytes(), &"aé".as_bytes()[2..], 100, 8);
        assert!(!persisted_output(Path::new("/x"), &p, None).contains('\u{fffd}'));
    }
}
