//! The library half of `whittle`, the terminal coding agent: the command
//! line as clap sees it (`args`), settings resolved from config files, the
//! environment and flags (`config`), the subcommands (`commands`), and the
//! terminal front ends for the agent (`ui`). The binary is a thin `main`
//! over [`run_to_exit_code`], so that everything here can be tested as code.
//!
//! ```
//! use clap::Parser;
//! use whittle_cli::{Cli, Command};
//!
//! let cli = Cli::try_parse_from(["whittle", "replay", "--window-tokens", "32000", "traces"])?;
//! assert!(matches!(cli.command, Some(Command::Replay(_))));
//! # Ok::<(), clap::Error>(())
//! ```

mod args;
mod commands;
mod config;
mod run;
mod ui;

pub use args::{Cli, Command};
pub use run::{run, run_to_exit_code};
