//! The Anthropic provider against the scripted server: content, usage and
//! every fault class.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;
use serde_json::json;
use std::time::Duration;
use testkit::{Chunking, ContextLimit, Fault, Reply, TestServer};
use whittle_llm::{
    AnthropicAuth, AnthropicConfig, AnthropicProvider, LlmError, RetryPolicy, Secret, StopReason,
    StreamEvent, Usage,
};
use whittle_protocol::{Block, Content};

#[tokio::test]
async fn text_reply_with_headers_and_body_as_documented() {
    let server = TestServer::start().await;
    server.push(Reply::text("Hello, wörld! 🎉 Here are the files."));
    let provider = anthropic(&server);
    let mut req = request("claude-sonnet-5-5");
    req.temperature = Some(0.2);
    let (result, events) = run(&provider, req).await;
    let response = result.unwrap();
    assert_eq!(
        response.message.text(),
        "Hello, wörld! 🎉 Here are the files."
    );
    assert_eq!(response.stop_reason, Some(StopReason::EndTurn));
    assert_eq!(response.id, "msg_testkit_1");
    assert!(
        events
            .iter()
            .any(|e| matches!(e, StreamEvent::TextDelta { .. }))
    );

    let sent = &server.requests()[0];
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(sent.header("x-api-key"), Some(ANTHROPIC_KEY));
    assert_eq!(sent.header("anthropic-version"), Some("2026-10-21"));
    assert_eq!(sent.header("authorization"), None);
    assert_eq!(sent.body["stream"], json!(true));
    for forbidden in ["temperature", "top_p", "top_k"] {
        assert!(sent.body.get(forbidden).is_none(), "{forbidden} sent");
    }
}

#[tokio::test]
async fn bearer_token_and_older_version_send_temperature() {
    let server = TestServer::start().await;
    server.push(Reply::text("ok"));
    let mut config = anthropic_config(&server);
    config.auth = whittle_llm::AnthropicAuth::Bearer(whittle_llm::Secret::new("tok-123456"));
    config.version = "2023-06-01".into();
    let provider = whittle_llm::AnthropicProvider::new(config).unwrap();
    let mut req = request("claude-sonnet-5-5");
    req.temperature = Some(0.2);
    run(&provider, req).await.0.unwrap();
    let sent = &server.requests()[0];
    assert_eq!(sent.header("authorization"), Some("Bearer tok-123456"));
    assert_eq!(sent.header("x-api-key"), None);
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(sent.body["temperature"], json!(0.2));
}

