//! What a session is configured with, apart from its components.

use crate::SessionKey;
use std::path::PathBuf;
use whittle_context::Limits;
use whittle_llm::Reasoning;
use whittle_protocol::Redactor;
use whittle_tools::Sandbox;

/// How the context is measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MeterChoice {
    /// Characters, exactly (the `teaching` preset).
    Chars,
    /// Tokens, calibrated on the provider's reports.
    Tokens,
}

/// Everything about a session that is not a component.
#[derive(Clone, Debug)]
pub struct AgentConfig {
    /// The model id sent in requests.
    pub model: String,
    /// `PROVIDER:MODEL`, for the session log and messages.
    pub model_label: String,
    /// Output tokens per call.
    pub max_tokens: u32,
    /// Model calls allowed per user turn.
    pub max_turns: u32,
    /// The folder the agent works in.
    pub workspace: PathBuf,
    /// Where sessions, persisted outputs and transcripts go (`.whittle`).
    pub state_dir: PathBuf,
    /// Compaction thresholds.
    pub limits: Limits,
    /// How size is measured.
    pub meter: MeterChoice,
    /// The model's context window, in tokens (for `/context`).
    pub context_window: u64,
    /// The system prompt.
    pub system_prompt: String,
    /// Thinking and effort, sent with every call of the conversation
    /// (summaries of it included, so they share its cached prefix).
    pub reasoning: Reasoning,
    /// How commands run (subagents share it).
    pub sandbox: Sandbox,
    /// Known secret values, replaced in tool results and the session log.
    pub redactor: Redactor,
    /// Seals the logs this agent starts; with one, a log it did not seal is
    /// not resumed unless `resume_unsealed` (see [`SessionKey`]).
    pub session_key: Option<SessionKey>,
    /// Resume logs the key did not seal (the person said the folder's
    /// content is theirs).
    pub resume_unsealed: bool,
}
