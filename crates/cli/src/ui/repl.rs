//! The interactive session: read a line, run a turn or a slash command, repeat.
//!
//! On a terminal, input comes through rustyline (history in
//! `.whittle/repl-history`, line editing, bracketed paste). Otherwise lines
//! are read from stdin, so scripts and tests can drive the REPL through a pipe.

use crate::args::AgentArgs;
use crate::commands::mcp::{self, Progress};
use crate::config::setup::{self, Session};
use crate::config::{Env, Settings};
use crate::ui::approve::TerminalApprover;
use crate::ui::call_report::CallReporter;
use crate::ui::interrupt::{self, CancelSlot, run_turn};
use crate::ui::render::{Renderer, out_line};
use crate::ui::slash::{
    HELP, SlashCommand, render_context, render_cost, render_sessions, uncompact_line,
};
use crate::ui::status_line::status_line;
use crate::ui::style::Style;
use rustyline::DefaultEditor;
use rustyline::error::ReadlineError;
use std::io::{BufRead, IsTerminal};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use tokio::runtime::Runtime;
use whittle_agent::{Approver, DenyAsks, MeterChoice, TurnOutcome, list_sessions};
use whittle_llm::ProviderKind;
use whittle_mcp::Installation;
use whittle_protocol::collapse_whitespace;

/// The prompt.
const PROMPT: &str = "> ";
/// The prompt for a continued line.
const MORE: &str = ". ";

/// One read from the person.
#[derive(Debug, PartialEq, Eq)]
enum Read {
    /// A complete input (continued lines joined with newlines).
    Line(String),
    /// Ctrl-C at the prompt: the line is dropped.
    Interrupted,
    /// Ctrl-D or the end of stdin.
    Eof,
}

/// Where input comes from.
enum Input {
    Editor {
        editor: Box<DefaultEditor>,
        history: PathBuf,
    },
    Lines(std::io::StdinLock<'static>),
}

impl Input {
    fn open(interactive: bool, history: PathBuf) -> anyhow::Result<Input> {
        if !interactive {
            return Ok(Input::Lines(std::io::stdin().lock()));
        }
        let config = rustyline::Config::builder()
            .auto_add_history(false)
            .bracketed_paste(true)
            .max_history_size(10_000)?
            .build();
        let mut editor = DefaultEditor::with_config(config)?;
        // A missing or unreadable history file only means no history yet.
        if history_file_usable(&history) {
            let _ = editor.load_history(&history);
        }
        Ok(Input::Editor {
            editor: Box::new(editor),
            history,
        })
    }

    fn read_one(&mut self, prompt: &str) -> anyhow::Result<Read> {
        match self {
            Input::Editor { editor, .. } => match editor.readline(prompt) {
                Ok(line) => Ok(Read::Line(line)),
                Err(ReadlineError::Interrupted) => Ok(Read::Interrupted),
                Err(ReadlineError::Eof) => Ok(Read::Eof),
                Err(e) => Err(anyhow::anyhow!("cannot read the terminal: {e}")),
            },
            Input::Lines(stdin) => {
                let mut line = String::new();
                match stdin.read_line(&mut line) {
                    Ok(0) => Ok(Read::Eof),
                    Ok(_) => {
                        let trimmed = line.trim_end_matches(['\n', '\r']);
                        Ok(Read::Line(trimmed.to_string()))
                    }
                    Err(e) => Err(anyhow::anyhow!("cannot read stdin: {e}")),
                }
            }
        }
    }

    /// Reads one input; a line ending in `\` goes on on the next line.
    fn read(&mut self) -> anyhow::Result<Read> {
        let mut text = String::new();
        let mut prompt = PROMPT;
        loop {
            match self.read_one(prompt)? {
                Read::Line(line) => {
                    if let Some(head) = line.strip_suffix('\\') {
                        text.push_str(head);
                        text.push('\n');
                        prompt = MORE;
                        continue;
                    }
                    text.push_str(&line);
                    self.remember(&text);
                    return Ok(Read::Line(text));
                }
                Read::Interrupted => return Ok(Read::Interrupted),
                Read::Eof if text.is_empty() => return Ok(Read::Eof),
                Read::Eof => return Ok(Read::Line(text)),
            }
        }
    }

