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
    /// Cache writes that live 5 minutes (the default), as a multiple of `input`.
    pub cache_write_multiplier: f64,
    /// Cache writes that live an hour (`"ttl": "1h"`), as a multiple of `input`.
    pub cache_write_1h_multiplier: f64,
    /// Cache reads, as a multiple of `input`.
    pub cache_read_multiplier: f64,
}

impl Default for Prices {
    fn default() -> Self {
        Prices {
            input: 3.0,
            output: 15.0,
            cache_write_multiplier: 1.25,
            cache_write_1h_multiplier: 2.0,
            cache_read_multiplier: 0.1,
        }
    }
}

impl Prices {
    /// Dollars for a request's (or many requests') tokens, billed as the
    /// API bills them: uncached input, cache reads, 5-minute and 1-hour
    /// cache writes, and output.
    pub fn cost_usd(
        &self,
        uncached: u64,
        cache_read: u64,
        cache_write_5m: u64,
        cache_write_1h: u64,
        output: u64,
    ) -> f64 {
        let per = |tokens: u64, price: f64| tokens as f64 * price / 1_000_000.0;
        per(uncached, self.input)
            + per(cache_read, self.input * self.cache_read_multiplier)
            + per(cache_write_5m, self.input * self.cache_write_multiplier)
            + per(cache_write_1h, self.input * self.cache_write_1h_multiplier)
            + per(output, self.output)
    }

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

    #[test]
    fn an_hour_in_the_cache_costs_more_to_write_than_five_minutes() {
        let p = Prices::default();
        let million = 1_000_000;
        assert_eq!(p.cost_usd(million, 0, 0, 0, 0), 3.0);
        assert_eq!(p.cost_usd(0, million, 0, 0, 0), 3.0 * 0.1);
        assert_eq!(p.cost_usd(0, 0, million, 0, 0), 3.0 * 1.25);
        assert_eq!(p.cost_usd(0, 0, 0, million, 0), 3.0 * 2.0);
        assert_eq!(p.cost_usd(0, 0, 0, 0, million), 15.0);
        let old: Prices = serde_json::from_str(r#"{"input": 1.0}"#).unwrap();
        assert_eq!(old.cache_write_1h_multiplier, 2.0);
    }
}
