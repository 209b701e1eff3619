//! Anthropic's prompt cache, simulated on the requests a [`TestServer`]
//! receives, so that a real client driven by a scripted model is told usage
//! that follows from what it sent (cache reads and writes at its own
//! `cache_control` breakpoints) rather than numbers a test made up.
//!
//! The rules are the API's documented ones: the prompt is the tools, then
//! the system blocks, then each message's content blocks, in that order; a
//! request is looked up at each block marked `cache_control`, and up to
//! [`PromptCache::LOOKBACK`] blocks before it, and the longest cached prefix
//! is read; the prefix up to every marked block is then written, unless it is
//! shorter than the minimum; an entry lives 5 minutes (or `"ttl": "1h"`)
//! after it was last written or read; entries are per model. Tokens are
//! characters of each block's compact JSON over a ratio, plus a few per
//! message for its role: not a real tokenizer, but a count that grows with
//! what was sent, as the real one does. A string `content` counts as the
//! one text block it stands for.
//!
//! [`TestServer`]: crate::TestServer

use crate::script::ReplyUsage;
use serde_json::Value;
use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

/// A simulated prompt cache; see the module documentation.
#[derive(Clone, Debug)]
pub struct PromptCache {
    /// Characters of compact JSON per token.
    pub chars_per_token: f64,
    /// Tokens each message adds for its role and turn markers.
    pub tokens_per_message: u64,
    /// Prefixes shorter than this are never written.
    pub min_cacheable_tokens: u64,
    /// Live entries: prefix hash to (expiry, lifetime), in milliseconds.
    entries: HashMap<u64, (u64, u64)>,
}

impl Default for PromptCache {
    fn default() -> Self {
        PromptCache {
            chars_per_token: 3.5,
            tokens_per_message: 4,
            min_cacheable_tokens: 1_024,
            entries: HashMap::new(),
        }
    }
}

/// One block of the prompt as the cache sees it.
struct Block {
    tokens: u64,
    hash: u64,
    /// The lifetime in milliseconds when the block is a breakpoint.
    breakpoint: Option<u64>,
}

impl PromptCache {
    /// Blocks before a breakpoint where a cached prefix is still found.
    pub const LOOKBACK: usize = 20;
    /// The default lifetime of an entry, in milliseconds.
    pub const TTL_5M_MS: u64 = 5 * 60 * 1000;
    /// The lifetime of an entry written with `"ttl": "1h"`, in milliseconds.
    pub const TTL_1H_MS: u64 = 60 * 60 * 1000;

    /// An empty cache with the default ratio (3.5 characters a token).
    pub fn new() -> Self {
        Self::default()
    }

    /// The usage the API would report for a Messages request `body` sent at
    /// `now_ms` (milliseconds on any clock that only moves forward), and the
    /// cache as it is after it. Output tokens are left to the reply.
    pub fn usage(&mut self, body: &Value, now_ms: u64) -> ReplyUsage {
        let blocks = self.blocks(body);
        self.entries.retain(|_, (expiry, _)| *expiry >= now_ms);
        // Prefix hash and tokens after every block.
        let mut at = Vec::with_capacity(blocks.len());
        let mut hash = hash_of(&body.get("model").and_then(Value::as_str));
        let mut tokens = 0;
        for b in &blocks {
            hash = hash_of(&(hash, b.hash));
            tokens += b.tokens;
            at.push((hash, tokens));
        }
        let total = tokens;
        let breakpoints: Vec<(usize, u64)> = blocks
            .iter()
            .enumerate()
            .filter_map(|(i, b)| b.breakpoint.map(|ttl| (i, ttl)))
            .collect();
        let hit = breakpoints
            .iter()
            .flat_map(|(b, _)| (b.saturating_sub(Self::LOOKBACK - 1)..=*b).rev())
            .filter(|k| self.entries.contains_key(&at[*k].0))
            .max();
        let read = hit.map_or(0, |k| at[k].1);
        // A read keeps alive every entry on the prefix it read.
        if let Some(hit) = hit {
            for (h, _) in &at[..=hit] {
                if let Some((expiry, ttl)) = self.entries.get_mut(h) {
                    *expiry = now_ms + *ttl;
                }
            }
        }
        let mut written = 0;
        let mut written_1h = 0;
        let mut from = read;
        for (b, ttl) in &breakpoints {
            let (h, upto) = at[*b];
            if upto < self.min_cacheable_tokens {
                continue;
            }
            let entry = self.entries.entry(h).or_insert((0, *ttl));
            entry.0 = now_ms + (*ttl).max(entry.1);
            entry.1 = (*ttl).max(entry.1);
            if upto > from {
                written += upto - from;
                if *ttl == Self::TTL_1H_MS {
                    written_1h += upto - from;
                }
                from = upto;
            }
        }
        ReplyUsage {
            input_tokens: Some(total - read - written),
            output_tokens: None,
            cache_creation_input_tokens: written,
            cache_read_input_tokens: read,
            cache_creation_1h_input_tokens: written_1h,
        }
    }

