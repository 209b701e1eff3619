//! Permissions: the deny list, paths outside the workspace, and hooks that block tools.

use crate::{Harness, assert_success, stderr, stdout, tool_result};
use serde_json::{Value, json};
use testkit::{Reply, content_text};

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
        assert!(content_text(&block).starts_with("[denied]"), "{block}");
    }
    let err = stderr(&out);
    assert!(
        err.contains("● bash rm -f keep.txt && touch ran.txt"),
        "{err}"
    );
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
    let text = content_text(&tool_result(&h.requests()[1].body, "b"));
    assert!(text.contains("no shell on Fridays"), "{text}");
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
    let refused = content_text(&tool_result(&requests[2].body, "r1"));
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
