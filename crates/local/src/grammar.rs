//! A tool call constrained to valid JSON for a tool on the list, as llama.cpp constrains
//! output with a GBNF grammar built from a JSON schema.
//!
//! A 135M model asked for `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` writes
//! a near miss as often as a call: a name that is no tool, a key the schema does not have,
//! an unclosed brace. During sampling the engine offers the model only the tokens whose
//! text keeps [`CallState`] alive, so what it writes is a call that parses, names a listed
//! tool and has that tool's required arguments, each of its schema type.
//!
//! The grammar is a character-level pushdown matcher (a stack of goals), built once per
//! request from the tools' schemas: `properties` with `type` string, integer, number,
//! boolean, array of strings, or a string `enum`; any other property takes a JSON scalar.
//! Whitespace is allowed only where the protocol's examples put it (a newline around the
//! JSON, one space after `:` and `,`), so the model cannot stall on blanks; strings and
//! numbers have a length cap for the same reason.

use crate::tools::{TOOL_CALL_CLOSE, TOOL_CALL_OPEN, ToolSpec};
use serde_json::Value;
use std::sync::Arc;

/// A string's `escape` state after `\uD`: three hex digits owed, the next one 0-7.
const AFTER_HEX_D: u8 = 6;

/// Longest string value (characters).
const MAX_STRING: usize = 1000;
/// Most digits of a number.
const MAX_DIGITS: usize = 15;
/// Most properties a schema may have for the matcher (a bit set tracks the seen ones).
const MAX_PROPERTIES: usize = 64;

/// What a property's value may be.
#[derive(Clone, Debug, PartialEq)]
enum ValueType {
    String,
    Integer,
    Number,
    Boolean,
    StringArray,
    /// One of these strings (a schema `enum`).
    Enum(Arc<[String]>),
    /// Any JSON scalar (string, number, boolean, null).
    Scalar,
}

#[derive(Debug)]
struct Property {
    /// The key with its quotes, as written in the call: `"path"`.
    quoted: String,
    value: ValueType,
    required: bool,
}

#[derive(Debug)]
struct ToolShape {
    properties: Vec<Property>,
    /// No `properties` in the schema: any keys, each with a scalar value.
    open: bool,
}

/// The calls a request's tools allow.
#[derive(Debug, Clone)]
pub struct ToolCallGrammar {
    inner: Arc<Grammar>,
}

#[derive(Debug)]
struct Grammar {
    /// Tool names with their quotes.
    names: Arc<[String]>,
    tools: Vec<ToolShape>,
}

impl ToolCallGrammar {
    /// The grammar of a call to one of `tools` (`None` when there are none).
    pub fn new(tools: &[ToolSpec]) -> Option<Self> {
        if tools.is_empty() {
            return None;
        }
        let names: Arc<[String]> = tools.iter().map(|t| quoted(&t.name)).collect();
        let tools = tools.iter().map(|t| shape(&t.input_schema)).collect();
        Some(ToolCallGrammar {
            inner: Arc::new(Grammar { names, tools }),
        })
    }

    /// A matcher at the start of a call: `<tool_call>` comes first.
    pub fn start(&self) -> CallState {
        let mut state = self.after_open();
        state.stack.push(Goal::Lit(TOOL_CALL_OPEN.into(), 0));
        state
    }

    /// A matcher just after a `<tool_call>` the model wrote itself.
    pub fn after_open(&self) -> CallState {
        // Bottom to top: what is matched last comes first.
        let stack = vec![
            Goal::Lit(TOOL_CALL_CLOSE.into(), 0),
            Goal::Space {
                left: 2,
                newline: true,
            },
            Goal::Lit("}".into(), 0),
            Goal::Choice {
                options: self.inner.names.clone(),
                typed: String::new(),
                then: AfterChoice::Arguments,
            },
            Goal::Space {
                left: 1,
                newline: false,
            },
            Goal::Lit("{\"name\":".into(), 0),
            Goal::Space {
                left: 2,
                newline: true,
            },
        ];
        CallState {
            grammar: self.inner.clone(),
            stack,
        }
    }
}

