//! Running a parsed command line: the one place that picks what to do.

use crate::args::{CheckpointCommand, Cli, Command, ModelCommand, SandboxCommand};
use crate::ui::render;
use crate::ui::style::Style;
use crate::{commands, config, ui};
use std::io::IsTerminal;
use std::process::ExitCode;

/// Runs the command line and reports an error as one line on stderr: what
/// `main` does, kept here so that the binary stays a few lines.
pub fn run_to_exit_code(cli: Cli) -> ExitCode {
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            let style = Style::detect(std::io::stderr().is_terminal());
            render::err_line(&format!(
                "{} {}",
                style.red("error:"),
                render::error_line(&e)
            ));
            ExitCode::FAILURE
        }
    }
}

fn env(key: &str) -> Option<String> {
    std::env::var(key).ok()
}

/// Does what the command line asks: a subcommand, one task (`-p`), or the
/// interactive session. The exit code is the task's (a cancelled task has
/// its own, see `ui::interrupt`).
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Some(Command::Model(ModelCommand::Pull)) => {
            commands::model::pull()?;
            return Ok(ExitCode::SUCCESS);
        }
        Some(Command::Replay(args)) => {
            let rt = runtime()?;
            return commands::replay::run(&args, &env, rt.handle());
        }
        Some(Command::Report(args)) => {
            let rt = runtime()?;
            return commands::report::run(&args, &env, rt.handle());
        }
        Some(Command::Sandbox(SandboxCommand::Check(args))) => {
            return commands::sandbox_check::run(&args, &env);
        }
        Some(Command::Mcp(args)) => {
            let rt = runtime()?;
            return rt.block_on(commands::mcp::run(&args, &env));
        }
        Some(Command::Rewind(args)) => return commands::rewind::rewind(&args),
        Some(Command::Diff(args)) => return commands::rewind::diff(&args),
        Some(Command::Checkpoint(CheckpointCommand::Gc(args))) => {
            return commands::rewind::gc(&args);
        }
        Some(Command::Acp) => {
            let rt = runtime()?;
            let host = commands::acp::CliHost::new(cli.agent, env);
            rt.block_on(whittle_acp::serve_stdio(std::sync::Arc::new(host)))?;
            return Ok(ExitCode::SUCCESS);
        }
        None => {}
    }
    let args = cli.agent;
    let interactive = args.prompt.is_none() && std::io::stdin().is_terminal();
    let ask: Option<config::AskTrust<'_>> = interactive.then_some(&config::trust::ask_at_terminal);
    let settings = config::load(&args, &env, ask)?;
    if let Some(w) = &settings.withheld {
        let style = Style::detect(std::io::stderr().is_terminal());
        render::err_line(&style.dim(&w.ignored_notice()));
    }
    let rt = runtime()?;
    match &args.prompt {
        Some(prompt) => {
            let prompt = ui::oneshot::read_prompt(prompt)?;
            rt.block_on(ui::oneshot::run(&settings, &args, &env, &prompt))
        }
        None => ui::repl::run(&rt, &settings, &args, &env),
    }
}

/// The runtime the agent, its tools and its model calls run on. Any flavor
/// works; worker threads let a tool's process, the model's stream and the
/// terminal progress side by side.
fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| anyhow::anyhow!("cannot start the async runtime: {e}"))
}
