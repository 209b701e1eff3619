//! Every integration test of whittle-llm in one binary, so the suite
//! links once: a module per file, as before.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod anthropic;
mod common;
mod local;
mod openai;
mod setup_errors;
mod snapshots;
