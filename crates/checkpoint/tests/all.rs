//! Every integration test of whittle-checkpoint in one binary, so the
//! suite links once: a module per concern.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;
mod concurrent;
mod diff_gc;
mod forge;
mod forged_tree;
mod hostile;
mod incremental;
mod poisoned;
mod props;
mod scenario;
mod untracked;
mod watched;
