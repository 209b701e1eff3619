//! The prompt-cache cost simulator: which part of each request Anthropic's
//! cache would have served, priced as the API bills it.
//!
//! A request is a prefix (the system prompt and tool definitions, or their
//! estimated size) followed by messages. Breakpoints sit after the prefix,
//! at the pipeline's cache anchor and on the newest message; a request
//! rebuilt from the recording has the recording's own breakpoints instead. A
//! cached prefix is read back when a later request starts with it (looked
//! up within `cache_lookback` blocks before each breakpoint, as the API
//! does); prefixes shorter than `min_cacheable_tokens` are never cached.
//! Entries belong to one model, and live for their TTL (5 minutes, or an
//! hour when asked) after they were last written or read: when the
//! recording has timestamps, a call after a longer idle gap writes again
//! what it would have read.

use crate::policy::ReplayConfig;
use crate::recorded::{CacheTtl, RequestBlock};
use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use whittle_protocol::Message;

/// When and how one request is made.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CallTime {
    /// Milliseconds since the epoch; `None` when the recording has no time,
    /// and then nothing expires.
    pub at_ms: Option<u64>,
    /// The lifetime the request asks for.
    pub ttl: CacheTtl,
    /// Identifies the model: entries of another model are not read.
    pub model: u64,
}

/// What one request cost in cache terms, in tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Priced {
    pub read: u64,
    pub write: u64,
    /// Of `write`, those written for an hour.
    pub write_1h: u64,
    /// Every token of the request.
    pub total: u64,
}

/// Anthropic's prompt cache over one conversation.
pub(crate) struct PromptCache<'a> {
    pub(crate) config: &'a ReplayConfig,
    /// Identifies the system prompt as first sent (its shared part's key).
    system_hash: u64,
    /// Identifies the prefix as now sent: changes when the agent rebuilds it.
    prefix_hash: u64,
    prefix_chars: usize,
    /// Prefix hash to (expiry in ms, lifetime in ms).
    written: HashMap<u64, (u64, u64)>,
    /// Per-message hashes of the last request, valid while the history's
    /// epoch is unchanged (only appends since).
    hashes: Vec<u64>,
    epoch: Option<u64>,
    /// Tokens of the first request the cache already holds (read from the
    /// recording's first call); consumed by the first request.
    prewarm_tokens: Option<u64>,
    /// Characters of the prefix that are a cached prefix of their own (the
    /// part of the system prompt other sessions share), when known.
    shared_chars: Option<usize>,
    /// Other cut points inside the prefix, in characters, ascending: where a
    /// bill showed the prefix read back up to a breakpoint before a change
    /// (see [`PromptCache::rebuild_prefix`]).
    kept_chars: Vec<usize>,
    /// Where, in characters of the prefix, each change inside it began: a
    /// cut past a change is another prefix than the one cached before it.
    prefix_changes: Vec<usize>,
    /// Changes inside the messages: at the first message boundary past this
    /// many tokens, the content differs from what was cached (the salt).
    message_changes: Vec<(u64, u64)>,
}

impl<'a> PromptCache<'a> {
    /// A cold cache for requests that start with `prefix` (the system
    /// prompt, or anything standing for it) of `prefix_chars` characters.
    pub(crate) fn new(config: &'a ReplayConfig, prefix: &str, prefix_chars: usize) -> Self {
        PromptCache {
            config,
            system_hash: hash(&prefix),
            prefix_hash: hash(&prefix),
            prefix_chars,
            written: HashMap::new(),
            hashes: Vec::new(),
            epoch: None,
            prewarm_tokens: None,
            shared_chars: None,
            kept_chars: Vec::new(),
            prefix_changes: Vec::new(),
            message_changes: Vec::new(),
        }
    }

    /// Says that the first request's first `tokens` were cached before the
    /// recording began (by earlier sessions with the same system prompt).
    /// When that is less than the prefix, the prefix's first `tokens` become
    /// a cached prefix of their own, as the system prompt's shared part is.
    pub(crate) fn prewarm(&mut self, tokens: u64) {
        self.prewarm_tokens = Some(tokens);
        let chars = (tokens as f64 * self.config.chars_per_token).floor() as usize;
        if tokens > 0 && chars < self.prefix_chars {
            self.shared_chars = Some(chars);
        }
    }

