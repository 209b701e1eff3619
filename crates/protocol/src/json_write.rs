//! A message's compact JSON, written without serde: the bytes
//! `serde_json::to_string` gives, found faster.
//!
//! Every message a compaction archives is written to the transcript as a
//! line of JSON, and most of that work was serde_json checking each byte
//! of the messages' strings for one to escape. Here a string is checked
//! eight bytes at a time: the bytes of a word that are below 0x20, a quote
//! or a backslash are found together with a few arithmetic operations, and
//! only those are looked at. The shape (the fields of each
//! block, in serde's order, flattened extras after them) follows the
//! `Serialize` impls of [`Message`] and [`Block`]; numbers are left to
//! serde_json. A property test holds the two to the same bytes.

use crate::message::{Block, Content, Extra, Message, ToolResultContent};
use serde_json::Value;

/// `serde_json::to_string(message)`, faster.
pub fn message_json(message: &Message) -> String {
    let mut out = String::with_capacity(message.chars() + 16);
    write_message(message, &mut out);
    out
}

/// `serde_json::to_string(value)`, faster.
pub fn value_json(value: &Value) -> String {
    let mut out = String::new();
    write_value(value, &mut out);
    out
}

/// `serde_json::to_string(text)`: `text` as a JSON string, faster.
pub fn str_json(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    write_str(text, &mut out);
    out
}

fn write_message(message: &Message, out: &mut String) {
    out.push_str("{\"role\":");
    write_str(message.role().as_str(), out);
    out.push_str(",\"content\":");
    match message.content() {
        Content::Text(text) => write_str(text, out),
        Content::Blocks(blocks) => write_blocks(blocks, out),
    }
    write_extra(message.extra(), out);
    out.push('}');
}

fn write_blocks(blocks: &[Block], out: &mut String) {
    write_list(blocks, ('[', ']'), out, write_block);
}

/// `items` between `brackets`, separated by commas, each written by `write_item`.
fn write_list<T>(
    items: impl IntoIterator<Item = T>,
    brackets: (char, char),
    out: &mut String,
    mut write_item: impl FnMut(T, &mut String),
) {
    out.push(brackets.0);
    for (k, item) in items.into_iter().enumerate() {
        if k > 0 {
            out.push(',');
        }
        write_item(item, out);
    }
    out.push(brackets.1);
}

/// One block: `{"type":...,` its fields in declaration order (an absent
/// option left out), then its extra fields.
fn write_block(block: &Block, out: &mut String) {
    let extra = match block {
        Block::Text(b) => {
            out.push_str("{\"type\":\"text\",\"text\":");
            write_str(&b.text, out);
            &b.extra
        }
        Block::ToolUse(b) => {
            out.push_str("{\"type\":\"tool_use\",\"id\":");
            write_str(&b.id, out);
            out.push_str(",\"name\":");
            write_str(&b.name, out);
            out.push_str(",\"input\":");
            write_value(&b.input, out);
            &b.extra
        }
        Block::ToolResult(b) => {
            out.push_str("{\"type\":\"tool_result\",\"tool_use_id\":");
            write_str(&b.tool_use_id, out);
            match &b.content {
                Some(ToolResultContent::Text(text)) => {
                    out.push_str(",\"content\":");
                    write_str(text, out);
                }
                Some(ToolResultContent::Blocks(blocks)) => {
                    out.push_str(",\"content\":");
                    write_blocks(blocks, out);
                }
                None => {}
            }
            match b.is_error {
                Some(true) => out.push_str(",\"is_error\":true"),
                Some(false) => out.push_str(",\"is_error\":false"),
                None => {}
            }
            &b.extra
        }
        Block::Thinking(b) => {
            out.push_str("{\"type\":\"thinking\",\"thinking\":");
            write_str(&b.thinking, out);
            if let Some(signature) = &b.signature {
                out.push_str(",\"signature\":");
                write_str(signature, out);
            }
            &b.extra
        }
        Block::RedactedThinking(b) => {
            out.push_str("{\"type\":\"redacted_thinking\",\"data\":");
            write_str(&b.data, out);
            &b.extra
        }
        Block::Image(b) => {
            out.push_str("{\"type\":\"image\",\"source\":");
            write_value(&b.source, out);
            &b.extra
        }
        Block::Unknown(value) => {
            write_value(value, out);
            return;
        }
    };
    write_extra(extra, out);
    out.push('}');
}

