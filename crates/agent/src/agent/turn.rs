//! One user turn: run the pipeline, call the model, run its tools, repeat
//! until it answers without a tool call; recover once from an overflow,
//! and once from an answer cut at the room a full window left it.

use super::Agent;
use super::error::AgentError;
use super::events::{AgentEvent, EventSink};
use super::tool_dispatch::AfterTools;
use crate::hooks::HookEvent;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;
use whittle_context::session::SessionRecord;
use whittle_llm::{Collector, LlmError, ModelRequest, ModelResponse, StopReason, StreamEvent};
use whittle_protocol::{Message, ToolUse, validate};

/// How a turn ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TurnOutcome {
    /// The model answered without calling a tool.
    Done {
        /// Its final text.
        text: String,
    },
    /// The person cancelled; the history stays valid.
    Cancelled,
    /// The turn used up `max_turns` model calls.
    MaxTurns,
    /// A UserPromptSubmit hook refused the prompt.
    Blocked {
        /// The hook's reason.
        reason: String,
    },
}

/// The output limit a request was sent with.
#[derive(Clone, Copy, Debug)]
struct AnswerRoom {
    /// `max_tokens`.
    tokens: u32,
    /// Whether it was less than the configured limit because the history
    /// had grown into the answer's reserve (`Limits::squeezes`).
    squeezed: bool,
}

impl Agent {
    /// Runs one user turn: the input enters as the active request, then the
    /// model and tools alternate until the model answers without a tool call.
    pub async fn run_turn(
        &mut self,
        input: &str,
        sink: &mut dyn EventSink,
        cancel: &CancellationToken,
    ) -> Result<TurnOutcome, AgentError> {
        self.run_turn_with_images(input, Vec::new(), sink, cancel)
            .await
    }

    /// [`Agent::run_turn`] with pictures the person attached (an editor's
    /// pasted screenshot), sent after the text in the same message and
    /// kept in the session log with it.
    pub async fn run_turn_with_images(
        &mut self,
        input: &str,
        images: Vec<whittle_protocol::Image>,
        sink: &mut dyn EventSink,
        cancel: &CancellationToken,
    ) -> Result<TurnOutcome, AgentError> {
        let prompt = HookEvent::UserPromptSubmit {
            prompt: input.to_string(),
        };
        if let Some(reason) = self.run_hook(&prompt, sink).await {
            return Ok(TurnOutcome::Blocked { reason });
        }
        self.request = input.to_string();
        self.log(SessionRecord::Input {
            text: input.to_string(),
        })?;
        let message = if images.is_empty() {
            Message::user(input)
        } else {
            let mut blocks = vec![whittle_protocol::Block::text(input)];
            blocks.extend(images.into_iter().map(whittle_protocol::Block::Image));
            Message::user_blocks(blocks)
        };
        self.push(message)?;
        self.continue_turn(sink, cancel).await
    }

    /// Runs the loop from the current history without new input (after a
    /// resume whose last message awaits an answer).
    pub async fn continue_turn(
        &mut self,
        sink: &mut dyn EventSink,
        cancel: &CancellationToken,
    ) -> Result<TurnOutcome, AgentError> {
        let tool_ctx = self.tool_ctx.clone().with_cancel(cancel.clone());
        self.checkpoints.new_turn();
        let mut calls = 0;
        let mut reactive_used = false;
        let mut room_made = false;
        // A prepare already run for the next call (after a cut answer).
        let mut prepared = None;
        loop {
            if cancel.is_cancelled() {
                return Ok(TurnOutcome::Cancelled);
            }
            if calls >= self.config.max_turns {
                return Ok(TurnOutcome::MaxTurns);
            }
            let outcome = match prepared.take() {
                Some(outcome) => outcome,
                None => self.prepare(sink, cancel).await?,
            };
            if cancel.is_cancelled() {
                return Ok(TurnOutcome::Cancelled);
            }
            if outcome.should_stop() {
                return Err(AgentError::ContextSpiral {
                    after: outcome.after,
                    limit: self.compactor.limits().context_limit,
                    unit: self.compactor.meter().unit().as_str(),
                });
            }
            let (response, room) = match self.call_model(sink, cancel).await {
                Ok(Some(answered)) => answered,
                Ok(None) => return Ok(TurnOutcome::Cancelled),
                Err(AgentError::Llm(LlmError::ContextOverflow {
                    message, tokens, ..
                })) => {
                    if reactive_used {
                        return Err(AgentError::Overflow {
                            message,
                            transcript: self.last_transcript.clone(),
                        });
                    }
                    reactive_used = true;
                    if let Some(t) = tokens {
                        // The meter underestimated: learn the real size.
                        self.compactor.meter_mut().observe(&self.history, t);
                    }
                    let report = self.reactive_compact(sink, cancel).await?;
                    if cancel.is_cancelled() {
                        return Ok(TurnOutcome::Cancelled);
                    }
                    if !report.applied() {
                        return Err(AgentError::Overflow {
                            message,
                            transcript: self.last_transcript.clone(),
                        });
                    }
                    continue;
                }
                Err(e) => return Err(e),
            };
            reactive_used = false;
            calls += 1;
            self.count_usage(&response.usage)?;
            self.compactor
                .meter_mut()
                .observe(&self.history, response.usage.total_input_tokens());
            sink.on_event(AgentEvent::Usage(response.usage));
            if room.squeezed && response.stop_reason == Some(StopReason::MaxTokens) && !room_made {
                // The history had grown into the answer's reserve and the
                // answer needed more than was left: compact to give it the
                // full room, and if that made room, drop the answer (it is
                // paid for) and ask again.
                room_made = true;
                self.compactor.leave_full_answer_room();
                let outcome = self.prepare(sink, cancel).await?;
                if cancel.is_cancelled() {
                    return Ok(TurnOutcome::Cancelled);
                }
                if !self.compactor.squeezes_answer(&self.history) {
                    sink.on_event(AgentEvent::Warning(format!(
                        "the answer reached the {} tokens the window left it; \
                         compacted to give it {}, asking again",
                        room.tokens, self.config.max_tokens
                    )));
                    prepared = Some(outcome);
                    continue;
                }
                sink.on_event(AgentEvent::Warning(format!(
                    "the answer reached the {} tokens the window left it, and \
                     compacting made no more room: it is kept as it came",
                    room.tokens
                )));
            }
            room_made = false;

            let mut message = response.message;
            if message.blocks().is_empty() && message.text().is_empty() {
                message = Message::assistant("(no answer)");
            }
            let uses: Vec<ToolUse> = message.tool_uses().cloned().collect();
            let text = message.text();
            self.push(message)?;
            if uses.is_empty() {
                let stop = HookEvent::Stop {
                    last_text: text.clone(),
                };
                if let Some(reason) = self.run_hook(&stop, sink).await {
                    self.push(Message::user(format!("[Stop hook] {reason}")))?;
                    continue;
                }
                return Ok(TurnOutcome::Done { text });
            }
            let (results, after) = self.run_tools(&uses, &tool_ctx, sink, cancel).await?;
            self.push(Message::user_blocks(results))?;
            if cancel.is_cancelled() {
                return Ok(TurnOutcome::Cancelled);
            }
            if let AfterTools::Compact { focus } = after {
                self.compact(focus.as_deref(), sink, cancel).await?;
            }
        }
    }

