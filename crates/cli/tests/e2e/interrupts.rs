//! Crash safety and Ctrl-C.

use crate::{Harness, assert_success, stderr, stdout, tool_result, walk};
use serde_json::json;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use testkit::{Reply, content_text};

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
    assert!(content_text(&block).contains("cancelled"), "{block}");
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
    assert!(content_text(&tool_result(body, "wait")).contains("cancelled"));
    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(content_text(&last), "second");
    h.assert_clean();
}

#[test]
fn ctrl_c_during_compact_in_the_repl_keeps_the_history() {
    let h = Harness::new();
    // Long enough that a summary could make the history smaller: a
    // shorter one is not summarized at all.
    h.server.push(Reply::text(format!(
        "Hello there. {}",
        "Lorem ipsum. ".repeat(400)
    )));
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
    assert_eq!(content_text(&messages[0]), "hello");
    assert_eq!(content_text(&messages[2]), "after");
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
    assert!(content_text(&block).contains("interrupted"), "{block}");
    let last = requests[1].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert!(content_text(&last).contains("what happened?"));
    h.assert_clean();
}