/// `,"key":value` for each extra field, in the map's order.
fn write_extra(extra: &Extra, out: &mut String) {
    for (key, value) in extra {
        out.push(',');
        write_field(key, value, out);
    }
}

/// `"key":value`.
fn write_field(key: &str, value: &Value, out: &mut String) {
    write_str(key, out);
    out.push(':');
    write_value(value, out);
}

fn write_value(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        // serde_json's own (integers and shortest floats), into the buffer.
        Value::Number(n) => {
            out.push_str(&serde_json::to_string(n).unwrap_or_default());
        }
        Value::String(s) => write_str(s, out),
        Value::Array(items) => write_list(items, ('[', ']'), out, write_value),
        Value::Object(map) => write_list(map, ('{', '}'), out, |(key, value), out| {
            write_field(key, value, out)
        }),
    }
}

const LOWS: u64 = 0x7F7F_7F7F_7F7F_7F7F;
const HIGHS: u64 = 0x8080_8080_8080_8080;
const ONES: u64 = 0x0101_0101_0101_0101;

/// The high bit of each byte of `word` that is zero, and no other: exact
/// (the low seven bits are added without a carry out of the byte).
fn zero_bytes(word: u64) -> u64 {
    !(((word & LOWS) + LOWS) | word) & HIGHS
}

/// The high bit of each byte of `word` that needs escaping: below 0x20
/// (a byte without its high bit that stays below 0x80 when 0x60 is
/// added), `"` or `\`.
fn escape_bytes(word: u64) -> u64 {
    let control = !((word & LOWS) + ONES * 0x60) & !word & HIGHS;
    control
        | zero_bytes(word ^ (ONES * u64::from(b'"')))
        | zero_bytes(word ^ (ONES * u64::from(b'\\')))
}

/// `s` as a JSON string, escaped as serde_json escapes it.
fn write_str(s: &str, out: &mut String) {
    let bytes = s.as_bytes();
    out.push('"');
    // Bytes before `start` are written.
    let mut start = 0;
    let mut words = bytes.chunks_exact(8);
    for (k, chunk) in words.by_ref().enumerate() {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let mut found = escape_bytes(u64::from_le_bytes(word));
        // Each byte to escape, in order (the lowest bit is the first byte).
        while found != 0 {
            let at = k * 8 + (found.trailing_zeros() / 8) as usize;
            // Escaped bytes are ASCII: the cuts are on character boundaries.
            out.push_str(&s[start..at]);
            push_escape(bytes[at], out);
            start = at + 1;
            found &= found - 1;
        }
    }
    let tail = bytes.len() - words.remainder().len();
    for (at, &byte) in bytes.iter().enumerate().skip(tail) {
        if escape_of(byte).is_some() {
            // Escaped bytes are ASCII: the cuts are on character boundaries.
            out.push_str(&s[start..at]);
            push_escape(byte, out);
            start = at + 1;
        }
    }
    out.push_str(&s[start..]);
    out.push('"');
}

/// The escape of `byte` (one that needs it) at the end of `out`.
fn push_escape(byte: u8, out: &mut String) {
    if let Some(escape) = escape_of(byte) {
        for &b in escape.as_ref() {
            out.push(char::from(b));
        }
    }
}

/// The escape serde_json writes for `byte`, if it needs one.
fn escape_of(byte: u8) -> Option<Escape> {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let short = |c: u8| Some(Escape::Short([b'\\', c]));
    match byte {
        b'"' => short(b'"'),
        b'\\' => short(b'\\'),
        0x08 => short(b'b'),
        b'\t' => short(b't'),
        b'\n' => short(b'n'),
        0x0C => short(b'f'),
        b'\r' => short(b'r'),
        0..=0x1F => Some(Escape::Unicode([
            b'\\',
            b'u',
            b'0',
            b'0',
            HEX[usize::from(byte >> 4)],
            HEX[usize::from(byte & 0xF)],
        ])),
        _ => None,
    }
}

enum Escape {
    Short([u8; 2]),
    Unicode([u8; 6]),
}

