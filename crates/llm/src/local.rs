//! The embedded model as a [`Provider`]: whittle-local's blocking engine on a
//! blocking thread, its output turned into the same events a server streams.

use crate::error::LlmError;
use crate::event::{EventStream, StopReason, StreamEvent, Usage};
use crate::provider::{BoxFuture, EventSender, Provider, event_channel};
use crate::request::{ModelRequest, ToolChoice};
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::{Arc, Mutex};
use whittle_local::{ChatRequest, GenerationParams, LocalError, LocalModel};
use whittle_protocol::{Block, Role};

/// A GGUF model loaded in this process.
///
/// One model serves one call at a time (the engine keeps its KV cache
/// between calls, so a request that extends the previous one is fast).
pub struct LocalProvider {
    model: Arc<Mutex<LocalModel>>,
    name: String,
    context_window: u64,
    params: GenerationParams,
}

impl std::fmt::Debug for LocalProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalProvider")
            .field("name", &self.name)
            .field("context_window", &self.context_window)
            .finish_non_exhaustive()
    }
}

impl LocalProvider {
    /// Loads the GGUF file at `path`.
    pub fn load(path: &Path) -> Result<Self, LlmError> {
        let mut model = LocalModel::load(path).map_err(engine_error)?;
        // The fixed prefix on disk spares each new process its prefill; without a cache
        // folder the model works as before.
        if let Ok(dir) = whittle_local::prompt_cache_dir() {
            model
                .set_prompt_cache_dir(Some(dir))
                .map_err(engine_error)?;
        }
        let name = path
            .file_stem()
            .map_or_else(|| "local".to_string(), |s| s.to_string_lossy().into_owned());
        Ok(LocalProvider {
            context_window: model.context_window() as u64,
            model: Arc::new(Mutex::new(model)),
            name,
            params: GenerationParams::default(),
        })
    }

    /// Sets the sampling defaults (temperature, top-p, seed); a request's
    /// `temperature` and `max_tokens` still win.
    pub fn with_params(mut self, params: GenerationParams) -> Self {
        self.params = params;
        self
    }

    /// What the engine has done since it was loaded: calls, prefix-cache
    /// hits, tokens and time (for `/cost` and `-v`).
    pub fn stats(&self) -> whittle_local::EngineStats {
        self.model.lock().map_or_else(
            |poisoned| poisoned.into_inner().stats(),
            |model| model.stats(),
        )
    }

    /// The model's context window, from the GGUF metadata.
    pub fn context_window(&self) -> u64 {
        self.context_window
    }
}

impl Provider for LocalProvider {
    fn name(&self) -> &str {
        "local"
    }

    fn model(&self) -> &str {
        &self.name
    }

    fn stream(&self, request: ModelRequest) -> BoxFuture<'_, Result<EventStream, LlmError>> {
        let model = self.model.clone();
        let name = self.name.clone();
        let mut params = self.params.clone();
        params.max_tokens = request.max_tokens as usize;
        if let Some(t) = request.temperature {
            params.temperature = t;
        }
        params.force_tool_call = match request.tool_choice {
            ToolChoice::Required => !request.tools.is_empty(),
            ToolChoice::Auto => should_look_first(&request),
            ToolChoice::None => false,
        };
        Box::pin(async move {
            let (tx, stream) = event_channel(64);
            tokio::task::spawn_blocking(move || run(&model, &name, &request, &params, &tx));
            Ok(stream)
        })
    }
}

/// Whether the reply must be a tool call: the request offers tools, the person's message
/// is the last one (nothing was looked at in this turn yet) and it asks about the
/// workspace. A small model otherwise answers such questions from thin air.
fn should_look_first(request: &ModelRequest) -> bool {
    request.messages.last().is_some_and(|last| {
        !request.tools.is_empty()
            && last.role() == Role::User
            && !last.has_tool_result()
            && whittle_local::asks_about_workspace(&last.text())
    })
}

/// Runs one completion, sending events as it goes. Stops early when the
/// stream is dropped.
fn run(
    model: &Mutex<LocalModel>,
    name: &str,
    request: &ModelRequest,
    params: &GenerationParams,
    tx: &EventSender,
) {
    let Ok(mut model) = model.lock() else {
        let _ = tx.blocking_send(Err(LlmError::Local {
            message: "the local model crashed in an earlier call; restart whittle".into(),
            source: None,
        }));
        return;
    };
    if !tx.blocking_send(Ok(StreamEvent::MessageStart {
        id: String::new(),
        model: name.to_string(),
    })) {
        return;
    }
    let chat = ChatRequest {
        system: &request.system,
        messages: &request.messages,
        tools: &request.tools,
    };
    let mut text_open = false;
    let result = model.complete(&chat, params, &mut |text| {
        if !text_open {
            text_open = true;
            if !tx.blocking_send(Ok(StreamEvent::text_start(0))) {
                return ControlFlow::Break(());
            }
        }
        let delta = StreamEvent::TextDelta {
            index: 0,
            text: text.to_string(),
        };
        if tx.blocking_send(Ok(delta)) {
            ControlFlow::Continue(())
        } else {
            ControlFlow::Break(())
        }
    });
    let completion = match result {
        Ok(c) => c,
        Err(e) => {
            let _ = tx.blocking_send(Err(engine_error(e)));
            return;
        }
    };
    let mut events = Vec::new();
    let mut index = 0;
    if text_open {
        events.push(StreamEvent::BlockStop { index: 0 });
        index = 1;
    }
    for block in completion.content {
        if let Block::ToolUse(call) = block {
            events.push(StreamEvent::tool_use_start(index, &call.id, &call.name));
            events.push(StreamEvent::InputJsonDelta {
                index,
                partial_json: call.input.to_string(),
            });
            events.push(StreamEvent::BlockStop { index });
            index += 1;
        }
    }
    let usage = completion.usage;
    events.push(StreamEvent::Usage(Usage {
        input_tokens: (usage.prompt_tokens - usage.cached_prompt_tokens.min(usage.prompt_tokens))
            as u64,
        output_tokens: usage.completion_tokens as u64,
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: usage.cached_prompt_tokens as u64,
    }));
    events.push(StreamEvent::Stop(match completion.stop_reason {
        whittle_local::StopReason::EndTurn | whittle_local::StopReason::Stopped => {
            StopReason::EndTurn
        }
        whittle_local::StopReason::ToolUse => StopReason::ToolUse,
        whittle_local::StopReason::MaxTokens => StopReason::MaxTokens,
    }));
    for event in events {
        if !tx.blocking_send(Ok(event)) {
            return;
        }
    }
}

/// The engine's errors in the provider's classes: an overflow is an overflow,
/// whoever reports it, so compaction reacts the same way.
fn engine_error(e: LocalError) -> LlmError {
    match e {
        LocalError::ContextOverflow {
            prompt_tokens,
            context_window,
        } => LlmError::ContextOverflow {
            message: format!(
                "prompt is too long: {prompt_tokens} tokens > {context_window} maximum"
            ),
            tokens: Some(prompt_tokens as u64),
            limit: Some(context_window as u64),
        },
        other => LlmError::Local {
            message: other.to_string(),
            source: Some(crate::error::Cause::new(other)),
        },
    }
}
