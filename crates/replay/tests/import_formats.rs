//! The importers on small hand-written files, one behavior each: OpenAI
//! message lists, Claude Code edge cases, repairs, detection from content,
//! and walking a folder tree.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};
use std::fs;
use std::path::{Path, PathBuf};
use tempfile::TempDir;
use whittle_protocol::{Content, Message, Role, ToolResultContent, validate};
use whittle_replay::{
    CacheTtl, Conversation, Format, INTERRUPTED, ImportError, MISSING_OPENING, Policy,
    RAW_ARGUMENTS_KEY, ReplayConfig, StandInSummarizer, import_path, import_tree, replay_paths,
};

fn write(dir: &TempDir, name: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
    let path = dir.path().join(name);
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).unwrap();
    }
    fs::write(&path, bytes).unwrap();
    path
}

fn jsonl(events: &[Value]) -> String {
    events.iter().map(|e| format!("{e}\n")).collect()
}

fn one(path: &Path) -> Conversation {
    let mut all = import_path(path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(all.len(), 1);
    let c = all.remove(0);
    validate(&c.messages).unwrap();
    c
}

fn blocks(m: &Message) -> Vec<Value> {
    m.blocks()
        .iter()
        .map(|b| serde_json::to_value(b).unwrap())
        .collect()
}

fn user(uuid: &str, content: Value) -> Value {
    json!({"type": "user", "uuid": uuid, "sessionId": "s", "isSidechain": false,
           "message": {"role": "user", "content": content}})
}

fn assistant(uuid: &str, message_id: &str, content: Value) -> Value {
    json!({"type": "assistant", "uuid": uuid, "sessionId": "s", "isSidechain": false,
           "message": {"id": message_id, "role": "assistant", "model": "m", "content": content,
                       "usage": {"input_tokens": 1}}})
}

fn call(id: &str) -> Value {
    json!({"type": "tool_use", "id": id, "name": "Bash", "input": {"command": "ls"}})
}

fn result(id: &str, content: Value) -> Value {
    json!({"type": "tool_result", "tool_use_id": id, "content": content})
}

fn openai_messages() -> Value {
    json!([
        {"role": "system", "content": "sys A"},
        {"role": "developer", "content": [{"type": "text", "text": "dev B"}]},
        {"role": "user", "name": "someone", "content": [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": "https://example.com/y.png", "detail": "high"}},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        ]},
        {"role": "assistant", "content": "calling", "reasoning_content": "hidden", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{\"path\": \"a\"}"}},
            {"id": "c2", "type": "function", "function": {"name": "bad", "arguments": "{not json"}},
            {"id": "c4", "type": "function", "function": {"name": "list", "arguments": "[1, 2]"}},
        ]},
        {"role": "tool", "tool_call_id": "c2", "content": "two"},
        {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "one"}]},
        {"role": "tool", "tool_call_id": "c4", "content": "four"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "c3", "type": "function", "function": {"name": "noargs", "arguments": ""}},
        ]},
        {"role": "tool", "tool_call_id": "c3", "content": "three"},
        {"role": "system", "content": "late system note"},
        {"role": "assistant", "content": "done"},
    ])
}

