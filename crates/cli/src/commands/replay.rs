//! `whittle replay`: recorded sessions through compaction policies, side by side.

use crate::args::ReplayArgs;
use crate::commands::replay_run::replay;
use crate::commands::replay_table::render_table;
use crate::config::Env;
use crate::ui::render::{err_line, out_line};
use crate::ui::style::Style;
use anyhow::bail;
use std::io::IsTerminal;
use std::process::ExitCode;
use tokio::runtime::Handle;

/// Runs the replay and prints the table (or JSON), and writes the page
/// with `--html`. Call it from outside `runtime`, which makes the summaries
/// when a model writes them.
pub fn run(args: &ReplayArgs, env: Env<'_>, runtime: &Handle) -> anyhow::Result<ExitCode> {
    let summary = replay(&args.options, env, runtime)?;
    if args.json {
        out_line(&serde_json::to_string_pretty(&summary)?);
    } else {
        out_line(render_table(&summary).trim_end());
    }
    if !summary.errors.is_empty() && !args.json {
        let style = Style::detect(std::io::stderr().is_terminal());
        err_line(&style.yellow(&format!(
            "{} file(s) could not be imported (listed above)",
            summary.errors.len()
        )));
    }
    if summary.conversations.is_empty() {
        bail!("no conversation could be imported from the given paths");
    }
    if let Some(page) = &args.html {
        crate::commands::report::write_page(&summary, &args.options, page, env)?;
    }
    Ok(ExitCode::SUCCESS)
}
