//! `bash`: runs a command in the workspace, in its own process group, with a
//! timeout and cancellation. Its interleaved output is kept whole: small
//! outputs come back as they are, big ones are streamed into the store as
//! they arrive (memory stays bounded) and the model sees a preview with the
//! file's path.

use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;
use whittle_protocol::tool_names;

use futures::future::BoxFuture;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde::Deserialize;
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tokio::time::Instant;

use crate::tool::{ToolContext, ToolOutput};
use crate::typed::TypedTool;
use schemars::JsonSchema;
use whittle_store::OutputWriter;

/// How long to keep reading after the shell exits while a background child
/// still holds the output pipe open.
const LINGER: Duration = Duration::from_millis(250);
/// How long to collect what killed processes left in the pipe.
const DRAIN_AFTER_KILL: Duration = Duration::from_millis(200);

/// The `bash` tool. How big outputs are kept is the context's
/// ([`ToolContext::output_limits`]).
#[derive(Clone, Debug)]
pub struct BashTool {
    default_timeout: Duration,
    max_timeout: Duration,
}

impl Default for BashTool {
    fn default() -> Self {
        Self {
            default_timeout: Duration::from_secs(120),
            max_timeout: Duration::from_secs(600),
        }
    }
}

/// What the model sends to `bash`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BashInput {
    /// The command line, run as `bash -c COMMAND`.
    #[schemars(length(min = 1))]
    pub command: String,
    /// Seconds before the command is killed (default 120, max 600).
    #[schemars(range(max = 600), extend("exclusiveMinimum" = 0))]
    pub timeout_secs: Option<f64>,
    /// Five to ten words on what the command does, for the person following
    /// along (editors show it as the call's title).
    pub description: Option<String>,
}

/// How a run ended.
enum Ending {
    Exited(ExitStatus),
    TimedOut,
    Cancelled,
}

/// Kills a process group when dropped while armed, so a run whose future
/// is dropped (the agent gave up on it, or it timed out) leaves nothing
/// behind. The child must have been started with `process_group(0)`.
pub struct GroupGuard {
    pgid: Option<Pid>,
}

impl GroupGuard {
    /// Guards the group led by the child with process id `pid` (none when
    /// the child has already been reaped).
    pub fn new(pid: Option<u32>) -> Self {
        GroupGuard {
            pgid: pid.and_then(|id| i32::try_from(id).ok()).map(Pid::from_raw),
        }
    }

    /// Kills the whole group now.
    pub fn kill(&self) {
        if let Some(pgid) = self.pgid {
            let _ = killpg(pgid, Signal::SIGKILL);
        }
    }

    /// The run ended on its own: dropping the guard leaves the group alone.
    pub fn disarm(&mut self) {
        self.pgid = None;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

impl TypedTool for BashTool {
    type Input = BashInput;
    const NAME: &'static str = tool_names::BASH;
    const DESCRIPTION: &'static str = "Run a shell command with `bash -c` in the workspace folder (each call starts fresh there). \
         stdout and stderr are interleaved. A long output is saved whole to a file and you see its \
         start and end with the file's path (read or grep the file for the rest). The exit code is \
         reported. Default timeout 120 s, at most 600 (timeout_secs); on timeout the command and \
         all its children are killed. Stdin is empty: never run interactive programs. Commands \
         usually run in a sandbox: they may write only the workspace and /tmp (private to this \
         session), and processes left in the background end with the call, so start a server \
         and use it in the same command. Prefer read_file, grep and glob for reading and searching.";
    const READ_ONLY: bool = false;

    fn call<'a>(&'a self, input: BashInput, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            if input.command.trim().is_empty() {
                return ToolOutput::error("invalid input for bash: `command` is empty");
            }
            let timeout = match input.timeout_secs {
                None => self.default_timeout,
                Some(t) if !t.is_finite() || t <= 0.0 => {
                    return ToolOutput::error(format!(
                        "invalid input for bash: timeout_secs must be a positive number of seconds, got {t}"
                    ));
                }
                Some(t) => Duration::from_secs_f64(t.min(self.max_timeout.as_secs_f64())),
            };
            if ctx.cancel_token().is_cancelled() {
                return ToolOutput::error("bash: cancelled before the command started");
            }
            self.execute(&input.command, timeout, ctx).await
        })
    }
}

