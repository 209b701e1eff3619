//! Model providers for whittle.
//!
//! A [`Provider`] turns a [`ModelRequest`] (the conversation in the
//! canonical `whittle_protocol` model) into an [`EventStream`] of
//! [`StreamEvent`]s; [`collect`] assembles them into one assistant
//! [`whittle_protocol::Message`] with the blocks exactly as sent. Two
//! providers live here: [`AnthropicProvider`] (Messages API) and
//! [`OpenAiProvider`] (OpenAI, Ollama, llama.cpp, vLLM, LM Studio). An
//! in-process engine implements [`Provider`] through [`event_channel`].
//!
//! What the harness must know about a model lives here too: its window and
//! output limit ([`model_facts`]) and what its tokens cost ([`Prices`]), so
//! that compaction, `/cost` and replay all budget and price alike.
//!
//! Failures are one [`LlmError`] enum whose messages say what to do and
//! never contain a key. Retries (rate limits, overload, 5xx, broken
//! connections before any content) happen inside the stream and are
//! reported as [`StreamEvent::Retry`].
//!
//! ```no_run
//! # async fn demo() -> Result<(), whittle_llm::LlmError> {
//! use std::sync::Arc;
//! use whittle_protocol::Message;
//! use whittle_llm::{AnthropicProvider, ModelRequest, ModelSpec, Provider, StreamEvent, collect};
//!
//! let spec: ModelSpec = "anthropic:claude-sonnet-5-5".parse()?;
//! let provider: Arc<dyn Provider> = Arc::new(AnthropicProvider::from_env(spec.model)?);
//! let request = ModelRequest::new("", "You are terse.", vec![Message::user("hi")]);
//! let stream = provider.stream(request).await?;
//! let response = collect(stream, |event| match event {
//!     StreamEvent::TextDelta { text, .. } => print!("{text}"),
//!     StreamEvent::Retry { attempt, delay, reason } => {
//!         eprintln!("retry {attempt} in {delay:?}: {reason}")
//!     }
//!     _ => {}
//! })
//! .await?;
//! println!("\n{} input tokens", response.usage.total_input_tokens());
//! # Ok(())
//! # }
//! ```

pub mod anthropic;
mod collect;
mod error;
mod event;
mod http;
#[cfg(feature = "local")]
mod local;
pub mod models;
pub mod openai;
mod prices;
mod provider;
mod request;
mod retry;
mod secret;
pub mod spec;
pub mod sse;

pub use anthropic::{AnthropicAuth, AnthropicConfig, AnthropicProvider};
pub use collect::{Collector, ModelResponse, collect};
pub use error::{Cause, LlmError};
pub use event::{EventStream, StopReason, StreamEvent};
// Usage is a wire type (whittle-protocol); named here for providers' callers.
pub use http::http_client_builder;
#[cfg(feature = "local")]
pub use local::LocalProvider;
pub use models::{DEFAULT_MODEL, ModelFacts, ModelFactsOverride, model_facts, model_facts_with};
pub use openai::{MaxTokensField, OpenAiConfig, OpenAiProvider};
pub use prices::Prices;
pub use provider::{BoxFuture, EventSender, Provider, complete, event_channel};
pub use request::{
    BadEffort, BadThinking, Effort, ModelRequest, Reasoning, Thinking, ToolChoice, ToolSpec,
};
pub use retry::{Attempt, RetryPolicy, retrying};
pub use secret::{KEY_VARS, Secret};
pub use spec::{ModelSpec, ProviderKind};
pub use whittle_protocol::Usage;
