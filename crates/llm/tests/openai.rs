//! The OpenAI-compatible provider against the scripted server: content,
//! usage in each server's style, and every fault class with real bodies.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;
use serde_json::json;
use std::time::Duration;
use testkit::{Chunking, ContextLimit, Fault, Reply, TestServer, UsageStyle};
use whittle_llm::{LlmError, OpenAiProvider, StopReason, Usage};
use whittle_protocol::{Block, Content};

#[tokio::test]
async fn text_reply_and_the_request_it_sent() {
    let server = TestServer::start().await;
    server.push(Reply::text("Hello from a chat server ✓"));
    let (result, _) = run(&openai(&server), request("qwen2.5-coder:7b")).await;
    let response = result.unwrap();
    assert_eq!(response.message.text(), "Hello from a chat server ✓");
    assert_eq!(response.stop_reason, Some(StopReason::EndTurn));
    assert_eq!(response.id, "chatcmpl-testkit-1");

    let sent = &server.requests()[0];
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(
        sent.header("authorization"),
        Some(format!("Bearer {OPENAI_KEY}").as_str())
    );
    assert_eq!(sent.body["model"], "qwen2.5-coder:7b");
    assert_eq!(sent.body["stream"], json!(true));
    assert_eq!(sent.body["stream_options"], json!({"include_usage": true}));
    assert_eq!(sent.body["max_tokens"], json!(8192));
    assert_eq!(
        sent.body["messages"][0],
        json!({"role": "system", "content": "You are a coding agent."})
    );
    assert_eq!(sent.body["tools"][0]["function"]["name"], "bash");
}

#[tokio::test]
async fn no_key_sends_no_authorization() {
    let server = TestServer::start().await;
    server.push(Reply::text("local"));
    let mut config = openai_config(&server);
    config.api_key = None;
    run(&OpenAiProvider::new(config).unwrap(), request("llama"))
        .await
        .0
        .unwrap();
    assert_eq!(server.requests()[0].header("authorization"), None);
}

#[tokio::test]
async fn parallel_tool_calls_are_assembled_from_indexed_deltas() {
    let server = TestServer::start().await;
    server.set_chunking(Chunking {
        max_chunk: 3,
        seed: 11,
    });
    server.push(
        Reply::text("Checking.")
            .with_tool_use("call_a", "bash", json!({"command": "ls -la"}))
            .with_tool_use("call_b", "read_file", json!({"path": "ü/ß.rs"})),
    );
    let (result, _) = run(&openai(&server), request("gpt-5")).await;
    let response = result.unwrap();
    assert_eq!(response.stop_reason, Some(StopReason::ToolUse));
    assert_eq!(
        serde_json::to_value(&response.message).unwrap(),
        json!({"role": "assistant", "content": [
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "call_a", "name": "bash", "input": {"command": "ls -la"}},
            {"type": "tool_use", "id": "call_b", "name": "read_file", "input": {"path": "ü/ß.rs"}},
        ]})
    );
}

#[tokio::test]
async fn whole_tool_calls_in_one_chunk_with_object_arguments_work() {
    // Ollama sends a complete call at once; some servers send arguments as an object.
    let server = TestServer::start().await;
    server.push(Reply::new().with_raw_events([(
        "",
        json!({"id": "x", "model": "llama3.1", "choices": [{"index": 0, "delta": {"role": "assistant",
            "tool_calls": [{"id": "call_0", "type": "function", "function": {"name": "bash", "arguments": {"command": "pwd"}}}]},
            "finish_reason": "stop"}]}),
    )]));
    let (result, _) = run(&openai(&server), request("llama3.1")).await;
    let response = result.unwrap();
    // "stop" with tool calls is read as a tool_use stop.
    assert_eq!(response.stop_reason, Some(StopReason::ToolUse));
    let call = response.message.tool_uses().next().unwrap();
    assert_eq!(
        (call.id.as_str(), &call.input),
        ("call_0", &json!({"command": "pwd"}))
    );
}

