//! How the Claude Code fixtures in `tests/fixtures/claude-code-2.1/` and the
//! sessions in the repository's `traces/` were made: a real Claude Code, driven by a scripted model on testkit's server,
//! writes its session log, which is copied with Claude Code's own prompt
//! text replaced by filler of the same length.
//!
//! ```text
//! npm install --prefix /tmp/cc @anthropic-ai/claude-code@2.1.332   # needs the npm registry
//! cargo run -p whittle-replay --example record_claude_code -- \
//!     /tmp/cc/node_modules/.bin/claude three-calls crates/replay/tests/fixtures/claude-code-2.1/three-calls.jsonl
//! cargo run -p whittle-replay --example record_claude_code -- \
//!     /tmp/cc/node_modules/.bin/claude fix-a-test traces/claude-code/fix-a-test.jsonl
//! ```
//!
//! Scenarios: `three-calls` (text + Bash, then Read, then the answer: the
//! session of issue 16) and `two-prompts` (a longer task, then a second
//! prompt with `--continue`), the fixtures; `fix-a-test` (a failing test
//! found in a 19 KB test log, two files read, an edit, `/compact`, then a
//! follow-up edit after the summary) and `survey` (every source file of a
//! small crate read, one long answer), the sessions shipped in `traces/`.
//! Claude Code runs with a temporary HOME (nothing of this machine's
//! settings or sessions leaks in), as root with `--allowedTools` for echo,
//! cat, Read, Edit, Grep and Glob, and only the loopback server to talk to.
//! Usage comes from testkit's [`PromptCache`]: cache reads and writes at
//! the breakpoints Claude Code set, in the sizes it sent, so the recorded
//! usage is what the API's cache would have said of these requests.
//!
//! Not part of the test run: it needs Claude Code, which needs the network
//! to install.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use testkit::{PromptCache, RecordedRequest, Reply, Step, TestServer, content_text};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [claude, scenario, out] = args.as_slice() else {
        eprintln!(
            "usage: record_claude_code CLAUDE_BINARY three-calls|two-prompts|fix-a-test|survey OUT.jsonl"
        );
        std::process::exit(2);
    };
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let project = project.path().canonicalize().unwrap();
    write_project(&project);

    let server = TestServer::start_blocking();
    let cache = Arc::new(Mutex::new(PromptCache::new()));
    let started = Instant::now();
    // Idle time added to the server's clock (and later to the log) before
    // the second prompt, for the cache-expiry fixture.
    let idle_ms = Arc::new(Mutex::new(0u64));
    let prompts = Arc::new(scenario_prompts(scenario, &project));
    // Which prompt is running: its replies answer the main agent.
    let current = Arc::new(Mutex::new(0usize));
    let clock = idle_ms.clone();
    let (script, running) = (prompts.clone(), current.clone());
    server.set_fallback(move |request: &RecordedRequest| {
        let now = started.elapsed().as_millis() as u64 + *clock.lock().unwrap();
        let usage = cache.lock().unwrap().usage(&request.body, now);
        let mut reply = answer(&script[*running.lock().unwrap()], request);
        reply.usage = usage;
        Step::Reply(reply)
    });

    let gap_ms: u64 = std::env::var("IDLE_GAP_MINUTES")
        .ok()
        .and_then(|m| m.parse::<u64>().ok())
        .map_or(0, |m| m * 60_000);
    let mut shift_after: Option<u64> = None;
    for (k, prompt) in prompts.iter().enumerate() {
        *current.lock().unwrap() = k;
        if prompt.resume && gap_ms > 0 {
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
        if prompt.resume {
            cmd.arg("--continue");
        }
        cmd.args(["-p", prompt.text, "--allowedTools"])
            .args(ALLOWED_TOOLS);
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

/// What Claude Code may run without asking (`-p` refuses everything else).
const ALLOWED_TOOLS: [&str; 6] = [
    "Bash(echo:*)",
    "Bash(cat:*)",
    "Read",
    "Edit",
    "Grep",
    "Glob",
];

/// One `claude -p` run of a scenario and the model's side of it.
struct Prompt {
    /// What the person typed.
    text: &'static str,
    /// Whether it continues the session before it (`--continue`).
    resume: bool,
    /// One reply per model call of the main agent in this run.
    replies: Vec<Reply>,
}

/// The prompts of `scenario`, in order.
fn scenario_prompts(scenario: &str, project: &Path) -> Vec<Prompt> {
    let file = |name: &str| project.join(name).to_string_lossy().into_owned();
    let prompt = |text, resume, replies| Prompt {
        text,
        resume,
        replies,
    };
    match scenario {
        "three-calls" => vec![prompt(
            "Say hello with echo, then read notes.txt and tell me what it says.",
            false,
            vec![
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
        )],
        "two-prompts" => vec![
            prompt(
                "Look at parser.rs and notes.txt, check the build with echo, and summarize.",
                false,
                vec![
                    Reply::text("Let me read the parser first.").with_tool_use(
                        "toolu_fixture_1",
                        "Read",
                        json!({"file_path": file("parser.rs")}),
                    ),
                    Reply::tool_use(
                        "toolu_fixture_2",
                        "Read",
                        json!({"file_path": file("notes.txt")}),
                    ),
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
                ],
            ),
            prompt(
                "Thanks. Now say goodbye with echo.",
                true,
                vec![
                    Reply::tool_use(
                        "toolu_fixture_5",
                        "Bash",
                        json!({"command": "echo goodbye", "description": "Say goodbye"}),
                    ),
                    Reply::text("Goodbye!"),
                ],
            ),
        ],
        "fix-a-test" => fix_a_test(&file),
        "survey" => survey(&file),
        other => panic!("unknown scenario {other}"),
    }
}

/// A failing test found in a long log, fixed with an edit, the session
/// compacted with `/compact`, then a follow-up after the summary.
fn fix_a_test(file: &dyn Fn(&str) -> String) -> Vec<Prompt> {
    vec![
        Prompt {
            text: "The parser tests fail. Read test-output.log, find the cause and fix it.",
            resume: false,
            replies: vec![
                Reply::text("I'll start with the test log.").with_tool_use(
                    "toolu_fix_1",
                    "Bash",
                    json!({"command": "cat test-output.log", "description": "Show the test log"}),
                ),
                Reply::text(
                    "One test fails: parser::tests::group_needs_its_closing_paren. \
                     Let me find parse_group.",
                )
                .with_tool_use(
                    "toolu_fix_2",
                    "Grep",
                    json!({"pattern": "fn parse_", "path": file("src"), "output_mode": "content", "-n": true}),
                ),
                Reply::tool_use(
                    "toolu_fix_3",
                    "Read",
                    json!({"file_path": file("src/parser.rs")}),
                ),
                Reply::tool_use(
                    "toolu_fix_4",
                    "Read",
                    json!({"file_path": file("src/lexer.rs")}),
                ),
                Reply::text("parse_group never checks for the closing parenthesis.").with_tool_use(
                    "toolu_fix_5",
                    "Edit",
                    json!({
                        "file_path": file("src/parser.rs"),
                        "old_string": BUGGY_GROUP,
                        "new_string": FIXED_GROUP,
                    }),
                ),
                Reply::tool_use(
                    "toolu_fix_6",
                    "Bash",
                    json!({"command": "echo test result: ok. 312 passed, 0 failed", "description": "Run the tests"}),
                ),
                Reply::text(
                    "Fixed: `parse_group` in src/parser.rs consumed the opening parenthesis but \
                     never checked for the closing one, so `(1 + 2` parsed as `1 + 2`. It now \
                     expects `Token::RParen` and reports `Error::Unclosed` with the opening \
                     position; all 312 tests pass.",
                ),
            ],
        },
        Prompt {
            text: "/compact",
            resume: true,
            replies: Vec::new(),
        },
        Prompt {
            text: "Now add a line about the fix to CHANGELOG.md.",
            resume: true,
            replies: vec![
                Reply::tool_use(
                    "toolu_fix_7",
                    "Read",
                    json!({"file_path": file("CHANGELOG.md")}),
                ),
                Reply::tool_use(
                    "toolu_fix_8",
                    "Edit",
                    json!({
                        "file_path": file("CHANGELOG.md"),
                        "old_string": "## Unreleased\n",
                        "new_string": "## Unreleased\n\n- A group without its closing parenthesis is an error (`Error::Unclosed`), not a silent success.\n",
                    }),
                ),
                Reply::text("Added under \"Unreleased\" in CHANGELOG.md."),
            ],
        },
    ]
}

/// A question about the whole project: every source file read, one long answer.
fn survey(file: &dyn Fn(&str) -> String) -> Vec<Prompt> {
    let mut replies = vec![Reply::text("Let me list the sources.").with_tool_use(
        "toolu_survey_1",
        "Glob",
        json!({"pattern": "src/**/*.rs"}),
    )];
    for (k, name) in SOURCES.iter().enumerate() {
        replies.push(Reply::tool_use(
            format!("toolu_survey_{}", k + 2),
            "Read",
            json!({"file_path": file(&format!("src/{name}.rs"))}),
        ));
    }
    replies.push(Reply::text(
        "The crate is a small calculator in layers. `lexer.rs` turns text into tokens with \
         positions; `parser.rs` is a recursive-descent parser, one function per grammar rule, \
         producing `Node`s; `eval.rs` walks the tree with an environment of variables; \
         `format.rs` prints trees back as text; `error.rs` has one enum with a position per \
         variant; `repl.rs` reads lines and prints results. Each layer only calls the one \
         below it, and every function returns `Result<_, Error>`.",
    ));
    vec![Prompt {
        text: "Read the sources under src/ and explain how the project is put together.",
        resume: false,
        replies,
    }]
}

/// The reply to a request: the summary when Claude Code compacts, the
/// prompt's next step for the main agent (its requests carry the Bash
/// tool), a short text for anything else Claude Code asks (titles, topics).
fn answer(prompt: &Prompt, request: &RecordedRequest) -> Reply {
    let last = request.last_message_text();
    if last.contains("summary of the conversation") {
        return Reply::text(COMPACT_SUMMARY);
    }
    let has_bash = request
        .body
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|tools| tools.iter().any(|t| t.get("name") == Some(&json!("Bash"))));
    if !has_bash {
        return Reply::text("{\"title\": \"Fixture session\"}");
    }
    // Model calls since the person's prompt of this run.
    let messages = request
        .body
        .get("messages")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let start = messages
        .iter()
        .rposition(|m| {
            m.get("role") == Some(&json!("user")) && content_text(m).contains(prompt.text)
        })
        .unwrap_or(0);
    let answered = messages[start..]
        .iter()
        .filter(|m| m.get("role") == Some(&json!("assistant")))
        .count();
    prompt
        .replies
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
/// snapshots, the listings of its skills and agents, the environment
/// message) replaced by filler that serializes
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
                Some("attachment")
                    if matches!(
                        e["attachment"]["type"].as_str(),
                        Some("prompt_snapshot" | "skill_listing" | "agent_listing_delta")
                    ) =>
                {
                    fill(&mut e["attachment"]);
                    fill(&mut e["rendered"]);
                }
                // The reminders Claude Code words around what it attaches.
                Some("attachment") => fill(&mut e["rendered"]),
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

/// The files Claude Code works on: the small ones of the first two
/// scenarios, and a calculator crate with a test log for the longer ones.
fn write_project(project: &Path) {
    std::fs::write(project.join("notes.txt"), NOTES).unwrap();
    std::fs::write(project.join("parser.rs"), parser_source()).unwrap();
    std::fs::create_dir_all(project.join("src")).unwrap();
    for name in SOURCES {
        std::fs::write(project.join(format!("src/{name}.rs")), source_file(name)).unwrap();
    }
    std::fs::write(project.join("test-output.log"), test_log()).unwrap();
    std::fs::write(
        project.join("CHANGELOG.md"),
        "# Changelog\n\n## Unreleased\n\n## 0.3.0\n\n- Variables and `let`.\n- Calls of built-in functions.\n",
    )
    .unwrap();
}

/// The calculator's modules.
const SOURCES: [&str; 6] = ["lexer", "parser", "eval", "format", "error", "repl"];

/// The bug `fix-a-test` fixes: a group that never checks its `)`.
const BUGGY_GROUP: &str =
    "    let inner = parse_expr(tokens)?;\n    Ok(Node::Group(Box::new(inner)))\n";
const FIXED_GROUP: &str = "    let inner = parse_expr(tokens)?;\n    tokens.expect(Token::RParen).map_err(|_| Error::Unclosed(start))?;\n    Ok(Node::Group(Box::new(inner)))\n";

/// What the scripted model answers when Claude Code asks for a summary.
const COMPACT_SUMMARY: &str = "<summary>\n1. Primary request: the parser tests failed; find the cause in test-output.log and fix it.\n2. Key files: src/parser.rs (parse_group), src/lexer.rs (Token::RParen), test-output.log.\n3. Done: parse_group now expects Token::RParen and returns Error::Unclosed(start); `echo test result` reported 312 passed.\n4. Pending: nothing.\n</summary>";

/// A module of the calculator: a doc line, then functions of one shape
/// with the module's names, about 7 KB.
fn source_file(module: &str) -> String {
    let mut s = format!(
        "//! The calculator's {module}.\n\nuse crate::error::Error;\nuse crate::lexer::{{Token, Tokens}};\n\n"
    );
    if module == "parser" {
        s.push_str(
            "/// Parses a parenthesized group.\nfn parse_group(tokens: &mut Tokens) -> Result<Node, Error> {\n    \
             let start = tokens.position();\n    tokens.expect(Token::LParen)?;\n",
        );
        s.push_str(BUGGY_GROUP);
        s.push_str("}\n\n");
    }
    let rules = [
        "expr",
        "term",
        "factor",
        "unary",
        "primary",
        "number",
        "call",
        "args",
        "ident",
        "assign",
        "block",
        "statement",
        "comparison",
        "power",
        "modulo",
        "list",
    ];
    for (k, rule) in rules.iter().enumerate() {
        s.push_str(&format!(
            "/// Handles one {rule} in the {module} (rule {k}).\n\
             pub fn {module}_{rule}(tokens: &mut Tokens) -> Result<Node, Error> {{\n    \
             let start = tokens.position();\n    \
             let first = tokens.next_node(\"{rule}\")?;\n    \
             if tokens.peek() == Some(&Token::Comma) {{\n        \
             tokens.advance();\n        \
             let rest = {module}_{rule}(tokens)?;\n        \
             return Ok(Node::pair(first, rest, start));\n    \
             }}\n    \
             tokens.expect_end_of(\"{rule}\", start)?;\n    \
             Ok(first)\n}}\n\n"
        ));
    }
    s
}

/// `cargo test` output with one failing test among 312, about 25 KB.
fn test_log() -> String {
    let mut s = String::from(
        "   Compiling calc v0.3.0 (/work/calc)\n    Finished `test` profile [unoptimized + debuginfo] target(s) in 2.41s\n     \
         Running unittests src/lib.rs (target/debug/deps/calc-5f1c2e9a8b7d6c43)\n\nrunning 312 tests\n",
    );
    for k in 0..312 {
        let module = SOURCES[k % SOURCES.len()];
        if k == 201 {
            s.push_str("test parser::tests::group_needs_its_closing_paren ... FAILED\n");
        } else {
            s.push_str(&format!(
                "test {module}::tests::case_{k:03}_round_trips_its_input ... ok\n"
            ));
        }
    }
    s.push_str(
        "\nfailures:\n\n---- parser::tests::group_needs_its_closing_paren stdout ----\n\n\
         thread 'parser::tests::group_needs_its_closing_paren' panicked at src/parser.rs:212:9:\n\
         assertion `left == right` failed: `(1 + 2` must not parse\n  left: Ok(Group(Add(Number(1), Number(2))))\n right: Err(Unclosed(0))\n\
         note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n\n\
         failures:\n    parser::tests::group_needs_its_closing_paren\n\n\
         test result: FAILED. 311 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.08s\n\n\
         error: test failed, to rerun pass `--lib`\n",
    );
    s
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
