//! Reading JSON Lines: one JSON value per line, each error naming its line.
//!
//! An agent appends to its log as it goes, so a crash can leave the final line
//! half-written. Such a line (the last one, not ended by a newline, and not
//! parseable) is dropped and reported as `truncated_tail`, so the importer can
//! count it as a repair; any other bad line is an error.

use super::ImportError;
use serde_json::Value;
use std::path::Path;

/// One parsed line.
pub(crate) struct Line {
    /// 1-based line number in the file.
    pub number: usize,
    /// The line's JSON.
    pub value: Value,
}

/// All lines of a JSONL file.
pub(crate) struct Lines {
    /// Non-blank lines, in file order.
    pub lines: Vec<Line>,
    /// Whether a half-written final line was dropped.
    pub truncated_tail: bool,
}

/// The parser's message without serde_json's trailing " at line L column C".
pub(crate) fn reason(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.rfind(" at line ") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

/// The first two non-blank lines, parsed, as far as they are JSON (used to
/// tell JSON Lines from a broken JSON document).
pub(crate) fn first_values(bytes: &[u8]) -> Vec<Value> {
    bytes
        .split(|b| *b == b'\n')
        .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
        .take(2)
        .map_while(|l| serde_json::from_slice(l).ok())
        .collect()
}

/// Parses every line; see the module documentation for the one tolerated fault.
pub(crate) fn parse(path: &Path, bytes: &[u8]) -> Result<Lines, ImportError> {
    let segments: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    let last = segments.len() - 1;
    let mut lines = Vec::new();
    let mut truncated_tail = false;
    for (index, segment) in segments.into_iter().enumerate() {
        let number = index + 1;
        let line = segment.strip_suffix(b"\r").unwrap_or(segment);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        // The segment after the last newline is unterminated by construction.
        let unterminated = index == last;
        let text = match std::str::from_utf8(line) {
            Ok(text) => text,
            Err(_) if unterminated => {
                truncated_tail = true;
                break;
            }
            Err(e) => {
                return Err(ImportError::Syntax {
                    path: path.to_path_buf(),
                    line: number,
                    column: e.valid_up_to() + 1,
                    reason: "not UTF-8 text".into(),
                });
            }
        };
        match serde_json::from_str::<Value>(text) {
            Ok(value) => lines.push(Line { number, value }),
            Err(_) if unterminated => truncated_tail = true,
            Err(e) => {
                return Err(ImportError::Syntax {
                    path: path.to_path_buf(),
                    line: number,
                    column: e.column(),
                    reason: reason(&e),
                });
            }
        }
    }
    Ok(Lines {
        lines,
        truncated_tail,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_unterminated_last_line_may_be_cut() {
        let p = Path::new("t.jsonl");
        let ok = parse(p, b"{\"a\":1}\r\n\n  \n{\"b\":2}\n{\"c\":").unwrap();
        assert!(ok.truncated_tail);
        assert_eq!(
            ok.lines.iter().map(|l| l.number).collect::<Vec<_>>(),
            [1, 4]
        );
        let err = parse(p, b"{\"a\":1}\n{\"c\":\n").err().unwrap();
        assert_eq!(err.line(), Some(2));
        let err = parse(p, b"{\"a\":1}\n\xff\xfe\n{}").err().unwrap();
        assert_eq!(err.line(), Some(2));
        assert!(err.to_string().starts_with("t.jsonl:2:1: "), "{err}");
        let cut_char = parse(p, "{}\n{\"é".as_bytes().split_last().unwrap().1).unwrap();
        assert!(cut_char.truncated_tail);
    }
}
