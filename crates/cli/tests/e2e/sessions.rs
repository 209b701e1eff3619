//! Sessions resumed by id.

use crate::{Harness, assert_success, stderr, stdout};
use serde_json::Value;
use testkit::{Reply, content_text};

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
    assert_eq!(content_text(&messages[0]), "remember 42");
    assert_eq!(content_text(&messages[1]), "first answer");
    assert_eq!(content_text(&messages[2]), "what number?");

    let out = h.run(&["--resume", "no-such-session", "-p", "hi"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
    assert!(stderr(&out).contains("no-such-session"));
    assert_eq!(h.requests().len(), 3);
    h.assert_clean();
}
