//! A stdio server: the child process, in its own process group that dies
//! with whittle; its stderr in a bounded log file (never on the terminal,
//! never shown to the model); and the JSON-RPC lines on its stdout, read
//! strictly. A line that is not JSON-RPC ends the connection with a line
//! saying so (the protocol forbids anything else on stdout, and waiting for
//! an answer that will never come would only hang the call).

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};

use crate::health::Health;

/// Largest JSON-RPC message accepted from a server: far above any honest
/// result (a 50 MB one passes whole), and a bound for one that never ends
/// its line.
pub const MAX_MESSAGE_BYTES: usize = 256 * 1024 * 1024;

/// Most bytes of one server's stderr kept in its log per start.
pub const MAX_LOG_BYTES: u64 = 8 * 1024 * 1024;

/// Variables passed from whittle's environment to a server: what programs
/// need to run and reach the network; never keys or tokens (a server gets
/// those only through its own `env` entry).
const PASSED_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TERM",
    "TMPDIR",
    "TZ",
    "XDG_CONFIG_HOME",
    "XDG_CACHE_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "XDG_RUNTIME_DIR",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "all_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
];

/// Process groups of servers now running, so that a sudden exit (a second
/// Ctrl-C) can still kill them: drops do not run on `process::exit`.
static LIVE_GROUPS: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

/// Kills every stdio server's process group at once. For the exit paths
/// that skip destructors; everything else is killed when dropped.
pub fn kill_all_servers() {
    let groups = match LIVE_GROUPS.lock() {
        Ok(g) => g.clone(),
        Err(poisoned) => poisoned.into_inner().clone(),
    };
    for pgid in groups {
        let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
    }
}

/// What a stdio server is started with.
pub struct Launch<'a> {
    /// The server's name, for messages and its log file.
    pub server: &'a str,
    /// The program.
    pub command: &'a str,
    /// Its arguments.
    pub args: &'a [String],
    /// Variables from whittle's environment for [`PASSED_ENV`].
    pub inherited: Vec<(String, String)>,
    /// The server's own variables, expanded.
    pub env: Vec<(String, String)>,
    /// Where it starts.
    pub cwd: &'a Path,
    /// Where its stderr goes: `<dir>/<server>.log`; `None` drops it.
    pub log_dir: Option<&'a Path>,
}

/// The variables of [`PASSED_ENV`] that are set in `lookup`.
pub fn inherited_env(lookup: &dyn Fn(&str) -> Option<String>) -> Vec<(String, String)> {
    PASSED_ENV
        .iter()
        .filter_map(|k| lookup(k).map(|v| ((*k).to_owned(), v)))
        .collect()
}

/// A process group to kill once: when the server's own process ends (its
/// children go with it) or when the server is dropped, whichever is first,
/// so a group id the system may hand out again is never killed later.
#[derive(Clone, Default)]
struct Group(Arc<Mutex<Option<i32>>>);

impl Group {
    fn new(pgid: Option<i32>) -> Group {
        if let Some(pgid) = pgid
            && let Ok(mut live) = LIVE_GROUPS.lock()
        {
            live.insert(pgid);
        }
        Group(Arc::new(Mutex::new(pgid)))
    }

    fn kill(&self) {
        let taken = match self.0.lock() {
            Ok(mut g) => g.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        if let Some(pgid) = taken {
            let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
            if let Ok(mut live) = LIVE_GROUPS.lock() {
                live.remove(&pgid);
            }
        }
    }
}

/// A running child: its group dies when this is dropped. The tasks that
/// copy its stderr and wait for it end by themselves once it is dead (the
/// waiting one reaps it, so no zombie is left for init).
pub struct Child {
    group: Group,
}

impl Drop for Child {
    fn drop(&mut self) {
        self.group.kill();
    }
}

/// Starts the server; its stdio becomes a [`LineTransport`].
pub fn spawn(launch: &Launch<'_>, health: &Arc<Health>) -> std::io::Result<(Child, LineTransport)> {
    let mut cmd = tokio::process::Command::new(launch.command);
    cmd.args(launch.args)
        .current_dir(launch.cwd)
        .env_clear()
        .envs(launch.inherited.iter().map(|(k, v)| (k, v)))
        .envs(launch.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = cmd.spawn()?;
    let group = Group::new(child.id().and_then(|id| i32::try_from(id).ok()));
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(std::io::Error::other("the child's stdio was not captured"));
    };
    let log = launch
        .log_dir
        .and_then(|dir| open_log(dir, launch.server, launch.command, launch.args));
    tokio::spawn(copy_stderr(stderr, log, Arc::clone(health)));
    let exit_health = Arc::clone(health);
    let exit_group = group.clone();
    tokio::spawn(async move {
        let status = child.wait().await;
        exit_group.kill();
        exit_health.set_exit(match status {
            Ok(s) => describe_exit(s),
            Err(e) => format!("could not be waited for: {e}"),
        });
    });
    let guard = Child { group };
    Ok((guard, LineTransport::new(stdout, stdin, Arc::clone(health))))
}

fn describe_exit(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal}"),
        (None, None) => "exited".to_owned(),
    }
}