    /// Says that the agent changed what it sends after its first
    /// `kept_tokens` before the next request (new tool definitions, system
    /// text, or an earlier message rewritten), as its bill showed by reading
    /// only that much back: as the API documents, a change at one point of
    /// the prefix invalidates every cached prefix past it, and what comes
    /// before it is read back from the breakpoint there.
    pub(crate) fn rebuild_prefix(&mut self, kept_tokens: u64) {
        let salt = hash(&(self.prefix_hash, kept_tokens, self.message_changes.len()));
        let kept_chars = (kept_tokens as f64 * self.config.chars_per_token).floor() as usize;
        if kept_chars < self.prefix_chars {
            self.prefix_changes.push(kept_chars);
            self.prefix_hash = hash(&(self.prefix_hash, "rebuilt", salt));
            if kept_tokens > 0
                && self.shared_chars != Some(kept_chars)
                && let Err(at) = self.kept_chars.binary_search(&kept_chars)
            {
                self.kept_chars.insert(at, kept_chars);
            }
        } else {
            self.message_changes.push((kept_tokens, salt));
        }
        // The bill read that much back: it was cached.
        self.prewarm_tokens = Some(kept_tokens);
    }

    /// Forgets the message hashes of the last request (after the history
    /// was replaced by something the epoch does not tell).
    pub(crate) fn forget_hashes(&mut self) {
        self.hashes.clear();
        self.epoch = None;
    }

    /// Prices a request made of the prefix, `messages`, and `extra_chars`
    /// of new text after them, and records what it writes. With `epoch`
    /// (the history's), message hashes are reused across calls while the
    /// history only grows; without, they are computed afresh.
    pub(crate) fn price(
        &mut self,
        messages: &[Message],
        epoch: Option<u64>,
        extra_chars: usize,
        anchor: Option<usize>,
        time: CallTime,
    ) -> Priced {
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
        let mut prefix = Vec::with_capacity(messages.len() + 2);
        let mut tokens_at = Vec::with_capacity(messages.len() + 2);
        let mut shared = Vec::new();
        // Cut points inside the prefix, ascending, each a breakpoint.
        let mut cuts: Vec<usize> = self
            .shared_chars
            .iter()
            .chain(&self.kept_chars)
            .copied()
            .collect();
        cuts.retain(|c| *c < self.prefix_chars);
        cuts.sort_unstable();
        cuts.dedup();
        for chars in &cuts {
            let changes_before = self.prefix_changes.iter().filter(|c| **c < *chars).count();
            prefix.push(hash(&(
                time.model,
                self.system_hash,
                *chars,
                changes_before,
            )));
            tokens_at.push(self.config.tokens(*chars));
            shared.push((prefix.len() - 1, time.ttl));
        }
        let shared_at = self
            .shared_chars
            .and_then(|s| cuts.iter().position(|c| *c == s));
        let start = prefix.len();
        let mut h = hash(&(time.model, self.prefix_hash));
        // Counted as the history's JSON array is (`[`, messages, commas), so
        // the whole request measures exactly what the meter says.
        let mut chars = self.prefix_chars + 1;
        prefix.push(h);
        tokens_at.push(self.config.tokens(chars));
        let mut changes = self.message_changes.iter().peekable();
        for (m, mh) in messages.iter().zip(hashes) {
            h = hash(&(h, *mh));
            chars += m.chars() + 1;
            let tokens = self.config.tokens(chars);
            while let Some((_, salt)) = changes.next_if(|(after, _)| tokens > *after) {
                h = hash(&(h, *salt));
            }
            prefix.push(h);
            tokens_at.push(tokens);
        }
        let mut n = messages.len();
        if extra_chars > 0 {
            // The extra text is a message of its own after the history.
            h = hash(&(h, extra_chars));
            chars += extra_chars + 1;
            prefix.push(h);
            tokens_at.push(self.config.tokens(chars));
            n += 1;
        }
        // Breakpoints: after the prefix's shared part, after the prefix (0),
        // at the anchor, and on the newest message (n).
        let mut breakpoints = shared;
        breakpoints.extend([(start, time.ttl), (start + n, time.ttl)]);
        breakpoints.extend(anchor.filter(|a| *a < n).map(|a| (start + a, time.ttl)));
        let priced = self.settle(&prefix, &tokens_at, &breakpoints, time);
        if let Some(at) = shared_at {
            // The shared part is the agent's, not this conversation's: its
            // other sessions keep it alive across this one's idle gaps (a
            // Claude Code bill reads its 21,448 tokens back after 17.5 idle
            // minutes with a 5-minute TTL).
            if let Some(entry) = self.written.get_mut(&prefix[at]) {
                entry.0 = u64::MAX;
            }
        }
        priced
    }

