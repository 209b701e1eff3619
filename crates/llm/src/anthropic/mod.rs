//! The Anthropic Messages API, streamed.

mod body;
mod parse;

use crate::error::LlmError;
use crate::event::EventStream;
use crate::http::{HttpCall, build_client, parse_events};
use crate::provider::{BoxFuture, Provider};
use crate::request::ModelRequest;
use crate::retry::{Attempt, RetryPolicy, retrying};
use crate::secret::Secret;
use parse::AnthropicParser;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

/// The API version sent by default. It rejects sampling parameters, so
/// `temperature` is only sent under older versions.
pub const ANTHROPIC_VERSION: &str = "2026-10-21";

/// Where the API lives unless `ANTHROPIC_BASE_URL` says otherwise.
pub const DEFAULT_ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";

/// How requests authenticate.
#[derive(Clone, Debug, PartialEq)]
pub enum AnthropicAuth {
    /// `x-api-key`, from `ANTHROPIC_API_KEY`.
    ApiKey(Secret),
    /// `Authorization: Bearer`, from `ANTHROPIC_AUTH_TOKEN` (gateways, OAuth).
    Bearer(Secret),
}

impl AnthropicAuth {
    fn secret(&self) -> &Secret {
        match self {
            AnthropicAuth::ApiKey(s) | AnthropicAuth::Bearer(s) => s,
        }
    }

    fn hint(&self) -> &'static str {
        match self {
            AnthropicAuth::ApiKey(_) => "ANTHROPIC_API_KEY",
            AnthropicAuth::Bearer(_) => "ANTHROPIC_AUTH_TOKEN",
        }
    }
}

/// Everything an [`AnthropicProvider`] needs; build it from the environment
/// with [`AnthropicConfig::from_env`], then adjust fields from config files.
#[derive(Clone, Debug, PartialEq)]
pub struct AnthropicConfig {
    /// The model requests default to.
    pub model: String,
    /// Scheme, host and optional path prefix; `/v1/messages` is appended.
    pub base_url: String,
    /// The credential.
    pub auth: AnthropicAuth,
    /// The `anthropic-version` header, e.g. `2023-06-01` for older gateways.
    pub version: String,
    /// Retries and the idle timeout.
    pub retry: RetryPolicy,
}

impl AnthropicConfig {
    /// A configuration for the public API with `auth`.
    pub fn new(model: impl Into<String>, auth: AnthropicAuth) -> Self {
        AnthropicConfig {
            model: model.into(),
            base_url: DEFAULT_ANTHROPIC_BASE_URL.to_owned(),
            auth,
            version: ANTHROPIC_VERSION.to_owned(),
            retry: RetryPolicy::default(),
        }
    }

    /// Reads `ANTHROPIC_API_KEY` (or else `ANTHROPIC_AUTH_TOKEN`) and
    /// `ANTHROPIC_BASE_URL` from the process environment.
    pub fn from_env(model: impl Into<String>) -> Result<Self, LlmError> {
        Self::from_env_with(model, |k| std::env::var(k).ok())
    }