/// The server's log: appended to, started afresh once it grew past twice
/// the per-start bound.
fn open_log(dir: &Path, server: &str, command: &str, args: &[String]) -> Option<std::fs::File> {
    std::fs::create_dir_all(dir).ok()?;
    let path: PathBuf = dir.join(format!("{server}.log"));
    let too_big = std::fs::metadata(&path).is_ok_and(|m| m.len() > 2 * MAX_LOG_BYTES);
    // A link at the log's name is not followed: the server's stderr would
    // go wherever it points.
    let mut file = whittle_store::no_follow(
        std::fs::OpenOptions::new()
            .create(true)
            .append(!too_big)
            .write(true)
            .truncate(too_big),
    )
    .open(&path)
    .ok()?;
    let mut line = format!("--- whittle started: {command}");
    for a in args {
        line.push(' ');
        line.push_str(a);
    }
    let _ = writeln!(file, "{line}");
    Some(file)
}

/// Copies stderr into the log (bounded) and the health's tail, and keeps
/// reading past the bound so the server never blocks on a full pipe.
async fn copy_stderr(
    mut stderr: tokio::process::ChildStderr,
    mut log: Option<std::fs::File>,
    health: Arc<Health>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    let mut written: u64 = 0;
    loop {
        let n = match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let chunk = &buf[..n];
        health.push_stderr(chunk);
        if let Some(file) = &mut log {
            let room = MAX_LOG_BYTES.saturating_sub(written);
            let take = usize::try_from(room).unwrap_or(usize::MAX).min(n);
            let _ = file.write_all(&chunk[..take]);
            written += take as u64;
            if take < n {
                let _ = writeln!(
                    file,
                    "\n--- whittle: the rest is not logged ({MAX_LOG_BYTES} bytes per start)"
                );
                log = None;
            }
        }
    }
}

/// JSON-RPC, one message per line, on a child's stdout and stdin.
pub struct LineTransport {
    reader: BufReader<ChildStdout>,
    line: Vec<u8>,
    writer: Arc<tokio::sync::Mutex<Option<ChildStdin>>>,
    health: Arc<Health>,
    max_line: usize,
}

impl LineTransport {
    fn new(stdout: ChildStdout, stdin: ChildStdin, health: Arc<Health>) -> Self {
        LineTransport {
            reader: BufReader::with_capacity(64 * 1024, stdout),
            line: Vec::new(),
            writer: Arc::new(tokio::sync::Mutex::new(Some(stdin))),
            health,
            max_line: MAX_MESSAGE_BYTES,
        }
    }

    /// Reads up to the next newline into `self.line`. Cancel-safe: bytes
    /// read so far stay in `self.line` for the next call.
    async fn read_line(&mut self) -> std::io::Result<LineEnd> {
        loop {
            let (used, done) = {
                let available = self.reader.fill_buf().await?;
                if available.is_empty() {
                    return Ok(LineEnd::Eof);
                }
                // memchr is built optimised even in debug builds (see the
                // workspace's Cargo.toml); a byte-at-a-time search was a tenth
                // of the CPU of taking a 50 MB result.
                let newline = memchr::memchr(b'\n', available);
                let take = newline.map_or(available.len(), |i| i + 1);
                if self.line.len() + take > self.max_line {
                    return Ok(LineEnd::TooLong);
                }
                self.line.extend_from_slice(&available[..take]);
                (take, newline.is_some())
            };
            self.reader.consume(used);
            if done {
                return Ok(LineEnd::Line);
            }
        }
    }
}