fn quoted(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

fn shape(schema: &Value) -> ToolShape {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut properties = Vec::new();
    let props = schema.get("properties").and_then(Value::as_object);
    let open = props.is_none();
    if let Some(props) = props {
        for (name, p) in props.iter().take(MAX_PROPERTIES) {
            properties.push(Property {
                quoted: quoted(name),
                value: value_type(p),
                required: required.contains(&name.as_str()),
            });
        }
    }
    ToolShape { properties, open }
}

fn value_type(p: &Value) -> ValueType {
    if let Some(options) = p.get("enum").and_then(Value::as_array) {
        let strings: Vec<String> = options
            .iter()
            .filter_map(Value::as_str)
            .map(quoted)
            .collect();
        if !strings.is_empty() && strings.len() == options.len() {
            return ValueType::Enum(strings.into());
        }
    }
    match p.get("type").and_then(Value::as_str) {
        Some("string") => ValueType::String,
        Some("integer") => ValueType::Integer,
        Some("number") => ValueType::Number,
        Some("boolean") => ValueType::Boolean,
        Some("array")
            if p.pointer("/items/type").and_then(Value::as_str) == Some("string")
                || p.get("items").is_none() =>
        {
            ValueType::StringArray
        }
        _ => ValueType::Scalar,
    }
}

/// What a finished [`Goal::Choice`] leads to.
#[derive(Clone, Debug)]
enum AfterChoice {
    /// A tool name: its arguments object follows.
    Arguments,
    /// A literal value: nothing.
    Nothing,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum ObjectPhase {
    Open,
    FirstKeyOrClose,
    Key,
    CommaOrClose,
    AfterComma,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum ArrayPhase {
    Open,
    FirstOrClose,
    CommaOrClose,
    AfterComma,
}

#[derive(Clone, Debug)]
enum Goal {
    /// Exactly this text (from the given byte offset on).
    Lit(Arc<str>, usize),
    /// Up to `left` blanks (spaces, and newlines when `newline`), or none.
    Space {
        left: u8,
        newline: bool,
    },
    /// One of `options` (each written out whole, quotes included).
    Choice {
        options: Arc<[String]>,
        typed: String,
        then: AfterChoice,
    },
    /// The arguments object of tool `tool`.
    Object {
        tool: usize,
        seen: u64,
        phase: ObjectPhase,
        key: String,
    },
    /// A JSON string: `len` characters so far, `escape` hex digits still owed (or 5 just
    /// after a backslash, [`AFTER_HEX_D`] after `\uD`), `lt` just after a `<` (`</` could close the span early for
    /// the parser, so it is not allowed).
    Str {
        open: bool,
        len: usize,
        escape: u8,
        lt: bool,
    },
    /// A JSON number.
    Number {
        integer: bool,
        digits: usize,
        sign: bool,
        fraction: Option<usize>,
        leading_zero: bool,
    },
    StringArray(ArrayPhase),
    /// Any scalar: decided by its first character.
    Scalar,
}

/// Feeding one character to the goal on top.
enum Step {
    /// Consumed; the goal goes on.
    Take,
    /// Consumed; the goal is done and these goals (topmost last) replace it.
    Done(Vec<Goal>),
    /// Not consumed: the goal is satisfied as it is; the next one below gets the char.
    Pass,
    /// The character cannot come here.
    Reject,
}

fn value_goal(t: &ValueType) -> Goal {
    match t {
        ValueType::String => Goal::Str {
            open: false,
            len: 0,
            escape: 0,
            lt: false,
        },
        ValueType::Integer | ValueType::Number => Goal::Number {
            integer: *t == ValueType::Integer,
            digits: 0,
            sign: false,
            fraction: None,
            leading_zero: false,
        },
        ValueType::Boolean => Goal::Choice {
            options: Arc::from(vec!["true".to_string(), "false".to_string()]),
            typed: String::new(),
            then: AfterChoice::Nothing,
        },
        ValueType::Enum(options) => Goal::Choice {
            options: options.clone(),
            typed: String::new(),
            then: AfterChoice::Nothing,
        },
        ValueType::StringArray => Goal::StringArray(ArrayPhase::Open),
        ValueType::Scalar => Goal::Scalar,
    }
}

fn one_space() -> Goal {
    Goal::Space {
        left: 1,
        newline: false,
    }
}

/// Where a call stands after the text fed so far.
#[derive(Clone, Debug)]
pub struct CallState {
    grammar: Arc<Grammar>,
    stack: Vec<Goal>,
}

impl CallState {
    /// Whether the call is complete (through `</tool_call>`).
    pub fn is_complete(&self) -> bool {
        self.stack.is_empty()
    }

    /// Feeds `text`; false (and the state left partway) when it cannot continue a call.
    pub fn feed(&mut self, text: &str) -> bool {
        text.chars().all(|c| self.feed_char(c))
    }

    /// Whether `text` would keep the call alive, without changing the state.
    pub fn accepts(&self, text: &str) -> bool {
        !text.is_empty() && self.clone().feed(text)
    }

    fn feed_char(&mut self, c: char) -> bool {
        loop {
            let Some(top) = self.stack.last_mut() else {
                return false;
            };
            match step(&self.grammar, top, c) {
                Step::Take => return true,
                Step::Done(next) => {
                    self.stack.pop();
                    self.stack.extend(next);
                    return true;
                }
                Step::Pass => {
                    self.stack.pop();
                }
                Step::Reject => return false,
            }
        }
    }
}

fn step(g: &Grammar, goal: &mut Goal, c: char) -> Step {
    match goal {
        Goal::Lit(text, at) => {
            if text[*at..].starts_with(c) {
                *at += c.len_utf8();
                if *at == text.len() {
                    Step::Done(Vec::new())
                } else {
                    Step::Take
                }
            } else {
                Step::Reject
            }
        }
        Goal::Space { left, newline } => {
            if *left > 0 && (c == ' ' || (*newline && c == '\n')) {
                *left -= 1;
                Step::Take
            } else {
                Step::Pass
            }
        }
        Goal::Choice {
            options,
            typed,
            then,
        } => {
            typed.push(c);
            let live: Vec<usize> = (0..options.len())
                .filter(|&i| options[i].starts_with(typed.as_str()))
                .collect();
            match live.as_slice() {
                [] => Step::Reject,
                [only] if options[*only] == *typed => match then {
                    AfterChoice::Nothing => Step::Done(Vec::new()),
                    AfterChoice::Arguments => {
                        let object = Goal::Object {
                            tool: *only,
                            seen: 0,
                            phase: ObjectPhase::Open,
                            key: String::new(),
                        };
                        Step::Done(vec![
                            object,
                            one_space(),
                            Goal::Lit("\"arguments\":".into(), 0),
                            one_space(),
                            Goal::Lit(",".into(), 0),
                        ])
                    }
                },
                _ => Step::Take,
            }
        }
        Goal::Object {
            tool,
            seen,
            phase,
            key,
        } => {
            let Some(shape) = g.tools.get(*tool) else {
                return Step::Reject;
            };
            let all_required = shape
                .properties
                .iter()
                .enumerate()
                .all(|(i, p)| !p.required || *seen & (1 << i) != 0);
            let unseen = shape
                .properties
                .iter()
                .enumerate()
                .any(|(i, _)| *seen & (1 << i) == 0);
            match (*phase, c) {
                (ObjectPhase::Open, '{') => {
                    *phase = ObjectPhase::FirstKeyOrClose;
                    Step::Take
                }
                (ObjectPhase::FirstKeyOrClose | ObjectPhase::CommaOrClose, '}') if all_required => {
                    Step::Done(Vec::new())
                }
                (ObjectPhase::FirstKeyOrClose | ObjectPhase::AfterComma, '"') if shape.open => {
                    *phase = ObjectPhase::CommaOrClose;
                    key.clear();
                    let name = Goal::Str {
                        open: true,
                        len: 0,
                        escape: 0,
                        lt: false,
                    };
                    Step::Done(vec![
                        goal.clone(),
                        Goal::Scalar,
                        one_space(),
                        Goal::Lit(":".into(), 0),
                        name,
                    ])
                }
                (ObjectPhase::FirstKeyOrClose | ObjectPhase::AfterComma, '"') if unseen => {
                    *phase = ObjectPhase::Key;
                    key.clear();
                    key.push('"');
                    Step::Take
                }
                (ObjectPhase::AfterComma, ' ') if key.is_empty() => {
                    // One space after the comma (the key buffer marks it used).
                    key.push(' ');
                    Step::Take
                }
                (ObjectPhase::CommaOrClose, ',') if unseen || shape.open => {
                    *phase = ObjectPhase::AfterComma;
                    key.clear();
                    Step::Take
                }
                (ObjectPhase::Key, c) => {
                    key.push(c);
                    let live: Vec<usize> = (0..shape.properties.len())
                        .filter(|&i| {
                            *seen & (1 << i) == 0
                                && shape.properties[i].quoted.starts_with(key.as_str())
                        })
                        .collect();
                    match live.as_slice() {
                        [] => Step::Reject,
                        [only] if shape.properties[*only].quoted == *key => {
                            *seen |= 1 << only;
                            *phase = ObjectPhase::CommaOrClose;
                            key.clear();
                            let value = value_goal(&shape.properties[*only].value);
                            // The object stays; the value and ": " go on top of it.
                            Step::Done(vec![
                                goal.clone(),
                                value,
                                one_space(),
                                Goal::Lit(":".into(), 0),
                            ])
                        }
                        _ => Step::Take,
                    }
                }
                _ => Step::Reject,
            }
        }
        Goal::Str {
            open,
            len,
            escape,
            lt,
        } => {
            let after_lt = std::mem::replace(lt, c == '<');
            if after_lt && c == '/' {
                return Step::Reject;
            }
            if !*open {
                return if c == '"' {
                    *open = true;
                    Step::Take
                } else {
                    Step::Reject
                };
            }
            if *escape == 5 {
                return match c {
                    '"' | '\\' | '/' | 'b' | 'f' | 'n' | 'r' | 't' => {
                        *escape = 0;
                        Step::Take
                    }
                    'u' => {
                        *escape = 4;
                        Step::Take
                    }
                    _ => Step::Reject,
                };
            }
            if *escape == AFTER_HEX_D {
                // \uD800-\uDFFF are UTF-16 surrogates: JSON parsers reject an
                // unpaired one, and a pair is not worth a state of its own.
                return if matches!(c, '0'..='7') {
                    *escape = 2;
                    Step::Take
                } else {
                    Step::Reject
                };
            }
            if *escape > 0 {
                if !c.is_ascii_hexdigit() {
                    return Step::Reject;
                }
                *escape = if *escape == 4 && matches!(c, 'd' | 'D') {
                    AFTER_HEX_D
                } else {
                    *escape - 1
                };
                return Step::Take;
            }
            match c {
                '"' => Step::Done(Vec::new()),
                c if (c as u32) < 0x20 => Step::Reject,
                _ if *len >= MAX_STRING => Step::Reject,
                '\\' => {
                    *escape = 5;
                    *len += 1;
                    Step::Take
                }
                _ => {
                    *len += 1;
                    Step::Take
                }
            }
        }
        Goal::Number {
            integer,
            digits,
            sign,
            fraction,
            leading_zero,
        } => {
            let complete = *digits > 0 && *fraction != Some(0);
            match c {
                '-' if *digits == 0 && !*sign => {
                    *sign = true;
                    Step::Take
                }
                '0'..='9' => match fraction {
                    Some(f) if *f < MAX_DIGITS => {
                        *f += 1;
                        Step::Take
                    }
                    Some(_) => Step::Reject,
                    None if *leading_zero || *digits >= MAX_DIGITS => Step::Reject,
                    None => {
                        *leading_zero = *digits == 0 && c == '0';
                        *digits += 1;
                        Step::Take
                    }
                },
                '.' if !*integer && *digits > 0 && fraction.is_none() => {
                    *fraction = Some(0);
                    Step::Take
                }
                _ if complete => Step::Pass,
                _ => Step::Reject,
            }
        }
        Goal::StringArray(phase) => match (*phase, c) {
            (ArrayPhase::Open, '[') => {
                *phase = ArrayPhase::FirstOrClose;
                Step::Take
            }
            (ArrayPhase::FirstOrClose | ArrayPhase::CommaOrClose, ']') => Step::Done(Vec::new()),
            (ArrayPhase::FirstOrClose | ArrayPhase::AfterComma, '"') => {
                *phase = ArrayPhase::CommaOrClose;
                let item = Goal::Str {
                    open: true,
                    len: 0,
                    escape: 0,
                    lt: false,
                };
                Step::Done(vec![goal.clone(), item])
            }
            (ArrayPhase::CommaOrClose, ',') => {
                *phase = ArrayPhase::AfterComma;
                Step::Done(vec![goal.clone(), one_space()])
            }
            _ => Step::Reject,
        },
        Goal::Scalar => {
            let mut replaced = match c {
                '"' => value_goal(&ValueType::String),
                '-' | '0'..='9' => value_goal(&ValueType::Number),
                _ => Goal::Choice {
                    options: Arc::from(vec![
                        "true".to_string(),
                        "false".to_string(),
                        "null".to_string(),
                    ]),
                    typed: String::new(),
                    then: AfterChoice::Nothing,
                },
            };
            match step(g, &mut replaced, c) {
                Step::Take => Step::Done(vec![replaced]),
                other => other,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::parse_tool_calls;
    use proptest::prelude::*;
    use serde_json::json;

    /// The calls the protocol's parser finds in `text`: name and arguments.
    fn calls(text: &str) -> Vec<(String, Value)> {
        parse_tool_calls(text)
            .into_iter()
            .filter_map(|b| match b {
                whittle_protocol::Block::ToolUse(u) => Some((u.name, u.input)),
                _ => None,
            })
            .collect()
    }

    fn tools() -> Vec<ToolSpec> {
        let spec = |name: &str, schema: Value| ToolSpec {
            name: name.into(),
            description: String::new(),
            input_schema: schema,
        };
        vec![
            spec(
                "read_file",
                json!({"type": "object", "properties": {
                    "path": {"type": "string"}, "offset": {"type": "integer"},
                    "limit": {"type": "integer"}}, "required": ["path"]}),
            ),
            spec(
                "read",
                json!({"type": "object", "properties": {"mode": {"enum": ["fast", "full"]}}}),
            ),
            spec("bash", json!({"type": "object"})),
            spec(
                "grep",
                json!({"type": "object", "properties": {
                    "pattern": {"type": "string"}, "paths": {"type": "array", "items": {"type": "string"}},
                    "ignore_case": {"type": "boolean"}, "context": {"type": "number"},
                    "extra": {}}, "required": ["pattern"]}),
            ),
        ]
    }

    #[test]
    fn well_formed_calls_pass_and_near_misses_do_not() {
        let g = ToolCallGrammar::new(&tools()).unwrap();
        let ok = [
            "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"src/a.rs\"}}\n</tool_call>",
            "<tool_call>{\"name\":\"read\",\"arguments\":{}}</tool_call>",
            "<tool_call>{\"name\":\"read\",\"arguments\":{\"mode\":\"full\"}}</tool_call>",
            "<tool_call>{\"name\": \"bash\", \"arguments\": {\"command\": \"ls\", \"n\": 2}}</tool_call>",
            "<tool_call>\n{\"name\": \"grep\", \"arguments\": {\"paths\": [\"a\", \"b\\\"c\"], \"pattern\": \"x\\u00e9\", \"context\": -1.5, \"extra\": null}}\n</tool_call>",
            "<tool_call>{\"name\": \"grep\", \"arguments\": {\"pattern\": \"\\uD7FF\\uE000\"}}</tool_call>",
        ];
        for text in ok {
            let mut s = g.start();
            assert!(s.feed(text) && s.is_complete(), "{text}");
            assert_eq!(calls(text).len(), 1, "{text}");
        }
        let bad = [
            "<tool_call>{\"name\": \"write_file\"",
            "<tool_call>{\"name\": \"read_file\", \"arguments\": {}}",
            "<tool_call>{\"name\": \"read_file\", \"arguments\": {\"path\": 3",
            "<tool_call>{\"name\": \"read_file\", \"arguments\": {\"file\"",
            "<tool_call>{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\", \"path\"",
            "<tool_call>{\"name\": \"read\", \"arguments\": {\"mode\": \"slow\"",
            "<tool_call>{\"name\": \"grep\", \"arguments\": {\"pattern\": \"a\nb\"",
            "<tool_call>{\"name\": \"grep\", \"arguments\": {\"pattern\": \"a\", \"context\": 01",
            "<tool_call>  \n {",
            "<tool_call>{\"name\": \"grep\", \"arguments\": {\"pattern\": \"a</",
            "<tool_call>{\"name\": \"grep\", \"arguments\": {\"pattern\": \"\\uDA59",
            "<tool_call>{\"name\": \"grep\", \"arguments\": {\"pattern\": \"\\ud800",
            "Sure! <tool_call>",
        ];
        for text in bad {
            assert!(!g.start().feed(text), "{text}");
        }
        let mut s = g.after_open();
        assert!(s.feed("\n{\"name\": \"read\", \"arguments\": {}}\n</tool_call>"));
        assert!(s.is_complete() && !s.accepts("x"));
        assert!(ToolCallGrammar::new(&[]).is_none());
    }

    /// Pieces a tokenizer might have: single characters and common multi-character runs.
    fn vocabulary() -> Vec<String> {
        let mut v: Vec<String> = (0x20u8..0x7f).map(|b| char::from(b).to_string()).collect();
        for piece in [
            "\n",
            "<tool_call>",
            "</tool_call>",
            "<tool",
            "_call",
            ">",
            "{\"",
            "\":",
            "\": \"",
            "\", \"",
            "name",
            "arguments",
            "read_file",
            "grep",
            "path",
            "pattern",
            "\"}",
            "}}",
            "}\n",
            "true",
            "false",
            "null",
            "[\"",
            "\"]",
            "é",
            "\\n",
            "12",
            "0.5",
        ] {
            v.push(piece.to_string());
        }
        v
    }

    proptest! {
        /// Whatever the model prefers, a constrained walk ends, and ends in a call that
        /// parses, names a listed tool and has its required arguments.
        #[test]
        fn every_constrained_call_parses_and_names_a_listed_tool(
            seed in any::<u64>(), prefer_close in 0u8..4
        ) {
            let tools = tools();
            let g = ToolCallGrammar::new(&tools).unwrap();
            let vocab = vocabulary();
            let mut rng = seed;
            let mut next = || {
                rng = rng.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                (rng >> 33) as usize
            };
            let mut state = g.start();
            let mut text = String::new();
            for _ in 0..4000 {
                if state.is_complete() {
                    break;
                }
                let allowed: Vec<&String> = vocab.iter().filter(|t| state.accepts(t)).collect();
                prop_assert!(!allowed.is_empty(), "stuck after {text:?}");
                // A model that likes closing quotes and braces now and then, so walks end.
                let closers: Vec<&&String> = allowed
                    .iter()
                    .filter(|t| t.starts_with('"') || t.starts_with('}') || t.starts_with('<'))
                    .collect();
                let pick = if !closers.is_empty() && next() % 4 < usize::from(prefer_close) {
                    *closers[next() % closers.len()]
                } else {
                    allowed[next() % allowed.len()]
                };
                prop_assert!(state.feed(pick));
                text.push_str(pick);
            }
            prop_assert!(state.is_complete(), "no end after {text:?}");
            {
                let calls = calls(&text);
                prop_assert_eq!(calls.len(), 1, "{}", text);
                let (name, input) = &calls[0];
                let tool = tools.iter().find(|t| &t.name == name);
                prop_assert!(tool.is_some(), "{}", text);
                let required = tool.unwrap().input_schema["required"].as_array().cloned().unwrap_or_default();
                for r in required {
                    prop_assert!(input.get(r.as_str().unwrap()).is_some(), "{}", text);
                }
            }
        }
    }
}
