//! Summaries for compaction, made by the session's own model.

use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use whittle_context::prompts::{
    CONTINUATION_INSTRUCTION, SUMMARY_SYSTEM_PROMPT, TRANSCRIPT_INSTRUCTION, summary_answer_tokens,
    summary_instruction,
};
use whittle_context::{SummarizeError, SummaryInput};
use whittle_llm::{
    LlmError, ModelRequest, Provider, Reasoning, StreamEvent, ToolChoice, ToolSpec, Usage, collect,
};
use whittle_protocol::{Message, Role};

/// How often a summary in the writing reports its growth, in characters.
pub const PROGRESS_STEP_CHARS: usize = 200;

/// How far a summary call has come: sent when it starts and as it grows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SummaryProgress {
    /// Characters of conversation being summarized.
    pub input_chars: usize,
    /// Characters of summary written so far.
    pub written_chars: usize,
    /// The most tokens the summary may take.
    pub max_tokens: u32,
}

/// Summaries for the compaction pipeline's requests
/// ([`SummaryNeeded`](whittle_context::SummaryNeeded)), asked of a provider.
///
/// A continuation is sent with the conversation's own system prompt and
/// tools, so the provider's cached prefix serves it; a transcript is sent
/// with [`SUMMARY_SYSTEM_PROMPT`]. The call is awaited like any other, so it
/// works on any tokio runtime.
pub struct ProviderSummarizer {
    provider: Arc<dyn Provider>,
    model: String,
    system: String,
    tools: Vec<ToolSpec>,
    max_tokens: u32,
    reasoning: Reasoning,
    cancel: CancellationToken,
    /// Usage of each call made, until taken.
    usage: Vec<Usage>,
}

impl ProviderSummarizer {
    /// A summarizer using `provider` with the conversation's `system` prompt and `tools`.
    pub fn new(
        provider: Arc<dyn Provider>,
        model: impl Into<String>,
        system: impl Into<String>,
        tools: Vec<ToolSpec>,
        max_tokens: u32,
    ) -> Self {
        ProviderSummarizer {
            provider,
            model: model.into(),
            system: system.into(),
            tools,
            max_tokens,
            reasoning: Reasoning::default(),
            cancel: CancellationToken::new(),
            usage: Vec::new(),
        }
    }

    /// The usage of every call made since the last time, so a session's
    /// totals include its summaries.
    pub fn take_usage(&mut self) -> Vec<Usage> {
        std::mem::take(&mut self.usage)
    }

    /// Sends continuation summaries with the conversation's own reasoning
    /// settings: a change there would miss the provider's cached prefix.
    pub fn with_reasoning(mut self, reasoning: Reasoning) -> Self {
        self.reasoning = reasoning;
        self
    }

    /// Gives up on the call when `cancel` fires (Ctrl-C during a long
    /// summary); the compaction then fails and leaves the history as it was.
    pub fn with_cancel(mut self, cancel: CancellationToken) -> Self {
        self.cancel = cancel;
        self
    }

    /// Asks the provider for a summary of `input` of at most about
    /// `max_chars` characters, paying particular attention to `focus` when
    /// given. The provider's "too long" becomes
    /// [`SummarizeError::InputTooLong`], so the pipeline retries with less.
    pub async fn summarize(
        &mut self,
        input: SummaryInput<'_>,
        focus: Option<&str>,
        ledger: &str,
        max_chars: usize,
    ) -> Result<String, SummarizeError> {
        self.summarize_with_progress(input, focus, ledger, max_chars, &mut |_| {})
            .await
    }

