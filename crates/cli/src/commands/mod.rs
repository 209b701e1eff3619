//! The subcommands other than the agent itself: each file is one command
//! (`whittle replay`, `whittle report`, `whittle mcp`, ...), with the parts
//! two commands share (`replay_run`, `replay_table`) beside them.

pub(crate) mod acp;
pub(crate) mod mcp;
pub(crate) mod model;
pub(crate) mod replay;
pub(crate) mod replay_run;
pub(crate) mod replay_table;
pub(crate) mod report;
pub(crate) mod rewind;
pub(crate) mod sandbox_check;
