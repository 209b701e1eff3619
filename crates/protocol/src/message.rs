//! The conversation model: Anthropic Messages wire format, kept losslessly.
//!
//! Every [`Message`] caches the number of characters of its compact JSON
//! serialization, per block as well, so that measuring a history never
//! re-serializes it and replacing one block updates the total in O(1).

use serde::de::{self, Deserializer};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::io;

/// A JSON object: the unknown fields a block or message carries (e.g. `cache_control`).
pub type Extra = Map<String, Value>;

/// Who wrote a message. The Messages API has only these two roles in `messages`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The person, and everything the harness feeds back (tool results, reminders).
    User,
    /// The model.
    Assistant,
}

impl Role {
    /// The wire name, as in `"role": "user"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// A message's content: the API accepts a bare string or a list of blocks.
///
/// Both shapes are kept as received so that re-serialization is byte-stable.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Content {
    /// `"content": "..."`.
    Text(String),
    /// `"content": [ ... ]`.
    Blocks(Vec<Block>),
}

/// One content block. Known types are typed; anything else is kept verbatim.
#[derive(Clone, Debug, PartialEq)]
pub enum Block {
    /// `{"type": "text"}`.
    Text(TextBlock),
    /// `{"type": "tool_use"}`: the model asks the harness to run a tool.
    ToolUse(ToolUse),
    /// `{"type": "tool_result"}`: the harness answers a tool_use.
    ToolResult(ToolResult),
    /// `{"type": "thinking"}`: extended thinking, whose signature must survive byte-exact.
    Thinking(Thinking),
    /// `{"type": "redacted_thinking"}`.
    RedactedThinking(RedactedThinking),
    /// `{"type": "image"}`.
    Image(Image),
    /// Any block this crate does not model (server tools, documents, future types),
    /// or a known type whose shape we could not represent losslessly.
    Unknown(Value),
}

/// A text block.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TextBlock {
    /// The text.
    pub text: String,
    /// Fields we do not model, such as `cache_control` or `citations`.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A tool call requested by the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolUse {
    /// The id the matching tool_result must carry.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments, as the model wrote them.
    pub input: Value,
    /// Fields we do not model.
    #[serde(flatten)]
    pub extra: Extra,
}

/// The answer to a tool_use.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The id of the tool_use this answers.
    pub tool_use_id: String,
    /// The output; the API allows it to be absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<ToolResultContent>,
    /// Whether the tool failed; kept absent when it was absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    /// Fields we do not model.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A tool result's content: a string or a list of blocks (text, images).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ToolResultContent {
    /// A plain string.
    Text(String),
    /// Blocks, usually text and image.
    Blocks(Vec<Block>),
}

/// Extended thinking. The signature is opaque and must be sent back unchanged.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Thinking {
    /// The thinking text.
    pub thinking: String,
    /// The server's signature over the thinking.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// Fields we do not model.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Thinking the server redacted; only the encrypted data goes back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RedactedThinking {
    /// The encrypted thinking.
    pub data: String,
    /// Fields we do not model.
    #[serde(flatten)]
    pub extra: Extra,
}

/// An image; its `source` (base64 or URL) is kept as raw JSON.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Image {
    /// `{"type": "base64", "media_type": ..., "data": ...}` or a URL source.
    pub source: Value,
    /// Fields we do not model.
    #[serde(flatten)]
    pub extra: Extra,
}

impl Block {
    /// A plain text block.
    pub fn text(text: impl Into<String>) -> Self {
        Block::Text(TextBlock {
            text: text.into(),
            extra: Extra::new(),
        })
    }

    /// A tool_use block.
    pub fn tool_use(id: impl Into<String>, name: impl Into<String>, input: Value) -> Self {
        Block::ToolUse(ToolUse {
            id: id.into(),
            name: name.into(),
            input,
            extra: Extra::new(),
        })
    }