#[test]
fn openai_lists_map_to_the_messages_format() {
    let dir = TempDir::new().unwrap();
    let path = write(&dir, "chat.json", openai_messages().to_string());
    let c = one(&path);
    assert_eq!(c.format, Format::OpenAiMessages);
    assert_eq!(c.id, "chat");
    assert_eq!(c.repairs, 0);
    assert_eq!(c.system.as_deref(), Some("sys A\n\ndev B"));
    let roles: Vec<Role> = c.messages.iter().map(Message::role).collect();
    use Role::{Assistant as A, User as U};
    assert_eq!(roles, [U, A, U, U, U, A, U, U, A]);
    assert_eq!(
        blocks(&c.messages[0]),
        [
            json!({"type": "text", "text": "look"}),
            json!({"type": "image", "source": {"type": "url", "url": "https://example.com/y.png"}}),
            json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}),
        ]
    );
    assert_eq!(
        blocks(&c.messages[1]),
        [
            json!({"type": "text", "text": "calling"}),
            json!({"type": "tool_use", "id": "c1", "name": "read", "input": {"path": "a"}}),
            json!({"type": "tool_use", "id": "c2", "name": "bad", "input": {RAW_ARGUMENTS_KEY: "{not json"}}),
            json!({"type": "tool_use", "id": "c4", "name": "list", "input": {RAW_ARGUMENTS_KEY: "[1, 2]"}}),
        ]
    );
    assert_eq!(
        blocks(&c.messages[3]),
        [
            json!({"type": "tool_result", "tool_use_id": "c1", "content": [{"type": "text", "text": "one"}]})
        ]
    );
    assert_eq!(
        blocks(&c.messages[5]),
        [json!({"type": "tool_use", "id": "c3", "name": "noargs", "input": {}})]
    );
    assert_eq!(
        c.messages[7].content(),
        &Content::Text("late system note".into())
    );
    assert_eq!(c.messages[8].content(), &Content::Text("done".into()));
    assert!(
        !serde_json::to_string(&c.messages)
            .unwrap()
            .contains("hidden")
    );

    // The same list inside an object, with other keys, imports the same.
    let wrapped = json!({"model": "gpt", "messages": openai_messages()});
    let path = write(&dir, "wrapped.json", wrapped.to_string());
    assert_eq!(one(&path).messages, c.messages);
}

#[test]
fn openai_faults_are_repaired_and_counted() {
    let dir = TempDir::new().unwrap();
    let list = json!([
        {"role": "assistant", "content": "hello first"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "tool_calls": [
            {"id": "x", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "x", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"type": "function", "function": {"name": "g", "arguments": "{}"}},
        ]},
        {"role": "tool", "tool_call_id": "x", "content": "r1"},
        {"role": "tool", "tool_call_id": "nope", "content": "stray output"},
        {"role": "user", "content": ""},
        {"role": "assistant", "tool_calls": [
            {"id": "y", "type": "function", "function": {"name": "f", "arguments": "{}"}},
        ]},
    ]);
    let c = one(&write(&dir, "faulty.json", list.to_string()));
    // opening message, duplicate id, made-up id, orphan result, empty message,
    // and three unanswered calls (x-dup1, call-2-2, y).
    assert_eq!(c.repairs, 8, "{:#?}", c.messages);
    assert_eq!(c.messages[0].text(), MISSING_OPENING);
    let all = serde_json::to_string(&c.messages).unwrap();
    for kept in [
        "hello first",
        "r1",
        "stray output",
        "nope",
        "x-dup1",
        "call-2-2",
    ] {
        assert!(all.contains(kept), "{kept} is missing: {all}");
    }
    let interrupted: Vec<&str> = c
        .messages
        .iter()
        .flat_map(Message::tool_results)
        .filter(|r| r.content_str() == Some(INTERRUPTED))
        .map(|r| {
            assert_eq!(r.is_error, Some(true));
            r.tool_use_id.as_str()
        })
        .collect();
    assert_eq!(interrupted, ["x-dup1", "call-2-2", "y"]);
}

#[test]
fn claude_code_merges_the_parts_of_one_response() {
    let dir = TempDir::new().unwrap();
    let lines = jsonl(&[
        json!({"type": "file-history-snapshot", "messageId": "u1", "snapshot": {}}),
        user("u1", json!("run two things")),
        json!({"type": "progress", "uuid": "p1", "data": {}}),
        assistant(
            "a1",
            "msg_1",
            json!([{"type": "thinking", "thinking": "hmm", "signature": "sig=="}]),
        ),
        assistant("a2", "msg_1", json!([call("t1")])),
        {
            let mut r = user("u2", json!([result("t1", json!("out 1"))]));
            r["toolUseResult"] = json!({"stdout": "out 1 (sidecar)"});
            r
        },
        assistant("a3", "msg_1", json!([call("t2")])),
        user(
            "u3",
            json!([{"type": "tool_result", "tool_use_id": "t2", "is_error": true,
                            "content": [{"type": "text", "text": "boom"}]}]),
        ),
        json!({"type": "system", "subtype": "stop_hook_summary", "uuid": "s1"}),
        assistant("a4", "msg_2", json!([{"type": "text", "text": "both ran"}])),
        // The same event written twice is read once.
        assistant("a4", "msg_2", json!([{"type": "text", "text": "both ran"}])),
    ]);
    let c = one(&write(&dir, "session.jsonl", lines));
    assert_eq!(c.format, Format::ClaudeCode);
    assert_eq!(c.repairs, 0);
    assert_eq!(c.messages.len(), 5);
    assert_eq!(
        blocks(&c.messages[1]),
        [
            json!({"type": "thinking", "thinking": "hmm", "signature": "sig=="}),
            call("t1"),
            call("t2"),
        ]
    );
    assert_eq!(blocks(&c.messages[2]), [result("t1", json!("out 1"))]);
    let boom = c.messages[3].tool_results().next().unwrap();
    assert_eq!(boom.is_error, Some(true));
    assert!(matches!(boom.content, Some(ToolResultContent::Blocks(_))));
    let all = serde_json::to_string(&c.messages).unwrap();
    assert!(!all.contains("sidecar") && !all.contains("usage"));
}

