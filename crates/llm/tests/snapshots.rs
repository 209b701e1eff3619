//! The exact JSON each provider sends for a conversation with tool calls,
//! images and cache breakpoints.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;
use whittle_llm::{
    AnthropicAuth, AnthropicConfig, AnthropicProvider, OpenAiConfig, OpenAiProvider, Secret,
};

fn anthropic_with_version(version: &str) -> AnthropicProvider {
    let mut config =
        AnthropicConfig::new("claude-sonnet-5-5", AnthropicAuth::ApiKey(Secret::new("k")));
    config.version = version.into();
    AnthropicProvider::new(config).unwrap()
}

#[test]
fn anthropic_body_current_version_with_cache_breakpoints() {
    // temperature is set on the request but must not be sent under 2026-10-21.
    let body =
        anthropic_with_version("2026-10-21").request_body(&conversation("claude-sonnet-5-5"));
    insta::assert_json_snapshot!(body);
}

#[test]
fn anthropic_body_older_version_without_cache() {
    let mut request = conversation("claude-sonnet-4-5");
    request.cache = false;
    let body = anthropic_with_version("2023-06-01").request_body(&request);
    insta::assert_json_snapshot!(body);
}

#[test]
fn openai_body_for_a_local_server() {
    let config = OpenAiConfig::new("qwen2.5-coder:7b", "http://localhost:11434/v1", None);
    let body = OpenAiProvider::new(config)
        .unwrap()
        .request_body(&conversation("qwen2.5-coder:7b"));
    insta::assert_json_snapshot!(body);
}

#[test]
fn openai_body_for_openai() {
    let config = OpenAiConfig::new("gpt-5", "https://api.openai.com/v1", Some(Secret::new("k")));
    let mut request = conversation("gpt-5");
    request.temperature = None;
    let body = OpenAiProvider::new(config).unwrap().request_body(&request);
    insta::assert_json_snapshot!(body);
}