    fn remember(&mut self, entry: &str) {
        if let Input::Editor { editor, history } = self
            && !entry.trim().is_empty()
        {
            let _ = editor.add_history_entry(entry);
            if let Some(dir) = history.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            // History is a convenience: failing to save it is not worth a word.
            if history_file_usable(history) {
                let _ = editor.save_history(history);
            }
        }
    }
}

/// Whether the history file may be read and written: absent, or a plain
/// file. rustyline opens it by name and would follow a link (each line the
/// person types appended to wherever it points) or block on a pipe; the
/// start-up check refuses those in a folder not trusted, and this keeps a
/// trusted folder's from being followed too.
fn history_file_usable(path: &Path) -> bool {
    match std::fs::symlink_metadata(path) {
        Ok(meta) => meta.is_file(),
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    }
}

/// What to do after a slash command.
#[derive(Debug, PartialEq, Eq)]
enum Flow {
    Continue,
    Quit,
}

/// Runs the REPL until `/quit`, Ctrl-D or the end of stdin.
pub fn run(
    rt: &Runtime,
    settings: &Settings,
    args: &AgentArgs,
    env: Env<'_>,
) -> anyhow::Result<ExitCode> {
    let interactive = std::io::stdin().is_terminal();
    let slot = CancelSlot::default();
    let err_style = Style::detect(std::io::stderr().is_terminal());
    let mut renderer = Renderer::new(&settings.workspace, true);
    let approver: Box<dyn Approver> = if interactive {
        Box::new(TerminalApprover::new(err_style, slot.clone()))
    } else {
        Box::new(DenyAsks)
    };
    let progress = if interactive {
        Progress::Lines
    } else {
        Progress::Problems
    };
    let mcp = rt.block_on(mcp::start_for_session(settings, env, progress))?;
    let mut session = setup::open(settings, args, env, approver, &mcp)?;
    if args.verbose {
        renderer.report_calls(CallReporter::new(session.local.clone()));
    }
    if let Installation::Searched { chars, tools } = session.mcp {
        renderer.line(&err_style.dim(&format!(
            "mcp: the definitions of {tools} tools ({chars} characters) exceed mcp_schema_share of the window; the model finds them with mcp_tool_search"
        )));
    }
    if interactive {
        renderer.line(&format!(
            "{} {} in {}\n{}",
            err_style.bold("whittle"),
            session.model_label(),
            settings.workspace.display(),
            err_style.dim("/help for commands, Ctrl-C stops a turn, Ctrl-D quits")
        ));
    }
    if let Some((id, repairs)) = &session.resumed {
        let mut line = format!(
            "continuing session {id} ({} messages)",
            session.agent.history().len()
        );
        if *repairs > 0 {
            line.push_str(&format!(
                "; {repairs} tool call(s) cut off by the last exit were marked interrupted"
            ));
        }
        let line = err_style.dim(&line);
        renderer.line(&line);
    }
    let mut input = Input::open(interactive, settings.state_dir().join("repl-history"))?;
    loop {
        let text = match input.read()? {
            Read::Line(text) => text,
            Read::Interrupted => continue,
            Read::Eof => break,
        };
        if text.trim().is_empty() {
            continue;
        }
        if let Some(command) = SlashCommand::parse(&text) {
            if command == SlashCommand::Rewind {
                if let Err(e) = session.ensure_logging() {
                    renderer.error(&crate::ui::render::error_line(&e));
                    continue;
                }
                let mut ask = |prompt: &str| match input.read_one(prompt) {
                    Ok(Read::Line(line)) => Some(line),
                    _ => None,
                };
                let result = crate::commands::rewind::repl_rewind(
                    rt,
                    &mut session.agent,
                    &mut ask,
                    &mut renderer,
                );
                if let Err(e) = result {
                    renderer.error(&crate::ui::render::error_line(&e));
                }
                continue;
            }
            if slash(rt, &mut session, &mut renderer, settings, &slot, command) == Flow::Quit {
                break;
            }
            continue;
        }
        if let Err(e) = session.ensure_logging() {
            renderer.error(&crate::ui::render::error_line(&e));
            continue;
        }
        renderer.take_turn_compaction();
        let outcome = rt.block_on(run_turn(&mut session.agent, &text, &mut renderer, &slot));
        renderer.end_text();
        let tool_calls = renderer.take_tool_calls();
        match outcome {
            Ok(TurnOutcome::Done { .. }) => {
                if session.spec.provider == ProviderKind::Local && tool_calls == 0 {
                    renderer.line(&err_style.dim(crate::ui::render::UNLOOKED_ANSWER));
                }
            }
            Ok(TurnOutcome::MaxTurns) => {
                let line = err_style.yellow(&format!(
                    "stopped after {} model calls (max_turns); say \"go on\" to continue",
                    settings.max_turns
                ));
                renderer.line(&line);
            }
            Ok(TurnOutcome::Blocked { reason }) => {
                let line = err_style.yellow(&format!(
                    "a UserPromptSubmit hook refused the prompt: {}",
                    collapse_whitespace(&reason)
                ));
                renderer.line(&line);
            }
            Ok(TurnOutcome::Cancelled) => {
                let line = err_style.dim("(cancelled; the conversation so far is kept)");
                renderer.line(&line);
            }
            Err(e) => renderer.error(&collapse_whitespace(&e.to_string())),
        }
        if settings.status_line {
            let compaction = renderer.take_turn_compaction();
            let line = status_line(
                &session.agent.context_breakdown(),
                meter_unit(session.agent.config().meter),
                session.agent.usage().cost_usd(&session.prices()),
                compaction.as_deref(),
            );
            let line = err_style.dim(&line);
            renderer.line(&line);
        }
    }
    rt.block_on(mcp.stop());
    Ok(ExitCode::SUCCESS)
}

/// The unit sizes are measured in.
pub fn meter_unit(meter: MeterChoice) -> &'static str {
    match meter {
        MeterChoice::Chars => "chars",
        MeterChoice::Tokens => "tokens",
    }
}