    /// [`AnthropicConfig::from_env`] with the variables looked up by `env`,
    /// so callers and tests need not touch the process environment.
    pub fn from_env_with(
        model: impl Into<String>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, LlmError> {
        let get = |k: &str| env(k).filter(|v| !v.trim().is_empty());
        let auth = if let Some(key) = get("ANTHROPIC_API_KEY") {
            AnthropicAuth::ApiKey(Secret::new(key.trim()))
        } else if let Some(token) = get("ANTHROPIC_AUTH_TOKEN") {
            AnthropicAuth::Bearer(Secret::new(token.trim()))
        } else {
            return Err(LlmError::MissingApiKey {
                provider: "anthropic".into(),
                var: "ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN)".into(),
            });
        };
        let mut config = AnthropicConfig::new(model, auth);
        if let Some(base) = get("ANTHROPIC_BASE_URL") {
            config.base_url = base.trim().to_owned();
        }
        Ok(config)
    }
}

/// Checks that `base` is an http(s) URL and returns it without a trailing slash.
pub(crate) fn checked_base_url(base: &str, var: &str) -> Result<String, LlmError> {
    let parsed = reqwest::Url::parse(base).map_err(|e| {
        LlmError::config_caused(format!("{var} is not a valid URL ({e}): {base}"), e)
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(LlmError::config(format!(
            "{var} must start with http:// or https://: {base}"
        )));
    }
    Ok(base.trim_end_matches('/').to_owned())
}

/// A [`Provider`] for the Anthropic Messages API (and gateways that speak it).
#[derive(Debug)]
pub struct AnthropicProvider {
    config: AnthropicConfig,
    client: reqwest::Client,
    url: String,
    headers: HeaderMap,
}

impl AnthropicProvider {
    /// A provider for `config`; fails on an unusable base URL or credential.
    pub fn new(config: AnthropicConfig) -> Result<Self, LlmError> {
        let url = format!(
            "{}/v1/messages",
            checked_base_url(&config.base_url, "ANTHROPIC_BASE_URL")?
        );
        let mut headers = HeaderMap::new();
        let invalid = || {
            LlmError::config(format!(
                "{} contains characters not allowed in an HTTP header",
                config.auth.hint()
            ))
        };
        let mut credential = match &config.auth {
            AnthropicAuth::ApiKey(key) => HeaderValue::from_str(key.expose()),
            AnthropicAuth::Bearer(token) => {
                HeaderValue::from_str(&format!("Bearer {}", token.expose()))
            }
        }
        .map_err(|_| invalid())?;
        credential.set_sensitive(true);
        let credential_header = match &config.auth {
            AnthropicAuth::ApiKey(_) => HeaderName::from_static("x-api-key"),
            AnthropicAuth::Bearer(_) => reqwest::header::AUTHORIZATION,
        };
        headers.insert(credential_header, credential);
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_str(&config.version).map_err(|_| {
                LlmError::config(format!("bad anthropic-version: {}", config.version))
            })?,
        );
        headers.insert(
            reqwest::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        Ok(AnthropicProvider {
            client: build_client(&url)?,
            url,
            headers,
            config,
        })
    }

    /// [`AnthropicConfig::from_env`] then [`AnthropicProvider::new`].
    pub fn from_env(model: impl Into<String>) -> Result<Self, LlmError> {
        Self::new(AnthropicConfig::from_env(model)?)
    }

    /// The configuration in use.
    pub fn config(&self) -> &AnthropicConfig {
        &self.config
    }

    /// The exact JSON body [`Provider::stream`] sends for `request`.
    pub fn request_body(&self, request: &ModelRequest) -> Value {
        body::request_body(request, &self.config.version)
    }
}

impl Provider for AnthropicProvider {
    fn name(&self) -> &str {
        "anthropic"
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
                auth_hint: self.config.auth.hint().to_owned(),
                secret: Some(self.config.auth.secret().clone()),
            };
            let attempt: Attempt = Box::new(move || {
                let call = call.clone();
                Box::pin(async move {
                    let parser = AnthropicParser::new(
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
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn missing_key_names_both_variables() {
        let err =
            AnthropicConfig::from_env_with("m", env(&[("ANTHROPIC_API_KEY", "  ")])).unwrap_err();
        let line = err.to_string();
        assert!(line.contains("ANTHROPIC_API_KEY"), "{line}");
        assert!(line.contains("ANTHROPIC_AUTH_TOKEN"), "{line}");
    }

    #[test]
    fn key_wins_over_token_and_base_url_is_read() {
        let c = AnthropicConfig::from_env_with(
            "m",
            env(&[
                ("ANTHROPIC_API_KEY", "k"),
                ("ANTHROPIC_AUTH_TOKEN", "t"),
                ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/"),
            ]),
        )
        .unwrap();
        assert_eq!(c.auth, AnthropicAuth::ApiKey(Secret::new("k")));
        assert_eq!(c.base_url, "http://127.0.0.1:9/");
        let p = AnthropicProvider::new(c).unwrap();
        assert_eq!(p.url, "http://127.0.0.1:9/v1/messages");
        let c = AnthropicConfig::from_env_with("m", env(&[("ANTHROPIC_AUTH_TOKEN", "t")])).unwrap();
        assert_eq!(c.auth, AnthropicAuth::Bearer(Secret::new("t")));
    }

    #[test]
    fn bad_base_urls_and_keys_are_config_errors() {
        let mut c = AnthropicConfig::new("m", AnthropicAuth::ApiKey(Secret::new("k")));
        c.base_url = "localhost:8080".into();
        assert!(matches!(
            AnthropicProvider::new(c.clone()),
            Err(LlmError::Config { .. })
        ));
        c.base_url = "not a url".into();
        let err = AnthropicProvider::new(c.clone()).unwrap_err().to_string();
        assert!(err.contains("ANTHROPIC_BASE_URL"), "{err}");
        c.base_url = DEFAULT_ANTHROPIC_BASE_URL.into();
        c.auth = AnthropicAuth::ApiKey(Secret::new("bad\nkey-with-newline"));
        let err = AnthropicProvider::new(c).unwrap_err().to_string();
        assert!(!err.contains("bad\nkey"), "{err}");
    }

    #[test]
    fn debug_output_hides_the_key() {
        let c = AnthropicConfig::new(
            "m",
            AnthropicAuth::ApiKey(Secret::new("sk-ant-do-not-print")),
        );
        let p = AnthropicProvider::new(c).unwrap();
        let shown = format!("{p:?}");
        assert!(!shown.contains("sk-ant-do-not-print"), "{shown}");
    }
}