    /// The request's output limit: the configured one, or what the window
    /// has left where the history has grown past the window limit into the
    /// answer's reserve (`Limits::answer_room`), so that a session near
    /// its end is not compacted for room its answers rarely use.
    fn answer_room(&self) -> AnswerRoom {
        let full = self.config.max_tokens;
        let room = self.compactor.answer_room(&self.history, u64::from(full));
        AnswerRoom {
            tokens: u32::try_from(room).unwrap_or(full).max(1),
            squeezed: self.compactor.squeezes_answer(&self.history),
        }
    }

    /// One model call, streamed to the sink, with the output limit it was
    /// given. `Ok(None)` when cancelled. A history that breaks the Messages
    /// API rules is a bug here, never sent.
    async fn call_model(
        &mut self,
        sink: &mut dyn EventSink,
        cancel: &CancellationToken,
    ) -> Result<Option<(ModelResponse, AnswerRoom)>, AgentError> {
        validate(self.history.messages())?;
        let mut request = ModelRequest::new(
            &self.config.model,
            &self.config.system_prompt,
            self.history.messages().to_vec(),
        );
        request.tools = self.tools.specs();
        let room = self.answer_room();
        request.max_tokens = room.tokens;
        request.reasoning = self.config.reasoning;
        request.cache_anchor = self.compactor.cache_anchor(&self.history);
        self.history.mark();
        self.model_calls.sent();
        sink.on_event(AgentEvent::Waiting);
        let mut stream = tokio::select! {
            s = self.provider.stream(request) => s?,
            _ = cancel.cancelled() => return Ok(None),
        };
        let mut collector = Collector::new();
        // The next compaction's work on single messages is done while the
        // model answers, once its first event has arrived and been passed
        // on: off the path of the next call, and never in the way of the
        // first token (after a resume it is every message's work).
        let mut ahead_done = false;
        loop {
            let next = tokio::select! {
                n = stream.next() => n,
                _ = cancel.cancelled() => return Ok(None),
            };
            let Some(event) = next else { break };
            let event = event?;
            match &event {
                StreamEvent::TextDelta { text, .. } => {
                    sink.on_event(AgentEvent::Text(text.clone()))
                }
                StreamEvent::ThinkingDelta { thinking, .. } => {
                    sink.on_event(AgentEvent::Thinking(thinking.clone()))
                }
                StreamEvent::Retry {
                    attempt,
                    delay,
                    reason,
                } => sink.on_event(AgentEvent::Retry {
                    attempt: *attempt,
                    delay: *delay,
                    reason: reason.to_string(),
                }),
                _ => {}
            }
            collector.push(&event)?;
            if !ahead_done {
                self.compactor.prepare_ahead(&mut self.history);
                ahead_done = true;
            }
        }
        if !ahead_done {
            self.compactor.prepare_ahead(&mut self.history);
        }
        Ok(Some((collector.finish()?, room)))
    }
}
