//! testkit's own tests and the workspace's rules, in one binary.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod architecture;
mod server;
