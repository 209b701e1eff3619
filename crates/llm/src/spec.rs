//! `--model PROVIDER:NAME`: which backend and which model.

use crate::error::LlmError;
use std::fmt;
use std::str::FromStr;

/// The backends whittle can talk to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProviderKind {
    /// The Anthropic Messages API.
    Anthropic,
    /// An OpenAI-compatible chat-completions server.
    OpenAi,
    /// The embedded local engine.
    Local,
}

impl ProviderKind {
    /// The spelling used in specs and config.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::OpenAi => "openai",
            ProviderKind::Local => "local",
        }
    }
}

/// A parsed model spec. The CLI builds the provider from it; for
/// [`ProviderKind::Local`] the name may be empty (the engine's default) or a
/// model file.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ModelSpec {
    /// Which backend.
    pub provider: ProviderKind,
    /// The model id (or, for local, a name or path), as written.
    pub model: String,
}

impl FromStr for ModelSpec {
    type Err = LlmError;

    /// `anthropic:NAME`, `openai:NAME` (the name may contain more colons, as
    /// Ollama tags do), `local[:NAME]`, or a bare name whose provider is
    /// guessed from its prefix (`claude-` is Anthropic, `gpt-` OpenAI).
    fn from_str(spec: &str) -> Result<Self, LlmError> {
        let spec = spec.trim();
        let (head, rest) = match spec.split_once(':') {
            Some((h, r)) => (h, Some(r)),
            None => (spec, None),
        };
        let provider = match head {
            "anthropic" => Some(ProviderKind::Anthropic),
            "openai" => Some(ProviderKind::OpenAi),
            "local" => Some(ProviderKind::Local),
            _ => None,
        };
        match (provider, rest) {
            (Some(ProviderKind::Local), rest) => Ok(ModelSpec {
                provider: ProviderKind::Local,
                model: rest.unwrap_or("").trim().to_owned(),
            }),
            (Some(provider), Some(name)) if !name.trim().is_empty() => Ok(ModelSpec {
                provider,
                model: name.trim().to_owned(),
            }),
            (Some(provider), _) => Err(LlmError::config(format!(
                "model spec `{spec}` names no model: write {}:MODEL",
                provider.as_str()
            ))),
            (None, _) if spec.starts_with("claude-") => Ok(ModelSpec {
                provider: ProviderKind::Anthropic,
                model: spec.to_owned(),
            }),
            (None, _) if spec.starts_with("gpt-") => Ok(ModelSpec {
                provider: ProviderKind::OpenAi,
                model: spec.to_owned(),
            }),
            (None, _) if spec.is_empty() => Err(LlmError::config(
                "empty model spec: write anthropic:MODEL, openai:MODEL or local",
            )),
            (None, _) => Err(LlmError::config(format!(
                "cannot tell which provider serves `{spec}`: write anthropic:{spec}, openai:{spec} or local:{spec}"
            ))),
        }
    }
}

impl fmt::Display for ModelSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.provider.as_str(), self.model)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<ModelSpec, LlmError> {
        s.parse()
    }

    #[test]
    fn explicit_providers() {
        let s = parse("anthropic:claude-opus-5-5").unwrap();
        assert_eq!(
            (s.provider, s.model.as_str()),
            (ProviderKind::Anthropic, "claude-opus-5-5")
        );
        let s = parse("openai:qwen2.5-coder:7b").unwrap();
        assert_eq!(
            (s.provider, s.model.as_str()),
            (ProviderKind::OpenAi, "qwen2.5-coder:7b")
        );
        let s = parse("local").unwrap();
        assert_eq!((s.provider, s.model.as_str()), (ProviderKind::Local, ""));
        let s = parse("local:/models/x.gguf").unwrap();
        assert_eq!(s.model, "/models/x.gguf");
        assert_eq!(s.to_string(), "local:/models/x.gguf");
    }

    #[test]
    fn bare_names_are_guessed_by_prefix() {
        assert_eq!(
            parse("claude-sonnet-5-5").unwrap().provider,
            ProviderKind::Anthropic
        );
        assert_eq!(parse("gpt-5").unwrap().provider, ProviderKind::OpenAi);
    }

    #[test]
    fn unclear_specs_say_what_to_write() {
        for bad in ["llama3.1:8b", "", "anthropic:", "openai:  ", "mistral"] {
            let err = parse(bad).unwrap_err().to_string();
            assert!(err.contains(':'), "{err}");
            assert!(!err.contains('\n'));
        }
        assert!(
            parse("mistral")
                .unwrap_err()
                .to_string()
                .contains("openai:mistral")
        );
    }
}
