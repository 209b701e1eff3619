//! Output formats and exit codes.

use crate::{Harness, assert_success, stderr, stdout};
use serde_json::{Value, json};
use testkit::{Reply, content_text};

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
fn verbose_shows_each_model_call_as_it_returns() {
    let h = Harness::new();
    h.server
        .push(Reply::tool_use("t", "bash", json!({"command": "echo hi"})).with_usage(1200, 30));
    h.server.push(
        Reply::text("It printed hi.")
            .with_usage(300, 10)
            .with_cache(200, 1000),
    );
    let out = h.run(&["-v", "-p", "say hi"]);
    assert_success(&out);
    let err = stderr(&out);
    let calls: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("model call "))
        .collect();
    assert_eq!(
        calls,
        [
            "model call 1: 1,200 input tokens (0 read from the cache, 0 written to it), 30 output",
            "model call 2: 1,500 input tokens (1,000 read from the cache, 200 written to it), 10 output",
        ],
        "{err}"
    );
    h.assert_clean();
    // Without -v, none of it.
    let h = Harness::new();
    h.server.push(Reply::text("Hi."));
    let out = h.run(&["-p", "say hi"]);
    assert_success(&out);
    assert!(!stderr(&out).contains("model call"), "{}", stderr(&out));
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
    assert_eq!(content_text(&last), "a task\nover two lines\n");
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
