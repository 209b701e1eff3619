//! How the Claude Code fixtures in `tests/fixtures/claude-code-2.1/` were
//! made: a real Claude Code, driven by a scripted model on testkit's server,
//! writes its session log, which is copied with Claude Code's own prompt
//! text replaced by filler of the same length.
//!
//! ```text
//! npm install --prefix /tmp/cc @anthropic-ai/claude-code@2.1.332   # needs the npm registry
//! cargo run -p whittle-replay --example record_claude_code -- \
//!     /tmp/cc/node_modules/.bin/claude three-calls crates/replay/tests/fixtures/claude-code-2.1/three-calls.jsonl
//! ```
//!
//! Scenarios: `three-calls` (text + Bash, then Read, then the answer: the
//! session of issue 16) and `two-prompts` (a longer task, then a second
//! prompt with `--continue`). Claude Code runs with a temporary HOME (nothing
//! of this machine's settings or sessions leaks in), as root with
//! `--allowedTools "Bash(echo:*)" Read`, and only the loopback server to
//! talk to. Usage comes from testkit's [`PromptCache`]: cache reads and
//! writes at the breakpoints Claude Code set, in the sizes it sent, so the
//! recorded usage is what the API's cache would have said of these requests.
//!
//! Not part of the test run: it needs Claude Code, which needs the network
//! to install.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use testkit::{PromptCache, RecordedRequest, Reply, Step, TestServer};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [claude, scenario, out] = args.as_slice() else {
        eprintln!("usage: record_claude_code CLAUDE_BINARY three-calls|two-prompts OUT.jsonl");
        std::process::exit(2);
    };
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let project = project.path().canonicalize().unwrap();
    std::fs::write(project.join("notes.txt"), NOTES).unwrap();
    std::fs::write(project.join("parser.rs"), parser_source()).unwrap();

    let server = TestServer::start_blocking();
    let cache = Arc::new(Mutex::new(PromptCache::new()));
    let started = Instant::now();
    // Idle time added to the server's clock (and later to the log) before
    // the second prompt, for the cache-expiry fixture.
    let idle_ms = Arc::new(Mutex::new(0u64));
    let script = script(scenario, &project);
    let clock = idle_ms.clone();
    server.set_fallback(move |request: &RecordedRequest| {
        let now = started.elapsed().as_millis() as u64 + *clock.lock().unwrap();
        let usage = cache.lock().unwrap().usage(&request.body, now);
        let mut reply = answer(&script, request);
        reply.usage = usage;
        Step::Reply(reply)
    });

    let gap_ms: u64 = std::env::var("IDLE_GAP_MINUTES")
        .ok()
        .and_then(|m| m.parse::<u64>().ok())
        .map_or(0, |m| m * 60_000);
    let mut shift_after: Option<u64> = None;
    let prompts: &[(&str, bool)] = match scenario.as_str() {
        "three-calls" => &[(
            "Say hello with echo, then read notes.txt and tell me what it says.",
            false,
        )],
        "two-prompts" => &[
            (
                "Look at parser.rs and notes.txt, check the build with echo, and summarize.",
                false,
            ),
            ("Thanks. Now say goodbye with echo.", true),
        ],
        other => panic!("unknown scenario {other}"),
    };
    for (prompt, resume) in prompts {
        if *resume && gap_ms > 0 {
            *idle_ms.lock().unwrap() = gap_ms;
            shift_after = Some(epoch_ms());
        }
        let mut cmd = Command::new(claude);
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home.path())
            .env("ANTHROPIC_BASE_URL", server.url())
            .env("ANTHROPIC_API_KEY", "test")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .current_dir(&project);
        if *resume {
            cmd.arg("--continue");
        }
        cmd.args(["-p", prompt, "--allowedTools", "Bash(echo:*)", "Read"]);
        let status = cmd.status().unwrap();
        eprintln!("claude exited with {status}");
    }
    for r in server.requests() {
        eprintln!(
            "request {} {} {} bytes, tools: {}",
            r.number,
            r.path,
            r.body_bytes,
            r.body
                .get("tools")
                .and_then(Value::as_array)
                .map_or(0, Vec::len)
        );
    }
    let log = find_session_log(&home.path().join(".claude/projects"));
    let raw = std::fs::read_to_string(&log).unwrap();
    if std::env::var_os("KEEP_RAW").is_some() {
        std::fs::write(format!("{out}.raw"), &raw).unwrap();
        let wire: Vec<Value> = server.requests().into_iter().map(|r| r.body).collect();
        std::fs::write(format!("{out}.wire"), serde_json::to_string(&wire).unwrap()).unwrap();
    }
    let shifted = match shift_after {
        Some(after) => shift_timestamps(&raw, after, gap_ms),
        None => raw,
    };
    std::fs::write(out, strip_prompt_text(&shifted)).unwrap();
    eprintln!("wrote {out} from {}", log.display());
}