#[tokio::test]
async fn calls_sent_without_ids_get_ids_that_never_repeat() {
    // Some servers leave `id` out: `call_0` in every answer would pair a
    // result with another answer's call, and name another call's output file.
    let server = TestServer::start().await;
    let answer = || {
        Reply::new().with_raw_events([(
            "",
            json!({"model": "local", "choices": [{"index": 0, "delta": {"role": "assistant",
                "tool_calls": [
                    {"index": 0, "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}},
                    {"index": 1, "id": "", "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"pwd\"}"}}
                ]},
                "finish_reason": "tool_calls"}]}),
        )])
    };
    server.push(answer());
    server.push(answer());
    let mut ids = Vec::new();
    for _ in 0..2 {
        let (result, _) = run(&openai(&server), request("local")).await;
        let message = result.unwrap().message;
        let calls: Vec<_> = message.tool_uses().collect();
        assert_eq!(calls.len(), 2, "{message:?}");
        ids.extend(calls.iter().map(|c| c.id.clone()));
    }
    let distinct: std::collections::HashSet<&String> = ids.iter().collect();
    assert_eq!(distinct.len(), 4, "ids repeat: {ids:?}");
    assert!(
        ids.iter()
            .all(|id| id.starts_with("call_") && id.len() > 10),
        "{ids:?}"
    );
}

#[tokio::test]
async fn reasoning_content_becomes_a_thinking_block() {
    let server = TestServer::start().await;
    server.push(
        Reply::new()
            .with_thinking("First, think.", "ignored-by-openai")
            .with_text("Done."),
    );
    let (result, _) = run(&openai(&server), request("deepseek-r1")).await;
    let message = result.unwrap().message;
    let Content::Blocks(blocks) = message.content() else {
        panic!()
    };
    let Block::Thinking(t) = &blocks[0] else {
        panic!("{blocks:?}")
    };
    assert_eq!(
        (t.thinking.as_str(), t.signature.as_deref()),
        ("First, think.", None)
    );
    assert_eq!(message.text(), "Done.");
}

#[tokio::test]
async fn usage_is_read_in_every_servers_style() {
    let server = TestServer::start().await;
    let expected = Usage {
        input_tokens: 900,
        output_tokens: 40,
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: 100,
    };
    for style in [UsageStyle::SeparateChunk, UsageStyle::OnFinishChunk] {
        server.set_usage_style(style);
        server.push(Reply::text("u").with_usage(900, 40).with_cache(0, 100));
        let usage = run(&openai(&server), request("gpt-5"))
            .await
            .0
            .unwrap()
            .usage;
        assert_eq!(usage, expected, "{style:?}");
        assert_eq!(usage.total_input_tokens(), 1000);
    }
    server.set_usage_style(UsageStyle::None);
    server.push(Reply::text("u"));
    let usage = run(&openai(&server), request("gpt-5"))
        .await
        .0
        .unwrap()
        .usage;
    assert_eq!(usage, Usage::default());
}

#[tokio::test]
async fn rate_limit_overload_and_server_errors_are_retried() {
    let server = TestServer::start().await;
    server.push(Fault::rate_limited(0));
    server.push(Fault::status(503));
    server.push(Fault::overloaded());
    server.push(Fault::server_error());
    server.push(Reply::text("finally"));
    let (result, events) = run(&openai(&server), request("gpt-5")).await;
    assert_eq!(result.unwrap().message.text(), "finally");
    let r = retries(&events);
    assert!(
        matches!(r[0].2, LlmError::RateLimited { retry_after: Some(d), .. } if d == Duration::ZERO)
    );
    assert!(matches!(r[1].2, LlmError::Server { status: 503, .. }));
    assert!(matches!(r[2].2, LlmError::Overloaded { .. }));
    assert!(matches!(r[3].2, LlmError::Server { status: 500, .. }));
}

#[tokio::test]
async fn cut_stall_and_malformed_streams() {
    let server = TestServer::start().await;
    server.push(Fault::cut_after(Reply::text("lost"), 25));
    server.push(Fault::stall(Reply::text("silent"), 10));
    server.push(Reply::text("recovered"));
    let mut config = openai_config(&server);
    config.retry.idle_timeout = Duration::from_millis(300);
    let provider = OpenAiProvider::new(config).unwrap();
    let (result, events) = run(&provider, request("gpt-5")).await;
    assert_eq!(result.unwrap().message.text(), "recovered");
    assert_eq!(retries(&events).len(), 2);

    server.push(Fault::malformed_event(Reply::text("broken"), 2));
    let err = run(&provider, request("gpt-5")).await.0.unwrap_err();
    assert!(matches!(err, LlmError::MalformedResponse { .. }), "{err}");
}

