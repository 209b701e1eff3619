//! Context windows and output limits of known models, which the token
//! limits of compaction are relative to.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The model used when nothing else is configured.
pub const DEFAULT_MODEL: &str = "claude-sonnet-5-5";

/// What the harness must know about a model to budget its context.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelFacts {
    /// Tokens of input plus output the model can attend to.
    pub context_window: u64,
    /// The most tokens one response may have.
    pub max_output_tokens: u64,
}

/// Assumed for ids the table does not know: small enough that an unknown
/// local model is not overfilled, and overridable in config.
pub const UNKNOWN_MODEL_FACTS: ModelFacts = ModelFacts {
    context_window: 128_000,
    max_output_tokens: 8_192,
};

const fn facts(context_window: u64, max_output_tokens: u64) -> ModelFacts {
    ModelFacts {
        context_window,
        max_output_tokens,
    }
}

/// Id prefixes, longest match wins, so dated snapshots
/// (`claude-sonnet-4-5-20250929`) inherit their family's facts.
const TABLE: &[(&str, ModelFacts)] = &[
    // Current Claude models: 1M context, 128K output.
    ("claude-opus-5-5", facts(1_000_000, 128_000)),
    ("claude-sonnet-5-5", facts(1_000_000, 128_000)),
    ("claude-haiku-5-5", facts(1_000_000, 128_000)),
    ("claude-fable-5-2", facts(1_000_000, 128_000)),
    ("claude-opus-5", facts(1_000_000, 128_000)),
    ("claude-sonnet-5", facts(1_000_000, 128_000)),
    ("claude-haiku-5", facts(1_000_000, 128_000)),
    ("claude-fable-5", facts(1_000_000, 128_000)),
    // Claude 4.x: 200K context.
    ("claude-opus-4", facts(200_000, 32_000)),
    ("claude-opus-4-5", facts(200_000, 64_000)),
    ("claude-sonnet-4", facts(200_000, 64_000)),
    ("claude-haiku-4", facts(200_000, 64_000)),
    ("claude-3-7-sonnet", facts(200_000, 64_000)),
    ("claude-3-5-haiku", facts(200_000, 8_192)),
    // OpenAI.
    ("gpt-5", facts(400_000, 128_000)),
    ("gpt-4.1", facts(1_047_576, 32_768)),
    ("gpt-4o", facts(128_000, 16_384)),
    ("o3", facts(200_000, 100_000)),
    ("o4-mini", facts(200_000, 100_000)),
];

/// The facts for `model`: the longest known prefix of its id (ignoring a
/// `vendor/` routing prefix such as `anthropic/`), else [`UNKNOWN_MODEL_FACTS`].
pub fn model_facts(model: &str) -> ModelFacts {
    let id = model.rsplit('/').next().unwrap_or(model);
    TABLE
        .iter()
        .filter(|(prefix, _)| id.starts_with(prefix))
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(_, f)| *f)
        .unwrap_or(UNKNOWN_MODEL_FACTS)
}

/// A config file's correction of a model's facts; absent fields keep the table's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelFactsOverride {
    /// Replaces the context window.
    pub context_window: Option<u64>,
    /// Replaces the output limit.
    pub max_output_tokens: Option<u64>,
}

/// [`model_facts`] with `overrides` (keyed by exact model id) applied, so a
/// user can describe a local model or a newer window.
pub fn model_facts_with(
    model: &str,
    overrides: &HashMap<String, ModelFactsOverride>,
) -> ModelFacts {
    let mut f = model_facts(model);
    if let Some(o) = overrides.get(model) {
        f.context_window = o.context_window.unwrap_or(f.context_window);
        f.max_output_tokens = o.max_output_tokens.unwrap_or(f.max_output_tokens);
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn current_claude_models_have_a_million_tokens() {
        for id in [
            "claude-opus-5-5",
            "claude-sonnet-5-5",
            "claude-haiku-5-5",
            "claude-fable-5-2",
            DEFAULT_MODEL,
        ] {
            assert_eq!(model_facts(id), facts(1_000_000, 128_000), "{id}");
        }
    }

    #[test]
    fn older_and_dated_ids_match_their_family() {
        assert_eq!(
            model_facts("claude-sonnet-4-5-20250929").context_window,
            200_000
        );
        assert_eq!(model_facts("claude-opus-4-1").max_output_tokens, 32_000);
        assert_eq!(
            model_facts("claude-opus-4-5-20251101").max_output_tokens,
            64_000
        );
        assert_eq!(
            model_facts("anthropic/claude-haiku-4-5").context_window,
            200_000
        );
        assert_eq!(model_facts("gpt-5-mini").context_window, 400_000);
        assert_eq!(model_facts("gpt-4o-mini").max_output_tokens, 16_384);
    }

    #[test]
    fn unknown_ids_get_the_default_and_overrides_win() {
        assert_eq!(model_facts("qwen2.5-coder:7b"), UNKNOWN_MODEL_FACTS);
        let overrides = HashMap::from([(
            "qwen2.5-coder:7b".to_owned(),
            ModelFactsOverride {
                context_window: Some(32_768),
                max_output_tokens: None,
            },
        )]);
        let f = model_facts_with("qwen2.5-coder:7b", &overrides);
        assert_eq!(f.context_window, 32_768);
        assert_eq!(f.max_output_tokens, UNKNOWN_MODEL_FACTS.max_output_tokens);
        assert_eq!(
            model_facts_with("gpt-4o", &overrides),
            model_facts("gpt-4o")
        );
    }
}
