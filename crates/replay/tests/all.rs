//! Every integration test of whittle-replay in one binary, so the suite
//! links once: a module per file, as before.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod bill;
mod common;
mod fixtures;
mod import_corrupt;
mod import_formats;
mod shipped_traces;
