//! What a user sees when the setup is wrong: one line naming the variable
//! or the address, never the key, never a panic.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;
use std::time::Duration;
use testkit::{Fault, TestServer};
use whittle_llm::{
    AnthropicConfig, AnthropicProvider, LlmError, OpenAiConfig, OpenAiProvider, Provider,
};

fn assert_one_line(err: &LlmError) -> String {
    let line = err.to_string();
    assert!(!line.contains('\n'), "{line}");
    assert!(
        !line.contains(ANTHROPIC_KEY) && !line.contains(OPENAI_KEY),
        "{line}"
    );
    line
}

#[test]
fn no_key_names_the_variable() {
    let err = AnthropicConfig::from_env_with("claude-sonnet-5-5", |_| None).unwrap_err();
    let line = assert_one_line(&err);
    assert!(line.contains("ANTHROPIC_API_KEY"), "{line}");
    let err = OpenAiConfig::from_env_with("gpt-5", |_| None).unwrap_err();
    assert!(assert_one_line(&err).contains("OPENAI_API_KEY"));
}

#[tokio::test]
async fn wrong_key_is_one_auth_line_naming_the_variable() {
    let server = TestServer::start().await;
    server.push(Fault::status(401));
    let err = run(&anthropic(&server), request("claude-sonnet-5-5"))
        .await
        .0
        .unwrap_err();
    let line = assert_one_line(&err);
    assert!(matches!(err, LlmError::Auth { status: 401, .. }));
    assert!(
        line.contains("ANTHROPIC_API_KEY") && line.contains("invalid x-api-key"),
        "{line}"
    );
    assert_eq!(server.requests().len(), 1, "a 401 is never retried");
}

/// A loopback port with nothing listening.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    listener.local_addr().unwrap().port()
}

#[tokio::test]
async fn unreachable_base_url_names_the_address() {
    let port = closed_port();
    let env = |k: &str| match k {
        "ANTHROPIC_API_KEY" => Some(ANTHROPIC_KEY.to_owned()),
        "ANTHROPIC_BASE_URL" => Some(format!("http://127.0.0.1:{port}")),
        _ => None,
    };
    let mut config = AnthropicConfig::from_env_with("claude-sonnet-5-5", env).unwrap();
    config.retry = fast_retry();
    let provider = AnthropicProvider::new(config).unwrap();
    let (result, events) = run(&provider, request("claude-sonnet-5-5")).await;
    let err = result.unwrap_err();
    let line = assert_one_line(&err);
    assert!(matches!(err, LlmError::Transport { .. }), "{err:?}");
    assert!(line.contains(&format!("127.0.0.1:{port}")), "{line}");
    assert_eq!(retries(&events).len(), 4, "transport failures are retried");

    let mut config = OpenAiConfig::new("gpt-5", format!("http://127.0.0.1:{port}/v1"), None);
    config.retry = whittle_llm::RetryPolicy::none();
    let err = run(&OpenAiProvider::new(config).unwrap(), request("gpt-5"))
        .await
        .0
        .unwrap_err();
    assert!(assert_one_line(&err).contains(&format!("127.0.0.1:{port}/v1/chat/completions")));
}

#[test]
fn malformed_base_urls_are_config_errors_naming_the_variable() {
    for base in ["localhost:8080", "ftp://x", "::", ""] {
        let env = |k: &str| match k {
            "OPENAI_API_KEY" => Some("k".to_owned()),
            "OPENAI_BASE_URL" => Some(base.to_owned()),
            _ => None,
        };
        let result = OpenAiConfig::from_env_with("m", env).and_then(OpenAiProvider::new);
        if base.is_empty() {
            // Empty means unset: the default URL, which is fine.
            assert!(result.is_ok());
            continue;
        }
        let err = result.unwrap_err();
        assert!(assert_one_line(&err).contains("OPENAI_BASE_URL"), "{err}");
    }
}

#[tokio::test]
async fn a_server_that_is_not_an_llm_api_gives_a_clear_error() {
    // testkit answers unknown paths with 404: like pointing the base URL at
    // the wrong server or path.
    let server = TestServer::start().await;
    let mut config = openai_config(&server);
    config.base_url = format!("{}/wrong", server.url());
    config.retry.idle_timeout = Duration::from_secs(2);
    let err = run(&OpenAiProvider::new(config).unwrap(), request("gpt-5"))
        .await
        .0
        .unwrap_err();
    let line = assert_one_line(&err);
    assert!(
        matches!(err, LlmError::InvalidRequest { status: 404, .. }),
        "{line}"
    );
    assert!(line.contains("no API at"), "{line}");
}

#[tokio::test]
async fn providers_are_usable_as_trait_objects() {
    let server = TestServer::start().await;
    server.push(testkit::Reply::text("a"));
    server.push(testkit::Reply::text("b"));
    let providers: Vec<std::sync::Arc<dyn Provider>> = vec![
        std::sync::Arc::new(anthropic(&server)),
        std::sync::Arc::new(openai(&server)),
    ];
    let mut texts = Vec::new();
    for p in &providers {
        let response = whittle_llm::complete(p.as_ref(), request(p.model()))
            .await
            .unwrap();
        texts.push(format!("{}:{}", p.name(), response.message.text()));
    }
    assert_eq!(texts, ["anthropic:a", "openai:b"]);
}
