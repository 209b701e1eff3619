//! `whittle`: a coding agent in the terminal that manages its own context
//! window. The work is in the library half (`whittle_cli`); this file only
//! starts it.

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    // The sandbox helper is this binary started again; it must run before
    // any thread exists (a threaded process cannot enter a user namespace).
    whittle_sandbox::run_helper_if_asked();
    whittle_cli::run_to_exit_code(whittle_cli::Cli::parse())
}
