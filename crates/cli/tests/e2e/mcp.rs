//! MCP servers as tools, end to end: the real binary, the scripted model,
//! real MCP servers from npm (skipped with a line when not installed) and
//! testkit's scripted fault server. Project instructions and the
//! environment block are here too: they share the system prompt's tests.

use crate::{Harness, assert_success, stderr, stdout, tool_result};
use serde_json::{Value, json};
use std::path::Path;
use testkit::{McpBehavior, McpFaultServer, NpmTools, Reply, content_text};

/// `[mcp_servers.NAME]` for a stdio server, as TOML.
fn stdio_server(name: &str, command: &str, args: &[String], extra: &str) -> String {
    let args: Vec<String> = args.iter().map(|a| format!("{a:?}")).collect();
    format!(
        "[mcp_servers.{name}]\ncommand = {command:?}\nargs = [{}]\n{extra}\n",
        args.join(", ")
    )
}

fn everything(npm: &NpmTools) -> String {
    stdio_server(
        "everything",
        &npm.node().display().to_string(),
        &[npm.everything().display().to_string(), "stdio".into()],
        "startup_timeout_s = 60",
    )
}

fn fault_server(name: &str, script: &McpFaultServer, extra: &str) -> String {
    let (command, args) = script.stdio_command();
    stdio_server(name, &command, &args, extra)
}

