//! `whittle`: a coding agent in the terminal that manages its own context
//! window. This binary only wires the crates together: flags and config
//! files into settings, settings into an agent, agent events onto the screen.

mod acp_host;
mod approve;
mod args;
mod config;
mod config_file;
mod interrupt;
mod mcp_cmd;
mod model_cmd;
mod oneshot;
mod providers;
mod render;
mod repl;
mod replay_cmd;
mod replay_run;
mod replay_table;
mod report_cmd;
mod rewind_cmd;
mod sandbox_check;
mod sandboxing;
mod setup;
mod slash;
mod status_line;
mod style;
mod trust;

use args::{CheckpointCommand, Cli, Command, ModelCommand, SandboxCommand};
use clap::Parser;
use std::io::IsTerminal;
use std::process::ExitCode;
use style::Style;

fn main() -> ExitCode {
    // The sandbox helper is this binary started again; it must run before
    // any thread exists (a threaded process cannot enter a user namespace).
    whittle_sandbox::run_helper_if_asked();
    let cli = Cli::parse();
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

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Some(Command::Model(ModelCommand::Pull)) => {
            model_cmd::pull()?;
            return Ok(ExitCode::SUCCESS);
        }
        Some(Command::Replay(args)) => {
            let rt = runtime()?;
            return replay_cmd::run(&args, &env, rt.handle());
        }
        Some(Command::Report(args)) => {
            let rt = runtime()?;
            return report_cmd::run(&args, &env, rt.handle());
        }
        Some(Command::Sandbox(SandboxCommand::Check(args))) => {
            return sandbox_check::run(&args, &env);
        }
        Some(Command::Mcp(args)) => {
            let rt = runtime()?;
            return rt.block_on(mcp_cmd::run(&args, &env));
        }
        Some(Command::Rewind(args)) => return rewind_cmd::rewind(&args),
        Some(Command::Diff(args)) => return rewind_cmd::diff(&args),
        Some(Command::Checkpoint(CheckpointCommand::Gc(args))) => return rewind_cmd::gc(&args),
        Some(Command::Acp) => {
            let rt = runtime()?;
            let host = acp_host::CliHost::new(cli.agent, env);
            rt.block_on(whittle_acp::serve_stdio(std::sync::Arc::new(host)))?;
            return Ok(ExitCode::SUCCESS);
        }
        None => {}
    }
    let args = cli.agent;
    let interactive = args.prompt.is_none() && std::io::stdin().is_terminal();
    let ask: Option<config::AskTrust<'_>> = interactive.then_some(&trust::ask_at_terminal);
    let settings = config::load(&args, &env, ask)?;
    if let Some(w) = &settings.withheld {
        let style = Style::detect(std::io::stderr().is_terminal());
        render::err_line(&style.dim(&w.ignored_notice()));
    }
    let rt = runtime()?;
    match &args.prompt {
        Some(prompt) => {
            let prompt = oneshot::read_prompt(prompt)?;
            rt.block_on(oneshot::run(&settings, &args, &env, &prompt))
        }
        None => repl::run(&rt, &settings, &args, &env),
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
