//! End-to-end: the real `whittle` binary, run as a child process against a
//! scripted Anthropic server on loopback, with HOME and the config folder
//! in temp dirs and a temp workspace. Every test checks the requests the
//! server received (valid for the Messages API, no API key in any body),
//! files in the workspace, and exit codes.
//!
//! One test binary, so it links once: a module per feature, and here the
//! harness and helpers they share.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod acp;
mod compaction;
mod config;
mod escapes;
mod experiments;
mod interrupts;
mod ledger;
mod local_model;
mod mcp;
mod normal_work;
mod output;
mod overflow;
mod permissions;
mod processes;
mod replay;
mod report;
mod repository;
mod rewind;
mod sandbox_check;
mod sessions;
mod storage;
mod terminal;
mod trust;

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use testkit::{RecordedRequest, Reply, TestServer};
use whittle_protocol::{Message, validate};

const KEY: &str = "sk-ant-e2e-secret-key-0123456789";

struct Harness {
    server: TestServer,
    home: tempfile::TempDir,
    workspace: tempfile::TempDir,
}

impl Harness {
    fn new() -> Harness {
        let h = Harness {
            server: TestServer::start_blocking(),
            home: tempfile::tempdir().unwrap(),
            workspace: tempfile::tempdir().unwrap(),
        };
        std::fs::create_dir_all(h.config_home().join("whittle")).unwrap();
        // A person who ran whittle before has a session key: the first run's
        // making it is not a change outside the workspace the tests look for.
        whittle_agent::SessionKey::load_or_create(&h.config_home().join("whittle/session-key"))
            .unwrap();
        h
    }

    fn ws(&self) -> &Path {
        self.workspace.path()
    }

    fn state(&self) -> PathBuf {
        self.ws().canonicalize().unwrap().join(".whittle")
    }

    fn config_home(&self) -> PathBuf {
        self.home.path().join("config")
    }

    /// Writes the user's `config.toml`.
    fn write_user_config(&self, text: &str) {
        std::fs::write(self.config_home().join("whittle").join("config.toml"), text).unwrap();
    }

    /// A clean environment pointing at the test server.
    fn set_env(&self, cmd: &mut Command) {
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.home.path())
            .env("XDG_CONFIG_HOME", self.config_home())
            .env("XDG_CACHE_HOME", self.home.path().join("cache"))
            .env("ANTHROPIC_BASE_URL", self.server.url())
            .env("ANTHROPIC_API_KEY", KEY)
            // scripts/test's marker: every process the tests start carries it.
            .envs(std::env::var_os("WHITTLE_TEST_RUN").map(|v| ("WHITTLE_TEST_RUN", v)));
    }

    /// The binary with a clean environment, in the workspace.
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_whittle"));
        self.set_env(&mut cmd);
        cmd.arg("--cwd")
            .arg(self.ws())
            .args(args)
            .stdin(Stdio::null());
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    fn run_with_stdin(&self, args: &[&str], input: &str) -> Output {
        self.spawn_with_stdin(args, input)
            .wait_with_output()
            .unwrap()
    }

    /// The binary started with `input` as all of its stdin, output captured.
    fn spawn_with_stdin(&self, args: &[&str], input: &str) -> std::process::Child {
        use std::io::Write;
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        child
    }

    fn requests(&self) -> Vec<RecordedRequest> {
        self.server.requests()
    }

    /// Every request was valid and carried no key in its body; nothing the
    /// binary wrote holds the key either.
    fn assert_clean(&self) {
        for r in self.requests() {
            let messages: Vec<Message> =
                serde_json::from_value(r.body["messages"].clone()).unwrap();
            assert_eq!(validate(&messages), Ok(()), "request {}", r.number);
            assert!(
                !r.body.to_string().contains(KEY),
                "key in request {}",
                r.number
            );
        }
        for file in walk(&self.state()) {
            let bytes = std::fs::read(&file).unwrap();
            assert!(
                !String::from_utf8_lossy(&bytes).contains(KEY),
                "key in {}",
                file.display()
            );
        }
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn assert_success(o: &Output) {
    assert!(
        o.status.success(),
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        stdout(o),
        stderr(o)
    );
}

/// Removes the cache breakpoints, which move from request to request.
fn strip_cache_control(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.remove("cache_control");
            m.values_mut().for_each(strip_cache_control);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_cache_control),
        _ => {}
    }
}

