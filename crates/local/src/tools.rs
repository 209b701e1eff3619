//! Tool use for models without a native tool API: a text protocol in the system prompt,
//! and a parser that turns the spans the model writes into `tool_use` blocks.
//!
//! The protocol (the one Hermes and Qwen2.5 models are trained on):
//!
//! ```text
//! <tool_call>
//! {"name": "read_file", "arguments": {"path": "src/main.rs"}}
//! </tool_call>
//! ```
//!
//! A span whose body is not a JSON object with a string `name` and an object `arguments`
//! (or `parameters`, or a string holding an object) stays text. A span left open when the
//! model stops counts if its body is a complete call. Results go back as
//! `<tool_response name="...">...</tool_response>` user text, or in the template's `tool`
//! role when it has one.

use serde_json::{Map, Value, json};
use whittle_protocol::Block;

/// Opens a tool call in model output.
pub const TOOL_CALL_OPEN: &str = "<tool_call>";
/// Closes a tool call in model output.
pub const TOOL_CALL_CLOSE: &str = "</tool_call>";

pub use whittle_protocol::ToolSpec;

/// The system-prompt section that lists the tools and teaches the call syntax.
pub fn tools_prompt(tools: &[ToolSpec]) -> String {
    let mut out = String::from(
        "# Tools\n\nYou may call one or more tools to help with the user's request. \
         The tools, as JSON schemas:\n<tools>\n",
    );
    for tool in tools {
        let schema = json!({
            "name": tool.name,
            "description": first_sentence(&tool.description),
            "parameters": brief_schema(&tool.input_schema),
        });
        out.push_str(&schema.to_string());
        out.push('\n');
    }
    out.push_str(
        "</tools>\n\nTo call a tool, write one span of exactly this form per call:\n\
         <tool_call>\n{\"name\": \"<tool name>\", \"arguments\": {<arguments as a JSON object>}}\n</tool_call>\n\
         Then stop. Each result comes back in the next message as \
         <tool_response name=\"<tool name>\">...</tool_response>.",
    );
    if let Some(first) = tools.first() {
        // Small models follow an example far more often than a description.
        out.push_str("\n\nFor example:\n");
        out.push_str(&format_tool_call(
            &first.name,
            &example_arguments(&first.input_schema),
        ));
    }
    out
}

/// A description's first sentence: what a small model reads of it, at a fraction of the
/// prompt (the rest is advice for large models).
fn first_sentence(description: &str) -> &str {
    description
        .match_indices(". ")
        .next()
        .map_or(description, |(at, _)| &description[..=at])
}

/// A parameters schema down to what a call needs: each property's type (or enum, or item
/// type), and which are required; titles, descriptions and formats go.
fn brief_schema(schema: &Value) -> Value {
    let mut properties = Map::new();
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, p) in props {
            let mut brief = Map::new();
            for key in ["type", "enum", "items"] {
                if let Some(v) = p.get(key) {
                    let v = match (key, v.get("type")) {
                        ("items", Some(t)) => json!({ "type": t }),
                        _ => v.clone(),
                    };
                    brief.insert(key.to_string(), v);
                }
            }
            properties.insert(name.clone(), Value::Object(brief));
        }
    }
    let mut out = Map::new();
    out.insert("type".into(), json!("object"));
    out.insert("properties".into(), Value::Object(properties));
    if let Some(required) = schema.get("required") {
        out.insert("required".into(), required.clone());
    }
    Value::Object(out)
}

/// Placeholder arguments for a schema: its required properties (or its first three), each
/// with a value of its type.
fn example_arguments(schema: &Value) -> Value {
    let empty = Map::new();
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut args = Map::new();
    for (name, property) in properties {
        if (required.is_empty() && args.len() < 3) || required.contains(&name.as_str()) {
            let value = match property.get("type").and_then(Value::as_str) {
                Some("integer" | "number") => json!(1),
                Some("boolean") => json!(true),
                Some("array") => json!([]),
                Some("object") => json!({}),
                _ => json!("..."),
            };
            args.insert(name.clone(), value);
        }
    }
    Value::Object(args)
}

/// How a tool call is written back into the history the model sees.
pub fn format_tool_call(name: &str, input: &Value) -> String {
    format!(
        "{TOOL_CALL_OPEN}\n{}\n{TOOL_CALL_CLOSE}",
        json!({"name": name, "arguments": input})
    )
}

/// How a tool result is written as user text when the template has no tool role.
pub fn format_tool_response(name: &str, content: &str, is_error: bool) -> String {
    let name = json!(name);
    let error = if is_error { " error=\"true\"" } else { "" };
    format!("<tool_response name={name}{error}>\n{content}\n</tool_response>")
}

/// A piece of parsed model output.
#[derive(Clone, Debug, PartialEq)]
pub enum Segment {
    /// Text to show (including any malformed tool-call span, verbatim).
    Text(String),
    /// A well-formed tool call.
    ToolCall {
        /// The tool's name.
        name: String,
        /// Its arguments, always a JSON object.
        input: Value,
    },
}