    /// A tool_result block with string content; `is_error` is set only when true.
    pub fn tool_result(
        tool_use_id: impl Into<String>,
        content: impl Into<String>,
        is_error: bool,
    ) -> Self {
        Block::ToolResult(ToolResult {
            tool_use_id: tool_use_id.into(),
            content: Some(ToolResultContent::Text(content.into())),
            is_error: is_error.then_some(true),
            extra: Extra::new(),
        })
    }

    /// The wire `type` of this block.
    pub fn type_name(&self) -> &str {
        match self {
            Block::Text(_) => "text",
            Block::ToolUse(_) => "tool_use",
            Block::ToolResult(_) => "tool_result",
            Block::Thinking(_) => "thinking",
            Block::RedactedThinking(_) => "redacted_thinking",
            Block::Image(_) => "image",
            Block::Unknown(v) => v.get("type").and_then(Value::as_str).unwrap_or("unknown"),
        }
    }

    /// The tool_use, if this is one.
    pub fn as_tool_use(&self) -> Option<&ToolUse> {
        match self {
            Block::ToolUse(t) => Some(t),
            _ => None,
        }
    }

    /// The tool_result, if this is one.
    pub fn as_tool_result(&self) -> Option<&ToolResult> {
        match self {
            Block::ToolResult(t) => Some(t),
            _ => None,
        }
    }

    /// Characters of this block's compact JSON serialization.
    pub fn json_chars(&self) -> usize {
        json_chars(self)
    }
}

impl ToolResult {
    /// The output as text: the string, or the text blocks joined by newlines.
    /// Non-text blocks are not included; see [`ToolResult::full_text`].
    pub fn text(&self) -> String {
        match &self.content {
            None => String::new(),
            Some(ToolResultContent::Text(s)) => s.clone(),
            Some(ToolResultContent::Blocks(blocks)) => join_text_blocks(blocks),
        }
    }

    /// Everything the content holds, as one string that loses nothing: the
    /// string itself, the joined text when all blocks are text, or else the
    /// blocks as JSON. Borrowed when the content is one string, as big
    /// outputs are: saving one should not first copy it.
    pub fn full_text(&self) -> Cow<'_, str> {
        match &self.content {
            None => Cow::Borrowed(""),
            Some(ToolResultContent::Text(s)) => Cow::Borrowed(s),
            Some(ToolResultContent::Blocks(blocks))
                if blocks.iter().any(|b| !matches!(b, Block::Text(_))) =>
            {
                Cow::Owned(serde_json::to_string(blocks).unwrap_or_default())
            }
            Some(ToolResultContent::Blocks(blocks)) => Cow::Owned(join_text_blocks(blocks)),
        }
    }

    /// Characters of the content alone, as serialized (the seed's `len(str(content))`).
    pub fn content_chars(&self) -> usize {
        match &self.content {
            None => 0,
            Some(ToolResultContent::Text(s)) => s.chars().count(),
            Some(c) => json_chars(c),
        }
    }

    /// This result with `content` in place of its own, which is not
    /// copied: replacing a big output by a marker should not first copy it.
    pub fn with_content(&self, content: ToolResultContent) -> ToolResult {
        ToolResult {
            tool_use_id: self.tool_use_id.clone(),
            content: Some(content),
            is_error: self.is_error,
            extra: self.extra.clone(),
        }
    }

    /// The content if it is a plain string.
    pub fn content_str(&self) -> Option<&str> {
        match &self.content {
            Some(ToolResultContent::Text(s)) => Some(s),
            _ => None,
        }
    }
}

/// The text blocks among `blocks`, joined by newlines: what a message or a
/// tool result says, without its tool calls, images or thinking.
fn join_text_blocks(blocks: &[Block]) -> String {
    let mut out = String::new();
    for b in blocks {
        if let Block::Text(t) = b {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(&t.text);
        }
    }
    out
}