#[test]
fn claude_code_boundaries_interruptions_and_a_cut_final_line() {
    let dir = TempDir::new().unwrap();
    let mut lines = jsonl(&[
        user("u1", json!("task")),
        assistant("a1", "msg_1", json!([call("t1")])),
        user(
            "u2",
            json!([{"type": "text", "text": "[Request interrupted by user]"}]),
        ),
        user("u3", json!([result("t9", json!("late output"))])),
        json!({"type": "system", "subtype": "compact_boundary", "uuid": "b1",
               "compactMetadata": {"trigger": "auto", "preTokens": 1234}}),
        {
            let mut s = user("u4", json!("This session is being continued..."));
            s["isCompactSummary"] = json!(true);
            s
        },
        assistant(
            "a2",
            "msg_2",
            json!([{"type": "text", "text": "continuing"}]),
        ),
        json!({"type": "system", "subtype": "compact_boundary", "uuid": "b2",
               "compactMetadata": {"trigger": "manual"}}),
    ]);
    lines.push_str(r#"{"type": "user", "uuid": "u5", "message": {"role": "us"#);
    let c = one(&write(&dir, "crashed.jsonl", lines));
    // The unanswered t1, the orphan t9 made text, and the cut final line.
    assert_eq!(c.repairs, 3, "{:#?}", c.messages);
    let results: Vec<_> = c.messages.iter().flat_map(Message::tool_results).collect();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].tool_use_id, "t1");
    assert_eq!(results[0].content_str(), Some(INTERRUPTED));
    assert!(c.messages.iter().any(|m| m.text().contains("late output")));
    let b = &c.compaction_boundaries;
    assert_eq!(b.len(), 2);
    assert_eq!(
        c.messages[b[0].index].text(),
        "This session is being continued..."
    );
    assert_eq!(
        (b[0].trigger.as_deref(), b[0].pre_tokens),
        (Some("auto"), Some(1234))
    );
    assert_eq!(b[1].index, c.messages.len());
    assert_eq!(
        (b[1].trigger.as_deref(), b[1].pre_tokens),
        (Some("manual"), None)
    );
}