    /// Prices a request rebuilt from the recording, block by block, with its
    /// own breakpoints.
    pub(crate) fn price_blocks(&mut self, blocks: &[RequestBlock], time: CallTime) -> Priced {
        let mut prefix = Vec::with_capacity(blocks.len() + 1);
        let mut tokens_at = Vec::with_capacity(blocks.len() + 1);
        let mut h = hash(&time.model);
        let mut chars = 0;
        prefix.push(h);
        tokens_at.push(0);
        let mut breakpoints = Vec::new();
        for (i, b) in blocks.iter().enumerate() {
            h = hash(&(h, b.hash));
            chars += b.chars;
            prefix.push(h);
            tokens_at.push(self.config.tokens(chars));
            if let Some(ttl) = b.breakpoint {
                breakpoints.push((i + 1, ttl));
            }
        }
        self.settle(&prefix, &tokens_at, &breakpoints, time)
    }

    /// Looks the request up at its breakpoints, keeps alive what it reads,
    /// and writes every breakpoint's prefix.
    fn settle(
        &mut self,
        prefix: &[u64],
        tokens_at: &[u64],
        breakpoints: &[(usize, CacheTtl)],
        time: CallTime,
    ) -> Priced {
        let now = time.at_ms.unwrap_or(0);
        let never = time.at_ms.is_none();
        let min = self.config.min_cacheable_tokens;
        let total = tokens_at.last().copied().unwrap_or(0);
        if let Some(warm) = self.prewarm_tokens.take() {
            for (k, h) in prefix.iter().enumerate() {
                if tokens_at[k] >= min && tokens_at[k] <= warm {
                    self.written.insert(*h, (now, time.ttl.millis()));
                }
            }
        }
        let alive = |written: &HashMap<u64, (u64, u64)>, h: &u64| {
            written
                .get(h)
                .is_some_and(|(expiry, _)| never || *expiry >= now)
        };
        let hit = breakpoints
            .iter()
            .flat_map(|(b, _)| (b.saturating_sub(self.config.cache_lookback)..=*b).rev())
            .filter(|k| tokens_at[*k] >= min && alive(&self.written, &prefix[*k]))
            .max();
        let read = hit.map_or(0, |k| tokens_at[k]);
        if let Some(hit) = hit {
            // A read keeps alive every entry on the prefix it read.
            for h in &prefix[..=hit] {
                if let Some((expiry, ttl)) = self.written.get_mut(h) {
                    *expiry = (*expiry).max(now + *ttl);
                }
            }
        }
        let mut write = 0;
        let mut write_1h = 0;
        let mut from = read;
        let mut sorted: Vec<(usize, CacheTtl)> = breakpoints.to_vec();
        sorted.sort_unstable_by_key(|(b, _)| *b);
        for (b, ttl) in sorted {
            let upto = tokens_at[b];
            if upto < min {
                continue;
            }
            let life = ttl.millis();
            let entry = self.written.entry(prefix[b]).or_insert((0, life));
            entry.1 = entry.1.max(life);
            entry.0 = entry.0.max(now + entry.1);
            if upto > from {
                write += upto - from;
                if ttl == CacheTtl::OneHour {
                    write_1h += upto - from;
                }
                from = upto;
            }
        }
        // What follows the last breakpoint (in a recorded request) is plain input.
        Priced {
            read,
            write,
            write_1h,
            total,
        }
    }
}

