//! Replaying one recorded conversation through one policy, as if the agent
//! were live.
//!
//! Every assistant turn of the recording is one model call. Before it, the
//! policy's pipeline runs on the history rebuilt so far; the request that
//! would have been sent is measured (tokens = characters / `chars_per_token`),
//! validated, and priced by the [prompt-cache simulator](crate::prompt_cache).
//! Then the recorded answer is appended and the replay goes on.

use crate::policy::{MASK_KEEP_RESULTS, Policy, ReplayConfig};
use crate::prompt_cache::PromptCache;
use crate::report::ReplayReport;
use std::path::Path;
use std::time::Instant;
use whittle_context::{
    CONTINUATION_INSTRUCTION, CharMeter, Compactor, Content, Ctx, History, Limits, Message, Meter,
    Outcome, Role, Step, Store, SummarizeError, Summarizer, SummaryInput, TokenMeter, cache_anchor,
    check_recovery, micro_compact, validate,
};

/// Passes summaries through and prices them: a continuation goes through
/// the prompt cache like any request, a transcript is fresh input.
struct Counting<'a, 'c> {
    inner: &'a mut dyn Summarizer,
    cache: PromptCache<'c>,
    calls: u64,
    read_tokens: u64,
    write_tokens: u64,
    fresh_tokens: u64,
    output_chars: usize,
}

impl Summarizer for Counting<'_, '_> {
    fn summarize(
        &mut self,
        input: SummaryInput<'_>,
        focus: Option<&str>,
    ) -> Result<String, SummarizeError> {
        self.calls += 1;
        let instruction = CONTINUATION_INSTRUCTION.len() + focus.map_or(0, str::len);
        match input {
            SummaryInput::Continuation(messages) => {
                let (read, write) = self.cache.price(messages, None, instruction, None);
                self.read_tokens += read;
                self.write_tokens += write;
            }
            SummaryInput::Transcript(t) => {
                self.fresh_tokens += self.cache.config.tokens(t.chars().count() + instruction);
            }
        }
        let out = self.inner.summarize(input, focus)?;
        self.output_chars += out.chars().count();
        Ok(out)
    }
}

/// Replays `messages` (one recorded conversation) under `policy`, with the
/// store under `store_dir` (which should be empty).
pub fn replay_conversation(
    id: &str,
    messages: &[Message],
    system: Option<&str>,
    policy: Policy,
    config: &ReplayConfig,
    summarizer: &mut dyn Summarizer,
    store_dir: &Path,
) -> ReplayReport {
    let store = Store::new(store_dir);
    let system_chars = system.map_or(0, |s| s.chars().count());
    let mut compactor = match policy {
        Policy::None | Policy::Mask => None,
        Policy::Teaching => Some(Compactor::new(
            Limits::teaching(),
            store.clone(),
            Box::new(CharMeter),
        )),
        Policy::Default => {
            let limits = config.default_limits();
            let mut meter = TokenMeter::new(config.chars_per_token);
            meter.set_overhead_chars(system_chars);
            Some(Compactor::new(limits, store.clone(), Box::new(meter)))
        }
    };
    let mask_limits = Limits {
        context_limit: 0,
        target: 0,
        keep_recent_results: MASK_KEEP_RESULTS,
        clear_at_least: 0,
        ..Limits::teaching()
    };

    let mut report = ReplayReport {
        conversation: id.to_string(),
        policy: policy.name().to_string(),
        ..ReplayReport::default()
    };
    let mut counting = Counting {
        inner: summarizer,
        cache: PromptCache::new(config, system.unwrap_or(""), system_chars),
        calls: 0,
        read_tokens: 0,
        write_tokens: 0,
        fresh_tokens: 0,
        output_chars: 0,
    };
    let mut history = History::default();
    let mut request = String::new();
    let mut times = Vec::new();
    let mut i = 0;
    while i < messages.len() {
        let m = &messages[i];
        if m.role() == Role::User {
            if is_user_input(m) {
                request = m.text();
            }
            history.push(m.clone());
            i += 1;
            continue;
        }
        // An assistant turn: one model call. An opening assistant message
        // with nothing before it cannot be a request; keep it as history.
        if history.is_empty() {
            history.push(m.clone());
            i += 1;
            continue;
        }
        let started = Instant::now();
        let mut applied: Vec<Step> = Vec::new();
        match (&mut compactor, policy) {
            (Some(c), _) => {
                let outcome = c.prepare(&mut history, &request, &mut counting);
                applied.extend(
                    outcome
                        .reports
                        .iter()
                        .filter(|r| r.applied())
                        .map(|r| r.step),
                );
                if config.tokens(history.chars() + system_chars) > config.window_tokens {
                    // The provider would reject it: recover as the agent does.
                    let r = c.reactive_compact(&mut history, &request, &mut counting);
                    if r.outcome == Outcome::Applied {
                        applied.push(r.step);
                    }
                }
            }
            (None, Policy::Mask) => {
                let cx = Ctx {
                    limits: &mask_limits,
                    store: &store,
                    meter: &CharMeter,
                };
                if let Some(r) = micro_compact(&mut history, &cx)
                    && r.applied()
                {
                    applied.push(r.step);
                }
            }
            (None, _) => {}
        }
        times.push(started.elapsed().as_micros() as u64);
        for step in applied {
            *report.steps.entry(step.as_str().to_string()).or_default() += 1;
        }

        if validate(history.messages()).is_err() {
            report.invalid_requests += 1;
        }
        let tokens = config.tokens(history.chars() + system_chars);
        if tokens > config.window_tokens {
            report.over_window += 1;
            report.overflow_calls.push(report.calls);
        }
        report.peak_tokens = report.peak_tokens.max(tokens);
        let anchor = match &compactor {
            Some(c) => c.cache_anchor(&history),
            None => cache_anchor(
                &history,
                &Ctx {
                    limits: &mask_limits,
                    store: &store,
                    meter: &CharMeter,
                },
            ),
        };
        let (read, write) =
            counting
                .cache
                .price(history.messages(), Some(history.epoch()), 0, anchor);
        history.mark();
        report.input_tokens += tokens;
        report.cache_read_tokens += read;
        report.cache_write_tokens += write;
        report.uncached_tokens += tokens.saturating_sub(read + write);
        report.calls += 1;

        // The recorded answer: this and any directly following assistant messages.
        while i < messages.len() && messages[i].role() == Role::Assistant {
            report.output_tokens += config.tokens(content_chars(&messages[i]));
            history.push(messages[i].clone());
            i += 1;
        }
    }

    report.summarize_calls = counting.calls;
    report.summarize_input_tokens =
        counting.read_tokens + counting.write_tokens + counting.fresh_tokens;
    report.output_tokens += config.tokens(counting.output_chars);
    let p = config.prices;
    let per = |tokens: u64, price: f64| tokens as f64 * price / 1_000_000.0;
    report.cost_usd = per(
        report.cache_read_tokens + counting.read_tokens,
        p.input * p.cache_read_multiplier,
    ) + per(
        report.cache_write_tokens + counting.write_tokens,
        p.input * p.cache_write_multiplier,
    ) + per(report.uncached_tokens + counting.fresh_tokens, p.input)
        + per(report.output_tokens, p.output);
    report.unrecoverable_chars =
        check_recovery(messages, &history, &store).unrecoverable_chars as u64;
    report.pipeline_us_by_call = times.clone();
    times.sort_unstable();
    report.pipeline_us_median = times.get(times.len() / 2).copied().unwrap_or(0);
    report.pipeline_us_max = times.last().copied().unwrap_or(0);
    report.pipeline_us_total = times.iter().sum();
    report
}