enum LineEnd {
    Line,
    Eof,
    TooLong,
}

/// Whether a message that did not parse may be skipped: a notification
/// (no `id`) cannot leave a call waiting.
fn is_notification(line: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(line)
        .is_ok_and(|v| v.get("method").is_some() && v.get("id").is_none())
}

/// The start of a line, for an error message.
fn snippet(line: &[u8]) -> String {
    // A few hundred bytes hold the 80 characters shown, and the cut mark.
    whittle_protocol::quote_line(&String::from_utf8_lossy(&line[..line.len().min(400)]), 80)
}

impl rmcp::transport::Transport<RoleClient> for LineTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let writer = Arc::clone(&self.writer);
        async move {
            let mut bytes = serde_json::to_vec(&item).map_err(std::io::Error::other)?;
            bytes.push(b'\n');
            let mut guard = writer.lock().await;
            let Some(stdin) = guard.as_mut() else {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::NotConnected,
                    "the server's stdin is closed",
                ));
            };
            stdin.write_all(&bytes).await?;
            stdin.flush().await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            match self.read_line().await {
                Ok(LineEnd::Line) => {}
                Ok(LineEnd::Eof) => return None,
                Ok(LineEnd::TooLong) => {
                    self.health.set_fault(format!(
                        "sent a message longer than {} MB; the connection was closed",
                        self.max_line / (1024 * 1024)
                    ));
                    return None;
                }
                Err(e) => {
                    self.health
                        .set_fault(format!("could not be read from: {e}"));
                    return None;
                }
            }
            let line = std::mem::take(&mut self.line);
            let mut body: &[u8] = line.strip_suffix(b"\n").unwrap_or(&line);
            body = body.strip_suffix(b"\r").unwrap_or(body);
            body = body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(body);
            if body.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match serde_json::from_slice::<RxJsonRpcMessage<RoleClient>>(body) {
                Ok(message) => return Some(message),
                Err(_) if is_notification(body) => continue,
                Err(e) => {
                    let what = if e.is_syntax() || e.is_eof() {
                        "sent output that is not JSON"
                    } else {
                        "sent JSON that is not a JSON-RPC message"
                    };
                    self.health.set_fault(format!(
                        "broke the protocol: it {what} on stdout (`{}`); the connection was closed",
                        snippet(body)
                    ));
                    return None;
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        // Closing stdin is how the protocol asks a stdio server to exit;
        // the process group is killed when the `Child` is dropped.
        self.writer.lock().await.take();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippets_are_one_bounded_line() {
        assert_eq!(snippet(b"hello"), "hello");
        let long = vec![b'x'; 500];
        let s = snippet(&long);
        assert!(s.ends_with('…') && s.chars().count() == 81);
        assert_eq!(snippet(b"a\nb\x1b"), "a b ");
    }

    #[test]
    fn only_notifications_may_be_skipped() {
        assert!(is_notification(
            br#"{"jsonrpc":"2.0","method":"x/y","params":5}"#
        ));
        assert!(!is_notification(br#"{"jsonrpc":"2.0","id":1,"result":5}"#));
        assert!(!is_notification(b"garbage"));
    }

    #[test]
    fn a_link_at_the_log_name_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "mine").unwrap();
        let logs = dir.path().join("mcp");
        std::fs::create_dir(&logs).unwrap();
        std::os::unix::fs::symlink(&victim, logs.join("evil.log")).unwrap();
        assert!(open_log(&logs, "evil", "server", &[]).is_none());
        assert_eq!(std::fs::read(&victim).unwrap(), b"mine");
        let mut log = open_log(&logs, "good", "server", &["--x".to_owned()]).unwrap();
        writeln!(log, "hello").unwrap();
        assert_eq!(
            std::fs::read_to_string(logs.join("good.log")).unwrap(),
            "--- whittle started: server --x\nhello\n"
        );
    }

    #[test]
    fn only_the_plain_variables_are_passed_on() {
        let lookup = |k: &str| match k {
            "PATH" => Some("/bin".to_owned()),
            "ANTHROPIC_API_KEY" | "OPENAI_API_KEY" => Some("secret".to_owned()),
            _ => None,
        };
        assert_eq!(
            inherited_env(&lookup),
            [("PATH".to_owned(), "/bin".to_owned())]
        );
    }
}
