//! `whittle replay` over our own sessions.

use crate::{Harness, assert_success, build_history, stderr, stdout};
use serde_json::{Value, json};
use std::process::{Command, Stdio};
use testkit::Reply;

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
