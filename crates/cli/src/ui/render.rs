//! What the person sees: streamed text, one line per tool call and per
//! compaction step, retries, the todo list, and a spinner while the model
//! thinks. Colors and the spinner only on a terminal.

use crate::ui::call_report::CallReporter;
use crate::ui::style::Style;
use serde_json::{Value, json};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;
use whittle_agent::{AgentEvent, EventSink, SummaryProgress};
use whittle_context::{Outcome, StepReport, Trigger};
use whittle_protocol::{collapse_whitespace, group_digits, tool_names};
use whittle_tools::render_todos;

/// Characters of a tool's input or output shown on its line.
const SUMMARY_CHARS: usize = 100;

/// A spinner on stderr, drawn by a thread of its own so it turns while the
/// loop waits on the network.
#[derive(Debug)]
pub struct Spinner {
    enabled: bool,
    running: Option<(Arc<AtomicBool>, JoinHandle<()>)>,
}

impl Spinner {
    /// A spinner that draws only when `enabled` (stderr is a terminal).
    pub fn new(enabled: bool) -> Self {
        Spinner {
            enabled,
            running: None,
        }
    }

    /// Starts turning with `label`, if not already.
    pub fn start(&mut self, label: &str) {
        if !self.enabled || self.running.is_some() {
            return;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let label = label.to_string();
        let spawned = std::thread::Builder::new()
            .name("spinner".into())
            .spawn(move || {
                const FRAMES: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
                let mut i = 0;
                let mut err = std::io::stderr();
                while !flag.load(Ordering::Acquire) {
                    let _ = write!(err, "\r{} {label}", FRAMES[i % FRAMES.len()]);
                    let _ = err.flush();
                    i += 1;
                    std::thread::park_timeout(Duration::from_millis(90));
                }
                let _ = write!(err, "\r\x1b[2K");
                let _ = err.flush();
            });
        if let Ok(handle) = spawned {
            self.running = Some((stop, handle));
        }
    }

    /// Stops and erases it; returns once the line is clean.
    pub fn stop(&mut self) {
        if let Some((stop, handle)) = self.running.take() {
            stop.store(true, Ordering::Release);
            handle.thread().unpark();
            let _ = handle.join();
        }
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Shows agent events on the terminal: text on stdout, everything else on stderr.
pub struct Renderer {
    out: Style,
    err: Style,
    spinner: Spinner,
    workspace: PathBuf,
    /// Stdout has text not ended by a newline.
    mid_line: bool,
    /// Between a request and its first answer.
    waiting: bool,
    /// Whether streamed answer text goes to stdout.
    show_text: bool,
    /// The warning the agent sends after a failed compaction step, which
    /// that step's own line already says.
    said_failure: Option<String>,
    /// The last compaction that changed the history since the status line
    /// last asked.
    turn_compaction: Option<String>,
    /// Tool calls since [`Renderer::take_tool_calls`] last asked.
    tool_calls: usize,
    /// `-v`: a line per model call.
    call_reporter: Option<CallReporter>,
}

impl Renderer {
    /// A renderer for a session in `workspace`, detecting terminals and NO_COLOR.
    pub fn new(workspace: &Path, show_text: bool) -> Self {
        let err_tty = std::io::stderr().is_terminal();
        Renderer {
            out: Style::detect(std::io::stdout().is_terminal()),
            err: Style::detect(err_tty),
            spinner: Spinner::new(err_tty),
            workspace: workspace.to_path_buf(),
            mid_line: false,
            waiting: false,
            show_text,
            said_failure: None,
            turn_compaction: None,
            tool_calls: 0,
            call_reporter: None,
        }
    }

    /// Shows a line per model call from now on (`-v`).
    pub fn report_calls(&mut self, reporter: CallReporter) {
        self.call_reporter = Some(reporter);
    }

    /// The style for stdout.
    pub fn out_style(&self) -> Style {
        self.out
    }

    /// Ends a half-written stdout line, so the next line starts clean.
    pub fn end_text(&mut self) {
        self.spinner.stop();
        if self.mid_line {
            out_line("");
            self.mid_line = false;
        }
    }

    /// One line on stderr, after any half-written text.
    pub fn line(&mut self, text: &str) {
        self.end_text();
        err_line(text);
    }

    /// `error: ...` in red on stderr.
    pub fn error(&mut self, message: &str) {
        let line = format!("{} {message}", self.err.red("error:"));
        self.line(&line);
    }

    fn resume_spinner(&mut self) {
        if self.waiting {
            self.spinner.start("thinking");
        }
    }

    /// The last compaction that changed the history since the last call,
    /// as its report line.
    pub fn take_turn_compaction(&mut self) -> Option<String> {
        self.turn_compaction.take()
    }

    /// Tool calls shown since the last call.
    pub fn take_tool_calls(&mut self) -> usize {
        std::mem::take(&mut self.tool_calls)
    }

    /// The dim line for a compaction step.
    pub fn compaction_line(&self, report: &StepReport) -> String {
        compaction_line(report, &self.workspace)
    }
}

impl EventSink for Renderer {
    fn on_event(&mut self, event: AgentEvent) {
        match event {
            AgentEvent::Waiting => {
                self.waiting = true;
                self.resume_spinner();
            }
            AgentEvent::Thinking(_) => {}
            AgentEvent::Text(text) => {
                self.waiting = false;
                self.spinner.stop();
                if self.show_text && !text.is_empty() {
                    let mut out = std::io::stdout();
                    let _ = out.write_all(text.as_bytes());
                    let _ = out.flush();
                    self.mid_line = !text.ends_with('\n');
                }
            }
            AgentEvent::ToolStart { name, input, .. } => {
                self.waiting = false;
                self.tool_calls += 1;
                let line = format!(
                    "{} {}",
                    self.err.cyan(&format!("● {name}")),
                    tool_input_summary(&name, &input)
                );
                self.line(&line);
            }
            AgentEvent::ToolDone {
                output, is_error, ..
            } => {
                let summary = tool_output_summary(&output);
                let line = if is_error {
                    format!("  {}", self.err.red(&format!("⎿ {summary}")))
                } else {
                    format!("  {}", self.err.dim(&format!("⎿ {summary}")))
                };
                self.line(&line);
            }
            AgentEvent::Summarizing(progress) => {
                let label = summarizing_label(&progress);
                if self.spinner.enabled {
                    // The label changes as the summary grows: redraw it.
                    self.spinner.stop();
                    self.spinner.start(&label);
                } else if progress.written_chars == 0 {
                    let line = self.err.dim(&label);
                    self.line(&line);
                }
            }
            AgentEvent::Compaction(report) => {
                if let Outcome::Failed(why) = &report.outcome {
                    self.said_failure = Some(format!("{} failed: {why}", report.step.as_str()));
                }
                if report.applied() {
                    self.turn_compaction = Some(report.describe(Some(&self.workspace)));
                }
                let line = self.err.dim(&self.compaction_line(&report));
                self.line(&line);
                self.resume_spinner();
            }
            AgentEvent::Retry {
                attempt,
                delay,
                reason,
            } => {
                let line = self.err.yellow(&retry_line(attempt, delay, &reason));
                self.line(&line);
                self.resume_spinner();
            }
            AgentEvent::Usage(usage) => {
                self.waiting = false;
                self.spinner.stop();
                if let Some(reporter) = &mut self.call_reporter {
                    let line = self.err.dim(&reporter.call_line(&usage));
                    self.line(&line);
                }
            }
            AgentEvent::Todos(items) => {
                let text = render_todos(&items)
                    .lines()
                    .map(|l| format!("  {l}"))
                    .collect::<Vec<_>>()
                    .join("\n");
                let line = format!("{}\n{text}", self.err.bold("Tasks"));
                self.line(&line);
            }
            AgentEvent::Warning(w) => {
                if self.said_failure.take().is_some_and(|said| said == w) {
                    return;
                }
                let line = self
                    .err
                    .yellow(&format!("warning: {}", collapse_whitespace(&w)));
                self.line(&line);
                self.resume_spinner();
            }
            // Events this version does not show.
            _ => {}
        }
    }
}

/// Writes a line to stdout. A closed pipe (`whittle replay | head`) is not
/// worth a panic, so write errors are ignored.
pub fn out_line(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{text}");
    let _ = out.flush();
}

/// Writes a line to stderr, ignoring write errors like [`out_line`].
pub fn err_line(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{text}");
    let _ = err.flush();
}

/// An error and its causes as one line: each cause is added only when the
/// text so far does not already say it, since library errors here name their
/// cause in their own message (so `{e}` alone is whole) and keep it as
/// `source()` too.
pub fn error_line(error: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    whittle_protocol::collapse_whitespace(&line)
}

/// Said after an answer of the embedded model that called no tool: a small
/// model asked about the workspace may describe one it never looked at, and
/// the person must not take that for what is there.
pub const UNLOOKED_ANSWER: &str = "(the embedded model answered without reading a file or running a command: nothing above was checked against this workspace)";

/// `retrying in 2.0s (attempt 1): reason`.
pub fn retry_line(attempt: u32, delay: Duration, reason: &str) -> String {
    format!(
        "retrying in {:.1}s (attempt {attempt}): {}",
        delay.as_secs_f64(),
        collapse_whitespace(reason)
    )
}

/// `[auto compact] 212k -> 9k tokens (micro_compact, 4 changed), transcript: PATH`.
pub fn compaction_line(r: &StepReport, workspace: &Path) -> String {
    let label = match r.trigger {
        Trigger::Requested => "compact",
        Trigger::Overflow => "reactive compact",
        // OverLimit, BatchOverBudget, TooManyMessages: the pipeline's own decisions.
        _ => "auto compact",
    };
    format!("[{label}] {}", r.describe(Some(workspace)))
}

/// What a tool call is about, in a few words.
pub fn tool_input_summary(tool: &str, input: &Value) -> String {
    let field = |k: &str| input.get(k).and_then(Value::as_str);
    let text = match tool {
        tool_names::BASH => field("command").map(str::to_string),
        tool_names::READ_FILE | tool_names::WRITE_FILE | tool_names::EDIT_FILE => {
            field("path").map(str::to_string)
        }
        tool_names::GLOB | tool_names::GREP => field("pattern").map(|p| match field("path") {
            Some(dir) => format!("{p} in {dir}"),
            None => p.to_string(),
        }),
        tool_names::TODO_WRITE => input
            .get("todos")
            .and_then(Value::as_array)
            .map(|a| format!("{} items", a.len())),
        tool_names::TASK => field("description")
            .or_else(|| field("prompt"))
            .map(str::to_string),
        tool_names::LOAD_SKILL => field("name").map(str::to_string),
        tool_names::COMPACT => {
            Some(field("focus").map_or_else(String::new, |f| format!("focus: {f}")))
        }
        _ => None,
    };
    let text = text.unwrap_or_else(|| input.to_string());
    clip(&collapse_whitespace(&text), SUMMARY_CHARS)
}

/// A tool's result in one line: its first line and how much there is.
pub fn tool_output_summary(output: &str) -> String {
    let lines = output.lines().count();
    let first = output.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let first = clip(first.trim(), SUMMARY_CHARS);
    if lines > 1 {
        format!("{first} ({lines} lines, {} chars)", output.chars().count())
    } else if first.is_empty() {
        "(no output)".to_string()
    } else {
        first
    }
}

/// At most `max` characters, with `…` when cut.
pub fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut s: String = text.chars().take(max.saturating_sub(1)).collect();
    s.push('…');
    s
}

/// A compaction report as JSON (for `--output-format json` and `stream-json`).
pub fn report_json(r: &StepReport) -> Value {
    json!({
        "step": r.step.as_str(),
        "trigger": format!("{:?}", r.trigger),
        "before": r.before,
        "after": r.after,
        "unit": r.unit.as_str(),
        "changed": r.changed,
        "paths": r.paths,
        "transcript": r.transcript(),
        "outcome": r.outcome.as_str(),
        "reason": r.outcome.reason(),
    })
}

/// What a summary in the writing shows: how much it reads, how much of its
/// bound it has written (at about four characters a token).
fn summarizing_label(p: &SummaryProgress) -> String {
    let read = group_digits(p.input_chars.div_ceil(4) as u64);
    let most = group_digits(u64::from(p.max_tokens));
    if p.written_chars == 0 {
        format!(
            "summarizing about {read} tokens of conversation (at most {most} tokens of summary)"
        )
    } else {
        let written = group_digits(p.written_chars.div_ceil(4) as u64);
        format!(
            "summarizing about {read} tokens of conversation: {written} of at most {most} tokens written"
        )
    }
}

/// One agent event as a JSON object (`--output-format stream-json`); `None`
/// for events this version does not describe, which the stream leaves out.
pub fn event_json(e: &AgentEvent) -> Option<Value> {
    let value = match e {
        AgentEvent::Waiting => json!({"type": "waiting"}),
        AgentEvent::Text(t) => json!({"type": "text", "text": t}),
        AgentEvent::Thinking(t) => json!({"type": "thinking", "thinking": t}),
        AgentEvent::ToolStart { id, name, input } => {
            json!({"type": "tool_start", "id": id, "name": name, "input": input})
        }
        AgentEvent::ToolDone {
            id,
            name,
            output,
            is_error,
        } => {
            json!({"type": "tool_done", "id": id, "name": name, "output": output, "is_error": is_error})
        }
        AgentEvent::Summarizing(p) => json!({
            "type": "summarizing",
            "input_chars": p.input_chars,
            "written_chars": p.written_chars,
            "max_tokens": p.max_tokens,
        }),
        AgentEvent::Compaction(r) => json!({"type": "compaction", "report": report_json(r)}),
        AgentEvent::Retry {
            attempt,
            delay,
            reason,
        } => {
            json!({"type": "retry", "attempt": attempt, "delay_secs": delay.as_secs_f64(), "reason": reason})
        }
        AgentEvent::Usage(u) => json!({"type": "usage", "usage": u}),
        AgentEvent::Todos(items) => json!({"type": "todos", "todos": items}),
        AgentEvent::Warning(w) => json!({"type": "warning", "message": w}),
        AgentEvent::Checkpoint {
            id,
            tool_call_id,
            files_changed,
            insertions,
            deletions,
        } => json!({
            "type": "checkpoint",
            "id": id,
            "tool_call_id": tool_call_id,
            "files_changed": files_changed,
            "insertions": insertions,
            "deletions": deletions,
        }),
        _ => return None,
    };
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_lines_are_short_and_single() {
        let s = tool_input_summary("bash", &json!({"command": "cargo test\n  --all"}));
        assert_eq!(s, "cargo test --all");
        let long = tool_input_summary("bash", &json!({"command": "x".repeat(500)}));
        assert_eq!(long.chars().count(), SUMMARY_CHARS);
        assert_eq!(
            tool_input_summary("grep", &json!({"pattern": "fn main", "path": "src"})),
            "fn main in src"
        );
        assert_eq!(tool_input_summary("mystery", &json!({"a": 1})), "{\"a\":1}");
        assert_eq!(tool_output_summary(""), "(no output)");
        assert_eq!(tool_output_summary("a\nb\n"), "a (2 lines, 4 chars)");
    }

    #[test]
    fn retry_lines_read_well() {
        assert_eq!(
            retry_line(1, Duration::from_millis(2000), "overloaded\nnow"),
            "retrying in 2.0s (attempt 1): overloaded now"
        );
    }

    #[test]
    fn clip_never_splits_a_character() {
        assert_eq!(clip("héllo wörld", 5), "héll…");
        assert_eq!(clip("short", 10), "short");
    }
}