/// A `/compact` the person typed is their command, not Claude Code's
/// policy: replayed under a policy with a pipeline, the policy compacts
/// there too (as whittle's `/compact` does), and only there; a compaction
/// Claude Code decided on its own is left to each policy's own rules.
#[test]
fn a_compaction_the_person_asked_for_is_made_by_every_policy_with_a_pipeline() {
    let exchange = |n: usize| {
        let id = format!("t{n}");
        [
            user(
                &format!("u{n}"),
                json!(format!("step {n}: look at src/mod_{n}.rs")),
            ),
            assistant(&format!("a{n}"), &format!("msg_{n}a"), json!([call(&id)])),
            user(
                &format!("r{n}"),
                json!([result(&id, json!(format!("src/mod_{n}.rs\n").repeat(300)))]),
            ),
            assistant(
                &format!("b{n}"),
                &format!("msg_{n}b"),
                json!([{"type": "text", "text": format!("done {n}")}]),
            ),
        ]
    };
    // The third: a hostile log whose boundary falls between a tool call and
    // its result; the compaction waits for the result.
    for (trigger, between) in [("manual", false), ("auto", false), ("manual", true)] {
        let dir = TempDir::new().unwrap();
        let mut events: Vec<Value> = (0..4).flat_map(exchange).collect();
        let boundary = json!({"type": "system", "subtype": "compact_boundary", "uuid": "boundary",
                              "compactMetadata": {"trigger": trigger, "preTokens": 2000}});
        if between {
            events.insert(14, boundary);
        } else {
            events.push(boundary);
        }
        let mut summary = user("s1", json!("This session is being continued..."));
        summary["isCompactSummary"] = json!(true);
        events.push(summary);
        events.extend((4..7).flat_map(exchange));
        let path = write(&dir, "compacted.jsonl", jsonl(&events));
        let replayed = replay_paths(
            &[path],
            &[Policy::None, Policy::Default, Policy::Teaching],
            // Nothing here comes near the window: only the person's command compacts.
            &ReplayConfig::for_window(1_000_000),
            &mut || Box::new(StandInSummarizer::default()),
            "stand-in",
        );
        let [c] = replayed.conversations.as_slice() else {
            panic!("one conversation: {:?}", replayed.errors);
        };
        for report in &c.reports {
            let compactions: Vec<(u64, &str)> = report
                .applied_steps
                .iter()
                .map(|s| (s.call, s.step.as_str()))
                .collect();
            // Two calls an exchange: four exchanges came before the boundary
            // (or three and a half when it cut the fourth's call from its result).
            let expected: &[(u64, &str)] = match (trigger, report.policy.as_str()) {
                ("manual", "default" | "teaching") if between => &[(7, "compact_history")],
                ("manual", "default" | "teaching") => &[(8, "compact_history")],
                _ => &[],
            };
            assert_eq!(
                compactions, expected,
                "{trigger} {between}, {}",
                report.policy
            );
            assert_eq!(report.summarize_calls, expected.len() as u64);
            assert_eq!(report.unrecoverable_chars, 0, "{}", report.policy);
            // `none` restarts where the log says, cut call or not: the
            // recording's own requests are what it replays.
            if !(between && report.policy == "none") {
                assert_eq!(report.invalid_requests, 0, "{}", report.policy);
            }
        }
    }
}