#[tokio::test]
async fn context_length_exceeded_is_an_overflow() {
    let server = TestServer::start().await;
    server.set_context_limit(Some(ContextLimit {
        max_body_bytes: 100,
        once: false,
    }));
    let (result, events) = run(&openai(&server), request("gpt-5")).await;
    let err = result.unwrap_err();
    assert!(
        matches!(
            err,
            LlmError::ContextOverflow {
                limit: Some(25),
                ..
            }
        ),
        "{err:?}"
    );
    assert!(retries(&events).is_empty());
}

#[tokio::test]
async fn local_servers_overflow_bodies_are_overflows() {
    let bodies = [
        // llama.cpp server
        (
            400,
            r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":14429,"n_ctx":8192}}"#,
        ),
        // vLLM
        (
            400,
            r#"{"object":"error","message":"This model's maximum context length is 16384 tokens. However, you requested 122946 tokens (112946 in the messages, 10000 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}"#,
        ),
        // Ollama with truncate off
        (
            400,
            r#"{"error":"{\"error\":{\"code\":400,\"message\":\"request (351 tokens) exceeds the available context size (256 tokens), try increasing it\",\"type\":\"exceed_context_size_error\",\"n_prompt_tokens\":351,\"n_ctx\":256}}"}"#,
        ),
        // LM Studio
        (
            400,
            r#"{"error":"Trying to keep the first 10136 tokens when context the overflows. However, the model is loaded with context length of only 7866 tokens, which is not enough. Try to load the model with a larger context length, or provide a shorter input."}"#,
        ),
    ];
    let server = TestServer::start().await;
    for (status, body) in bodies {
        server.push(Fault::status_with_body(status, body));
        let err = run(&openai(&server), request("local")).await.0.unwrap_err();
        assert!(err.is_context_overflow(), "{body} -> {err:?}");
    }
}

#[tokio::test]
async fn an_error_chunk_inside_a_200_stream_is_classified() {
    let server = TestServer::start().await;
    server.push(Reply::new().with_raw_events([(
        "",
        json!({"error": {"message": "This model's maximum context length is 8192 tokens. However, your messages resulted in 9001 tokens.", "type": "invalid_request_error", "code": "context_length_exceeded"}}),
    )]));
    let err = run(&openai(&server), request("gpt-5")).await.0.unwrap_err();
    assert!(
        matches!(
            err,
            LlmError::ContextOverflow {
                tokens: Some(9001),
                limit: Some(8192),
                ..
            }
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn wrong_key_is_an_auth_error_without_the_key() {
    let server = TestServer::start().await;
    let body = format!(
        r#"{{"error":{{"message":"Incorrect API key provided: {OPENAI_KEY}. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}}}"#
    );
    server.push(Fault::status_with_body(401, body));
    let (result, events) = run(&openai(&server), request("gpt-5")).await;
    let err = result.unwrap_err();
    let line = err.to_string();
    assert!(matches!(err, LlmError::Auth { status: 401, .. }));
    assert!(line.contains("OPENAI_API_KEY"), "{line}");
    assert!(!line.contains(OPENAI_KEY), "{line}");
    assert!(retries(&events).is_empty());
}

#[tokio::test]
async fn a_json_answer_instead_of_a_stream_is_a_clear_error() {
    let server = TestServer::start().await;
    server.push(Fault::plain_json(json!({"id": "chatcmpl-1", "choices": [{"message": {"role": "assistant", "content": "hi"}}]})));
    let err = run(&openai(&server), request("gpt-5")).await.0.unwrap_err();
    assert!(matches!(err, LlmError::MalformedResponse { .. }), "{err}");
    assert!(err.to_string().contains("instead of an event stream"));
    // A gateway that reports errors with status 200.
    server.push(Fault::plain_json(
        json!({"error": {"message": "Rate limit exceeded", "type": "rate_limit_error"}}),
    ));
    server.push(Reply::text("then fine"));
    let (result, events) = run(&openai(&server), request("gpt-5")).await;
    assert_eq!(result.unwrap().message.text(), "then fine");
    assert!(matches!(
        retries(&events)[0].2,
        LlmError::RateLimited { .. }
    ));
}
