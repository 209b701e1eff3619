//! Every integration test of whittle-tools in one binary, so the suite
//! links once: a module per file, as before.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod bash;
mod files;
mod no_panic;
mod permission;
mod registry;
mod schemas;
mod search;
mod todo_skills;

/// Makes a real FIFO at `path`, as a command in the sandbox could.
fn mkfifo(path: &std::path::Path) {
    let made = std::process::Command::new("mkfifo").arg(path).status();
    assert!(made.unwrap().success(), "mkfifo {}", path.display());
}
