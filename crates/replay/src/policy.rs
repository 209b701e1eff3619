//! What replay compares and under which assumptions: the compaction policies,
//! the window, the prices, and how characters become tokens.

use whittle_context::{Limits, TokenBudget};
use whittle_llm::Prices;

/// A compaction policy to compare.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Policy {
    /// No compaction at all: shows where the window would overflow.
    None,
    /// The seed's character limits (`Limits::teaching`).
    Teaching,
    /// whittle's token policy for the window (`Limits::tokens`).
    Default,
    /// Observation masking: every turn, all but the newest
    /// [`MASK_KEEP_RESULTS`] tool results become saved placeholders; never summarizes.
    Mask,
}

/// Results the `mask` policy keeps whole, as in the observation-masking baseline.
pub const MASK_KEEP_RESULTS: usize = 10;

impl Policy {
    /// Every policy, in table order.
    pub const ALL: [Policy; 4] = [
        Policy::None,
        Policy::Teaching,
        Policy::Default,
        Policy::Mask,
    ];

    /// The policy's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Policy::None => "none",
            Policy::Teaching => "teaching",
            Policy::Default => "default",
            Policy::Mask => "mask",
        }
    }

    /// Parses a name as printed by [`Policy::name`].
    pub fn parse(name: &str) -> Option<Policy> {
        Policy::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// How to replay.
#[derive(Clone, Debug)]
pub struct ReplayConfig {
    /// The model's context window in tokens.
    pub window_tokens: u64,
    /// Tokens kept free for the answer (the default policy's reserve).
    pub reserved_output_tokens: u64,
    /// The price table.
    pub prices: Prices,
    /// Characters per token for every count in the replay.
    pub chars_per_token: f64,
    /// Prefixes shorter than this are never cached.
    pub min_cacheable_tokens: u64,
    /// How many messages before a breakpoint a cached prefix is looked up.
    pub cache_lookback: usize,
    /// The `default` policy's limits; `None` derives them from the window.
    pub default_limits: Option<Limits>,
}

impl Default for ReplayConfig {
    fn default() -> Self {
        ReplayConfig {
            window_tokens: 200_000,
            reserved_output_tokens: 8_192,
            prices: Prices::default(),
            chars_per_token: 4.0,
            min_cacheable_tokens: 1_024,
            cache_lookback: 20,
            default_limits: None,
        }
    }
}

impl ReplayConfig {
    /// A config for a window, reserving an eighth of it (at most 32k) for answers.
    pub fn for_window(window_tokens: u64) -> Self {
        ReplayConfig {
            window_tokens,
            reserved_output_tokens: (window_tokens / 8).min(32_000),
            ..ReplayConfig::default()
        }
    }

    /// The limits the `default` policy uses.
    pub fn default_limits(&self) -> Limits {
        self.default_limits.clone().unwrap_or_else(|| {
            Limits::tokens(TokenBudget::new(
                self.window_tokens,
                self.reserved_output_tokens,
            ))
        })
    }

    /// Tokens of `chars` characters, as every count in the replay is made.
    pub(crate) fn tokens(&self, chars: usize) -> u64 {
        (chars as f64 / self.chars_per_token).ceil() as u64
    }
}