/// The tool_result block answering `id` in a request body.
fn tool_result(body: &Value, id: &str) -> Value {
    for m in body["messages"].as_array().unwrap() {
        if let Some(blocks) = m["content"].as_array() {
            for b in blocks {
                if b["type"] == "tool_result" && b["tool_use_id"] == id {
                    return b.clone();
                }
            }
        }
    }
    panic!("no tool_result for {id} in {body}");
}

/// The path in `[Earlier tool result saved at PATH]`, if that is the text.
fn saved_placeholder_path(text: &str) -> Option<PathBuf> {
    text.strip_prefix("[Earlier tool result saved at ")?
        .strip_suffix(']')
        .map(PathBuf::from)
}

/// A text file of `lines` lines of about `width` chars, each naming its file and number.
fn write_lines(path: &Path, tag: &str, lines: usize, width: usize) {
    let mut text = String::new();
    for i in 1..=lines {
        let head = format!("{tag} line {i:06} ");
        text.push_str(&head);
        text.push_str(&"x".repeat(width.saturating_sub(head.len())));
        text.push('\n');
    }
    std::fs::write(path, text).unwrap();
}

/// Five 110-line files in the workspace and a model that reads them one by
/// one (`r1`..`r5`): more than the teaching preset's 50,000-char context
/// holds whole, so the oldest results become saved placeholders.
fn five_files_to_read(h: &Harness) {
    for i in 1..=5 {
        write_lines(
            &h.ws().join(format!("f{i}.txt")),
            &format!("f{i}"),
            110,
            100,
        );
        h.server.push(Reply::tool_use(
            format!("r{i}"),
            "read_file",
            json!({"path": format!("f{i}.txt")}),
        ));
    }
}

/// A first run that leaves a session with several sizable tool results.
fn build_history(h: &Harness) -> usize {
    for i in 0..4 {
        h.server.push(Reply::tool_use(
            format!("s{i}"),
            "bash",
            json!({"command": format!("seq 1 {}", 1500 + i)}),
        ));
    }
    h.server.push(Reply::text("Counted."));
    let out = h.run(&["--preset", "teaching", "-p", "count a few times"]);
    assert_success(&out);
    h.requests().last().unwrap().body_bytes
}

/// A child whose stdin, stdout and stderr are a pseudo-terminal that is its
/// controlling terminal; what it prints is collected as it comes.
struct Terminal {
    child: std::process::Child,
    master: std::fs::File,
    screen: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Terminal {
    fn spawn(h: &Harness, args: &[&str]) -> Terminal {
        use std::io::Read;
        let size = nix::pty::Winsize {
            ws_row: 40,
            ws_col: 200,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        let pty = nix::pty::openpty(&size, None).unwrap();
        let mut cmd = Command::new("setsid");
        h.set_env(&mut cmd);
        cmd.env("TERM", "xterm")
            .arg("-c")
            .arg(env!("CARGO_BIN_EXE_whittle"))
            .arg("--cwd")
            .arg(h.ws())
            .args(args)
            .stdin(Stdio::from(pty.slave.try_clone().unwrap()))
            .stdout(Stdio::from(pty.slave.try_clone().unwrap()))
            .stderr(Stdio::from(pty.slave));
        let child = cmd.spawn().unwrap();
        let master = std::fs::File::from(pty.master);
        let screen = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let (mut reader, sink) = (master.try_clone().unwrap(), screen.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            // EIO once the child is gone ends the loop.
            while let Ok(n @ 1..) = reader.read(&mut buf) {
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Terminal {
            child,
            master,
            screen,
        }
    }

    fn screen(&self) -> String {
        self.screen.lock().unwrap().clone()
    }

    /// Waits until the screen shows `text` `times` times.
    fn expect(&self, text: &str, times: usize) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.screen().matches(text).count() < times {
            assert!(
                Instant::now() < deadline,
                "waited for {text:?} x{times}; the screen:\n{}",
                self.screen()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn type_keys(&mut self, keys: &str) {
        use std::io::Write;
        self.master.write_all(keys.as_bytes()).unwrap();
        self.master.flush().unwrap();
    }
}