/// Claude Code summarizes with a subagent of its own (`acompact-…`): that
/// call is the recording agent's compaction, so it is its session's bill.
/// `none` makes it, folded into the session's row; a policy with a pipeline
/// makes its own summary in the session instead, and never this call. An
/// ordinary subagent stays a conversation of its own.
#[test]
fn the_recording_agents_compaction_call_belongs_to_its_session() {
    let dir = TempDir::new().unwrap();
    let mut session: Vec<Value> = (0..3)
        .flat_map(|n| {
            [
                user(&format!("u{n}"), json!(format!("step {n}"))),
                assistant(
                    &format!("a{n}"),
                    &format!("msg_{n}"),
                    json!([{"type": "text", "text": format!("done {n}. ").repeat(400)}]),
                ),
            ]
        })
        .collect();
    session.push(
        json!({"type": "system", "subtype": "compact_boundary", "uuid": "boundary",
                        "compactMetadata": {"trigger": "manual", "preTokens": 2000}}),
    );
    let mut summary = user("s1", json!("This session is being continued..."));
    summary["isCompactSummary"] = json!(true);
    session.push(summary);
    session.push(assistant(
        "a9",
        "msg_9",
        json!([{"type": "text", "text": "on"}]),
    ));
    write(&dir, "s.jsonl", jsonl(&session));
    let subagent = |agent: &str, ask: &str| {
        let mut events = [
            user(&format!("{agent}-u"), json!(ask)),
            assistant(
                &format!("{agent}-a"),
                &format!("msg_{agent}"),
                json!([{"type": "text", "text": "a summary"}]),
            ),
        ];
        for e in &mut events {
            e["isSidechain"] = json!(true);
            e["agentId"] = json!(agent);
        }
        jsonl(&events)
    };
    let compaction = write(
        &dir,
        "s/subagents/agent-acompact-1f.jsonl",
        subagent("acompact-1f", "Your task is to create a detailed summary"),
    );
    let helper = write(
        &dir,
        "s/subagents/agent-b2.jsonl",
        subagent("b2", "Find the tests"),
    );
    assert_eq!(one(&compaction).summarizes.as_deref(), Some("s"));
    assert_eq!(one(&helper).summarizes, None);
    assert_eq!(one(&dir.path().join("s.jsonl")).summarizes, None);

    let replay = |path: &Path| {
        replay_paths(
            &[path.to_path_buf()],
            &[Policy::None, Policy::Default],
            &ReplayConfig::for_window(1_000_000),
            &mut || Box::new(StandInSummarizer::default()),
            "stand-in",
        )
    };
    let summary = replay(dir.path());
    assert!(summary.errors.is_empty(), "{:?}", summary.errors);
    let ids: Vec<&str> = summary
        .conversations
        .iter()
        .map(|c| c.id.as_str())
        .collect();
    assert_eq!(ids, ["s", "s/agent-b2"]);
    let s = &summary.conversations[0];
    let [none, default] = s.reports.as_slice() else {
        panic!("two policies");
    };
    // Four calls of the session; under `none`, Claude Code's summary call too.
    assert_eq!((none.calls, default.calls), (5, 4));
    assert_eq!(default.summarize_calls, 1, "the policy's own summary");
    assert_eq!(s.recorded.as_ref().map(|r| r.calls), Some(5));
    let cost = |policy: usize| summary.totals[policy].cost_usd;
    let rows = |policy: usize| -> f64 {
        summary
            .conversations
            .iter()
            .map(|c| c.reports[policy].cost_usd)
            .sum()
    };
    assert!((cost(0) - rows(0)).abs() < 1e-9 && (cost(1) - rows(1)).abs() < 1e-9);

    // Replayed without its session, the call stays a row of its own, made
    // by `none` alone.
    let alone = replay(&compaction);
    let [row] = alone.conversations.as_slice() else {
        panic!("one conversation: {:?}", alone.errors);
    };
    assert_eq!(row.id, "s/agent-acompact-1f");
    let calls: Vec<u64> = row.reports.iter().map(|r| r.calls).collect();
    assert_eq!(calls, [1, 0]);

    // A session that logged no usage has no bill to set against its replay,
    // its summary call's or not.
    for e in &mut session {
        if let Some(message) = e.get_mut("message").and_then(Value::as_object_mut) {
            message.remove("usage");
        }
    }
    write(&dir, "s.jsonl", jsonl(&session));
    let unbilled = replay(dir.path());
    assert_eq!(unbilled.conversations[0].id, "s");
    assert_eq!(unbilled.conversations[0].recorded, None);
    assert_eq!(unbilled.conversations[0].reports[0].calls, 5);
}

#[test]
fn sidechains_inside_a_session_file_are_their_own_conversations() {
    let dir = TempDir::new().unwrap();
    let side = |mut e: Value, agent: Option<&str>, parent: Option<&str>| {
        e["isSidechain"] = json!(true);
        if let Some(agent) = agent {
            e["agentId"] = json!(agent);
        }
        e["parentUuid"] = json!(parent);
        e
    };
    let lines = jsonl(&[
        user("m1", json!("main task")),
        side(user("n1", json!("named subtask")), Some("abc"), None),
        side(user("c1", json!("chain one")), None, Some("m1")),
        side(
            assistant(
                "c2",
                "msg_c",
                json!([{"type": "text", "text": "chain reply"}]),
            ),
            None,
            Some("c1"),
        ),
        side(
            assistant(
                "n2",
                "msg_n",
                json!([{"type": "text", "text": "named reply"}]),
            ),
            Some("abc"),
            Some("n1"),
        ),
        assistant(
            "m2",
            "msg_m",
            json!([{"type": "text", "text": "main reply"}]),
        ),
    ]);
    let all = import_path(&write(&dir, "mixed.jsonl", lines)).unwrap();
    let ids: Vec<&str> = all.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["mixed", "mixed/agent-abc", "mixed/sidechain-c1"]);
    let texts: Vec<Vec<String>> = all
        .iter()
        .map(|c| c.messages.iter().map(Message::text).collect())
        .collect();
    assert_eq!(texts[0], ["main task", "main reply"]);
    assert_eq!(texts[1], ["named subtask", "named reply"]);
    assert_eq!(texts[2], ["chain one", "chain reply"]);
    for c in &all {
        validate(&c.messages).unwrap();
    }
}

