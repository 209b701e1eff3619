//! What a policy's cost is made of: a bar of one colour says which policy
//! is dearer, not why; parts say whether cache reads, cache writes or
//! summaries are what a compaction policy changed.

use serde::Serialize;
use whittle_llm::Prices;
use whittle_replay::ReplayReport;

/// One part of a request's price.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CostPart {
    /// Input neither read from nor written to the cache.
    Uncached,
    /// Input read from the cache.
    CacheRead,
    /// Input written to the cache (5 minutes and 1 hour).
    CacheWrite,
    /// Output: the recorded answers and the summaries.
    Output,
    /// Input sent to the summarizer.
    SummaryInput,
}

impl CostPart {
    /// Every part, in the order the bars stack them.
    pub const ALL: [CostPart; 5] = [
        CostPart::CacheRead,
        CostPart::CacheWrite,
        CostPart::Uncached,
        CostPart::Output,
        CostPart::SummaryInput,
    ];

    /// What the legend calls it.
    pub fn label(self) -> &'static str {
        match self {
            CostPart::Uncached => "uncached input",
            CostPart::CacheRead => "cache reads",
            CostPart::CacheWrite => "cache writes",
            CostPart::Output => "output",
            CostPart::SummaryInput => "summaries' input",
        }
    }

    /// Its colour, as `#rrggbb`: apart in hue and lightness, so that they
    /// stay apart for most colour-blind readers too.
    pub fn colour(self) -> &'static str {
        match self {
            CostPart::CacheRead => "#4e79a7",
            CostPart::CacheWrite => "#f28e2b",
            CostPart::Uncached => "#e15759",
            CostPart::Output => "#59a14f",
            CostPart::SummaryInput => "#b07aa1",
        }
    }

    /// A name for markup (`cache-read`).
    pub fn key(self) -> &'static str {
        match self {
            CostPart::Uncached => "uncached",
            CostPart::CacheRead => "cache-read",
            CostPart::CacheWrite => "cache-write",
            CostPart::Output => "output",
            CostPart::SummaryInput => "summary-input",
        }
    }
}

/// A key of the cost legend.
#[derive(Clone, Debug, Serialize)]
pub struct LegendKey {
    /// The part's name.
    pub label: String,
    /// Its colour, `#rrggbb`.
    pub colour: String,
    /// Its name in markup.
    pub key: String,
}

/// The legend of the cost bars, in the bars' order.
pub fn cost_legend() -> Vec<LegendKey> {
    CostPart::ALL
        .iter()
        .map(|p| LegendKey {
            label: p.label().to_owned(),
            colour: p.colour().to_owned(),
            key: p.key().to_owned(),
        })
        .collect()
}

/// `report`'s cost in dollars per part of [`CostPart::ALL`], summing to
/// its cost: the summarizer's input is what the report's own counts leave.
pub fn cost_parts(report: &ReplayReport, prices: &Prices) -> [f64; 5] {
    let per = |tokens: u64, price: f64| tokens as f64 * price / 1_000_000.0;
    let writes_5m = report
        .cache_write_tokens
        .saturating_sub(report.cache_write_1h_tokens);
    let mut parts = [0.0; 5];
    for (k, part) in CostPart::ALL.iter().enumerate() {
        parts[k] = match part {
            CostPart::Uncached => per(report.uncached_tokens, prices.input),
            CostPart::CacheRead => per(
                report.cache_read_tokens,
                prices.input * prices.cache_read_multiplier,
            ),
            CostPart::CacheWrite => {
                per(writes_5m, prices.input * prices.cache_write_multiplier)
                    + per(
                        report.cache_write_1h_tokens,
                        prices.input * prices.cache_write_1h_multiplier,
                    )
            }
            CostPart::Output => per(report.output_tokens, prices.output),
            CostPart::SummaryInput => 0.0,
        };
    }
    let counted: f64 = parts.iter().sum();
    if let Some(k) = CostPart::ALL
        .iter()
        .position(|p| *p == CostPart::SummaryInput)
    {
        parts[k] = (report.cost_usd - counted).max(0.0);
    }
    parts
}