    /// [`summarize`](Self::summarize), telling `on_progress` when the call
    /// starts and each time the summary grows by another
    /// [`PROGRESS_STEP_CHARS`]: a small local model writes a summary for
    /// tens of seconds, and a person watching should see it move.
    pub async fn summarize_with_progress(
        &mut self,
        input: SummaryInput<'_>,
        focus: Option<&str>,
        ledger: &str,
        max_chars: usize,
        on_progress: &mut (dyn FnMut(SummaryProgress) + Send),
    ) -> Result<String, SummarizeError> {
        let input_chars = input.chars();
        let request = self.request(input, focus, ledger, max_chars);
        let mut progress = SummaryProgress {
            input_chars,
            written_chars: 0,
            max_tokens: request.max_tokens,
        };
        on_progress(progress);
        let mut next_report = PROGRESS_STEP_CHARS;
        let call = async {
            let stream = self.provider.stream(request).await?;
            collect(stream, |event| {
                if let StreamEvent::TextDelta { text, .. } = event {
                    progress.written_chars += text.chars().count();
                    if progress.written_chars >= next_report {
                        next_report = progress.written_chars + PROGRESS_STEP_CHARS;
                        on_progress(progress);
                    }
                }
            })
            .await
        };
        let result = tokio::select! {
            result = call => result,
            () = self.cancel.cancelled() => return Err(SummarizeError::Cancelled),
        };
        match result {
            Ok(response) => {
                self.usage.push(response.usage);
                debug_assert_eq!(response.message.role(), Role::Assistant);
                let text = response.message.text();
                if text.trim().is_empty() {
                    Err(SummarizeError::Empty)
                } else {
                    Ok(text)
                }
            }
            Err(LlmError::ContextOverflow { .. }) => Err(SummarizeError::InputTooLong),
            Err(e) => Err(SummarizeError::failed(e)),
        }
    }

    fn request(
        &self,
        input: SummaryInput<'_>,
        focus: Option<&str>,
        ledger: &str,
        max_chars: usize,
    ) -> ModelRequest {
        match input {
            SummaryInput::Continuation(messages) => {
                let input_chars = messages.iter().map(Message::chars).sum();
                let mut messages = messages.to_vec();
                let ask = summary_instruction(CONTINUATION_INSTRUCTION, focus, ledger, max_chars);
                // After tool results the ask joins their user turn.
                messages.push(Message::user(ask));
                let mut request = ModelRequest::new(&self.model, &self.system, messages);
                request.tools = self.tools.clone();
                // The tools are there for the cached prefix, not to be called.
                request.tool_choice = ToolChoice::None;
                request.max_tokens = summary_max_tokens(self.max_tokens, input_chars, max_chars);
                request.reasoning = self.reasoning;
                request
            }
            SummaryInput::Transcript(text) => {
                let ask = format!(
                    "<conversation>\n{text}\n</conversation>\n\n{}",
                    summary_instruction(TRANSCRIPT_INSTRUCTION, focus, ledger, max_chars)
                );
                let mut request =
                    ModelRequest::new(&self.model, SUMMARY_SYSTEM_PROMPT, vec![Message::user(ask)]);
                request.max_tokens =
                    summary_max_tokens(self.max_tokens, text.chars().count(), max_chars);
                request
            }
        }
    }
}

/// Output tokens a summary of `input_chars` may take: at most half of what
/// it replaces (about four characters a token), never under 256, never over
/// `cap`. A longer summary would be refused as not smaller anyway, and a
/// small local model that rambles to its cap takes minutes to get there.
/// Nor over [`summary_answer_tokens`] of the `max_chars` the request asks
/// for, the room the pipeline leaves beside a summary made in place.
fn summary_max_tokens(cap: u32, input_chars: usize, max_chars: usize) -> u32 {
    let half = u32::try_from(input_chars / 8).unwrap_or(u32::MAX);
    let asked = u32::try_from(summary_answer_tokens(max_chars)).unwrap_or(u32::MAX);
    half.min(asked).clamp(256.min(cap), cap)
}

#[cfg(test)]
mod bound_tests {
    use super::summary_max_tokens;

    #[test]
    fn a_summary_may_take_half_of_what_it_replaces_within_bounds() {
        let any = usize::MAX;
        assert_eq!(summary_max_tokens(8_192, 1_112, any), 256);
        assert_eq!(summary_max_tokens(8_192, 40_000, any), 5_000);
        assert_eq!(summary_max_tokens(8_192, 4_000_000, any), 8_192);
        assert_eq!(summary_max_tokens(100, 10, any), 100);
    }

    #[test]
    fn a_summary_may_take_twice_the_length_asked_for_within_bounds() {
        assert_eq!(summary_max_tokens(8_192, 40_000, 2_000), 1_000);
        assert_eq!(summary_max_tokens(8_192, 40_000, 1_000), 500);
        assert_eq!(summary_max_tokens(8_192, 40_000, 100), 256);
        assert_eq!(summary_max_tokens(300, 40_000, 2_000), 300);
    }
}
