//! End-to-end: the real `whittle` binary, run as a child process against a
//! scripted Anthropic server on loopback, with HOME and the config folder
//! in temp dirs and a temp workspace. Every test checks the requests the
//! server received (valid for the Messages API, no API key in any body),
//! files in the workspace, and exit codes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use testkit::{ContextLimit, RecordedRequest, Reply, Step, TestServer};
use whittle_context::{Message, validate};

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
            .env("ANTHROPIC_API_KEY", KEY);
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

/// Text of a message whose content is a string or blocks.
fn message_text(message: &Value) -> String {
    match &message["content"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
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

fn result_text(block: &Value) -> String {
    match &block["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
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

// ---------------------------------------------------------------------------
// The seed's three experiments, with --preset teaching.

#[test]
fn experiment_1_earlier_results_become_saved_placeholders() {
    let h = Harness::new();
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
    h.server
        .push(Reply::text("All five READMEs use numbered headings."));
    let out = h.run(&[
        "--preset",
        "teaching",
        "-p",
        "Read f1.txt to f5.txt one by one and compare them.",
    ]);
    assert_success(&out);
    assert!(stdout(&out).contains("numbered headings"));
    let requests = h.requests();
    assert_eq!(requests.len(), 6);
    // Each result as first sent, whole.
    let first_sent: Vec<String> = (1..=5)
        .map(|i| result_text(&tool_result(&requests[i].body, &format!("r{i}"))))
        .collect();
    for (i, text) in first_sent.iter().enumerate() {
        assert!(
            text.len() > 11_000,
            "result {} is {} chars",
            i + 1,
            text.len()
        );
        assert!(text.contains(&format!("f{} line 000110", i + 1)));
    }
    let sixth = &requests[5].body;
    let now: Vec<String> = (1..=5)
        .map(|i| result_text(&tool_result(sixth, &format!("r{i}"))))
        .collect();
    let placeholders: Vec<usize> = (0..5)
        .filter(|&i| saved_placeholder_path(&now[i]).is_some())
        .collect();
    assert!(
        !placeholders.is_empty(),
        "no placeholder in the sixth request"
    );
    assert_eq!(placeholders[0], 0, "the oldest result goes first");
    assert!(
        placeholders.iter().all(|&i| i < 2),
        "the newest three stay whole: {placeholders:?}"
    );
    for i in 2..5 {
        assert_eq!(now[i], first_sent[i], "result {} is whole", i + 1);
    }
    for &i in &placeholders {
        let path = saved_placeholder_path(&now[i]).unwrap();
        assert!(
            path.starts_with(h.state().join("tool-results")),
            "{}",
            path.display()
        );
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            first_sent[i],
            "the saved file holds the whole result"
        );
    }
    assert!(stderr(&out).contains("[auto compact]"), "{}", stderr(&out));
    assert!(stderr(&out).contains("micro_compact"));

    // The log holds only what compaction changed, yet a resumed session sees
    // exactly the compacted history the model saw last, then its answer.
    h.server.push(Reply::text("Resumed."));
    assert_success(&h.run(&["--preset", "teaching", "--continue", "-p", "go on"]));
    let without_breakpoints = |v: &Value| {
        let mut v = v.clone();
        strip_cache_control(&mut v);
        v.as_array().unwrap().clone()
    };
    let resumed = without_breakpoints(&h.requests()[6].body["messages"]);
    let last = without_breakpoints(&sixth["messages"]);
    assert!(
        resumed[..last.len()] == last[..],
        "the resumed history differs from the one last sent"
    );
    let log = walk(&h.state().join("sessions"))
        .into_iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect::<String>();
    let froms: Vec<u64> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["type"] == "compaction")
        .map(|r| r["from"].as_u64().unwrap())
        .collect();
    assert!(
        !froms.is_empty() && froms.iter().all(|&f| f >= 2),
        "compactions log only from the first edited message: {froms:?}"
    );
    assert!(
        log.contains("\"trigger\":\"over_limit\""),
        "the trigger is logged"
    );
    assert_eq!(
        message_text(&resumed[last.len()]),
        "All five READMEs use numbered headings."
    );
    h.assert_clean();
}

#[test]
fn experiment_2_a_large_batch_is_persisted_with_a_preview() {
    let h = Harness::new();
    // Four files of ~700 KB; read_file shows the first 60,000 chars of each,
    // so the batch (~240,000 chars) exceeds the 200,000-char budget.
    for tag in ["a", "b", "c", "d"] {
        write_lines(&h.ws().join(format!("{tag}.txt")), tag, 7_000, 100);
    }
    h.server
        .push(Reply::tool_uses(["a", "b", "c", "d"].map(|t| {
            (
                format!("big-{t}"),
                "read_file",
                json!({"path": format!("{t}.txt")}),
            )
        })));
    h.server
        .push(Reply::text("The records have id, title and body."));
    let out = h.run(&[
        "--preset",
        "teaching",
        "--output-format",
        "stream-json",
        "-p",
        "Analyze the structure of a.txt to d.txt",
    ]);
    assert_success(&out);
    let events: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        events.iter().any(|e| e["type"] == "compaction"
            && e["report"]["step"] == "tool_result_budget"
            && e["report"]["outcome"] == "applied"),
        "{events:?}"
    );
    let second = &h.requests()[1].body;
    let mut persisted = 0;
    for t in ["a", "b", "c", "d"] {
        let text = result_text(&tool_result(second, &format!("big-{t}")));
        let Some(rest) = text.strip_prefix("<persisted-output>\nFull output: ") else {
            continue;
        };
        persisted += 1;
        let path = PathBuf::from(rest.split_once('\n').unwrap().0);
        assert!(path.starts_with(h.state().join("tool-results")));
        assert!(
            text.contains(&format!("{t} line 000001")),
            "a preview: {text}"
        );
        assert!(
            !text.contains(&format!("{t} line 000500")),
            "only a preview"
        );
        let full = std::fs::read_to_string(&path).unwrap();
        assert!(full.chars().count() > 50_000, "{} chars", full.len());
        assert!(
            full.contains(&format!("{t} line 000500")),
            "the full text on disk"
        );
    }
    assert!(persisted >= 1, "no persisted output in {second}");
    let last = events.last().unwrap();
    assert_eq!(last["type"], "result");
    assert_eq!(last["subtype"], "success");
    h.assert_clean();
}

#[test]
fn experiment_3_long_text_is_summarized_with_the_request_and_a_transcript() {
    let h = Harness::new();
    let essay = "The parser keeps state in three tables. ".repeat(1_500); // 60,000 chars
    h.server.push(Reply::text(essay.clone()).with_tool_use(
        "e1",
        "bash",
        json!({"command": "echo ok"}),
    ));
    h.server.push_fn(|r| {
        let asked = r.last_message_text();
        assert!(asked.starts_with("<conversation>"), "{asked:.200}");
        Step::Reply(Reply::text(
            "Summary: the user asked to compare two files; an essay on parser tables was written.",
        ))
    });
    h.server
        .push(Reply::text("Both manage context with summaries."));
    let prompt = "Compare compact.py with memory.py.";
    let out = h.run(&["--preset", "teaching", "-p", prompt]);
    assert_success(&out);
    let requests = h.requests();
    assert_eq!(requests.len(), 3);
    let first = message_text(&requests[2].body["messages"][0]);
    assert!(
        first.starts_with(&format!(
            "[Compacted]\n\nCurrent user request:\n{prompt}\n\nConversation summary"
        )),
        "{first}"
    );
    assert!(first.contains("essay on parser tables"));
    let transcript = PathBuf::from(first.rsplit_once("Full transcript: ").unwrap().1.trim());
    let saved = std::fs::read_to_string(&transcript).unwrap();
    assert!(saved.contains("The parser keeps state in three tables."));
    assert!(saved.len() > 60_000);
    let err = stderr(&out);
    assert!(
        err.contains("[auto compact]") && err.contains("compact_history"),
        "{err}"
    );
    assert!(err.contains("transcript: .whittle/transcripts/"), "{err}");
    h.assert_clean();
}

// ---------------------------------------------------------------------------
// Compaction on request.

#[test]
fn the_compact_tool_runs_after_the_rest_of_its_batch() {
    let h = Harness::new();
    h.server.push(
        Reply::tool_use(
            "w",
            "write_file",
            json!({"path": "stage1.txt", "content": "stage 1 done\n"}),
        )
        .with_tool_use("c", "compact", json!({"focus": "the parser bug"})),
    );
    h.server.push_fn(|r| {
        let asked = r.last_message_text();
        assert!(
            asked.contains("Pay particular attention to: the parser bug"),
            "{asked:.300}"
        );
        assert!(
            asked.contains("[tool result w]"),
            "the write's result is there"
        );
        Step::Reply(Reply::text(
            "Stage 1 is written to stage1.txt; stage 2 remains.",
        ))
    });
    h.server.push(Reply::text("On to stage 2."));
    let out = h.run(&[
        "--preset",
        "teaching",
        "--permission-mode",
        "accept-edits",
        "-p",
        "do stage 1, then compact",
    ]);
    assert_success(&out);
    assert_eq!(
        std::fs::read_to_string(h.ws().join("stage1.txt")).unwrap(),
        "stage 1 done\n"
    );
    let requests = h.requests();
    assert_eq!(requests.len(), 3);
    let first = message_text(&requests[2].body["messages"][0]);
    assert!(
        first.starts_with("[Compacted]\n\nCurrent user request:\ndo stage 1, then compact"),
        "{first}"
    );
    assert!(first.contains("stage 2 remains"));
    assert!(stderr(&out).contains("[compact]"), "{}", stderr(&out));
    h.assert_clean();
}

#[test]
fn the_repl_runs_slash_commands_from_stdin() {
    let h = Harness::new();
    h.server
        .push(Reply::text("Here is a long explanation. ".repeat(300)));
    h.server.push_fn(|r| {
        let asked = r.last_message_text();
        assert!(
            asked.contains("Pay particular attention to: keep the parser notes"),
            "{asked:.300}"
        );
        Step::Reply(Reply::text(
            "The user said hello; a long explanation followed.",
        ))
    });
    h.server.push(Reply::text("Next: write the parser."));
    let input = "hello\n/context\n/compact keep the parser notes\nwhat \\\nnext?\n/cost\n/sessions\n/frobnicate\n/help\n/quit\nnever sent\n";
    let out = h.run_with_stdin(&["--preset", "teaching"], input);
    assert_success(&out);
    let text = stdout(&out);
    assert!(text.contains("Here is a long explanation."));
    assert!(
        text.contains("Context:") && text.contains("tool results"),
        "{text}"
    );
    assert!(
        text.contains("compaction starts above 50,000 chars"),
        "{text}"
    );
    assert!(text.contains("Next: write the parser."));
    // Two answers and the summary: summaries are paid for too.
    assert!(text.contains("model calls        3"), "{text}");
    assert!(text.contains("unknown command /frobnicate"));
    assert!(text.contains("/compact [focus]"), "help");
    let requests = h.requests();
    assert_eq!(requests.len(), 3, "nothing after /quit");
    let messages = requests[2].body["messages"].as_array().unwrap();
    let first = message_text(&messages[0]);
    assert!(
        first.starts_with("[Compacted]\n\nCurrent user request:\nhello"),
        "{first}"
    );
    assert_eq!(message_text(messages.last().unwrap()), "what \nnext?");
    assert!(stderr(&out).contains("[compact]"), "{}", stderr(&out));
    // /sessions lists the one session, marked, with its first input.
    let sessions: Vec<PathBuf> = walk(&h.state().join("sessions"));
    assert_eq!(sessions.len(), 1);
    let id = sessions[0]
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(text.contains(&format!("* {id}")), "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains(&id) && l.ends_with("hello"))
    );
    h.assert_clean();
}

// ---------------------------------------------------------------------------
// Overflow from the provider.

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

#[test]
fn prompt_too_long_once_is_recovered_by_reactive_compaction() {
    let h = Harness::new();
    let last_bytes = build_history(&h);
    let before = h.requests().len();
    h.server.set_context_limit(Some(ContextLimit {
        max_body_bytes: last_bytes - 500,
        once: true,
    }));
    h.server
        .push(Reply::text("Earlier: counted with seq four times."));
    h.server.push(Reply::text("All good now."));
    let out = h.run(&["--preset", "teaching", "--continue", "-p", "and now?"]);
    assert_success(&out);
    assert!(stdout(&out).contains("All good now."));
    assert!(
        stderr(&out).contains("[reactive compact]"),
        "{}",
        stderr(&out)
    );
    let requests = h.requests();
    assert_eq!(requests.len(), before + 3, "refused, summary, retry");
    let first = message_text(&requests.last().unwrap().body["messages"][0]);
    assert!(
        first.starts_with("[Reactive compact]\n\nCurrent user request:\nand now?"),
        "{first}"
    );
    h.assert_clean();
}

#[test]
fn prompt_too_long_always_is_one_error_line_naming_the_transcript() {
    let h = Harness::new();
    build_history(&h);
    h.server.set_context_limit(Some(ContextLimit {
        max_body_bytes: 600,
        once: false,
    }));
    let out = h.run(&["--preset", "teaching", "--continue", "-p", "again"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(lines.len(), 1, "{err}");
    let line = lines[0];
    assert!(line.contains("still too long"), "{line}");
    assert!(err.contains("[reactive compact]"), "{err}");
    assert!(!err.contains("warning:"), "the failure is said once: {err}");
    let transcript = line
        .split_whitespace()
        .find(|w| w.contains("/transcripts/"))
        .expect("names the transcript");
    assert!(
        Path::new(transcript.trim_end_matches(['.', ','])).is_file(),
        "{line}"
    );
    h.assert_clean();
}

// ---------------------------------------------------------------------------
// Permissions.

#[test]
fn denied_commands_never_run_and_outside_paths_are_refused() {
    let h = Harness::new();
    let outside = tempfile::tempdir().unwrap();
    let outside_file = outside.path().join("escaped.txt");
    std::fs::write(h.ws().join("keep.txt"), "precious").unwrap();
    h.server.push(
        Reply::tool_use(
            "rm",
            "bash",
            json!({"command": "rm -f keep.txt && touch ran.txt"}),
        )
        .with_tool_use(
            "out",
            "write_file",
            json!({"path": outside_file.to_str().unwrap(), "content": "x"}),
        )
        .with_tool_use(
            "sudo",
            "bash",
            json!({"command": "sudo touch root.txt; touch ran2.txt"}),
        ),
    );
    h.server.push(Reply::text("I was not allowed."));
    let out = h.run(&["--permission-mode", "accept-edits", "-p", "clean up"]);
    assert_success(&out);
    assert_eq!(
        std::fs::read_to_string(h.ws().join("keep.txt")).unwrap(),
        "precious"
    );
    assert!(!h.ws().join("ran.txt").exists());
    assert!(!h.ws().join("ran2.txt").exists());
    assert!(!outside_file.exists());
    let second = &h.requests()[1].body;
    for id in ["rm", "out", "sudo"] {
        let block = tool_result(second, id);
        assert_eq!(block["is_error"], true, "{block}");
        assert!(result_text(&block).starts_with("[denied]"), "{block}");
    }
    let err = stderr(&out);
    assert!(
        err.contains("● bash rm -f keep.txt && touch ran.txt"),
        "{err}"
    );
    h.assert_clean();
}

// ---------------------------------------------------------------------------
// Crash safety and Ctrl-C.

/// A tool call that waits until the file `stop-waiting` appears.
fn waiting_call(id: &str) -> Reply {
    Reply::tool_use(
        id,
        "bash",
        json!({"command": "while [ ! -e stop-waiting ]; do sleep 0.05; done; touch finished.txt"}),
    )
}

/// Waits until the session log holds a tool call, then gives the tool a
/// moment to start.
fn wait_for_tool_call(h: &Harness) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let logged = walk(&h.state().join("sessions")).iter().any(|p| {
            std::fs::read_to_string(p)
                .unwrap_or_default()
                .contains("\"tool_use\"")
        });
        if logged {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the tool call never reached the log"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
}

fn interrupt(child: &std::process::Child) {
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn ctrl_c_cancels_a_one_shot_turn_and_the_session_goes_on() {
    let h = Harness::new();
    h.server.push(waiting_call("wait"));
    let child = h
        .command(&["--permission-mode", "yolo", "-p", "wait for the flag"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_tool_call(&h);
    interrupt(&child);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert!(stderr(&out).contains("cancelled"), "{}", stderr(&out));
    // The tool's process group was killed: the flag no longer matters.
    std::fs::write(h.ws().join("stop-waiting"), "").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(!h.ws().join("finished.txt").exists());

    h.server.push(Reply::text("Cancelled earlier; moving on."));
    let out = h.run(&["--continue", "-p", "go on"]);
    assert_success(&out);
    let block = tool_result(&h.requests()[1].body, "wait");
    assert_eq!(block["is_error"], true);
    assert!(result_text(&block).contains("cancelled"), "{block}");
    h.assert_clean();
}

#[test]
fn ctrl_c_in_the_repl_cancels_the_turn_and_reads_the_next_line() {
    let h = Harness::new();
    h.server.push(waiting_call("wait"));
    h.server.push(Reply::text("Second answer."));
    let child = h.spawn_with_stdin(
        &["--permission-mode", "yolo"],
        "wait for the flag\nsecond\n",
    );
    wait_for_tool_call(&h);
    interrupt(&child);
    let out = child.wait_with_output().unwrap();
    assert_success(&out);
    assert!(stdout(&out).contains("Second answer."), "{}", stdout(&out));
    assert!(stderr(&out).contains("(cancelled; the conversation so far is kept)"));
    let requests = h.requests();
    assert_eq!(requests.len(), 2);
    let body = &requests[1].body;
    assert!(result_text(&tool_result(body, "wait")).contains("cancelled"));
    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(message_text(&last), "second");
    h.assert_clean();
}

#[test]
fn ctrl_c_during_compact_in_the_repl_keeps_the_history() {
    let h = Harness::new();
    h.server.push(Reply::text("Hello there."));
    h.server.push(testkit::Fault::stall(
        Reply::text("a summary never finished"),
        40,
    ));
    h.server.push(Reply::text("Still here."));
    let child = h.spawn_with_stdin(&[], "hello\n/compact\nafter\n");
    let deadline = Instant::now() + Duration::from_secs(30);
    while h.requests().len() < 2 {
        assert!(Instant::now() < deadline, "the summary was never asked for");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    interrupt(&child);
    let out = child.wait_with_output().unwrap();
    assert_success(&out);
    assert!(stdout(&out).contains("Still here."), "{}", stdout(&out));
    assert!(stderr(&out).contains("cancelled"), "{}", stderr(&out));
    let requests = h.requests();
    assert_eq!(requests.len(), 3);
    let messages = requests[2].body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3, "the history is whole: {messages:?}");
    assert_eq!(message_text(&messages[0]), "hello");
    assert_eq!(message_text(&messages[2]), "after");
    h.assert_clean();
}

#[test]
fn a_session_killed_mid_tool_resumes_with_an_interrupted_result() {
    let h = Harness::new();
    let stop = h.ws().join("stop-waiting");
    h.server.push(waiting_call("slow"));
    let mut child = h
        .command(&["--permission-mode", "yolo", "-p", "wait for the flag"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_tool_call(&h);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    std::fs::write(&stop, "").unwrap(); // let the orphaned loop end
    assert_eq!(h.requests().len(), 1);

    h.server.push(Reply::text(
        "The wait was interrupted; I will not retry it.",
    ));
    let out = h.run(&["--continue", "-p", "what happened?"]);
    assert_success(&out);
    let requests = h.requests();
    assert_eq!(requests.len(), 2);
    let block = tool_result(&requests[1].body, "slow");
    assert_eq!(block["is_error"], true);
    assert!(result_text(&block).contains("interrupted"), "{block}");
    let last = requests[1].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert!(message_text(&last).contains("what happened?"));
    h.assert_clean();
}

// ---------------------------------------------------------------------------
// Output formats, exit codes, setup errors.

#[test]
fn json_output_is_one_object_with_usage_and_session() {
    let h = Harness::new();
    h.server
        .push(Reply::tool_use("t", "bash", json!({"command": "echo hi"})).with_usage(1200, 30));
    h.server.push(
        Reply::text("It printed hi.")
            .with_usage(1300, 10)
            .with_cache(0, 1000),
    );
    let out = h.run(&["--output-format", "json", "-p", "say hi"]);
    assert_success(&out);
    let v: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(v["type"], "result");
    assert_eq!(v["subtype"], "success");
    assert_eq!(v["is_error"], false);
    assert_eq!(v["result"], "It printed hi.");
    assert_eq!(v["usage"]["model_calls"], 2);
    assert_eq!(v["usage"]["input_tokens"], 2500);
    assert_eq!(v["usage"]["output_tokens"], 40);
    assert_eq!(v["usage"]["cache_read_input_tokens"], 1000);
    assert!(v["cost_usd"].as_f64().unwrap() > 0.0);
    assert_eq!(v["compactions"], json!([]));
    let id = v["session_id"].as_str().unwrap();
    assert!(
        h.state()
            .join("sessions")
            .join(format!("{id}.jsonl"))
            .is_file()
    );
    assert_eq!(v["model"], "anthropic:claude-sonnet-5-5");
    h.assert_clean();
}

#[test]
fn retries_and_the_todo_list_are_shown() {
    let h = Harness::new();
    h.server.push(Reply::tool_use(
        "plan",
        "todo_write",
        json!({"todos": [
            {"content": "Read the parser", "status": "completed"},
            {"content": "Fix the bug", "status": "in_progress"},
            {"content": "Run the tests", "status": "pending"}
        ]}),
    ));
    h.server.push(testkit::Fault::overloaded());
    h.server.push(Reply::text("Planned."));
    let out = h.run(&["-p", "make a plan"]);
    assert_success(&out);
    let err = stderr(&out);
    assert!(
        err.contains("Tasks\n  [x] Read the parser\n  [>] Fix the bug\n  [ ] Run the tests"),
        "{err}"
    );
    let retry = err
        .lines()
        .find(|l| l.starts_with("retrying in "))
        .expect(&err);
    assert!(retry.contains("s (attempt 1): "), "{retry}");
    assert!(retry.contains("overloaded"), "{retry}");
    assert_eq!(h.requests().len(), 3);
    h.assert_clean();
}

#[test]
fn the_prompt_can_come_from_stdin_and_must_not_be_empty() {
    let h = Harness::new();
    h.server.push(Reply::text("Read it."));
    let out = h.run_with_stdin(&["-p", "-"], "a task\nover two lines\n");
    assert_success(&out);
    let r = &h.requests()[0].body;
    let last = r["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(message_text(&last), "a task\nover two lines\n");
    let out = h.run(&["-p", "  "]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("the prompt is empty"));
    assert_eq!(h.requests().len(), 1);
}

#[test]
fn running_out_of_turns_exits_3() {
    let h = Harness::new();
    h.server.push(Reply::tool_use(
        "t",
        "bash",
        json!({"command": "echo again"}),
    ));
    let out = h.run(&["--max-turns", "1", "-p", "loop"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("--max-turns"));
    h.assert_clean();
}

#[test]
fn a_missing_key_is_one_line_naming_the_variable() {
    let h = Harness::new();
    let out = h
        .command(&["--model", "anthropic:claude-sonnet-5-5", "-p", "hi"])
        .env_remove("ANTHROPIC_API_KEY")
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error:") && err.contains("ANTHROPIC_API_KEY"),
        "{err}"
    );
    assert!(h.requests().is_empty());
}

#[test]
fn a_bad_config_file_is_one_line_naming_it() {
    let h = Harness::new();
    let path = h.config_home().join("whittle").join("config.toml");
    std::fs::write(&path, "max_turns = \"many\"\n").unwrap();
    let out = h.run(&["-p", "hi"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&path.display().to_string()) && err.contains("max_turns"),
        "{err}"
    );
    assert!(h.requests().is_empty());
}

#[test]
fn project_config_sets_the_model_and_flags_win() {
    let h = Harness::new();
    std::fs::create_dir_all(h.ws().join(".whittle")).unwrap();
    std::fs::write(
        h.ws().join(".whittle/config.toml"),
        "model = \"anthropic:claude-haiku-5-5\"\nmax_tokens = 777\n",
    )
    .unwrap();
    h.server.push(Reply::text("one"));
    h.server.push(Reply::text("two"));
    assert_success(&h.run(&["-p", "first"]));
    assert_success(&h.run(&["--model", "anthropic:claude-opus-5-5", "-p", "second"]));
    let r = h.requests();
    assert_eq!(r[0].body["model"], "claude-haiku-5-5");
    assert_eq!(r[0].body["max_tokens"], 777);
    assert_eq!(r[1].body["model"], "claude-opus-5-5");
    h.assert_clean();
}

// ---------------------------------------------------------------------------
// Replay.

#[test]
fn replay_measures_our_own_sessions_and_lists_bad_files() {
    let h = Harness::new();
    build_history(&h);
    let sessions = h.state().join("sessions");
    std::fs::write(sessions.join("broken.jsonl"), "{not json\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_whittle"))
        .args(["replay", "--policy", "none", "--policy", "teaching"])
        .arg(&sessions)
        .output()
        .unwrap();
    assert_success(&out);
    let table = stdout(&out);
    assert!(
        table.starts_with("whittle replay: 1 conversations"),
        "{table}"
    );
    let header = table.lines().nth(2).unwrap();
    assert!(
        header.contains("none") && header.contains("teaching"),
        "{table}"
    );
    assert!(!header.contains("mask"));
    assert!(table.contains("unrecoverable bytes"));
    assert!(
        table.contains("skipped:") && table.contains("broken.jsonl"),
        "{table}"
    );

    let out = Command::new(env!("CARGO_BIN_EXE_whittle"))
        .args(["replay", "--json", "--window-tokens", "32000"])
        .arg(&sessions)
        .output()
        .unwrap();
    assert_success(&out);
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["window_tokens"], 32000);
    assert_eq!(
        v["policies"],
        json!(["none", "teaching", "default", "mask"])
    );
    assert_eq!(v["conversations"].as_array().unwrap().len(), 1);
    assert_eq!(v["errors"].as_array().unwrap().len(), 1);
    for t in v["totals"].as_array().unwrap() {
        assert_eq!(t["calls"], 5, "{t}");
        assert_eq!(t["unrecoverable_chars"], 0);
        assert_eq!(t["invalid_requests"], 0);
    }

    // A reader that goes away early (`| head`) is no reason to panic.
    let mut child = Command::new(env!("CARGO_BIN_EXE_whittle"))
        .args(["replay", "--json"])
        .arg(&sessions)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));

    let out = Command::new(env!("CARGO_BIN_EXE_whittle"))
        .args(["replay", "--policy", "fast"])
        .arg(&sessions)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).starts_with("error: unknown policy"),
        "{}",
        stderr(&out)
    );
}

// ---------------------------------------------------------------------------
// The REPL on a real terminal (a pseudo-terminal).

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

#[test]
fn the_terminal_repl_asks_before_edits_keeps_history_and_quits_on_ctrl_d() {
    let h = Harness::new();
    h.server.push(Reply::tool_use(
        "w",
        "write_file",
        json!({"path": "notes.txt", "content": "remember the parser\n"}),
    ));
    h.server.push(Reply::text("Saved the notes."));
    h.server.push(Reply::tool_use(
        "w2",
        "write_file",
        json!({"path": "other.txt", "content": "no"}),
    ));
    h.server.push(Reply::text("Left it alone."));
    let mut term = Terminal::spawn(&h, &[]);
    term.expect("Ctrl-D quits", 1);
    term.expect("> ", 1);
    term.type_keys("please save the notes\r");
    term.expect("allow? [y]es / [n]o / [a]lways", 1);
    term.type_keys("y\r");
    term.expect("Saved the notes.", 1);
    assert_eq!(
        std::fs::read_to_string(h.ws().join("notes.txt")).unwrap(),
        "remember the parser\n"
    );
    term.expect("> ", 2);
    term.type_keys("now write other.txt\r");
    term.expect("allow? [y]es / [n]o / [a]lways", 2);
    term.type_keys("n\r");
    term.expect("Left it alone.", 1);
    assert!(!h.ws().join("other.txt").exists());
    // Ctrl-C at the prompt drops the line; Ctrl-D on an empty line quits.
    term.expect("> ", 3);
    term.type_keys("a half-typed thought");
    term.expect("a half-typed thought", 1);
    term.type_keys("\x03");
    term.expect("> ", 4);
    term.type_keys("\x04");
    let status = term.child.wait().unwrap();
    assert!(status.success(), "{}", term.screen());

    let requests = h.requests();
    assert_eq!(requests.len(), 4, "the dropped line was never sent");
    assert!(
        result_text(&tool_result(&requests[3].body, "w2")).starts_with("[denied]"),
        "a no is a refusal"
    );
    let history = std::fs::read_to_string(h.state().join("repl-history")).unwrap();
    assert!(history.contains("please save the notes"), "{history}");
    assert!(history.contains("now write other.txt"));
    assert!(!history.contains("half-typed"));
    h.assert_clean();
}

#[test]
fn replay_can_summarize_with_a_real_provider() {
    let h = Harness::new();
    // A session whose long answer the teaching policy must summarize.
    h.server.push(
        Reply::text("Notes on the parser. ".repeat(3_000)).with_tool_use(
            "n",
            "bash",
            json!({"command": "echo noted"}),
        ),
    );
    h.server.push(Reply::text("summary of the session so far"));
    h.server.push(Reply::text("Done."));
    assert_success(&h.run(&["--preset", "teaching", "-p", "take notes"]));
    let before = h.requests().len();
    for _ in 0..3 {
        h.server
            .push(Reply::text("A summary written by the model."));
    }
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_whittle"));
    h.set_env(&mut cmd);
    let out = cmd
        .args(["replay", "--json", "--policy", "teaching"])
        .args(["--summarizer", "anthropic:claude-sonnet-5-5"])
        .arg(h.state().join("sessions"))
        .output()
        .unwrap();
    assert_success(&out);
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["summarizer"], "model anthropic:claude-sonnet-5-5");
    let calls = v["totals"][0]["summarize_calls"].as_u64().unwrap();
    assert!(calls >= 1, "{v}");
    assert_eq!(v["totals"][0]["unrecoverable_chars"], 0);
    let asked = &h.requests()[before..];
    assert_eq!(asked.len() as u64, calls, "one request per summary");
    assert!(
        asked[0]
            .last_message_text()
            .contains("Notes on the parser.")
    );
    h.assert_clean();
}

#[test]
fn sessions_resume_by_id_and_unknown_ids_are_one_line() {
    let h = Harness::new();
    h.server.push(Reply::text("first answer"));
    let out = h.run(&["--output-format", "json", "-p", "remember 42"]);
    assert_success(&out);
    let v: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    let id = v["session_id"].as_str().unwrap().to_string();
    h.server.push(Reply::text("other session"));
    let out = h.run(&["--output-format", "json", "-p", "unrelated"]);
    let v: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    let other = v["session_id"].as_str().unwrap().to_string();
    assert_ne!(id, other);

    // A prefix both ids share is ambiguous: say so, send nothing.
    let shared: String = id
        .chars()
        .zip(other.chars())
        .take_while(|(a, b)| a == b)
        .map(|(a, _)| a)
        .collect();
    let out = h.run(&["--resume", &shared, "-p", "which?"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("matches 2 sessions"),
        "{}",
        stderr(&out)
    );
    assert_eq!(h.requests().len(), 2);

    h.server.push(Reply::text("It was 42."));
    let out = h.run(&["--resume", &id, "-p", "what number?"]);
    assert_success(&out);
    let messages = h.requests()[2].body["messages"].as_array().unwrap().clone();
    assert_eq!(message_text(&messages[0]), "remember 42");
    assert_eq!(message_text(&messages[1]), "first answer");
    assert_eq!(message_text(&messages[2]), "what number?");

    let out = h.run(&["--resume", "no-such-session", "-p", "hi"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
    assert!(stderr(&out).contains("no-such-session"));
    assert_eq!(h.requests().len(), 3);
    h.assert_clean();
}

#[test]
fn hooks_from_the_config_block_tools() {
    let h = Harness::new();
    h.write_user_config(
        r#"
[[hooks]]
event = "PreToolUse"
matcher = "bash"
command = "cat > hook-saw.json; echo 'no shell on Fridays' >&2; exit 2"
"#,
    );
    h.server.push(Reply::tool_use(
        "b",
        "bash",
        json!({"command": "touch ran.txt"}),
    ));
    h.server.push(Reply::text("The hook said no."));
    let out = h.run(&["-p", "touch a file"]);
    assert_success(&out);
    assert!(!h.ws().join("ran.txt").exists());
    let saw: Value =
        serde_json::from_str(&std::fs::read_to_string(h.ws().join("hook-saw.json")).unwrap())
            .unwrap();
    assert_eq!(saw["event"]["tool_input"]["command"], "touch ran.txt");
    let text = result_text(&tool_result(&h.requests()[1].body, "b"));
    assert!(text.contains("no shell on Fridays"), "{text}");
    h.assert_clean();
}

/// A project config that would run a hook and skip the questions.
fn write_widening_project_config(h: &Harness) {
    std::fs::create_dir_all(h.ws().join(".whittle")).unwrap();
    std::fs::write(
        h.ws().join(".whittle/config.toml"),
        r#"
max_tokens = 555
permission_mode = "yolo"
[[hooks]]
event = "UserPromptSubmit"
command = "touch hook-ran"
"#,
    )
    .unwrap();
}

fn push_write_then_text(h: &Harness) {
    h.server.push(Reply::tool_use(
        "w",
        "write_file",
        json!({"path": "written.txt", "content": "x"}),
    ));
    h.server.push(Reply::text("done"));
}

#[test]
fn an_untrusted_project_config_cannot_add_hooks_or_widen_permissions() {
    let h = Harness::new();
    write_widening_project_config(&h);
    push_write_then_text(&h);
    let out = h.run(&["-p", "write the file"]);
    assert_success(&out);
    let err = stderr(&out);
    assert_eq!(err.matches("not trusted").count(), 1, "{err}");
    assert!(err.contains("1 hook") && err.contains("yolo"), "{err}");
    assert!(!h.ws().join("hook-ran").exists(), "the hook ran");
    assert!(!h.ws().join("written.txt").exists(), "yolo applied");
    let r = h.requests();
    assert_eq!(r[0].body["max_tokens"], 555, "the rest of the file applies");
    assert!(result_text(&tool_result(&r[1].body, "w")).starts_with("[denied]"));
    h.assert_clean();

    // --trust-project applies it all for one run, and remembers nothing.
    push_write_then_text(&h);
    let out = h.run(&["--trust-project", "-p", "write the file"]);
    assert_success(&out);
    assert!(!stderr(&out).contains("not trusted"), "{}", stderr(&out));
    assert!(h.ws().join("hook-ran").exists());
    assert!(h.ws().join("written.txt").exists());
    assert!(!h.config_home().join("whittle/trusted-folders").exists());
    h.assert_clean();
}

#[test]
fn the_terminal_repl_asks_to_trust_the_folder_and_remembers_yes() {
    let h = Harness::new();
    write_widening_project_config(&h);
    let mut term = Terminal::spawn(&h, &[]);
    term.expect("Trust this folder and apply them? [y/N]", 1);
    term.type_keys("y\r");
    term.expect("> ", 1);
    term.type_keys("\x04");
    assert!(term.child.wait().unwrap().success(), "{}", term.screen());
    let remembered =
        std::fs::read_to_string(h.config_home().join("whittle/trusted-folders")).unwrap();
    assert_eq!(
        remembered.trim(),
        h.ws().canonicalize().unwrap().display().to_string()
    );

    // Remembered: -p applies the hook and the mode without a word.
    push_write_then_text(&h);
    let out = h.run(&["-p", "write the file"]);
    assert_success(&out);
    assert!(!stderr(&out).contains("not trusted"), "{}", stderr(&out));
    assert!(h.ws().join("hook-ran").exists());
    assert!(h.ws().join("written.txt").exists());
    h.assert_clean();
}

#[test]
fn thinking_and_effort_reach_every_call_including_the_summary() {
    let h = Harness::new();
    h.write_user_config("thinking = \"adaptive\"\n");
    h.server.push(Reply::text("A long greeting. ".repeat(300)));
    h.server.push(Reply::text("The user said hello."));
    h.server.push(Reply::text("Next."));
    let out = h.run_with_stdin(&["--effort", "medium"], "hello\n/compact\nnext\n");
    assert_success(&out);
    let requests = h.requests();
    assert_eq!(requests.len(), 3);
    for r in &requests {
        assert_eq!(
            r.body["thinking"],
            json!({"type": "adaptive"}),
            "{}",
            r.number
        );
        assert_eq!(r.body["output_config"], json!({"effort": "medium"}));
    }
    // The summary was a continuation of the conversation, the newest call is after it.
    assert_eq!(message_text(&requests[1].body["messages"][0]), "hello");
    let first = message_text(&requests[2].body["messages"][0]);
    assert!(first.starts_with("[Compacted]"), "{first}");

    let out = h.run(&["--thinking", "500", "-p", "hi"]);
    assert_eq!(out.status.code(), Some(2), "a usage error");
    assert!(stderr(&out).contains("at least 1024"), "{}", stderr(&out));
    h.assert_clean();
}

#[test]
fn hooks_from_the_config_guard_the_subagent_tools_too() {
    let h = Harness::new();
    h.write_user_config(
        r#"
[[hooks]]
event = "PreToolUse"
matcher = "read_file"
command = "echo 'no secrets here' >&2; exit 2"
"#,
    );
    std::fs::write(h.ws().join(".env"), "TOKEN=hunter2-value\n").unwrap();
    h.server.push(Reply::tool_use(
        "t1",
        "task",
        json!({"description": "look", "prompt": "read .env and report"}),
    ));
    h.server
        .push(Reply::tool_use("r1", "read_file", json!({"path": ".env"})));
    h.server.push(Reply::text("The hook refused the file."));
    h.server
        .push(Reply::text("The subagent could not read it."));
    let out = h.run(&["--output-format", "json", "-p", "what is in .env?"]);
    assert_success(&out);
    let v: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    assert_eq!(
        v["usage"]["model_calls"], 4,
        "the subagent's calls count: {v}"
    );
    let requests = h.requests();
    assert_eq!(requests.len(), 4);
    let refused = result_text(&tool_result(&requests[2].body, "r1"));
    assert!(refused.contains("no secrets here"), "{refused}");
    for r in &requests {
        assert!(
            !r.body.to_string().contains("hunter2"),
            "request {}",
            r.number
        );
    }
    h.assert_clean();
}

#[test]
fn a_failed_summary_keeps_the_history_and_is_logged() {
    let h = Harness::new();
    h.server.push(Reply::text("A long greeting. ".repeat(300)));
    h.server.push(testkit::Fault::status_with_body(
        400,
        r#"{"type":"error","error":{"type":"invalid_request_error","message":"no summaries today"}}"#,
    ));
    h.server.push(Reply::text("Still whole."));
    let out = h.run_with_stdin(&[], "hello\n/compact\nnext\n");
    assert_success(&out);
    assert!(stdout(&out).contains("Still whole."), "{}", stdout(&out));
    let requests = h.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(message_text(&requests[2].body["messages"][0]), "hello");
    let records: Vec<Value> = walk(&h.state().join("sessions"))
        .iter()
        .flat_map(|p| {
            std::fs::read_to_string(p)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect::<Vec<Value>>()
        })
        .collect();
    let failed: Vec<&Value> = records
        .iter()
        .filter(|r| r["type"] == "compaction_failed")
        .collect();
    assert_eq!(failed.len(), 1, "{records:?}");
    assert_eq!(failed[0]["step"], "compact_history");
    assert_eq!(failed[0]["trigger"], "requested");
    assert!(
        failed[0]["reason"]
            .as_str()
            .unwrap()
            .contains("no summaries today")
    );
    assert!(!records.iter().any(|r| r["type"] == "compaction"));
    h.assert_clean();
}
