//! The agent loop against a scripted Anthropic server on loopback: tools,
//! compaction (automatic, requested, reactive), hooks, permissions,
//! sessions. Every request the server receives must pass the validator.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};
use std::sync::Arc;
use testkit::{ContextLimit, Reply, Step, TestServer};
use tokio_util::sync::CancellationToken;
use whittle_agent::{
    Agent, AgentConfig, AgentError, AgentEvent, CommandHook, CompactTool, HookKind, Hooks,
    MeterChoice, TurnOutcome, system_prompt,
};
use whittle_context::session::read_session;
use whittle_context::{Limits, TokenBudget};
use whittle_llm::{AnthropicAuth, AnthropicConfig, AnthropicProvider, Provider, Secret};
use whittle_protocol::{Message, validate};
use whittle_tools::{PermissionMode, PermissionPolicy, Skills, ToolRegistry};

struct Setup {
    server: TestServer,
    dir: tempfile::TempDir,
}

impl Setup {
    async fn new() -> Setup {
        Setup {
            server: TestServer::start().await,
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn workspace(&self) -> &std::path::Path {
        self.dir.path()
    }

    fn provider(&self) -> Arc<dyn Provider> {
        let mut config = AnthropicConfig::new(
            "claude-sonnet-5-5",
            AnthropicAuth::ApiKey(Secret::new("sk-test-secret")),
        );
        config.base_url = self.server.url();
        config.retry.max_retries = 1;
        Arc::new(AnthropicProvider::new(config).unwrap())
    }

    fn agent(&self, limits: Limits, meter: MeterChoice) -> Agent {
        self.agent_with(self.config(limits, meter))
    }

    fn agent_with(&self, config: AgentConfig) -> Agent {
        let mut tools = ToolRegistry::builtin();
        tools.register(Arc::new(CompactTool));
        Agent::new(self.provider(), tools, config).with_policy(
            PermissionPolicy::new(PermissionMode::AcceptEdits).with_trusted_tools(["compact"]),
        )
    }

    fn config(&self, limits: Limits, meter: MeterChoice) -> AgentConfig {
        AgentConfig {
            model: "claude-sonnet-5-5".into(),
            model_label: "anthropic:claude-sonnet-5-5".into(),
            max_tokens: 1024,
            max_turns: 20,
            workspace: self.workspace().to_path_buf(),
            state_dir: self.workspace().join(".whittle"),
            limits,
            meter,
            context_window: 200_000,
            system_prompt: system_prompt(
                self.workspace(),
                &Skills::discover(self.workspace()),
                None,
            ),
            reasoning: whittle_llm::Reasoning::default(),
            sandbox: whittle_tools::Sandbox::none(),
            redactor: whittle_protocol::Redactor::default(),
            session_key: None,
            resume_unsealed: false,
        }
    }

    /// Every request so far was a valid Messages API request.
    fn assert_requests_valid(&self) {
        for r in self.server.requests() {
            let messages: Vec<Message> =
                serde_json::from_value(r.body["messages"].clone()).unwrap();
            assert_eq!(validate(&messages), Ok(()), "request {}", r.number);
            assert!(!r.body.to_string().contains("sk-test-secret"));
        }
    }
}

async fn run(agent: &mut Agent, input: &str) -> (Result<TurnOutcome, AgentError>, Vec<AgentEvent>) {
    let mut events = Vec::new();
    let mut sink = |e: AgentEvent| events.push(e);
    let result = agent
        .run_turn(input, &mut sink, &CancellationToken::new())
        .await;
    (result, events)
}

/// A message's text, whether its content is a string or blocks (the
/// provider turns the newest message into blocks to mark it for caching).
fn message_text(message: &Value) -> String {
    match &message["content"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks.iter().filter_map(|b| b["text"].as_str()).collect(),
        _ => String::new(),
    }
}

fn tool_result_text(request: &Value, id: &str) -> String {
    for m in request["messages"].as_array().unwrap() {
        if let Some(blocks) = m["content"].as_array() {
            for b in blocks {
                if b["type"] == "tool_result" && b["tool_use_id"] == id {
                    return b["content"].as_str().unwrap_or_default().to_string();
                }
            }
        }
    }
    panic!("no result for {id}");
}

#[tokio::test(flavor = "multi_thread")]
async fn tools_run_and_their_results_go_back_in_one_message() {
    let s = Setup::new().await;
    s.server.push(
        Reply::tool_use(
            "t1",
            "write_file",
            json!({"path": "notes.txt", "content": "hello\n"}),
        )
        .with_tool_use("t2", "bash", json!({"command": "cat notes.txt"})),
    );
    s.server.push(Reply::text("Wrote and read notes.txt."));
    let mut agent = s.agent(Limits::teaching(), MeterChoice::Chars);
    let (result, events) = run(&mut agent, "make a note").await;
    assert_eq!(
        result.unwrap(),
        TurnOutcome::Done {
            text: "Wrote and read notes.txt.".into()
        }
    );
    assert_eq!(
        std::fs::read_to_string(s.workspace().join("notes.txt")).unwrap(),
        "hello\n"
    );
    let requests = s.server.requests();
    assert_eq!(requests.len(), 2);
    let second = &requests[1].body;
    let last = second["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(
        last["content"].as_array().unwrap().len(),
        2,
        "both results in one message"
    );
    assert!(tool_result_text(second, "t2").contains("hello"));
    assert!(
        events
            .iter()
            .any(|e| matches!(e, AgentEvent::ToolDone { name, .. } if name == "bash"))
    );
    s.assert_requests_valid();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_compact_tool_runs_after_the_whole_batch_with_its_focus() {
    let s = Setup::new().await;
    s.server.push(
        Reply::tool_use(
            "w",
            "write_file",
            // Big enough that a summary with its ledger is smaller.
            json!({"path": "done.txt", "content": "stage 1\n".repeat(200)}),
        )
        .with_tool_use("c", "compact", json!({"focus": "the parser bug"})),
    );
    // The teaching preset summarizes a transcript of the conversation.
    s.server.push_fn(|r| {
        let asked = r.last_message_text();
        assert!(asked.starts_with("<conversation>"), "{asked}");
        assert!(asked.contains("Pay particular attention to: the parser bug"));
        // The summarizer is shown the ledger, so it need not repeat it.
        assert!(asked.contains("The ledger the harness keeps (do not repeat it): these facts, and those of any <state-ledger> section above.\n<state-ledger>"), "{asked}");
        assert!(asked.contains("- done.txt (write_file)"), "{asked}");
        Step::Reply(Reply::text("Stage 1 written to done.txt; next: stage 2."))
    });
    s.server.push(Reply::text("Continuing with stage 2."));
    let mut agent = s.agent(Limits::teaching(), MeterChoice::Chars);
    let (result, events) = run(&mut agent, "do stage 1 then compact").await;
    assert!(matches!(result.unwrap(), TurnOutcome::Done { .. }));
    assert!(
        s.workspace().join("done.txt").exists(),
        "the write ran before compaction"
    );
    let requests = s.server.requests();
    assert_eq!(requests.len(), 3);
    // The summary saw the write's result: nothing orphaned.
    assert!(requests[1].last_message_text().contains("[tool result w]"));
    let after = &message_text(&requests[2].body["messages"][0]);
    assert!(after.starts_with("[Compacted]\n\nCurrent user request:\ndo stage 1 then compact"));
    assert!(after.contains("Stage 1 written to done.txt"));
    assert!(
        events
            .iter()
            .any(|e| matches!(e, AgentEvent::Compaction(r) if r.applied()))
    );
    s.assert_requests_valid();
}

/// Summaries are awaited like any model call: automatic compaction works on
/// a single-threaded runtime, where blocking on the model would hang.
#[tokio::test(flavor = "current_thread")]
async fn automatic_compaction_summarizes_on_a_current_thread_runtime() {
    let s = Setup::new().await;
    s.server.push(Reply::text("A long tale. ".repeat(5_000)));
    s.server.push_fn(|r| {
        let asked = r.last_message_text();
        assert!(asked.starts_with("<conversation>"), "{asked}");
        assert!(asked.contains("A long tale."));
        Step::Reply(Reply::text(
            "The user asked for a story; a long one was told.",
        ))
    });
    s.server.push(Reply::text("Short tale."));
    let mut agent = s.agent(Limits::teaching(), MeterChoice::Chars);
    let (result, _) = run(&mut agent, "tell a story").await;
    assert!(matches!(result.unwrap(), TurnOutcome::Done { .. }));
    assert!(agent.history().chars() > Limits::teaching().context_limit as usize);

    let (result, events) = run(&mut agent, "now a shorter one").await;
    assert_eq!(
        result.unwrap(),
        TurnOutcome::Done {
            text: "Short tale.".into()
        }
    );
    let requests = s.server.requests();
    assert_eq!(requests.len(), 3);
    let first = &message_text(&requests[2].body["messages"][0]);
    assert!(
        first.starts_with("[Compacted]\n\nCurrent user request:\nnow a shorter one"),
        "{first}"
    );
    assert!(first.contains("a long one was told"));
    let compaction = events
        .iter()
        .find_map(|e| match e {
            AgentEvent::Compaction(r) => Some(r.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(compaction.step, whittle_context::Step::CompactHistory);
    assert_eq!(compaction.trigger, whittle_context::Trigger::OverLimit);
    assert!(compaction.applied(), "{compaction}");
    // The summary call is counted: one usage for it, one for the answer.
    let usages = events
        .iter()
        .filter(|e| matches!(e, AgentEvent::Usage(_)))
        .count();
    assert_eq!(usages, 2);
    assert_eq!(agent.usage().calls, 3);
    s.assert_requests_valid();
}

/// The window and answer of the squeeze tests: 64,000 tokens, 8,192 of
/// them reserved for answers of at most as many.
const SQUEEZE_BUDGET: TokenBudget = TokenBudget {
    context_window: 64_000,
    reserved_output_tokens: 8_192,
    auto_compact_fraction: TokenBudget::DEFAULT_FRACTION,
};

/// A token-metered config for [`SQUEEZE_BUDGET`].
fn squeeze_config(s: &Setup) -> AgentConfig {
    let mut config = s.config(Limits::tokens(SQUEEZE_BUDGET), MeterChoice::Tokens);
    config.max_tokens = 8_192;
    config.context_window = SQUEEZE_BUDGET.context_window;
    config
}

/// A first turn whose long answer (about 56,500 tokens at the meter's four
/// characters a token, the system prompt and tools besides) leaves the next
/// request past the window limit of [`SQUEEZE_BUDGET`], short of its
/// squeeze limit. No input count is reported, so the meter keeps its
/// estimate.
async fn tell_a_long_tale(s: &Setup, agent: &mut Agent) {
    s.server
        .push(Reply::text("A long tale. ".repeat(17_400)).with_usage(0, 56_000));
    let (result, _) = run(agent, "hello").await;
    assert!(matches!(result.unwrap(), TurnOutcome::Done { .. }));
}

/// A history grown into the answer's reserve is sent with a smaller
/// output limit instead of being compacted; an answer cut at that limit is
/// paid for and dropped, and asked again after a compaction that gives it
/// the full one.
#[tokio::test(flavor = "multi_thread")]
async fn an_answer_cut_at_a_squeezed_room_is_asked_again_with_the_full_room() {
    let s = Setup::new().await;
    let limits = Limits::tokens(SQUEEZE_BUDGET);
    let mut agent = s.agent_with(squeeze_config(&s));
    tell_a_long_tale(&s, &mut agent).await;

    s.server.push(
        Reply::text("half an answer, cut off mid")
            .with_stop_reason("max_tokens")
            .with_usage(0, 5_000),
    );
    s.server.push(Reply::text("summary of the tale"));
    s.server.push(Reply::text("the whole answer"));
    let (result, events) = run(&mut agent, "go on").await;
    assert_eq!(
        result.unwrap(),
        TurnOutcome::Done {
            text: "the whole answer".into()
        }
    );
    let requests = s.server.requests();
    assert_eq!(requests.len(), 4);
    // Squeezed, not compacted: the history as it was, a smaller limit.
    let squeezed = requests[1].body["max_tokens"].as_u64().unwrap();
    assert!(
        (limits.answer_room(limits.squeeze_limit, 8_192)..8_192).contains(&squeezed),
        "{squeezed}"
    );
    assert_eq!(message_text(&requests[1].body["messages"][0]), "hello");
    // Then compacted, and asked again with the full room.
    let last = &requests[3].body;
    assert_eq!(last["max_tokens"].as_u64(), Some(8_192));
    let first = message_text(&last["messages"][0]);
    assert!(first.starts_with("[Compacted]"), "{first}");
    assert!(!last.to_string().contains("cut off mid"));
    assert!(
        events
            .iter()
            .any(|e| matches!(e, AgentEvent::Warning(w) if w.contains("asking again")))
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, AgentEvent::Compaction(r) if r.applied()))
    );
    // The cut answer was billed: every call is counted.
    assert_eq!(agent.usage().calls, 4);
    s.assert_requests_valid();
}

/// Where compacting cannot make room (the history is one long message
/// from the person, which a marker would quote whole), an answer cut at
/// the squeezed room is kept as it came: asking again would only be cut
/// again. The room is never below a quarter of the reserve, and above the
/// squeeze limit the request asks for the full room (the provider decides).
#[tokio::test(flavor = "multi_thread")]
async fn an_answer_cut_where_compacting_makes_no_room_is_kept() {
    for (chars, squeezed) in [(226_000, true), (252_000, false)] {
        let s = Setup::new().await;
        let mut agent = s.agent_with(squeeze_config(&s));
        s.server.push(
            Reply::text("I have read it and")
                .with_stop_reason("max_tokens")
                .with_usage(0, 1_811),
        );
        s.server.push(Reply::text("never asked"));
        let (result, events) = run(&mut agent, &"word ".repeat(chars / 5)).await;
        assert_eq!(
            result.unwrap(),
            TurnOutcome::Done {
                text: "I have read it and".into()
            },
            "{chars}"
        );
        let requests = s.server.requests();
        assert_eq!(requests.len(), 1, "{chars}");
        let sent = requests[0].body["max_tokens"].as_u64().unwrap();
        if squeezed {
            assert!((8_192 / 4..8_192).contains(&sent), "{chars}: {sent}");
            assert!(
                events
                    .iter()
                    .any(|e| matches!(e, AgentEvent::Warning(w) if w.contains("kept as it came")))
            );
        } else {
            assert_eq!(sent, 8_192, "{chars}");
        }
        s.assert_requests_valid();
    }
}

/// With a fixed thinking budget the answer's room is not squeezed (it
/// would lower the budget, or leave thinking out): past the window limit
/// the history is compacted, as without the squeeze.
#[tokio::test(flavor = "multi_thread")]
async fn with_a_thinking_budget_the_answer_is_not_squeezed() {
    let s = Setup::new().await;
    let mut config = squeeze_config(&s);
    config.reasoning.thinking = whittle_llm::Thinking::Budget(4_000);
    let mut agent = s.agent_with(config);
    tell_a_long_tale(&s, &mut agent).await;
    s.server.push(Reply::text("summary of the tale"));
    s.server.push(Reply::text("the whole answer"));
    let (result, _) = run(&mut agent, "go on").await;
    assert_eq!(
        result.unwrap(),
        TurnOutcome::Done {
            text: "the whole answer".into()
        }
    );
    let requests = s.server.requests();
    assert_eq!(requests.len(), 3);
    let last = &requests[2].body;
    assert_eq!(last["max_tokens"].as_u64(), Some(8_192));
    assert_eq!(last["thinking"]["budget_tokens"].as_u64(), Some(4_000));
    assert!(message_text(&last["messages"][0]).starts_with("[Compacted]"));
    s.assert_requests_valid();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_prompt_too_long_once_is_recovered_by_reactive_compaction() {
    let s = Setup::new().await;
    let mut agent = s.agent(
        Limits::tokens(TokenBudget::new(200_000, 8_000)),
        MeterChoice::Tokens,
    );
    // Build some history: four tool turns with sizable outputs.
    for i in 0..4 {
        s.server.push(Reply::tool_use(
            format!("r{i}"),
            "bash",
            json!({"command": format!("seq 1 {}", 2000 + i)}),
        ));
    }
    s.server.push(Reply::text("Read everything."));
    let (result, _) = run(&mut agent, "look around").await;
    assert!(matches!(result.unwrap(), TurnOutcome::Done { .. }));
    let body_bytes = s.server.requests().last().unwrap().body_bytes;

    // Now the server's window is smaller than the history: one refusal.
    s.server.set_context_limit(Some(ContextLimit {
        max_body_bytes: body_bytes - 1000,
        once: true,
    }));
    s.server.push(Reply::text("reactive summary of the work"));
    s.server.push(Reply::text("All good."));
    let (result, events) = run(&mut agent, "and now?").await;
    assert_eq!(
        result.unwrap(),
        TurnOutcome::Done {
            text: "All good.".into()
        }
    );
    let compaction = events
        .iter()
        .find_map(|e| match e {
            AgentEvent::Compaction(r) if r.applied() => Some(r.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(compaction.step, whittle_context::Step::ReactiveCompact);
    let last = s.server.requests().last().unwrap().clone();
    let first = &message_text(&last.body["messages"][0]);
    assert!(first.starts_with("[Reactive compact]\n\nCurrent user request:\nand now?"));
    s.assert_requests_valid();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_prompt_too_long_always_is_a_clear_error_naming_the_transcript() {
    let s = Setup::new().await;
    let mut agent = s.agent(Limits::teaching(), MeterChoice::Chars);
    for i in 0..3 {
        s.server.push(Reply::tool_use(
            format!("r{i}"),
            "bash",
            json!({"command": "seq 1 3000"}),
        ));
    }
    s.server.push(Reply::text("done"));
    run(&mut agent, "look").await.0.unwrap();
    s.server.set_context_limit(Some(ContextLimit {
        max_body_bytes: 600,
        once: false,
    }));
    // The reactive summary is made from a transcript, which also overflows here.
    let (result, _) = run(&mut agent, "again").await;
    let err = result.unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(err, AgentError::Overflow { .. } | AgentError::Llm(_)),
        "{text}"
    );
    assert!(!text.contains('\n'), "one line: {text}");
    if let AgentError::Overflow {
        transcript: Some(t),
        ..
    } = &err
    {
        assert!(t.exists(), "{text}");
        assert!(text.contains(&t.display().to_string()));
    } else {
        panic!("expected an overflow naming a transcript: {text}");
    }
    s.assert_requests_valid();
}

#[tokio::test(flavor = "multi_thread")]
async fn hooks_block_tools_and_a_denied_command_never_runs() {
    let s = Setup::new().await;
    let mut hooks = Hooks::new();
    hooks.add_commands([CommandHook {
        event: HookKind::PreToolUse,
        matcher: Some("write_file".into()),
        command: "echo 'writes are frozen' >&2; exit 2".into(),
        timeout_secs: Some(10),
    }]);
    s.server.push(
        Reply::tool_use("w", "write_file", json!({"path": "x.txt", "content": "x"})).with_tool_use(
            "d",
            "bash",
            json!({"command": "rm -rf / --no-preserve-root; touch ran.txt"}),
        ),
    );
    s.server.push(Reply::text("ok"));
    let mut agent = s
        .agent(Limits::teaching(), MeterChoice::Chars)
        .with_hooks(hooks);
    run(&mut agent, "try").await.0.unwrap();
    assert!(!s.workspace().join("x.txt").exists());
    assert!(
        !s.workspace().join("ran.txt").exists(),
        "a denied command never runs"
    );
    let second = &s.server.requests()[1].body;
    assert!(tool_result_text(second, "w").contains("writes are frozen"));
    assert!(tool_result_text(second, "d").starts_with("[denied]"));
    s.assert_requests_valid();
}

#[tokio::test(flavor = "multi_thread")]
async fn sessions_log_everything_and_resume_after_a_cut() {
    let s = Setup::new().await;
    s.server.push(Reply::tool_use(
        "t1",
        "bash",
        json!({"command": "echo one"}),
    ));
    s.server.push(Reply::text("first done"));
    let mut agent = s.agent(Limits::teaching(), MeterChoice::Chars);
    let log = agent.start_session().unwrap().to_path_buf();
    run(&mut agent, "first").await.0.unwrap();
    drop(agent);
    // A crash mid-tool: the log ends with an assistant tool call and a cut line.
    let mut text = std::fs::read_to_string(&log).unwrap();
    let call = json!({"type": "message", "message": {"role": "assistant", "content": [
        {"type": "tool_use", "id": "t9", "name": "bash", "input": {"command": "sleep 100"}}]}});
    text += &format!("{call}\n{{\"type\":\"tool_ru");
    std::fs::write(&log, text).unwrap();

    let mut resumed = s.agent(Limits::teaching(), MeterChoice::Chars);
    assert_eq!(resumed.resume_session(&log).unwrap().repairs, 1);
    assert_eq!(resumed.request(), "first");
    s.server.push(Reply::text("second done"));
    run(&mut resumed, "second").await.0.unwrap();
    let last = s.server.requests().last().unwrap().clone();
    assert!(tool_result_text(&last.body, "t9").contains("interrupted"));
    let state = read_session(&log).unwrap();
    assert_eq!(state.request, "second");
    assert_eq!(validate(&state.history), Ok(()));
    assert!(
        !std::fs::read_to_string(&log)
            .unwrap()
            .contains("sk-test-secret")
    );
    s.assert_requests_valid();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_opens_its_transcript_when_it_starts_and_says_when_it_cannot() {
    let s = Setup::new().await;
    let mut agent = s.agent(Limits::teaching(), MeterChoice::Chars);
    let log = agent.start_session().unwrap().to_path_buf();
    let id = log.file_stem().unwrap().to_str().unwrap().to_owned();
    let transcript = s
        .workspace()
        .join(".whittle/transcripts")
        .join(format!("{id}.jsonl"));
    // There before any compaction: the first one only appends.
    assert_eq!(std::fs::read(&transcript).unwrap(), b"");

    // A transcripts folder that cannot be made is found at the start.
    let other = Setup::new().await;
    std::fs::create_dir_all(other.workspace().join(".whittle")).unwrap();
    std::fs::write(
        other.workspace().join(".whittle/transcripts"),
        "not a folder",
    )
    .unwrap();
    let mut agent = other.agent(Limits::teaching(), MeterChoice::Chars);
    let err = agent.start_session().unwrap_err();
    assert!(matches!(err, AgentError::Transcript(_)), "{err:?}");
    // No session log is left for --continue to pick.
    let sessions = other.workspace().join(".whittle/sessions");
    assert_eq!(std::fs::read_dir(&sessions).unwrap().count(), 0);
    let line = err.to_string();
    assert!(
        line.contains("transcript") && !line.contains('\n'),
        "{line}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn cancelling_mid_tool_keeps_the_history_valid() {
    let s = Setup::new().await;
    s.server.push(
        Reply::tool_use("slow", "bash", json!({"command": "sleep 30"})).with_tool_use(
            "next",
            "bash",
            json!({"command": "touch never.txt"}),
        ),
    );
    let mut agent = s.agent(Limits::teaching(), MeterChoice::Chars);
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    let mut sink = move |e: AgentEvent| {
        if matches!(e, AgentEvent::ToolStart { .. }) {
            let t = trigger.clone();
            tokio::spawn(async move {
                tokio::time::sleep(std::time::Duration::from_millis(300)).await;
                t.cancel();
            });
        }
    };
    let started = std::time::Instant::now();
    let outcome = agent.run_turn("wait", &mut sink, &cancel).await.unwrap();
    assert_eq!(outcome, TurnOutcome::Cancelled);
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    assert!(!s.workspace().join("never.txt").exists());
    assert_eq!(validate(agent.history().messages()), Ok(()));
}

#[tokio::test(flavor = "multi_thread")]
async fn known_secrets_are_redacted_from_tool_results_and_the_session_log() {
    let s = Setup::new().await;
    let secret = "sk-live-0123456789abcdef";
    std::fs::write(s.workspace().join("leak.txt"), format!("key={secret}\n")).unwrap();
    s.server.push(
        Reply::tool_use("r", "read_file", json!({"path": "leak.txt"})).with_tool_use(
            "b",
            "bash",
            json!({"command": "cat leak.txt"}),
        ),
    );
    s.server.push(Reply::text("done"));
    let mut config = s.config(Limits::teaching(), MeterChoice::Chars);
    config.redactor = whittle_protocol::Redactor::new([secret]);
    let mut agent = s.agent_with(config);
    agent.start_session().unwrap();
    let (result, events) = run(&mut agent, "show me leak.txt").await;
    assert!(matches!(result.unwrap(), TurnOutcome::Done { .. }));
    let second = &s.server.requests()[1].body;
    for id in ["r", "b"] {
        let text = tool_result_text(second, id);
        assert!(text.contains("key=[REDACTED]"), "{id}: {text}");
    }
    assert!(!second.to_string().contains(secret));
    for e in &events {
        if let AgentEvent::ToolDone { output, .. } = e {
            assert!(!output.contains(secret), "{output}");
        }
    }
    let log = std::fs::read_to_string(agent.session_path().unwrap()).unwrap();
    assert!(log.contains("[REDACTED]") && !log.contains(secret));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lost_transcript_is_reported_on_resume_and_never_renumbered() {
    let s = Setup::new().await;
    s.server.push(Reply::text("A long tale. ".repeat(5_000)));
    s.server.push(Reply::text(
        "The user asked for a story; a long one was told.",
    ));
    s.server.push(Reply::text("Short tale."));
    let mut agent = s.agent(Limits::teaching(), MeterChoice::Chars);
    let log = agent.start_session().unwrap().to_path_buf();
    run(&mut agent, "tell a story").await.0.unwrap();
    run(&mut agent, "now a shorter one").await.0.unwrap();
    let id = log.file_stem().unwrap().to_str().unwrap().to_owned();
    let transcripts = s.workspace().join(".whittle/transcripts");
    let lost = transcripts.join(format!("{id}.jsonl"));
    assert!(
        std::fs::metadata(&lost).unwrap().len() > 0,
        "the summary archived there"
    );
    drop(agent);
    std::fs::remove_file(&lost).unwrap();

    let mut resumed = s.agent(Limits::teaching(), MeterChoice::Chars);
    let problems = resumed.resume_session(&log).unwrap().problems;
    assert!(
        problems
            .iter()
            .any(|p| p.contains("is missing") && p.contains(&id)),
        "{problems:?}"
    );
    // The old name stays free: its line numbers mean the lost lines.
    assert!(!lost.exists());
    let second = transcripts.join(format!("{id}-after-loss.jsonl"));
    assert!(second.exists());

    // The new one is lost too, after a summary archived there.
    s.server
        .push(Reply::text("Another long tale. ".repeat(5_000)));
    s.server.push(Reply::text("Summary: two stories."));
    s.server.push(Reply::text("Done."));
    run(&mut resumed, "one more").await.0.unwrap();
    run(&mut resumed, "and a short one").await.0.unwrap();
    assert!(std::fs::metadata(&second).unwrap().len() > 0);
    drop(resumed);
    std::fs::remove_file(&second).unwrap();
    let mut again = s.agent(Limits::teaching(), MeterChoice::Chars);
    let problems = again.resume_session(&log).unwrap().problems;
    assert_eq!(
        problems.iter().filter(|p| p.contains("is missing")).count(),
        2,
        "{problems:?}"
    );
    assert!(!second.exists());
    assert!(
        transcripts
            .join(format!("{id}-after-loss-2.jsonl"))
            .exists()
    );
}
