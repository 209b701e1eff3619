//! Compaction on request: the `compact` tool and `/compact`, and a summary that fails.

use crate::{Harness, assert_success, stderr, stdout, walk};
use serde_json::{Value, json};
use std::path::PathBuf;
use testkit::{Reply, Step, content_text};

#[test]
fn the_compact_tool_runs_after_the_rest_of_its_batch() {
    let h = Harness::new();
    h.server.push(
        Reply::tool_use(
            "w",
            "write_file",
            json!({"path": "stage1.txt", "content": "stage 1 done\n".repeat(100)}),
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
        "stage 1 done\n".repeat(100)
    );
    let requests = h.requests();
    assert_eq!(requests.len(), 3);
    let first = content_text(&requests[2].body["messages"][0]);
    assert!(
        first.starts_with("[Compacted]\n\nCurrent user request:\ndo stage 1, then compact"),
        "{first}"
    );
    assert!(first.contains("stage 2 remains"));
    assert!(stderr(&out).contains("[compact]"), "{}", stderr(&out));
    h.assert_clean();
}

#[test]
fn a_summary_in_the_writing_reports_its_progress() {
    let h = Harness::new();
    h.server.push(
        Reply::tool_use(
            "w",
            "write_file",
            json!({"path": "notes.txt", "content": "a line of notes\n".repeat(200)}),
        )
        .with_tool_use("c", "compact", json!({})),
    );
    let summary = "Notes are written to notes.txt. ".repeat(20);
    h.server.push(Reply::text(summary.clone()));
    h.server.push(Reply::text("Done."));
    let out = h.run(&[
        "--preset",
        "teaching",
        "--permission-mode",
        "accept-edits",
        "--output-format",
        "stream-json",
        "-p",
        "write notes, then compact",
    ]);
    assert_success(&out);
    let events: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let at = |kind: &str| events.iter().position(|e| e["type"] == kind);
    let progress: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "summarizing")
        .collect();
    assert!(progress.len() >= 2, "a start and some growth: {events:?}");
    assert_eq!(progress[0]["written_chars"], 0);
    assert!(progress[0]["input_chars"].as_u64().unwrap() > 3_000);
    assert!(progress[0]["max_tokens"].as_u64().unwrap() > 0);
    let last = progress.last().unwrap()["written_chars"].as_u64().unwrap();
    assert!(
        last >= 200 && last <= summary.chars().count() as u64,
        "{last}"
    );
    let compaction = events
        .iter()
        .position(|e| e["type"] == "compaction" && e["report"]["outcome"] == "applied")
        .unwrap();
    assert!(at("summarizing").unwrap() < compaction);
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
    let first = content_text(&messages[0]);
    assert!(
        first.starts_with("[Compacted]\n\nCurrent user request:\nhello"),
        "{first}"
    );
    assert_eq!(content_text(messages.last().unwrap()), "what \nnext?");
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
    assert_eq!(content_text(&requests[2].body["messages"][0]), "hello");
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
