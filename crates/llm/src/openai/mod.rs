//! OpenAI-compatible chat completions, streamed: OpenAI, Ollama, llama.cpp
//! server, vLLM, LM Studio.

mod body;
mod parse;

pub use body::MaxTokensField;

use crate::anthropic::checked_base_url;
use crate::error::LlmError;
use crate::event::EventStream;
use crate::http::{HttpCall, build_client, parse_events};
use crate::provider::{BoxFuture, Provider};
use crate::request::ModelRequest;
use crate::retry::{Attempt, RetryPolicy, retrying};
use crate::secret::Secret;
use parse::OpenAiParser;
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::Value;
use std::time::Duration;

/// Where the API lives unless `OPENAI_BASE_URL` says otherwise.
pub const DEFAULT_OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

/// Everything an [`OpenAiProvider`] needs.
#[derive(Clone, Debug, PartialEq)]
pub struct OpenAiConfig {
    /// The model requests default to.
    pub model: String,
    /// Up to and including the version path, e.g. `http://localhost:11434/v1`;
    /// `/chat/completions` is appended.
    pub base_url: String,
    /// Sent as `Authorization: Bearer`; local servers need none.
    pub api_key: Option<Secret>,
    /// Which field carries `max_tokens`.
    pub max_tokens_field: MaxTokensField,
    /// Retries and the idle timeout (default 300 s: a local server on a CPU
    /// can think for minutes before its first token).
    pub retry: RetryPolicy,
}

fn is_openai_host(base_url: &str) -> bool {
    reqwest::Url::parse(base_url)
        .ok()
        .and_then(|u| u.host_str().map(|h| h == "api.openai.com"))
        .unwrap_or(false)
}

impl OpenAiConfig {
    /// A configuration for `base_url`, with the output-limit field that
    /// server expects.
    pub fn new(
        model: impl Into<String>,
        base_url: impl Into<String>,
        api_key: Option<Secret>,
    ) -> Self {
        let base_url = base_url.into();
        let max_tokens_field = if is_openai_host(&base_url) {
            MaxTokensField::MaxCompletionTokens
        } else {
            MaxTokensField::MaxTokens
        };
        OpenAiConfig {
            model: model.into(),
            base_url,
            api_key,
            max_tokens_field,
            retry: RetryPolicy {
                idle_timeout: Duration::from_secs(300),
                ..RetryPolicy::default()
            },
        }
    }

    /// Reads `OPENAI_API_KEY` and `OPENAI_BASE_URL` from the process environment.
    pub fn from_env(model: impl Into<String>) -> Result<Self, LlmError> {
        Self::from_env_with(model, |k| std::env::var(k).ok())
    }

    /// [`OpenAiConfig::from_env`] with the variables looked up by `env`. The
    /// key is optional except for OpenAI's own API.
    pub fn from_env_with(
        model: impl Into<String>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, LlmError> {
        let get = |k: &str| env(k).filter(|v| !v.trim().is_empty());
        let base_url = get("OPENAI_BASE_URL")
            .map(|b| b.trim().to_owned())
            .unwrap_or_else(|| DEFAULT_OPENAI_BASE_URL.to_owned());
        let api_key = get("OPENAI_API_KEY").map(|k| Secret::new(k.trim()));
        if api_key.is_none() && is_openai_host(&base_url) {
            return Err(LlmError::MissingApiKey {
                provider: "openai".into(),
                var: "OPENAI_API_KEY (or OPENAI_BASE_URL for a local server)".into(),
            });
        }
        Ok(OpenAiConfig::new(model, base_url, api_key))
    }
}

/// A [`Provider`] for OpenAI-compatible chat-completions servers.
#[derive(Debug)]
pub struct OpenAiProvider {
    config: OpenAiConfig,
    client: reqwest::Client,
    url: String,
    headers: HeaderMap,
}

impl OpenAiProvider {
    /// A provider for `config`; fails on an unusable base URL or key.
    pub fn new(config: OpenAiConfig) -> Result<Self, LlmError> {
        let url = format!(
            "{}/chat/completions",
            checked_base_url(&config.base_url, "OPENAI_BASE_URL")?
        );
        let mut headers = HeaderMap::new();
        headers.insert(
            reqwest::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Some(key) = &config.api_key {
            let mut value =
                HeaderValue::from_str(&format!("Bearer {}", key.expose())).map_err(|_| {
                    LlmError::config(
                        "OPENAI_API_KEY contains characters not allowed in an HTTP header",
                    )
                })?;
            value.set_sensitive(true);
            headers.insert(reqwest::header::AUTHORIZATION, value);
        }
        Ok(OpenAiProvider {
            client: build_client(&url)?,
            url,
            headers,
            config,
        })
    }

    /// [`OpenAiConfig::from_env`] then [`OpenAiProvider::new`].
    pub fn from_env(model: impl Into<String>) -> Result<Self, LlmError> {
        Self::new(OpenAiConfig::from_env(model)?)
    }

    /// The configuration in use.
    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    /// The exact JSON body [`Provider::stream`] sends for `request`.
    pub fn request_body(&self, request: &ModelRequest) -> Value {
        body::request_body(request, self.config.max_tokens_field)
    }
}

impl Provider for OpenAiProvider {
    fn name(&self) -> &str {
        "openai"
    }

    fn model(&self) -> &str {
        &self.config.model
    }

    fn stream(&self, mut request: ModelRequest) -> BoxFuture<'_, Result<EventStream, LlmError>> {
        Box::pin(async move {
            if request.model.is_empty() {
                request.model.clone_from(&self.config.model);
            }
            let body = serde_json::to_vec(&self.request_body(&request)).map_err(|e| {
                LlmError::config_caused(format!("cannot encode the request: {e}"), e)
            })?;
            let call = HttpCall {
                client: self.client.clone(),
                url: self.url.clone(),
                headers: self.headers.clone(),
                body: body.into(),
                idle_timeout: self.config.retry.idle_timeout,
                auth_hint: "OPENAI_API_KEY".to_owned(),
                secret: self.config.api_key.clone(),
            };
            let attempt: Attempt = Box::new(move || {
                let call = call.clone();
                Box::pin(async move {
                    let parser = OpenAiParser::new(
                        call.url.clone(),
                        call.auth_hint.clone(),
                        call.secret.clone(),
                    );
                    let sse = call.send().await?;
                    Ok(parse_events(sse, parser))
                })
            });
            Ok(retrying(self.config.retry.clone(), attempt))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_is_required_only_for_openai_itself() {
        let err = OpenAiConfig::from_env_with("gpt-5", |_| None).unwrap_err();
        assert!(err.to_string().contains("OPENAI_API_KEY"), "{err}");
        let local = OpenAiConfig::from_env_with("qwen", |k| {
            (k == "OPENAI_BASE_URL").then(|| "http://localhost:11434/v1".to_owned())
        })
        .unwrap();
        assert_eq!(local.api_key, None);
        assert_eq!(local.max_tokens_field, MaxTokensField::MaxTokens);
        let openai = OpenAiConfig::from_env_with("gpt-5", |k| {
            (k == "OPENAI_API_KEY").then(|| "sk-x".to_owned())
        })
        .unwrap();
        assert_eq!(openai.max_tokens_field, MaxTokensField::MaxCompletionTokens);
        let p = OpenAiProvider::new(local).unwrap();
        assert_eq!(p.url, "http://localhost:11434/v1/chat/completions");
    }
}
