//! The one error type of this crate: every failure is one line a person can act on.

use std::path::PathBuf;

/// Everything that can go wrong loading, prompting or running a local model.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    /// The prompt does not fit the model's context window. Compaction reacts to
    /// this exactly as to a hosted provider's overflow, so both numbers are kept.
    #[error(
        "prompt is too long: {prompt_tokens} tokens, but the model's context window is {context_window} tokens"
    )]
    ContextOverflow {
        /// Tokens in the rendered prompt.
        prompt_tokens: usize,
        /// The model's context window, from its GGUF metadata.
        context_window: usize,
    },
    /// Reading the model file failed.
    #[error("cannot read model file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The file is not a GGUF this crate can read, or a tensor in it is malformed.
    #[error("invalid GGUF model {path}: {message}")]
    InvalidModel {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The GGUF lacks a metadata key the engine needs, or holds the wrong type.
    #[error("GGUF metadata key {key:?} is missing or malformed: {message}")]
    Metadata {
        /// The metadata key.
        key: String,
        /// What is wrong with it.
        message: String,
    },
    /// The model uses an architecture or tokenizer this engine does not run.
    #[error("unsupported model: {0}")]
    Unsupported(String),
    /// The chat template failed to compile or render.
    #[error("chat template error: {0}")]
    Template(String),
    /// Text could not be turned into tokens (a byte with no token and no `<unk>`).
    #[error("tokenizer error: {0}")]
    Tokenizer(String),
    /// The tensor engine failed while running the model.
    #[error("inference failed: {0}")]
    Inference(String),
    /// Fetching the default model failed; the message says how to use a hosted provider instead.
    #[error("{0}")]
    Download(String),
}