impl BashTool {
    async fn execute(&self, command: &str, timeout: Duration, ctx: &ToolContext) -> ToolOutput {
        let (reader, writer) = match std::io::pipe() {
            Ok(p) => p,
            Err(e) => return ToolOutput::error(format!("bash: cannot create a pipe: {e}")),
        };
        let writer_err = match writer.try_clone() {
            Ok(w) => w,
            Err(e) => return ToolOutput::error(format!("bash: cannot create a pipe: {e}")),
        };
        let mut cmd = match ctx.sandbox().command("bash", ["-c", command]) {
            Ok(c) => tokio::process::Command::from(c),
            Err(e) => return ToolOutput::error(format!("bash: {e}")),
        };
        cmd.current_dir(ctx.workspace())
            .stdin(Stdio::null())
            .stdout(writer)
            .stderr(writer_err)
            .env("PAGER", "cat")
            .env("GIT_PAGER", "cat")
            .env("GIT_TERMINAL_PROMPT", "0")
            .process_group(0)
            .kill_on_drop(true);
        let spawned = cmd.spawn();
        // The command holds our copies of the pipe's write end; closing them
        // is what lets the reader see end-of-file.
        drop(cmd);
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => {
                return ToolOutput::error(format!(
                    "bash: cannot start the command in {}: {e}",
                    ctx.workspace().display()
                ));
            }
        };
        let mut guard = GroupGuard::new(child.id());
        let mut rx = match pipe::Receiver::from_owned_fd(OwnedFd::from(reader)) {
            Ok(rx) => rx,
            Err(e) => return ToolOutput::error(format!("bash: cannot read the output: {e}")),
        };

        let mut out = ctx.output_writer(tool_names::BASH);
        let mut buf = vec![0u8; 16 * 1024];
        let mut eof = false;
        let deadline = Instant::now() + timeout;
        let cancel = ctx.cancel_token();

        let ending = loop {
            tokio::select! {
                biased;
                _ = cancel.cancelled() => break Ending::Cancelled,
                _ = tokio::time::sleep_until(deadline) => break Ending::TimedOut,
                status = child.wait() => match status {
                    Ok(status) => break Ending::Exited(status),
                    Err(e) => return ToolOutput::error(format!("bash: lost track of the command: {e}")),
                },
                n = rx.read(&mut buf), if !eof => match n {
                    Ok(0) | Err(_) => eof = true,
                    Ok(n) => out.write(&buf[..n]),
                },
            }
        };

        let mut notes = Vec::new();
        match ending {
            Ending::Exited(_) => {
                guard.disarm();
                let linger_until = Instant::now() + LINGER;
                let complete =
                    drain(&mut rx, &mut out, &mut buf, eof, linger_until, Some(cancel)).await;
                if !complete {
                    notes.push(format!(
                        "[the shell exited but a background process still holds its output open; stopped reading after {} ms (redirect background output to a file)]",
                        LINGER.as_millis()
                    ));
                }
            }
            Ending::TimedOut | Ending::Cancelled => {
                guard.kill();
                guard.disarm();
                let _ = child.wait().await;
                drain(
                    &mut rx,
                    &mut out,
                    &mut buf,
                    eof,
                    Instant::now() + DRAIN_AFTER_KILL,
                    None,
                )
                .await;
            }
        }

        let status_notes = match ending {
            Ending::Exited(status) => match (status.code(), status.signal()) {
                (Some(code), _) => format!("[exit code: {code}]"),
                (None, Some(sig)) => format!("[killed by signal {sig}]"),
                (None, None) => "[exit status unknown]".to_owned(),
            },
            Ending::TimedOut => format!(
                "[timed out after {} s: the command and its whole process group were killed; pass a larger timeout_secs (max {}) or run it in the background with output redirected to a file]",
                fmt_secs(timeout),
                self.max_timeout.as_secs()
            ),
            Ending::Cancelled => {
                "[cancelled: the command and its whole process group were killed]".to_owned()
            }
        };
        // The command and its whole sandbox have ended: what it created
        // where the kernel could not stop it is moved aside now.
        notes.extend(
            ctx.sandbox()
                .after_command()
                .iter()
                .map(|moved| moved.describe(ctx.workspace())),
        );
        notes.push(status_notes);
        let is_error = match ending {
            Ending::Exited(status) => !status.success(),
            Ending::TimedOut | Ending::Cancelled => true,
        };
        ToolOutput {
            content: out
                .finish()
                .into_text(&notes, ctx.output_limits().preview_chars),
            is_error,
            images: Vec::new(),
        }
    }
}

/// Reads what is left in the pipe until end-of-file or `until`; true when
/// end-of-file was reached.
async fn drain(
    rx: &mut pipe::Receiver,
    out: &mut OutputWriter,
    buf: &mut [u8],
    mut eof: bool,
    until: Instant,
    cancel: Option<&tokio_util::sync::CancellationToken>,
) -> bool {
    while !eof {
        let cancelled = async {
            match cancel {
                Some(c) => c.cancelled().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            _ = cancelled => return false,
            _ = tokio::time::sleep_until(until) => return false,
            n = rx.read(buf) => match n {
                Ok(0) | Err(_) => eof = true,
                Ok(n) => out.write(&buf[..n]),
            },
        }
    }
    true
}

fn fmt_secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{}", d.as_secs())
    } else {
        format!("{s:.1}")
    }
}
