//! The server answered over real loopback TCP with a minimal HTTP/1.1 client.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};
use testkit::{Api, Chunking, ContextLimit, Fault, Reply, TestServer, UsageStyle};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

struct Answer {
    status: u16,
    head: String,
    body: String,
}

/// Decodes `Transfer-Encoding: chunked`, or returns the body as is.
fn dechunk(head: &str, body: &[u8]) -> Vec<u8> {
    if !head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        return body.to_vec();
    }
    let mut out = Vec::new();
    let mut rest = body;
    while let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") {
        let size =
            usize::from_str_radix(std::str::from_utf8(&rest[..eol]).unwrap().trim(), 16).unwrap();
        if size == 0 {
            break;
        }
        out.extend_from_slice(&rest[eol + 2..eol + 2 + size]);
        rest = &rest[eol + 2 + size + 2..];
    }
    out
}

async fn post(server: &TestServer, path: &str, body: &Value) -> Answer {
    let mut stream = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    let body = body.to_string();
    let request = format!(
        "POST {path} HTTP/1.1\r\nhost: x\r\nx-api-key: k1\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.unwrap();
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8(raw[..split].to_vec()).unwrap();
    let status = head[9..12].parse().unwrap();
    let body = String::from_utf8(dechunk(&head, &raw[split + 4..])).unwrap();
    Answer { status, head, body }
}

#[tokio::test]
async fn records_requests_and_streams_anthropic_events() {
    let server = TestServer::start().await;
    server.push(Reply::text("héllo wörld").with_tool_use("t1", "bash", json!({"command": "ls"})));
    let answer = post(
        &server,
        "/v1/messages",
        &json!({"model": "claude-x", "messages": []}),
    )
    .await;
    assert_eq!(answer.status, 200);
    assert!(answer.head.contains("text/event-stream"));
    for needle in [
        "event: message_start",
        "\"model\":\"claude-x\"",
        "\"text\":\"héllo w\"",
        "\"partial_json\":",
        "\"stop_reason\":\"tool_use\"",
        "event: message_stop",
    ] {
        assert!(answer.body.contains(needle), "{needle} in {}", answer.body);
    }
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].header("X-Api-Key"), Some("k1"));
    assert_eq!(requests[0].body["model"], "claude-x");
    assert_eq!(requests[0].api(), Api::Anthropic);
    assert_eq!(server.remaining(), 0);
}

#[tokio::test]
async fn openai_stream_has_tool_call_deltas_usage_and_done() {
    let server = TestServer::start().await;
    server.set_chunking(Chunking {
        max_chunk: 0,
        seed: 0,
    });
    server.push(Reply::tool_uses([
        ("c1", "a", json!({"x": 1})),
        ("c2", "b", json!({})),
    ]));
    let body = json!({"model": "gpt-x", "messages": [], "stream": true, "stream_options": {"include_usage": true}});
    let answer = post(&server, "/v1/chat/completions", &body).await;
    assert_eq!(answer.status, 200);
    let b = &answer.body;
    assert!(b.contains("\"index\":1,\"id\":\"c2\""), "{b}");
    assert!(b.contains("\"finish_reason\":\"tool_calls\""));
    assert!(b.contains("\"choices\":[],"), "usage chunk: {b}");
    assert!(b.trim_end().ends_with("data: [DONE]"));

    server.set_usage_style(UsageStyle::OnFinishChunk);
    server.push(Reply::text("hi"));
    let answer = post(&server, "/v1/chat/completions", &body).await;
    assert!(!answer.body.contains("\"choices\":[]"));
    assert!(answer.body.contains("\"prompt_tokens\""));
}

#[tokio::test]
async fn an_empty_queue_answers_a_clear_error_at_once() {
    let server = TestServer::start().await;
    let answer = post(&server, "/v1/messages", &json!({})).await;
    assert_eq!(answer.status, 400);
    assert!(
        answer
            .body
            .contains("no scripted response left for request #1"),
        "{}",
        answer.body
    );
    let answer = post(&server, "/elsewhere", &json!({})).await;
    assert_eq!(answer.status, 404);
}

#[tokio::test]
async fn context_limit_answers_the_real_overflow_bodies() {
    let server = TestServer::start().await;
    server.set_context_limit(Some(ContextLimit {
        max_body_bytes: 100,
        once: true,
    }));
    server.push(Reply::text("fits now"));
    let big = json!({"model": "m", "messages": [{"role": "user", "content": "x".repeat(400)}]});
    let answer = post(&server, "/v1/messages", &big).await;
    assert_eq!(answer.status, 400);
    let v: Value = serde_json::from_str(&answer.body).unwrap();
    assert_eq!(v["error"]["type"], "invalid_request_error");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("prompt is too long: ") && message.ends_with(" tokens > 25 maximum"),
        "{message}"
    );
    // Once: the next oversized request goes through and consumes the queue.
    assert_eq!(post(&server, "/v1/messages", &big).await.status, 200);

    server.set_context_limit(Some(ContextLimit {
        max_body_bytes: 100,
        once: false,
    }));
    for _ in 0..2 {
        let answer = post(&server, "/v1/chat/completions", &big).await;
        let v: Value = serde_json::from_str(&answer.body).unwrap();
        assert_eq!(v["error"]["code"], "context_length_exceeded");
    }
}

#[tokio::test]
async fn status_faults_carry_retry_after_and_real_bodies() {
    let server = TestServer::start().await;
    server.push(Fault::rate_limited(3));
    server.push(Fault::overloaded());
    server.push(Fault::status_with_body(500, "plain text"));
    let a = post(&server, "/v1/messages", &json!({})).await;
    assert_eq!(a.status, 429);
    assert!(a.head.to_ascii_lowercase().contains("retry-after: 3"));
    assert!(a.body.contains("rate_limit_error"));
    let a = post(&server, "/v1/messages", &json!({})).await;
    assert_eq!((a.status, a.body.contains("overloaded_error")), (529, true));
    let a = post(&server, "/v1/messages", &json!({})).await;
    assert_eq!((a.status, a.body.as_str()), (500, "plain text"));
}

#[tokio::test]
async fn responders_see_the_request() {
    let server = TestServer::start().await;
    server.push_fn(|req| Reply::text(format!("you said: {}", req.last_message_text())).into());
    let body = json!({"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "ping"}]}]});
    let a = post(&server, "/v1/messages", &body).await;
    assert!(a.body.contains("\"you sai\""), "{}", a.body);
    assert!(a.body.contains("\"d: ping\""), "{}", a.body);
}

#[test]
fn works_without_an_async_runtime() {
    let server = TestServer::start_blocking();
    assert!(server.url().starts_with("http://127.0.0.1:"));
    assert!(server.openai_base_url().ends_with("/v1"));
}
