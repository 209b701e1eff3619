//! An incremental decoder for `text/event-stream` (server-sent events).
//!
//! Bytes arrive in arbitrary pieces; the decoder yields the same events
//! whatever the split, which the tests check at every byte boundary.

use crate::error::LlmError;

/// One dispatched event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, empty when the server sent none.
    pub event: String,
    /// The `data:` lines, joined by `\n`.
    pub data: String,
}

/// A single line longer than this is an error rather than a memory leak.
const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;
/// An event whose `data:` lines together grow past this is an error too:
/// each line may be short, and a server that never sends the blank line
/// ending the event would otherwise grow it without bound.
const MAX_EVENT_BYTES: usize = MAX_LINE_BYTES;
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Decodes a byte stream into [`SseEvent`]s.
#[derive(Debug, Default)]
pub struct SseDecoder {
    buf: Vec<u8>,
    event: String,
    data: String,
    has_data: bool,
    bom_checked: bool,
}

impl SseDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds the next bytes; complete events are appended to `out`.
    pub fn push(&mut self, chunk: &[u8], out: &mut Vec<SseEvent>) -> Result<(), LlmError> {
        self.buf.extend_from_slice(chunk);
        self.drain_lines(false, out)
    }

    /// Ends the stream: a final event whose lines were complete is dispatched
    /// even without the closing blank line; a cut-off last line is dropped.
    pub fn finish(&mut self, out: &mut Vec<SseEvent>) -> Result<(), LlmError> {
        self.drain_lines(true, out)?;
        self.buf.clear();
        self.dispatch(out);
        Ok(())
    }

    fn drain_lines(&mut self, eof: bool, out: &mut Vec<SseEvent>) -> Result<(), LlmError> {
        if !self.bom_checked {
            if self.buf.len() < BOM.len() && BOM.starts_with(&self.buf) && !eof {
                return Ok(());
            }
            if self.buf.starts_with(BOM) {
                self.buf.drain(..BOM.len());
            }
            self.bom_checked = true;
        }
        let mut start = 0;
        while let Some(offset) = self.buf[start..]
            .iter()
            .position(|b| *b == b'\n' || *b == b'\r')
        {
            let end = start + offset;
            let terminator = if self.buf[end] == b'\n' {
                1
            } else if end + 1 < self.buf.len() {
                if self.buf[end + 1] == b'\n' { 2 } else { 1 }
            } else if eof {
                1
            } else {
                // A lone '\r' at the end may be the first half of "\r\n".
                break;
            };
            let line = std::str::from_utf8(&self.buf[start..end])
                .map_err(|_| LlmError::malformed("the event stream is not valid UTF-8"))?
                .to_owned();
            self.line(&line, out)?;
            start = end + terminator;
        }
        self.buf.drain(..start);
        if self.buf.len() > MAX_LINE_BYTES {
            return Err(LlmError::malformed(format!(
                "an event-stream line exceeds {MAX_LINE_BYTES} bytes"
            )));
        }
        Ok(())
    }

    fn line(&mut self, line: &str, out: &mut Vec<SseEvent>) -> Result<(), LlmError> {
        if line.is_empty() {
            self.dispatch(out);
            return Ok(());
        }
        if line.starts_with(':') {
            return Ok(()); // comment
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "event" => value.clone_into(&mut self.event),
            "data" => {
                if self.data.len() + value.len() >= MAX_EVENT_BYTES {
                    return Err(LlmError::malformed(format!(
                        "an event-stream event exceeds {MAX_EVENT_BYTES} bytes"
                    )));
                }
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            _ => {} // id, retry and unknown fields do not matter here
        }
        Ok(())
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        if self.has_data {
            out.push(SseEvent {
                event: std::mem::take(&mut self.event),
                data: std::mem::take(&mut self.data),
            });
        }
        self.event.clear();
        self.data.clear();
        self.has_data = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SAMPLE: &str = "\u{feff}: comment\r\nevent: message_start\r\ndata: {\"a\":1}\r\n\r\nevent: content_block_delta\ndata: {\"text\":\"h\u{e9}llo \u{1F600}\"}\n\ndata: line one\ndata: line two\rdata:no-space\r\r: ping\n\nevent: empty\n\nid: 7\nretry: 10\ndata: [DONE]\n\n";

    fn decode_in_pieces(bytes: &[u8], cuts: &[usize]) -> Vec<SseEvent> {
        let mut d = SseDecoder::new();
        let mut out = Vec::new();
        let mut prev = 0;
        for &cut in cuts {
            d.push(&bytes[prev..cut], &mut out).unwrap();
            prev = cut;
        }
        d.push(&bytes[prev..], &mut out).unwrap();
        d.finish(&mut out).unwrap();
        out
    }

    #[test]
    fn decodes_fields_comments_and_line_endings() {
        let events = decode_in_pieces(SAMPLE.as_bytes(), &[]);
        let expected = vec![
            SseEvent {
                event: "message_start".into(),
                data: "{\"a\":1}".into(),
            },
            SseEvent {
                event: "content_block_delta".into(),
                data: "{\"text\":\"h\u{e9}llo \u{1F600}\"}".into(),
            },
            SseEvent {
                event: String::new(),
                data: "line one\nline two\nno-space".into(),
            },
            SseEvent {
                event: String::new(),
                data: "[DONE]".into(),
            },
        ];
        assert_eq!(events, expected);
    }

    #[test]
    fn every_single_split_gives_the_same_events() {
        let bytes = SAMPLE.as_bytes();
        let whole = decode_in_pieces(bytes, &[]);
        for i in 0..=bytes.len() {
            assert_eq!(decode_in_pieces(bytes, &[i]), whole, "split at {i}");
        }
    }

    #[test]
    fn every_pair_of_splits_gives_the_same_events() {
        let bytes = SAMPLE.as_bytes();
        let whole = decode_in_pieces(bytes, &[]);
        for i in 0..=bytes.len() {
            for j in i..=bytes.len() {
                assert_eq!(decode_in_pieces(bytes, &[i, j]), whole, "splits {i},{j}");
            }
        }
    }

    #[test]
    fn byte_by_byte_gives_the_same_events() {
        let bytes = SAMPLE.as_bytes();
        let cuts: Vec<usize> = (1..bytes.len()).collect();
        assert_eq!(decode_in_pieces(bytes, &cuts), decode_in_pieces(bytes, &[]));
    }

    #[test]
    fn a_cut_off_last_line_is_dropped_but_complete_lines_dispatch() {
        let events = decode_in_pieces(b"data: {\"whole\":true}\n\ndata: {\"cut", &[]);
        assert_eq!(events.len(), 1);
        let events = decode_in_pieces(b"data: [DONE]\n", &[]);
        assert_eq!(events[0].data, "[DONE]");
    }

    #[test]
    fn invalid_utf8_is_an_error_not_a_panic() {
        let mut d = SseDecoder::new();
        let mut out = Vec::new();
        assert!(d.push(b"data: \xff\xfe\n\n", &mut out).is_err());
    }

    proptest! {
        #[test]
        fn any_splits_of_any_stream_agree(
            lines in proptest::collection::vec(
                prop_oneof![
                    "[a-z \u{e9}\u{1F600}:]{0,12}".prop_map(|s| format!("data: {s}")),
                    "[a-z_]{1,8}".prop_map(|s| format!("event: {s}")),
                    Just(String::new()),
                    Just(": comment".to_owned()),
                ],
                0..20,
            ),
            endings in proptest::collection::vec(prop_oneof![Just("\n"), Just("\r\n"), Just("\r")], 20),
            mut cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..8),
        ) {
            let mut text = String::new();
            for (i, line) in lines.iter().enumerate() {
                text.push_str(line);
                text.push_str(endings[i % endings.len()]);
            }
            let bytes = text.as_bytes();
            let mut positions: Vec<usize> = cuts.drain(..).map(|ix| ix.index(bytes.len() + 1)).collect();
            positions.sort_unstable();
            prop_assert_eq!(decode_in_pieces(bytes, &positions), decode_in_pieces(bytes, &[]));
        }
    }
}
