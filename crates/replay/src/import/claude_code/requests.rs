//! Claude Code's record of what it sent: each request rebuilt from the
//! `api-request*` records, as the blocks the prompt cache sees.
//!
//! - `api-request-shape`: the system blocks and tool definitions, by `shapeHash`;
//! - `api-request-blob`: one message each, by `hash`;
//! - `api-request`: one request: its `shapeHash`, its messages as the first
//!   `keep` messages of its `base` request followed by the `tail` blobs, and
//!   its breakpoints as `cacheControl` paths (`["system", 1]`,
//!   `["messages", 3, "content", 0]`) with their `ttl`.
//!
//! A message that is in the log as a `user` or `assistant` event (an
//! assistant's in parts) has no blob: its hash is the SHA-256 of its
//! `{role, content}` as compact JSON with sorted keys, without
//! `cache_control`. A request whose shape, base or messages are missing is
//! not rebuilt; replay then estimates it, as for older logs.

use crate::recorded::{CacheTtl, RequestBlock};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

/// Blocks of one message: its role's hash and its content blocks.
struct MessageBlocks {
    blocks: Vec<RequestBlock>,
}

/// The requests of one log, rebuilt on demand.
#[derive(Default)]
pub(super) struct Requests {
    /// Tools then system blocks, and how many system blocks there are, by shape hash.
    shapes: HashMap<String, (Vec<RequestBlock>, usize, usize)>,
    blobs: HashMap<String, usize>,
    messages: Vec<MessageBlocks>,
    /// Per request id: its shape, its messages (indices into `messages`), its breakpoints.
    requests: HashMap<String, Built>,
}

struct Built {
    shape: String,
    messages: Vec<usize>,
    breakpoints: Vec<(Vec<Value>, CacheTtl)>,
}

