//! `whittle -p PROMPT`: one task, the answer on stdout, an exit status that
//! says how it went.

use crate::args::{AgentArgs, OutputFormat};
use crate::commands::mcp::{self, Progress};
use crate::config::setup;
use crate::config::{Env, Settings};
use crate::ui::call_report::CallReporter;
use crate::ui::interrupt::{CANCELLED_EXIT, CancelSlot, run_turn};
use crate::ui::render::{Renderer, err_line, event_json, report_json};
use crate::ui::style::Style;
use serde_json::{Value, json};
use std::io::IsTerminal;
use std::io::Write;
use std::process::ExitCode;
use whittle_agent::{AgentError, AgentEvent, DenyAsks, EventSink, TurnOutcome, UsageTotals};
use whittle_context::StepReport;
use whittle_llm::ProviderKind;
use whittle_protocol::collapse_whitespace;

/// Exit status when the task used every allowed model call.
pub const MAX_TURNS_EXIT: u8 = 3;
/// Exit status when a hook refused the prompt.
pub const BLOCKED_EXIT: u8 = 4;

/// Routes events to the chosen output and keeps what the result reports.
struct OneShotSink {
    format: OutputFormat,
    renderer: Renderer,
    compactions: Vec<StepReport>,
    tool_calls: usize,
    /// The checkpoints the run made, as the result lists them.
    checkpoints: Vec<Value>,
}

impl EventSink for OneShotSink {
    fn on_event(&mut self, event: AgentEvent) {
        match &event {
            AgentEvent::Compaction(r) => self.compactions.push(r.clone()),
            AgentEvent::ToolStart { .. } => self.tool_calls += 1,
            _ => {}
        }
        if let AgentEvent::Checkpoint { .. } = &event
            && let Some(mut line) = event_json(&event)
            && let Some(fields) = line.as_object_mut()
        {
            fields.remove("type");
            self.checkpoints.push(line);
        }
        match self.format {
            OutputFormat::Text => self.renderer.on_event(event),
            OutputFormat::StreamJson => {
                if let Some(line) = event_json(&event) {
                    print_json_line(&line);
                }
            }
            // The result on stdout is one JSON value; a warning (checkpoints
            // off, a store set aside) still reaches the person, on stderr.
            OutputFormat::Json => {
                if let AgentEvent::Warning(w) = &event {
                    err_line(&format!("warning: {}", collapse_whitespace(w)));
                }
            }
        }
    }
}

fn print_json_line(value: &Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{value}");
    let _ = out.flush();
}

/// Usage of this run alone (a resumed session's totals include earlier runs).
fn usage_since(before: UsageTotals, after: UsageTotals) -> UsageTotals {
    UsageTotals {
        calls: after.calls.saturating_sub(before.calls),
        input: after.input.saturating_sub(before.input),
        output: after.output.saturating_sub(before.output),
        cache_read: after.cache_read.saturating_sub(before.cache_read),
        cache_write: after.cache_write.saturating_sub(before.cache_write),
    }
}

/// Usage as JSON, in the Anthropic field names people know.
pub fn usage_json(u: &UsageTotals) -> Value {
    json!({
        "model_calls": u.calls,
        "input_tokens": u.input,
        "output_tokens": u.output,
        "cache_read_input_tokens": u.cache_read,
        "cache_creation_input_tokens": u.cache_write,
    })
}

/// The prompt as given, or all of stdin for `-p -`; never empty.
pub fn read_prompt(given: &str) -> anyhow::Result<String> {
    let prompt = if given == "-" {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
            .map_err(|e| anyhow::anyhow!("cannot read the prompt from stdin: {e}"))?;
        text
    } else {
        given.to_string()
    };
    if prompt.trim().is_empty() {
        anyhow::bail!(
            "the prompt is empty: say what to do after -p (or -p - to read it from stdin)"
        );
    }
    Ok(prompt)
}

