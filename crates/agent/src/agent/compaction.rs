//! Compaction in the loop: the pipeline before every model call, `/compact`
//! and the `compact` tool, and recovery from an overflow. The pipeline stops
//! whenever it needs a summary; the session's own model writes it, awaited
//! here like any other call, so the loop runs on any tokio runtime.

use super::error::AgentError;
use super::events::{AgentEvent, EventSink};
use super::{Agent, LOG_INLINE_MAX_CHARS, MeterChoice};
use crate::hooks::HookEvent;
use crate::summarizer::ProviderSummarizer;
use std::time::Instant;
use tokio_util::sync::CancellationToken;
use whittle_context::session::{SessionRecord, log_form};
use whittle_context::{CachePrices, CacheState, Outcome, PrepareOutcome, Progress, StepReport};
use whittle_llm::Usage;

/// How long the provider keeps a cached prefix after a request: the
/// 5-minute default of Anthropic's prompt caching (OpenAI's automatic
/// caching keeps one 5 to 10 minutes).
const CACHE_TTL_MS: u64 = 5 * 60 * 1000;

/// When this session last sent the provider a request, and how many it
/// has sent: the compactor rewrites the cached prefix below the limit only
/// when the cache is cold or the rewrite pays (see `CacheState`).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct ModelCalls {
    last: Option<Instant>,
    count: u64,
}

impl ModelCalls {
    /// A request is being sent now.
    pub(super) fn sent(&mut self) {
        self.last = Some(Instant::now());
        self.count += 1;
    }

    /// What the provider's cache holds before the next request, at list
    /// prices; `None` before the first request of this process (a resumed
    /// session's cache age is unknown), so the steps run on size alone.
    pub(super) fn cache_state(&self) -> Option<CacheState> {
        let last = self.last?;
        Some(CacheState {
            prices: CachePrices::ANTHROPIC_5M,
            ttl_ms: CACHE_TTL_MS,
            idle_ms: Some(u64::try_from(last.elapsed().as_millis()).unwrap_or(u64::MAX)),
            calls_so_far: self.count,
        })
    }
}

impl Agent {
    /// `/compact [focus]` and the `compact` tool: summarize now. `cancel`
    /// abandons the summary call, leaving the history as it was.
    pub async fn compact(
        &mut self,
        focus: Option<&str>,
        sink: &mut dyn EventSink,
        cancel: &CancellationToken,
    ) -> Result<StepReport, AgentError> {
        self.announce_compaction("manual", sink).await;
        let mut summarizer = self.summarizer(cancel);
        let progress = self
            .compactor
            .start_compact(&mut self.history, &self.request, focus);
        let report = answer_summaries(progress, &mut summarizer, sink).await;
        self.after_compaction(summarizer.take_usage(), std::slice::from_ref(&report), sink)
            .await?;
        Ok(report)
    }

    /// The pipeline before a model call. The PreCompact hook hears of it
    /// only when the context is over the limit, i.e. when a summary may follow.
    pub(super) async fn prepare(
        &mut self,
        sink: &mut dyn EventSink,
        cancel: &CancellationToken,
    ) -> Result<PrepareOutcome, AgentError> {
        if self.compactor.measure(&self.history) > self.compactor.limits().context_limit {
            self.announce_compaction("auto", sink).await;
        }
        let cache = match self.config.meter {
            MeterChoice::Tokens => self.model_calls.cache_state(),
            // The character meter is the seed's teaching setup: its steps
            // run on their size triggers, as the seed's do.
            MeterChoice::Chars => None,
        };
        self.compactor.set_cache_state(cache);
        let mut summarizer = self.summarizer(cancel);
        let progress = self
            .compactor
            .start_prepare(&mut self.history, &self.request);
        let outcome = answer_summaries(progress, &mut summarizer, sink).await;
        self.after_compaction(summarizer.take_usage(), &outcome.reports, sink)
            .await?;
        Ok(outcome)
    }

    /// After the provider refused the request as too long.
    pub(super) async fn reactive_compact(
        &mut self,
        sink: &mut dyn EventSink,
        cancel: &CancellationToken,
    ) -> Result<StepReport, AgentError> {
        self.announce_compaction("overflow", sink).await;
        let mut summarizer = self.summarizer(cancel);
        let progress = self
            .compactor
            .start_reactive_compact(&mut self.history, &self.request);
        let report = answer_summaries(progress, &mut summarizer, sink).await;
        self.after_compaction(summarizer.take_usage(), std::slice::from_ref(&report), sink)
            .await?;
        Ok(report)
    }

