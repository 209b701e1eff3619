//! What tokens cost, next to the model facts: `/cost`, `-p --output-format
//! json` and `whittle replay` all estimate with this one table, so the
//! numbers a person compares agree.

use crate::spec::ProviderKind;
use serde::{Deserialize, Serialize};

/// Prices in dollars per million tokens.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Prices {
    /// Uncached input.
    pub input: f64,
    /// Output.
    pub output: f64,
    /// Cache writes, as a multiple of `input`.
    pub cache_write_multiplier: f64,
    /// Cache reads, as a multiple of `input`.
    pub cache_read_multiplier: f64,
}

impl Default for Prices {
    fn default() -> Self {
        Prices {
            input: 3.0,
            output: 15.0,
            cache_write_multiplier: 1.25,
            cache_read_multiplier: 0.1,
        }
    }
}

impl Prices {
    /// The default table, except that the local model costs nothing: it runs
    /// on this machine.
    pub fn for_provider(provider: ProviderKind) -> Prices {
        match provider {
            ProviderKind::Local => Prices {
                input: 0.0,
                output: 0.0,
                ..Prices::default()
            },
            ProviderKind::Anthropic | ProviderKind::OpenAi => Prices::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_local_model_costs_nothing() {
        let local = Prices::for_provider(ProviderKind::Local);
        assert_eq!((local.input, local.output), (0.0, 0.0));
        for kind in [ProviderKind::Anthropic, ProviderKind::OpenAi] {
            let hosted = Prices::for_provider(kind);
            assert!(hosted.input > 0.0 && hosted.output > hosted.input);
        }
    }
}
