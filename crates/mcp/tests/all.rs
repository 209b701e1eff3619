//! Every integration test of whittle-mcp in one binary, so the suite
//! links once: a module per file, as before.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod faults;
mod real_servers;