/// Splits streamed model output into text and tool calls as it arrives.
///
/// Text that might be the start of `<tool_call>` is held back until it is known not to
/// be; a span's text is withheld until it closes, then becomes a call or, if malformed,
/// text. So the streamed text is exactly the text of the final blocks.
#[derive(Debug, Default)]
pub struct ToolCallParser {
    buf: String,
    in_call: bool,
}

impl ToolCallParser {
    /// A parser at the start of a reply.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds generated text; returns the segments now complete.
    pub fn push(&mut self, text: &str) -> Vec<Segment> {
        self.buf.push_str(text);
        let mut out = Vec::new();
        loop {
            if self.in_call {
                let Some(close) = self.buf.find(TOOL_CALL_CLOSE) else {
                    return out;
                };
                let end = close + TOOL_CALL_CLOSE.len();
                let span: String = self.buf.drain(..end).collect();
                let body = &span[TOOL_CALL_OPEN.len()..close];
                out.push(match parse_call(body) {
                    Some(call) => call,
                    None => Segment::Text(span.clone()),
                });
                self.in_call = false;
            } else if let Some(open) = self.buf.find(TOOL_CALL_OPEN) {
                if open > 0 {
                    out.push(Segment::Text(self.buf.drain(..open).collect()));
                }
                self.in_call = true;
            } else {
                let keep = partial_suffix(&self.buf, TOOL_CALL_OPEN);
                let emit = self.buf.len() - keep;
                if emit > 0 {
                    out.push(Segment::Text(self.buf.drain(..emit).collect()));
                }
                return out;
            }
        }
    }

    /// Ends the reply: held-back text is released, and an unclosed span counts as a call
    /// only if its whole body is one.
    pub fn finish(self) -> Vec<Segment> {
        if self.buf.is_empty() {
            return Vec::new();
        }
        if self.in_call
            && let Some(call) = parse_call(&self.buf[TOOL_CALL_OPEN.len()..])
        {
            return vec![call];
        }
        vec![Segment::Text(self.buf)]
    }
}

/// Length of the longest suffix of `text` that is a proper prefix of `marker`.
fn partial_suffix(text: &str, marker: &str) -> usize {
    (1..marker.len())
        .rev()
        .find(|&k| text.ends_with(&marker[..k]))
        .unwrap_or(0)
}

/// Parses the body of a span: `{"name": str, "arguments": object}`.
fn parse_call(body: &str) -> Option<Segment> {
    let Value::Object(mut call) = serde_json::from_str::<Value>(body.trim()).ok()? else {
        return None;
    };
    let name = match call.remove("name")? {
        Value::String(s) if !s.trim().is_empty() => s.trim().to_string(),
        _ => return None,
    };
    let args = call
        .remove("arguments")
        .or_else(|| call.remove("parameters"));
    let input = match args {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(Value::Object(o)) => Value::Object(o),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(&s).ok()? {
            Value::Object(o) => Value::Object(o),
            _ => return None,
        },
        Some(_) => return None,
    };
    Some(Segment::ToolCall { name, input })
}

/// Turns parsed segments into content blocks: adjacent text joined and trimmed (blank
/// text dropped), each call a `tool_use` with a fresh id.
pub fn segments_to_blocks(segments: Vec<Segment>) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut text = String::new();
    let flush = |text: &mut String, blocks: &mut Vec<Block>| {
        let trimmed = text.trim();
        if !trimmed.is_empty() {
            blocks.push(Block::text(trimmed));
        }
        text.clear();
    };
    for segment in segments {
        match segment {
            Segment::Text(t) => text.push_str(&t),
            Segment::ToolCall { name, input } => {
                flush(&mut text, &mut blocks);
                blocks.push(Block::tool_use(fresh_tool_use_id(), name, input));
            }
        }
    }
    flush(&mut text, &mut blocks);
    blocks
}

/// Parses a whole reply into text and `tool_use` blocks.
pub fn parse_tool_calls(text: &str) -> Vec<Block> {
    let mut parser = ToolCallParser::new();
    let mut segments = parser.push(text);
    segments.extend(parser.finish());
    segments_to_blocks(segments)
}