impl Requests {
    /// Reads every `api-request*` record, in file order (a base precedes
    /// the requests built on it).
    pub(super) fn collect<'a>(events: impl Iterator<Item = &'a Map<String, Value>>) -> Self {
        let mut r = Requests::default();
        // The response being logged in parts: its id and content so far.
        let mut response: Option<(String, Vec<Value>)> = None;
        for e in events {
            match e.get("type").and_then(Value::as_str) {
                Some("api-request-shape") => r.add_shape(e),
                Some("api-request-blob") => r.add_blob(e),
                Some("api-request") => r.add_request(e),
                Some("user") => {
                    if let Some(m) = e.get("message") {
                        let message = json_message("user", m.get("content"));
                        r.add_message(&sha256_hex(&message), &message);
                    }
                }
                Some("assistant") => {
                    let id = e
                        .get("message")
                        .and_then(|m| m.get("id"))
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    let parts = match e.get("message").and_then(|m| m.get("content")) {
                        Some(Value::Array(parts)) => parts.clone(),
                        Some(Value::String(s)) => vec![text_block(s)],
                        _ => Vec::new(),
                    };
                    let content = match &mut response {
                        Some((open, content)) if open == id => {
                            content.extend(parts);
                            content.clone()
                        }
                        _ => {
                            response = Some((id.to_string(), parts.clone()));
                            parts
                        }
                    };
                    // Each prefix of the parts may have been sent on its own.
                    let message = json_message("assistant", Some(&Value::Array(content)));
                    r.add_message(&sha256_hex(&message), &message);
                }
                _ => {}
            }
        }
        r
    }

    fn add_message(&mut self, hash: &str, message: &Value) {
        if self.blobs.contains_key(hash) {
            return;
        }
        let mut blob = Map::new();
        blob.insert("hash".into(), Value::String(hash.to_string()));
        blob.insert("message".into(), message.clone());
        self.add_blob(&blob);
    }

    fn add_shape(&mut self, e: &Map<String, Value>) {
        let (Some(hash), Some(shape)) = (
            e.get("shapeHash").and_then(Value::as_str),
            e.get("shape").and_then(Value::as_object),
        ) else {
            return;
        };
        let list = |key: &str| match shape.get(key) {
            Some(Value::Array(items)) => items.clone(),
            Some(Value::String(s)) => vec![text_block(s)],
            _ => Vec::new(),
        };
        let tools = list("tools");
        let system = list("system");
        let mut blocks: Vec<RequestBlock> = tools.iter().map(|t| block(t, "tool")).collect();
        blocks.extend(system.iter().map(|s| block(s, "system")));
        self.shapes
            .insert(hash.to_string(), (blocks, tools.len(), system.len()));
    }

    fn add_blob(&mut self, e: &Map<String, Value>) {
        let (Some(hash), Some(message)) = (
            e.get("hash").and_then(Value::as_str),
            e.get("message").and_then(Value::as_object),
        ) else {
            return;
        };
        let role = message
            .get("role")
            .and_then(Value::as_str)
            .unwrap_or("user");
        let content = match message.get("content") {
            Some(Value::Array(items)) => items.clone(),
            Some(Value::String(s)) => vec![text_block(s)],
            _ => Vec::new(),
        };
        // Hashed with the role: the same blocks from another role are another prefix.
        let blocks: Vec<RequestBlock> = content.iter().map(|c| block(c, role)).collect();
        self.messages.push(MessageBlocks { blocks });
        self.blobs.insert(hash.to_string(), self.messages.len() - 1);
    }

    fn add_request(&mut self, e: &Map<String, Value>) {
        let (Some(id), Some(shape)) = (
            e.get("id").and_then(Value::as_str),
            e.get("shapeHash").and_then(Value::as_str),
        ) else {
            return;
        };
        let keep = e.get("keep").and_then(Value::as_u64).unwrap_or(0) as usize;
        let mut messages = match e.get("base").and_then(Value::as_str) {
            Some(base) => match self.requests.get(base) {
                Some(b) if b.messages.len() >= keep => b.messages[..keep].to_vec(),
                _ => return,
            },
            None if keep == 0 => Vec::new(),
            None => return,
        };
        for hash in e
            .get("tail")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            match hash.as_str().and_then(|h| self.blobs.get(h)) {
                Some(&m) => messages.push(m),
                None => return,
            }
        }
        let breakpoints = e
            .get("cacheControl")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| {
                let path = c.get("path")?.as_array()?.clone();
                let ttl = c
                    .get("value")
                    .and_then(|v| v.get("ttl"))
                    .and_then(Value::as_str)
                    .and_then(CacheTtl::parse)
                    .unwrap_or_default();
                Some((path, ttl))
            })
            .collect();
        self.requests.insert(
            id.to_string(),
            Built {
                shape: shape.to_string(),
                messages,
                breakpoints,
            },
        );
    }

    /// The request `id` as the cache saw it, if every part of it was logged.
    pub(super) fn rebuild(&self, id: &str) -> Option<Vec<RequestBlock>> {
        let built = self.requests.get(id)?;
        let (shape, tools, system) = self.shapes.get(&built.shape)?;
        let mut blocks = shape.clone();
        let mut starts = Vec::with_capacity(built.messages.len());
        for &m in &built.messages {
            starts.push(blocks.len());
            blocks.extend_from_slice(&self.messages[m].blocks);
        }
        for (path, ttl) in &built.breakpoints {
            let index = |i: usize| path.get(i).and_then(Value::as_u64).map(|n| n as usize);
            let at = match path.first().and_then(Value::as_str) {
                Some("tools") => index(1).filter(|i| i < tools),
                Some("system") => index(1).filter(|i| i < system).map(|i| tools + i),
                Some("messages") => index(1).and_then(|m| {
                    let start = *starts.get(m)?;
                    let len = self.messages[built.messages[m]].blocks.len();
                    let within = index(3).unwrap_or(len.saturating_sub(1));
                    (within < len).then_some(start + within)
                }),
                _ => None,
            };
            if let Some(b) = at.and_then(|at| blocks.get_mut(at)) {
                b.breakpoint = Some(*ttl);
            }
        }
        Some(blocks)
    }
}

/// `{role, content}` as a logged message.
fn json_message(role: &str, content: Option<&Value>) -> Value {
    let mut m = Map::new();
    m.insert("role".into(), Value::String(role.into()));
    m.insert("content".into(), content.cloned().unwrap_or(Value::Null));
    Value::Object(m)
}

/// The SHA-256, in hex, of `value` as compact JSON with sorted keys and no
/// `cache_control`: how Claude Code names a message.
fn sha256_hex(value: &Value) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(canonical(value).to_string().as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn canonical(value: &Value) -> Value {
    match value {
        Value::Object(o) => {
            let mut keys: Vec<&String> = o.keys().filter(|k| *k != "cache_control").collect();
            keys.sort();
            let mut sorted = Map::new();
            for k in keys {
                sorted.insert(k.clone(), canonical(&o[k]));
            }
            Value::Object(sorted)
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

fn text_block(text: &str) -> Value {
    let mut block = Map::new();
    block.insert("type".into(), Value::String("text".into()));
    block.insert("text".into(), Value::String(text.to_string()));
    Value::Object(block)
}

/// One block: its compact JSON without `cache_control`, measured and hashed.
fn block(value: &Value, kind: &str) -> RequestBlock {
    let json = match value {
        Value::Object(o) if o.contains_key("cache_control") => {
            let mut o = o.clone();
            o.remove("cache_control");
            Value::Object(o).to_string()
        }
        other => other.to_string(),
    };
    RequestBlock {
        hash: hash_of(&(kind, &json)),
        chars: json.chars().count(),
        breakpoint: None,
    }
}

fn hash_of<T: Hash + ?Sized>(value: &T) -> u64 {
    let mut h = DefaultHasher::new();
    value.hash(&mut h);
    h.finish()
}
