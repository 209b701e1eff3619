//! Every integration test of whittle-agent in one binary, so the suite
//! links once: a module per file, as before.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod agent_loop;
mod local_summary;