    /// Runs the PreCompact hooks; they can only watch, not block.
    async fn announce_compaction(&mut self, trigger: &str, sink: &mut dyn EventSink) {
        let event = HookEvent::PreCompact {
            trigger: trigger.into(),
            size: self.compactor.measure(&self.history),
        };
        self.run_hook(&event, sink).await;
    }

    /// Summaries by the session's model with the conversation's own system
    /// prompt, tools and reasoning, so a summary in place reads the cached
    /// prefix; `cancel` abandons the call.
    fn summarizer(&self, cancel: &CancellationToken) -> ProviderSummarizer {
        ProviderSummarizer::new(
            self.provider.clone(),
            &self.config.model,
            &self.config.system_prompt,
            self.tools.specs(),
            self.config.max_tokens,
        )
        .with_reasoning(self.config.reasoning)
        .with_cancel(cancel.clone())
    }

    /// Shows and logs what compaction did: first the summary calls' usage,
    /// then each report (a failure also as a warning and a log record), then
    /// one log record with the new history, then the PostCompact hooks.
    async fn after_compaction(
        &mut self,
        summary_usage: Vec<Usage>,
        reports: &[StepReport],
        sink: &mut dyn EventSink,
    ) -> Result<(), AgentError> {
        for usage in summary_usage {
            self.count_usage(&usage)?;
            sink.on_event(AgentEvent::Usage(usage));
        }
        let applied: Vec<&StepReport> = reports.iter().filter(|r| r.applied()).collect();
        for r in reports {
            if let Some(t) = r.transcript() {
                self.last_transcript = Some(t.clone());
            }
            sink.on_event(AgentEvent::Compaction(r.clone()));
            if let Outcome::Failed(why) = &r.outcome {
                sink.on_event(AgentEvent::Warning(format!(
                    "{} failed: {why}",
                    r.step.as_str()
                )));
                self.log(SessionRecord::CompactionFailed {
                    step: r.step.as_str().to_string(),
                    trigger: r.trigger.as_str().to_string(),
                    reason: why.to_string(),
                })?;
            }
        }
        let (Some(first), Some(last)) = (applied.first(), applied.last()) else {
            // A summary that failed after archiving still moved the mark.
            let archived = self.history.archived();
            if archived != self.logged_archived {
                self.logged_archived = archived;
                self.log(SessionRecord::Archived { count: archived })?;
            }
            return Ok(());
        };
        let span = self.history.take_edited_span();
        let changed = span.from..self.history.len() - span.keep_last;
        let (messages, refs) = if self.session.is_some() {
            log_form(
                &self.history.messages()[changed],
                self.compactor.store(),
                LOG_INLINE_MAX_CHARS,
            )?
        } else {
            (Vec::new(), Vec::new())
        };
        self.logged_archived = self.history.archived();
        let record = SessionRecord::Compaction {
            step: applied
                .iter()
                .map(|r| r.step.as_str())
                .collect::<Vec<_>>()
                .join("+"),
            trigger: applied
                .iter()
                .map(|r| r.trigger.as_str())
                .collect::<Vec<_>>()
                .join("+"),
            before: first.before,
            after: last.after,
            unit: last.unit.as_str().to_string(),
            paths: applied
                .iter()
                .flat_map(|r| r.paths.iter().cloned())
                .collect(),
            from: span.from,
            keep_last: span.keep_last,
            messages,
            refs,
            archived: Some(self.logged_archived),
        };
        self.log(record)?;
        for r in applied {
            let event = HookEvent::PostCompact {
                step: r.step.as_str().to_string(),
                before: r.before,
                after: r.after,
                paths: r.paths.clone(),
            };
            self.run_hook(&event, sink).await;
        }
        Ok(())
    }
}

/// Answers every summary request of a pipeline entry point with the model
/// until the entry point finishes.
async fn answer_summaries<T>(
    mut progress: Progress<'_, T>,
    summarizer: &mut ProviderSummarizer,
    sink: &mut dyn EventSink,
) -> T {
    loop {
        progress = match progress {
            Progress::Done(result) => return result,
            Progress::NeedsSummary(needed) => {
                let answer = summarizer
                    .summarize_with_progress(
                        needed.input(),
                        needed.focus(),
                        needed.ledger(),
                        needed.max_chars(),
                        &mut |p| sink.on_event(AgentEvent::Summarizing(p)),
                    )
                    .await;
                needed.resume(answer)
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::ModelCalls;

    #[test]
    fn the_cache_is_unknown_before_the_first_request_and_warm_just_after() {
        let mut calls = ModelCalls::default();
        assert_eq!(calls.cache_state(), None);
        calls.sent();
        calls.sent();
        let state = calls.cache_state().unwrap();
        assert_eq!(state.calls_so_far, 2);
        assert!(!state.cold());
    }
}
