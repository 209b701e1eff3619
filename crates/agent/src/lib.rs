//! The whittle agent: the loop that runs the compaction pipeline before every
//! model call, executes tools under a permission policy and hooks, recovers
//! from context overflow, and logs a session that survives crashes.
//!
//! Everything is awaited, summaries included, so the loop runs on any tokio
//! runtime, current-thread or multi-threaded.
//!
//! ```
//! use whittle_sandbox::QuietGit;
//!
//! // The environment block of the system prompt: platform, date, git, listing.
//! let ws = tempfile::tempdir().unwrap();
//! std::fs::write(ws.path().join("README.md"), "hello").unwrap();
//! let block = whittle_agent::environment_block(ws.path(), "2026-12-03", &QuietGit::new(None));
//! assert!(block.contains("Today's date: 2026-12-03"));
//! assert!(block.contains("README.md"));
//! ```

mod agent;
mod builtin;
mod environment;
mod hooks;
mod instructions;
mod prompt;
mod session;
mod session_key;
mod summarizer;

pub use agent::{
    Agent, AgentConfig, AgentError, AgentEvent, Approval, Approver, COMPACT_ACK, ContextBreakdown,
    DEFAULT_CHECKPOINT_MAX_FILE_SIZE, DEFAULT_GC_LIMITS, DenyAsks, EventSink, MeterChoice,
    OpenedStore, Resumed, RewindScope, Rewound, StoreOwner, TurnOutcome, Uncompacted, UsageMeter,
    UsageTotals, checkpoint_store_dir, checkpoints_refused, gc_if_due, open_checkpoint_store,
    rewind_session_log, session_rewind_points,
};
pub use builtin::{CompactInput, CompactTool, TaskInput, TaskTool};
pub use environment::environment_block;
pub use hooks::{CommandHook, Hook, HookDecision, HookEvent, HookKind, Hooks};
pub use instructions::{InstructionFile, ProjectInstructions, instructions_chars};
pub use prompt::{EMBEDDED_TOOLS, embedded_system_prompt, session_system_prompt, system_prompt};
pub use session::{
    SessionFileError, SessionInfo, SessionWriter, check_sealed, find_session, list_sessions,
};
pub use session_key::{SessionHeader, SessionKey, SessionKeyError};
pub use summarizer::{PROGRESS_STEP_CHARS, ProviderSummarizer, SummaryProgress};