impl Serialize for Block {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Tagged<'a, T: Serialize> {
            #[serde(rename = "type")]
            ty: &'static str,
            #[serde(flatten)]
            inner: &'a T,
        }
        match self {
            Block::Text(b) => Tagged {
                ty: "text",
                inner: b,
            }
            .serialize(serializer),
            Block::ToolUse(b) => Tagged {
                ty: "tool_use",
                inner: b,
            }
            .serialize(serializer),
            Block::ToolResult(b) => Tagged {
                ty: "tool_result",
                inner: b,
            }
            .serialize(serializer),
            Block::Thinking(b) => Tagged {
                ty: "thinking",
                inner: b,
            }
            .serialize(serializer),
            Block::RedactedThinking(b) => Tagged {
                ty: "redacted_thinking",
                inner: b,
            }
            .serialize(serializer),
            Block::Image(b) => Tagged {
                ty: "image",
                inner: b,
            }
            .serialize(serializer),
            Block::Unknown(v) => v.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for Block {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        if !value.is_object() {
            return Err(de::Error::custom("a content block must be a JSON object"));
        }
        Ok(Block::from_value(value))
    }
}

impl Block {
    /// Types a block from raw JSON, falling back to [`Block::Unknown`] whenever
    /// the typed form would not re-serialize to the same JSON.
    pub fn from_value(value: Value) -> Block {
        let typed = match value.get("type").and_then(Value::as_str) {
            Some("text") => typed_block(&value, Block::Text),
            Some("tool_use") => typed_block(&value, Block::ToolUse),
            Some("tool_result") => typed_block(&value, Block::ToolResult),
            Some("thinking") => typed_block(&value, Block::Thinking),
            Some("redacted_thinking") => typed_block(&value, Block::RedactedThinking),
            Some("image") => typed_block(&value, Block::Image),
            _ => None,
        };
        match typed {
            Some(block) if serde_json::to_value(&block).ok().as_ref() == Some(&value) => block,
            _ => Block::Unknown(value),
        }
    }
}

/// A typed struct of a known block type carries the `type` key in its `extra`
/// after deserialization; this trims it.
trait HasExtra {
    fn extra_mut(&mut self) -> &mut Extra;
}

macro_rules! has_extra {
    ($($t:ty),*) => {$(impl HasExtra for $t { fn extra_mut(&mut self) -> &mut Extra { &mut self.extra } })*};
}
has_extra!(
    TextBlock,
    ToolUse,
    ToolResult,
    Thinking,
    RedactedThinking,
    Image
);

fn typed_block<T>(value: &Value, wrap: fn(T) -> Block) -> Option<Block>
where
    T: for<'a> Deserialize<'a> + HasExtra,
{
    let mut inner = T::deserialize(value).ok()?;
    inner.extra_mut().remove("type");
    Some(wrap(inner))
}

/// A tool the model may be offered: its name, what it is for, and a JSON
/// Schema of its input, in the Anthropic `tools` wire shape. Defined here,
/// with the rest of the conversation model, so that the tools crate and the
/// providers share one type.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The name the model calls it by.
    pub name: String,
    /// What it does and when to use it; the model reads this.
    pub description: String,
    /// JSON Schema of the `input` object.
    pub input_schema: Value,
}

/// A message: role, content, and any other fields it carried.
///
/// Fields are private so that the cached sizes cannot go stale: mutation goes
/// through methods that keep them exact.
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    role: Role,
    content: Content,
    extra: Extra,
    /// Characters of this message's compact JSON.
    chars: usize,
    /// Characters of each block, when the content is blocks.
    block_chars: Vec<usize>,
}

impl Message {
    /// A message with the given role and content.
    pub fn new(role: Role, content: Content) -> Self {
        Self::with_extra(role, content, Extra::new())
    }

    /// A message that also carries fields we do not model.
    pub fn with_extra(role: Role, content: Content, extra: Extra) -> Self {
        let block_chars = match &content {
            Content::Text(_) => Vec::new(),
            Content::Blocks(blocks) => blocks.iter().map(json_chars).collect(),
        };
        let mut message = Message {
            role,
            content,
            extra,
            chars: 0,
            block_chars,
        };
        message.chars = message.compute_chars();
        message
    }

