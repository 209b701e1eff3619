//! Where the agent meets the person: the interactive session (`repl`,
//! `slash`), one task from the command line (`oneshot`), and what both draw
//! on the terminal (`render`, `style`, `status_line`, `call_report`) or ask
//! there (`approve`, `interrupt`).

pub(crate) mod approve;
pub(crate) mod call_report;
pub(crate) mod interrupt;
pub(crate) mod oneshot;
pub(crate) mod render;
pub(crate) mod repl;
pub(crate) mod slash;
pub(crate) mod status_line;
pub(crate) mod style;
