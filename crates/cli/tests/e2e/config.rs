//! Setup: API keys, config files and the flags that override them.

use crate::{Harness, assert_success, stderr};
use serde_json::json;
use testkit::{Reply, content_text};

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
    assert_eq!(content_text(&requests[1].body["messages"][0]), "hello");
    let first = content_text(&requests[2].body["messages"][0]);
    assert!(first.starts_with("[Compacted]"), "{first}");

    let out = h.run(&["--thinking", "500", "-p", "hi"]);
    assert_eq!(out.status.code(), Some(2), "a usage error");
    assert!(stderr(&out).contains("at least 1024"), "{}", stderr(&out));
    h.assert_clean();
}
