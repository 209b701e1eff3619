//! Every integration test of whittle-context in one binary, so the suite
//! links once: a module per file, as before.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod pipeline;
mod properties;
mod summary_handshake;