    /// A user message with string content.
    pub fn user(text: impl Into<String>) -> Self {
        Self::new(Role::User, Content::Text(text.into()))
    }

    /// An assistant message with string content.
    pub fn assistant(text: impl Into<String>) -> Self {
        Self::new(Role::Assistant, Content::Text(text.into()))
    }

    /// A user message made of blocks.
    pub fn user_blocks(blocks: Vec<Block>) -> Self {
        Self::new(Role::User, Content::Blocks(blocks))
    }

    /// An assistant message made of blocks.
    pub fn assistant_blocks(blocks: Vec<Block>) -> Self {
        Self::new(Role::Assistant, Content::Blocks(blocks))
    }

    /// Who wrote it.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The content as received.
    pub fn content(&self) -> &Content {
        &self.content
    }

    /// Fields other than `role` and `content`.
    pub fn extra(&self) -> &Extra {
        &self.extra
    }

    /// The blocks, or an empty slice when the content is a string.
    pub fn blocks(&self) -> &[Block] {
        match &self.content {
            Content::Blocks(b) => b,
            Content::Text(_) => &[],
        }
    }

    /// Characters of this message's compact JSON serialization (cached).
    pub fn chars(&self) -> usize {
        self.chars
    }

    /// Characters of block `index`'s JSON (cached), if it exists.
    pub fn block_chars(&self, index: usize) -> Option<usize> {
        self.block_chars.get(index).copied()
    }

    /// The tool_use blocks of this message.
    pub fn tool_uses(&self) -> impl Iterator<Item = &ToolUse> {
        self.blocks().iter().filter_map(Block::as_tool_use)
    }

    /// The tool_result blocks of this message.
    pub fn tool_results(&self) -> impl Iterator<Item = &ToolResult> {
        self.blocks().iter().filter_map(Block::as_tool_result)
    }

    /// Whether this is an assistant message that calls at least one tool.
    pub fn has_tool_use(&self) -> bool {
        self.role == Role::Assistant && self.tool_uses().next().is_some()
    }

    /// Whether this is a user message that answers at least one tool_use.
    pub fn has_tool_result(&self) -> bool {
        self.role == Role::User && self.tool_results().next().is_some()
    }

    /// The message's text: the string content, or its text blocks joined.
    pub fn text(&self) -> String {
        match &self.content {
            Content::Text(s) => s.clone(),
            Content::Blocks(blocks) => join_text_blocks(blocks),
        }
    }

    /// Replaces block `index` and returns the old one, keeping sizes exact.
    /// Returns `None` (and changes nothing) when there is no such block.
    pub fn replace_block(&mut self, index: usize, block: Block) -> Option<Block> {
        let Content::Blocks(blocks) = &mut self.content else {
            return None;
        };
        let slot = blocks.get_mut(index)?;
        let new_chars = json_chars(&block);
        let old = std::mem::replace(slot, block);
        let old_chars = std::mem::replace(&mut self.block_chars[index], new_chars);
        self.chars = self.chars + new_chars - old_chars;
        Some(old)
    }

    /// This message with `replacements[i]`, where it is `Some`, in place of
    /// block `i`; `None` when it has no blocks. The blocks replaced are not
    /// copied (they can be megabytes of output).
    pub fn with_blocks_replaced(&self, replacements: Vec<Option<Block>>) -> Option<Message> {
        let Content::Blocks(blocks) = &self.content else {
            return None;
        };
        let mut replacements = replacements.into_iter();
        let blocks = blocks
            .iter()
            .map(|b| replacements.next().flatten().unwrap_or_else(|| b.clone()))
            .collect();
        Some(Message::with_extra(
            self.role,
            Content::Blocks(blocks),
            self.extra.clone(),
        ))
    }