#[test]
fn long_and_cyclic_sidechains_are_one_conversation_each() {
    let dir = TempDir::new().unwrap();
    let side = |mut e: Value, parent: &str| {
        e["isSidechain"] = json!(true);
        e["parentUuid"] = json!(parent);
        e
    };
    let mut events = vec![user("m1", json!("main task"))];
    let mut parent = "m1".to_string();
    for i in 0..2000 {
        let uuid = format!("c{i}");
        let e = if i % 2 == 0 {
            user(&uuid, json!(format!("step {i}")))
        } else {
            assistant(
                &uuid,
                &format!("msg{i}"),
                json!([{"type": "text", "text": "ok"}]),
            )
        };
        events.push(side(e, &parent));
        parent = uuid;
    }
    // Two events that name each other as parents.
    events.push(side(user("x1", json!("loop")), "x2"));
    events.push(side(
        assistant("x2", "msg_x", json!([{"type": "text", "text": "round"}])),
        "x1",
    ));
    let all = import_path(&write(&dir, "chains.jsonl", jsonl(&events))).unwrap();
    let ids: Vec<&str> = all.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids.len(), 3, "{ids:?}");
    assert_eq!(ids[1], "chains/sidechain-c0");
    assert_eq!(all[1].messages.len(), 2000);
    assert_eq!(all[2].messages.len(), 2);
    for c in &all {
        validate(&c.messages).unwrap();
    }
}

#[test]
fn the_format_comes_from_the_content_not_the_name() {
    let dir = TempDir::new().unwrap();
    let session = jsonl(&[
        user("u1", json!("hi")),
        assistant("a1", "m", json!([{"type": "text", "text": "yo"}])),
    ]);
    assert_eq!(
        one(&write(&dir, "notes.txt", &session)).format,
        Format::ClaudeCode
    );
    assert_eq!(
        one(&write(&dir, "looks.json", &session)).format,
        Format::ClaudeCode
    );
    let single = jsonl(&[user("u1", json!("only line"))]);
    assert_eq!(one(&write(&dir, "single.jsonl", single)).messages.len(), 1);
    let trajectory = json!({"trajectory_format": "mini-swe-agent-1", "info": {}, "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": "THOUGHT: look\n\n```bash\nls\n```"},
    ]});
    let c = one(&write(&dir, "traj.jsonl", trajectory.to_string()));
    assert_eq!(c.format, Format::MiniSweAgent);
    // The final command never ran: an interrupted result.
    assert_eq!(c.repairs, 1);
    assert_eq!(
        c.messages[1].tool_uses().next().unwrap().input,
        json!({"command": "ls"})
    );
    let openai = write(
        &dir,
        "chat.jsonl",
        json!([{"role": "user", "content": "q"}]).to_string(),
    );
    assert_eq!(one(&openai).format, Format::OpenAiMessages);
}

#[test]
fn unknown_or_unsupported_content_is_a_clear_error() {
    let dir = TempDir::new().unwrap();
    type Expected = fn(&ImportError) -> bool;
    let cases: Vec<(&str, String, Expected, &str)> = vec![
        (
            "empty.json",
            " \n\t".into(),
            |e| matches!(e, ImportError::Empty { .. }),
            "empty",
        ),
        (
            "number.json",
            "42".into(),
            |e| matches!(e, ImportError::UnknownFormat { .. }),
            "lone JSON value (a number)",
        ),
        (
            "object.json",
            r#"{"hello": 1}"#.into(),
            |e| matches!(e, ImportError::UnknownFormat { .. }),
            "not a recognized",
        ),
        (
            "v2.json",
            r#"{"trajectory_format": "mini-swe-agent-9", "messages": []}"#.into(),
            |e| matches!(e, ImportError::UnknownFormat { .. }),
            "mini-swe-agent-9",
        ),
        (
            "none.json",
            "[]".into(),
            |e| matches!(e, ImportError::NoMessages { .. }),
            "no messages",
        ),
        (
            "whittle.jsonl",
            format!(
                "{}\n",
                json!({"type": "session", "format": "whittle-session-1", "id": "s",
                       "model": "m", "cwd": "/", "created_ms": 0})
            ),
            |e| matches!(e, ImportError::NoMessages { .. }),
            "no messages",
        ),
        (
            "lines.jsonl",
            "{\"role\": \"user\"}\n{\"role\": \"assistant\"}\n".into(),
            |e| matches!(e, ImportError::UnknownFormat { .. }),
            "first line is not a Claude Code event",
        ),
        (
            "function.json",
            r#"[{"role": "function", "name": "f", "content": "x"}]"#.into(),
            |e| matches!(e, ImportError::BadValue { at, .. } if at == "[0].role"),
            "unsupported role",
        ),
    ];
    for (name, content, is_expected, says) in cases {
        let path = write(&dir, name, content);
        let err = import_path(&path).unwrap_err();
        assert!(is_expected(&err), "{name}: {err:?}");
        let text = err.to_string();
        assert!(text.starts_with(&path.display().to_string()), "{text}");
        assert!(text.contains(says), "{name}: {text}");
        assert_eq!(err.path(), path);
    }
    // A document with a broken second line is a syntax error at that line.
    let path = write(&dir, "broken.json", "{\"messages\": []}\n{oops\n");
    let err = import_path(&path).unwrap_err();
    assert!(matches!(err, ImportError::Syntax { line: 2, .. }), "{err}");
    let missing = dir.path().join("absent.jsonl");
    assert!(matches!(import_path(&missing), Err(ImportError::Io { .. })));
}