/// Whether a user message is input from the person (not tool results).
fn is_user_input(m: &Message) -> bool {
    match m.content() {
        Content::Text(t) => !t.is_empty(),
        Content::Blocks(_) => !m.has_tool_result() && !m.text().is_empty(),
    }
}

/// Characters of a message's content, roughly what the model generated.
fn content_chars(m: &Message) -> usize {
    m.chars().saturating_sub(30)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StandInSummarizer;
    use serde_json::json;
    use std::collections::BTreeMap;
    use whittle_context::Block;

    fn conversation(turns: usize, result_chars: usize) -> Vec<Message> {
        let mut m = vec![Message::user("TASK: fix it")];
        for i in 0..turns {
            let id = format!("t{i}");
            m.push(Message::assistant_blocks(vec![
                Block::text(format!("step {i}")),
                Block::tool_use(&id, "bash", json!({"command": "cat x"})),
            ]));
            m.push(Message::user_blocks(vec![Block::tool_result(
                &id,
                format!("{i}:").repeat(result_chars / 3),
                false,
            )]));
        }
        m.push(Message::assistant("done"));
        m
    }

    #[test]
    fn append_only_conversations_read_the_previous_request_from_cache() {
        let dir = tempfile::tempdir().unwrap();
        let config = ReplayConfig::for_window(1_000_000);
        let msgs = conversation(30, 8_000);
        let r = replay_conversation(
            "c",
            &msgs,
            Some("sys"),
            Policy::None,
            &config,
            &mut StandInSummarizer::default(),
            dir.path(),
        );
        assert_eq!(r.calls, 31);
        assert_eq!(
            r.input_tokens,
            r.cache_read_tokens + r.cache_write_tokens + r.uncached_tokens
        );
        assert!(r.cache_read_share() > 0.85, "{r:?}");
        assert_eq!(r.invalid_requests, 0);
        assert_eq!(r.unrecoverable_chars, 0);
        assert_eq!(r.over_window, 0);
    }

    #[test]
    fn none_reports_overflow_and_default_stays_in_the_window() {
        let config = ReplayConfig::for_window(32_000);
        let msgs = conversation(60, 6_000);
        let mut results = BTreeMap::new();
        for policy in Policy::ALL {
            let dir = tempfile::tempdir().unwrap();
            let r = replay_conversation(
                "c",
                &msgs,
                None,
                policy,
                &config,
                &mut StandInSummarizer::default(),
                dir.path(),
            );
            assert_eq!(r.invalid_requests, 0, "{policy:?}");
            assert_eq!(r.unrecoverable_chars, 0, "{policy:?}");
            results.insert(policy, r);
        }
        let none = &results[&Policy::None];
        assert!(none.over_window > 0 && none.overflow_calls[0] > 0);
        let default = &results[&Policy::Default];
        assert_eq!(default.over_window, 0, "{default:?}");
        assert!(default.peak_tokens <= 32_000);
        assert!(default.steps.contains_key("micro_compact"), "{default:?}");
        let mask = &results[&Policy::Mask];
        assert!(mask.steps["micro_compact"] > 10);
    }
}
