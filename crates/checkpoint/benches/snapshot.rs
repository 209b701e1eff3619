//! Placeholder replaced by the real benchmark in the next commit.
fn main() {}