/// Runs the task; the returned status follows the outcome.
pub async fn run(
    settings: &Settings,
    args: &AgentArgs,
    env: Env<'_>,
    prompt: &str,
) -> anyhow::Result<ExitCode> {
    let mcp = mcp::start_for_session(settings, env, Progress::Problems).await?;
    let mut session = setup::open(settings, args, env, Box::new(DenyAsks), &mcp)?;
    session.ensure_logging()?;
    let session_id = session.agent.session_id().unwrap_or_default().to_string();
    let model = session.model_label();
    let format = args.output_format;
    if format == OutputFormat::StreamJson {
        print_json_line(&json!({
            "type": "init",
            "session_id": session_id,
            "model": model,
            "cwd": settings.workspace,
            "resumed": session.resumed.is_some(),
        }));
    }
    let mut sink = OneShotSink {
        format,
        renderer: Renderer::new(&settings.workspace, true),
        compactions: Vec::new(),
        tool_calls: 0,
        checkpoints: Vec::new(),
    };
    if args.verbose {
        sink.renderer
            .report_calls(CallReporter::new(session.local.clone()));
    }
    let before = session.agent.usage();
    let outcome = run_turn(
        &mut session.agent,
        prompt,
        &mut sink,
        &CancelSlot::default(),
    )
    .await;
    sink.renderer.end_text();
    // Cancellations of MCP calls the turn gave up on go out before exit.
    mcp.stop().await;
    let usage = usage_since(before, session.agent.usage());

    let (subtype, text, error, code) = classify(&outcome, settings.max_turns);
    if let Some(message) = &error {
        sink.renderer.error(message);
    } else if format == OutputFormat::Text
        && session.spec.provider == ProviderKind::Local
        && sink.tool_calls == 0
    {
        let style = Style::detect(std::io::stderr().is_terminal());
        sink.renderer
            .line(&style.dim(crate::ui::render::UNLOOKED_ANSWER));
    }
    match format {
        OutputFormat::Text => {}
        OutputFormat::Json | OutputFormat::StreamJson => {
            let result = json!({
                "type": "result",
                "subtype": subtype,
                "is_error": code != 0,
                "result": text,
                "error": error,
                "session_id": session_id,
                "model": model,
                "usage": usage_json(&usage),
                "cost_usd": usage.cost_usd(&session.prices()),
                "compactions": sink.compactions.iter().map(report_json).collect::<Vec<_>>(),
                "tool_calls": sink.tool_calls,
                "embedded_model": session.local.as_ref().map(|local| {
                    let stats = local.stats();
                    json!({
                        "calls": stats.calls,
                        "prefix_cache_hits": stats.prefix_hits,
                        "cached_prompt_tokens": stats.usage.cached_prompt_tokens,
                        "prompt_tokens": stats.usage.prompt_tokens,
                        "prompt_tokens_per_second": stats.timings.prompt_tokens_per_second(&stats.usage),
                        "generation_tokens_per_second": stats.timings.generation_tokens_per_second(&stats.usage),
                    })
                }),
                "checkpoints": sink.checkpoints,
            });
            print_json_line(&result);
        }
    }
    Ok(ExitCode::from(code))
}

/// The result's subtype, answer text, error line and exit status.
fn classify(
    outcome: &Result<TurnOutcome, AgentError>,
    max_turns: u32,
) -> (&'static str, String, Option<String>, u8) {
    match outcome {
        Ok(TurnOutcome::Done { text }) => ("success", text.clone(), None, 0),
        Ok(TurnOutcome::MaxTurns) => (
            "max_turns",
            String::new(),
            Some(format!(
                "stopped after {max_turns} model calls (--max-turns); run `whittle --continue -p ...` to go on"
            )),
            MAX_TURNS_EXIT,
        ),
        Ok(TurnOutcome::Blocked { reason }) => (
            "blocked",
            String::new(),
            Some(format!(
                "a UserPromptSubmit hook refused the prompt: {reason}"
            )),
            BLOCKED_EXIT,
        ),
        Ok(TurnOutcome::Cancelled) => (
            "cancelled",
            String::new(),
            Some("cancelled (Ctrl-C); `whittle --continue` picks the session up again".into()),
            CANCELLED_EXIT,
        ),
        Err(e) => (
            "error",
            String::new(),
            Some(whittle_protocol::collapse_whitespace(&e.to_string())),
            1,
        ),
    }
}