#[tokio::test]
async fn parallel_tool_calls_assemble_with_parsed_inputs() {
    let server = TestServer::start().await;
    server.push(
        Reply::text("Running both.")
            .with_tool_use(
                "toolu_01A",
                "bash",
                json!({"command": "ls -la", "timeout": 30}),
            )
            .with_tool_use(
                "toolu_01B",
                "read_file",
                json!({"path": "src/main.rs", "note": "ünï \"q\""}),
            ),
    );
    let (result, events) = run(&anthropic(&server), request("claude-sonnet-5-5")).await;
    let response = result.unwrap();
    assert_eq!(response.stop_reason, Some(StopReason::ToolUse));
    let uses: Vec<_> = response.message.tool_uses().collect();
    assert_eq!(uses.len(), 2);
    assert_eq!(
        (uses[0].id.as_str(), uses[0].name.as_str()),
        ("toolu_01A", "bash")
    );
    assert_eq!(uses[0].input, json!({"command": "ls -la", "timeout": 30}));
    assert_eq!(
        uses[1].input,
        json!({"path": "src/main.rs", "note": "ünï \"q\""})
    );
    let starts: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::BlockStart {
                index,
                block: Block::ToolUse(t),
            } => Some((*index, t.name.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        starts,
        vec![(1, "bash".to_owned()), (2, "read_file".to_owned())]
    );
}

#[tokio::test]
async fn thinking_signatures_survive_byte_exact() {
    let signature = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxa+/u7Zm9vYmFy==\\u0000\u{1F600}";
    let server = TestServer::start().await;
    server.set_chunking(Chunking {
        max_chunk: 1,
        seed: 7,
    });
    server.push(
        Reply::new()
            .with_thinking("The user wants files.\nI will run ls.", signature)
            .with_redacted_thinking("EmwKAhgBEgy3va3pzix/LafPsn4a")
            .with_text("Here."),
    );
    let (result, _) = run(&anthropic(&server), request("claude-sonnet-5-5")).await;
    let message = result.unwrap().message;
    let Content::Blocks(blocks) = message.content() else {
        panic!()
    };
    let Block::Thinking(t) = &blocks[0] else {
        panic!("{blocks:?}")
    };
    assert_eq!(t.thinking, "The user wants files.\nI will run ls.");
    assert_eq!(t.signature.as_deref(), Some(signature));
    assert_eq!(
        serde_json::to_value(&blocks[1]).unwrap(),
        json!({"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"})
    );
}

#[tokio::test]
async fn usage_totals_include_cache_reads_and_writes() {
    let server = TestServer::start().await;
    server.push(
        Reply::text("x")
            .with_usage(1200, 34)
            .with_cache(500, 70_000),
    );
    let (result, _) = run(&anthropic(&server), request("claude-sonnet-5-5")).await;
    let usage = result.unwrap().usage;
    assert_eq!(
        usage,
        Usage {
            input_tokens: 1200,
            output_tokens: 34,
            cache_creation_input_tokens: 500,
            cache_read_input_tokens: 70_000,
        }
    );
    assert_eq!(usage.total_input_tokens(), 71_700);
}

#[tokio::test]
async fn unknown_events_deltas_and_blocks_do_not_break_the_stream() {
    let server = TestServer::start().await;
    server.push(
        Reply::new()
            .with_raw_events([
                ("content_block_start", json!({"type": "content_block_start", "index": 0,
                    "content_block": {"type": "text", "text": "", "citations": []}})),
                ("content_block_delta", json!({"type": "content_block_delta", "index": 0,
                    "delta": {"type": "text_delta", "text": "Cited."}})),
                ("content_block_delta", json!({"type": "content_block_delta", "index": 0,
                    "delta": {"type": "citations_delta", "citation": {"type": "char_location", "cited_text": "x", "document_index": 0}}})),
                ("content_block_delta", json!({"type": "content_block_delta", "index": 0,
                    "delta": {"type": "sparkle_delta", "sparkles": 3}})),
                ("future_event", json!({"type": "future_event", "anything": [1, 2]})),
                ("content_block_stop", json!({"type": "content_block_stop", "index": 0})),
            ])
            .with_raw_block(json!({"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "x"}}))
            .with_raw_events([
                ("content_block_start", json!({"type": "content_block_start", "index": 2,
                    "content_block": {"type": "compaction", "content": ""}})),
                ("content_block_delta", json!({"type": "content_block_delta", "index": 2,
                    "delta": {"type": "compaction_delta", "content": "Summary so far."}})),
                ("content_block_stop", json!({"type": "content_block_stop", "index": 2})),
            ]),
    );
    let (result, _) = run(&anthropic(&server), request("claude-sonnet-5-5")).await;
    let message = result.unwrap().message;
    assert_eq!(
        serde_json::to_value(&message).unwrap()["content"],
        json!([
            {"type": "text", "text": "Cited.", "citations": [{"type": "char_location", "cited_text": "x", "document_index": 0}]},
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "x"}},
            {"type": "compaction", "content": "Summary so far."},
        ])
    );
}

#[tokio::test]
async fn rate_limit_is_retried_after_the_servers_retry_after() {
    let server = TestServer::start().await;
    server.push(Fault::rate_limited(1));
    server.push(Reply::text("after the wait"));
    let (result, events) = run(&anthropic(&server), request("claude-sonnet-5-5")).await;
    assert_eq!(result.unwrap().message.text(), "after the wait");
    let r = retries(&events);
    assert_eq!(r.len(), 1);
    assert_eq!((r[0].0, r[0].1), (1, Duration::from_secs(1)));
    assert!(
        matches!(r[0].2, LlmError::RateLimited { retry_after: Some(d), .. } if d == Duration::from_secs(1))
    );
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn overload_and_server_errors_are_retried_with_backoff() {
    let server = TestServer::start().await;
    server.push(Fault::overloaded());
    server.push(Fault::server_error());
    server.push(Fault::status(504));
    server.push(Reply::text("third time lucky"));
    let (result, events) = run(&anthropic(&server), request("claude-sonnet-5-5")).await;
    assert_eq!(result.unwrap().message.text(), "third time lucky");
    let kinds: Vec<_> = retries(&events)
        .into_iter()
        .map(|(a, _, e)| (a, e))
        .collect();
    assert!(matches!(kinds[0], (1, LlmError::Overloaded { .. })));
    assert!(matches!(
        kinds[1],
        (2, LlmError::Server { status: 500, .. })
    ));
    assert!(matches!(
        kinds[2],
        (3, LlmError::Server { status: 504, .. })
    ));
    // Retry events come before any content.
    let first_content = events.iter().position(StreamEvent::is_content).unwrap();
    let last_retry = events
        .iter()
        .rposition(|e| matches!(e, StreamEvent::Retry { .. }))
        .unwrap();
    assert!(last_retry < first_content);
}

#[tokio::test]
async fn persistent_overload_gives_up_after_four_retries() {
    let server = TestServer::start().await;
    for _ in 0..5 {
        server.push(Fault::overloaded());
    }
    let (result, events) = run(&anthropic(&server), request("claude-sonnet-5-5")).await;
    let err = result.unwrap_err();
    assert!(matches!(err, LlmError::Overloaded { .. }), "{err}");
    assert_eq!(retries(&events).len(), 4);
    assert_eq!(server.requests().len(), 5);
    assert_eq!(server.remaining(), 0);
}

#[tokio::test]
async fn a_stream_cut_before_content_is_retried_after_content_it_fails() {
    let server = TestServer::start().await;
    // 40 bytes: inside message_start, before any content.
    server.push(Fault::cut_after(Reply::text("lost"), 40));
    server.push(Reply::text("whole"));
    let (result, events) = run(&anthropic(&server), request("claude-sonnet-5-5")).await;
    assert_eq!(result.unwrap().message.text(), "whole");
    assert!(matches!(retries(&events)[0].2, LlmError::Transport { .. }));

    // Cut deep inside the text: content was already shown, so no retry.
    let long = "word ".repeat(200);
    server.push(Fault::cut_after(Reply::text(long), 1500));
    server.push(Reply::text("never asked for"));
    let (result, events) = run(&anthropic(&server), request("claude-sonnet-5-5")).await;
    let err = result.unwrap_err();
    assert!(matches!(err, LlmError::Transport { .. }), "{err}");
    assert!(retries(&events).is_empty());
    assert_eq!(server.remaining(), 1);
}

#[tokio::test]
async fn a_stalled_stream_hits_the_idle_timeout_and_is_retried() {
    let server = TestServer::start().await;
    server.push(Fault::stall(Reply::text("never"), 30));
    server.push(Reply::text("fresh"));
    let mut config = anthropic_config(&server);
    config.retry.idle_timeout = Duration::from_millis(300);
    let provider = whittle_llm::AnthropicProvider::new(config).unwrap();
    let (result, events) = run(&provider, request("claude-sonnet-5-5")).await;
    assert_eq!(result.unwrap().message.text(), "fresh");
    let r = retries(&events);
    assert!(
        matches!(&r[0].2, LlmError::Transport { message, .. } if message.contains("silent")),
        "{r:?}"
    );
}

#[tokio::test]
async fn a_malformed_event_is_a_malformed_response() {
    let server = TestServer::start().await;
    server.push(Fault::malformed_event(Reply::text("hello"), 3));
    let (result, _) = run(&anthropic(&server), request("claude-sonnet-5-5")).await;
    let err = result.unwrap_err();
    assert!(matches!(err, LlmError::MalformedResponse { .. }), "{err}");
    assert!(!err.to_string().contains('\n'));
}

#[tokio::test]
async fn an_overloaded_error_event_before_content_is_retried() {
    let server = TestServer::start().await;
    server.push(Fault::error_event(Reply::text("x"), 2, "overloaded_error"));
    server.push(Reply::text("recovered"));
    let (result, events) = run(&anthropic(&server), request("claude-sonnet-5-5")).await;
    assert_eq!(result.unwrap().message.text(), "recovered");
    assert!(matches!(retries(&events)[0].2, LlmError::Overloaded { .. }));
}

#[tokio::test]
async fn prompt_too_long_is_a_context_overflow_and_never_retried() {
    let server = TestServer::start().await;
    server.set_context_limit(Some(ContextLimit {
        max_body_bytes: 200,
        once: false,
    }));
    server.push(Reply::text("unused"));
    let (result, events) = run(&anthropic(&server), request("claude-sonnet-5-5")).await;
    let err = result.unwrap_err();
    let LlmError::ContextOverflow { tokens, limit, .. } = &err else {
        panic!("{err}")
    };
    assert_eq!(*limit, Some(50));
    assert!(tokens.unwrap() > 50);
    assert!(retries(&events).is_empty());
    assert_eq!(server.requests().len(), 1);
    assert!(err.to_string().contains("prompt is too long"));

    // Once: after compaction the same call succeeds.
    server.set_context_limit(Some(ContextLimit {
        max_body_bytes: 200,
        once: true,
    }));
    assert!(
        run(&anthropic(&server), request("claude-sonnet-5-5"))
            .await
            .0
            .unwrap_err()
            .is_context_overflow()
    );
    assert_eq!(
        run(&anthropic(&server), request("claude-sonnet-5-5"))
            .await
            .0
            .unwrap()
            .message
            .text(),
        "unused"
    );
}

#[tokio::test]
async fn permanent_errors_are_not_retried() {
    let server = TestServer::start().await;
    for status in [400, 401, 403, 402, 404] {
        server.push(Fault::status(status));
    }
    let expected = [
        "InvalidRequest",
        "Auth",
        "Auth",
        "Billing",
        "InvalidRequest",
    ];
    for kind in expected {
        let (result, events) = run(&anthropic(&server), request("claude-sonnet-5-5")).await;
        let err = result.unwrap_err();
        assert!(format!("{err:?}").starts_with(kind), "{err:?}");
        assert!(retries(&events).is_empty());
    }
    assert_eq!(server.requests().len(), 5);
}

#[tokio::test]
async fn every_chunking_gives_the_same_message() {
    let reply = Reply::new()
        .with_thinking(
            "Planning the change, step by step.",
            "c2lnbmF0dXJlLWJ5dGVz+/==",
        )
        .with_text("Ünïcode text with emoji 🦀 split anywhere.")
        .with_tool_use(
            "toolu_9",
            "bash",
            json!({"command": "cargo test -p whittle-llm", "env": {"A": "ü"}}),
        )
        .with_usage(10, 20);
    let server = TestServer::start().await;
    let mut baseline = None;
    for (max_chunk, seed) in [(0, 0), (1, 1), (2, 2), (3, 3), (5, 4), (64, 5), (1, 99)] {
        server.set_chunking(Chunking { max_chunk, seed });
        server.push(reply.clone());
        let response = run(&anthropic(&server), request("claude-sonnet-5-5"))
            .await
            .0
            .unwrap();
        match &baseline {
            None => baseline = Some(response),
            Some(b) => assert_eq!(&response.message, &b.message, "chunking {max_chunk}/{seed}"),
        }
    }
}

#[tokio::test]
async fn an_exhausted_script_fails_loudly() {
    let server = TestServer::start().await;
    let (result, _) = run(&anthropic(&server), request("claude-sonnet-5-5")).await;
    let err = result.unwrap_err().to_string();
    assert!(err.contains("no scripted response left"), "{err}");
}

/// A server that starts one event-stream event and never ends it: `data:`
/// lines, each short, for as long as the client reads. Every line is under
/// the line bound, so only a bound on the event itself stops it.
#[tokio::test]
async fn an_event_that_never_ends_is_a_malformed_response() {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || endless_event(&listener));
    let mut config = AnthropicConfig::new(
        "claude-sonnet-5-5",
        AnthropicAuth::ApiKey(Secret::new(ANTHROPIC_KEY)),
    );
    config.base_url = format!("http://127.0.0.1:{port}");
    config.retry = RetryPolicy {
        max_retries: 0,
        ..fast_retry()
    };
    let provider = AnthropicProvider::new(config).unwrap();
    let err = run(&provider, request("claude-sonnet-5-5"))
        .await
        .0
        .unwrap_err();
    assert!(matches!(err, LlmError::MalformedResponse { .. }), "{err:?}");
    assert!(err.to_string().contains("event"), "{err}");
    // Joined off the runtime: the connection's task, which closes it, runs there.
    let sent = tokio::task::spawn_blocking(move || server.join().unwrap())
        .await
        .unwrap();
    assert!(
        sent <= 80 << 20,
        "the client read {sent} bytes of one event"
    );
}

/// Answers one request with an event-stream that is one unending event, up
/// to 128 MiB, then holds the connection silent until the client hangs up.
/// Returns how many bytes the client took.
fn endless_event(listener: &std::net::TcpListener) -> usize {
    use std::io::{Read, Write};
    let (mut socket, _) = listener.accept().unwrap();
    let mut request = Vec::new();
    let mut buf = [0u8; 64 * 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = socket.read(&mut buf).unwrap();
        request.extend_from_slice(&buf[..n]);
    }
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\nevent: message_start\n";
    socket.write_all(head.as_bytes()).unwrap();
    let line = format!("data: {}\n", "x".repeat(64 * 1024));
    let mut sent = 0;
    while sent < 128 << 20 {
        if socket.write_all(line.as_bytes()).is_err() {
            return sent;
        }
        sent += line.len();
    }
    // Silent: the client's idle timeout ends it, or its bound did already.
    while socket.read(&mut buf).is_ok_and(|n| n > 0) {}
    sent
}