pub(crate) fn hash<T: Hash + ?Sized>(value: &T) -> u64 {
    let mut h = DefaultHasher::new();
    value.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE_MS: u64 = 60 * 1000;

    /// A session whose history grows by one exchange per call.
    fn history(exchanges: usize) -> Vec<Message> {
        (0..exchanges)
            .flat_map(|i| {
                [
                    Message::user(format!("question {i}: {}", "q".repeat(4_000))),
                    Message::assistant(format!("answer {i}: {}", "a".repeat(4_000))),
                ]
            })
            .collect()
    }

    fn at(minutes: u64, ttl: CacheTtl) -> CallTime {
        CallTime {
            at_ms: Some(1_700_000_000_000 + minutes * MINUTE_MS),
            ttl,
            model: 7,
        }
    }

    /// Calls at 0, 1 and 2 minutes, then one after ten idle minutes.
    fn with_a_ten_minute_gap(ttl: CacheTtl) -> Vec<Priced> {
        let config = ReplayConfig::default();
        let system = "s".repeat(8_000);
        let mut cache = PromptCache::new(&config, &system, system.len());
        [0, 1, 2, 12]
            .iter()
            .enumerate()
            .map(|(k, minutes)| {
                let messages = history(k + 1);
                cache.price(
                    &messages[..messages.len() - 1],
                    Some(0),
                    0,
                    None,
                    at(*minutes, ttl),
                )
            })
            .collect()
    }

    #[test]
    fn the_call_after_a_ten_minute_gap_is_a_cache_write() {
        let priced = with_a_ten_minute_gap(CacheTtl::FiveMinutes);
        // Within the TTL each call reads what the previous one wrote.
        for p in &priced[1..3] {
            assert!(p.read > 0 && p.write < p.read, "{p:?}");
        }
        // After the gap the whole request is written again: nothing is read.
        let after = priced[3];
        assert_eq!(after.read, 0, "{after:?}");
        assert_eq!(after.write, after.total, "{after:?}");
        assert_eq!(after.write_1h, 0);
    }

    /// Calls at `minutes`, the history growing by one exchange each, the
    /// first request's first 1,500 tokens (of 2,000 before the messages)
    /// cached by the agent's other sessions; `rebuilt_before` marks calls
    /// before which the agent changed what it sends past some tokens.
    fn with_a_shared_system_prompt(
        minutes: &[u64],
        rebuilt_before: &[(usize, u64)],
    ) -> Vec<Priced> {
        let config = ReplayConfig::default();
        let system = "s".repeat(8_000);
        let mut cache = PromptCache::new(&config, &system, system.len());
        cache.prewarm(1_500);
        minutes
            .iter()
            .enumerate()
            .map(|(k, m)| {
                for (_, kept) in rebuilt_before.iter().filter(|(at, _)| *at == k) {
                    cache.rebuild_prefix(*kept);
                }
                let messages = history(k + 1);
                let time = at(*m, CacheTtl::FiveMinutes);
                cache.price(&messages[..messages.len() - 1], Some(0), 0, None, time)
            })
            .collect()
    }

    #[test]
    fn a_rebuilt_prefix_reads_only_the_shared_system_prompt_back() {
        let priced = with_a_shared_system_prompt(&[0, 1, 2, 3], &[(2, 1_500)]);
        assert_eq!(priced[0].read, 1_500, "{priced:?}");
        assert!(priced[1].read > priced[0].total - 10, "{priced:?}");
        // New tools or system text: the rest of the prefix and every message is written again.
        assert_eq!(priced[2].read, 1_500, "{priced:?}");
        assert_eq!(priced[2].write, priced[2].total - 1_500);
        // And read back as usual after that.
        assert!(priced[3].read > priced[2].total - 10, "{priced:?}");
    }

    #[test]
    fn a_change_inside_the_prefix_reads_back_up_to_the_change() {
        let priced = with_a_shared_system_prompt(&[0, 1, 2, 3, 4], &[(2, 1_800)]);
        assert_eq!(priced[2].read, 1_800, "{priced:?}");
        assert_eq!(priced[2].write, priced[2].total - 1_800);
        assert!(priced[3].read > priced[2].total - 10, "{priced:?}");
        // The cut stays a breakpoint of its own: a second change there reads it back.
        assert!(priced[4].read > priced[3].total - 10, "{priced:?}");
    }

    #[test]
    fn a_change_inside_the_messages_reads_back_the_messages_before_it() {
        let priced = with_a_shared_system_prompt(&[0, 1, 2, 3, 4], &[(3, 5_000)]);
        // Messages of about 1,000 tokens: the last boundary before the change.
        assert!((4_000..=5_000).contains(&priced[3].read), "{priced:?}");
        assert_eq!(priced[3].write, priced[3].total - priced[3].read);
        assert!(priced[4].read > priced[3].total - 10, "{priced:?}");
        // Without the change, the same call reads everything back.
        let plain = with_a_shared_system_prompt(&[0, 1, 2, 3, 4], &[]);
        assert!(plain[3].read > plain[2].total - 10, "{plain:?}");
    }

    #[test]
    fn a_change_at_the_start_reads_nothing_back_not_even_the_shared_part() {
        let priced = with_a_shared_system_prompt(&[0, 1, 2, 3], &[(2, 0)]);
        assert_eq!(priced[2].read, 0, "{priced:?}");
        assert_eq!(priced[2].write, priced[2].total);
        assert!(priced[3].read > priced[2].total - 10, "{priced:?}");
    }

    #[test]
    fn the_shared_system_prompt_outlives_an_idle_gap() {
        let priced = with_a_shared_system_prompt(&[0, 1, 20], &[]);
        // Twenty idle minutes: the conversation expired, the shared part did not.
        assert_eq!(priced[2].read, 1_500, "{priced:?}");
        assert_eq!(priced[2].write, priced[2].total - 1_500);
    }

    #[test]
    fn an_hour_cache_outlives_the_same_gap() {
        let priced = with_a_ten_minute_gap(CacheTtl::OneHour);
        let after = priced[3];
        assert!(after.read >= priced[2].total - 10, "{priced:?}");
        assert_eq!(after.write, after.total - after.read);
        // Hour writes are counted as such.
        assert_eq!(priced[0].write_1h, priced[0].write);
    }
}
