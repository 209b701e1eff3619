//! Offline evaluation of whittle's context compaction: how would a policy
//! have done on sessions that really happened?
//!
//! [`import_path`] and [`import_tree`] read sessions recorded by other agents
//! (Claude Code, mini-swe-agent, OpenAI message lists) and by whittle itself
//! into [`Conversation`]s of the canonical message model. [`replay_paths`]
//! feeds each one, turn by turn, through every [`Policy`] as if the agent
//! were live, and measures each request: its size, whether it would have
//! been valid and within the window, and what Anthropic's prompt cache would
//! have charged for it. Summaries come from a [`StandInSummarizer`] unless
//! the caller brings a model.
//!
//! This lives apart from `whittle-context` because a harness that embeds
//! the pipeline needs none of it: the importers and the cost simulator are
//! measuring instruments, and they grow with every format and probe we add.
//!
//! ```
//! use whittle_replay::{Policy, ReplayConfig, StandInSummarizer, replay_conversation};
//! use whittle_protocol::Message;
//!
//! let messages = vec![
//!     Message::user("write a haiku"),
//!     Message::assistant("old pond / a frog jumps in / the sound of water"),
//! ];
//! let store = tempfile::tempdir().unwrap();
//! let report = replay_conversation(
//!     "haiku",
//!     &messages,
//!     None,
//!     Policy::Default,
//!     &ReplayConfig::for_window(32_000),
//!     &mut StandInSummarizer::default(),
//!     store.path(),
//! );
//! assert_eq!((report.calls, report.over_window, report.unrecoverable_chars), (1, 0, 0));
//! ```

mod calibration;
mod call_times;
mod conversation;
mod import;
mod paths;
mod policy;
mod prefix_change;
mod prompt_cache;
mod recorded;
mod report;
mod stand_in;
mod survival;

pub use calibration::{Calibration, Measured, calibrate};
pub use call_times::{TenthsP99, median, p99_of_sorted, tenths};
pub use conversation::{replay_conversation, replay_recorded};
pub use import::{
    Boundary, Conversation, Format, INTERRUPTED, ImportError, ImportedFile, MISSING_OPENING,
    RAW_ARGUMENTS_KEY, import_path, import_tree, trace_files,
};
pub use paths::replay_paths;
pub use policy::{MASK_KEEP_RESULTS, Policy, ReplayConfig};
pub use prefix_change::{PREFIX_CHANGE_SHORTFALL, changed_prompts};
pub use recorded::{CacheTtl, RecordedCall, RecordedUsage, RequestBlock};
pub use report::{
    AppliedStep, BilledCalls, ConversationRow, ErrorPct, RecordedTotals, ReplayReport,
    ReplaySummary,
};
pub use stand_in::StandInSummarizer;
pub use survival::{
    COMMAND_PROBE_CHARS, Fact, FactKind, PERSON_PROBE_CHARS, Survival, Tally, command_probe,
    context_text, ledger_chars, ledger_paths_text, message_facts, person_probe, recorded_survival,
};