/// Names of the tools a request offered.
fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|t| t["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The system prompt a request carried, as text.
fn system_text(body: &Value) -> String {
    match &body["system"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Processes still running whose command line holds `marker`.
fn processes_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let pid = entry.file_name().to_string_lossy().into_owned();
        if !pid.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        // A zombie (state Z) is dead; only its parent's bookkeeping is left.
        let state = stat.rsplit(") ").next().and_then(|s| s.chars().next());
        if state == Some('Z') {
            continue;
        }
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(marker) {
            found.push(format!("{pid}: {cmdline}"));
        }
    }
    found
}

fn assert_none_left(marker: &str) {
    // Killing a group is immediate, reaping may take a moment.
    for _ in 0..50 {
        if processes_with(marker).is_empty() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("processes outlived whittle: {:?}", processes_with(marker));
}

#[test]
fn the_model_calls_an_mcp_tool_when_allowed_and_is_refused_otherwise() {
    let Some(npm) = NpmTools::find_or_skip("e2e mcp echo") else {
        return;
    };
    let h = Harness::new();
    h.write_user_config(&everything(&npm));
    let echo = "mcp__everything__echo";
    let script = |h: &Harness| {
        h.server.push(
            Reply::tool_use("e1", echo, json!({"message": "hi from the model"})).with_tool_use(
                "env",
                "mcp__everything__get-env",
                json!({}),
            ),
        );
        h.server.push(Reply::text("done"));
    };

    script(&h);
    let out = h.run(&["--allow", "mcp__everything__*", "-p", "echo something"]);
    assert_success(&out);
    let r = h.requests();
    let names = tool_names(&r[0].body);
    assert!(names.contains(&echo.to_owned()), "{names:?}");
    let spec = r[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == echo)
        .unwrap()
        .clone();
    assert_eq!(spec["input_schema"]["type"], "object");
    assert!(
        spec["description"]
            .as_str()
            .unwrap()
            .contains("MCP server `everything`")
    );
    let result = tool_result(&r[1].body, "e1");
    assert!(result.get("is_error").is_none(), "{result}");
    assert!(
        content_text(&result).contains("hi from the model"),
        "{result}"
    );
    // The server's environment holds no key of whittle's.
    let env = content_text(&tool_result(&r[1].body, "env"));
    assert!(env.contains("\"PATH\""), "{env}");
    assert!(
        !env.contains("ANTHROPIC_API_KEY") && !env.contains(crate::KEY),
        "{env}"
    );
    h.assert_clean();

    // Without a rule, -p refuses it: nobody can be asked.
    script(&h);
    let out = h.run(&["-p", "echo something"]);
    assert_success(&out);
    let r = h.requests();
    let result = tool_result(&r[3].body, "e1");
    assert_eq!(result["is_error"], true);
    let text = content_text(&result);
    assert!(
        text.starts_with("[denied]") && text.contains("run the MCP tool mcp__everything__echo"),
        "{text}"
    );
    assert_none_left(&npm.everything().display().to_string());
}

#[test]
fn a_170k_token_mcp_result_is_persisted_whole() {
    let Some(npm) = NpmTools::find_or_skip("e2e mcp large result") else {
        return;
    };
    let h = Harness::new();
    let ws = h.ws().canonicalize().unwrap();
    // About 170,000 tokens of text: 680,000 characters.
    let mut text = String::new();
    let mut i = 0;
    while text.len() < 680_000 {
        text.push_str(&format!(
            "line {i:06}: the quick brown fox jumps over the lazy dog\n"
        ));
        i += 1;
    }
    std::fs::write(ws.join("big.txt"), &text).unwrap();
    h.write_user_config(&stdio_server(
        "fs",
        &npm.node().display().to_string(),
        &[
            npm.filesystem().display().to_string(),
            ws.display().to_string(),
        ],
        "startup_timeout_s = 60",
    ));
    h.server.push(Reply::tool_use(
        "big",
        "mcp__fs__read_text_file",
        json!({"path": ws.join("big.txt")}),
    ));
    h.server.push(Reply::text("read it"));
    let out = h.run(&["--allow", "mcp__fs__read_text_file", "-p", "read big.txt"]);
    assert_success(&out);
    let r = h.requests();
    let result = content_text(&tool_result(&r[1].body, "big"));
    assert!(
        result.starts_with("<persisted-output>"),
        "{}",
        &result[..200.min(result.len())]
    );
    assert!(
        r[1].body_bytes < 200_000,
        "the request carries a preview, not the result"
    );
    let path = result
        .lines()
        .find_map(|l| l.strip_prefix("Full output: "))
        .expect("the preview names the file");
    let saved = std::fs::read_to_string(path).unwrap();
    assert_eq!(saved, text, "nothing cut, nothing lost");
    h.assert_clean();
}

#[test]
fn fault_server_calls_are_one_line_each_and_the_session_goes_on() {
    let script = McpFaultServer::start();
    let h = Harness::new();
    h.write_user_config(&fault_server("faulty", &script, "tool_timeout_s = 1"));
    h.server.push(
        Reply::tool_use("die", "mcp__faulty__die", json!({}))
            .with_tool_use("again", "mcp__faulty__echo", json!({"after": "restart"}))
            .with_tool_use("hang", "mcp__faulty__hang", json!({}))
            .with_tool_use("junk", "mcp__faulty__garbage", json!({})),
    );
    h.server.push(Reply::text("survived"));
    let started = std::time::Instant::now();
    let out = h.run(&["--allow", "mcp__faulty__*", "-p", "try everything"]);
    assert_success(&out);
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
    assert_eq!(stdout(&out).trim(), "survived");
    let body = &h.requests()[1].body;
    let text = |id: &str| {
        let r = tool_result(body, id);
        (content_text(&r), r["is_error"] == true)
    };
    let (died, err) = text("die");
    assert!(
        err && died.contains("stopped during the call")
            && died.contains("restarted on the next call"),
        "{died}"
    );
    assert_eq!(text("again"), (r#"{"after":"restart"}"#.to_owned(), false));
    let (hung, err) = text("hang");
    assert!(err && hung.contains("did not answer within 1 s"), "{hung}");
    let (junk, err) = text("junk");
    assert!(err && junk.contains("not JSON"), "{junk}");
    for id in ["die", "hang", "junk"] {
        assert!(!text(id).0.contains('\n'), "{id}: one line");
    }
    assert_eq!(script.received_method("notifications/cancelled").len(), 1);
    h.assert_clean();
    assert_none_left(&script.process_marker());
}

/// `whittle mcp ARGS --cwd WORKSPACE`, run to the end.
fn run_mcp(h: &Harness, args: &[&str]) -> std::process::Output {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_whittle"));
    h.set_env(&mut cmd);
    cmd.arg("mcp")
        .args(args)
        .arg("--cwd")
        .arg(h.ws())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn mcp_call_prints_a_50_mb_result_whole_and_faults_as_one_line() {
    let script = McpFaultServer::start();
    let h = Harness::new();
    h.write_user_config(&format!(
        "{}{}",
        fault_server("faulty", &script, "tool_timeout_s = 1"),
        fault_server("roomy", &script, "tool_timeout_s = 120")
    ));
    let out = run_mcp(&h, &["call", "roomy", "huge"]);
    assert_success(&out);
    let printed = stdout(&out);
    assert_eq!(printed.trim_end().len(), 50 * 1024 * 1024);
    let out = run_mcp(&h, &["call", "faulty", "hang", "{}"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error: mcp server faulty did not answer within 1 s"),
        "{err}"
    );
    let out = run_mcp(&h, &["call", "faulty", "echo", "[1]"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("must be a JSON object"),
        "{}",
        stderr(&out)
    );
    let out = run_mcp(&h, &["list"]);
    assert_success(&out);
    let listing = stdout(&out);
    assert!(listing.starts_with("faulty  running  bash -c"), "{listing}");
    assert!(
        listing.contains("  mcp__faulty__hang  Behaves: hang."),
        "{listing}"
    );
    assert_none_left(&script.process_marker());
}

#[test]
fn tool_search_offers_mcp_tools_on_demand_and_keeps_the_prefix() {
    let script = McpFaultServer::empty();
    for name in ["lookup_weather", "send_email", "echo"] {
        script.add_tool(
            json!({"name": name, "description": format!("{name} tool"), "inputSchema": {"type": "object", "properties": {"x": {"type": "string"}}}}),
            McpBehavior::Echo,
        );
    }
    let h = Harness::new();
    h.write_user_config(&format!(
        "mcp_schema_share = 0.0\n{}",
        fault_server("srv", &script, "")
    ));
    h.server.push(Reply::tool_use(
        "s",
        "mcp_tool_search",
        json!({"query": "weather"}),
    ));
    h.server.push(Reply::tool_use(
        "w",
        "mcp__srv__lookup_weather",
        json!({"x": "Paris"}),
    ));
    h.server.push(Reply::text("sunny"));
    let out = h.run(&["--allow", "mcp__srv__*", "-p", "weather?"]);
    assert_success(&out);
    let r = h.requests();
    let first = tool_names(&r[0].body);
    assert!(first.contains(&"mcp_tool_search".to_owned()), "{first:?}");
    assert!(!first.iter().any(|n| n.starts_with("mcp__")), "{first:?}");
    let found = content_text(&tool_result(&r[1].body, "s"));
    assert!(found.contains("## mcp__srv__lookup_weather"), "{found}");
    let second = tool_names(&r[1].body);
    assert_eq!(
        second.last().map(String::as_str),
        Some("mcp__srv__lookup_weather")
    );
    assert_eq!(
        second[..second.len() - 1],
        first[..],
        "loaded tools go at the end"
    );
    assert_eq!(
        content_text(&tool_result(&r[2].body, "w")),
        r#"{"x":"Paris"}"#
    );
    assert_eq!(tool_names(&r[2].body), second, "stable from then on");
    h.assert_clean();
}

#[test]
fn an_untrusted_project_cannot_start_mcp_servers() {
    let script = McpFaultServer::start();
    let h = Harness::new();
    std::fs::create_dir_all(h.ws().join(".whittle")).unwrap();
    std::fs::write(
        h.ws().join(".whittle/config.toml"),
        fault_server("proj", &script, ""),
    )
    .unwrap();
    h.server.push(Reply::text("ok"));
    let out = h.run(&["-p", "hi"]);
    assert_success(&out);
    assert!(
        stderr(&out).contains("1 MCP server (programs it starts)"),
        "{}",
        stderr(&out)
    );
    assert_eq!(script.connections(), 0, "the server was started");
    assert!(
        !tool_names(&h.requests()[0].body)
            .iter()
            .any(|n| n.starts_with("mcp__"))
    );
    h.server.push(Reply::text("ok"));
    assert_success(&h.run(&["--trust-project", "-p", "hi"]));
    assert_eq!(script.connections(), 1);
    assert!(tool_names(&h.requests()[1].body).contains(&"mcp__proj__echo".to_owned()));
}

#[test]
fn a_server_that_fails_to_start_is_one_line_and_the_task_runs() {
    let h = Harness::new();
    h.write_user_config(&stdio_server("gone", "/no/such/server", &[], ""));
    h.server.push(Reply::text("fine"));
    let out = h.run(&["-p", "hi"]);
    assert_success(&out);
    let err = stderr(&out);
    assert_eq!(
        err.lines()
            .filter(|l| l.contains("mcp server gone"))
            .count(),
        1,
        "{err}"
    );
    assert!(err.contains("cannot start `/no/such/server`"), "{err}");
    assert_eq!(stdout(&out).trim(), "fine");
}

/// `git init` in `dir`; false when git is not there.
fn git_init(dir: &Path) -> bool {
    std::process::Command::new("git")
        .arg("init")
        .arg("-q")
        .arg(dir)
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn agents_md_from_the_git_root_down_survives_compact_and_shows_in_context() {
    let h = Harness::new();
    let root = h.ws().canonicalize().unwrap();
    if !git_init(&root) {
        println!("skipped agents_md e2e: git is not available");
        return;
    }
    std::fs::create_dir_all(root.join("app/src")).unwrap();
    std::fs::write(root.join("AGENTS.md"), "ROOT RULE: use tabs").unwrap();
    std::fs::write(root.join("app/CLAUDE.md"), "APP RULE: run make check").unwrap();
    std::fs::write(root.join("app/src/lib.rs"), "").unwrap();
    std::fs::write(
        h.config_home().join("whittle/AGENTS.md"),
        format!("USER RULE: be brief\n{}", "x".repeat(20_000)),
    )
    .unwrap();
    // Long enough that a summary could make the history smaller.
    h.server.push(Reply::text(format!(
        "first answer {}",
        "lorem ".repeat(2_000)
    )));
    h.server.push(Reply::text("summary of the work"));
    h.server.push(Reply::text("second answer"));
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_whittle"));
    h.set_env(&mut cmd);
    let out = cmd
        .arg("--cwd")
        .arg(root.join("app"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(b"hello\n/compact\nagain\n/context\n")?;
            child.wait_with_output()
        })
        .unwrap();
    assert_success(&out);
    let r = h.requests();
    assert_eq!(r.len(), 3, "answer, summary, answer");
    let first = system_text(&r[0].body);
    let at = |s: &str| {
        first
            .find(s)
            .unwrap_or_else(|| panic!("{s:?} not in\n{first}"))
    };
    assert!(at("ROOT RULE") < at("APP RULE") && at("APP RULE") < at("USER RULE"));
    assert!(first.contains(&format!("## {}", root.join("AGENTS.md").display())));
    assert!(first.contains(&format!("## {}", root.join("app/CLAUDE.md").display())));
    assert!(
        first.contains("[cut: this file has"),
        "the user's file is bounded"
    );
    assert!(first.contains("<environment>") && first.contains("Today's date: 20"));
    assert!(
        first.contains("Workspace top level (2 entries): CLAUDE.md, src/"),
        "{first}"
    );
    assert_eq!(
        system_text(&r[2].body),
        first,
        "the same prompt after /compact"
    );
    let screen = stdout(&out);
    assert!(screen.contains("project instructions"), "{screen}");
    assert!(screen.contains("MCP tool schemas"), "{screen}");
}

/// The scenarios of the MCP conformance suite (client mode) that concern a
/// client that lists and calls tools, by protocol revision. The rest are
/// OAuth flows and elicitation (including its `input_required` rounds),
/// which whittle does not offer.
const CONFORMANCE: [(&str, &[&str]); 2] = [
    (
        "2025-11-25",
        &[
            "initialize",
            "tools_call",
            "sse-retry",
            "json-schema-2020-12-preservation",
        ],
    ),
    (
        "2026-07-28",
        &[
            "tools_call",
            "request-metadata",
            "http-standard-headers",
            "http-custom-headers",
            "http-invalid-tool-headers",
            "json-schema-ref-no-deref",
            "json-schema-2020-12-preservation",
        ],
    ),
];

#[test]
fn the_conformance_suite_passes_for_a_tool_using_client() {
    let Some(npm) = NpmTools::find_or_skip("MCP conformance suite") else {
        return;
    };
    let out_dir = tempfile::tempdir().unwrap();
    let client = format!("{} mcp conformance", env!("CARGO_BIN_EXE_whittle"));
    let mut failed = Vec::new();
    for (version, scenarios) in CONFORMANCE {
        for scenario in scenarios {
            let out = std::process::Command::new(npm.node())
                .arg(npm.conformance())
                .args(["client", "--command", &client, "--scenario", scenario])
                .args(["--spec-version", version, "--timeout", "60000", "-o"])
                .arg(out_dir.path())
                .env_remove("ANTHROPIC_API_KEY")
                .env_remove("OPENAI_API_KEY")
                .stdin(std::process::Stdio::null())
                .output()
                .unwrap();
            let text = format!("{}{}", stdout(&out), stderr(&out));
            if !out.status.success() || !text.contains("OVERALL: PASSED") {
                failed.push(format!("{version} {scenario}:\n{text}"));
            }
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}

#[test]
fn hooks_see_mcp_calls_and_subagents_get_only_read_only_mcp_tools() {
    let script = McpFaultServer::empty();
    for (name, read_only) in [("look", true), ("change", false)] {
        script.add_tool(
            json!({"name": name, "description": name, "inputSchema": {"type": "object"},
                   "annotations": {"readOnlyHint": read_only}}),
            McpBehavior::Echo,
        );
    }
    let h = Harness::new();
    h.write_user_config(&format!(
        "{}\n[[hooks]]\nevent = \"PreToolUse\"\nmatcher = \"mcp__srv__change\"\ncommand = \"cat > hook-saw.json; echo 'not today' >&2; exit 2\"\n\n[[hooks]]\nevent = \"PostToolUse\"\nmatcher = \"mcp__srv__look\"\ncommand = \"cat >> post-saw.jsonl; echo >> post-saw.jsonl\"\n",
        fault_server("srv", &script, "")
    ));
    h.server.push(
        Reply::tool_use("c", "mcp__srv__change", json!({"v": 1}))
            .with_tool_use("l", "mcp__srv__look", json!({"v": 2}))
            .with_tool_use("t", "task", json!({"prompt": "look around"})),
    );
    // The subagent: one look, then its answer.
    h.server
        .push(Reply::tool_use("sl", "mcp__srv__look", json!({"v": 3})));
    h.server.push(Reply::text("subagent saw it"));
    h.server.push(Reply::text("all done"));
    let out = h.run(&["--allow", "mcp__srv__*", "-p", "go"]);
    assert_success(&out);
    let r = h.requests();
    assert_eq!(r.len(), 4, "parent, subagent twice, parent");
    // PreToolUse blocked the call before it reached the server.
    let blocked = content_text(&tool_result(&r[3].body, "c"));
    assert!(blocked.contains("not today"), "{blocked}");
    let saw: Value =
        serde_json::from_str(&std::fs::read_to_string(h.ws().join("hook-saw.json")).unwrap())
            .unwrap();
    assert_eq!(saw["event"]["tool_input"]["v"], 1);
    // PostToolUse saw the parent's call and the subagent's.
    let posts: Vec<Value> = std::fs::read_to_string(h.ws().join("post-saw.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let outputs: Vec<&Value> = posts.iter().map(|p| &p["event"]["tool_output"]).collect();
    assert_eq!(outputs, [r#"{"v":2}"#, r#"{"v":3}"#], "{posts:?}");
    assert!(
        script
            .received_method("tools/call")
            .iter()
            .all(|c| c["params"]["name"] != "change")
    );
    // The subagent had the read-only tool, not the other, and could run it.
    let sub_tools = tool_names(&r[1].body);
    assert!(
        sub_tools.contains(&"mcp__srv__look".to_owned()),
        "{sub_tools:?}"
    );
    assert!(
        !sub_tools.contains(&"mcp__srv__change".to_owned()),
        "{sub_tools:?}"
    );
    assert_eq!(content_text(&tool_result(&r[2].body, "sl")), r#"{"v":3}"#);
    assert_eq!(
        content_text(&tool_result(&r[3].body, "t")),
        "subagent saw it"
    );
    h.assert_clean();
}

fn interrupt(child: &std::process::Child) {
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

fn wait_until(what: &str, done: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "waited for {what}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn ctrl_c_cancels_a_running_mcp_call_and_a_second_one_leaves_no_server_behind() {
    let script = McpFaultServer::start();
    let h = Harness::new();
    h.write_user_config(&fault_server("slow", &script, "tool_timeout_s = 120"));
    let marker = script.process_marker();

    // One Ctrl-C: the call is cancelled on the wire and the turn ends.
    h.server
        .push(Reply::tool_use("h", "mcp__slow__hang", json!({})));
    let child = h
        .command(&["--allow", "mcp__slow__*", "-p", "wait"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("the call", || {
        !script.received_method("tools/call").is_empty()
    });
    interrupt(&child);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    wait_until("notifications/cancelled", || {
        !script.received_method("notifications/cancelled").is_empty()
    });
    assert_none_left(&marker);

    // Two: whittle exits at once, and the server's process group goes too.
    h.server
        .push(Reply::tool_use("h2", "mcp__slow__hang", json!({})));
    let child = h
        .command(&["--allow", "mcp__slow__*", "-p", "wait again"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("the second call", || {
        script.received_method("tools/call").len() == 2
    });
    assert!(
        !processes_with(&marker).is_empty(),
        "the server runs during the call"
    );
    interrupt(&child);
    std::thread::sleep(std::time::Duration::from_millis(100));
    interrupt(&child);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert_none_left(&marker);
}

#[test]
fn http_headers_are_expanded_from_the_environment_and_never_written() {
    const TOKEN: &str = "web-token-0123456789-secret";
    let script = McpFaultServer::start();
    let h = Harness::new();
    h.write_user_config(&format!(
        "[mcp_servers.web]\nurl = {:?}\nheaders = {{ Authorization = \"Bearer ${{WEB_TOKEN}}\" }}\n",
        script.http_url()
    ));
    h.server.push(Reply::tool_use(
        "e",
        "mcp__web__echo",
        json!({"said": "hi"}),
    ));
    h.server.push(Reply::text("done"));
    let out = h
        .command(&["--allow", "mcp__web__echo", "-p", "say hi"])
        .env("WEB_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert_success(&out);
    assert_eq!(
        content_text(&tool_result(&h.requests()[1].body, "e")),
        r#"{"said":"hi"}"#
    );
    let headers = script.http_headers();
    assert!(!headers.is_empty());
    for hdrs in &headers {
        assert_eq!(hdrs["authorization"], format!("Bearer {TOKEN}"));
    }
    assert!(!stdout(&out).contains(TOKEN) && !stderr(&out).contains(TOKEN));
    for file in crate::walk(&h.state()) {
        let text = String::from_utf8_lossy(&std::fs::read(&file).unwrap()).into_owned();
        assert!(!text.contains(TOKEN), "the token is in {}", file.display());
    }
    h.assert_clean();

    // Unset, the server is not reached and the line names the variable.
    h.server.push(Reply::text("no web"));
    let before = headers.len();
    let out = h.run(&["-p", "say hi"]);
    assert_success(&out);
    let err = stderr(&out);
    assert!(
        err.contains("mcp server web: headers.Authorization uses ${WEB_TOKEN}, which is not set"),
        "{err}"
    );
    assert_eq!(script.http_headers().len(), before);
}
