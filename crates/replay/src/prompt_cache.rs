//! The prompt-cache cost simulator: which part of each request Anthropic's
//! cache would have served, priced as our provider uses the cache.
//!
//! Breakpoints sit after the system prompt, at the pipeline's cache anchor
//! and on the newest message; a cached prefix is read back when a later
//! request starts with it (looked up within `cache_lookback` messages before
//! each breakpoint, as the API does with blocks); prefixes shorter than
//! `min_cacheable_tokens` are never cached.

use crate::policy::ReplayConfig;
use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};
use whittle_context::Message;

/// Anthropic's prompt cache as our provider uses it.
pub(crate) struct PromptCache<'a> {
    pub(crate) config: &'a ReplayConfig,
    system_hash: u64,
    system_chars: usize,
    /// Prefix hashes written to the cache.
    written: HashSet<u64>,
    /// Per-message hashes of the last request, valid while the history's
    /// epoch is unchanged (only appends since).
    hashes: Vec<u64>,
    epoch: Option<u64>,
}

impl<'a> PromptCache<'a> {
    pub(crate) fn new(config: &'a ReplayConfig, system: &str, system_chars: usize) -> Self {
        PromptCache {
            config,
            system_hash: hash(&system),
            system_chars,
            written: HashSet::new(),
            hashes: Vec::new(),
            epoch: None,
        }
    }

    /// Prices a request made of `messages` plus `extra_chars` of new text
    /// after them; returns (read, written) tokens and records what it writes.
    /// With `epoch` (the history's), message hashes are reused across calls
    /// while the history only grows; without, they are computed afresh.
    pub(crate) fn price(
        &mut self,
        messages: &[Message],
        epoch: Option<u64>,
        extra_chars: usize,
        anchor: Option<usize>,
    ) -> (u64, u64) {
        let fresh: Vec<u64>;
        let hashes: &[u64] = match epoch {
            Some(epoch) => {
                if self.epoch != Some(epoch) || self.hashes.len() > messages.len() {
                    self.hashes.clear();
                }
                for m in &messages[self.hashes.len()..] {
                    self.hashes
                        .push(hash(&serde_json::to_string(m).unwrap_or_default()));
                }
                self.epoch = Some(epoch);
                &self.hashes
            }
            None => {
                fresh = messages
                    .iter()
                    .map(|m| hash(&serde_json::to_string(m).unwrap_or_default()))
                    .collect();
                &fresh
            }
        };

        // Prefix hashes and token positions at every message boundary.
        let mut prefix = Vec::with_capacity(messages.len() + 1);
        let mut tokens_at = Vec::with_capacity(messages.len() + 1);
        let mut h = self.system_hash;
        // Counted as the history's JSON array is (`[`, messages, commas), so
        // the whole request measures exactly what the meter says.
        let mut chars = self.system_chars + 1;
        prefix.push(h);
        tokens_at.push(self.config.tokens(chars));
        for (m, mh) in messages.iter().zip(hashes) {
            h = hash(&(h, *mh));
            chars += m.chars() + 1;
            prefix.push(h);
            tokens_at.push(self.config.tokens(chars));
        }
        let n = messages.len();
        if extra_chars > 0 {
            // The extra text is a message of its own after the history.
            h = hash(&(h, extra_chars));
            chars += extra_chars + 1;
            prefix.push(h);
            tokens_at.push(self.config.tokens(chars));
        }
        let n = if extra_chars > 0 { n + 1 } else { n };
        let total = *tokens_at.last().unwrap_or(&0);
        // Breakpoints: after the system prompt (0), at the anchor, and on the
        // newest message (n). A hit is looked up at each breakpoint and up to
        // `cache_lookback` messages before it; the longest one is read.
        let mut breakpoints = vec![0, n];
        breakpoints.extend(anchor.filter(|a| *a < n));
        let hit = breakpoints
            .iter()
            .flat_map(|b| (b.saturating_sub(self.config.cache_lookback)..=*b).rev())
            .filter(|k| {
                self.written.contains(&prefix[*k])
                    && tokens_at[*k] >= self.config.min_cacheable_tokens
            })
            .max();
        let read = hit.map_or(0, |k| tokens_at[k]);
        for k in breakpoints {
            if tokens_at[k] >= self.config.min_cacheable_tokens {
                self.written.insert(prefix[k]);
            }
        }
        let write = if total >= self.config.min_cacheable_tokens {
            total - read
        } else {
            0
        };
        (read, write)
    }
}

fn hash<T: Hash + ?Sized>(value: &T) -> u64 {
    let mut h = DefaultHasher::new();
    value.hash(&mut h);
    h.finish()
}