#[test]
fn whittle_sessions_import_every_original_message() {
    let dir = TempDir::new().unwrap();
    let lines = [
        json!({"type": "session", "format": "whittle-session-1", "id": "s1", "model": "m", "cwd": "/", "created_ms": 0}),
        json!({"type": "input", "text": "hi"}),
        json!({"type": "message", "message": {"role": "user", "content": "hi"}}),
        json!({"type": "message", "message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "bash", "input": {"command": "ls"}}]}}),
        json!({"type": "message", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "a\nb"}]}}),
        json!({"type": "compaction", "step": "compact_history", "before": 9, "after": 1, "unit": "tokens",
               "paths": [], "messages": [{"role": "user", "content": "[Compacted]"}]}),
        json!({"type": "message", "message": {"role": "assistant", "content": "done"}}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let path = write(&dir, "s1.jsonl", &text);
    let conversations = import_path(&path).unwrap();
    assert_eq!(conversations.len(), 1);
    assert_eq!(conversations[0].format, Format::WhittleSession);
    assert_eq!(
        conversations[0].messages.len(),
        4,
        "the compaction snapshot is not a message"
    );
}

#[test]
fn a_tree_is_walked_in_order_and_one_bad_file_does_not_stop_it() {
    let dir = TempDir::new().unwrap();
    let session = jsonl(&[user("u1", json!("hi"))]);
    write(&dir, "b.jsonl", &session);
    write(
        &dir,
        "a.JSON",
        json!([{"role": "user", "content": "q"}]).to_string(),
    );
    write(&dir, "README.md", "not a trace");
    write(&dir, "c.json", "{broken");
    write(&dir, "a/subagents/agent-x.jsonl", &session);
    write(&dir, ".hidden/z.jsonl", &session);
    let files = import_tree(dir.path());
    let names: Vec<String> = files
        .iter()
        .map(|f| {
            let relative = f.path.strip_prefix(dir.path()).unwrap();
            relative.to_string_lossy().replace('\\', "/")
        })
        .collect();
    assert_eq!(
        names,
        [
            "a.JSON",
            "b.jsonl",
            "c.json",
            ".hidden/z.jsonl",
            "a/subagents/agent-x.jsonl"
        ]
    );
    let ids: Vec<String> = files
        .iter()
        .filter_map(|f| f.result.as_ref().ok())
        .flatten()
        .map(|c| c.id.clone())
        .collect();
    assert_eq!(ids, ["a", "b", "z", "a/agent-x"]);
    assert!(matches!(
        files[2].result,
        Err(ImportError::Syntax { line: 1, .. })
    ));
    // A file given directly is imported whatever its name.
    let direct = import_tree(&dir.path().join("README.md"));
    assert_eq!(direct.len(), 1);
    assert!(direct[0].result.is_err());
}

#[test]
fn a_compact_boundary_whose_logical_parent_is_absent_joins_the_part_before_it() {
    let dir = TempDir::new().unwrap();
    let on = |mut e: Value, parent: Option<&str>| {
        e["parentUuid"] = json!(parent);
        e
    };
    let events = vec![
        on(user("u1", json!("first part")), None),
        on(
            assistant("a1", "msg_1", json!([{"type": "text", "text": "before"}])),
            Some("u1"),
        ),
        // The record the boundary names was never written to this file.
        json!({"type": "system", "subtype": "compact_boundary", "uuid": "b1",
               "parentUuid": null, "logicalParentUuid": "gone",
               "compactMetadata": {"trigger": "auto", "preTokens": 99}}),
        on(
            {
                let mut s = user("u2", json!("This session is being continued..."));
                s["isCompactSummary"] = json!(true);
                s
            },
            Some("b1"),
        ),
        on(
            assistant("a2", "msg_2", json!([{"type": "text", "text": "after"}])),
            Some("u2"),
        ),
    ];
    let c = one(&write(&dir, "boundary.jsonl", jsonl(&events)));
    let texts: Vec<String> = c.messages.iter().map(Message::text).collect();
    assert_eq!(
        texts.first().map(String::as_str),
        Some("first part"),
        "{texts:?}"
    );
    assert!(texts.iter().any(|t| t == "before"), "{texts:?}");
    assert!(texts.iter().any(|t| t == "after"), "{texts:?}");
    assert_eq!(c.compaction_boundaries.len(), 1);
    assert_eq!(c.calls.len(), 2, "both billed calls are counted");
}

/// The bill as Claude Code logs it, beyond the thread: an answer Claude
/// Code wrote itself (`<synthetic>`) is no call; a response logged again
/// later is billed once; a call that wrote nothing keeps the session's
/// 1-hour cache; and replay makes no request for the synthetic answer.
#[test]
fn claude_code_bills_each_response_once_and_its_own_answers_not_at_all() {
    let dir = TempDir::new().unwrap();
    let billed = |uuid: &str, id: &str, text: &str, read: u64, written_1h: u64| {
        let mut a = assistant(uuid, id, json!([{"type": "text", "text": text}]));
        a["message"]["model"] = json!("claude-opus-4-6");
        a["message"]["usage"] = json!({"input_tokens": 3, "cache_read_input_tokens": read,
            "cache_creation_input_tokens": written_1h, "output_tokens": 10,
            "cache_creation": {"ephemeral_5m_input_tokens": 0,
                               "ephemeral_1h_input_tokens": written_1h}});
        a
    };
    let mut synthetic = assistant(
        "a2",
        "msg_s",
        json!([{"type": "text", "text": "API Error: 529 overloaded"}]),
    );
    synthetic["message"]["model"] = json!("<synthetic>");
    synthetic["message"]["usage"] = json!({"input_tokens": 0, "output_tokens": 0,
        "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0});
    let lines = jsonl(&[
        user("u1", json!("first")),
        billed("a1", "msg_1", "one", 0, 30_000),
        user("u2", json!("second")),
        synthetic,
        user("u3", json!("second, again")),
        // Read everything back, wrote nothing: the TTL is not in this usage.
        billed("a3", "msg_2", "two", 30_000, 0),
        user("u4", json!("third")),
        // The same response logged again after another turn.
        billed("a4", "msg_2", "two", 30_000, 0),
    ]);
    let c = one(&write(&dir, "bill.jsonl", lines));
    let billed_calls: Vec<_> = c.calls.iter().filter(|k| k.usage.is_some()).collect();
    assert_eq!(billed_calls.len(), 2, "{:?}", c.calls);
    assert!(
        c.calls
            .iter()
            .any(|k| k.written_by_agent() && k.usage.is_none())
    );
    assert_eq!(billed_calls[1].cache_ttl, Some(CacheTtl::OneHour));
    assert!(c.abandoned.is_empty());

    let summary = replay_paths(
        &[dir.path().join("bill.jsonl")],
        &[Policy::None],
        &ReplayConfig::default(),
        &mut || Box::new(StandInSummarizer::default()),
        "stand-in",
    );
    let row = &summary.conversations[0];
    assert_eq!(row.recorded.unwrap().calls, 2);
    // The synthetic answer is history, not a request.
    assert_eq!(row.reports[0].calls, 3);
}