/// The model's side of the session: one reply per model call of the main agent.
fn script(scenario: &str, project: &Path) -> Vec<Reply> {
    let file = |name: &str| project.join(name).to_string_lossy().into_owned();
    match scenario {
        "three-calls" => vec![
            Reply::text("I'll say hello first.").with_tool_use(
                "toolu_fixture_1",
                "Bash",
                json!({"command": "echo hello from the fixture", "description": "Say hello"}),
            ),
            Reply::tool_use(
                "toolu_fixture_2",
                "Read",
                json!({"file_path": file("notes.txt")}),
            ),
            Reply::text(
                "The echo printed \"hello from the fixture\", and notes.txt lists three \
                 things to do before the release: update the changelog, tag the version, \
                 and announce it.",
            ),
        ],
        _ => {
            vec![
            Reply::text("Let me read the parser first.").with_tool_use(
                "toolu_fixture_1",
                "Read",
                json!({"file_path": file("parser.rs")}),
            ),
            Reply::tool_use("toolu_fixture_2", "Read", json!({"file_path": file("notes.txt")})),
            Reply::text("Now the build check.").with_tool_use(
                "toolu_fixture_3",
                "Bash",
                json!({"command": "echo build ok: 0 warnings", "description": "Check the build"}),
            ),
            Reply::tool_use(
                "toolu_fixture_4",
                "Bash",
                json!({"command": "echo tests ok: 12 passed", "description": "Check the tests"}),
            ),
            Reply::text(
                "parser.rs is a hand-written recursive-descent parser with one function per \
                 rule; notes.txt lists the release steps; the build and tests pass.",
            ),
            Reply::tool_use(
                "toolu_fixture_5",
                "Bash",
                json!({"command": "echo goodbye", "description": "Say goodbye"}),
            ),
            Reply::text("Goodbye!"),
        ]
        }
    }
}

/// The reply to a request: the script's next step for the main agent (its
/// requests carry the Bash tool), a short text for anything else Claude
/// Code asks (titles, topics).
fn answer(script: &[Reply], request: &RecordedRequest) -> Reply {
    let has_bash = request
        .body
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|tools| tools.iter().any(|t| t.get("name") == Some(&json!("Bash"))));
    if !has_bash {
        return Reply::text("{\"title\": \"Fixture session\"}");
    }
    let answered = request
        .body
        .get("messages")
        .and_then(Value::as_array)
        .map_or(0, |m| {
            m.iter()
                .filter(|m| m.get("role") == Some(&json!("assistant")))
                .count()
        });
    script
        .get(answered)
        .cloned()
        .unwrap_or_else(|| Reply::text("Done."))
}

fn find_session_log(root: &Path) -> PathBuf {
    let mut found = Vec::new();
    for dir in std::fs::read_dir(root).unwrap() {
        let dir = dir.unwrap().path();
        for f in std::fs::read_dir(&dir).unwrap() {
            let f = f.unwrap().path();
            if f.extension().is_some_and(|e| e == "jsonl") {
                found.push(f);
            }
        }
    }
    assert_eq!(found.len(), 1, "expected one session log, found {found:?}");
    found.remove(0)
}

fn epoch_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Moves every timestamp at or after `after` (ms since the epoch) later by
/// `by` ms, as if the person had been away that long before the next prompt.
fn shift_timestamps(raw: &str, after: u64, by: u64) -> String {
    raw.lines()
        .map(|line| {
            let mut e: Value = serde_json::from_str(line).unwrap();
            if let Some(t) = e.get("timestamp").and_then(Value::as_str) {
                let at = humantime::parse_rfc3339_weak(t).unwrap();
                let ms = at
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_millis() as u64;
                if ms >= after {
                    let moved = at + std::time::Duration::from_millis(by);
                    e["timestamp"] = json!(humantime::format_rfc3339_millis(moved).to_string());
                }
            }
            format!("{e}\n")
        })
        .collect()
}

/// Claude Code's own prompt text (system prompt, tool descriptions, prompt
/// snapshots, the environment message) replaced by filler that serializes
/// to the same number of characters, so that every size replay measures
/// stays what Claude Code sent.
fn strip_prompt_text(raw: &str) -> String {
    raw.lines()
        .map(|line| {
            let mut e: Value = serde_json::from_str(line).unwrap();
            match e.get("type").and_then(Value::as_str) {
                Some("api-request-shape") => fill(&mut e["shape"]),
                Some("api-request-blob") if e["message"]["role"] == "system" => {
                    fill(&mut e["message"]["content"]);
                }
                Some("attachment") if e["attachment"]["type"] == "prompt_snapshot" => {
                    fill(&mut e["attachment"]);
                }
                _ => {}
            }
            format!("{e}\n")
        })
        .collect()
}

/// Every string under `v` (but type tags, names and keys) as filler.
fn fill(v: &mut Value) {
    match v {
        Value::String(s) => {
            let len = serde_json::to_string(s).unwrap().chars().count() - 2;
            let filler = "Claude Code's own prompt text, not part of this fixture. ";
            *s = filler.chars().cycle().take(len).collect();
        }
        Value::Array(items) => items.iter_mut().for_each(fill),
        Value::Object(o) => {
            for (k, x) in o.iter_mut() {
                if !matches!(k.as_str(), "type" | "name" | "role" | "$schema") {
                    fill(x);
                }
            }
        }
        _ => {}
    }
}

const NOTES: &str = "Release checklist\n- update the changelog\n- tag the version\n- announce it\n";

fn parser_source() -> String {
    let mut s = String::from("//! A recursive-descent parser for arithmetic.\n\n");
    for rule in [
        "expr", "term", "factor", "unary", "primary", "number", "group", "call",
    ] {
        s.push_str(&format!(
            "/// Parses one {rule}.\nfn parse_{rule}(tokens: &mut Tokens) -> Result<Node, Error> {{\n    \
             let start = tokens.position();\n    let node = tokens.next_node(\"{rule}\")?;\n    \
             tokens.expect_end_of_{rule}(start)?;\n    Ok(node)\n}}\n\n"
        ));
    }
    s
}