    /// Consumes the message, returning its parts.
    pub fn into_parts(self) -> (Role, Content, Extra) {
        (self.role, self.content, self.extra)
    }

    fn compute_chars(&self) -> usize {
        // {"role":"user","content":<content>[,"k":v]*}
        let mut n = "{\"role\":\"\",\"content\":}".len() + self.role.as_str().len();
        n += match &self.content {
            Content::Text(s) => json_str_chars(s),
            Content::Blocks(_) => {
                2 + self.block_chars.iter().sum::<usize>()
                    + self.block_chars.len().saturating_sub(1)
            }
        };
        for (k, v) in &self.extra {
            n += 2 + json_chars(k) + json_chars(v);
        }
        n
    }
}

impl Serialize for Message {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(2 + self.extra.len()))?;
        map.serialize_entry("role", &self.role)?;
        map.serialize_entry("content", &self.content)?;
        for (k, v) in &self.extra {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut map = Map::<String, Value>::deserialize(deserializer)?;
        let role: Role = match map.remove("role") {
            Some(r) => Role::deserialize(r).map_err(|e| de::Error::custom(format!("role: {e}")))?,
            None => return Err(de::Error::missing_field("role")),
        };
        let content: Content = match map.remove("content") {
            Some(Value::String(s)) => Content::Text(s),
            Some(Value::Array(items)) => {
                let mut blocks = Vec::with_capacity(items.len());
                for item in items {
                    if !item.is_object() {
                        return Err(de::Error::custom("a content block must be a JSON object"));
                    }
                    blocks.push(Block::from_value(item));
                }
                Content::Blocks(blocks)
            }
            Some(_) => return Err(de::Error::custom("content must be a string or an array")),
            None => return Err(de::Error::missing_field("content")),
        };
        Ok(Message::with_extra(role, content, map))
    }
}

/// Counts characters (not bytes) written through it.
struct CharCounter(usize);