/// A tool_use id for a call the embedded model wrote (it gives none).
pub fn fresh_tool_use_id() -> String {
    whittle_protocol::fresh_tool_use_id("toolu_local_")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn stream(pieces: &[&str]) -> Vec<Segment> {
        let mut p = ToolCallParser::new();
        let mut out: Vec<Segment> = pieces.iter().flat_map(|s| p.push(s)).collect();
        out.extend(p.finish());
        out
    }

    fn texts(segments: &[Segment]) -> String {
        segments
            .iter()
            .filter_map(|s| match s {
                Segment::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn the_tools_section_keeps_names_types_and_first_sentences_only() {
        let spec = ToolSpec {
            name: "read_file".into(),
            description: "Read a text file. Lines are numbered like `cat -n`.".into(),
            input_schema: json!({"$schema": "x", "title": "ReadFileInput", "type": "object",
                "properties": {"path": {"type": "string", "description": "A long story."},
                    "mode": {"enum": ["a", "b"], "description": "more"},
                    "paths": {"type": "array", "items": {"type": "string", "format": "path"}}},
                "required": ["path"]}),
        };
        let prompt = tools_prompt(&[spec]);
        assert!(
            prompt.contains("\"description\":\"Read a text file.\""),
            "{prompt}"
        );
        assert!(prompt.contains("\"required\":[\"path\"]"), "{prompt}");
        assert!(
            prompt.contains("\"items\":{\"type\":\"string\"}"),
            "{prompt}"
        );
        for gone in [
            "cat -n",
            "A long story",
            "ReadFileInput",
            "$schema",
            "format",
        ] {
            assert!(!prompt.contains(gone), "{gone} in {prompt}");
        }
        assert_eq!(first_sentence("No period"), "No period");
    }

    #[test]
    fn hand_written_calls_become_tool_use_blocks() {
        let text = "Let me look.\n<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.rs\"}}\n</tool_call>\n<tool_call>{\"name\":\"bash\",\"parameters\":\"{\\\"command\\\":\\\"ls\\\"}\"}</tool_call>";
        let blocks = parse_tool_calls(text);
        assert_eq!(blocks.len(), 3);
        assert_eq!(blocks[0], Block::text("Let me look."));
        let a = blocks[1].as_tool_use().unwrap();
        assert_eq!(
            (a.name.as_str(), &a.input),
            ("read_file", &json!({"path": "a.rs"}))
        );
        let b = blocks[2].as_tool_use().unwrap();
        assert_eq!(
            (b.name.as_str(), &b.input),
            ("bash", &json!({"command": "ls"}))
        );
        assert_ne!(a.id, b.id);
        assert!(a.id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
    }

    #[test]
    fn malformed_spans_stay_text() {
        for text in [
            "<tool_call>not json</tool_call>",
            "<tool_call>{\"arguments\": {}}</tool_call>",
            "<tool_call>{\"name\": 3}</tool_call>",
            "<tool_call>{\"name\": \"x\", \"arguments\": [1]}</tool_call>",
            "<tool_call>[\"x\"]</tool_call>",
            "<tool_call>{\"name\": \"x\"",
            "</tool_call><tool_call",
        ] {
            assert_eq!(parse_tool_calls(text), vec![Block::text(text)], "{text}");
        }
    }

    #[test]
    fn unclosed_complete_call_counts_and_no_arguments_means_empty() {
        let blocks = parse_tool_calls("ok <tool_call>{\"name\": \"todo\"}\n");
        assert_eq!(blocks.len(), 2);
        assert_eq!(blocks[1].as_tool_use().unwrap().input, json!({}));
    }

    #[test]
    fn streaming_holds_back_partial_markers() {
        let mut p = ToolCallParser::new();
        assert_eq!(p.push("hi <tool_"), vec![Segment::Text("hi ".into())]);
        assert_eq!(p.push("call>{\"name\""), vec![]);
        let out = p.push(": \"a\"}</tool_call> bye <");
        assert!(matches!(&out[0], Segment::ToolCall { name, .. } if name == "a"));
        assert_eq!(out[1], Segment::Text(" bye ".into()));
        assert_eq!(p.finish(), vec![Segment::Text("<".into())]);
    }

    proptest! {
        /// However the output is cut into pieces, the segments are the same, and with no
        /// valid call the text survives byte for byte.
        #[test]
        fn chunking_does_not_change_the_result(
            parts in proptest::collection::vec("(<tool_call>|</tool_call>|\\{\"name\": \"t\"\\}|[a-z<>/ ]{0,6}|é)", 0..12),
            cuts in proptest::collection::vec(0usize..40, 0..6),
        ) {
            let text: String = parts.concat();
            let whole = stream(&[&text]);
            let mut pieces = Vec::new();
            let mut rest = text.as_str();
            for c in cuts {
                let mut c = c.min(rest.len());
                while !rest.is_char_boundary(c) { c -= 1; }
                let (a, b) = rest.split_at(c);
                pieces.push(a);
                rest = b;
            }
            pieces.push(rest);
            let chunked = stream(&pieces);
            prop_assert_eq!(texts(&whole), texts(&chunked));
            prop_assert_eq!(whole.len() - whole.iter().filter(|s| matches!(s, Segment::Text(_))).count(),
                chunked.len() - chunked.iter().filter(|s| matches!(s, Segment::Text(_))).count());
            if !whole.iter().any(|s| matches!(s, Segment::ToolCall { .. })) {
                prop_assert_eq!(texts(&whole), text);
            }
        }
    }
}