fn slash(
    rt: &Runtime,
    session: &mut Session,
    renderer: &mut Renderer,
    settings: &Settings,
    slot: &CancelSlot,
    command: SlashCommand,
) -> Flow {
    let agent = &mut session.agent;
    let out = renderer.out_style();
    match command {
        SlashCommand::Quit => return Flow::Quit,
        SlashCommand::Help => out_line(HELP),
        SlashCommand::Context => {
            let unit = meter_unit(agent.config().meter);
            out_line(&render_context(&agent.context_breakdown(), unit, out));
        }
        SlashCommand::Cost => {
            out_line(&render_cost(&agent.usage(), &session.prices()));
            if let Some(local) = &session.local {
                out_line(&crate::ui::slash::render_local_stats(&local.stats()));
            }
        }
        SlashCommand::Report => {
            let prices = session.prices();
            match crate::commands::report::write_session_page(&session.agent, prices, settings) {
                Ok(path) => out_line(&path.display().to_string()),
                Err(e) => renderer.error(&crate::ui::render::error_line(&e)),
            }
        }
        SlashCommand::Diff => {
            if let Err(e) = crate::commands::rewind::repl_diff(agent, &settings.workspace) {
                renderer.error(&crate::ui::render::error_line(&e));
            }
        }
        // Handled where the REPL can ask the person.
        SlashCommand::Rewind => {}
        SlashCommand::Clear => match agent.clear() {
            Ok(()) => out_line("conversation cleared (the session log keeps everything)"),
            Err(e) => renderer.error(&collapse_whitespace(&e.to_string())),
        },
        SlashCommand::Sessions => {
            let sessions = list_sessions(&settings.state_dir().join("sessions"));
            out_line(&render_sessions(&sessions, agent.session_id()));
        }
        SlashCommand::Sandbox => {
            let env = |k: &str| std::env::var(k).ok();
            let (text, _) = crate::commands::sandbox_check::report(
                &agent.config().sandbox,
                session.support.as_ref(),
                &settings.workspace,
                &env,
            );
            out_line(text.trim_end());
        }
        SlashCommand::Compact(focus) => {
            if agent.history().is_empty() {
                out_line("nothing to compact yet");
                return Flow::Continue;
            }
            if let Err(e) = session.ensure_logging() {
                renderer.error(&crate::ui::render::error_line(&e));
                return Flow::Continue;
            }
            let result = rt.block_on(interrupt::compact(
                &mut session.agent,
                focus.as_deref(),
                renderer,
                slot,
            ));
            match result {
                Ok(report) if report.applied() => {}
                Ok(_) => out_line("the conversation was left as it was (see the line above)"),
                Err(e) => renderer.error(&collapse_whitespace(&e.to_string())),
            }
        }
        SlashCommand::Uncompact => match agent.uncompact() {
            Ok(result) => out_line(&uncompact_line(&result)),
            Err(e) => renderer.error(&collapse_whitespace(&e.to_string())),
        },
        SlashCommand::Unknown(name) => {
            out_line(&format!(
                "unknown command /{name}; /help lists the commands"
            ));
        }
    }
    Flow::Continue
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_is_kept_only_in_a_plain_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("repl-history");
        assert!(history_file_usable(&file), "absent: created on first save");
        std::fs::write(&file, "ls\n").unwrap();
        assert!(history_file_usable(&file));
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert!(!history_file_usable(&link));
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        assert!(!history_file_usable(&fifo));
        assert!(!history_file_usable(dir.path()));
    }
}