impl io::Write for CharCounter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0 += buf.iter().filter(|b| (**b & 0xC0) != 0x80).count();
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Characters a string takes as a JSON string (quotes and escapes
/// included): [`json_chars`] of a `str`, counted a byte at a time rather
/// than serialized, since every message of text is counted when it is
/// made, compaction markers (a few thousand characters) included.
pub fn json_str_chars(text: &str) -> usize {
    // serde_json escapes `"`, `\\` and the C0 controls: \b \t \n \f \r in
    // two characters, the others as \u00XX; a UTF-8 continuation byte adds
    // no character.
    const fn chars_of(b: u8) -> u8 {
        match b {
            b'"' | b'\\' | 0x08 | 0x09 | 0x0A | 0x0C | 0x0D => 2,
            0x00..=0x1F => 6,
            0x80..=0xBF => 0,
            _ => 1,
        }
    }
    const TABLE: [u8; 256] = {
        let mut table = [0u8; 256];
        let mut b = 0;
        while b < 256 {
            table[b] = chars_of(b as u8);
            b += 1;
        }
        table
    };
    2 + text
        .bytes()
        .map(|b| usize::from(TABLE[usize::from(b)]))
        .sum::<usize>()
}

/// What kind of JSON value this is, with its article ("a string", "an
/// object", "null"), for one-line errors about malformed input.
pub fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Characters of `value`'s compact JSON serialization, without allocating it.
///
/// This is the crate's one measure of size in characters; everything else
/// derives from it.
pub fn json_chars<T: Serialize + ?Sized>(value: &T) -> usize {
    let mut counter = CharCounter(0);
    match serde_json::to_writer(&mut counter, value) {
        Ok(()) => counter.0,
        Err(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    proptest! {
        /// Counted a byte at a time, a string is as long as serialized:
        /// controls, quotes, backslashes and wide characters included.
        #[test]
        fn a_string_is_counted_as_serialized(
            text in "(\\PC|[\\x00-\\x1f\"\\\\\u{7f}-\u{9f}é€😀])*",
        ) {
            prop_assert_eq!(json_str_chars(&text), json_chars(&text));
        }

        #[test]
        fn any_string_is_counted_as_serialized(text in any::<String>()) {
            prop_assert_eq!(json_str_chars(&text), json_chars(&text));
        }
    }

    fn round_trip(v: Value) {
        let m: Message = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(serde_json::to_value(&m).unwrap(), v);
        assert_eq!(
            m.chars(),
            serde_json::to_string(&m).unwrap().chars().count()
        );
    }

    #[test]
    fn known_blocks_round_trip_with_unknown_fields() {
        round_trip(json!({"role": "user", "content": [
            {"type": "text", "text": "hé", "cache_control": {"type": "ephemeral"}},
            {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "x"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAA"}}]},
            {"type": "tool_result", "tool_use_id": "t2", "content": "ok", "is_error": false},
            {"type": "tool_result", "tool_use_id": "t3"},
        ]}));
        round_trip(json!({"role": "assistant", "id": "msg_1", "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "c2ln=="},
            {"type": "redacted_thinking", "data": "abc"},
            {"type": "tool_use", "id": "t1", "name": "bash", "input": {"command": "ls"}},
            {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {}},
            {"type": "compaction", "content": "..."},
        ]}));
    }

    #[test]
    fn odd_shapes_become_unknown_and_still_round_trip() {
        // is_error: null would be dropped by the typed form, so it stays raw.
        let v = json!({"type": "tool_result", "tool_use_id": "t", "is_error": null});
        assert!(matches!(Block::from_value(v.clone()), Block::Unknown(_)));
        round_trip(json!({"role": "user", "content": [v, {"type": "tool_use", "id": 3}]}));
    }

    #[test]
    fn replacing_blocks_without_copying_them_is_replacing_them() {
        let mut big = ToolResult {
            tool_use_id: "a".into(),
            content: Some(ToolResultContent::Text("x".repeat(5_000))),
            is_error: Some(false),
            extra: Default::default(),
        };
        big.extra
            .insert("cache_control".into(), json!({"type": "ephemeral"}));
        let m = Message::user_blocks(vec![
            Block::text("before"),
            Block::ToolResult(big.clone()),
            Block::tool_result("b", "small", true),
        ]);
        let marker = big.with_content(ToolResultContent::Text("[saved]".into()));
        assert_eq!(
            (&marker.tool_use_id, marker.is_error, &marker.extra),
            (&big.tool_use_id, big.is_error, &big.extra)
        );
        let replaced = m
            .with_blocks_replaced(vec![None, Some(Block::ToolResult(marker.clone()))])
            .unwrap();
        let mut expected = m.clone();
        expected.replace_block(1, Block::ToolResult(marker));
        assert_eq!(replaced, expected);
        assert_eq!(replaced.chars(), expected.chars());
        assert_eq!(
            replaced.chars(),
            serde_json::to_string(&replaced).unwrap().chars().count()
        );
        assert!(Message::user("text").with_blocks_replaced(vec![]).is_none());
    }

    #[test]
    fn replace_block_keeps_sizes_exact() {
        let mut m = Message::user_blocks(vec![
            Block::tool_result("a", "x".repeat(500), false),
            Block::text("tail"),
        ]);
        m.replace_block(0, Block::tool_result("a", "short ü", true));
        assert_eq!(
            m.chars(),
            serde_json::to_string(&m).unwrap().chars().count()
        );
        assert!(m.replace_block(5, Block::text("no")).is_none());
    }

    #[test]
    fn malformed_messages_are_errors_not_panics() {
        for v in [
            json!({"content": "x"}),
            json!({"role": "system", "content": "x"}),
            json!({"role": "user"}),
            json!({"role": "user", "content": 3}),
            json!({"role": "user", "content": [1]}),
        ] {
            assert!(serde_json::from_value::<Message>(v).is_err());
        }
    }
}
