//! Which recorded calls found the agent's prompt changed: read from the
//! bill, not guessed from the conversation.
//!
//! Anthropic's prompt cache is a prefix match (tools, then system, then
//! messages): a call reads back the longest prefix, ending within 20 blocks
//! before one of its breakpoints, that an earlier call of the same model
//! wrote and that has not outlived its TTL (5 minutes or an hour since it was
//! last written or read). A call that only appends to the previous request
//! therefore reads back at least what that request cached (its reads plus
//! its writes). When its bill says it read less, although the model is the
//! same, the TTL has not run out and the agent did not compact in between,
//! the agent changed something it sends before that point: its tools or
//! system text (Claude Code after a background task's notice or `/mcp`
//! reconnecting a server), or an earlier message. The billed read then says
//! where: everything after it was written again.
//!
//! This replaces a rule fitted to four events ("a harness-written turn misses
//! everything past the system prompt"), which fired on notices that changed
//! nothing and missed changes after other turns; see `/work/notes/bill24.md`
//! for the leave-one-out comparison.

use crate::recorded::RecordedCall;

/// How much less than the previous call cached a call may read back before
/// its bill counts as a changed prompt, as a share of that previous
/// request: tokenization of an appended request may differ by a few tokens,
/// a changed prompt reads back far less (on the shared traces: 81-87% less).
pub const PREFIX_CHANGE_SHORTFALL: f64 = 0.05;

/// For each of `calls` (in conversation order), whether its bill shows that
/// the agent changed its prompt since the previous call of the same model.
/// `restarts` are the message indices where the recording agent's own
/// compactions restarted the history: the first call after one is new
/// anyway. `shortfall` is [`PREFIX_CHANGE_SHORTFALL`] unless measuring it.
pub fn changed_prompts(calls: &[RecordedCall], restarts: &[usize], shortfall: f64) -> Vec<bool> {
    let mut changed = vec![false; calls.len()];
    for (k, call) in calls.iter().enumerate() {
        let Some(usage) = call.usage else {
            continue;
        };
        let Some(previous) = calls[..k]
            .iter()
            .rev()
            .find(|p| p.usage.is_some() && p.model == call.model)
        else {
            continue;
        };
        let Some(before) = previous.usage else {
            continue;
        };
        let compacted = restarts
            .iter()
            .any(|r| *r > previous.message && *r <= call.message);
        let lifetime = previous.cache_ttl.unwrap_or_default().millis();
        let expired = matches!((previous.at_ms, call.at_ms),
            (Some(then), Some(now)) if now.saturating_sub(then) > lifetime);
        let cached = before.cache_read_tokens + before.cache_write_tokens;
        let short = (usage.cache_read_tokens as f64) < (1.0 - shortfall) * cached as f64;
        changed[k] = short && !compacted && !expired;
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorded::{CacheTtl, RecordedUsage};

    const MINUTE_MS: u64 = 60_000;

    fn call(message: usize, minute: u64, model: &str, read: u64, write: u64) -> RecordedCall {
        RecordedCall {
            message,
            at_ms: Some(minute * MINUTE_MS),
            model: Some(model.into()),
            usage: Some(RecordedUsage {
                cache_read_tokens: read,
                cache_write_tokens: write,
                ..RecordedUsage::default()
            }),
            cache_ttl: Some(CacheTtl::FiveMinutes),
            ..RecordedCall::default()
        }
    }

    #[test]
    fn a_call_reading_back_less_than_the_last_one_cached_changed_its_prompt() {
        let calls = [
            call(1, 0, "m", 20_000, 5_000),
            call(3, 1, "m", 25_000, 2_000),
            // Read back only the system prompt: the rest changed.
            call(5, 2, "m", 20_000, 9_000),
            call(7, 3, "m", 29_000, 1_000),
        ];
        assert_eq!(
            changed_prompts(&calls, &[], PREFIX_CHANGE_SHORTFALL),
            [false, false, true, false]
        );
    }

    #[test]
    fn expiry_another_model_and_a_compaction_explain_a_miss_by_themselves() {
        let calls = [
            call(1, 0, "m", 20_000, 5_000),
            // Ten idle minutes with a five-minute cache.
            call(3, 10, "m", 20_000, 7_000),
            // Another model has a cache of its own.
            call(5, 11, "small", 0, 9_000),
            call(7, 12, "m", 27_000, 1_000),
            // The recording agent compacted at message 8.
            call(9, 13, "m", 20_000, 3_000),
        ];
        assert_eq!(
            changed_prompts(&calls, &[8], PREFIX_CHANGE_SHORTFALL),
            [false; 5]
        );
        // Without the compaction, the last call's bill says the prompt changed.
        assert!(changed_prompts(&calls, &[], PREFIX_CHANGE_SHORTFALL)[4]);
    }

    #[test]
    fn an_hour_cache_does_not_expire_over_ten_minutes() {
        let mut calls = [
            call(1, 0, "m", 20_000, 5_000),
            call(3, 10, "m", 20_000, 7_000),
        ];
        calls[0].cache_ttl = Some(CacheTtl::OneHour);
        assert_eq!(
            changed_prompts(&calls, &[], PREFIX_CHANGE_SHORTFALL),
            [false, true]
        );
    }
}
