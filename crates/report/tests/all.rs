//! Every integration test of whittle-report that needs no browser and no
//! traces beside the repository, in one binary, so the suite links once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod charts;
mod common;
mod page;
