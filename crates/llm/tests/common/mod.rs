//! Providers pointed at a testkit server, with retries fast enough for tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;
use std::time::Duration;
use testkit::TestServer;
use whittle_llm::{
    AnthropicAuth, AnthropicConfig, AnthropicProvider, LlmError, ModelRequest, ModelResponse,
    OpenAiConfig, OpenAiProvider, Provider, RetryPolicy, Secret, StreamEvent, ToolSpec, collect,
};
use whittle_protocol::{Block, Message};

pub const ANTHROPIC_KEY: &str = "sk-ant-api03-testkey-0123456789";
pub const OPENAI_KEY: &str = "sk-proj-testkey-9876543210";

pub fn fast_retry() -> RetryPolicy {
    RetryPolicy {
        initial_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(5),
        idle_timeout: Duration::from_secs(5),
        ..RetryPolicy::default()
    }
}

pub fn anthropic_config(server: &TestServer) -> AnthropicConfig {
    let mut c = AnthropicConfig::new(
        "claude-sonnet-5-5",
        AnthropicAuth::ApiKey(Secret::new(ANTHROPIC_KEY)),
    );
    c.base_url = server.url();
    c.retry = fast_retry();
    c
}

pub fn anthropic(server: &TestServer) -> AnthropicProvider {
    AnthropicProvider::new(anthropic_config(server)).unwrap()
}

pub fn openai_config(server: &TestServer) -> OpenAiConfig {
    let mut c = OpenAiConfig::new(
        "gpt-5",
        server.openai_base_url(),
        Some(Secret::new(OPENAI_KEY)),
    );
    c.retry = fast_retry();
    c
}

pub fn openai(server: &TestServer) -> OpenAiProvider {
    OpenAiProvider::new(openai_config(server)).unwrap()
}

pub fn tools() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: "bash".into(),
            description: "Run a shell command.".into(),
            input_schema: json!({"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}),
        },
        ToolSpec {
            name: "read_file".into(),
            description: "Read a file.".into(),
            input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        },
    ]
}

pub fn request(model: &str) -> ModelRequest {
    let mut r = ModelRequest::new(
        model,
        "You are a coding agent.",
        vec![Message::user("List the files.")],
    );
    r.tools = tools();
    r
}

/// A conversation with a tool round trip and an image, for snapshots.
pub fn conversation(model: &str) -> ModelRequest {
    let image = Block::from_value(json!({"type": "image", "source": {
        "type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}));
    let messages = vec![
        Message::user_blocks(vec![
            Block::text("What is in this screenshot, and which files are here?"),
            image.clone(),
        ]),
        Message::assistant_blocks(vec![
            Block::from_value(
                json!({"type": "thinking", "thinking": "I should look.", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3h"}),
            ),
            Block::text("Let me look."),
            Block::tool_use("toolu_01", "bash", json!({"command": "ls"})),
            Block::tool_use("toolu_02", "read_file", json!({"path": "shot.png"})),
        ]),
        Message::user_blocks(vec![
            Block::tool_result("toolu_01", "Cargo.toml\nsrc\n", false),
            Block::from_value(
                json!({"type": "tool_result", "tool_use_id": "toolu_02", "content": [
                {"type": "text", "text": "shot.png (1 image)"}, image]}),
            ),
        ]),
        Message::assistant("It is a terminal showing a Rust project."),
        Message::user("Thanks. Now run the tests."),
    ];
    let mut r = ModelRequest::new(model, "You are whittle, a coding agent.", messages);
    r.tools = tools();
    r.max_tokens = 4096;
    r.temperature = Some(0.7);
    r
}

/// Runs one call, returning the result and every event seen.
pub async fn run(
    provider: &dyn Provider,
    request: ModelRequest,
) -> (Result<ModelResponse, LlmError>, Vec<StreamEvent>) {
    let mut events = Vec::new();
    let result = match provider.stream(request).await {
        Ok(stream) => collect(stream, |e| events.push(e.clone())).await,
        Err(e) => Err(e),
    };
    (result, events)
}

pub fn retries(events: &[StreamEvent]) -> Vec<(u32, Duration, LlmError)> {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Retry {
                attempt,
                delay,
                reason,
            } => Some((*attempt, *delay, reason.clone())),
            _ => None,
        })
        .collect()
}
