//! What the agent asks a model for, independent of any wire format.

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};
use std::fmt;
use std::str::FromStr;
use whittle_protocol::Message;

/// One model call: the conversation in the canonical model plus settings.
/// Each provider translates it to its own wire format.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelRequest {
    /// The model id as the provider's server knows it (e.g. `claude-sonnet-5-5`);
    /// empty means the provider's configured model ([`crate::Provider::model`]).
    pub model: String,
    /// The system prompt; empty for none.
    pub system: String,
    /// The conversation, oldest first.
    pub messages: Vec<Message>,
    /// Tools the model may call.
    pub tools: Vec<ToolSpec>,
    /// Upper bound on generated tokens.
    pub max_tokens: u32,
    /// Sampling temperature, where the API version still accepts one
    /// (Anthropic `2026-10-21` does not; it is then left out).
    pub temperature: Option<f32>,
    /// Place prompt-cache breakpoints (Anthropic): on the last tool, the
    /// system prompt and the newest messages.
    pub cache: bool,
    /// How many leading messages the next compaction will leave unchanged
    /// (from `whittle_protocol::Compactor::cache_anchor`). With caching on,
    /// the fourth breakpoint goes after them instead of on the previous user
    /// message, so that when compaction rewrites the rest, this prefix is
    /// still read from the cache.
    pub cache_anchor: Option<usize>,
    /// How much the model reasons before it answers; nothing is sent for
    /// what is left at the provider's default.
    pub reasoning: Reasoning,
    /// Whether the reply must, may or must not be a tool call. The embedded
    /// model follows it by constraining its sampling; hosted models are left
    /// to the instructions in the text (nothing is sent), as before.
    pub tool_choice: ToolChoice,
}

/// Whether a reply must, may or must not be a tool call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model decides (the embedded model is still made to look first
    /// when the person asks about the workspace).
    #[default]
    Auto,
    /// No tool call: a summary request, say.
    None,
    /// A tool call.
    Required,
}

impl ModelRequest {
    /// A request with no tools, 8,192 output tokens, default temperature and caching on.
    pub fn new(
        model: impl Into<String>,
        system: impl Into<String>,
        messages: Vec<Message>,
    ) -> Self {
        ModelRequest {
            model: model.into(),
            system: system.into(),
            messages,
            tools: Vec::new(),
            max_tokens: 8192,
            temperature: None,
            cache: true,
            cache_anchor: None,
            reasoning: Reasoning::default(),
            tool_choice: ToolChoice::Auto,
        }
    }
}

pub use whittle_protocol::ToolSpec;

/// Reasoning settings. Both default to sending nothing, so a server that
/// knows neither field still accepts the request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reasoning {
    /// Extended thinking (Anthropic).
    pub thinking: Thinking,
    /// How much effort, thinking included, the model spends: Anthropic's
    /// `output_config.effort`, OpenAI's `reasoning_effort`.
    pub effort: Option<Effort>,
}

/// Anthropic's `thinking` request field.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Thinking {
    /// Not sent: the model's own default.
    #[default]
    ProviderDefault,
    /// `{"type": "disabled"}`.
    Off,
    /// `{"type": "adaptive"}`: the model decides how much to think (current
    /// models; older ones take a budget).
    Adaptive,
    /// `{"type": "enabled", "budget_tokens": N}` for models before adaptive
    /// thinking. The API wants at least 1,024 and less than `max_tokens`;
    /// the budget is lowered to fit `max_tokens`, and left out below 1,024.
    Budget(u32),
}

impl Thinking {
    /// The smallest budget the API accepts.
    pub const MIN_BUDGET: u32 = 1024;
}

/// A thinking setting that is not one of the accepted forms.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "thinking must be \"adaptive\", \"off\", \"default\" or a token budget of at least 1024, not {0:?}"
)]
pub struct BadThinking(pub String);

impl FromStr for Thinking {
    type Err = BadThinking;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "default" => Ok(Thinking::ProviderDefault),
            "off" | "disabled" | "none" => Ok(Thinking::Off),
            "adaptive" | "on" => Ok(Thinking::Adaptive),
            other => match other.parse::<u32>() {
                Ok(n) if n >= Thinking::MIN_BUDGET => Ok(Thinking::Budget(n)),
                _ => Err(BadThinking(s.to_string())),
            },
        }
    }
}

impl<'de> Deserialize<'de> for Thinking {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ThinkingVisitor;
        impl Visitor<'_> for ThinkingVisitor {
            type Value = Thinking;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("\"adaptive\", \"off\", \"default\" or a token budget")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Thinking, E> {
                v.parse().map_err(E::custom)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Thinking, E> {
                v.to_string().parse().map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Thinking, E> {
                v.to_string().parse().map_err(E::custom)
            }
        }
        d.deserialize_any(ThinkingVisitor)
    }
}

/// Effort levels, lowest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Effort {
    /// Fewest tokens.
    Low,
    /// Balanced.
    Medium,
    /// The usual default of the models that know effort.
    High,
    /// Between high and max, for long agentic work.
    XHigh,
    /// No limit.
    Max,
}

impl Effort {
    /// The names accepted in config and flags, as sent on the wire.
    pub const NAMES: [&'static str; 5] = ["low", "medium", "high", "xhigh", "max"];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Effort::Low => "low",
            Effort::Medium => "medium",
            Effort::High => "high",
            Effort::XHigh => "xhigh",
            Effort::Max => "max",
        }
    }
}

impl fmt::Display for Effort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An effort name that is not one of [`Effort::NAMES`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("effort must be one of low, medium, high, xhigh, max, not {0:?}")]
pub struct BadEffort(pub String);

impl FromStr for Effort {
    type Err = BadEffort;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "low" => Ok(Effort::Low),
            "medium" => Ok(Effort::Medium),
            "high" => Ok(Effort::High),
            "xhigh" => Ok(Effort::XHigh),
            "max" => Ok(Effort::Max),
            _ => Err(BadEffort(s.to_string())),
        }
    }
}

impl<'de> Deserialize<'de> for Effort {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        name.parse().map_err(de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thinking_and_effort_parse_from_names_and_numbers() {
        assert_eq!("adaptive".parse(), Ok(Thinking::Adaptive));
        assert_eq!(" Off ".parse(), Ok(Thinking::Off));
        assert_eq!("default".parse(), Ok(Thinking::ProviderDefault));
        assert_eq!("16000".parse(), Ok(Thinking::Budget(16_000)));
        for bad in ["1023", "-5", "lots", ""] {
            assert!(bad.parse::<Thinking>().is_err(), "{bad}");
        }
        for name in Effort::NAMES {
            assert_eq!(name.parse::<Effort>().unwrap().as_str(), name);
        }
        assert!("extreme".parse::<Effort>().is_err());
    }
}
