//! `-v`: one line per model call, as it returns, with what the call cost
//! in tokens and, for the embedded model, how fast it ran and how much of
//! its prompt came from the prefix cache. `/cost` gives the totals; this is
//! for watching where a slow or dear call came from while it happens.

use std::sync::Arc;
use std::time::Duration;
use whittle_llm::LocalProvider;
use whittle_local::EngineStats;
use whittle_protocol::{Usage, group_digits};

/// Counts the calls and remembers the embedded model's totals at the
/// previous call, so each line shows that call alone.
pub struct CallReporter {
    calls: u64,
    local: Option<(Arc<LocalProvider>, EngineStats)>,
}

impl CallReporter {
    /// A reporter for a session whose provider is `local` when it is the
    /// embedded model.
    pub fn new(local: Option<Arc<LocalProvider>>) -> Self {
        CallReporter {
            calls: 0,
            local: local.map(|provider| {
                let stats = provider.stats();
                (provider, stats)
            }),
        }
    }

    /// The line for the call that just reported `usage`.
    pub fn call_line(&mut self, usage: &Usage) -> String {
        self.calls += 1;
        let figures = match &mut self.local {
            Some((provider, previous)) => {
                let now = provider.stats();
                let figures = embedded_call_figures(previous, &now);
                *previous = now;
                figures
            }
            None => format!(
                "{} input tokens ({} read from the cache, {} written to it), {} output",
                group_digits(usage.total_input_tokens()),
                group_digits(usage.cache_read_input_tokens),
                group_digits(usage.cache_creation_input_tokens),
                group_digits(usage.output_tokens),
            ),
        };
        format!("model call {}: {figures}", self.calls)
    }
}

/// The embedded model's figures between two snapshots of its totals: the
/// prompt tokens reused from the prefix cache and the speed of the rest.
fn embedded_call_figures(before: &EngineStats, after: &EngineStats) -> String {
    let prompt = after
        .usage
        .prompt_tokens
        .saturating_sub(before.usage.prompt_tokens);
    let cached = after
        .usage
        .cached_prompt_tokens
        .saturating_sub(before.usage.cached_prompt_tokens);
    let generated = after
        .usage
        .completion_tokens
        .saturating_sub(before.usage.completion_tokens);
    let prompt_time = after.timings.prompt.saturating_sub(before.timings.prompt);
    let generation_time = after
        .timings
        .generation
        .saturating_sub(before.timings.generation);
    let from_disk = if after.disk_prefix_hits > before.disk_prefix_hits {
        ", read from disk"
    } else {
        ""
    };
    format!(
        "{} prompt tokens ({} from the prefix cache{from_disk}), {} output; prompt {}, generation {}",
        group_digits(prompt as u64),
        group_digits(cached as u64),
        group_digits(generated as u64),
        tokens_per_second(prompt.saturating_sub(cached), prompt_time),
        tokens_per_second(generated, generation_time),
    )
}

fn tokens_per_second(tokens: usize, time: Duration) -> String {
    if tokens == 0 || time.is_zero() {
        return "-".to_string();
    }
    format!("{:.1} tokens/s", tokens as f64 / time.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;
    use whittle_local::{Timings, Usage as LocalUsage};

    fn stats(prompt: usize, cached: usize, generated: usize, ms: (u64, u64)) -> EngineStats {
        EngineStats {
            calls: 1,
            prefix_hits: 0,
            disk_prefix_hits: 0,
            usage: LocalUsage {
                prompt_tokens: prompt,
                cached_prompt_tokens: cached,
                completion_tokens: generated,
            },
            timings: Timings {
                prompt: Duration::from_millis(ms.0),
                generation: Duration::from_millis(ms.1),
            },
        }
    }

    #[test]
    fn a_call_is_reported_by_its_own_figures_not_the_totals() {
        let before = stats(3_000, 0, 20, (10_000, 500));
        // The second call: 3,100 prompt tokens of which 3,000 reused, 100
        // new in 0.5 s, 50 generated in 0.25 s.
        let after = stats(6_100, 3_000, 70, (10_500, 750));
        let line = embedded_call_figures(&before, &after);
        assert_eq!(
            line,
            "3,100 prompt tokens (3,000 from the prefix cache), 50 output; prompt 200.0 tokens/s, generation 200.0 tokens/s"
        );
    }

    #[test]
    fn a_call_that_processed_nothing_new_has_no_prompt_speed() {
        let before = stats(3_000, 0, 20, (10_000, 500));
        let mut after = stats(6_000, 3_000, 20, (10_000, 500));
        after.disk_prefix_hits = 1;
        let line = embedded_call_figures(&before, &after);
        assert_eq!(
            line,
            "3,000 prompt tokens (3,000 from the prefix cache, read from disk), 0 output; prompt -, generation -"
        );
    }

    #[test]
    fn a_remote_call_shows_its_cache_reads_and_writes() {
        let mut reporter = CallReporter::new(None);
        let usage = Usage {
            input_tokens: 12,
            output_tokens: 340,
            cache_creation_input_tokens: 2_000,
            cache_read_input_tokens: 30_000,
        };
        assert_eq!(
            reporter.call_line(&usage),
            "model call 1: 32,012 input tokens (30,000 read from the cache, 2,000 written to it), 340 output"
        );
        assert!(reporter.call_line(&usage).starts_with("model call 2: "));
    }
}