    /// The prompt's blocks in cache order: tools, system, messages.
    fn blocks(&self, body: &Value) -> Vec<Block> {
        let mut blocks = Vec::new();
        // A string is the same prompt as one text block holding it.
        let items = |v: Option<&Value>| -> Vec<Value> {
            match v {
                Some(Value::Array(items)) => items.clone(),
                Some(Value::String(s)) => vec![serde_json::json!({"type": "text", "text": s})],
                _ => Vec::new(),
            }
        };
        for tool in items(body.get("tools")) {
            blocks.push(self.block(&tool, 0));
        }
        for system in items(body.get("system")) {
            blocks.push(self.block(&system, 0));
        }
        for message in items(body.get("messages")) {
            let role = message.get("role").cloned().unwrap_or(Value::Null);
            for (i, part) in items(message.get("content")).iter().enumerate() {
                let mut b = self.block(part, if i == 0 { self.tokens_per_message } else { 0 });
                if i == 0 {
                    b.hash = hash_of(&(b.hash, role.to_string()));
                }
                blocks.push(b);
            }
        }
        blocks
    }

    fn block(&self, value: &Value, extra_tokens: u64) -> Block {
        let mut value = value.clone();
        let breakpoint = value
            .as_object_mut()
            .and_then(|o| o.remove("cache_control"))
            .map(|c| match c.get("ttl").and_then(Value::as_str) {
                Some("1h") => Self::TTL_1H_MS,
                _ => Self::TTL_5M_MS,
            });
        let json = value.to_string();
        Block {
            tokens: (json.chars().count() as f64 / self.chars_per_token).ceil() as u64
                + extra_tokens,
            hash: hash_of(&json),
            breakpoint,
        }
    }
}

fn hash_of<T: Hash + ?Sized>(value: &T) -> u64 {
    let mut h = DefaultHasher::new();
    value.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(messages: &[&str], ttl: Option<&str>) -> Value {
        let mut control = json!({"type": "ephemeral"});
        if let Some(ttl) = ttl {
            control["ttl"] = json!(ttl);
        }
        let n = messages.len();
        json!({
            "model": "m",
            "system": [{"type": "text", "text": "S".repeat(8_000), "cache_control": control}],
            "messages": messages.iter().enumerate().map(|(i, m)| {
                let mut block = json!({"type": "text", "text": m});
                if i + 1 == n {
                    block["cache_control"] = control.clone();
                }
                json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": [block]})
            }).collect::<Vec<_>>(),
        })
    }

    #[test]
    fn a_growing_conversation_reads_what_the_last_request_wrote() {
        let mut cache = PromptCache::new();
        let first = cache.usage(&request(&["hello"], None), 0);
        assert_eq!(first.cache_read_input_tokens, 0);
        assert!(first.cache_creation_input_tokens > 2_000);
        assert_eq!(first.input_tokens, Some(0));
        let big = "x".repeat(7_000);
        let second = cache.usage(&request(&["hello", "hi", &big], None), 1_000);
        let total_first = first.cache_creation_input_tokens;
        assert_eq!(second.cache_read_input_tokens, total_first);
        assert!(second.cache_creation_input_tokens >= 2_000);
        assert_eq!(second.cache_creation_1h_input_tokens, 0);
    }

    #[test]
    fn entries_expire_after_their_ttl_unless_read() {
        let mut cache = PromptCache::new();
        let r = request(&["hello"], None);
        let w = cache.usage(&r, 0).cache_creation_input_tokens;
        assert_eq!(cache.usage(&r, 299_000).cache_read_input_tokens, w);
        // Read at 299 s: alive until 599 s.
        assert_eq!(cache.usage(&r, 598_000).cache_read_input_tokens, w);
        let cold = cache.usage(&r, 598_000 + PromptCache::TTL_5M_MS + 1);
        assert_eq!(
            (
                cold.cache_read_input_tokens,
                cold.cache_creation_input_tokens
            ),
            (0, w)
        );
        let mut hour = PromptCache::new();
        let r = request(&["hello"], Some("1h"));
        let first = hour.usage(&r, 0);
        assert_eq!(
            first.cache_creation_1h_input_tokens,
            first.cache_creation_input_tokens
        );
        assert_eq!(hour.usage(&r, 3_000_000).cache_read_input_tokens, w);
    }

    #[test]
    fn small_prefixes_are_not_cached_and_models_do_not_share() {
        let mut cache = PromptCache::new();
        let small = json!({"model": "m", "messages": [{"role": "user", "content": [
            {"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]}]});
        let u = cache.usage(&small, 0);
        assert_eq!(
            (u.cache_creation_input_tokens, u.cache_read_input_tokens),
            (0, 0)
        );
        assert!(u.input_tokens.unwrap() > 0);
        let r = request(&["hello"], None);
        cache.usage(&r, 0);
        let mut other = r.clone();
        other["model"] = json!("n");
        assert_eq!(cache.usage(&other, 1).cache_read_input_tokens, 0);
    }
}