impl AsRef<[u8]> for Escape {
    fn as_ref(&self) -> &[u8] {
        match self {
            Escape::Short(b) => b,
            Escape::Unicode(b) => b,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Image, RedactedThinking, TextBlock, Thinking, ToolResult, ToolUse};
    use proptest::prelude::*;

    fn text() -> impl Strategy<Value = String> {
        "(\\PC|[\u{0}-\u{1f}\"\\\\\u{7f}é€😀]|a{8})*"
    }

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            text().prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec((text(), inner), 0..4)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    fn extra() -> impl Strategy<Value = Extra> {
        prop::collection::vec(("(type|text|id|[a-z]{1,3})", value()), 0..3)
            .prop_map(|kv| kv.into_iter().collect())
    }

    fn block() -> impl Strategy<Value = Block> {
        let plain = prop_oneof![
            (text(), extra()).prop_map(|(text, extra)| Block::Text(TextBlock { text, extra })),
            (text(), text(), value(), extra()).prop_map(|(id, name, input, extra)| {
                Block::ToolUse(ToolUse {
                    id,
                    name,
                    input,
                    extra,
                })
            }),
            (
                text(),
                prop::option::of(any::<bool>()),
                prop::option::of(text()),
                extra()
            )
                .prop_map(|(tool_use_id, is_error, content, extra)| {
                    Block::ToolResult(ToolResult {
                        tool_use_id,
                        content: content.map(ToolResultContent::Text),
                        is_error,
                        extra,
                    })
                }),
            (text(), prop::option::of(text()), extra()).prop_map(|(thinking, signature, extra)| {
                Block::Thinking(Thinking {
                    thinking,
                    signature,
                    extra,
                })
            }),
            (text(), extra()).prop_map(|(data, extra)| {
                Block::RedactedThinking(RedactedThinking { data, extra })
            }),
            (value(), extra()).prop_map(|(source, extra)| Block::Image(Image { source, extra })),
            value().prop_map(Block::Unknown),
        ];
        plain.prop_recursive(2, 8, 3, |inner| {
            (text(), prop::collection::vec(inner, 0..3)).prop_map(|(tool_use_id, blocks)| {
                Block::ToolResult(ToolResult {
                    tool_use_id,
                    content: Some(ToolResultContent::Blocks(blocks)),
                    is_error: None,
                    extra: Extra::new(),
                })
            })
        })
    }

    proptest! {
        /// The bytes serde_json writes, for any message.
        #[test]
        fn a_message_is_written_as_serde_json_writes_it(
            assistant in any::<bool>(),
            content in prop_oneof![
                text().prop_map(Content::Text),
                prop::collection::vec(block(), 0..4).prop_map(Content::Blocks),
            ],
            extra in extra(),
        ) {
            let role = if assistant { crate::Role::Assistant } else { crate::Role::User };
            let message = Message::with_extra(role, content, extra);
            prop_assert_eq!(message_json(&message), serde_json::to_string(&message).unwrap());
        }

        /// The bytes serde_json writes, for any value.
        #[test]
        fn a_value_is_written_as_serde_json_writes_it(v in value()) {
            prop_assert_eq!(value_json(&v), serde_json::to_string(&v).unwrap());
        }

        /// Strings long enough to be read a word at a time, with an
        /// escape anywhere in them.
        #[test]
        fn strings_are_escaped_as_serde_json_escapes_them(s in text(), pad in 0usize..17) {
            let s = format!("{}{s}{}", "x".repeat(pad), "y".repeat(pad));
            prop_assert_eq!(str_json(&s), serde_json::to_string(&s).unwrap());
        }
    }

    #[test]
    fn every_ascii_byte_and_char_length_is_escaped_as_serde_json_escapes_it() {
        // Every ASCII byte, and characters of every UTF-8 length, at every
        // place in a word and in the tail.
        let others = [
            '\u{80}',
            '\u{a2}',
            '\u{7ff}',
            '\u{800}',
            '\u{ffff}',
            '\u{10000}',
            '\u{10ffff}',
        ];
        let chars = (0u8..0x80).map(char::from).chain(others);
        for c in chars {
            for offset in 0..17 {
                let s = format!("{}{c}{}", "a".repeat(offset), "b".repeat(17 - offset));
                assert_eq!(str_json(&s), serde_json::to_string(&s).unwrap());
            }
        }
    }
}
